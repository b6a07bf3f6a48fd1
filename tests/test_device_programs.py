"""Tests for ``minitf.runtime.device_programs``: a step over devices that each have one thread
runs each device's partition as one program on that thread.

Book sections: "Parallel Execution" (each GPU's own threads, ``TF_GPU_THREAD_MODE=gpu_private``)
and "Data parallelism" (towers on the cards of one machine).  The programs must compute what the
general driver computes, each on its own device's thread, and keep the general driver's
promises: no deadlock whatever the cards send each other, a failure or a deadline stops every
program and leaves the session's threads free for the next step, and a value handed to another
card lives until its ``_Recv`` has it.
"""

import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import minitf as tf
from minitf.framework.rendezvous import LocalRendezvous
from minitf.runtime import device_programs
from minitf.runtime.device_programs import DeviceRun, transfer_order
from minitf.runtime.scheduler import Plan

pytestmark = pytest.mark.usefixtures("two_gpus")


@pytest.fixture
def one_thread_each(monkeypatch):
    """Every GPU with one thread of its own; sessions made with :func:`_config` give the CPU
    one inter-op and one intra-op thread."""
    monkeypatch.setenv("TF_GPU_THREAD_MODE", "gpu_private")
    monkeypatch.setenv("TF_GPU_THREAD_COUNT", "1")


def _config(inter=1):
    return tf.ConfigProto(
        inter_op_parallelism_threads=inter,
        intra_op_parallelism_threads=1,
        use_per_session_threads=True,
    )


@pytest.fixture
def runs(monkeypatch):
    """The programs of each DeviceRun: (thread name, device names of its nodes)."""
    seen = []
    program = DeviceRun._program

    def watched(self, records, caller):
        devices = {self.eplan.plan.device[r[0]].rsplit("device:", 1)[-1] for r in records}
        seen.append((threading.current_thread().name, devices))
        return program(self, records, caller)

    monkeypatch.setattr(DeviceRun, "_program", watched)
    return seen


def _towers(towers=2, seed=0):
    """Seed 003's pattern, small: a dense layer per tower on its card, the variables and the
    averaged update on the CPU."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((8, 5)).astype(np.float32)
    with tf.device("/cpu:0"):
        w = tf.Variable(rng.standard_normal((5, 3)).astype(np.float32), name="w")
        b = tf.Variable(np.zeros(3, np.float32), name="b")
    opt = tf.train.GradientDescentOptimizer(0.1)
    grads = []
    for i in range(towers):
        with tf.device("/gpu:%d" % i):
            loss = tf.reduce_mean(tf.square(tf.nn.relu(tf.matmul(tf.constant(x[i::2]), w) + b)))
            grads.append(opt.compute_gradients(loss, [w, b]))
    with tf.device("/cpu:0"):
        mean = [
            (tf.reduce_mean(tf.stack([g for g, _ in pairs]), 0), pairs[0][1])
            for pairs in zip(*grads)
        ]
        for g, _ in mean:
            tf.add_to_collection("towers_mean", g)
        train = opt.apply_gradients(mean)
    return train, [w, b]


def _matmul_sum(scale=1.0, name=None):
    """A value computed by a matmul (an expensive node: a plan of cheap nodes only runs on the
    caller, without pools)."""
    return tf.reduce_sum(tf.matmul(tf.ones([2, 2]), tf.ones([2, 2]) * scale), name=name)


def _trained(steps=3):
    with tf.Graph().as_default():
        train, variables = _towers()
        with tf.Session(config=_config()) as sess:
            sess.run(tf.global_variables_initializer())
            for _ in range(steps):
                sess.run(train)
            return sess.run(variables)


def test_towers_run_as_one_program_per_device_and_train_as_the_general_driver_does(
    one_thread_each, runs, monkeypatch
):
    """Each card's partition runs on the card's own thread, the CPU's on the caller, and the
    variables after three steps are the general driver's to the last bit."""
    got = _trained()
    caller = threading.current_thread().name
    assert runs, "the towers did not run as device programs"
    by_thread = {}
    for thread, devices in runs:
        by_thread.setdefault(thread, set()).update(devices)
    assert by_thread[caller] == {"CPU:0"}
    assert by_thread["GPU:0 inter-op #0"] == {"GPU:0"}
    assert by_thread["GPU:1 inter-op #0"] == {"GPU:1"}
    runs.clear()
    monkeypatch.setenv("TF_GPU_THREAD_COUNT", "2")  # two threads a card: the general driver
    want = _trained()
    assert not runs
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)


