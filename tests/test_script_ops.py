"""``tf.py_func``: a Python function as an op (TF 1.15's ``PyFunc`` / ``PyFuncStateless``),
its tokens, its dtype checks and its errors, as TF 1.15.0 printed them."""

import numpy as np
import pytest

import minitf as tf
from minitf.distributed import LocalCluster


def test_a_python_function_runs_as_an_op_with_tfs_names_and_tokens():
    x = tf.placeholder(tf.float32)
    y = tf.py_func(lambda a: (a * 2).astype(np.float32), [x], tf.float32)
    pair = tf.py_func(
        lambda a: (a, a + np.float32(1)), [x], [tf.float32, tf.float32], stateful=False, name="pair"
    )
    assert str(y) == 'Tensor("PyFunc:0", dtype=float32)'
    assert [t.name for t in pair] == ["pair:0", "pair:1"] and pair[0].shape.ndims is None
    tokens = [y.op.get_attr("token"), pair[0].op.get_attr("token")]
    assert all(t.startswith("pyfunc_") for t in tokens) and tokens[0] != tokens[1]
    assert (y.op.type, pair[0].op.type) == ("PyFunc", "PyFuncStateless")
    assert y.op.get_attr("Tin") == [tf.float32] and pair[0].op.get_attr("Tout") == [tf.float32] * 2
    sess = tf.Session()
    got = sess.run([y, pair], {x: 3.0})
    assert got[0] == 6.0 and [float(v) for v in got[1]] == [3.0, 4.0]
    assert sess.run(tf.py_func(lambda: "ab", [], tf.string)) == b"ab"
    strings = sess.run(tf.py_func(lambda: np.array(["a", "bc"]), [], tf.string))
    assert strings.tolist() == [b"a", b"bc"]  # minitf's strings are bytes, as TF's


def test_the_values_returned_must_have_the_dtypes_promised():
    x = tf.placeholder(tf.float32)
    double = tf.py_func(lambda a: 1.5, [x], tf.float32)  # a Python float is a double
    token = double.op.get_attr("token")
    sess = tf.Session()
    with pytest.raises(tf.errors.InvalidArgumentError) as e:
        sess.run(double, {x: 1.0})
    assert e.value.message.startswith(
        "0-th value returned by %s is double, but expects float" % token
    )
    two = tf.py_func(lambda a: (a, a), [x], tf.float32)
    with pytest.raises(tf.errors.InvalidArgumentError, match="returns 2 values, but expects"):
        sess.run(two, {x: 1.0})


def test_an_exception_in_the_function_fails_the_step_with_its_text_and_traceback():
    def raiser(a):
        raise ValueError("boom")

    x = tf.placeholder(tf.float32)
    w = tf.py_func(raiser, [x], tf.float32)
    with pytest.raises(tf.errors.InvalidArgumentError) as e:
        tf.Session().run(w, {x: 1.0})
    assert e.value.message.startswith("ValueError: boom\nTraceback (most recent call last):")
    assert 'raise ValueError("boom")' in e.value.message
    with pytest.raises(TypeError, match="func must be callable"):
        tf.py_func(3, [x], tf.float32)


@pytest.mark.cluster
def test_the_function_stays_in_the_process_that_made_it():
    with LocalCluster({"worker": 1}) as lc:
        with tf.device("/job:worker/task:0"):
            y = tf.py_func(lambda: np.float32(1.0), [], tf.float32)
        with tf.Session(lc.target("worker", 0)) as sess:
            with pytest.raises(tf.errors.InvalidArgumentError) as e:
                sess.run(y)
    assert "ValueError: callback %s is not found" % y.op.get_attr("token") in e.value.message
