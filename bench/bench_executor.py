"""Executor figures next to TensorFlow's, then minitf's parallel-execution figures.

Book section: "Parallel Execution".  Run::

    python bench/bench_executor.py                              # TF's figures: recorded ones
    python bench/bench_executor.py --tf /tmp/tfvenv/bin/python  # TF measured in this same run
    python bench/bench_executor.py --quick                      # smoke run: 1 round, few reps

The first section compares the two executors on four figures (per-op cost of a chain of scalar
adds, steady run of a 10k-node graph, time per matmul of a one-thread chain of 512x512
matmuls, peak RSS growth over two runs of that chain).  Each figure is measured in fresh
processes, minitf's and TF's alternating (``--rounds`` of each, 3 by default), and the median
over processes is reported with the ratio minitf/TF and the goal.  A child process is this
same script run with ``--child SIDE FIGURE``; it prints one JSON line.  TF's children run
under the interpreter given by ``--tf`` (a throw-away venv: TensorFlow is no dependency of
minitf and is never imported by a minitf process), in TF1 graph mode with Grappler and the
graph optimizer off, so both sides run the graph as built.  Without ``--tf`` the TF column
holds figures recorded in another run (``bench/tf_2_21_reference.txt``), labelled so.

The second section is minitf alone, in one child process: inter-op speedup (4 branches of 30
matmuls), intra-op speedup of one 2048^2 matmul next to numpy, and build / first run / steady
run of a 5000-add chain.  Thread counts are set per session (``use_per_session_threads``) and
BLAS is held to one thread by minitf during steps, so the speedups come from minitf's pools.
"""

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time

HERE = os.path.abspath(__file__)

#: name: (label, unit, format, goal for minitf/TF, TF 2.21 recorded on a 2-core Intel Xeon VM)
FIGURES = {
    "per_op": ("per op: chain of 1000 scalar adds, fed", "us", "%.3f", 1.0, 0.25),
    "graph10k": ("10k-node graph (50x100 adds + AddN), steady", "ms", "%.2f", 1.0, 1.71),
    "matmul": ("1-thread matmul 512^2, chain of 400", "ms", "%.2f", 1.05, 1.60),
    "peak": ("peak RSS growth, 2 runs of that chain", "MiB", "%+.1f", 2.0, 11.0),
}
CHAIN = 1000  # adds in the per-op chain
MATMULS, N = 400, 512  # the matmul chain


# -- child side: the same code drives minitf and TF's compat.v1 API --------------------------------


def _api(side):
    """(module with the TF1 API, its version)."""
    if side == "tf":
        os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
        import tensorflow

        tensorflow.compat.v1.disable_eager_execution()
        return tensorflow.compat.v1, tensorflow.__version__
    os.environ.setdefault("MINITF_EMULATED_GPUS", "0")
    import minitf

    return minitf, minitf.__version__


def _config(side, api, threads=None):
    """Default thread settings, or ``threads`` for both pools; TF's graph optimizers off."""
    kwargs = {}
    if threads is not None:
        kwargs = dict(inter_op_parallelism_threads=threads, intra_op_parallelism_threads=threads)
        if side == "minitf":
            kwargs["use_per_session_threads"] = True
    config = api.ConfigProto(**kwargs)
    if side == "tf":
        config.graph_options.rewrite_options.disable_meta_optimizer = True
        config.graph_options.optimizer_options.opt_level = api.OptimizerOptions.L0
    return config


def _timed(fn, *args):
    t0 = time.perf_counter()
    fn(*args)
    return time.perf_counter() - t0


def _per_op(api, config, quick):
    """(median run of the last add - median run of the first add) / 999, in us."""
    g = api.Graph()
    with g.as_default():
        p = api.placeholder(api.float32, [])
        x = first = p + 1.0
        for _ in range(CHAIN - 1):
            x = x + 1.0
    feed = {p: 1.0}
    with api.Session(graph=g, config=config) as sess:
        if sess.run(x, feed) != 1.0 + CHAIN or sess.run(first, feed) != 2.0:
            raise AssertionError("wrong value of the add chain")
        t_first, t_last = [], []
        for _ in range(40 if quick else 150):  # interleaved: drift hits both alike
            t_first.append(_timed(sess.run, first, feed))
            t_last.append(_timed(sess.run, x, feed))
    delta = statistics.median(t_last) - statistics.median(t_first)
    return delta / (CHAIN - 1) * 1e6, {"first_us": statistics.median(t_first) * 1e6}


