"""A plan learns its heavy nodes, and a step whose pools cannot overlap two of them runs on its
caller (``runtime/kernel_stats.py``, ``step_run._pools_add_nothing``).

Book section: "Parallel Execution".  The decision changes which thread runs a kernel and how
many threads BLAS has, never what a step computes: each test checks the values too.
"""

import math
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from threadpoolctl import ThreadpoolController

import minitf as tf
from helpers import node_stats, session_with_pools, traced_run
from minitf.runtime import kernel_stats
from minitf.runtime.kernel_stats import KernelStats, unordered
from minitf.runtime.scheduler import Plan

pytestmark = pytest.mark.usefixtures("cpu_only")

BLAS = ThreadpoolController().select(user_api="blas")


def _plan(edges, n):
    inputs = [[] for _ in range(n)]
    for a, b in edges:
        inputs[b].append((a, 0))
    return Plan(inputs, [[] for _ in range(n)], ["cpu"] * n)


def _reaches(edges, n):
    succ = {i: [b for a, b in edges if a == i] for i in range(n)}
    reach = []
    for i in range(n):
        seen, todo = set(), list(succ[i])
        while todo:
            j = todo.pop()
            if j not in seen:
                seen.add(j)
                todo.extend(succ[j])
        reach.append(seen)
    return reach


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_unordered_matches_pairwise_reachability(data):
    """The marked nodes that some other marked node is not ordered with by a path (the two
    could be ready together); none when the marked nodes form one chain."""
    n = data.draw(st.integers(1, 9))
    pairs = [(a, b) for a in range(n) for b in range(a + 1, n)]  # a DAG: edges go forward
    edges = data.draw(st.lists(st.sampled_from(pairs), unique=True) if pairs else st.just([]))
    marked = data.draw(st.lists(st.integers(0, n - 1), unique=True))
    reach = _reaches(edges, n)
    expected = [
        a for a in marked if any(b not in reach[a] and a not in reach[b] for b in marked if b != a)
    ]
    assert unordered(_plan(edges, n), marked) == expected


def test_decision_waits_for_the_learning_runs_and_follows_shrinking_costs(monkeypatch):
    """Nodes 1 and 2 both follow node 0 (a fork): while both are heavy the pools could overlap
    them; once one of them ran under the threshold, the caller may run the step."""
    monkeypatch.setattr(kernel_stats, "HEAVY_MICROS", 100)
    plan = _plan([(0, 1), (0, 2)], 3)
    stats = KernelStats(plan, [False, True, True], [True] * 3, [False] * 3)
    stats.record(1, 500)
    stats.record(2, 500)
    stats.run_ended()
    assert not stats.caller_may_run(1, 1)  # one run is not enough to decide
    stats.run_ended()
    assert not stats.caller_may_run(2, 1) and stats.caller_may_run(1, 2)
    stats.record(2, 20)
    stats.run_ended()
    assert stats.caller_may_run(2, 2)
    assert stats.costs == [0.0, 500, 20]


def test_a_heavy_node_that_splits_over_the_pool_keeps_the_step_pooled(monkeypatch):
    """A heavy element-wise kernel splits over minitf's intra-op pool, which only pool threads
    use: with more than one intra-op thread the caller must not run it alone."""
    monkeypatch.setattr(kernel_stats, "HEAVY_MICROS", 100)
    no_pool = [
        kernel_stats.needs_no_intra_pool(t, d, s)
        for t, d, s in (("MatMul", "CPU", True), ("AddV2", "CPU", True), ("AddV2", "GPU", True))
    ]
    assert no_pool == [True, False, True]
    stats = KernelStats(_plan([(0, 1)], 2), [True, True], no_pool[:2], [True, False])
    for _ in range(kernel_stats.LEARNING_RUNS):
        stats.record(0, 900)
        stats.record(1, 900)
        stats.run_ended()
    assert stats.caller_may_run(2, 1) and not stats.caller_may_run(2, 2)


