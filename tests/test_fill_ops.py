"""``tf.zeros`` / ``tf.ones`` of a big static shape: a ``Fill`` made when the step runs, as in
TF 1.15, never an array built with the graph (issue 24, item 8).

Book section: "Managing the GPU RAM" (memory is taken when a step runs, on the op's device).
TF 1.15 builds a ``Const`` for fewer than 1,000 elements and above that
``Fill(shape_as_tensor, Const)`` named ``zeros``/``ones``; the shape tensor is int64 when a
dimension needs it.  An impossible size fails when run, with the allocator's ``OOM when
allocating tensor ...`` ResourceExhaustedError.
"""

import numpy as np
import pytest

import minitf as tf
from minitf.framework import graph_io


def _ops():
    return [(op.name, op.type) for op in tf.get_default_graph().get_operations()]


@pytest.mark.parametrize("make, name, value", [(tf.zeros, "zeros", 0), (tf.ones, "ones", 1)])
def test_small_shape_is_a_const_big_one_a_fill(make, name, value, cpu_only):
    small = make([999])
    assert _ops() == [(name, "Const")]
    big = make([10, 100])
    assert _ops()[1:] == [
        (name + "_1/shape_as_tensor", "Const"),
        (name + "_1/Const", "Const"),
        (name + "_1", "Fill"),
    ]
    assert big.shape.as_list() == [10, 100] and big.dtype == tf.float32
    assert big.op.inputs[0].dtype == tf.int32
    with tf.Session() as sess:
        s, b = sess.run([small, big])
    assert s.shape == (999,) and b.shape == (10, 100)
    assert (b == value).all() and b.dtype == np.float32


def test_bool_and_tensor_dimensions(cpu_only):
    n = tf.placeholder(tf.int32, [], name="n")
    a = tf.ones([n, 500], dtype=tf.bool)
    z = tf.zeros(tf.shape(a), dtype=tf.int64)
    assert a.op.type == "Fill" and z.op.type == "Fill"
    with tf.Session() as sess:
        av, zv = sess.run([a, z], {n: 3})
    assert av.shape == (3, 500) and av.all() and not zv.any() and zv.dtype == np.int64


def test_huge_zeros_build_at_once_and_fail_when_run_like_tf(cpu_only):
    z = tf.zeros([2**40])
    assert z.op.type == "Fill" and z.op.inputs[0].dtype == tf.int64
    assert z.shape.as_list() == [2**40]
    assert len(graph_io.graph_def(tf.get_default_graph())) < 1000
    with tf.Session() as sess:
        with pytest.raises(tf.errors.ResourceExhaustedError) as e:
            sess.run(z)
    assert str(e.value).startswith(
        "OOM when allocating tensor with shape[1099511627776] and type float on "
        "/job:localhost/replica:0/task:0/device:CPU:0 by allocator cpu"
    )
    assert "[[{{node zeros}}]]" in str(e.value)


# -- bad arguments get TF's TypeError/ValueError texts, not Python's (issue 24, item 12) ----------


@pytest.mark.parametrize(
    "build, cls, text",
    [
        (lambda x: tf.ones({"a": 1}), TypeError, "Failed to convert object of type <class 'dict'>"),
        (
            lambda x: tf.constant({1, 2}),
            TypeError,
            "Failed to convert object of type <class 'set'>",
        ),
        (lambda x: x + None, ValueError, "None values not supported."),
        (
            lambda x: tf.constant([1.0, None], dtype=tf.float32),
            TypeError,
            "Expected float32, got None of type 'NoneType' instead.",
        ),
        (
            lambda x: tf.constant("a") * 2,
            TypeError,
            "Expected string, got 2 of type 'int' instead.",
        ),
        (lambda x: tf.reduce_sum(x, axis="a"), TypeError, "Expected int32, got 'a' of type 'str'"),
        (
            lambda x: tf.reduce_sum(x, axis=0.5),
            TypeError,
            "Expected int32, got 0.5 of type 'float'",
        ),
        (lambda x: tf.zeros([2.5, 3]), TypeError, "Expected int32, got 2.5 of type 'float'"),
    ],
)
def test_bad_arguments_get_tf_texts(build, cls, text):
    x = tf.constant([1.0, 2.0])
    with pytest.raises(cls) as e:
        build(x)
    assert text in str(e.value)


def test_lists_holding_tensors_are_packed_like_tf(cpu_only):
    n = tf.placeholder(tf.int32, [], name="n")
    p = tf.convert_to_tensor([[1, n], [3, 4]])
    assert p.op.type == "Pack" and p.op.name == "packed" and p.shape.as_list() == [2, 2]
    with pytest.raises(TypeError, match="Cannot convert a list containing a tensor of dtype"):
        tf.convert_to_tensor([1.0, n], dtype=tf.float32)
    with tf.Session() as sess:
        assert sess.run(p, {n: 2}).tolist() == [[1, 2], [3, 4]]
