# ruff: noqa: E501  (the recorded TF graph listings keep one op per line)
"""``tf.cond``: the graph TF 1.15 builds (Switch, pivots, Merge; recorded from TensorFlow 2.21's
``compat.v1`` with control flow v1, which builds 1.15's graphs), only the branch taken runs
(dead tensors, on one device, across devices and across tasks), its gradients, its errors."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import minitf as tf
from helpers import node_stats, session_with_pools, traced_run
from minitf.distributed import LocalCluster, wire
from minitf.framework.dead_tensor import DEAD
from minitf.ops.cond import smart_cond

# (name, type, inputs, control inputs, colocation other than the op's own), as TF built them
TF_COND_GRAPH = """\
cond/Switch Switch p:0,p:0 - -
cond/switch_t Identity cond/Switch:1 - -
cond/switch_f Identity cond/Switch:0 - -
cond/pred_id Identity p:0 - -
cond/Mul Mul cond/Mul/Switch:1,cond/Mul/Switch_1:1 - -
cond/Mul/Switch Switch x:0,cond/pred_id:0 - loc:@x
cond/Mul/Switch_1 Switch v/read:0,cond/pred_id:0 - loc:@v
cond/Square Square cond/Square/Switch:0 - -
cond/Square/Switch Switch y:0,cond/pred_id:0 - loc:@y
cond/add/y Const - ^cond/switch_f -
cond/add AddV2 cond/Square:0,cond/add/y:0 - -
cond/Merge Merge cond/add:0,cond/Mul:0 - -
c2/Switch Switch p:0,p:0 - -
c2/switch_t Identity c2/Switch:1 - -
c2/switch_f Identity c2/Switch:0 - -
c2/pred_id Identity p:0 - -
c2/Switch_1 Switch x:0,c2/pred_id:0 - loc:@x
c2/Const Const - ^c2/switch_f -
c2/Merge Merge c2/Const:0,c2/Switch_1:1 - -"""

# the gradient ops of the Mul branch (the Square branch's Add gradient is TF 2.21's smarter
# broadcast, not 1.15's)
TF_GRAD_GRAPH = """\
gradients/cond/Merge_grad/cond_grad Switch gradients/Sum_grad/Tile:0,cond/pred_id:0 - loc:@gradients/Sum_grad/Tile
gradients/cond/Mul_grad/Mul Mul gradients/cond/Merge_grad/cond_grad:1,cond/Mul/Switch_1:1 - -
gradients/cond/Mul_grad/Mul_1 Mul gradients/cond/Merge_grad/cond_grad:1,cond/Mul/Switch:1 - -
gradients/Switch Switch x:0,cond/pred_id:0 - -
gradients/Identity Identity gradients/Switch:0 - -
gradients/Shape_1 Shape gradients/Switch:0 - -
gradients/zeros/Const Const - ^gradients/Identity -
gradients/zeros Fill gradients/Shape_1:0,gradients/zeros/Const:0 - -
gradients/cond/Mul/Switch_grad/cond_grad Merge gradients/zeros:0,gradients/cond/Mul_grad/Mul:0 - -
gradients/Switch_1 Switch v/read:0,cond/pred_id:0 - -
gradients/Identity_1 Identity gradients/Switch_1:0 - -
gradients/Shape_2 Shape gradients/Switch_1:0 - -
gradients/zeros_1/Const Const - ^gradients/Identity_1 -
gradients/zeros_1 Fill gradients/Shape_2:0,gradients/zeros_1/Const:0 - -
gradients/cond/Mul/Switch_1_grad/cond_grad Merge gradients/zeros_1:0,gradients/cond/Mul_grad/Mul_1:0 - -"""


def _listing(op):
    own = ("loc:@" + op.name).encode()
    coloc = [c.decode() for c in op.colocation_groups() if c != own]
    return " ".join(
        [
            op.name,
            op.type,
            ",".join(t.name for t in op.inputs) or "-",
            ",".join("^" + c.name for c in op.control_inputs) or "-",
            ",".join(coloc) or "-",
        ]
    )


def _book_conds():
    x = tf.placeholder(tf.float32, [2], name="x")
    y = tf.constant([1.0, 2.0], name="y")
    p = tf.placeholder(tf.bool, [], name="p")
    v = tf.Variable([3.0, 4.0], name="v")
    r = tf.cond(p, lambda: tf.multiply(x, v), lambda: tf.square(y) + 1.0)
    r2 = tf.cond(p, lambda: x, lambda: 2.0, name="c2")
    return x, y, p, v, r, r2


def test_cond_builds_tfs_graph():
    x, y, p, v, r, r2 = _book_conds()
    ops = [op for op in tf.get_default_graph().get_operations() if "/" in op.name]
    ops = [op for op in ops if op.name.split("/")[0] in ("cond", "c2")]
    assert [_listing(op) for op in ops] == TF_COND_GRAPH.splitlines()
    assert str(r) == 'Tensor("cond/Merge:0", shape=(2,), dtype=float32)'
    assert str(r2) == 'Tensor("c2/Merge:0", dtype=float32)'  # shapes (2,) and () merge to unknown
    assert [c.pred.name for c in tf.get_collection(tf.GraphKeys.COND_CONTEXT)] == [
        "cond/pred_id:0"
    ] * 2 + ["c2/pred_id:0"] * 2


def test_values_and_gradients_through_cond_as_tf_computed_them():
    x, y, p, v, r, r2 = _book_conds()
    g = tf.gradients(tf.reduce_sum(r), [x, v, y])
    by_name = {op.name: op for op in tf.get_default_graph().get_operations()}
    assert [_listing(by_name[line.split()[0]]) for line in TF_GRAD_GRAPH.splitlines()] == (
        TF_GRAD_GRAPH.splitlines()
    )
    assert [t.name for t in g] == [
        "gradients/cond/Mul/Switch_grad/cond_grad:0",
        "gradients/cond/Mul/Switch_1_grad/cond_grad:0",
        "gradients/cond/Square/Switch_grad/cond_grad:0",
    ]
    with tf.Session() as sess:
        sess.run(v.initializer)
        got = sess.run([r, r2] + g, {x: [1.0, -1.0], p: True})
        want = [[3, -4], [1, -1], [3, 4], [1, -1], [0, 0]]
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a, np.float32(b))
        got = sess.run([r, r2] + g, {x: [1.0, -1.0], p: False})
        want = [[2, 5], 2.0, [0, 0], [0, 0], [2, 4]]
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a, np.float32(b))


def test_only_the_branch_taken_runs_and_leaves_step_stats():
    p = tf.placeholder(tf.bool, [], name="p")
    v = tf.Variable(0.0, name="v")
    w = tf.Variable(0.0, name="w")
    r = tf.cond(p, lambda: tf.assign_add(v, 1.0), lambda: tf.assign_add(w, 10.0))
    with tf.Session() as sess:
        sess.run([v.initializer, w.initializer])
        assert sess.run(r, {p: True}) == 1.0
        (_, md) = traced_run(sess, r, {p: False})
        assert sess.run([v, w]) == [1.0, 10.0]
        ran = {n.node_name: n for n in node_stats(md)}
    # the true branch's AssignAdd, its RefSwitch's consumer, did not run: no stats for it
    assert "cond/AssignAdd" not in ran and "cond/switch_t" not in ran
    assert {"cond/AssignAdd_1", "cond/switch_f", "cond/Merge", "cond/Switch"} <= set(ran)
    # a Switch records only the output it gave: the predicate was false, output 0
    assert [o.slot for o in ran["cond/Switch"].output] == [0]
    assert [n.type for n in tf.get_default_graph().get_operations() if "Switch" in n.name] == [
        "Switch",
        "RefSwitch",
        "RefSwitch",
    ]


def test_ops_inside_a_branch_cannot_be_fetched_and_dead_fetches_fail():
    x = tf.placeholder(tf.float32, [2], name="x")
    p = tf.placeholder(tf.bool, [], name="p")
    r = tf.cond(p, lambda: x * 3.0, lambda: x)
    inner = tf.get_default_graph().get_tensor_by_name("cond/mul:0")
    out = tf.identity(inner, name="out")  # an op outside the branch may read it (TF allows it)
    with tf.Session() as sess:
        for fetch, name in ((inner, "cond/mul"), ("cond/Switch:1", "cond/Switch")):
            with pytest.raises(ValueError) as e:
                sess.run(fetch, {x: [1, 1], p: True})
            assert str(e.value) == "Operation '%s' has been marked as not fetchable." % name
        np.testing.assert_array_equal(sess.run(out, {x: [1, 2], p: True}), [3, 6])
        for fetches in ([out, r], [r, out]):  # Retval: its place among the sorted names
            with pytest.raises(tf.errors.InvalidArgumentError) as e:
                sess.run(fetches, {x: [1, 2], p: False})
            assert e.value.message == "Retval[1] does not have value"
        np.testing.assert_array_equal(sess.run(r, {x: [1, 2], p: False}), [1, 2])


def test_results_may_be_structures_and_merge_shapes():
    x = tf.placeholder(tf.float32, [2], name="x")
    big = x[0] > 0
    d = tf.cond(big, lambda: {"a": x, "b": (x, 3)}, lambda: {"a": x * 2.0, "b": (x, 4)})
    assert [d["a"].name, d["b"][0].name, d["b"][1].name] == [
        "cond/Merge:0",
        "cond/Merge_1:0",
        "cond/Merge_2:0",
    ]
    lst = tf.cond(big, lambda: [x], lambda: [x], name="lst")
    assert lst.name == "lst/Merge:0"  # a single result is unpacked unless strict
    strict = tf.cond(big, lambda: [x], lambda: [x], strict=True, name="st")
    assert isinstance(strict, list) and strict[0].name == "st/Merge:0"
    ops = tf.cond(big, lambda: tf.no_op(), lambda: tf.no_op(), name="ops")
    assert str(ops) == 'Tensor("ops/Merge:0", shape=(), dtype=bool)'
    s1 = tf.cond(big, lambda: tf.zeros([3]), lambda: tf.zeros([2]), name="shp")
    s2 = tf.cond(big, lambda: tf.zeros([3, 2]), lambda: tf.zeros([3, 4]), name="shp2")
    assert (str(s1.shape), str(s2.shape)) == ("(?,)", "(3, ?)")
    with tf.Session() as sess:
        got = sess.run([d, ops], {x: [-1.0, 5.0]})
        np.testing.assert_array_equal(got[0]["a"], [-2, 10])
        # an op's result is the pivot of its branch: the predicate's value
        assert (got[0]["b"][1], bool(got[1])) == (4, False)
        assert (sess.run(d["b"][1], {x: [1.0, 0.0]}), bool(sess.run(ops, {x: [1.0, 0.0]}))) == (
            3,
            True,
        )


def test_errors_are_tfs():
    x = tf.placeholder(tf.float32, [2], name="x")
    big = x[0] > 0
    cases = [
        (lambda: tf.cond(True, lambda: x, lambda: x), TypeError, "pred must not be a Python bool"),
        (lambda: tf.cond(big, x, lambda: x), TypeError, "true_fn must be callable."),
        (lambda: tf.cond(big, lambda: x, None), TypeError, "false_fn must be callable."),
        (lambda: tf.cond(big, lambda: None, lambda: x), ValueError, "true_fn must have a return"),
        (
            lambda: tf.cond(big, lambda: x, lambda: 1),
            ValueError,
            "Outputs of true_fn and false_fn must have the same type: float32, int32",
        ),
        (
            lambda: tf.cond(big, lambda: x, lambda: (x, x)),
            ValueError,
            "Incompatible return values of true_fn and false_fn: The two structures don't "
            "have the same nested structure.",
        ),
        (
            lambda: tf.cond(x[0], lambda: x, lambda: x),
            TypeError,
            "Input 'pred' of 'Switch' Op has type float32 that does not match expected type of "
            "bool.",
        ),
        (
            lambda: tf.cond(tf.constant([True, False]), lambda: x, lambda: x, name="vec"),
            ValueError,
            "Shape must be rank 0 but is rank 1 for 'vec/Switch' (op: 'Switch') with input "
            "shapes: [2], [2].",
        ),
    ]
    for build, cls, text in cases:
        with pytest.raises(cls) as e:
            build()
        assert str(e.value).startswith(text), str(e.value)


def test_nested_conds_build_tfs_switches_and_differentiate():
    x = tf.placeholder(tf.float32, [2], name="x")
    y = tf.constant([1.0, 2.0], name="y")
    p = tf.placeholder(tf.bool, [], name="p")
    n = tf.cond(p, lambda: tf.cond(x[1] > 0, lambda: x * y, lambda: x - y, name="inner"), lambda: y)
    g = tf.gradients(n, [x])[0]
    by_name = {op.name: op for op in tf.get_default_graph().get_operations()}
    # the inner branch reads y through the outer branch's Switch, then its own (as TF)
    assert _listing(by_name["cond/inner/mul/Switch_1"]) == (
        "cond/inner/mul/Switch_1 Switch y:0,cond/pred_id:0 - loc:@y"
    )
    assert _listing(by_name["cond/inner/mul/Switch_2"]) == (
        "cond/inner/mul/Switch_2 Switch cond/inner/mul/Switch_1:1,cond/inner/pred_id:0 - loc:@y"
    )
    assert g.name == "gradients/cond/strided_slice/Switch_grad/cond_grad:0"
    # the gradient reaches no Switch of y: a predicate (bool) carries no gradient
    assert not any("Switch_2_grad" in op.name for op in tf.get_default_graph().get_operations())
    with tf.Session() as sess:
        for feed, want_n, want_g in (
            ({x: [1, -1], p: True}, [0, -3], [1, 1]),
            ({x: [1, 1], p: True}, [1, 2], [1, 2]),
            ({x: [1, 1], p: False}, [1, 2], [0, 0]),
        ):
            got_n, got_g = sess.run([n, g], feed)
            np.testing.assert_array_equal(got_n, want_n)
            np.testing.assert_array_equal(got_g, want_g)


@settings(max_examples=20, deadline=None)
@given(
    st.lists(st.floats(-2, 2), min_size=3, max_size=3),
    st.lists(st.floats(-2, 2), min_size=3, max_size=3),
    st.booleans(),
)
def test_gradients_through_cond_match_central_differences(xv, wv, pv):
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float64, [3])
        w = tf.placeholder(tf.float64, [3])
        p = tf.placeholder(tf.bool, [])
        loss = tf.reduce_sum(
            tf.cond(p, lambda: tf.tanh(x * w), lambda: tf.exp(x) * 0.5 + w * w) * w
        )
        gx, gw = tf.gradients(loss, [x, w])
        with tf.Session() as sess:
            feed = {x: xv, w: wv, p: pv}
            got = sess.run([gx, gw], feed)
            for k, (t, base) in enumerate(((x, xv), (w, wv))):
                num = []
                for i in range(3):
                    up, down = list(base), list(base)
                    up[i] += 1e-6
                    down[i] -= 1e-6
                    lu = sess.run(loss, {**feed, t: up})
                    ld = sess.run(loss, {**feed, t: down})
                    num.append((lu - ld) / 2e-6)
                np.testing.assert_allclose(got[k], num, rtol=1e-5, atol=1e-6)


@pytest.mark.usefixtures("two_gpus")
@pytest.mark.parametrize("inter", [1, 2])
def test_cond_across_devices_runs_only_the_branch_taken(inter):
    with tf.device("/cpu:0"):
        p = tf.placeholder(tf.bool, [], name="p")
        x = tf.placeholder(tf.float32, [300, 300], name="x")  # large: pooled nodes

    def on(dev, fn):
        def branch():
            with tf.device(dev):
                return fn()

        return branch

    r = tf.cond(p, on("/gpu:0", lambda: tf.matmul(x, x)), on("/gpu:1", lambda: x + 1.0))
    xv = np.eye(300, dtype=np.float32) * 2
    with session_with_pools(inter, 1) as sess:
        np.testing.assert_array_equal(sess.run(r, {p: True, x: xv}), xv @ xv)
        out, md = traced_run(sess, r, {p: False, x: xv})
        np.testing.assert_array_equal(out, xv + 1)
    ran = {d.device: [n.node_name for n in d.node_stats] for d in md.step_stats.dev_stats}
    gpu0 = [d for d in ran if d.endswith("GPU:0")]
    assert "cond/MatMul" not in sum(ran.values(), [])
    assert all("MatMul" not in n for d in gpu0 for n in ran[d])
    assert any(n == "cond/add" for n in sum(ran.values(), []))


def test_training_through_cond_updates_the_branch_taken():
    p = tf.placeholder(tf.bool, [], name="p")
    a = tf.Variable(1.0, name="a")
    b = tf.Variable(1.0, name="b")
    loss = tf.cond(p, lambda: tf.square(a - 3.0), lambda: tf.square(b + 2.0))
    train = tf.train.GradientDescentOptimizer(0.25).minimize(loss)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(train, {p: True})  # a -= 0.25 * 2 * (1 - 3) = +1
        assert sess.run([a, b]) == [2.0, 1.0]
        sess.run(train, {p: False})  # b -= 0.25 * 2 * (1 + 2) = -1.5
        assert sess.run([a, b]) == [2.0, -0.5]


def test_smart_cond_picks_a_branch_when_the_predicate_is_known():
    x = tf.placeholder(tf.float32, [], name="x")
    assert smart_cond(True, lambda: x + 1.0, lambda: x).op.type == "AddV2"
    assert smart_cond(tf.constant(False), lambda: x + 1.0, lambda: x) is x
    t = tf.placeholder(tf.bool, [], name="t")
    assert smart_cond(t, lambda: x + 1.0, lambda: x).op.type == "Merge"
    with pytest.raises(TypeError):
        smart_cond("yes", lambda: x, lambda: x)


def test_a_dead_tensor_crosses_the_wire_as_one():
    proto = wire.tensor_to_proto(DEAD)
    assert proto.dtype == "dead" and wire.proto_to_tensor(proto) is DEAD
    assert wire.assemble_chunks(wire.iter_tensor_chunks(DEAD)) is DEAD


@pytest.mark.cluster
@pytest.mark.usefixtures("no_child_process_left")
def test_cond_across_tasks_carries_dead_tensors():
    with LocalCluster({"ps": 1, "worker": 1}) as lc:
        with tf.device("/job:ps/task:0"):
            p = tf.placeholder(tf.bool, [], name="p")
            v = tf.Variable([1.0, 2.0], name="v")
            x = tf.placeholder(tf.float32, [2], name="x")
        with tf.device("/job:worker/task:0"):
            r = tf.cond(p, lambda: x * v, lambda: tf.square(v) + 1.0)
            out = tf.identity(tf.get_default_graph().get_tensor_by_name("cond/mul:0"))
        with tf.Session(lc.target("worker", 0)) as sess:
            sess.run(v.initializer)
            np.testing.assert_array_equal(sess.run(r, {p: True, x: [3, 4]}), [3, 8])
            got, md = traced_run(sess, r, {p: False, x: [3, 4]})
            np.testing.assert_array_equal(got, [2, 5])
            with pytest.raises(tf.errors.InvalidArgumentError) as e:
                sess.run(out, {p: False, x: [3, 4]})
    assert e.value.message.endswith("The tensor returned for Identity:0 was not valid.")
    ran = [n.node_name for n in node_stats(md)]
    assert "cond/add" in ran and "cond/mul" not in ran


def test_only_plans_that_can_meet_a_dead_value_check_for_one():
    """A plan pays for dead-value checks only with a ``Switch`` in it, or a ``_Recv`` whose
    ``_Send`` is in another task's partition (which may hold the Switch)."""
    from minitf.runtime.deadness import may_see_dead

    class N:
        def __init__(self, op_type):
            self.type = op_type

    local = [N("MatMul"), N("_Send"), N("_Recv")]
    assert not may_see_dead(local, {2})
    assert may_see_dead(local, set())
    assert may_see_dead([N("Const"), N("Switch")], set())


