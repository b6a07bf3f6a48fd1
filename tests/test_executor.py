"""The parallel executor: the shared inter-op pool (and GPUs' own in gpu_private mode), intra-op
chunks, control edges, asynchronous _Recv kernels, tracing.

Book section: "Parallel Execution" (Figure 12-5) and "Control Dependencies".  Parallelism is
proved from the recorded step stats (who ran what, on which thread, when), never from wall time.
"""

import os
import threading
import weakref

import numpy as np
import pytest

import minitf as tf
from helpers import (
    chapter_control_deps_graph,
    freed,
    no_cycle_collector,
    node_stats,
    traced_run,
    wait_until,
)
from minitf.runtime import executor, pools, scheduler, step_run

pytestmark = pytest.mark.usefixtures("cpu_only")


def _config(inter, intra=1, **kw):
    return tf.ConfigProto(
        inter_op_parallelism_threads=inter,
        intra_op_parallelism_threads=intra,
        use_per_session_threads=True,
        **kw,
    )


def _traced(sess, fetches, feed_dict=None):
    out, md = traced_run(sess, fetches, feed_dict)
    return out, {n.node_name: n for n in node_stats(md)}, md


def _traced_until(sess, fetches, ok):
    """``_traced`` again until ``ok(nodes)``: a split kernel's block goes to an intra-op thread
    when one starts in time, and to the op's own thread on a machine too busy to wake one."""
    runs = []

    def good_run():
        if not runs or not ok(runs[-1][1]):
            runs.append(_traced(sess, fetches))
        return ok(runs[-1][1])

    assert wait_until(good_run, 30)
    return runs[-1]


def _branches(k=2, depth=3, n=384):
    x = tf.constant(np.random.RandomState(0).rand(n, n).astype(np.float32) / n, name="x")
    ends = []
    for b in range(k):
        y = x
        for i in range(depth):
            y = tf.matmul(y, x, name="b%d_m%d" % (b, i))
        ends.append(y)
    return x, ends


def _overlap(a, b):
    return a.all_start_micros < b.end_micros and b.all_start_micros < a.end_micros


def _branch_spans(nodes, k, depth):
    spans = []
    for b in range(k):
        ns = [nodes["b%d_m%d" % (b, i)] for i in range(depth)]
        spans.append((min(n.all_start_micros for n in ns), max(n.end_micros for n in ns), ns))
    return spans


def test_two_inter_op_threads_run_independent_branches_at_once():
    """With 2 inter-op threads, two independent matmul chains overlap in time on 2 threads."""
    x, ends = _branches()

    def overlapped(nodes):
        (s0, e0, n0), (s1, e1, n1) = _branch_spans(nodes, 2, 3)
        assert {n.thread_name for n in n0 + n1} <= {"inter-op #0", "inter-op #1"}
        return any(_overlap(a, b) for a in n0 for b in n1)

    with tf.Session(config=_config(2)) as sess:
        # scheduling is real: on a loaded machine (tests in parallel) the OS may keep one
        # thread waiting through a whole run, so run until they overlap
        _traced_until(sess, ends, overlapped)


def test_one_inter_op_thread_runs_branches_one_after_the_other():
    """With 1 inter-op thread no two matmuls ever overlap, and all run on that one thread."""
    x, ends = _branches()
    with tf.Session(config=_config(1)) as sess:
        _, nodes, _ = _traced(sess, ends)
        mm = sorted(
            (n for n in nodes.values() if n.op_type == "MatMul"), key=lambda n: n.all_start_micros
        )
        assert {n.thread_name for n in mm} == {"inter-op #0"}
        for a, b in zip(mm, mm[1:]):
            assert a.end_micros <= b.all_start_micros


def test_a_chain_of_matmuls_stays_on_the_thread_that_started_it():
    """TF's rule: a pool thread that readies the next expensive op and has nothing else to do
    runs it itself; with two threads and one chain there is no hand-over to the other."""
    x, ends = _branches(k=1, depth=6, n=256)
    with tf.Session(config=_config(2)) as sess:
        _, nodes, _ = _traced(sess, ends)
    threads = {nodes["b0_m%d" % i].thread_name for i in range(6)}
    assert len(threads) == 1 and threads <= {"inter-op #0", "inter-op #1"}


