"""tf.split and tf.unstack (ops/split_ops.py): TF's Split / SplitV / Unpack graphs (recorded
from TF 2.21's compat.v1, whose op names are 1.15's; the error texts are 1.15's), values and
gradients."""

import numpy as np
import pytest

import minitf as tf
from minitf.framework import errors


def test_split_and_unstack_build_tfs_graph_and_values():
    x = tf.placeholder(tf.float32, [None, 6], name="x")
    a = tf.split(x, 3, axis=1)
    b = tf.split(x, [1, 2, 3], 1, name="sv")
    c = tf.unstack(tf.zeros([2, 3]), axis=1)
    assert [t.name for t in a] == ["split:0", "split:1", "split:2"]
    assert [t.shape.as_list() for t in b] == [[None, 1], [None, 2], [None, 3]]
    assert [t.shape.as_list() for t in c] == [[2]] * 3 and c[0].name == "unstack:0"
    ops = [
        (op.name, op.type, [t.name for t in op.inputs])
        for op in tf.get_default_graph().get_operations()
    ]
    assert ops[1:7] == [
        ("split/split_dim", "Const", []),
        ("split", "Split", ["split/split_dim:0", "x:0"]),
        ("Const", "Const", []),
        ("sv/split_dim", "Const", []),
        ("sv", "SplitV", ["x:0", "Const:0", "sv/split_dim:0"]),
        ("zeros", "Const", []),
    ]
    (g,) = tf.gradients(tf.reduce_sum(a[0]) + tf.reduce_sum(b[2] * 2.0), x)
    names = [op.name for op in tf.get_default_graph().get_operations()]
    assert "gradients/split_grad/concat" in names and "gradients/sv_grad/concat" in names
    value = np.arange(12.0, dtype=np.float32).reshape(2, 6)
    with tf.Session() as sess:
        pieces, rest, grad = sess.run([a, tf.split(x, [2, -1], 1), g], {x: value})
        assert [p.tolist() for p in pieces] == [p.tolist() for p in np.split(value, 3, axis=1)]
        assert [p.shape for p in rest] == [(2, 2), (2, 4)]
        assert grad.tolist() == [[1.0, 1.0, 0.0, 2.0, 2.0, 2.0]] * 2
        rows = sess.run(tf.unstack(x, num=2), {x: value})
        assert [r.tolist() for r in rows] == value.tolist()
        (back,) = tf.gradients(tf.reduce_sum(tf.unstack(x, num=2)[1] * 3.0), x)
        assert sess.run(back, {x: value}).tolist() == [[0.0] * 6, [3.0] * 6]


def test_split_and_unstack_errors_are_tfs():
    x = tf.placeholder(tf.float32, [None, 6], name="x")
    with pytest.raises(ValueError, match="Dimension size must be evenly divisible by 4 but is 6"):
        tf.split(x, 4, axis=1)
    with pytest.raises(ValueError, match=r"Cannot infer num from shape \(\?, 6\)"):
        tf.unstack(x)
    with pytest.raises(ValueError, match="Determined shape must either match input shape"):
        tf.split(x, [1, 2], 1)
    with pytest.raises(ValueError, match=r"axis = 3 not in \[-1, 1\)"):
        tf.unstack(tf.zeros([2]), axis=3)
    with pytest.raises(ValueError, match="Rank-0 tensors are not supported"):
        tf.split(x, tf.constant(2), 1)
    p = tf.placeholder(tf.float32)
    with tf.Session() as sess:
        with pytest.raises(errors.InvalidArgumentError, match="Number of ways to split"):
            sess.run(tf.split(p, 4, 0), {p: np.zeros(6)})
        with pytest.raises(errors.InvalidArgumentError, match="Input shape axis 0 must equal 3"):
            sess.run(tf.unstack(p, num=3), {p: np.zeros((2, 2))})