def test_only_steps_whose_every_device_has_one_thread_run_as_programs(
    one_thread_each, runs, monkeypatch
):
    """Two inter-op threads for the CPU, or a traced step (its step stats show the general
    driver's threads), keep the general driver."""
    with tf.Graph().as_default():
        train, _ = _towers()
        with tf.Session(config=_config(inter=2)) as sess:
            sess.run(tf.global_variables_initializer())
            sess.run(train)
        assert not runs
        with tf.Session(config=_config()) as sess:
            sess.run(tf.global_variables_initializer())
            options = tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE)
            sess.run(train, options=options, run_metadata=tf.RunMetadata())
            assert not runs
            sess.run(train)
            assert runs


def test_transfer_order_puts_each_send_before_its_recv():
    """Nodes 0 (a _Send) and 1 (its _Recv) have no edge between them in the plan: the order
    adds one; the rest is breadth first."""
    plan = Plan([[], [], [(1, 0)], [(0, 0)]], [[], [], [], []], ["a", "b", "b", "a"])
    order = transfer_order(plan, [(3, 1)])
    assert order.index(3) < order.index(1) < order.index(2)
    assert sorted(order) == [0, 1, 2, 3]


def test_cards_that_send_each_other_tensors_both_ways_do_not_deadlock(one_thread_each, runs):
    """GPU:0 needs a value of GPU:1 and GPU:1 one of GPU:0, each computed from a value it
    received: a program that waited for its first _Recv in the wrong order would wait
    forever."""
    with tf.Graph().as_default():
        with tf.device("/gpu:0"):
            a = _matmul_sum()  # 8
        with tf.device("/gpu:1"):
            b = _matmul_sum(2.0)  # 16
            b2 = b + a
        with tf.device("/gpu:0"):
            a2 = a + b
            c = a2 * b2
        with tf.device("/gpu:1"):
            d = b2 - a2
        with tf.Session(config=_config()) as sess:  # (a deadlock would end at the deadline)
            options = tf.RunOptions(timeout_in_ms=20000)
            assert sess.run([c, d], options=options) == [24.0 * 24.0, 0.0]
    assert runs


def test_a_failing_kernel_on_a_card_stops_every_program_and_names_its_node(one_thread_each, runs):
    """GPU:1's reshape fails; GPU:0, waiting for its result, is released by the aborted
    rendezvous; the step raises the first error with the failing node, and the next step runs
    on the same threads."""
    with tf.Graph().as_default():
        n = tf.placeholder(tf.int32, [])
        with tf.device("/gpu:1"):
            r = tf.reshape(tf.ones([2, 3]), tf.stack([n, -1]), name="bad_reshape")
        with tf.device("/gpu:0"):
            out = tf.reduce_sum(tf.matmul(r, tf.ones([3, 1])))
        with tf.Session(config=_config()) as sess:
            with pytest.raises(tf.errors.InvalidArgumentError, match="bad_reshape"):
                sess.run(out, {n: 4})
            assert sess.run(out, {n: 2}) == 6.0
    assert runs


def test_a_deadline_stops_a_program_waiting_for_a_tensor_that_never_comes(
    one_thread_each, runs, monkeypatch
):
    """A _Send whose tensor is lost: the _Recv on GPU:1 would wait forever; the step's
    deadline aborts the rendezvous, the step raises DeadlineExceededError, and GPU:1's one
    thread is free for the next step."""
    with tf.Graph().as_default():
        with tf.device("/gpu:0"):
            a = _matmul_sum(name="lost")
        with tf.device("/gpu:1"):
            b = a + 1.0
        with tf.Session(config=_config()) as sess:
            assert sess.run(b) == 9.0
            send = LocalRendezvous.send

            def lossy(self, key, value):
                if ";lost:0;" not in key:
                    send(self, key, value)

            monkeypatch.setattr(LocalRendezvous, "send", lossy)
            with pytest.raises(tf.errors.DeadlineExceededError):
                sess.run(b, options=tf.RunOptions(timeout_in_ms=300))
            monkeypatch.setattr(LocalRendezvous, "send", send)
            assert sess.run(b) == 9.0
    assert runs


def test_a_value_handed_to_another_card_lives_until_its_recv_has_it(
    one_thread_each, runs, monkeypatch
):
    """GPU:0's tensor is still charged to GPU:0 when GPU:1's _Recv receives it; once the step
    has ended only the constants are left on either card."""
    with tf.Graph().as_default():
        with tf.device("/gpu:0"):
            a = tf.constant(1.0, shape=[64, 64], name="ones") * 2.0
            a = tf.identity(a * 1.0, name="sent")
            m = _matmul_sum()
        with tf.device("/gpu:1"):
            b = a + 1.0
        with tf.Session(config=_config()) as sess:
            sess.run([b, m])
            (alloc0,) = [d.allocator for d in sess._impl.devices if d.name.endswith("GPU:0")]
            seen = []
            recv_async = LocalRendezvous.recv_async

            def watched(self, key, done):
                def arrived(value, error):
                    if ";sent:0;" in key:
                        seen.append({op for _, _, op, _, _ in alloc0.live_allocations()})
                    done(value, error)

                recv_async(self, key, arrived)

            monkeypatch.setattr(LocalRendezvous, "recv_async", watched)
            np.testing.assert_array_equal(sess.run([b, m])[0], 3.0)
            assert len(seen) == 1 and "mul" in seen[0]
            left = {op for _, _, op, _, _ in alloc0.live_allocations()}
            assert {"ones", "mul/y", "mul_1/y"} <= left and not {"mul", "mul_1", "sent"} & left
    assert runs


