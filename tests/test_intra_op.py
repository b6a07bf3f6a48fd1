"""Intra-op parallelism: a kernel never runs on more threads than intra_op_parallelism_threads.

Book section: "Parallel Execution" (Figure 12-5's multithreaded kernel).  A split kernel cuts
its work into at most N chunks (N = intra_op_parallelism_threads): the pool thread that runs the
op takes the first, the device's intra-op pool the others, and BLAS is held to one thread while
the step runs (``step_run._BlasThreads(1)``), so BLAS threads never multiply minitf's own.
minitf has no numba CPU kernels (its numba code is numba.cuda only), so numba's thread count
plays no part.  Proved from the step stats' chunks, from BLAS's own thread count read inside
each chunk, and from the process's CPU time.
"""

import os
import re
import threading
import time
import weakref
from pathlib import Path

import numpy as np
import pytest
from threadpoolctl import ThreadpoolController

import minitf as tf
from helpers import node_stats, session_with_pools, traced_run, wait_until
from minitf.runtime import pools, step_run

pytestmark = pytest.mark.usefixtures("cpu_only")

BLAS = ThreadpoolController().select(user_api="blas")


def _blas_threads():
    return [lib.num_threads for lib in BLAS.lib_controllers]


def _traced_node(sess, fetch, name):
    value, md = traced_run(sess, fetch)
    (node,) = [n for n in node_stats(md) if n.node_name == name]
    return value, node


def _most_at_once(chunks):
    """The largest number of chunks running at one instant (a sweep over their intervals)."""
    events = sorted(
        [(c.start_micros, 1) for c in chunks] + [(c.end_micros, -1) for c in chunks],
        key=lambda e: (e[0], e[1]),  # an end before a start at the same microsecond
    )
    most = running = 0
    for _, step in events:
        running += step
        most = max(most, running)
    return most


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_a_big_matmul_runs_n_chunks_on_at_most_n_threads(n):
    """intra_op_parallelism_threads=N: a 512x512 matmul is N row blocks, on at most N distinct
    threads, at most N at once; block 0 on the op's inter-op thread, the rest on intra-op
    threads, or on the op's thread where it took a block no intra-op thread had started."""
    a_np = np.random.RandomState(0).rand(512, 512).astype(np.float32)
    m = tf.matmul(tf.constant(a_np), tf.constant(a_np), name="big")
    with session_with_pools(1, n) as sess:
        for _ in range(3):  # scheduling is real: every run must keep the bound
            value, node = _traced_node(sess, m, "big")
            chunks = node.chunks
            assert sorted(c.index for c in chunks) == list(range(n))
            assert len({c.thread_id for c in chunks}) <= n
            assert _most_at_once(chunks) <= n
            (first,) = [c for c in chunks if c.index == 0]
            assert first.thread_name == node.thread_name == "inter-op #0"
            assert all(
                c.thread_name.startswith("intra-op #") or c.thread_id == first.thread_id
                for c in chunks
                if c.index > 0
            )
    np.testing.assert_allclose(value, a_np @ a_np, rtol=1e-5)


def test_chunks_no_pool_thread_starts_run_on_the_caller():
    """Work stealing: with every thread of the pool busy, ``parallel_for`` does not wait for
    one; the caller runs every chunk itself, and the late pool tasks, still queued, hold
    nothing of the op (its operands are freed when the op is done)."""
    pool = pools.ThreadPool("busy", 3)
    release = threading.Event()
    for _ in range(3):
        pool.submit(release.wait, 10)
    try:
        seen = []
        operand = np.ones(4)
        freed = weakref.ref(operand)
        pool.parallel_for(9, lambda lo, hi, x=operand: seen.append((lo, hi, threading.get_ident())))
        assert sorted((lo, hi) for lo, hi, _ in seen) == [(0, 3), (3, 6), (6, 9)]
        assert {t for _, _, t in seen} == {threading.get_ident()}
        del operand
        assert freed() is None
    finally:
        release.set()
        pool.close()


