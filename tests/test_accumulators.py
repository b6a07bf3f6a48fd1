"""``tf.ConditionalAccumulator``: op types and names, the mean of fresh gradients, stale ones
dropped, a blocking take released by applies from another thread, cancel, TF's error texts.

Book section: "Data parallelism" → "Synchronous updates" (the accumulators under
``tf.train.SyncReplicasOptimizer``).  Expected texts are TF 1.15's (core/kernels/
conditional_accumulator_base.cc, conditional_accumulator.h; reference part 2 §18.3).
"""

import logging
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import minitf as tf
from helpers import first_line, run_in_thread, wait_until
from minitf.framework import errors
from minitf.framework.accumulator_resource import ConditionalAccumulator as Resource
from minitf.framework.accumulator_resource import partial_shape_text

PRIVATE = r"_\d+_acc"


def takes_waiting(sess, acc, n):
    resource = sess.run(acc.accumulator_ref)
    return wait_until(lambda: resource.pending() == n)


# -- graph construction ------------------------------------------------------------------------


def test_ops_and_default_names():
    acc = tf.ConditionalAccumulator(tf.float32, shape=[2], shared_name="s", name="acc")
    apply = acc.apply_grad([1.0, 2.0], local_step=3)
    take = acc.take_grad(2)
    num = acc.num_accumulated()
    set_step = acc.set_global_step(5)
    assert acc.name == "acc" and acc.dtype == tf.float32
    assert isinstance(acc, tf.ConditionalAccumulatorBase)
    assert acc.accumulator_ref.op.type == "ResourceConditionalAccumulator"
    assert acc.accumulator_ref.dtype == tf.resource
    op = acc.accumulator_ref.op
    assert op.get_attr("shared_name") == "s" and op.get_attr("reduction_type") == "MEAN"
    assert op.get_attr("shape").as_list() == [2] and op.get_attr("dtype") == tf.float32
    assert (apply.type, apply.name) == ("ResourceAccumulatorApplyGradient", apply.name)
    assert apply.name == "ResourceAccumulatorApplyGradient"
    assert [t.dtype for t in apply.inputs] == [tf.resource, tf.int64, tf.float32]
    assert take.op.type == "ResourceAccumulatorTakeGradient"
    assert take.name == "ResourceAccumulatorTakeGradient:0" and take.shape.as_list() == [2]
    assert take.op.inputs[1].name == "ResourceAccumulatorTakeGradient/num_required:0"
    assert (num.op.type, num.name, num.dtype) == (
        "ResourceAccumulatorNumAccumulated",
        "acc_NumAccumulated:0",
        tf.int32,
    )
    assert (set_step.type, set_step.name) == (
        "ResourceAccumulatorSetGlobalStep",
        "ResourceAccumulatorSetGlobalStep",
    )
    assert set_step.inputs[1].dtype == tf.int64
    second = tf.ConditionalAccumulator(tf.float64, name="acc")
    assert second.name == "acc_1" and second.accumulator_ref.op.get_attr("shape").ndims is None


