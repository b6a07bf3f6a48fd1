"""One replica of between-graph data parallelism: the client process of one worker task.

Run by tests/test_data_parallel.py and bench/bench_parallel_training.py, one process per
worker, each against its own task of a LocalCluster (``--target grpc://...``; ``""``: a local
session, the single-process reference).  Every replica builds the same graph under
``replica_device_setter`` and trains in a ``MonitoredTrainingSession`` (the chief, task 0,
initialises; the others wait for it):

* ``--mode async``: a plain optimizer; each run applies this replica's gradients at once; a
  ``StalenessHook`` records each update's staleness;
* ``--mode sync``: the optimizer wrapped in ``SyncReplicasOptimizer(replicas_to_aggregate,
  total_num_replicas=--workers)`` and its session hook.

Deterministic data: at its k-th run, replica i of W takes rows [(k W + i) b, (k W + i + 1) b)
(mod the training set) of the shuffled set: W replicas of batch b see, run by run, what one
replica of batch W b sees.  Each replica prints "ready" once its session exists (with
``--barrier`` it then waits for a line on stdin, so that all start together), the chief prints
"step N" per run; the results go to ``--out`` (an .npz).
"""

import argparse
import os
import sys
import time

import numpy as np
from dp_data import HIDDEN, dataset, rows

import minitf as tf
from minitf.train.staleness import StalenessHook


def parse(argv):
    p = argparse.ArgumentParser()
    p.add_argument("--target", default="")
    p.add_argument("--task", type=int, default=0)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--ps", type=int, default=1)
    p.add_argument("--mode", choices=["async", "sync"], default="async")
    p.add_argument("--aggregate", type=int, default=0, help="replicas_to_aggregate (0: all)")
    p.add_argument("--model", choices=["digits", "mlp784"], default="digits")
    p.add_argument("--steps", type=int, default=20, help="runs of this replica")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--record-params", action="store_true")
    p.add_argument("--trace-steps", type=int, default=0, help="last runs traced (FULL_TRACE)")
    p.add_argument("--until-step", type=int, default=0, help="sync: run until this step")
    p.add_argument("--run-timeout-ms", type=int, default=60000)
    p.add_argument("--barrier", action="store_true", help="train once stdin gives a line")
    p.add_argument("--ckpt", default=None)
    p.add_argument("--out", required=True)
    return p.parse_args(argv)


def build(args, n_in):
    """The replica's graph; returns (x, y, train_op, global step, accuracy, optimizer)."""
    setter = None
    if args.target:
        setter = tf.train.replica_device_setter(
            ps_tasks=args.ps, worker_device="/job:worker/task:%d" % args.task
        )
    sizes = HIDDEN[args.model]
    with tf.device(setter):
        gs = tf.train.get_or_create_global_step()
        x = tf.placeholder(tf.float32, [None, n_in], name="x")
        y = tf.placeholder(tf.int64, [None], name="y")
        h = x
        for k, n in enumerate(sizes):
            init = tf.glorot_uniform_initializer(seed=k + 1)
            h = tf.layers.dense(h, n, tf.nn.relu, kernel_initializer=init, name="hidden%d" % k)
        init = tf.glorot_uniform_initializer(seed=9)
        logits = tf.layers.dense(h, 10, kernel_initializer=init, name="logits")
        loss = tf.reduce_mean(
            tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits)
        )
        accuracy = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(logits, 1), y), tf.float32))
        opt = tf.train.GradientDescentOptimizer(args.lr)
        if args.mode == "sync":
            opt = tf.train.SyncReplicasOptimizer(
                opt, args.aggregate or args.workers, total_num_replicas=args.workers
            )
        train = opt.minimize(loss, global_step=gs)
    return x, y, train, gs, accuracy, opt


def session(args, train, opt):
    hooks = []
    if args.mode == "sync":
        # no initial tokens: every replica's first run waits for step 0's aggregate (the
        # default 'replicas_to_aggregate' tokens let a fast replica's second run land there)
        hooks.append(opt.make_session_run_hook(args.task == 0, num_tokens=0))
    else:
        hooks.append(StalenessHook(train))
    config = None
    if args.target:
        config = tf.ConfigProto(
            device_filters=["/job:ps", "/job:worker/task:%d" % args.task],
            intra_op_parallelism_threads=1,
            inter_op_parallelism_threads=1,
        )
    sess = tf.train.MonitoredTrainingSession(
        master=args.target,
        is_chief=args.task == 0,
        checkpoint_dir=args.ckpt,
        hooks=hooks,
        config=config,
        save_checkpoint_steps=10 if args.ckpt else None,
        save_checkpoint_secs=None,
        save_summaries_steps=None,
        save_summaries_secs=None,
        log_step_count_steps=0,
        stop_grace_period_secs=0.5,
    )
    return sess, hooks[0]