def test_a_plan_with_a_kernel_that_waits_for_anything_else_keeps_the_general_driver(
    one_thread_each, runs
):
    """A queue's dequeue could wait on its device's only thread for an enqueue of the same
    step: such a plan is never made into programs."""
    with tf.Graph().as_default():
        with tf.device("/cpu:0"):
            q = tf.FIFOQueue(2, tf.float32)
            enqueue = q.enqueue(1.0)
        with tf.device("/gpu:0"):
            out = q.dequeue() * _matmul_sum()
        with tf.Session(config=_config()) as sess:
            sess.run(enqueue)
            assert sess.run(out) == 8.0
            assert device_programs.programs(sess.plan(out), None) is None
    assert not runs


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(
        st.tuples(st.integers(0, 2), st.integers(0, 99), st.integers(0, 99), st.booleans()),
        min_size=1,
        max_size=24,
    )
)
def test_any_graph_over_three_devices_computes_what_numpy_does(one_thread_each, runs, ops):
    """Random graphs of adds and multiplies, each node on the CPU or one of the cards, reading
    any two earlier values (so tensors cross between devices both ways, in any pattern): the
    programs neither deadlock (the deadline would end the step) nor compute anything else
    than numpy."""
    devices = ["/cpu:0", "/gpu:0", "/gpu:1"]
    with tf.Graph().as_default():
        with tf.device("/gpu:1"):
            nodes, want = [_matmul_sum(0.25)], [2.0]  # an expensive node: the pools run it
        for device, i, j, add in ops:
            x, y = i % len(nodes), j % len(nodes)
            with tf.device(devices[device]):
                nodes.append(nodes[x] + nodes[y] if add else nodes[x] * nodes[y] * 0.5)
            want.append(want[x] + want[y] if add else want[x] * want[y] * 0.5)
        with tf.Session(config=_config()) as sess:
            got = sess.run(nodes, options=tf.RunOptions(timeout_in_ms=20000))
    np.testing.assert_allclose(got, np.float32(want), rtol=1e-5)
    assert runs


def test_while_one_step_runs_as_programs_another_goes_through_the_general_driver(
    one_thread_each, runs
):
    """A program holds its card's one thread while its _Recv waits: two steps' programs queued
    on the cards in opposite orders (a thread switch between two submissions) would wait for
    each other forever.  So only one step at a time runs as programs; a step that starts
    meanwhile goes through the general driver, whose tasks never wait."""
    with tf.Graph().as_default():
        with tf.device("/gpu:0"):
            a = _matmul_sum()
        with tf.device("/gpu:1"):
            b = a * 2.0 + _matmul_sum()
        with tf.Session(config=_config()) as sess:
            assert sess.run(b) == 24.0 and len(runs) == 3  # the CPU's program and each card's
            busy = sess._impl._pool_sets[0].programs_running
            with busy:  # another step's programs hold the cards' threads
                assert sess.run(b) == 24.0
                assert len(runs) == 3
            assert sess.run(b) == 24.0 and len(runs) == 6


def test_steps_run_by_two_threads_at_once_give_each_its_own_values(one_thread_each, runs):
    """Two client threads run the towers' averaged gradients on one session at once, one
    step's programs beside the other's general driver: every step gives the values a step
    alone gives."""
    with tf.Graph().as_default():
        _towers()
        grads = tf.get_default_graph().get_collection("towers_mean")
        with tf.Session(config=_config()) as sess:
            sess.run(tf.global_variables_initializer())
            want = sess.run(grads)
            options = tf.RunOptions(timeout_in_ms=20000)  # (a deadlock would end here)
            failures = []

            def client():
                try:
                    for _ in range(30):
                        for a, b in zip(sess.run(grads, options=options), want):
                            np.testing.assert_array_equal(a, b)
                except Exception as e:  # noqa: BLE001 - reported below
                    failures.append(e)

            threads = [threading.Thread(target=client) for _ in range(2)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
            assert not any(t.is_alive() for t in threads) and not failures, failures
    assert runs