def _graph10k(api, config, quick):
    """Steady run (ms) of 50 chains of 100 adds from one constant, summed by one AddN."""
    g = api.Graph()
    with g.as_default():
        start = api.constant(0.0)
        ends = []
        for _ in range(50):
            x = start
            for _ in range(100):
                x = x + 1.0
            ends.append(x)
        total = api.add_n(ends)
    nodes = len(g.get_operations())
    with api.Session(graph=g, config=config) as sess:
        values = [sess.run(total) for _ in range(2)]  # warm-up
        if values != [5000.0, 5000.0]:
            raise AssertionError("10k-node graph: %r, not 5000.0" % values)
        times = [_timed(sess.run, total) for _ in range(10 if quick else 30)]
    return statistics.median(times) * 1e3, {"nodes": nodes}


def _matmul_graph(api):
    """The chain y = matmul(y, w) x 400 from a fed [512, 512] placeholder, and the feed.

    w is uniform random / n, rescaled by its largest eigenvalue (a few power iterations) so
    that it is 1: y keeps its magnitude along the chain, neither overflowing nor sinking into
    denormals (which would time the CPU's slow path rather than the executor)."""
    import numpy as np

    rs = np.random.RandomState(0)
    w = rs.rand(N, N) / N
    v = np.ones(N)
    for _ in range(30):
        u = w @ v
        norm, v = np.linalg.norm(u), u / np.linalg.norm(u)
    w = (w / norm).astype(np.float32)
    g = api.Graph()
    with g.as_default():
        y = start = api.placeholder(api.float32, [N, N])
        const = api.constant(w)
        for _ in range(MATMULS):
            y = api.matmul(y, const)
    return g, y, {start: rs.rand(N, N).astype(np.float32)}


def _check_chain(out):
    import numpy as np

    if not (np.isfinite(out).all() and np.abs(out).max() > 1e-3):
        raise AssertionError("matmul chain: values left the normal float32 range")


def _matmul(api, config, quick):
    """Median run of the one-thread chain / 400, in ms."""
    g, y, feed = _matmul_graph(api)
    with api.Session(graph=g, config=config) as sess:
        _check_chain(sess.run(y, feed))  # warm-up
        times = [_timed(sess.run, y, feed) for _ in range(1 if quick else 3)]
    return statistics.median(times) / MATMULS * 1e3, {}


def _maxrss_mib():
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / 2**20 if sys.platform == "darwin" else rss / 2**10  # bytes there, KiB here


def _peak(api, config, quick):
    """Peak RSS growth (MiB) over two runs of the chain, from just before the first run."""
    g, y, feed = _matmul_graph(api)
    sess = api.Session(graph=g, config=config)
    before = _maxrss_mib()
    for _ in range(2):
        out = sess.run(y, feed)
    after = _maxrss_mib()
    _check_chain(out)
    sess.close()
    return after - before, {"maxrss_before_mib": before}


def _child(side, figure, quick):
    api, version = _api(side)
    if figure == "parallel":
        result = _parallel(api, quick)
    else:
        threads = 1 if figure in ("matmul", "peak") else None
        fn = {"per_op": _per_op, "graph10k": _graph10k, "matmul": _matmul, "peak": _peak}[figure]
        value, extra = fn(api, _config(side, api, threads), quick)
        result = dict(extra, value=value)
    if side == "minitf" and "tensorflow" in sys.modules:
        raise AssertionError("a minitf process imported tensorflow")
    print(json.dumps(dict(result, side=side, figure=figure, version=version)))


# -- the second section: minitf alone ------------------------------------------------------------


def _median_s(fn, reps):
    fn()
    return statistics.median(_timed(fn) for _ in range(reps))


def _session(tf, inter, intra):
    config = tf.ConfigProto(
        inter_op_parallelism_threads=inter,
        intra_op_parallelism_threads=intra,
        use_per_session_threads=True,
    )
    return tf.Session(graph=tf.get_default_graph(), config=config)