def ps_bytes(metadata, ps_tasks):
    """Bytes to and from each ps task in one traced step (its _Recv transfers)."""
    out = [0] * ps_tasks
    for t in metadata.step_stats.transfers:
        for k in range(ps_tasks):
            tag = "/job:ps/replica:0/task:%d/" % k
            if t.src_device.startswith(tag) or t.dst_device.startswith(tag):
                out[k] += t.bytes
    return out


def train_loop(args, sess, x, y, train, gs, data):
    """``args.steps`` runs; returns (global steps, params, seconds of the runs, ps bytes)."""
    (xs, ys), _ = data
    n, b, w = len(xs), args.batch, args.workers
    params = tf.trainable_variables()
    steps, recorded, traced, spans, start, stop = [], [], [], [], None, None
    # no run waits longer than --run-timeout-ms: a replica whose peers are gone fails, not hangs
    within = args.run_timeout_ms
    options = tf.RunOptions(timeout_in_ms=within)
    traced_options = tf.RunOptions(timeout_in_ms=within, trace_level=tf.RunOptions.FULL_TRACE)
    for k in range(args.steps):
        if k == 1:
            start = time.perf_counter()  # the first run sets things up
            cpu = time.process_time()
        picked = rows(k, args.task, w, b, n)
        feed = {x: xs[picked], y: ys[picked]}
        if k >= args.steps - args.trace_steps:
            if stop is None and start is not None:
                stop = time.perf_counter()  # traced runs are not timed
                cpu = time.process_time() - cpu
            meta = tf.RunMetadata()
            sess.run(train, feed, options=traced_options, run_metadata=meta)
            traced.append(ps_bytes(meta, args.ps))
        elif args.until_step:
            if _last_sync_run(sess, train, gs, feed, options, args.until_step):
                break
        else:
            t0 = time.time()
            sess.run(train, feed, options=options)
            spans.append((t0, time.time()))
        if args.record_params:
            step, values = sess.run([gs, params], options=options)
            steps.append(step)
            recorded.append(np.concatenate([v.ravel() for v in values]))
        if args.task == 0:
            print("step", k + 1, flush=True)
    if start is None:
        return steps, recorded, (0.0, 0.0), traced, spans
    if stop is None:
        stop, cpu = time.perf_counter(), time.process_time() - cpu
    return steps, recorded, (stop - start, cpu), traced, spans


def _last_sync_run(sess, train, gs, feed, options, until):
    """One sync run; True once the global step reached ``until``.  With spare replicas, a
    replica's run after the last step finds no partner and waits for a token forever (in TF
    too): here it times out, and counts as the end when the step was reached."""
    try:
        return sess.run(train, feed, options=options) >= until
    except tf.errors.DeadlineExceededError:
        if sess.run(gs) >= until:
            return True
        raise


def main(argv):
    args = parse(argv)
    data = dataset(args.model)
    graph = tf.Graph()
    with graph.as_default():
        x, y, train, gs, accuracy, opt = build(args, data[0][0].shape[1])
        sizes = [int(np.prod(v.shape.as_list())) * 4 for v in tf.trainable_variables()]
        devices = [v.device for v in tf.trainable_variables()]
        sess, hook = session(args, train, opt)
        with sess:
            print("ready", flush=True)
            if args.barrier:
                sys.stdin.readline()  # "go": every replica is ready, start together
            steps, params, seconds, traced, spans = train_loop(args, sess, x, y, train, gs, data)
            (x_test, y_test) = data[1]
            acc = sess.run(accuracy, {x: x_test, y: y_test})
            final = sess.run(gs)
    np.savez(
        args.out,
        steps=np.array(steps, np.int64),
        params=np.stack(params) if params else np.zeros((0, 0), np.float32),
        staleness=np.array(getattr(hook, "staleness", []), np.int64),
        seconds=seconds[0],
        cpu_seconds=seconds[1],
        timed_runs=max(args.steps - 1 - args.trace_steps, 0),
        accuracy=acc,
        global_step=final,
        ps_bytes=np.array(traced, np.int64).reshape(len(traced), args.ps),
        var_bytes=np.array(sizes, np.int64),
        var_devices=np.array(devices),
        spans=np.array(spans, np.float64).reshape(len(spans), 2),
    )
    return 0


if __name__ == "__main__":
    os.environ.setdefault("MINITF_EMULATED_GPUS", "0")
    sys.exit(main(sys.argv[1:]))