def test_graph_time_checks():
    acc = tf.ConditionalAccumulator(tf.float32, shape=[2], name="acc")
    with pytest.raises(ValueError, match=re.escape("Shapes (3,) and (2,) are incompatible")):
        acc.apply_grad([1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="requested dtype float32 for Tensor with dtype int32"):
        acc.apply_grad(tf.constant([1, 2]))
    text = (
        "Shape must be rank 0 but is rank 1 for 'ResourceAccumulatorApplyGradient' (op: "
        "'ResourceAccumulatorApplyGradient') with input shapes: [], [1], [2]."
    )
    with pytest.raises(ValueError, match=re.escape(text)):
        acc.apply_grad([1.0, 2.0], local_step=[1])
    with pytest.raises(ValueError, match="Shape must be rank 0 but is rank 1"):
        acc.take_grad([1, 2])
    with pytest.raises(ValueError, match='is not in the list of allowed values: "MEAN", "SUM"'):
        tf.ConditionalAccumulator(tf.float32, reduction_type="MAX")


# -- running -----------------------------------------------------------------------------------


def test_mean_of_fresh_gradients_and_stale_ones_dropped():
    acc = tf.ConditionalAccumulator(tf.float32, shape=[2], name="acc")
    g = tf.placeholder(tf.float32, [2])
    step = tf.placeholder(tf.int64, [])
    apply, take, num = acc.apply_grad(g, local_step=step), acc.take_grad(2), acc.num_accumulated()
    with tf.Session() as s:
        s.run(apply, {g: [1.0, 2.0], step: 0})
        s.run(apply, {g: [3.0, 6.0], step: 5})  # from the future: fresh
        assert s.run(num) == 2
        np.testing.assert_array_equal(s.run(take), [2.0, 4.0])
        assert s.run(num) == 0
        s.run(apply, {g: [9.0, 9.0], step: 0})  # the accumulator is at step 1 now: stale
        assert s.run(num) == 0
        s.run(acc.set_global_step(7))
        s.run(apply, {g: [9.0, 9.0], step: 6})
        s.run(apply, {g: [1.0, 1.0], step: 7})
        s.run(apply, {g: [2.0, 2.0], step: 8})
        np.testing.assert_array_equal(s.run(take), [1.5, 1.5])  # all fresh ones, not only 2


def test_sum_reduction_and_scalars():
    acc = tf.ConditionalAccumulator(tf.float64, shape=[], reduction_type="SUM", name="acc")
    with tf.Session() as s:
        for v in (1.0, 2.5):
            s.run(acc.apply_grad(v))
        value = s.run(acc.take_grad(2))
        assert value == 3.5 and np.asarray(value).dtype == np.float64


@pytest.mark.parametrize("dtype", [tf.float16, tf.float32, tf.float64])
def test_dtypes(dtype):
    acc = tf.ConditionalAccumulator(dtype, shape=[3], name="acc")
    g = tf.placeholder(dtype, [3])
    apply = acc.apply_grad(g)
    with tf.Session() as s:
        s.run(apply, {g: [1.0, 2.0, 3.0]})
        s.run(apply, {g: [2.0, 2.0, 2.0]})
        value = s.run(acc.take_grad(2))
    assert value.dtype == dtype.as_numpy_dtype
    np.testing.assert_array_equal(value, [1.5, 2.0, 2.5])


def test_integer_accumulator_has_no_kernel():
    acc = tf.ConditionalAccumulator(tf.int32, shape=[], name="acc")
    with tf.Session() as s:
        with pytest.raises(tf.errors.InvalidArgumentError, match="ResourceConditionalAccumulator"):
            s.run(acc.num_accumulated())


@settings(max_examples=25, deadline=None)
@given(
    grads=st.lists(
        st.lists(st.floats(-100, 100, width=32), min_size=3, max_size=3), min_size=1, max_size=6
    ),
    steps=st.lists(st.integers(0, 4), min_size=6, max_size=6),
    global_step=st.integers(0, 4),
)
def test_the_mean_of_the_fresh_gradients(grads, steps, global_step):
    """The resource itself: whatever the order, a take gets the mean of the gradients whose
    step was not below the accumulator's, and the accumulator's step goes up by one."""
    acc = Resource("acc", tf.float32, (3,))
    acc.set_global_step(global_step)
    fresh = []
    for grad, step in zip(grads, steps):
        counted = acc.apply_grad(step, grad)
        assert counted == (step >= global_step)
        if counted:
            fresh.append(np.asarray(grad, np.float32))
    assert acc.num_accumulated() == len(fresh)
    got = []
    acc.take_grad(max(1, len(fresh)), lambda r, e: got.append((r, e)))
    if fresh:
        expected = np.sum(fresh, axis=0, dtype=np.float32) / np.float32(len(fresh))
        np.testing.assert_allclose(got[0][0], expected, rtol=1e-6)
        assert acc.global_step == global_step + 1 and acc.num_accumulated() == 0
    else:
        assert got == [] and acc.pending() == 1


def test_runtime_errors():
    acc = tf.ConditionalAccumulator(tf.float32, shape=[None, 2], name="acc")
    g = tf.placeholder(tf.float32)
    n = tf.placeholder(tf.int32)
    apply, take = acc.apply_grad(g), acc.take_grad(n)
    with tf.Session() as s:
        cases = [
            (apply, {g: [1.0, 2.0, 3.0]}, "Shape mismatch: expected [?,2], got [3]"),
            (take, {n: 0}, "Argument num_required must be positive, but was 0"),
            (take, {n: -2}, "Argument num_required must be positive, but was -2"),
            (None, {g: [[1.0, 2.0]]}, None),  # now the first gradient's shape is expected
            (apply, {g: [[1.0, 2.0], [3.0, 4.0]]}, "Shape mismatch: expected [1,2], got [2,2]"),
        ]
        for fetch, feed, text in cases:
            if fetch is None:
                s.run(apply, feed)
                continue
            with pytest.raises(tf.errors.InvalidArgumentError) as e:
                s.run(fetch, feed)
            assert first_line(e.value) == text
        assert s.run(acc.num_accumulated()) == 1


@pytest.mark.cluster
def test_a_shared_accumulator_is_found_by_name_on_a_server():
    server = tf.train.Server.create_local_server()
    try:
        acc = tf.ConditionalAccumulator(tf.float32, shape=[], shared_name="w:0/grad_accum")
        twin = tf.ConditionalAccumulator(tf.float32, shape=[], shared_name="w:0/grad_accum")
        with tf.Session(server.target) as a:
            a.run(acc.apply_grad(4.0))
        with tf.Session(server.target) as b:
            b.run(twin.apply_grad(2.0))
            assert b.run(twin.num_accumulated()) == 2
            assert b.run(acc.take_grad(2)) == 3.0
    finally:
        server.stop()


def test_names_and_containers_are_checked():
    bad = tf.ConditionalAccumulator(tf.float32, shared_name="_bad")
    with tf.container("my_problem_1"):
        contained = tf.ConditionalAccumulator(tf.float32)
    private = tf.ConditionalAccumulator(tf.float32, name="acc")
    with tf.Session() as s:
        for acc, text in (
            (bad, "shared_name cannot start with '_':_bad"),
            (contained, "container contains invalid characters: my_problem_1"),
        ):
            with pytest.raises(tf.errors.InvalidArgumentError) as e:
                s.run(acc.num_accumulated())
            assert first_line(e.value) == text
        assert re.fullmatch(PRIVATE, s.run(private.accumulator_ref).name)


def test_signature_mismatch_of_a_shared_accumulator():
    a = tf.ConditionalAccumulator(tf.float32, shape=[], shared_name="sig")
    b = tf.ConditionalAccumulator(tf.float64, shape=[], shared_name="sig")
    with tf.Session() as s:
        s.run(a.num_accumulated())  # made as float: b's ops find it
        with pytest.raises(tf.errors.InvalidArgumentError) as e:
            s.run(b.apply_grad(1.0))
        text = (
            "Signature mismatch, have: resource, int64, double-> expected: resource, int64, float->"
        )
        assert first_line(e.value) == text
        with pytest.raises(tf.errors.InvalidArgumentError) as e:
            s.run(b.take_grad(1))
        text = "Signature mismatch, have: resource, int32->double expected: resource, int32->float"
        assert first_line(e.value) == text


def test_setting_the_step_back_warns(caplog):
    acc = Resource("acc", tf.float32, None)
    acc.set_global_step(3)
    with caplog.at_level(logging.WARNING, logger="minitf"):
        acc.set_global_step(1)
    assert (
        "Attempt to set current_global_step_ to smaller value: current_global_step_ = 3 >= 1 "
        "= new_global_step." in caplog.text
    )
    assert acc.global_step == 1 and partial_shape_text(None) == "<unknown>"
    assert repr(acc) == "<ConditionalAccumulator 'acc' step=1 accumulated=0>"


# -- waiting across threads ----------------------------------------------------------------------


def test_a_blocked_take_is_released_by_applies_from_another_thread(no_thread_left):
    acc = tf.ConditionalAccumulator(tf.float32, shape=[2], name="acc")
    g = tf.placeholder(tf.float32, [2])
    apply, take = acc.apply_grad(g), acc.take_grad(3)
    with tf.Session() as s:
        t, out = run_in_thread(s, take)
        assert takes_waiting(s, acc, 1)
        for v in ([1.0, 0.0], [2.0, 0.0]):
            s.run(apply, {g: v})
        assert takes_waiting(s, acc, 1) and "value" not in out
        s.run(apply, {g: [6.0, 3.0]})
        t.join(5)
        np.testing.assert_array_equal(out["value"], [3.0, 1.0])


def test_takes_are_served_in_order(no_thread_left):
    acc = tf.ConditionalAccumulator(tf.float32, shape=[], name="acc")
    x = tf.placeholder(tf.float32, [])
    apply = acc.apply_grad(x, local_step=10)
    with tf.Session() as s:
        t1, first = run_in_thread(s, acc.take_grad(2))
        assert takes_waiting(s, acc, 1)
        t2, second = run_in_thread(s, acc.take_grad(1))
        assert takes_waiting(s, acc, 2)
        s.run(apply, {x: 1.0})
        assert takes_waiting(s, acc, 2)  # the head needs 2: the one behind it waits too
        s.run(apply, {x: 3.0})
        t1.join(5)
        assert first == {"value": 2.0} and takes_waiting(s, acc, 1)
        s.run(apply, {x: 5.0})
        t2.join(5)
        assert second == {"value": 5.0}


def test_closing_the_session_cancels_a_take(no_thread_left):
    acc = tf.ConditionalAccumulator(tf.float32, shape=[], shared_name="closing")
    take = acc.take_grad(1)
    s = tf.Session()
    t, out = run_in_thread(s, take)
    assert takes_waiting(s, acc, 1)
    s.close()
    t.join(5)
    assert isinstance(out["error"], tf.errors.CancelledError)
    assert first_line(out["error"]) == "TakeGrad operation was cancelled"
    assert "[[{{node ResourceAccumulatorTakeGradient}}]]" in out["error"].message


def test_a_timeout_cancels_a_take_and_keeps_the_gradients(no_thread_left):
    acc = tf.ConditionalAccumulator(tf.float32, shape=[], name="acc")
    take, num = acc.take_grad(2), acc.num_accumulated()
    with tf.Session() as s:
        s.run(acc.apply_grad(4.0))
        with pytest.raises(tf.errors.DeadlineExceededError):
            s.run(take, options=tf.RunOptions(timeout_in_ms=100))
        assert s.run(num) == 1 and s.run(acc.accumulator_ref).pending() == 0
        s.run(acc.apply_grad(2.0))
        assert s.run(take) == 3.0


def test_operation_timeout_ends_a_take(no_thread_left):
    acc = tf.ConditionalAccumulator(tf.float32, shape=[], name="acc")
    with tf.Session(config=tf.ConfigProto(operation_timeout_in_ms=100)) as s:
        with pytest.raises(tf.errors.DeadlineExceededError):
            s.run(acc.take_grad(1))


def test_cancel_of_the_resource():
    acc = Resource("acc", tf.float32, ())
    got = []
    attempt = acc.take_grad(1, lambda r, e: got.append((r, e)))
    acc.cancel(attempt)
    acc.cancel(attempt)  # once ended, nothing more
    assert len(got) == 1 and isinstance(got[0][1], errors.CancelledError)
    assert got[0][1].message == "TakeGrad operation was cancelled"
    acc.apply_grad(0, 1.0)
    assert acc.num_accumulated() == 1 and acc.pending() == 0


def test_accumulating_writes_into_no_gradient_and_no_taken_mean():
    """The sum is kept in a buffer of the accumulator's own, added to in place: the gradients
    pushed stay as they were, and a mean handed to a taker is not touched by the next round."""
    acc = Resource("acc", tf.float32, (3,))
    g1, g2 = np.array([1.0, 2.0, 3.0], np.float32), np.array([3.0, 2.0, 1.0], np.float32)
    got = []
    acc.apply_grad(0, g1)
    acc.apply_grad(0, g2)
    acc.take_grad(2, lambda r, e: got.append(r))
    np.testing.assert_array_equal(got[0], [2.0, 2.0, 2.0])
    np.testing.assert_array_equal(g1, [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(g2, [3.0, 2.0, 1.0])
    acc.apply_grad(1, g2)
    acc.apply_grad(1, g2)
    acc.take_grad(2, lambda r, e: got.append(r))
    np.testing.assert_array_equal(got[0], [2.0, 2.0, 2.0])  # the first mean, unchanged
    np.testing.assert_array_equal(got[1], g2)
    assert not np.shares_memory(got[0], got[1])
