"""``python -m minitf.server --cluster cluster.json --job worker --task 0``: one cluster task.

Book section: "Multiple Devices Across Multiple Servers" (a task on a real machine).

``--cluster`` is a JSON file (or inline JSON) mapping job names to lists of "host:port"
addresses.  The server binds the address of its own entry (port 0: a free port), prints
``minitf-server <job> <task> listening on <host:port>`` on one stdout line, and serves until
Ctrl-C / SIGTERM.  ``--watch-stdin``: also exit when stdin closes (LocalCluster's children use
it so that they never outlive their parent).
"""

import argparse
import json
import os
import signal
import sys
import threading


def _load_cluster(text):
    if os.path.exists(text):
        with open(text) as f:
            text = f.read()
    spec = json.loads(text)
    if not isinstance(spec, dict):
        raise SystemExit("--cluster must be a JSON object mapping job names to address lists")
    return spec


def _parse(argv):
    parser = argparse.ArgumentParser(prog="python -m minitf.server", description=__doc__)
    parser.add_argument("--cluster", required=True, help="cluster JSON file or inline JSON")
    parser.add_argument("--job", required=True)
    parser.add_argument("--task", type=int, default=0)
    parser.add_argument("--cpu-only", action="store_true", help="no (emulated) GPUs")
    parser.add_argument(
        "--inter-op-threads", type=int, default=0, help="the worker's inter-op pool (0: default)"
    )
    parser.add_argument(
        "--intra-op-threads", type=int, default=0, help="the worker's intra-op pool (0: default)"
    )
    parser.add_argument(
        "--watch-stdin", action="store_true", help="exit when stdin is closed (the parent died)"
    )
    parser.add_argument(
        "--parent-pid", type=int, default=0, help="die with this process (Linux: PR_SET_PDEATHSIG)"
    )
    return parser.parse_args(argv)


def main(argv=None):
    args = _parse(argv)
    if args.parent_pid:
        # Set here, in the child, rather than in a preexec_fn: that keeps the parent's spawn
        # free of Python code between fork and exec, which gRPC's threads make unsafe.
        from minitf.distributed.local_cluster import die_with_parent

        die_with_parent()
        if os.getppid() != args.parent_pid:  # the parent died before we could ask
            os._exit(1)
    if args.cpu_only:
        os.environ["MINITF_EMULATED_GPUS"] = "0"
    import minitf as tf

    if args.cpu_only:
        tf.config.emulate_gpus(0)
    from minitf.distributed.server import Server

    stop = threading.Event()
    config = tf.ConfigProto(
        inter_op_parallelism_threads=args.inter_op_threads,
        intra_op_parallelism_threads=args.intra_op_threads,
    )
    server = Server(
        _load_cluster(args.cluster), job_name=args.job, task_index=args.task, config=config
    )
    signal.signal(signal.SIGTERM, lambda *a: stop.set())
    signal.signal(signal.SIGINT, lambda *a: stop.set())
    if args.watch_stdin:

        def watch():
            try:
                while sys.stdin.buffer.read(1):
                    pass
            except Exception:  # noqa: BLE001
                pass
            os._exit(0)

        threading.Thread(target=watch, daemon=True, name="minitf-stdin-watchdog").start()
    sys.stdout.write(
        "minitf-server %s %d listening on %s\n" % (args.job, args.task, server.bound_address)
    )
    sys.stdout.flush()
    try:
        while not stop.wait(0.5):
            pass
    finally:
        server.stop(grace=0.5)
    return 0


if __name__ == "__main__":
    sys.exit(main())