def test_a_matmul_with_more_columns_than_rows_splits_its_columns():
    """A wide product cuts its longer side into blocks, so that each block packs only its part
    of the larger operand: a 2x8192 by 8192x1024 product runs 3 column blocks on 3 threads
    (its 2 rows would have made 2), and the blocks make the product."""
    rs = np.random.RandomState(0)
    x_np, w_np = rs.rand(2, 8192).astype(np.float32), rs.rand(8192, 1024).astype(np.float32)
    m = tf.matmul(tf.constant(x_np), tf.constant(w_np), name="wide")
    with session_with_pools(1, 3) as sess:
        value, node = _traced_node(sess, m, "wide")
    assert sorted(c.index for c in node.chunks) == [0, 1, 2]
    np.testing.assert_allclose(value, x_np @ w_np, rtol=1e-5)


def test_large_elementwise_op_runs_n_chunks_on_at_most_n_threads():
    """The same bound for a split elementwise kernel (a multiply of 1024x1024 operands)."""
    x = tf.constant(np.ones((1024, 1024), np.float32))
    y = tf.multiply(x, x, name="big_mul")
    with session_with_pools(1, 3) as sess:
        _, node = _traced_node(sess, y, "big_mul")
    assert sorted(c.index for c in node.chunks) == [0, 1, 2]
    assert len({c.thread_id for c in node.chunks}) <= 3
    assert _most_at_once(node.chunks) <= 3


def test_blas_runs_one_thread_in_every_chunk_and_gets_its_limit_back(monkeypatch):
    """Every chunk of a split matmul, on the inter-op thread and on intra-op threads alike,
    sees BLAS at one thread; after the step BLAS has its own limit again."""
    before = _blas_threads()
    seen = _spy_on_chunks(monkeypatch)
    a = tf.constant(np.ones((512, 512), np.float32))
    m = tf.matmul(a, a)
    with session_with_pools(1, 2) as sess:
        # an intra-op thread the OS wakes late leaves its block to the op's thread: run until
        # one took a block (the first run, on an idle machine).  Traced runs: after its
        # learning runs an untraced step of one heavy matmul runs on its caller, BLAS doing
        # the split (``kernel_stats``), so under load no later untraced run would split it
        assert wait_until(lambda: _thread_kinds(seen) == 2 or _ran(sess, m), 30)
    assert {name.split(" #")[0] for name, _ in seen} == {"inter-op", "intra-op"}
    assert all(set(threads) == {1} for _, threads in seen)
    assert _blas_threads() == before


def _thread_kinds(seen):
    return len({name.split(" #")[0] for name, _ in seen})


def _ran(sess, fetch):
    traced_run(sess, fetch)  # a traced step always runs on the pools
    return False  # the condition is checked before the next run


def _spy_on_chunks(monkeypatch):
    """Records (thread name, BLAS threads) at the start of every chunk of a split kernel."""
    seen = []
    run_chunk = pools._run_chunk

    def spying(fn, c, bounds, record):
        seen.append((pools.current_thread()[1], _blas_threads()))
        return run_chunk(fn, c, bounds, record)

    monkeypatch.setattr(pools, "_run_chunk", spying)
    return seen


def test_a_step_run_from_another_thread_holds_blas_too(monkeypatch):
    """A step started by a thread other than the one that ran the first (a session shared by
    threads, a server's RPC threads) also holds BLAS at one thread (threadpoolctl >= 3.8 lets
    only its "controlling" thread set OpenBLAS's limit), and the limit comes back after it."""
    before = _blas_threads()
    a = tf.constant(np.ones((512, 512), np.float32))
    m = tf.matmul(a, a)
    with session_with_pools(1, 2) as sess:
        sess.run(m)  # this thread has set (and restored) the limit once
        seen = _spy_on_chunks(monkeypatch)
        t = threading.Thread(target=sess.run, args=(m,))
        t.start()
        t.join(30)
    assert seen and all(set(threads) == {1} for _, threads in seen)
    assert _blas_threads() == before


def test_single_threaded_blas_is_counted_across_concurrent_steps():
    """Two steps overlapping on two threads: BLAS holds one thread from the first start to the
    last end, whichever threads they are, and then gets its own limit back."""
    before = _blas_threads()
    with step_run._BlasThreads(1):  # this thread has set (and restored) the limit once
        pass
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen = {}

    def first():
        with step_run._BlasThreads(1):
            seen["first, alone"] = _blas_threads()
            first_in.set()
            second_in.wait(5)
        first_out.set()

    t = threading.Thread(target=first)
    t.start()
    assert first_in.wait(5)
    with step_run._BlasThreads(1):
        second_in.set()
        assert first_out.wait(5)
        t.join(5)
        seen["second, after the first ended"] = _blas_threads()
    assert {k: set(v) for k, v in seen.items()} == {
        "first, alone": {1},
        "second, after the first ended": {1},
    }
    assert _blas_threads() == before


