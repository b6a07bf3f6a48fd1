"""Small helpers shared by several test modules (pytest puts this folder on ``sys.path``)."""

import gc
import os
import re
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import minitf as tf

# "a/read: (Identity): /job:localhost/replica:0/task:0/device:CPU:0"
PLACEMENT_RE = re.compile(r"^(?P<name>[^\s:]+): \((?P<type>\w+)\): (?P<device>/job:\S+)$")


#: ``MINITF_TEST_REAL_CUDA=1``: the tests of minitf's numba.cuda kernels (marked ``cudasim``) run
#: them on the machine's real card instead of Numba's simulator
REAL_CUDA = os.environ.get("MINITF_TEST_REAL_CUDA") == "1"


def cuda_backend():
    """The CUDA backend the ``cudasim`` tests check: the simulator's (shared by every emulated
    card), or card 0's with ``MINITF_TEST_REAL_CUDA=1``."""
    from minitf.kernels import cuda_ops

    return cuda_ops.backend_for_card(0, emulated=not REAL_CUDA)


#: one emulated card as ``minitf.smi`` reports it: 1 GiB, a quarter used by one process
EMULATED_CARD = {
    "id": 0,
    "emulated": True,
    "memory_total": 1 << 30,
    "memory_used": 1 << 28,
    "processes": [{"pid": 7, "name": "python", "memory": 1 << 28}],
}


def placements(lines):
    """Captured placement log lines → {op name: (op type, device)}; every line must be one."""
    out = {}
    for line in lines:
        m = PLACEMENT_RE.match(line)
        assert m, "not a placement line: %r" % line
        out[m.group("name")] = (m.group("type"), m.group("device"))
    return out


def chapter_control_deps_graph():
    """The chapter's "Control Dependencies" example (reference ex_d): x and y wait for a and b;
    returns ``(a, b, x, y, z)`` with z = x + y = 7.0."""
    a = tf.constant(1.0, name="a")
    b = tf.add(a, 2.0, name="b")
    with tf.control_dependencies([a, b]):
        x = tf.constant(3.0, name="x")
        y = tf.constant(4.0, name="y")
    z = tf.add(x, y, name="z")
    return a, b, x, y, z


@contextmanager
def no_cycle_collector():
    """Python's cycle collector off: what the block frees, its reference counts free."""
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def wait_until(predicate, seconds=5.0):
    """Polls ``predicate()`` until it is true or ``seconds`` have passed; returns its last
    value (what another thread or process does is seen within a bounded time, never a hang)."""
    deadline = time.monotonic() + seconds
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.01)
    return predicate()


def freed(ref, seconds=5.0):
    """True once the object behind weakref ``ref`` is gone (the thread that drops the last
    reference may still be finishing)."""
    return wait_until(lambda: ref() is None, seconds)


def child_pids():
    """The pids of this process's children (every thread's, from /proc)."""
    out = set()
    for task in Path("/proc/%d/task" % os.getpid()).iterdir():
        try:
            out.update(int(x) for x in (task / "children").read_text().split())
        except OSError:
            pass
    return out


def session_with_pools(inter, intra):
    """A session with pools of its own: ``inter`` inter-op and ``intra`` intra-op threads."""
    return tf.Session(
        config=tf.ConfigProto(
            inter_op_parallelism_threads=inter,
            intra_op_parallelism_threads=intra,
            use_per_session_threads=True,
        )
    )


def traced_run(sess, fetches, feed_dict=None):
    """``sess.run`` with a full trace: ``(values, RunMetadata)``."""
    md = tf.RunMetadata()
    out = sess.run(
        fetches,
        feed_dict,
        options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE),
        run_metadata=md,
    )
    return out, md


def node_stats(md):
    """Every NodeExecStats of a RunMetadata's step, over all its devices."""
    return [n for d in md.step_stats.dev_stats for n in d.node_stats]


def client_env():
    """The environment of a client program run as a child: this checkout's minitf first on the
    path, no emulated GPU."""
    root = str(Path(__file__).resolve().parents[1])
    env = dict(os.environ)
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    env["MINITF_EMULATED_GPUS"] = "0"
    return env


def first_line(e):
    """An OpError's message without the ``[[node ...]]`` lines TF appends."""
    return e.message.splitlines()[0]


def run_in_thread(sess, fetch, **kw):
    """Runs ``sess.run(fetch)`` on a new thread; returns (thread, outcome dict): ``value``, or
    ``error`` when the run raised."""
    out = {}

    def body():
        try:
            out["value"] = sess.run(fetch, **kw)
        except Exception as e:  # noqa: BLE001 - the test looks at it
            out["error"] = e

    t = threading.Thread(target=body)
    t.start()
    return t, out


def threads_left_since(before):
    """Names of the threads alive now that were not in ``before`` (after a grace period)."""
    wait_until(lambda: set(threading.enumerate()) <= before)
    return [t.name for t in set(threading.enumerate()) - before]


def big_graph(blocks=27, width=25):
    """A large graph in the default graph: ``width`` inputs, then ``blocks`` x ``width`` units of 3
    ops (add, square, negative) in nested name scopes over three devices (27 x 25: 2,050 ops).
    GraphView's tests and bench/bench_graph_render.py draw it."""
    prev = [tf.constant(1.0, name="in%d" % i) for i in range(width)]
    for k in range(blocks):
        dev = "/cpu:0" if k % 3 == 0 else "/gpu:%d" % (k % 2)
        with tf.name_scope("block%d" % k), tf.device(dev):
            nxt = []
            for i in range(width):
                with tf.name_scope("unit%d" % i):
                    x = tf.add(prev[i], prev[(i * 7 + 3) % width])
                    nxt.append(tf.negative(tf.square(x)))
            prev = nxt
    return tf.get_default_graph()