def _inter_op(tf, reps, branches=4, depth=30, n=512):
    import numpy as np

    with tf.Graph().as_default():
        x = tf.constant(np.random.RandomState(0).rand(n, n).astype(np.float32) / n)
        ends = []
        for _ in range(branches):
            y = x
            for _ in range(depth):
                y = tf.matmul(y, x)
            ends.append(y)
        out = {}
        for inter in (1, 2):
            with _session(tf, inter, 1) as sess:
                out[inter] = _median_s(lambda sess=sess: sess.run(ends), reps)
    return out


def _intra_op(tf, reps, n=2048):
    """GFLOP/s of one n^2 matmul at intra=1 and 2, and numpy's at 1 and 2 BLAS threads."""
    import numpy as np
    from threadpoolctl import threadpool_limits

    a_np = np.random.RandomState(0).rand(n, n).astype(np.float32)
    gflop = 2.0 * n**3 / 1e9
    ours, numpy = {}, {}
    with tf.Graph().as_default():
        m = tf.matmul(tf.constant(a_np), tf.constant(a_np))
        for intra in (1, 2):
            with _session(tf, 1, intra) as sess:
                ours[intra] = gflop / _median_s(lambda sess=sess: sess.run(m), reps)
    for threads in (1, 2):
        with threadpool_limits(limits=threads, user_api="blas"):
            numpy[threads] = gflop / _median_s(lambda: np.matmul(a_np, a_np), reps)
    return ours, numpy


def _big_graph(tf, reps, adds=5000):
    t0 = time.perf_counter()
    g = tf.Graph()
    with g.as_default():
        x = tf.constant(1.0)
        for _ in range(adds):
            x = x + 1.0
    build = time.perf_counter() - t0
    sess = tf.Session(graph=g)
    first = _timed(sess.run, x)
    steady = _median_s(lambda: sess.run(x), reps)
    sess.close()
    return {"nodes": len(g.get_operations()), "build": build, "first": first, "steady": steady}


def _parallel(tf, quick):
    inter = _inter_op(tf, 3 if quick else 7)
    ours, numpy = _intra_op(tf, 3 if quick else 5)
    return {
        "inter": inter,
        "intra": ours,
        "numpy": numpy,
        "big": _big_graph(tf, 5 if quick else 15),
        "cores": os.cpu_count(),
    }


def _print_parallel(r):
    t, ours, numpy, big = r["inter"], r["intra"], r["numpy"], r["big"]
    print(
        "inter-op: 4 branches x 30 matmul 512^2, inter=1: %7.1f ms   inter=2: %7.1f ms   "
        "speedup %.2fx   (TF 2.21: 1.53x, goal >= 1.8x)"
        % (t["1"] * 1e3, t["2"] * 1e3, t["1"] / t["2"])
    )
    print(
        "intra-op: one 2048^2 matmul, intra=1: %6.1f GFLOP/s   intra=2: %6.1f GFLOP/s   "
        "speedup %.2fx   (TF 2.21: 1.84x, goal >= 1.8x)"
        % (ours["1"], ours["2"], ours["2"] / ours["1"])
    )
    print(
        "          numpy at the same BLAS threads: 1: %6.1f GFLOP/s   2: %6.1f GFLOP/s   "
        "minitf/numpy at 2 threads: %.2f (goal >= 0.90)"
        % (numpy["1"], numpy["2"], ours["2"] / numpy["2"])
    )
    print(
        "%d-node graph (chain of 5000 adds): build %.3f s (goal < 0.5)   first run %.3f s "
        "(goal < 0.2; TF 0.23)   steady run %.2f ms (goal < 20; TF 1.65)"
        % (big["nodes"], big["build"], big["first"], big["steady"] * 1e3)
    )


# -- parent side ---------------------------------------------------------------------------------


def _spawn(python, side, figure, quick, timeout):
    """(the child's JSON result or None, an error line or None)."""
    env = dict(os.environ)
    if side == "minitf":
        env["MINITF_EMULATED_GPUS"] = "0"
    else:
        env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    cmd = [python, HERE, "--child", side, figure] + (["--quick"] if quick else [])
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, "%s %s: timed out after %d s" % (side, figure, timeout)
    except OSError as e:  # e.g. no interpreter at --tf PATH
        return None, "%s %s: %s" % (side, figure, e)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return None, "%s %s: exit %d: %s" % (side, figure, proc.returncode, tail)
    return json.loads(lines[-1]), None