def test_single_threaded_blas_gives_the_limit_back_after_a_failed_step():
    """A kernel that fails still ends its step's hold on BLAS."""
    before = _blas_threads()
    a = tf.placeholder(tf.float32, [None, None])
    m = tf.matmul(a, a)
    with session_with_pools(1, 2) as sess:
        with pytest.raises(tf.errors.InvalidArgumentError):
            sess.run(m, {a: np.ones((2, 3), np.float32)})
    assert _blas_threads() == before


# the thread counts this machine can tell apart from more (a count below its cores): 1 on the
# 2-core CI machine, 1 and 2 from 3 cores up; never a skipped test
_TELLABLE = [n for n in (1, 2) if n < (os.cpu_count() or 1)] or [1]


@pytest.mark.parametrize("n", _TELLABLE)
def test_process_cpu_time_stays_within_n_threads(n):
    """The whole process (BLAS threads included) burns at most N CPU seconds per second while a
    step of big matmuls runs with intra_op_parallelism_threads=N."""
    a_np = np.random.RandomState(0).rand(1024, 1024).astype(np.float32) / 1024
    y = x = tf.constant(a_np)
    for _ in range(6):
        y = tf.matmul(y, x)
    with session_with_pools(1, n) as sess:
        sess.run(y)  # warm-up; also outlasts any BLAS thread still spinning from earlier work
        wall, cpu = time.perf_counter(), time.process_time()
        sess.run(y)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    assert cpu <= n * wall * 1.2 + 0.02, "%.3f CPU s in %.3f s" % (cpu, wall)


def test_no_numba_cpu_kernels():
    """Only numba.cuda is used: no @njit / prange / parallel=True kernel that would run on
    numba's own CPU threads, outside intra_op_parallelism_threads."""
    package = Path(tf.__file__).parent
    pattern = re.compile(
        r"\bnjit\b|\bprange\b|parallel\s*=\s*True"
        r"|numba\.(jit|set_num_threads)|from numba import .*\bjit"
    )
    found = [
        "%s:%d" % (path.relative_to(package), k)
        for path in sorted(package.rglob("*.py"))
        for k, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert found == []


def test_blas_threads_without_openblas_symbols_go_through_threadpoolctl():
    """Where threadpoolctl cannot name OpenBLAS's C functions, the limit is set through its
    controller, taking the "controlling thread" of threadpoolctl >= 3.8 first: a step on
    another thread than the one that last set the limit still gets one thread."""
    from minitf.runtime import blas_threads

    real = next(lib for lib in BLAS.lib_controllers if lib.internal_api == "openblas")
    blind = type("NoSymbols", (), {})()  # the controller, as seen without ``_get_symbol``
    type(blind).clear_controlling_thread = type(real).clear_controlling_thread
    blind.internal_api, blind.threading_layer = "openblas", real.threading_layer
    type(blind).num_threads = property(lambda self: real.num_threads)
    blind.set_num_threads = real.set_num_threads
    get, put = blas_threads._knob(blind)
    before = get()
    real.set_num_threads(before)  # this thread now controls the library
    seen = []

    def other():
        put(1)
        seen.append(get())
        put(before)

    t = threading.Thread(target=other)
    t.start()
    t.join(10)
    type(real).clear_controlling_thread(force=True)
    assert seen == [1] and get() == before


def test_blas_runs_the_smallest_count_the_running_steps_asked_for():
    """A step its caller runs alone asks for its intra-op count, a pooled step for one: while
    both run BLAS has one thread, once the pooled one ends the other's count again, and after
    both its own count (nested here on one thread: the count is the module's, not a thread's;
    a library built for fewer threads than asked gives what it can)."""
    before = _blas_threads()
    with step_run._BlasThreads(2):
        alone = _blas_threads()
        with step_run._BlasThreads(1):
            both = _blas_threads()
        after_pooled = _blas_threads()
    assert set(both) == {1} and after_pooled == alone and set(alone) <= {1, 2}
    assert _blas_threads() == before