def _spy(sess, name, seen):
    """Records, each time node ``name`` runs, its thread and BLAS's thread counts."""
    orig = sess._impl.plan

    def plan(*args):
        eplan = orig(*args)
        i = eplan.names.index(name)
        kernel = eplan.kernels[i]
        if getattr(kernel, "spied", False):
            return eplan

        def spied(ctx, ins):
            seen.append(
                (threading.current_thread(), {lib.num_threads for lib in BLAS.lib_controllers})
            )
            return kernel(ctx, ins)

        spied.spied = True
        eplan.kernels[i] = spied
        eplan._program = None  # the serial program is made again with the spy in it
        return eplan

    sess._impl.plan = plan


def _matmuls(fork):
    """Two 384x384 products: one after the other, or both from the same input (a fork)."""
    a = tf.constant(np.random.RandomState(0).rand(384, 384).astype(np.float32) / 384, name="a")
    first = tf.matmul(a, a, name="first")
    second = tf.matmul(a if fork else first, a, name="second")
    return a, [first, second]


@pytest.mark.parametrize(
    "fork, intra, on_caller",
    [(False, 2, True), (True, 2, True), (False, 1, True), (True, 1, False)],
)
def test_heavy_matmuls_run_on_the_caller_with_blas_threads_unless_the_pools_can_overlap_them(
    monkeypatch, fork, intra, on_caller
):
    """Two inter-op threads: after its learning runs, a chain of heavy matmuls runs on the
    caller, BLAS at the intra-op count; so does a fork of two when there are as many intra-op
    threads (BLAS's two threads on each product keep both cores busy).  With one intra-op
    thread the fork stays with the pool threads, which can overlap the two, BLAS at one
    thread.  Every run gives the same values, and BLAS gets its own count back."""
    monkeypatch.setattr(kernel_stats, "HEAVY_MICROS", 0)  # every expensive node is heavy
    before = [lib.num_threads for lib in BLAS.lib_controllers]
    seen = []
    with tf.Graph().as_default():
        a, fetches = _matmuls(fork)
        expected = None
        with session_with_pools(2, intra) as sess:
            _spy(sess, "second", seen)
            for _ in range(kernel_stats.LEARNING_RUNS + 2):
                values = sess.run(fetches)
                expected = values if expected is None else expected
                np.testing.assert_array_equal(values[1], expected[1])
    assert [lib.num_threads for lib in BLAS.lib_controllers] == before  # given back
    caller = threading.current_thread()
    learning, later = seen[: kernel_stats.LEARNING_RUNS], seen[kernel_stats.LEARNING_RUNS :]
    assert all(t is not caller and blas == {1} for t, blas in learning)
    if on_caller:
        assert all(t is caller and blas == {intra} for t, blas in later)
    else:
        assert all(t is not caller and blas == {1} for t, blas in later)
    a_value = np.random.RandomState(0).rand(384, 384).astype(np.float32) / 384
    first = a_value @ a_value
    np.testing.assert_allclose(expected[1], (a_value if fork else first) @ a_value, rtol=1e-5)


def test_a_fork_of_heavy_cpu_matmuls_needs_as_many_intra_op_threads_as_inter_op_ones(
    monkeypatch,
):
    """Heavy CPU matmuls that could overlap: the caller may run them once BLAS can give each
    as many threads as the inter-op pool has; heavy nodes of a card never qualify (two cards'
    kernels do overlap)."""
    monkeypatch.setattr(kernel_stats, "HEAVY_MICROS", 100)
    plan = _plan([(0, 1), (0, 2)], 3)
    for cpu_blas, answers in (
        (True, {(2, 2): True, (2, 3): True, (2, 1): False, (3, 2): False, (1, 4): True}),
        (False, {(2, 2): False, (2, 3): False, (2, 1): False, (3, 2): False, (1, 4): True}),
    ):
        # node 0 is expensive but never timed (a constant the plan computed once): not heavy
        stats = KernelStats(plan, [True, True, True], [True] * 3, [False] + [cpu_blas] * 2)
        for _ in range(kernel_stats.LEARNING_RUNS):
            stats.record(1, 400)
            stats.record(2, 400)
            stats.run_ended()
        assert stats.heavy == [1, 2]
        assert {k: stats.caller_may_run(*k) for k in answers} == answers


