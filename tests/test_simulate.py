"""The simulator (minitf.runtime.simulate): the scheduler of "Parallel Execution" on a virtual
clock, with Figure 12-5 as the running example."""

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import minitf as tf
from minitf.runtime import cost_model as C
from minitf.runtime import simulate as S
from minitf.runtime.cost_model import CostModel
from minitf.runtime.simulate import Simulation, figure_12_5, simulate

GPU0 = "/job:localhost/replica:0/task:0/device:GPU:0"
GPU1 = "/job:localhost/replica:0/task:0/device:GPU:1"
CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"


@pytest.fixture(autouse=True)
def two_emulated_gpus():
    tf.reset_default_graph()
    tf.config.emulate_gpus(2)
    yield
    tf.config.emulate_gpus(None)


# -- helpers ---------------------------------------------------------------------------------


def dump(stats):
    """Every field of a StepStats as plain tuples, for exact comparisons."""
    devs = []
    for d in stats.dev_stats:
        nodes = []
        for n in d.node_stats:
            nodes.append(
                (
                    n.node_name,
                    n.op_type,
                    n.all_start_micros,
                    n.op_start_rel_micros,
                    n.op_end_rel_micros,
                    n.all_end_rel_micros,
                    n.scheduled_micros,
                    n.thread_id,
                    n.thread_name,
                    n.pool,
                    n.timeline_label,
                    tuple((o.slot, o.dtype, o.shape, o.requested_bytes) for o in n.output),
                    tuple(
                        (c.index, c.thread_id, c.thread_name, c.start_micros, c.end_micros)
                        for c in n.chunks
                    ),
                )
            )
        devs.append((d.device, tuple(nodes)))
    transfers = tuple(
        (t.tensor_name, t.src_node, t.dst_node, t.src_device, t.dst_device, t.bytes, t.micros)
        for t in stats.transfers
    )
    return tuple(devs), transfers


def nodes_of(stats):
    """{node name: (NodeExecStats, device)}."""
    return {n.node_name: (n, d.device) for d in stats.dev_stats for n in d.node_stats}


def interval(stats, name):
    n = nodes_of(stats)[name][0]
    return n.all_start_micros, n.end_micros


def check_dependencies(sim, stats):
    """Every node starts no earlier than every data or control input of it ends."""
    nodes = nodes_of(stats)
    names = sim.eplan.names
    assert len(nodes) == sim.plan.n
    for i, succ in enumerate(sim.plan.successors):
        end_i = nodes[names[i]][0].end_micros
        for j in succ:
            assert nodes[names[j]][0].all_start_micros >= end_i, (names[i], names[j])


def check_threads_exclusive(stats):
    """No thread (inter-op, intra-op or the caller) ever runs two things at once (a _Recv holds
    no thread while it waits)."""
    busy = {}
    for d in stats.dev_stats:
        for n in d.node_stats:
            if n.op_type == "_Recv":
                continue
            busy.setdefault(n.thread_name, []).append((n.all_start_micros, n.end_micros))
            for c in n.chunks[1:]:  # chunk 0 runs on the node's own thread
                busy.setdefault(c.thread_name, []).append((c.start_micros, c.end_micros))
    for thread, spans in busy.items():
        spans.sort()
        for (s0, e0), (s1, e1) in zip(spans, spans[1:]):
            assert s1 >= e0, (thread, (s0, e0), (s1, e1))


def fig_sim(sess=None, **kw):
    """Figure 12-5 as the book draws it: each GPU with pools of its own (gpu_private, two
    inter-op threads each), its ops run as targets (no fetched value crosses to the CPU)."""
    fig = figure_12_5()
    sess = sess or tf.Session()
    kw.setdefault("inter_op_threads", 2)
    kw.setdefault("intra_op_threads", 3)
    kw.setdefault("gpu_thread_mode", "gpu_private")
    kw.setdefault("gpu_thread_count", 2)
    return fig, sess, Simulation(sess, fig_ops(fig), **kw)


def fig_ops(fig):
    return [t.op for t in fig.values()]


# -- reproducibility and the dependency rule --------------------------------------------------