def test_layers_dropout_drops_only_while_training():
    """Chapter 11's pattern: ``training`` a placeholder with default False; ``tf.layers.dropout``
    builds a cond under ``dropout/`` (nn.dropout's ops in ``dropout/cond/dropout``)."""
    x = tf.placeholder(tf.float32, [None, 50], name="X")
    training = tf.placeholder_with_default(False, shape=(), name="training")
    d = tf.layers.dropout(x, 0.5, training=training, seed=7)
    fixed = tf.layers.dropout(x, 0.5)  # training=False: just an Identity
    names = [op.name for op in tf.get_default_graph().get_operations()]
    assert d.name == "dropout/cond/Merge:0" and fixed.name == "dropout_1/Identity:0"
    assert "dropout/cond/dropout/Shape/Switch" in names and "dropout/cond/Identity/Switch" in names
    xv = np.ones((40, 50), np.float32)
    with tf.Session() as sess:
        np.testing.assert_array_equal(sess.run(d, {x: xv}), xv)
        dropped = sess.run(d, {x: xv, training: True})
    assert set(np.unique(dropped)) == {0.0, 2.0} and 0.4 < (dropped == 0).mean() < 0.6


def test_an_asynchronous_op_in_the_branch_not_taken_does_not_wait():
    """A dequeue inside a branch (an asynchronous kernel) runs only when its branch is taken:
    on the other side it is dead and the step does not block on the empty queue."""
    q = tf.FIFOQueue(10, [tf.float32], shapes=[[]])
    p = tf.placeholder(tf.bool, [])
    r = tf.cond(p, lambda: q.dequeue(), lambda: tf.constant(-1.0))
    config = tf.ConfigProto(operation_timeout_in_ms=5000)
    with tf.Session(config=config) as sess:
        assert sess.run(r, {p: False}) == -1.0
        sess.run(q.enqueue([5.0]))
        assert sess.run(r, {p: True}) == 5.0
        assert sess.run(q.size()) == 0


def test_a_branch_returning_an_outside_tensor_differentiates():
    """``lambda: x`` is a Switch made by the branch itself (``cond/Switch_1``); its gradient
    still meets the zeros of the other side in a Merge; nested conds on one predicate too."""
    x = tf.placeholder(tf.float32, [2])
    p = tf.placeholder(tf.bool, [])
    r = tf.cond(p, lambda: x, lambda: 2.0 * x)
    n = tf.cond(p, lambda: tf.cond(p, lambda: x, lambda: x * 3.0), lambda: x * 5.0, name="nn")
    (g,) = tf.gradients(tf.reduce_sum(r) + tf.reduce_sum(n), x)
    with tf.Session() as sess:
        assert sess.run(g, {x: [1.0, 2.0], p: True}).tolist() == [2.0, 2.0]
        assert sess.run(g, {x: [1.0, 2.0], p: False}).tolist() == [7.0, 7.0]