def test_schedule_ready_keeps_one_expensive_node_for_an_idle_pool_thread():
    """The rule itself: cheap nodes run here; of the expensive ones a pool thread with nothing
    else to run keeps the last one of its own queue; the caller and a completion keep none."""
    expensive = [False, True, True, True]
    queue_of = ["shared", "shared", "shared", "GPU:0"].__getitem__
    rule = scheduler.schedule_ready
    assert rule([1, 2], expensive, False, "shared", queue_of, True) == ([2], [1])
    assert rule([1, 3], expensive, False, "shared", queue_of, True) == ([1], [3])
    assert rule([0, 1], expensive, False, "shared", queue_of, True) == ([0], [1])  # cheap first
    assert rule([1, 2], expensive, False, "shared", queue_of, False) == ([], [1, 2])  # busy
    assert rule([1, 2], expensive, False, None, queue_of, True) == ([], [1, 2])  # the caller
    assert rule([0, 1], expensive, True, "shared", queue_of, True) == ([], [0, 1])  # a _Recv's


def test_statically_scalar_binary_ops_give_tf_answers():
    """Ops on scalars take the backend's plain scalar function: same answers, same dtypes,
    TF's float FloorDiv (1.0 // 0.1 is 10, not Python's 9)."""
    a = tf.constant(1.0)
    b = tf.constant(0.1)
    i = tf.constant(7)
    outs = [a + b, a - b, a * b, a / b, a // b, i // 2, -i // 2]
    with tf.Session() as sess:
        got = sess.run(outs)
    np.testing.assert_allclose(got[:4], [1.1, 0.9, 0.1, 10.0], rtol=1e-6)
    assert got[4] == 10.0 and got[5] == 3 and got[6] == -4
    assert [np.result_type(v) for v in got] == [np.float32] * 5 + [np.int32] * 2


def test_a_head_start_leaves_the_constants_done():
    """A threaded step starts with the plan's constants done: their successors' counts are
    lower, and what they alone waited for is ready at once."""
    inputs = [[], [], [(0, 0), (1, 0)], [(2, 0)]]
    plan = scheduler.Plan(inputs, [[]] * 4, ["d"] * 4)
    one = scheduler.HeadStart(plan, [1])
    assert one.pending == [0, 0, 1, 1] and one.roots == [0]
    both = scheduler.HeadStart(plan, [0, 1])
    assert both.pending[2] == 0 and both.roots == [2]
    step = scheduler.Step(plan, both)
    assert step.finished == 2 and not step.done
    assert step.finish(2) == [3] and step.finish(3) == [] and step.done


def test_a_scalar_chain_runs_alike_traced_and_untraced():
    """The serial program calls a scalar op's plain function directly and starts from the
    constants' values; a traced run runs every node through its kernel and records it."""
    x = tf.placeholder(tf.float32, [])
    y = x
    for _ in range(5):
        y = (y + 1.0) * 2.0
    with tf.Session() as sess:
        plain = sess.run(y, {x: 1.0})
        traced, nodes, _ = _traced(sess, y, {x: 1.0})
    assert plain == traced == 94.0
    names = set(nodes)
    assert {"add", "add_4", "mul", "mul_4", "add/y", "mul_4/y"} <= names


def test_intra_op_chunks_of_one_matmul_run_on_different_threads():
    """Figure 12-5's op A: one large matmul is split into row blocks on two threads."""
    a = tf.constant(np.ones((256, 256), np.float32), name="a")
    m = tf.matmul(a, a, name="opA")
    with tf.Session(config=_config(1, intra=2)) as sess:
        value, nodes, _ = _traced_until(
            sess, m, lambda nodes: any("intra-op" in c.thread_name for c in nodes["opA"].chunks)
        )
    np.testing.assert_allclose(value, np.full((256, 256), 256.0))
    chunks = nodes["opA"].chunks
    assert sorted(c.index for c in chunks) == [0, 1]
    assert len({c.thread_id for c in chunks}) == 2
    assert any("intra-op" in c.thread_name for c in chunks)


def test_large_elementwise_op_is_split_and_correct():
    """Elementwise kernels over large same-shape arrays split over the intra-op pool."""
    rs = np.random.RandomState(1)
    xa, ya = rs.rand(1024, 1100), rs.rand(1024, 1100)  # over SPLIT_ELEMENTS
    z = tf.constant(xa) * tf.constant(ya) - tf.constant(ya)
    with tf.Session(config=_config(2, intra=2)) as sess:
        value, nodes, _ = _traced(sess, z)
    np.testing.assert_allclose(value, xa * ya - ya)
    assert len(nodes["mul"].chunks) == 2


def test_default_pools_are_shared_between_sessions():
    """Without use_per_session_threads the first session's pools serve every later session."""
    s1 = tf.Session(config=tf.ConfigProto(inter_op_parallelism_threads=1))
    s2 = tf.Session(config=tf.ConfigProto(inter_op_parallelism_threads=3))
    assert s1._impl._pool_sets[0] is s2._impl._pool_sets[0]
    assert s1._impl._owned_pools == [] and s2._impl._owned_pools == []


def test_a_session_with_its_own_pools_leaves_the_shared_ones_to_the_first_that_uses_them(
    monkeypatch,
):
    """TF creates the process-wide pools for the first session that uses them: a session with
    pools of its own before it does not size them (it used to, and a one-thread session made
    every later default session run its steps on the caller)."""
    monkeypatch.setattr(pools, "_global_default", {})
    own = tf.Session(config=_config(1, intra=1))
    shared = tf.Session(config=tf.ConfigProto(inter_op_parallelism_threads=3))
    try:
        assert own._impl._pool_sets[0].inter_threads == 1
        assert shared._impl._pool_sets[0].inter_threads == 3
        assert shared._impl._pool_sets[0] is pools._global_default["global"]
    finally:
        own.close()
        shared.close()
        shared._impl._pool_sets[0].close()


def test_per_session_pools_are_owned_and_stopped_on_close():
    """use_per_session_threads gives the session its own pools; close() stops their threads."""
    x, ends = _branches(depth=1)
    sess = tf.Session(config=_config(2))
    other = tf.Session(config=_config(2))
    assert sess._impl._pool_sets[0] is not other._impl._pool_sets[0]
    sess.run(ends)
    pool = sess._impl._pool_sets[0].inter
    assert pool._threads and all(t.is_alive() for t in pool._threads)
    sess.close()
    other.close()
    assert not any(t.is_alive() for t in pool._threads)


def test_named_global_pools_and_pool_index():
    """session_inter_op_thread_pool entries: a global_name is shared process-wide; reusing it
    with another size fails; RunOptions.inter_op_thread_pool picks the entry."""
    cfg = tf.ConfigProto()
    cfg.session_inter_op_thread_pool.add(num_threads=1, global_name="mt_pool_a")
    cfg.session_inter_op_thread_pool.add(num_threads=2)
    s1 = tf.Session(config=cfg)
    s2 = tf.Session(config=cfg)
    assert s1._impl._pool_sets[0] is s2._impl._pool_sets[0]
    assert s1._impl._pool_sets[1] is not s2._impl._pool_sets[1]
    bad = tf.ConfigProto()
    bad.session_inter_op_thread_pool.add(num_threads=3, global_name="mt_pool_a")
    with pytest.raises(
        tf.errors.InvalidArgumentError,
        match="Pool mt_pool_a configured previously with num_threads=1; cannot "
        "re-configure with num_threads=3",
    ):
        tf.Session(config=bad)
    x, ends = _branches(depth=1)
    md = tf.RunMetadata()
    s1.run(ends, options=tf.RunOptions(inter_op_thread_pool=1, trace_level=3), run_metadata=md)
    names = {
        n.thread_name
        for d in md.step_stats.dev_stats
        for n in d.node_stats
        if n.op_type == "MatMul"
    }
    assert names <= {"inter-op #0", "inter-op #1"}
    with pytest.raises(tf.errors.InvalidArgumentError, match="Invalid inter_op_thread_pool: 2"):
        s1.run(ends, options=tf.RunOptions(inter_op_thread_pool=2))
    s1.close()
    s2.close()


def test_control_dependencies_delay_ops_in_the_trace():
    """The chapter's example: x and y start only after a and b ended; z = 7.0."""
    a, b, x, y, z = chapter_control_deps_graph()
    with tf.Session(config=_config(2)) as sess:
        value, nodes, _ = _traced(sess, z)
    assert value == 7.0
    for late in ("x", "y"):
        for early in ("a", "b"):
            assert nodes[late].all_start_micros >= nodes[early].end_micros
    assert nodes["z"].all_start_micros >= max(nodes["x"].end_micros, nodes["y"].end_micros)


def test_threaded_and_serial_drivers_agree_on_values():
    """Both drivers run the same plan: results are identical."""
    x, ends = _branches(k=3, depth=2, n=200)
    s = tf.add_n(ends)
    with tf.Session(config=_config(2, intra=2)) as sess:
        threaded = sess.run(s)
        eplan = sess.plan(s)
        assert eplan.any_expensive
        serial = executor.run_serial(eplan, executor.StepContext())[eplan.fetch_slots[0][0]][0]
    np.testing.assert_allclose(threaded, serial, rtol=1e-5)


def test_error_in_one_op_cancels_the_step_and_names_the_op():
    """A failing op stops the step; the caller gets TF's class and ``[[op]]``; the session and
    its pools stay usable."""
    p = tf.placeholder(tf.float32, name="p")
    q = tf.placeholder(tf.float32, name="q")
    bad = tf.matmul(p, q, name="bad")
    x, ends = _branches(k=1, depth=4)
    with tf.Session(config=_config(2)) as sess:
        with pytest.raises(tf.errors.InvalidArgumentError) as info:
            sess.run([bad] + ends, {p: np.ones((2, 3)), q: np.ones((2, 3))})
        assert "Matrix size-incompatible: In[0]: [2,3], In[1]: [2,3]" in str(info.value)
        assert "[[{{node bad}}]]" in str(info.value)
        assert info.value.op is bad.op
        good = sess.run(bad, {p: np.ones((2, 3)), q: np.ones((3, 2))})
        np.testing.assert_allclose(good, np.full((2, 2), 3.0))


def test_run_timeout_raises_deadline_exceeded():
    """RunOptions(timeout_in_ms) bounds a step: DeadlineExceededError, then the session works."""
    x, ends = _branches(k=1, depth=60, n=256)
    with tf.Session(config=_config(1)) as sess:
        with pytest.raises(
            tf.errors.DeadlineExceededError, match="Timed out waiting for notification"
        ):
            sess.run(ends, options=tf.RunOptions(timeout_in_ms=1))
        assert sess.run(x).shape == (256, 256)


def test_operation_timeout_in_ms_applies_to_every_run():
    """ConfigProto.operation_timeout_in_ms is the session-wide default deadline."""
    x, ends = _branches(k=1, depth=60, n=256)
    with tf.Session(config=_config(1, operation_timeout_in_ms=1)) as sess:
        with pytest.raises(tf.errors.DeadlineExceededError):
            sess.run(ends)


def test_blas_threads_are_limited_during_steps_and_restored_after():
    """BLAS runs one thread per minitf thread while a step runs, then gets its limit back."""
    from threadpoolctl import threadpool_info

    before = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
    seen = []
    a = tf.constant(np.ones((128, 128), np.float32))
    m = tf.matmul(a, a)
    with tf.Session(config=_config(1)) as sess:
        orig = sess._impl.plan

        def spy(*args):
            eplan = orig(*args)
            k = eplan.kernels[eplan.fetch_slots[0][0]]

            def recording(ctx, ins):
                seen.extend(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas")
                return k(ctx, ins)

            eplan.kernels[eplan.fetch_slots[0][0]] = recording
            return eplan

        sess._impl.plan = spy
        sess.run(m)
    after = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
    assert seen and set(seen) == {1}
    assert after == before


def test_blas_already_at_one_thread_is_left_alone(monkeypatch):
    """Where every BLAS library has one thread already (OPENBLAS_NUM_THREADS=1, a task held to
    one core), a step neither sets nor restores the limit: those calls would cost each step's
    GIL for nothing.  With two threads it sets one and restores two."""
    from threadpoolctl import threadpool_limits

    calls = []
    monkeypatch.setattr(
        step_run._BlasThreads, "_set", staticmethod(lambda counts: calls.append(counts))
    )
    a = tf.constant(np.ones((128, 128), np.float32))
    m = tf.matmul(a, a)
    with tf.Session(config=_config(1)) as sess:
        with threadpool_limits(1, user_api="blas"):
            sess.run(m)
            assert calls == []
        with threadpool_limits(2, user_api="blas"):
            sess.run(m)
    assert calls and set(calls[0]) == {1} and 2 in calls[1]


def test_tensors_cross_devices_through_send_recv_pairs():
    """A local session splits its step by device, as TF's DirectSession does: each edge between
    devices is a _Send next to the producer and a _Recv next to the consumer, both in the step
    stats; the _Recv's TransferStats has the tensor's bytes and both devices.  The fetched value
    crosses to the client's CPU the same way.  Every device's ops run on the shared pool."""
    tf.config.emulate_gpus(2)
    with tf.device("/gpu:0"):
        a = tf.constant(np.ones((200, 200), np.float32), name="a")
    with tf.device("/gpu:1"):
        b = tf.matmul(a, a, name="b")
    with tf.Session(config=_config(2)) as sess:
        value, nodes, md = _traced(sess, b)
    np.testing.assert_allclose(value, np.full((200, 200), 200.0))
    (t,) = [t for t in md.step_stats.transfers if t.tensor_name == "a:0"]
    assert t.src_node == "a" and t.bytes == 200 * 200 * 4
    assert t.src_device.endswith("GPU:0") and t.dst_device.endswith("GPU:1")
    recv = nodes[t.dst_node]
    assert recv.op_type == "_Recv"
    assert nodes["b"].timeline_label == "b = MatMul(%s, %s)" % (t.dst_node, t.dst_node)
    on = {
        n.node_name: d.device.rsplit(":", 2)[-2:]
        for d in md.step_stats.dev_stats
        for n in d.node_stats
    }
    assert [on[n] for n in nodes if nodes[n].op_type == "_Send"] == [["GPU", "0"], ["GPU", "1"]]
    (back,) = [t for t in md.step_stats.transfers if t.tensor_name == "b:0"]
    assert back.src_device.endswith("GPU:1") and back.dst_device.endswith("CPU:0")
    devices = [d.device for d in md.step_stats.dev_stats]
    assert devices == [
        "/job:localhost/replica:0/task:0/device:%s" % d for d in ("CPU:0", "GPU:0", "GPU:1")
    ]
    assert nodes["b"].thread_name.startswith("inter-op #")


def test_step_stats_fields():
    """NodeExecStats carry TF's label, outputs with bytes, and the inline/pool distinction."""
    a = tf.constant([1.0, 2.0], name="a")
    b = tf.square(a, name="b")
    with tf.Session(config=_config(1)) as sess:
        value, nodes, md = _traced(sess, b)
    assert nodes["b"].timeline_label == "b = Square(a)"
    assert nodes["b"].pool == "inline" and nodes["b"].thread_name == "caller"
    assert nodes["b"].output[0].requested_bytes == 8
    assert nodes["b"].output[0].shape == (2,)
    assert nodes["a"].all_end_rel_micros >= 0


def test_pool_parallel_for_covers_the_range_once():
    """parallel_for splits [0, n) into contiguous chunks that cover it exactly once."""
    pool = pools.ThreadPool("test intra", 3)
    hits = np.zeros(100, int)
    lock = threading.Lock()

    def work(lo, hi):
        with lock:
            hits[lo:hi] += 1

    pool.parallel_for(100, work)
    pool.close()
    assert (hits == 1).all()


class _Payload:
    pass


def test_pool_threads_do_not_keep_finished_tasks_alive():
    """An idle pool thread holds nothing of the task it ran last (a finished step's values are
    freed at once, not when that thread next gets work)."""
    pool = pools.ThreadPool("test retention", 2)
    done = threading.Event()
    payload = _Payload()
    ref = weakref.ref(payload)
    try:
        with no_cycle_collector():
            pool.submit(lambda p: done.set(), payload)
            del payload
            assert done.wait(5)
            assert freed(ref)
    finally:
        pool.close()


def test_negative_inter_op_threads_run_each_step_in_the_callers_thread(two_gpus):
    """TF's ``run_in_caller_thread``: on the process-wide pools a negative
    inter_op_parallelism_threads runs every node of a one-device step on the thread that
    called ``run``, expensive ones too, with a deadline or a trace as well; the values are the
    pool's.  A step over two devices (a GPU matmul fetched to the client's CPU: two
    executors in TF) still runs on the pool."""
    with tf.device("/cpu:0"):
        a = tf.constant(np.arange(256 * 256, dtype=np.float32).reshape(256, 256) / 65536.0)
        m = tf.matmul(a, a, name="mm")
    with tf.device("/gpu:0"):
        on_gpu = tf.identity(a)
    with tf.device("/cpu:0"):
        g = tf.matmul(on_gpu, on_gpu, name="g")  # a step over CPU:0 and GPU:0
    with tf.Session(config=tf.ConfigProto(inter_op_parallelism_threads=-1)) as sess:
        a_val = sess.run(a)
        for options in (None, tf.RunOptions(timeout_in_ms=60000)):
            thread, value = _thread_of_matmul(sess, m, options=options)
            assert thread is threading.current_thread()
            np.testing.assert_allclose(value, a_val @ a_val, rtol=1e-5)
        _, nodes, _ = _traced(sess, m)
        assert nodes["mm"].thread_name == "caller"
        thread, _ = _thread_of_matmul(sess, g)
        assert thread is not threading.current_thread()
    with tf.Session() as sess:  # the default: the inter-op pool
        thread, _ = _thread_of_matmul(sess, m)
        assert thread is not threading.current_thread()


def test_an_asynchronous_kernel_failing_before_its_callback_fails_the_step(two_gpus):
    """A ``_Recv`` (an asynchronous kernel) that raises instead of calling back ends the step
    with its error at once: the step does not wait for a callback that will never come."""
    with tf.device("/cpu:0"):
        a = tf.constant(np.ones((8, 8), np.float32))
    with tf.device("/gpu:0"):
        g = tf.matmul(a, a, name="g")  # fetched to the client's CPU through a _Recv
    sess = tf.Session()
    eplan = sess._impl.plan([g], [], [])
    recv = eplan.fetch_slots[0][0]
    assert eplan.is_async[recv]

    def broken(ctx, ins, done):
        raise RuntimeError("broken before its callback")

    eplan.kernels[recv] = broken
    outcome = []
    runner = threading.Thread(target=lambda: outcome.append(_error_of(sess.run, g)))
    runner.start()
    runner.join(30)
    assert not runner.is_alive(), "the step hung"
    assert isinstance(outcome[0], tf.errors.InternalError)
    assert "broken before its callback" in str(outcome[0])
    sess.close()


def _error_of(fn, *args):
    try:
        fn(*args)
    except Exception as e:  # noqa: BLE001 - the test looks at it
        return e
    return None


def test_bad_thread_counts():
    """A negative size for a session's own pools is refused with a clear error."""
    with pytest.raises(tf.errors.InvalidArgumentError, match="thread pool size must be >= 0"):
        tf.Session(
            config=tf.ConfigProto(inter_op_parallelism_threads=-1, use_per_session_threads=True)
        )


@pytest.mark.parametrize(
    "axis,keep", [(None, False), (None, True), (1, False), ([1, 2], True), (0, False)]
)
def test_split_reductions_and_add_n_match_numpy(axis, keep):
    """Large reductions and add_n split over the intra-op pool and still equal numpy."""
    rs = np.random.RandomState(2)
    xs = [rs.rand(64, 130, 130) for _ in range(3)]  # over SPLIT_ELEMENTS
    t = tf.constant(xs[0])
    s = tf.reduce_sum(t, axis=axis, keepdims=keep, name="s")
    m = tf.reduce_mean(t, axis=axis, keepdims=keep, name="m")
    n = tf.add_n([tf.constant(x) for x in xs], name="n")
    np_axis = tuple(axis) if isinstance(axis, list) else axis
    with tf.Session(config=_config(1, intra=2)) as sess:
        (sv, mv, nv), nodes, _ = _traced(sess, [s, m, n])
    np.testing.assert_allclose(sv, np.sum(xs[0], axis=np_axis, keepdims=keep))
    np.testing.assert_allclose(mv, np.mean(xs[0], axis=np_axis, keepdims=keep))
    np.testing.assert_allclose(nv, xs[0] + xs[1] + xs[2])
    assert len(nodes["n"].chunks) == 2
    assert len(nodes["s"].chunks) == (0 if axis == 0 else 2)


def test_a_recv_waiting_for_its_value_holds_no_thread():
    """One inter-op thread, and a CPU matmul that needs a GPU matmul's result: the CPU side's
    _Recv is issued first and waits; were it holding the only thread, the GPU matmul could never
    run.  It holds none (an asynchronous kernel): the step completes, the wait shows in the
    _Recv's span, and both matmuls ran on the one thread."""
    tf.config.emulate_gpus(2)
    a_np = np.random.RandomState(2).rand(200, 200).astype(np.float32) / 200
    with tf.device("/gpu:0"):
        b = tf.matmul(tf.constant(a_np, name="a"), tf.constant(a_np, name="a2"), name="b")
    with tf.device("/cpu:0"):
        c = tf.matmul(b, b, name="c")
    with tf.Session(config=_config(1, operation_timeout_in_ms=60000)) as sess:
        value, nodes, md = _traced(sess, c)
    np.testing.assert_allclose(value, (a_np @ a_np) @ (a_np @ a_np), rtol=1e-4)
    (recv,) = [n for n in nodes.values() if n.op_type == "_Recv"]
    (send,) = [n for n in nodes.values() if n.op_type == "_Send"]
    assert recv.all_start_micros <= nodes["b"].all_start_micros
    assert recv.end_micros >= send.all_start_micros  # it ended when the value came
    assert nodes["b"].thread_name == nodes["c"].thread_name == "inter-op #0"
    assert send.thread_name == "inter-op #0"  # inline after b, on its thread


def _matmul_pair():
    tf.config.emulate_gpus(2)
    ones = np.ones((256, 256), np.float32)
    with tf.device("/gpu:0"):
        g = tf.matmul(tf.constant(ones, name="ga"), tf.constant(ones, name="gb"), name="g")
    with tf.device("/cpu:0"):
        c = tf.matmul(tf.constant(ones, name="ca"), tf.constant(ones, name="cb"), name="c")
    return g, c


def _split_on(name, pool):
    """Whether node ``name`` ran its blocks after the first on threads of ``pool``."""
    return lambda nodes: (
        all(ch.thread_name.split(" #")[0] == pool for ch in nodes[name].chunks if ch.index > 0)
        and bool(nodes[name].chunks)
    )


def test_default_threads_one_shared_pool_and_cpu_kernels_split():
    """TF 1.15's default: every device's ops run on the one shared inter-op pool; a CPU kernel
    splits over the intra-op pool; a GPU kernel (the card's work) does not."""
    g, c = _matmul_pair()
    with tf.Session(config=_config(2, intra=2)) as sess:
        values, nodes, _ = _traced_until(sess, [g.op, c.op], _split_on("c", "intra-op"))
    assert nodes["g"].thread_name.startswith("inter-op #")
    assert nodes["c"].thread_name.startswith("inter-op #")
    assert nodes["g"].chunks == []
    assert {ch.thread_name.split(" #")[0] for ch in nodes["c"].chunks if ch.index > 0} == {
        "intra-op"
    }


def test_default_pool_sizes_count_the_cores_the_process_may_use(monkeypatch):
    """As TF's NumSchedulableCPUs: a process held to 3 cores (taskset, a container's cpuset)
    gets 3 threads per default pool, however many cores the machine has."""
    from minitf.runtime import pools

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 3, 5}, raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    assert pools.default_threads(0) == 3
    assert pools.default_threads(2) == 2
    config = tf.ConfigProto(use_per_session_threads=True)
    with tf.Session(config=config) as sess:
        sess.run(tf.constant(1.0))
        pool_set = sess._impl._pool_sets[0]
        assert (pool_set.inter_threads, pool_set.intra_threads) == (3, 3)


def test_gpu_private_mode_gives_each_gpu_threads_of_its_own(monkeypatch):
    """TF_GPU_THREAD_MODE=gpu_private: a GPU's ops run on its TF_GPU_THREAD_COUNT threads of its
    own (the book's Figure 12-5), and an emulated card splits its kernels over an intra-op pool
    of its own; CPU ops keep the shared pools."""
    monkeypatch.setenv("TF_GPU_THREAD_MODE", "gpu_private")
    monkeypatch.setenv("TF_GPU_THREAD_COUNT", "1")
    g, c = _matmul_pair()
    with tf.Session(config=_config(2, intra=2)) as sess:
        pool_set = sess._impl._pool_sets[0]
        assert (
            pool_set.queue_of(GPU0_NAME) == "GPU:0" and pool_set.queue_of(CPU0_NAME) == "inter-op"
        )
        values, nodes, _ = _traced_until(sess, [g.op, c.op], _split_on("g", "GPU:0 intra-op"))
    assert nodes["g"].thread_name == "GPU:0 inter-op #0"
    assert {ch.thread_name.split(" #")[0] for ch in nodes["g"].chunks if ch.index > 0} == {
        "GPU:0 intra-op"
    }
    assert nodes["c"].thread_name.startswith("inter-op #")
    monkeypatch.setenv("TF_GPU_THREAD_COUNT", "zero")
    with pytest.raises(tf.errors.InvalidArgumentError, match="Invalid TF_GPU_THREAD_COUNT"):
        tf.Session(config=_config(1))


GPU0_NAME = "/job:localhost/replica:0/task:0/device:GPU:0"
CPU0_NAME = "/job:localhost/replica:0/task:0/device:CPU:0"


def test_pass_through_ops_are_never_expensive():
    """Ops that compute nothing (a variable's reference, Identity, StopGradient) run inline
    whatever their size, as TF's VariableOp and IdentityOp are not expensive: a hop to a pool
    thread would cost more than they do.  An op computing on as many elements waits for one."""
    v = tf.Variable(np.ones((300, 300), np.float32), name="v")  # 90000 > INLINE_ELEMENTS
    s = tf.stop_gradient(tf.identity(v, name="r"), name="s")
    a = tf.add(s, 1.0, name="a")
    with tf.Session(config=_config(2)) as sess:
        sess.run(v.initializer)
        expensive = dict(zip(sess.plan(a).names, sess.plan(a).expensive))
        assert sess.run(a)[0, 0] == 2.0
    assert not any(expensive[n] for n in ("v", "v/read", "r", "s"))
    assert expensive["a"]


class _CountingCondition(threading.Condition):
    """A condition that counts the notifications that woke a waiting thread."""

    def __init__(self, wakes):
        super().__init__()
        self.wakes = wakes

    def notify_all(self):
        if self._waiters:
            self.wakes.append(1)
        super().notify_all()


def test_recv_completions_wake_the_waiting_caller_only_when_the_step_ends(monkeypatch):
    """Twelve tensors cross from one device to the other while the caller waits for the step:
    each _Recv's completion hands its successors to the pool and wakes nobody; the caller is
    woken once, when the step has ended (waking it for nothing would cost a thread switch and
    the GIL per crossing)."""
    wakes = []
    init = step_run.StepRun.__init__

    def counting_init(self, *args, **kwargs):
        init(self, *args, **kwargs)
        self.cond = _CountingCondition(wakes)

    monkeypatch.setattr(step_run.StepRun, "__init__", counting_init)
    tf.config.emulate_gpus(2)
    ones = np.ones((256, 256), np.float32)
    with tf.device("/gpu:0"):
        b = tf.matmul(tf.constant(ones, name="x"), tf.constant(ones, name="y"), name="b")
        parts = [tf.add(b, float(k), name="b%d" % k) for k in range(12)]
    with tf.device("/gpu:1"):
        total = tf.add_n([tf.multiply(p, 2.0) for p in parts], name="total")
    counts = []
    with tf.Session(config=_config(2)) as sess:
        for _ in range(10):
            del wakes[:]
            value = sess.run(total)
            counts.append(len(wakes))
    assert value[0, 0] == 2 * (12 * 256 + sum(range(12)))
    assert max(counts) <= 1, counts


def _thread_of_matmul(sess, fetch, **run_kw):
    """Runs ``fetch`` (a MatMul) and returns the thread its kernel ran on."""
    seen = []
    orig = sess._impl.plan

    def spy(*args):
        eplan = orig(*args)
        i = eplan.fetch_slots[0][0]
        k = eplan.kernels[i]

        def recording(ctx, ins):
            seen.append(threading.current_thread())
            return k(ctx, ins)

        eplan.kernels[i] = recording
        return eplan

    sess._impl.plan = spy
    try:
        value = sess.run(fetch, **run_kw)
    finally:
        sess._impl.plan = orig
    return seen[-1], value


def test_one_thread_pools_let_the_caller_run_the_step():
    """Where every pool of the step has one thread, an untraced step runs on the caller (the
    pool thread would run its nodes one by one while the caller waited), with a deadline too
    (checked between nodes); the values are the pool's.  With two inter-op threads (before the
    plan has learnt its costs, ``test_kernel_stats``) or a trace the pool runs it."""
    a = tf.constant(np.arange(256 * 256, dtype=np.float32).reshape(256, 256) / 65536.0)
    m = tf.matmul(a, a, name="mm")
    expected = a_val = None
    with tf.Session(config=_config(1)) as sess:
        thread, value = _thread_of_matmul(sess, m)
        assert thread is threading.current_thread()
        a_val = sess.run(a)
        expected = a_val @ a_val
        np.testing.assert_allclose(value, expected, rtol=1e-5)
        thread, value = _thread_of_matmul(sess, m, options=tf.RunOptions(timeout_in_ms=60000))
        assert thread is threading.current_thread()
        np.testing.assert_allclose(value, expected, rtol=1e-5)
        _, nodes, _ = _traced(sess, m)
        assert nodes["mm"].thread_name == "inter-op #0"
    with tf.Session(config=_config(2)) as sess:
        thread, value = _thread_of_matmul(sess, m)
        assert thread is not threading.current_thread()
        np.testing.assert_allclose(value, expected, rtol=1e-5)


def test_a_step_with_recvs_runs_on_the_caller_of_one_thread_pools_deadline_and_all():
    """One-thread pools, a value crossing devices (its ``_Recv`` completes through a callback)
    and a deadline: the caller runs the step through the general driver without pools, the
    completion handing it the nodes it made ready; the values are the pools'.  A deadline
    shorter than the step stops it between two nodes, and the session goes on working."""
    tf.config.emulate_gpus(2)
    with tf.device("/gpu:0"):
        a = tf.constant(np.full((128, 128), 0.5, np.float32), name="a")
    with tf.device("/gpu:1"):
        b = tf.matmul(a, a, name="b")
        chain = b
        for _ in range(200):  # about 8 ms of matmuls, one thread
            chain = tf.matmul(chain, a)
    seen = []
    with tf.Session(config=_config(1)) as sess:
        orig = sess._impl.plan

        def spy(*args):
            eplan = orig(*args)
            i = eplan.names.index("b")
            k = eplan.kernels[i]
            if not getattr(k, "spied", False):

                def recording(ctx, ins):
                    seen.append(threading.current_thread())
                    return k(ctx, ins)

                recording.spied = True
                eplan.kernels[i] = recording
            return eplan

        sess._impl.plan = spy
        value = sess.run(b, options=tf.RunOptions(timeout_in_ms=60000))
        sess._impl.plan = orig
        assert seen == [threading.current_thread()]
        np.testing.assert_allclose(value, np.full((128, 128), 32.0))
        with pytest.raises(tf.errors.DeadlineExceededError, match="Timed out waiting"):
            sess.run(chain, options=tf.RunOptions(timeout_in_ms=1))
        np.testing.assert_allclose(sess.run(b), np.full((128, 128), 32.0))