def test_two_simulations_give_identical_records():
    fig, sess, sim1 = fig_sim()
    sim2 = Simulation(
        tf.Session(),
        fig_ops(fig),
        inter_op_threads=2,
        intra_op_threads=3,
        gpu_thread_mode="gpu_private",
        gpu_thread_count=2,
    )
    r1, r2 = sim1.run(), sim2.run()
    assert dump(r1) == dump(r2)
    assert sim1.events == sim2.events
    # and the record is not trivial: 9 nodes on two GPUs
    assert [d.device for d in r1.dev_stats] == [GPU0, GPU1]
    assert len(nodes_of(r1)) == 9


def test_reset_replays_the_same_events():
    _, _, sim = fig_sim()
    first = list(sim)
    record = dump(sim.run())
    sim.reset()
    assert sim.time == 0 and not sim.done and sim.events == []
    assert list(sim) == first
    assert dump(sim.run()) == record


def test_simulate_equals_simulation_run():
    fig = figure_12_5()
    sess = tf.Session()
    a = simulate(sess, list(fig.values()), inter_op_threads=2, intra_op_threads=3)
    b = Simulation(sess, list(fig.values()), inter_op_threads=2, intra_op_threads=3).run()
    assert dump(a) == dump(b)


def test_every_node_starts_after_its_inputs_end():
    _, _, sim = fig_sim()
    stats = sim.run()
    check_dependencies(sim, stats)
    check_threads_exclusive(stats)
    assert interval(stats, "D")[0] >= interval(stats, "C")[1]
    assert interval(stats, "A")[0] >= max(interval(stats, "A_x")[1], interval(stats, "A_w")[1])


def test_control_dependencies_delay_ops():
    # the book's example: x and y wait for a and b although they need neither
    a = tf.constant(1.0)
    b = a + 2.0
    with tf.control_dependencies([a, b]):
        x = tf.constant(3.0)
        y = tf.constant(4.0)
    z = x + y
    sess = tf.Session()
    sim = Simulation(sess, z, inter_op_threads=2, intra_op_threads=2)
    pending = sim.pending_counts()
    assert pending[x.op.name] == 2 and pending[y.op.name] == 2  # ^a, ^b
    assert pending[z.op.name] == 2 and pending[b.op.name] == 2
    # the sources are cheap: the caller will run them inline, last made ready first; they
    # include the _Recv on the CPU that z's value crosses to the caller by
    (recv,) = [n for n in sim.eplan.nodes if n.type == "_Recv"]
    assert recv.device == CPU0 and recv.get_attr("tensor_name") == z.name
    assert sim.inline_pending() == {"caller": [recv.name, b.op.inputs[1].op.name, a.op.name]}
    assert sim.ready_queues() == {"inter-op": []}
    stats = sim.run()
    check_dependencies(sim, stats)
    b_end = interval(stats, b.op.name)[1]
    assert interval(stats, x.op.name)[0] >= b_end
    assert interval(stats, y.op.name)[0] >= b_end
    # everything is cheap: the caller runs the whole step inline
    assert {n.pool for n, _ in nodes_of(stats).values()} == {"inline"}
    assert {n.thread_name for n, _ in nodes_of(stats).values()} == {"caller"}
    assert sess.run(z) == 7.0

    # without the control dependencies, x can run before b is done
    tf.reset_default_graph()
    a = tf.constant(1.0)
    b = a + 2.0
    x = tf.constant(3.0)
    y = tf.constant(4.0)
    z = x + y
    stats = simulate(tf.Session(), [z, b], inter_op_threads=2, intra_op_threads=2)
    assert interval(stats, x.op.name)[0] < interval(stats, b.op.name)[1]


# -- inter-op parallelism --------------------------------------------------------------------


def two_branches():
    with tf.device("/gpu:0"):
        p = tf.square(tf.ones([512, 512], name="p_in"), name="p")
        q = tf.square(tf.ones([512, 512], name="q_in"), name="q")
    return p, q


def overlap(s1, s2):
    return s1[0] < s2[1] and s2[0] < s1[1]


def test_two_inter_op_threads_run_independent_branches_in_parallel():
    p, q = two_branches()
    sess = tf.Session()
    par = simulate(sess, [p, q], inter_op_threads=2, intra_op_threads=1)
    ser = simulate(sess, [p, q], inter_op_threads=1, intra_op_threads=1)
    assert overlap(interval(par, "p"), interval(par, "q"))
    assert not overlap(interval(ser, "p"), interval(ser, "q"))
    threads_par = {nodes_of(par)[n][0].thread_name for n in "pq"}
    assert threads_par == {"inter-op #0", "inter-op #1"}  # the shared pool's
    assert {nodes_of(ser)[n][0].thread_name for n in "pq"} == {"inter-op #0"}
    end = lambda s: max(n.end_micros for n, _ in nodes_of(s).values())  # noqa: E731
    assert end(par) < end(ser)
    check_threads_exclusive(par)
    check_threads_exclusive(ser)