def _measure(args, rounds):
    """{side: {figure: [value per process]}}, {side: version}, [error lines]."""
    sides = [("minitf", sys.executable)] + ([("tf", args.tf)] if args.tf else [])
    values = {side: {f: [] for f in FIGURES} for side, _ in sides}
    versions, errors = {}, []
    for _ in range(rounds):
        for figure in FIGURES:
            for side, python in sides:
                result, error = _spawn(python, side, figure, args.quick, args.timeout)
                if error:
                    errors.append(error)
                    continue
                values[side][figure].append(result["value"])
                versions[side] = result["version"]
    return values, versions, errors


def _cpu():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def _cell(fmt, unit, value):
    return "failed" if value is None else (fmt + " " + unit) % value


def _print_table(values, versions, measured):
    tf_name = "TF " + versions.get("tf", "2.21")
    print(
        "%-44s %12s %20s %10s   %s"
        % ("figure", "minitf", tf_name + ("" if measured else " (recorded)"), "minitf/TF", "goal")
    )
    for figure, (label, unit, fmt, goal, recorded) in FIGURES.items():
        ours = values["minitf"][figure]
        ours = statistics.median(ours) if ours else None
        theirs = values["tf"][figure] if measured else [recorded]
        theirs = statistics.median(theirs) if theirs else None
        ratio = None if None in (ours, theirs) or theirs == 0 else ours / theirs
        verdict = "" if ratio is None else (" met" if ratio <= goal else " not met")
        print(
            "%-44s %12s %20s %10s   <= %.2fx%s"
            % (
                label,
                _cell(fmt, unit, ours),
                _cell(fmt, unit, theirs),
                "-" if ratio is None else "%.2fx" % ratio,
                goal,
                verdict,
            )
        )


def _print_processes(values, measured):
    print("per-process values, in order (minitf%s):" % (" | TF" if measured else ""))
    for figure, (_, unit, fmt, _, _) in FIGURES.items():
        cells = [" ".join(fmt % v for v in values[side][figure]) for side in values]
        print("  %-9s %s  %s" % (figure, " | ".join(cells), unit))


def _executor_section(args, rounds):
    measured = bool(args.tf)
    values, versions, errors = _measure(args, rounds)
    peer = "TensorFlow %s measured in this run" % versions.get("tf", "?")
    print(
        "== Executor figures: minitf %s vs %s =="
        % (versions.get("minitf", "?"), peer if measured else "TF 2.21 (recorded)")
    )
    print(
        "CPU: %s, %d cores.  %d round(s) of fresh processes per figure%s; median over processes."
        % (_cpu(), os.cpu_count(), rounds, ", minitf and TF alternating" if measured else "")
    )
    if measured:
        print("TF: TF1 graph mode, Grappler (meta optimizer) off, graph optimizer at L0.")
    _print_table(values, versions, measured)
    if not measured:
        print(
            "(recorded): TF 2.21 figures from another run, on a 2-core Intel Xeon VM "
            "(bench/tf_2_21_reference.txt),\n  not measured on this machine: the ratios are "
            "indicative only; pass --tf PATH for a same-run comparison."
        )
    _print_processes(values, measured)
    return errors


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tf", metavar="PATH", help="python of a venv with tensorflow-cpu")
    parser.add_argument("--rounds", type=int, help="processes of each side per figure (3)")
    parser.add_argument("--quick", action="store_true", help="smoke run: 1 round, few reps")
    parser.add_argument("--timeout", type=int, default=300, help="seconds per child process")
    parser.add_argument("--child", nargs=2, metavar=("SIDE", "FIGURE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return _child(args.child[0], args.child[1], args.quick)
    t0 = time.perf_counter()
    rounds = args.rounds or (1 if args.quick else 3)
    errors = _executor_section(args, rounds)
    print("\n== Parallel execution: minitf alone, one process (medians) ==")
    result, error = _spawn(sys.executable, "minitf", "parallel", args.quick, args.timeout)
    if error:
        errors.append(error)
    else:
        _print_parallel(result)
    for error in errors:
        print("FAILED: " + error)
    print("total %.0f s" % (time.perf_counter() - t0))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