def test_a_heavy_node_after_a_fork_of_matmuls_leaves_the_step_to_the_caller(monkeypatch):
    """A training step: two heavy CPU matmuls that can run together (a layer's two gradients),
    then a heavy update that waits for both.  Only the matmuls could overlap, and BLAS's
    threads do that, so the caller may run the step; an update that could run beside a matmul
    keeps it pooled.  (On a 16-core host an SGD update of 235,000 weights timed above the
    threshold and kept the step on the pools, at a third of numpy's speed.)"""
    monkeypatch.setattr(kernel_stats, "HEAVY_MICROS", 100)
    for edges, answer in (
        ([(0, 1), (0, 2), (1, 3), (2, 3)], True),
        ([(0, 1), (0, 2), (0, 3)], False),
    ):
        stats = KernelStats(
            _plan(edges, 4), [False] + [True] * 3, [True] * 4, [False, True, True, False]
        )
        for _ in range(kernel_stats.LEARNING_RUNS):
            for node in (1, 2, 3):
                stats.record(node, 400)
            stats.run_ended()
        assert stats.heavy == [1, 2, 3]
        assert stats.caller_may_run(16, 16) is answer
        assert not stats.caller_may_run(16, 8)  # BLAS could not give each product its cores


def test_light_forks_do_not_keep_a_step_pooled(monkeypatch):
    """With no node heavy (a threshold no node reaches) a fork has nothing worth overlapping:
    the caller runs it after the learning runs."""
    monkeypatch.setattr(kernel_stats, "HEAVY_MICROS", math.inf)
    seen = []
    with tf.Graph().as_default():
        _, fetches = _matmuls(fork=True)
        with session_with_pools(2, 1) as sess:
            _spy(sess, "second", seen)
            for _ in range(kernel_stats.LEARNING_RUNS + 1):
                sess.run(fetches)
    assert seen[-1][0] is threading.current_thread()


def test_a_traced_step_always_shows_the_pool_threads(monkeypatch):
    """Once a plan runs on its caller, a traced run of it still runs on the pools: the trace
    shows the inter-op thread and the pieces of a split matmul."""
    monkeypatch.setattr(kernel_stats, "HEAVY_MICROS", 0)
    with tf.Graph().as_default():
        _, fetches = _matmuls(fork=False)
        with session_with_pools(2, 2) as sess:
            for _ in range(kernel_stats.LEARNING_RUNS + 1):
                sess.run(fetches)
            _, md = traced_run(sess, fetches)
    (second,) = [ns for ns in node_stats(md) if ns.node_name == "second"]
    assert second.thread_name.startswith("inter-op") and len(second.chunks) == 2


def test_only_a_plan_with_expensive_nodes_makes_its_kernel_stats():
    """A plan of cheap nodes never runs on the pools: it keeps no per-node timing lists (a
    10,000-node graph of adds would hold three of them)."""
    x = tf.placeholder(tf.float32, [4])
    cheap = x * 2.0 + 1.0
    product = tf.matmul(tf.reshape(cheap, [2, 2]), tf.ones([2, 2]))
    with session_with_pools(2, 2) as sess:
        feed = {x: np.arange(4, dtype=np.float32)}
        for _ in range(3):
            np.testing.assert_array_equal(sess.run(cheap, feed), [1, 3, 5, 7])
            np.testing.assert_array_equal(sess.run(product, feed), [[4, 4], [12, 12]])
        plans = {p.any_expensive: p for p in sess._impl._plans.values()}
    assert plans[False]._kernel_stats is None
    assert plans[True]._kernel_stats is not None and plans[True]._kernel_stats.runs >= 1