def test_expensive_nodes_queue_fifo_and_a_thread_keeps_the_one_it_readied():
    with tf.device("/gpu:0"):
        outs = [
            tf.square(tf.constant(1.0, shape=[256, 256], name="in%d" % k), name="sq%d" % k)
            for k in range(3)
        ]
    sim = Simulation(tf.Session(), [o.op for o in outs], inter_op_threads=2, intra_op_threads=1)
    assert sim.ready_queues() == {"inter-op": ["in0", "in1", "in2"]}
    ev = [sim.next_event() for _ in range(2)]
    assert [(e.kind, e.node, e.thread) for e in ev] == [
        ("start", "in0", "inter-op #0"),
        ("start", "in1", "inter-op #1"),
    ]
    assert sim.ready_queues() == {"inter-op": ["in2"]}  # both threads busy: in2 waits
    assert sim.running() == {"inter-op #0": "in0", "inter-op #1": "in1"}
    stats = sim.run()
    nodes = nodes_of(stats)
    # each thread goes straight on with the square its node made ready (TF's executor keeps
    # one expensive node for the thread that readied it): in2 waits for a thread with nothing
    # left to do
    for k in (0, 1):
        sq = nodes["sq%d" % k][0]
        assert sq.thread_name == "inter-op #%d" % k and sq.all_start_micros == 1
    first_free = min(nodes["sq%d" % k][0].end_micros for k in (0, 1))
    assert nodes["in2"][0].all_start_micros == first_free > 1
    assert nodes["in2"][0].scheduled_micros == 0  # though ready from the start


def test_a_send_runs_inline_and_a_recv_hands_its_successors_to_the_pool():
    with tf.device("/gpu:0"):
        x = tf.square(tf.ones([512, 512], name="x_in"), name="x")
        here = tf.reduce_sum(x, name="here")  # expensive: its input is large
    with tf.device("/gpu:1"):
        there = tf.reduce_sum(x, name="there")  # the same, once x crossed to GPU:1
    sim = Simulation(tf.Session(), [here.op, there.op], inter_op_threads=2, intra_op_threads=1)
    stats = sim.run()
    nodes = nodes_of(stats)
    (send,) = [n for n, _ in nodes.values() if n.op_type == "_Send"]
    (recv,) = [n for n, _ in nodes.values() if n.op_type == "_Recv"]
    x_end = nodes["x"][0].end_micros
    # x's _Send (never expensive, however large its tensor) runs inline on x's thread as soon
    # as x ends; here waits for a pool thread and gets the other one at once
    assert send.thread_name == nodes["x"][0].thread_name and send.pool == "inter_op"
    assert send.all_start_micros == nodes["here"][0].all_start_micros == x_end
    assert nodes["here"][0].thread_name != send.thread_name
    # the _Recv was issued by the caller at once; it ends when the tensor has crossed
    assert (recv.thread_name, recv.all_start_micros) == ("caller", 0)
    assert recv.end_micros == send.end_micros + C.transfer_micros(512 * 512 * 4)
    assert nodes[recv.node_name][1] == GPU1
    # what a _Recv makes ready goes to the pool's queue, cheap or not
    assert nodes["there"][0].thread_name.startswith("inter-op #")
    assert nodes["there"][0].scheduled_micros == recv.end_micros
    assert nodes["there"][1] == GPU1
    assert nodes["here"][0].pool == nodes["there"][0].pool == "inter_op"
    check_threads_exclusive(stats)


# -- intra-op splitting ------------------------------------------------------------------------


def test_split_kernel_runs_chunks_on_distinct_intra_op_threads():
    fig = figure_12_5()
    sess = tf.Session()
    private = dict(gpu_thread_mode="gpu_private", gpu_thread_count=2)
    split = simulate(sess, fig_ops(fig), inter_op_threads=2, intra_op_threads=3, **private)
    whole = simulate(sess, fig_ops(fig), inter_op_threads=2, intra_op_threads=1, **private)
    shared = simulate(sess, fig_ops(fig), inter_op_threads=2, intra_op_threads=3)
    a = nodes_of(split)["A"][0]
    assert len(a.chunks) == 3
    assert [c.index for c in a.chunks] == [0, 1, 2]
    threads = [c.thread_name for c in a.chunks]
    assert len(set(threads)) == 3
    assert threads[0] == a.thread_name  # chunk 0: the node's own thread
    assert all(t.startswith("GPU:0 intra-op #") for t in threads[1:])
    assert len({c.thread_id for c in a.chunks}) == 3
    for c in a.chunks:  # in parallel, inside the node
        assert c.start_micros == a.all_start_micros and c.end_micros <= a.end_micros
    a1 = nodes_of(whole)["A"][0]
    assert len(a1.chunks) == 1  # one thread: a single chunk
    cost = CostModel().micros(fig["A"].op, "GPU")
    assert a1.all_end_rel_micros == cost + C.CHUNK_OVERHEAD_MICROS
    assert a.all_end_rel_micros == -(-cost // 3) + C.CHUNK_OVERHEAD_MICROS
    assert a.all_end_rel_micros < a1.all_end_rel_micros / 2
    # B, C, D, E are not splittable kernels
    assert all(not nodes_of(split)[n][0].chunks for n in "BCDE")
    # with TF's default thread mode a GPU kernel is the card's work: no host threads split it
    a2 = nodes_of(shared)["A"][0]
    assert a2.chunks == [] and a2.thread_name.startswith("inter-op #")
    assert a2.all_end_rel_micros == cost


def test_small_matmuls_and_inline_nodes_do_not_split():
    with tf.device("/gpu:0"):
        small = tf.matmul(tf.ones([64, 64]), tf.ones([64, 64]), name="small")  # 2^18 < 2^21
    stats = simulate(tf.Session(), small, inter_op_threads=2, intra_op_threads=4)
    assert nodes_of(stats)["small"][0].chunks == []


def test_intra_op_pool_is_shared_between_split_nodes():
    with tf.device("/cpu:0"):
        m1 = tf.matmul(
            tf.constant(1.0, shape=[512, 512], name="a1"),
            tf.constant(1.0, shape=[512, 512], name="b1"),
            name="m1",
        )
        m2 = tf.matmul(
            tf.constant(1.0, shape=[512, 512], name="a2"),
            tf.constant(1.0, shape=[512, 512], name="b2"),
            name="m2",
        )
    stats = simulate(tf.Session(), [m1, m2], inter_op_threads=2, intra_op_threads=3)
    n1, n2 = nodes_of(stats)["m1"][0], nodes_of(stats)["m2"][0]
    assert {c.thread_name for c in n1.chunks[1:] + n2.chunks[1:]} <= {
        "intra-op #0",
        "intra-op #1",
        "intra-op #2",
    }
    # both want 2 intra-op threads; the pool has 3, so one chunk of the later node waits
    assert len(n1.chunks) == len(n2.chunks) == 3
    assert any(c.start_micros > n2.all_start_micros for c in n2.chunks[1:])
    assert n2.all_end_rel_micros > n1.all_end_rel_micros
    check_threads_exclusive(stats)


# -- step by step: Figure 12-5 ---------------------------------------------------------------


def test_figure_12_5_step_by_step():
    fig, sess, sim = fig_sim()
    assert set(fig) == set("ABCDE")
    assert sim.time == 0 and not sim.done
    # the sources are the constants; A needs two of them, the others one input each
    assert sim.pending_counts() == {"A": 2, "B": 1, "C": 1, "D": 1, "E": 1}
    # each GPU has a ready queue of its own (gpu_private); the shared pool's is empty
    assert sim.ready_queues() == {"inter-op": [], "GPU:0": ["A_x", "A_w", "B_x"], "GPU:1": ["C_x"]}
    assert sim.running() == {}

    ev = sim.next_event()
    assert ev == S.Event("start", 0, "A_x", GPU0, "GPU:0 inter-op #0")
    assert sim.ready_queues()["GPU:0"] == ["A_w", "B_x"]

    # run until A starts: it is split, so intra-op threads of GPU:0 work for it
    while not (ev.kind == "start" and ev.node == "A"):
        ev = sim.next_event()
    running = sim.running()
    assert running[ev.thread] == "A"
    assert running["GPU:0 intra-op #0"] == "A" and running["GPU:0 intra-op #1"] == "A"
    t_a = ev.time
    ev = sim.next_event()  # C starts on GPU:1 at the same time
    assert (ev.kind, ev.node, ev.time, ev.device) == ("start", "C", t_a, GPU1)
    assert sim.running()["GPU:1 inter-op #0"] == "C"

    # until C ends: D and E were waiting for C only
    while not (ev.kind == "end" and ev.node == "C"):
        assert sim.pending_counts().get("D") == 1 and sim.pending_counts().get("E") == 1
        ev = sim.next_event()
    assert ev.device == GPU1
    assert "D" not in sim.pending_counts() and "E" not in sim.pending_counts()
    # the thread that ran C keeps E for itself (TF's executor); D waits for the other thread
    assert sim.ready_queues()["GPU:1"] == ["D"]
    t_c = sim.time
    e, d = sim.next_event(), sim.next_event()
    assert (e.kind, e.node, e.time, e.thread) == ("start", "E", t_c, "GPU:1 inter-op #0")
    assert (d.kind, d.node, d.time, d.thread) == ("start", "D", t_c, "GPU:1 inter-op #1")
    assert sim.ready_queues()["GPU:1"] == []
    assert sim.pending_counts() == {}

    rest = list(sim)
    assert sim.done and sim.next_event() is None
    assert rest[-1] == S.Event("end", sim.time, "A", GPU0, rest[-1].thread)  # A is the longest
    assert len(sim.events) == 2 * sim.plan.n
    times = [x.time for x in sim.events]
    assert times == sorted(times)
    assert sum(x.kind == "start" for x in sim.events) == sim.plan.n


def test_figure_12_5_devices():
    fig, sess, sim = fig_sim()
    stats = sim.run()
    nodes = nodes_of(stats)
    assert {n for n in nodes if nodes[n][1] == GPU0} == {"A_x", "A_w", "A", "B_x", "B"}
    assert {n for n in nodes if nodes[n][1] == GPU1} == {"C_x", "C", "D", "E"}
    assert stats.transfers == []  # nothing crosses devices in the figure


def test_figure_12_5_in_a_given_graph():
    g = tf.Graph()
    fig = figure_12_5(g)
    assert all(t.graph is g for t in fig.values())
    assert tf.get_default_graph().get_operations() == []
    stats = simulate(tf.Session(graph=g), fig_ops(fig), inter_op_threads=1, intra_op_threads=1)
    assert len(nodes_of(stats)) == 9
    # fetching the tensors rather than running the ops: each value crosses to the client's CPU
    fetched = simulate(
        tf.Session(graph=g), list(fig.values()), inter_op_threads=1, intra_op_threads=1
    )
    nodes = nodes_of(fetched)
    assert len(nodes) == 9 + 2 * 5
    assert sorted(n.op_type for n, d in nodes.values() if d == CPU0) == ["_Recv"] * 5
    assert sorted(t.tensor_name for t in fetched.transfers) == ["%s:0" % x for x in "ABCDE"]


# -- the record ------------------------------------------------------------------------------


def test_record_devices_match_the_placement():
    fig, sess, sim = fig_sim()
    with tf.device("/cpu:0"):
        total = tf.reduce_sum(fig["D"], name="total")
    stats = simulate(sess, [fig["A"], total], inter_op_threads=2, intra_op_threads=2)
    ops = {op.name: op for op in tf.get_default_graph().get_operations()}
    nodes = nodes_of(stats)
    for name, (n, device) in nodes.items():
        if n.op_type in ("_Send", "_Recv"):  # added where a tensor crosses devices
            continue
        assert device == sess.placement.device_of[ops[name]].name
    assert nodes["total"][1] == CPU0
    # devices in session order, only those used; B and E were pruned
    assert [d.device for d in stats.dev_stats] == [CPU0, GPU0, GPU1]
    assert "B" not in nodes and "E" not in nodes
    # D (GPU:1) -> total (CPU:0) crosses devices: 4 MiB at TRANSFER_BYTES_PER_MICRO, through a
    # _Recv on the CPU that total reads; A's value crosses to the client's CPU for the fetch
    tr = {t.tensor_name: t for t in stats.transfers}
    assert sorted(tr) == ["A:0", "D:0"]
    d = tr["D:0"]
    assert d.src_node == "D" and nodes[d.dst_node][0].op_type == "_Recv"
    assert nodes["total"][0].timeline_label == "total = Sum(%s, Const)" % d.dst_node
    assert (d.src_device, d.dst_device, d.bytes) == (GPU1, CPU0, 4 << 20)
    assert d.micros == C.TRANSFER_LATENCY_MICROS + -(-(4 << 20) // C.TRANSFER_BYTES_PER_MICRO)
    assert nodes[d.dst_node][0].end_micros == nodes["total"][0].scheduled_micros


def test_record_fields():
    fig, sess, sim = fig_sim()
    stats = sim.run()
    a = nodes_of(stats)["A"][0]
    assert a.op_type == "MatMul" and a.pool == "inter_op"
    assert a.timeline_label == "A = MatMul(A_x, A_w)"
    assert [(o.slot, o.dtype, o.shape, o.requested_bytes) for o in a.output] == [
        (0, "float32", (512, 512), 512 * 512 * 4)
    ]
    assert a.scheduled_micros == 1 and a.all_start_micros >= 1
    assert a.op_start_rel_micros == 0 and a.op_end_rel_micros == a.all_end_rel_micros
    ids = {n.thread_name: n.thread_id for n, _ in nodes_of(stats).values()}
    assert len(set(ids.values())) == len(ids)  # one id per thread
    # every device's nodes are listed in start order, starting at time 0
    for d in stats.dev_stats:
        starts = [n.all_start_micros for n in d.node_stats]
        assert starts == sorted(starts)
    assert min(n.all_start_micros for n, _ in nodes_of(stats).values()) == 0


def test_feeds_are_arg_nodes_on_the_client_device():
    x = tf.placeholder(tf.float32, [2, 3], name="x")
    u = tf.placeholder(tf.float32, [None, 3], name="u")
    with tf.device("/gpu:0"):
        y = tf.square(x, name="y")
        w = tf.square(u, name="w")
    sess = tf.Session()
    feed = {x: np.ones((2, 3)), u: np.ones((5, 3))}
    stats = simulate(sess, [y, w], feed_dict=feed, inter_op_threads=1, intra_op_threads=1)
    nodes = nodes_of(stats)
    arg = nodes["_arg_x_0_0"][0]
    assert nodes["_arg_x_0_0"][1] == CPU0
    assert arg.op_type == "_Arg" and arg.pool == "inline" and arg.thread_name == "caller"
    assert arg.timeline_label == "_arg_x_0_0 = _Arg()"
    assert [(o.dtype, o.shape, o.requested_bytes) for o in arg.output] == [("float32", (2, 3), 24)]
    # unknown static dimension: zero bytes in the record
    assert nodes["w"][0].output[0].shape == (None, 3)
    assert nodes["w"][0].output[0].requested_bytes == 0
    # the fed value crosses to y's GPU through a _Send/_Recv pair, as every cross-device edge
    trs = {t.tensor_name: t for t in stats.transfers}
    fed = trs["_arg_x_0_0:0"]
    assert fed.src_node == "_arg_x_0_0" and fed.bytes == 24
    assert fed.micros == C.TRANSFER_LATENCY_MICROS + 1
    assert (fed.src_device, fed.dst_device) == (CPU0, GPU0)
    assert nodes["y"][0].timeline_label == "y = Square(%s)" % fed.dst_node
    assert "x" not in nodes  # the placeholder itself is cut off by the feed


def test_simulated_and_real_runs_agree_on_devices():
    fig = figure_12_5()
    sess = tf.Session()
    fetches = list(fig.values())
    vals = sess.run(fetches)
    np.testing.assert_allclose(vals[0], np.full((512, 512), 512.0))  # A
    np.testing.assert_allclose(vals[4], -np.ones((1024, 1024)))  # E
    eplan = sess.plan(fetches)
    real = {(eplan.names[i], eplan.plan.device[i]) for i in range(eplan.plan.n)}
    stats = simulate(sess, fetches, inter_op_threads=2, intra_op_threads=3)
    simulated = {(n.node_name, d.device) for d in stats.dev_stats for n in d.node_stats}
    assert simulated == real
    # and the same as a traced real run records
    md = tf.RunMetadata()
    sess.run(fetches, options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE), run_metadata=md)
    traced = {(n.node_name, d.device) for d in md.step_stats.dev_stats for n in d.node_stats}
    assert traced == simulated


# -- the cost model --------------------------------------------------------------------------


def test_cost_model_defaults():
    fig = figure_12_5()
    cm = CostModel()
    flops = 2 * 512**3
    gpu_flops = C.CPU_FLOPS_PER_MICRO * C.GPU_SPEEDUP
    assert cm.micros(fig["A"].op, "GPU") == C.BASE_MICROS + -(-flops // gpu_flops)
    assert cm.micros(fig["A"].op, "CPU") == C.BASE_MICROS + -(-flops // C.CPU_FLOPS_PER_MICRO)
    assert cm.micros(fig["A"].op, "CPU") > cm.micros(fig["A"].op, "GPU") * 9
    n = 1024 * 1024
    assert cm.micros(fig["B"].op, "GPU") == C.BASE_MICROS + -(
        -n // (C.CPU_ELEMENTS_PER_MICRO * C.GPU_SPEEDUP)
    )
    assert cm.micros(fig["A"].op.inputs[0].op, "GPU") == C.BASE_MICROS  # a constant
    assert cm.micros(tf.no_op(name="nop"), "CPU") == C.BASE_MICROS
    feed = tf.placeholder(tf.float32, [3], name="f")
    arg = tf.Session().plan(feed, {feed: [1, 2, 3]}).nodes[0]
    assert arg.type == "_Arg" and cm.micros(arg, "CPU") == C.BASE_MICROS  # a feed
    # unknown dimensions count as 1
    p = tf.placeholder(tf.float32, [None, 5000])
    assert cm.micros(tf.square(p).op, "CPU") == C.BASE_MICROS + 5
    q = tf.placeholder(tf.float32, [None, 100])
    mm = tf.matmul(q, tf.ones([100, 100]))
    assert cm.micros(mm.op, "CPU") == C.BASE_MICROS + -(-2 * 100 * 100 // C.CPU_FLOPS_PER_MICRO)
    # reductions cost by their input
    s = tf.reduce_sum(tf.ones([1000, 1000]))
    assert cm.micros(s.op, "CPU") == C.BASE_MICROS + 1000


def test_cost_model_overrides():
    fig = figure_12_5()
    sess = tf.Session()
    cm = CostModel(overrides={"Square": 7, "C": 1000, "A": 30.4})
    private = dict(gpu_thread_mode="gpu_private", gpu_thread_count=2)
    stats = simulate(
        sess, fig_ops(fig), cost_model=cm, inter_op_threads=2, intra_op_threads=3, **private
    )
    nodes = nodes_of(stats)
    assert nodes["B"][0].all_end_rel_micros == 7  # by op type
    assert nodes["D"][0].all_end_rel_micros == 7
    assert nodes["C"][0].all_end_rel_micros == 1000  # a name beats its type
    assert nodes["E"][0].all_end_rel_micros == C.BASE_MICROS + 105  # Neg: not overridden
    assert nodes["D"][0].all_start_micros == nodes["C"][0].end_micros
    assert nodes["A"][0].all_end_rel_micros == 10 + C.CHUNK_OVERHEAD_MICROS  # 30 in 3 chunks
    base = simulate(sess, fig_ops(fig), inter_op_threads=2, intra_op_threads=3, **private)
    assert dump(base) != dump(stats)


def test_pool_sizes_default_from_the_session_config(monkeypatch):
    """0 threads: one per core this process may run on (its affinity, as TF counts them)."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 3, 5}, raising=False)
    fig = figure_12_5()
    config = tf.ConfigProto(inter_op_parallelism_threads=3, intra_op_parallelism_threads=0)
    sim = Simulation(tf.Session(config=config), list(fig.values()))
    assert sim.inter_op_threads == 3
    assert sim.intra_op_threads == 3
    caller = tf.ConfigProto(inter_op_parallelism_threads=-1)  # steps run in the caller's thread
    assert Simulation(tf.Session(config=caller), list(fig.values())).inter_op_threads == 1
    assert (sim.gpu_thread_mode, sim.gpu_thread_count) == ("global", 2)  # TF's defaults
    sim = Simulation(
        tf.Session(config=config), fig_ops(fig), inter_op_threads=1, intra_op_threads=2
    )
    assert (sim.inter_op_threads, sim.intra_op_threads) == (1, 2)
    stats = sim.run()
    threads = {n.thread_name for n, _ in nodes_of(stats).values()}
    assert threads == {"inter-op #0"}  # the constants are expensive: none inline


def test_gpu_thread_mode_follows_the_environment(monkeypatch):
    """TF_GPU_THREAD_MODE=gpu_private and TF_GPU_THREAD_COUNT give each GPU its own threads,
    in a simulation as in a session made afterwards."""
    fig = figure_12_5()
    monkeypatch.setenv("TF_GPU_THREAD_MODE", "gpu_private")
    monkeypatch.setenv("TF_GPU_THREAD_COUNT", "1")
    sim = Simulation(tf.Session(), fig_ops(fig), inter_op_threads=2, intra_op_threads=1)
    assert (sim.gpu_thread_mode, sim.gpu_thread_count) == ("gpu_private", 1)
    threads = {n.thread_name for n, _ in nodes_of(sim.run()).values()}
    assert threads == {"GPU:0 inter-op #0", "GPU:1 inter-op #0"}
    monkeypatch.setenv("TF_GPU_THREAD_MODE", "gpu_everywhere")
    with pytest.raises(tf.errors.InvalidArgumentError, match="Invalid TF_GPU_THREAD_MODE"):
        Simulation(tf.Session(), fig_ops(fig))


def test_bad_arguments():
    fig = figure_12_5()
    sess = tf.Session()
    fetches = list(fig.values())
    with pytest.raises(ValueError):
        Simulation(sess, fetches, inter_op_threads=-1)
    with pytest.raises(ValueError):
        Simulation(sess, fetches, intra_op_threads=-2)
    with pytest.raises(ValueError):
        simulate(sess, fetches, inter_op_threads=-1)
    with pytest.raises(TypeError):
        Simulation(sess, fetches, inter_op_threads=1.5)
    with pytest.raises(TypeError):
        Simulation(sess, fetches, intra_op_threads=True)
    with pytest.raises(TypeError):
        Simulation(sess, fetches, cost_model={"A": 3})
    with pytest.raises(ValueError):
        CostModel(overrides={"A": -1})
    with pytest.raises(ValueError, match="gpu_thread_mode"):
        Simulation(sess, fetches, gpu_thread_mode="gpu_shared_memory")
    with pytest.raises(ValueError):
        Simulation(sess, fetches, gpu_thread_count=-1)
    with pytest.raises(ValueError):
        CostModel(overrides={"A": "fast"})
    with pytest.raises(TypeError):
        CostModel(overrides={3: 1})
    with pytest.raises(ValueError):  # the session's own fetch checking
        Simulation(sess, "no_such_op:0")


# -- properties on random graphs ---------------------------------------------------------------


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(
            st.integers(0, 2),
            st.booleans(),
            st.integers(0, 1000),
            st.integers(0, 1000),
            st.booleans(),
        ),
        min_size=1,
        max_size=12,
    ),
    st.integers(1, 3),
    st.integers(1, 3),
)
def test_random_graphs_respect_the_rules(spec, inter, intra):
    g = tf.Graph()
    with g.as_default():
        devices = ["/cpu:0", "/gpu:0", "/gpu:1"]
        tensors = []
        for k, (dev, big, i, j, control) in enumerate(spec):
            with tf.device(devices[dev]):
                if not tensors or (i % 3 == 0):
                    size = 256 if big else 8
                    t = tf.ones([size, size], name="src%d" % k)
                else:
                    x = tensors[i % len(tensors)]
                    y = tensors[j % len(tensors)]
                    deps = [tensors[(i + j) % len(tensors)].op] if control else []
                    with tf.control_dependencies(deps):
                        if x.shape.as_list() == y.shape.as_list():
                            t = tf.add(x, y, name="n%d" % k)
                        else:
                            t = tf.square(x, name="n%d" % k)
            tensors.append(t)
    sess = tf.Session(graph=g)
    sim = Simulation(sess, tensors, inter_op_threads=inter, intra_op_threads=intra)
    stats = sim.run()
    check_dependencies(sim, stats)
    check_threads_exclusive(stats)
    assert len(sim.events) == 2 * sim.plan.n
    again = Simulation(sess, tensors, inter_op_threads=inter, intra_op_threads=intra).run()
    assert dump(again) == dump(stats)
    for d in stats.dev_stats:
        for n in d.node_stats:
            assert n.pool == ("inline" if n.thread_name == "caller" else "inter_op")
            assert len(n.chunks) <= intra
