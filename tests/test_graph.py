"""Tests for graph construction: Graph, Operation, Tensor, variables, ``tf.device``,
``colocate_with``, ``control_dependencies``, ``group``, ``container`` and the values of the basic
ops (spec §1.6, §1.7, §1.8, §5.4, §5.5, §11.1, §11.2, §11.7).  Book sections: "Placing Operations
on Devices", "Control Dependencies", "Sharing State Across Sessions Using Resource Containers".
"""

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import minitf as tf

HYP = settings(
    max_examples=40,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def op_names():
    return [op.name for op in tf.get_default_graph().get_operations()]


def run(fetches, feed_dict=None):
    with tf.Session() as sess:
        return sess.run(fetches, feed_dict)


# -- default graph ------------------------------------------------------------------------------


def test_default_graph_is_stable_until_reset():
    """§ "Managing graphs": ops land in the default graph; reset replaces it."""
    g = tf.get_default_graph()
    assert tf.get_default_graph() is g
    c = tf.constant(1.0)
    assert c.graph is g
    assert g.get_operations() == [c.op]
    tf.reset_default_graph()
    g2 = tf.get_default_graph()
    assert g2 is not g
    assert g2.get_operations() == []
    assert tf.constant(1.0).op.name == "Const"  # names start over in the new graph


def test_reset_default_graph_inside_as_default_raises_assertion():
    """TF1: reset_default_graph inside a `with g.as_default()` block is an AssertionError."""
    g = tf.Graph()
    with g.as_default():
        with pytest.raises(AssertionError, match="nested graphs"):
            tf.reset_default_graph()
        assert tf.get_default_graph() is g
    # outside the block it works again
    tf.reset_default_graph()


def test_as_default_nesting():
    """Graph.as_default nests: the innermost block wins, exiting restores the outer graph."""
    outer_default = tf.get_default_graph()
    g1, g2 = tf.Graph(), tf.Graph()
    with g1.as_default() as got1:
        assert got1 is g1
        assert tf.get_default_graph() is g1
        a = tf.constant(1.0)
        with g2.as_default():
            assert tf.get_default_graph() is g2
            b = tf.constant(1.0)
        assert tf.get_default_graph() is g1
    assert tf.get_default_graph() is outer_default
    assert a.graph is g1 and b.graph is g2
    assert a.op.name == "Const" and b.op.name == "Const"  # separate name spaces
    assert outer_default.get_operations() == []


def test_graph_version_grows_with_ops():
    """§2.1: sessions re-place when the graph grew; the graph's version tracks growth."""
    g = tf.get_default_graph()
    v0 = g.version
    tf.constant(1.0)
    v1 = g.version
    assert v1 > v0
    tf.constant(2.0)
    assert g.version > v1


# -- unique names, name scopes (§11.1, §11.2) ---------------------------------------------------


def test_unique_names_add_add_1():
    """§11.2: repeated default names get _1, _2 ..."""
    a = tf.constant(1.0, name="a")
    b = tf.constant(2.0, name="b")
    assert (a + b).op.name == "add"
    assert (a + b).op.name == "add_1"
    assert (a + b).op.name == "add_2"
    assert tf.constant(0, name="x").op.name == "x"
    assert tf.constant(0, name="x").op.name == "x_1"


def test_unique_names_are_case_insensitive():
    """§11.2: after `a + b` (op add), tf.add(a, b) is Add_1 and the next one Add_2."""
    a = tf.constant(1.0, name="a")
    b = tf.constant(2.0, name="b")
    assert (a + b).op.name == "add"
    assert tf.add(a, b).op.name == "Add_1"
    assert tf.add(a, b).op.name == "Add_2"
    assert (a + b).op.name == "add_3"


def test_unique_name_skips_names_taken_explicitly():
    """TF's unique_name never reuses a name already in the graph (add_1 taken -> add_2)."""
    a = tf.constant(1.0, name="a")
    assert (a + a).op.name == "add"
    assert tf.constant(1.0, name="add_1").op.name == "add_1"
    assert (a + a).op.name == "add_2"


def test_name_scope_prefix_and_reuse():
    """tf.name_scope("s") prefixes names with s/; opening "s" again gives s_1/."""
    with tf.name_scope("s") as scope:
        assert scope == "s/"
        c = tf.constant(1.0, name="c")
        d = c * 2
    with tf.name_scope("s") as scope2:
        assert scope2 == "s_1/"
        e = tf.constant(1.0, name="c")
    assert c.op.name == "s/c"
    assert d.op.name == "s/mul"
    assert d.op.inputs[1].op.name == "s/mul/y"
    assert e.op.name == "s_1/c"


def test_nested_name_scopes_and_absolute_scope():
    """Nested scopes join with '/'; a scope name ending in '/' is reused verbatim."""
    with tf.name_scope("outer"):
        with tf.name_scope("inner") as inner:
            x = tf.constant(1.0, name="x")
    assert inner == "outer/inner/"
    assert x.op.name == "outer/inner/x"
    with tf.name_scope("outer/inner/"):
        y = tf.constant(1.0, name="y")
    assert y.op.name == "outer/inner/y"


def test_literal_operand_names():
    """§11.1: Python literals become Consts named after the op scope: add/y, mul/x."""
    t = tf.constant([1.0, 2.0], name="t")
    s = t + 2
    assert s.op.name == "add"
    assert s.op.inputs[0] is t
    assert s.op.inputs[1].op.name == "add/y"
    assert s.op.inputs[1].op.type == "Const"
    m = 2 * t
    assert m.op.name == "mul"
    assert m.op.inputs[0].op.name == "mul/x"
    assert m.op.inputs[1] is t
    r = 1 - t
    assert r.op.name == "sub" and r.op.inputs[0].op.name == "sub/x"


@pytest.mark.parametrize(
    "build, name, op_type",
    [
        (lambda a, b: a + b, "add", "AddV2"),
        (lambda a, b: tf.add(a, b), "Add", "AddV2"),
        (lambda a, b: a - b, "sub", "Sub"),
        (lambda a, b: a * b, "mul", "Mul"),
        (lambda a, b: a / b, "truediv", "RealDiv"),
        (lambda a, b: -a, "Neg", "Neg"),
        (lambda a, b: a // b, "floordiv", "FloorDiv"),
        (lambda a, b: tf.square(a), "Square", "Square"),
        (lambda a, b: tf.matmul(tf.reshape(a, [1, 1]), tf.reshape(b, [1, 1])), "MatMul", "MatMul"),
    ],
)
def test_op_types_and_default_names(build, name, op_type):
    """§11.1: operators and functions build TF's op types under TF's default names."""
    a = tf.constant(6.0, name="a")
    b = tf.constant(4.0, name="b")
    t = build(a, b)
    assert t.op.name == name
    assert t.op.type == op_type


def test_subtract_multiply_names():
    """tf.subtract / tf.multiply default names are Sub / Mul (the op type)."""
    a = tf.constant(6.0, name="a")
    assert tf.subtract(a, a).op.name == "Sub"
    assert tf.multiply(a, a).op.name == "Mul"
    assert tf.negative(a).op.name == "Neg"


def test_float_division_values_and_names():
    """§11.1: `/` on floats is RealDiv named truediv."""
    a = tf.constant([6.0, 1.0])
    b = tf.constant([4.0, 4.0])
    q = a / b
    assert q.dtype == tf.float32
    np.testing.assert_allclose(run(q), [1.5, 0.25])


def test_int_division_casts_to_float64():
    """TF1 `/` on int32 casts both sides to float64 (truediv/Cast, truediv/Cast_1)."""
    a = tf.constant([7, 1], name="a")
    b = tf.constant([2, 4], name="b")
    q = a / b
    assert q.dtype == tf.float64
    assert q.op.type == "RealDiv" and q.op.name == "truediv"
    assert [t.op.type for t in q.op.inputs] == ["Cast", "Cast"]
    assert [t.op.name for t in q.op.inputs] == ["truediv/Cast", "truediv/Cast_1"]
    out = run(q)
    assert out.dtype == np.float64
    np.testing.assert_allclose(out, [3.5, 0.25])


def test_floordiv_values():
    """`//` is FloorDiv: floor semantics, also for negative ints."""
    a = tf.constant([7, -7], name="a")
    b = tf.constant([2, 2], name="b")
    np.testing.assert_array_equal(run(a // b), [3, -4])


def test_float_floordiv_is_floor_of_quotient():
    """TF's float FloorDiv kernel computes floor(x / y): 1.0 // 0.1 is 10 in float32 (numpy's
    floor_divide, which is fmod-based, gives 9)."""
    x = tf.constant(1.0, name="x")
    y = tf.constant(0.1, name="y")
    assert run(x // y) == np.floor(np.float32(1.0) / np.float32(0.1)) == 10.0


# -- Tensor and Operation objects ---------------------------------------------------------------


def test_tensor_name_dtype_shape():
    """A tensor is named '<op>:<index>' and carries dtype and static shape."""
    c = tf.constant([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], name="c")
    assert c.name == "c:0"
    assert c.value_index == 0
    assert c.op.outputs == [c]
    assert c.dtype == tf.float32
    assert c.shape.as_list() == [2, 3]
    assert c.get_shape().as_list() == [2, 3]
    assert c.graph is tf.get_default_graph()
    p = tf.placeholder(tf.float32, shape=[None, 3], name="p")
    assert p.shape.as_list() == [None, 3]
    u = tf.placeholder(tf.int32, name="u")
    assert u.shape.ndims is None
    # TF prints no shape when not even the rank is known; repr always shows one
    assert (str(p), str(u)) == (
        'Tensor("p:0", shape=(?, 3), dtype=float32)',
        'Tensor("u:0", dtype=int32)',
    )
    assert repr(u) == "<tf.Tensor 'u:0' shape=<unknown> dtype=int32>"


def test_tensor_repr_and_str():
    """TF1 repr <tf.Tensor 'add:0' shape=() dtype=float32> and str Tensor("add:0", ...)."""
    a = tf.constant(1.0, name="a")
    s = a + a
    assert repr(s) == "<tf.Tensor 'add:0' shape=() dtype=float32>"
    assert str(s) == 'Tensor("add:0", shape=(), dtype=float32)'
    m = tf.constant([[1, 2]], name="m")
    assert repr(m) == "<tf.Tensor 'm:0' shape=(1, 2) dtype=int32>"
    with tf.device("/gpu:0"):
        g = tf.constant(1.0, name="g")
    assert str(g) == 'Tensor("g:0", shape=(), dtype=float32, device=/device:GPU:0)'


def test_tensor_bool_and_iter_raise_type_error():
    """Graph tensors are symbolic: `if t:` and `for x in t:` raise TypeError."""
    t = tf.constant([1.0, 2.0])
    with pytest.raises(TypeError, match="as a Python `bool` is not allowed"):
        bool(t)
    with pytest.raises(TypeError):
        if t:
            pass
    with pytest.raises(TypeError, match="only iterable when eager execution is enabled"):
        iter(t)
    with pytest.raises(TypeError):
        list(t)


def test_tensors_hash_by_identity():
    """TF1 tensors compare by identity, so they can be dict keys (feed_dict)."""
    a = tf.constant(1.0)
    b = tf.constant(1.0)
    d = {a: 1, b: 2}
    assert d[a] == 1 and d[b] == 2
    assert (a == a) is True
    assert (a == b) is False


def test_consumers():
    """Tensor.consumers() lists the ops taking it as a data input, in creation order."""
    a = tf.constant(1.0, name="a")
    b = a + 1
    c = a * b
    assert a.consumers() == [b.op, c.op]
    assert b.consumers() == [c.op]
    assert c.consumers() == []
    with tf.control_dependencies([c]):
        d = tf.identity(a, name="d")
    assert c.consumers() == []  # control edges are not consumers
    assert a.consumers() == [b.op, c.op, d.op]


def test_operation_attributes():
    """Operation exposes name, type, inputs, outputs, attrs, node_def."""
    a = tf.constant(1.0, name="a")
    b = tf.constant(2.0, name="b")
    c = tf.add(a, b, name="c")
    op = c.op
    assert op.name == "c"
    assert op.type == "AddV2"
    assert list(op.inputs) == [a, b]
    assert op.outputs == [c]
    assert op.graph is tf.get_default_graph()
    assert op.get_attr("T") == tf.float32
    assert op.device == ""
    assert op.control_inputs == []
    nd = op.node_def
    assert nd.name == "c" and nd.op == "AddV2"
    assert list(nd.input) == ["a", "b"]
    with pytest.raises(ValueError):
        op.get_attr("no_such_attr")
    assert repr(op) == "<tf.Operation 'c' type=AddV2>"


def test_get_operation_and_tensor_by_name():
    """Graph lookups by name: 'c' is the op, 'c:0' its first output."""
    c = tf.constant(1.0, name="c")
    g = tf.get_default_graph()
    assert g.get_operation_by_name("c") is c.op
    assert g.get_tensor_by_name("c:0") is c
    assert g.as_graph_element("c") is c.op
    assert g.as_graph_element("c:0") is c
    assert g.as_graph_element(c) is c
    assert g.as_graph_element(c.op) is c.op


def test_lookup_errors():
    """TF's as_graph_element errors: ValueError / KeyError / TypeError by case."""
    tf.constant(1.0, name="c")
    g = tf.get_default_graph()
    with pytest.raises(ValueError, match="refers to an Operation, not a Tensor"):
        g.get_tensor_by_name("c")
    with pytest.raises(KeyError, match="The operation, 'nope', does not exist in the graph"):
        g.get_tensor_by_name("nope:0")
    with pytest.raises(KeyError, match="exists but only has 1 outputs"):
        g.get_tensor_by_name("c:1")
    with pytest.raises(ValueError, match="appears to refer to a Tensor, not a Operation"):
        g.get_operation_by_name("c:0")
    with pytest.raises(KeyError, match="refers to an Operation not in the graph"):
        g.get_operation_by_name("nope")
    with pytest.raises(ValueError, match="looks a like a Tensor name, but is not a valid one"):
        g.as_graph_element("c:x")
    with pytest.raises(TypeError, match="Can not convert a int into a Tensor or Operation"):
        g.as_graph_element(1)
    other = tf.Graph()
    with other.as_default():
        o = tf.constant(1.0, name="o")
    with pytest.raises(ValueError, match="is not an element of this graph"):
        g.as_graph_element(o)
    with pytest.raises(ValueError, match="is not an element of this graph"):
        g.as_graph_element(o.op)


def test_inputs_from_another_graph_are_rejected():
    """An op cannot mix tensors of two graphs."""
    a = tf.constant(1.0)
    with tf.Graph().as_default():
        b = tf.constant(1.0)
        with pytest.raises(ValueError, match="must be from the same graph"):
            tf.add(a, b)


# -- variables (§1.8) ---------------------------------------------------------------------------


def test_variable_creates_four_ops():
    """§1.8: tf.Variable(3.0, name='a') makes a/initial_value, a, a/Assign, a/read."""
    v = tf.Variable(3.0, name="a")
    ops = tf.get_default_graph().get_operations()
    assert [(o.name, o.type) for o in ops] == [
        ("a/initial_value", "Const"),
        ("a", "VariableV2"),
        ("a/Assign", "Assign"),
        ("a/read", "Identity"),
    ]
    assert v.op is ops[1]
    assert v.name == "a:0"
    assert v.initializer is ops[2]
    assert v.initial_value is ops[0].outputs[0]
    assert v.initial_value.name == "a/initial_value:0"
    assert v.value() is ops[3].outputs[0]
    assert v.value().name == "a/read:0"
    assert v.dtype == tf.float32._as_ref
    assert v.dtype.name == "float32_ref"
    assert v.value().dtype == tf.float32
    assert v.shape.as_list() == []
    assert repr(v) == "<tf.Variable 'a:0' shape=() dtype=float32_ref>"
    # Assign and read are colocated with the variable (§1.8 point 3, 4)
    assert ops[2].get_attr("_class") == [b"loc:@a"]
    assert ops[3].get_attr("_class") == [b"loc:@a"]
    assert list(ops[2].inputs) == [v.op.outputs[0], v.initial_value]


def test_default_variable_names():
    """Unnamed variables are Variable, Variable_1, ..."""
    v1 = tf.Variable(1.0)
    v2 = tf.Variable(1.0)
    assert v1.op.name == "Variable"
    assert v2.op.name == "Variable_1"
    assert v2.initializer.name == "Variable_1/Assign"


def test_variable_device_placement_of_its_ops():
    """§1.8: VariableV2, Assign, read follow the device scope; Assign/read copy the var."""
    with tf.device("/gpu:1"):
        v = tf.Variable([1.0, 2.0], name="v")
    g = tf.get_default_graph()
    assert v.device == "/device:GPU:1"
    assert g.get_operation_by_name("v/initial_value").device == "/device:GPU:1"
    assert g.get_operation_by_name("v/Assign").device == "/device:GPU:1"
    assert g.get_operation_by_name("v/read").device == "/device:GPU:1"


def test_variable_assign_ops_values():
    """v.assign / assign_add / assign_sub return the new value when run."""
    v = tf.Variable([1.0, 2.0], name="v")
    a = v.assign([5.0, 6.0])
    add = v.assign_add([1.0, 1.0])
    sub = v.assign_sub([0.5, 0.5])
    assert a.op.type == "Assign" and a.op.name == "Assign"
    assert add.op.type == "AssignAdd" and add.op.name == "AssignAdd"
    assert sub.op.type == "AssignSub" and sub.op.name == "AssignSub"
    for t in (a, add, sub):
        assert t.op.get_attr("_class") == [b"loc:@v"]
    with tf.Session() as sess:
        sess.run(v.initializer)
        np.testing.assert_allclose(sess.run(v), [1.0, 2.0])
        np.testing.assert_allclose(sess.run(a), [5.0, 6.0])
        np.testing.assert_allclose(sess.run(add), [6.0, 7.0])
        np.testing.assert_allclose(sess.run(sub), [5.5, 6.5])
        np.testing.assert_allclose(sess.run(v.value()), [5.5, 6.5])
        np.testing.assert_allclose(sess.run(tf.assign(v, [0.0, 0.0])), [0.0, 0.0])


def test_variable_arithmetic_uses_read():
    """Using a variable in an op reads its snapshot a/read."""
    v = tf.Variable(2.0, name="v")
    y = v * 3
    assert y.op.inputs[0] is v.value()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        assert sess.run(y) == 6.0


def test_get_variable_zeros_initializer_ops():
    """§1.8: get_variable initializers live in w/Initializer/ with device '' and _class."""
    with tf.device("/gpu:0"):
        w = tf.get_variable("w", [2, 3], initializer=tf.zeros_initializer())
    g = tf.get_default_graph()
    init = g.get_operation_by_name("w/Initializer/zeros")
    assert init.type == "Const"
    assert init.device == ""
    assert init.get_attr("_class") == [b"loc:@w"]
    assert w.op.name == "w" and w.op.type == "VariableV2"
    assert w.device == "/device:GPU:0"
    assert g.get_operation_by_name("w/Assign").device == "/device:GPU:0"
    assert g.get_operation_by_name("w/read").device == "/device:GPU:0"
    assert w.shape.as_list() == [2, 3]
    with tf.Session() as sess:
        sess.run(w.initializer)
        np.testing.assert_array_equal(sess.run(w), np.zeros((2, 3), np.float32))


def test_get_variable_constant_initializer_ops():
    """constant_initializer(2) makes w/Initializer/Const, colocated with w, device ''."""
    with tf.device("/gpu:0"):
        w = tf.get_variable("w", (2, 2), initializer=tf.constant_initializer(2))
    init = tf.get_default_graph().get_operation_by_name("w/Initializer/Const")
    assert init.device == ""
    assert init.get_attr("_class") == [b"loc:@w"]
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        np.testing.assert_array_equal(sess.run(w), np.full((2, 2), 2.0, np.float32))


def test_variable_scope_reuse_errors():
    """get_variable: existing name without reuse, or missing name with reuse=True, fails."""
    with tf.variable_scope("s"):
        w = tf.get_variable("w", [1])
    assert w.name == "s/w:0"
    with pytest.raises(ValueError, match="Variable s/w already exists, disallowed"):
        with tf.variable_scope("s"):
            tf.get_variable("w", [1])
    with tf.variable_scope("s", reuse=True):
        assert tf.get_variable("w", [1]) is w
    with pytest.raises(ValueError, match="Variable s/x does not exist"):
        with tf.variable_scope("s", reuse=True):
            tf.get_variable("x", [1])
    with tf.variable_scope("s", reuse=tf.AUTO_REUSE):
        assert tf.get_variable("w", [1]) is w
        x = tf.get_variable("x", [1])
    assert x.name == "s/x:0"


def test_variable_scope_reuse_variables():
    """scope.reuse_variables() switches the open scope to reuse."""
    with tf.variable_scope("layer") as scope:
        w = tf.get_variable("w", [2])
        scope.reuse_variables()
        assert tf.get_variable("w", [2]) is w


def test_variable_collections():
    """Variables join GLOBAL_VARIABLES (and TRAINABLE_VARIABLES when trainable)."""
    v1 = tf.Variable(1.0, name="v1")
    v2 = tf.Variable(1.0, name="v2", trainable=False)
    assert tf.global_variables() == [v1, v2]
    assert tf.trainable_variables() == [v1]


# -- tf.device (§1.6, §11.7) --------------------------------------------------------------------


@pytest.mark.parametrize(
    "given_device, stored",
    [
        ("/cpu:0", "/device:CPU:0"),
        ("/gpu:1", "/device:GPU:1"),
        ("/GPU:0", "/device:GPU:0"),
        ("/device:GPU:1", "/device:GPU:1"),
        ("/job:ps/task:0", "/job:ps/task:0"),
        ("/task:1/job:worker/cpu:0", "/job:worker/task:1/device:CPU:0"),
        ("/job:worker/replica:0/task:1/gpu:*", "/job:worker/replica:0/task:1/device:GPU:*"),
    ],
)
def test_device_strings_are_canonicalised(given_device, stored):
    """§1.6/§10.3: strings given to tf.device are stored in canonical form."""
    with tf.device(given_device):
        c = tf.constant(1.0)
    assert c.op.device == stored
    assert c.device == stored


def test_nested_device_merge_fieldwise():
    """§1.6: nested device strings merge field-wise, inner wins."""
    with tf.device("/job:worker"):
        with tf.device("/gpu:1"):
            a = tf.constant(1.0)
        b = tf.constant(1.0)
    assert a.device == "/job:worker/device:GPU:1"
    assert b.device == "/job:worker"
    with tf.device("/job:a/task:1/device:GPU:0"):
        with tf.device("/task:3/cpu:*"):
            c = tf.constant(1.0)
    assert c.device == "/job:a/task:3/device:CPU:0"


def test_device_type_and_index_decoupled():
    """§10.1: outer /device:CPU:7 + inner /device:GPU:* -> /device:GPU:7."""
    with tf.device("/device:CPU:7"):
        with tf.device("/device:GPU:*"):
            c = tf.constant(1.0)
    assert c.device == "/device:GPU:7"


def test_empty_device_keeps_outer_none_clears():
    """§1.6: tf.device("") changes nothing; tf.device(None) forgets outer scopes."""
    with tf.device("/job:ps/task:0"):
        with tf.device(""):
            a = tf.constant(1.0)
        with tf.device(None):
            b = tf.constant(1.0)
            with tf.device("/gpu:0"):
                c = tf.constant(1.0)
    assert a.device == "/job:ps/task:0"
    assert b.device == ""
    assert c.device == "/device:GPU:0"


def test_device_function_inner_then_outer_string():
    """§1.6: an inner function's result is stored verbatim, then completed by outer strings."""
    seen = []

    def fn(op):
        seen.append((op.name, op.type, op.device))
        return "/gpu:0"

    with tf.device("/job:ps"):
        with tf.device(fn):
            a = tf.constant(1.0, name="a")
    assert seen == [("a", "Const", "")]
    assert a.device == "/job:ps/device:GPU:0"
    with tf.device(fn):
        b = tf.constant(1.0, name="b")
    assert b.device == "/gpu:0"  # verbatim, not canonicalised (§10.3)


def test_device_function_outer_overrides_inner_strings():
    """§1.6: a function as the outer block runs last and replaces what inner strings set."""
    seen = []

    def fn(op):
        seen.append(op.device)
        return "/cpu:0"

    with tf.device(fn):
        with tf.device("/gpu:1"):
            a = tf.constant(1.0)
    assert seen == ["/device:GPU:1"]  # the function sees the inner scope's result
    assert a.device == "/cpu:0"


def test_device_function_returning_empty_clears_and_spec_is_converted():
    """A device function may return '' (clears) or a DeviceSpec (stored as its string)."""
    with tf.device("/gpu:1"):
        with tf.device(lambda op: ""):
            a = tf.constant(1.0)
    assert a.device == "/device:GPU:1"  # '' from the function, then the outer string fills in
    with tf.device(lambda op: ""):
        b = tf.constant(1.0)
    assert b.device == ""
    with tf.device(lambda op: tf.DeviceSpec(job="ps", device_type="CPU", device_index=0)):
        c = tf.constant(1.0)
    assert c.device == "/job:ps/device:CPU:0"


def test_device_function_returning_none_is_an_error():
    """§1.6: TF1.15 rejects None from a device function with a TypeError."""
    with tf.device(lambda op: None):
        with pytest.raises(TypeError):
            tf.constant(1.0)


def test_device_spec_read_at_op_creation():
    """§11.7: a DeviceSpec given to tf.device is read when each op is created."""
    spec = tf.DeviceSpec(device_type="GPU", device_index=0)
    with tf.device(spec):
        a = tf.constant(1.0)
        spec.device_index = 1
        b = tf.constant(1.0)
    assert a.device == "/device:GPU:0"
    assert b.device == "/device:GPU:1"


@pytest.mark.parametrize("bad", ["/foo:1", "/job:a/gpu:0/cpu:0", "/task:x", "/device:GPU"])
def test_malformed_device_string_raises_at_scope_entry(bad):
    """§1.2/§1.6: a malformed string raises ValueError entering tf.device, before any op."""
    with pytest.raises(ValueError):
        with tf.device(bad):
            pass
    assert tf.get_default_graph().get_operations() == []


def test_malformed_device_messages():
    """§11.3: TF 2.21 wording of the two common parse errors."""
    with pytest.raises(
        ValueError,
        match=re.escape(
            "Unknown attribute 'foo' is encountered while parsing the device spec: '/foo:1'."
        ),
    ):
        with tf.device("/foo:1"):
            pass
    with pytest.raises(ValueError, match="Multiple device types are not allowed"):
        with tf.device("/gpu:0/cpu:0"):
            pass


def test_device_scope_is_per_graph():
    """The device stack belongs to the graph: another graph's ops are unaffected."""
    g2 = tf.Graph()
    with tf.device("/gpu:1"):
        with g2.as_default():
            a = tf.constant(1.0)
        b = tf.constant(1.0)
    assert a.device == ""
    assert b.device == "/device:GPU:1"


def test_device_is_never_changed_by_running():
    """§1.6: op.device is only the request; running does not write the real device back."""
    a = tf.constant(1.0, name="a")
    b = a * 2
    with tf.device("/cpu:0"):
        c = b + 1
    with tf.Session() as sess:
        assert sess.run(c) == 3.0
    assert a.op.device == "" and b.op.device == "" and c.op.device == "/device:CPU:0"


# -- colocation (§1.7) --------------------------------------------------------------------------


def test_colocate_with_copies_device_and_sets_class():
    """§1.7: ops created under colocate_with(v) get v's device and _class=[loc:@v]."""
    with tf.device("/gpu:1"):
        w = tf.Variable(1.0, name="w")
    with tf.colocate_with(w):
        k = tf.constant(1.0, name="k")
    assert k.device == "/device:GPU:1"
    assert k.op.get_attr("_class") == [b"loc:@w"]
    assert k.op.colocation_groups() == [b"loc:@w"]


def test_colocate_with_suspends_outer_device_scopes():
    """§1.7: outer tf.device scopes do not apply inside colocate_with."""
    a = tf.constant(1.0, name="a")
    with tf.device("/job:x"):
        with tf.colocate_with(a):
            k = tf.constant(1.0, name="k")
        after = tf.constant(1.0, name="after")
    assert k.device == ""
    assert k.op.get_attr("_class") == [b"loc:@a"]
    assert after.device == "/job:x"  # restored on exit


def test_device_inside_colocate_with():
    """§1.7 (TF1.15): colocation overwrites a device set inside the block when the target has
    one; with a device-less target the inner device stays."""
    with tf.device("/gpu:1"):
        w = tf.Variable(1.0, name="w")
    a = tf.constant(1.0, name="a")
    with tf.colocate_with(w):
        with tf.device("/cpu:0"):
            k = tf.constant(1.0, name="k")
    with tf.colocate_with(a):
        with tf.device("/cpu:0"):
            m = tf.constant(1.0, name="m")
    assert k.device == "/device:GPU:1"
    assert m.device == "/device:CPU:0"
    assert m.op.get_attr("_class") == [b"loc:@a"]


def test_colocate_with_accepts_tensor_operation_variable():
    """colocate_with takes an Operation, a Tensor or a Variable; groups are unioned."""
    a = tf.constant(1.0, name="a")
    b = tf.constant(1.0, name="b")
    v = tf.Variable(1.0, name="v")
    with tf.colocate_with(b.op):
        with tf.colocate_with(a):
            x = tf.constant(1.0, name="x")
    assert x.op.get_attr("_class") == [b"loc:@a", b"loc:@b"]
    with tf.colocate_with(v):
        y = tf.constant(1.0, name="y")
    assert y.op.get_attr("_class") == [b"loc:@v"]
    with tf.colocate_with(v.value()):  # v/read carries _class loc:@v
        z = tf.constant(1.0, name="z")
    assert z.op.get_attr("_class") == [b"loc:@v"]
    assert a.op.colocation_groups() == [b"loc:@a"]


def test_colocate_with_none():
    """§1.7: colocate_with(None) needs ignore_existing=True; then it clears colocation."""
    a = tf.constant(1.0, name="a")
    with pytest.raises(
        ValueError,
        match="Trying to reset colocation \\(op is None\\) but ignore_existing is not True",
    ):
        with tf.colocate_with(None):
            pass
    with tf.colocate_with(a):
        with tf.colocate_with(None, ignore_existing=True):
            k = tf.constant(1.0, name="k")
        m = tf.constant(1.0, name="m")
    assert k.op.colocation_groups() == [b"loc:@k"]
    assert m.op.get_attr("_class") == [b"loc:@a"]


# -- control dependencies (§5.4) ----------------------------------------------------------------


def test_control_dependencies_only_new_ops():
    """§5.4: only ops created inside the block get control inputs."""
    a = tf.constant(1.0, name="a")
    b = tf.constant(2.0, name="b")
    before = tf.identity(b, name="before")
    with tf.control_dependencies([a]):
        c = tf.identity(b, name="c")
        same = before  # using an existing tensor does nothing
    assert c.op.control_inputs == [a.op]
    assert same.op.control_inputs == []
    assert "^a" in c.op.node_def.input
    d = tf.identity(b, name="d")
    assert d.op.control_inputs == []


def test_control_dependencies_nesting_union_and_dedup():
    """§5.4: nested blocks add up; an input already active is not repeated."""
    a = tf.constant(1.0, name="a")
    b = tf.constant(2.0, name="b")
    x = tf.constant(3.0, name="x")
    with tf.control_dependencies([a]):
        with tf.control_dependencies([a, b]):
            c = tf.identity(x, name="c")
        d = tf.identity(x, name="d")
    assert c.op.control_inputs == [a.op, b.op]
    assert d.op.control_inputs == [a.op]
    with tf.control_dependencies([a, a, b]):
        e = tf.identity(x, name="e")
    assert e.op.control_inputs == [a.op, b.op]


def test_control_dependencies_none_clears():
    """§5.4: control_dependencies(None) starts empty; blocks inside it start from empty."""
    a = tf.constant(1.0, name="a")
    b = tf.constant(2.0, name="b")
    x = tf.constant(3.0, name="x")
    with tf.control_dependencies([a]):
        with tf.control_dependencies(None):
            c = tf.identity(x, name="c")
            with tf.control_dependencies([b]):
                d = tf.identity(x, name="d")
        e = tf.identity(x, name="e")
    assert c.op.control_inputs == []
    assert d.op.control_inputs == [b.op]
    assert e.op.control_inputs == [a.op]


def test_control_dependencies_dominated_inputs_pruned():
    """§5.4: an input created inside the block already implies the block's controls; a control
    that is already a data input is not added."""
    a = tf.constant(1.0, name="a")
    b = tf.constant(2.0, name="b")
    with tf.control_dependencies([a]):
        c = tf.identity(b, name="c")  # b made outside -> gets ^a
        d = c + 1  # c and add/y made inside -> nothing
        e = tf.identity(a, name="e")  # a is a data input -> nothing
    assert c.op.control_inputs == [a.op]
    assert d.op.inputs[1].op.control_inputs == [a.op]  # the literal add/y
    assert d.op.control_inputs == []
    assert e.op.control_inputs == []


def test_control_dependencies_pruning_is_per_block():
    """§5.4: pruning is decided block by block."""
    a = tf.constant(1.0, name="a")
    b = tf.constant(2.0, name="b")
    x = tf.constant(3.0, name="x")
    with tf.control_dependencies([a]):
        inner_input = tf.identity(x, name="ii")
        with tf.control_dependencies([b]):
            y = tf.identity(inner_input, name="y")
    assert inner_input.op.control_inputs == [a.op]
    assert y.op.control_inputs == [b.op]


def test_control_dependencies_accepts_tensors_names_variables():
    """§5.4: Tensors map to their op, names are looked up, a Variable means its VariableV2."""
    a = tf.constant(1.0, name="a")
    b = tf.constant(2.0, name="b")
    v = tf.Variable(1.0, name="v")
    x = tf.constant(3.0, name="x")
    with tf.control_dependencies(["a", "b:0", v]):
        c = tf.identity(x, name="c")
    assert c.op.control_inputs == [a.op, b.op, v.op]
    assert v.op.type == "VariableV2"
    assert v.initializer not in c.op.control_inputs


@pytest.mark.parametrize("bad", [1.5, 3, object()])
def test_control_dependencies_bad_objects(bad):
    """§5.4: other objects raise TypeError (e.g. 'Can not convert a float into ...')."""
    with pytest.raises(
        TypeError, match="Can not convert a %s into a Tensor or Operation" % type(bad).__name__
    ):
        with tf.control_dependencies([bad]):
            pass


def test_control_dependencies_run_first():
    """§5.4: control inputs run before the op in every step that runs it."""
    counter = tf.Variable(0, name="counter")
    inc = tf.assign_add(counter, 1)
    with tf.control_dependencies([inc]):
        out = tf.constant(5, name="out") * 2
    with tf.Session() as sess:
        sess.run(counter.initializer)
        assert sess.run(out) == 10
        assert sess.run(out) == 10
        assert sess.run(counter) == 2


# -- group, initializers, containers ------------------------------------------------------------


def test_group_is_noop_with_control_inputs():
    """tf.group makes a NoOp named group_deps waiting for its inputs."""
    a = tf.constant(1.0, name="a")
    b = tf.constant(2.0, name="b")
    g = tf.group(a, b.op)
    assert g.type == "NoOp"
    assert g.name == "group_deps"
    assert set(g.control_inputs) == {a.op, b.op}
    assert list(g.inputs) == []
    assert g.outputs == []
    g2 = tf.group(a, name="mine")
    assert g2.name == "mine"
    assert tf.group(a).name == "group_deps_1"


def test_group_runs_its_inputs():
    """Running a group runs every grouped op."""
    v1 = tf.Variable(0.0, name="v1")
    v2 = tf.Variable(0.0, name="v2")
    both = tf.group(v1.assign(1.0), v2.assign(2.0))
    with tf.Session() as sess:
        assert sess.run(both) is None
        assert sess.run([v1, v2]) == [1.0, 2.0]


def test_global_variables_initializer():
    """global_variables_initializer is a NoOp named init over every variable's Assign."""
    v1 = tf.Variable(1.0, name="v1")
    v2 = tf.Variable([2.0, 3.0], name="v2")
    init = tf.global_variables_initializer()
    assert init.type == "NoOp"
    assert init.name == "init"
    assert set(init.control_inputs) == {v1.initializer, v2.initializer}
    with tf.Session() as sess:
        assert sess.run(init) is None
        assert sess.run(v1) == 1.0
        np.testing.assert_array_equal(sess.run(v2), [2.0, 3.0])


def test_global_variables_initializer_without_variables():
    """With no variables the initializer is still a NoOp named init."""
    init = tf.global_variables_initializer()
    assert init.type == "NoOp" and init.name == "init"
    assert init.control_inputs == []


def test_container_sets_variable_attr():
    """§5.5: tf.container fills the `container` attr of VariableV2 ops created inside."""
    outside = tf.Variable(1.0, name="outside")
    with tf.container("box"):
        inside = tf.Variable(1.0, name="inside")
        c = tf.constant(1.0, name="c")
        with tf.container(""):
            default = tf.Variable(1.0, name="default")
    assert outside.op.get_attr("container") == ""
    assert inside.op.get_attr("container") == "box"
    assert default.op.get_attr("container") == ""
    with pytest.raises(ValueError):
        c.op.get_attr("container")  # only ops with a container attr get one


# -- shape and dtype errors at graph construction -----------------------------------------------


def test_broadcast_shape_error():
    """Incompatible elementwise shapes fail at construction with TF's text."""
    with pytest.raises(ValueError, match="Dimensions must be equal, but are 2 and 3"):
        tf.constant([1.0, 2.0]) + tf.constant([1.0, 2.0, 3.0])


def test_matmul_shape_errors():
    """MatMul checks inner dimensions and ranks at construction."""
    with pytest.raises(ValueError, match="Dimensions must be equal, but are 3 and 2") as e:
        tf.matmul(tf.ones([2, 3]), tf.ones([2, 3]))
    assert "[2,3], [2,3]" in str(e.value)
    with pytest.raises(ValueError, match="Shape must be rank 2 but is rank 1"):
        tf.matmul(tf.ones([2]), tf.ones([2, 3]))
    with pytest.raises(ValueError, match="Shape must be rank 2 but is rank 3"):
        tf.matmul(tf.ones([2, 2]), tf.ones([2, 2, 2]))
    # transposes are taken into account
    assert tf.matmul(tf.ones([3, 2]), tf.ones([3, 4]), transpose_a=True).shape.as_list() == [2, 4]


def test_dtype_mismatch_type_error():
    """Mixing float32 and int32 tensors is a TypeError."""
    with pytest.raises(
        TypeError,
        match="Input 'y' of 'AddV2' Op has type int32 that does not "
        "match type float32 of argument 'x'",
    ):
        tf.constant(1.0) + tf.constant(1)
    with pytest.raises(TypeError):
        tf.matmul(tf.ones([2, 2]), tf.ones([2, 2], dtype=tf.int32))


def test_constant_value_not_representable():
    """tf.constant(3.5, dtype=tf.int32) is a TypeError."""
    with pytest.raises(TypeError, match="Expected int32, got 3.5 of type 'float' instead"):
        tf.constant(3.5, dtype=tf.int32)
    with pytest.raises(TypeError):
        tf.constant("x", dtype=tf.float32)


def test_reshape_element_count_error():
    """Reshape with the wrong element count fails at construction."""
    with pytest.raises(
        ValueError,
        match=re.escape("Cannot reshape a tensor with 6 elements to shape [4] (4 elements)"),
    ):
        tf.reshape(tf.ones([2, 3]), [4])
    with pytest.raises(ValueError, match="Cannot reshape a tensor with 6 elements"):
        tf.reshape(tf.ones([2, 3]), [4, -1])


# -- op values -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value, dtype, np_dtype",
    [
        (1, tf.int32, np.int32),
        (1.0, tf.float32, np.float32),
        (True, tf.bool, np.bool_),
        ([1, 2], tf.int32, np.int32),
        ([1, 2.5], tf.float32, np.float32),
        (2**40, tf.int64, np.int64),
        (np.arange(3, dtype=np.int64), tf.int64, np.int64),
        (np.array([1.0]), tf.float64, np.float64),
        (np.float16(1), tf.float16, np.float16),
    ],
)
def test_constant_dtype_inference(value, dtype, np_dtype):
    """tf.constant infers int32/float32 for Python numbers and keeps numpy dtypes."""
    c = tf.constant(value)
    assert c.dtype == dtype
    out = run(c)
    assert np.asarray(out).dtype == np_dtype
    np.testing.assert_array_equal(out, np.asarray(value))


def test_constant_string():
    """String constants come back as bytes."""
    c = tf.constant("hi")
    assert c.dtype == tf.string
    assert run(c) == b"hi"


def test_constant_shape_fill_rules():
    """tf.constant(v, shape=s): scalars fill, short lists repeat the last element, exact sizes
    reshape."""
    a = tf.constant(7, shape=[2, 3])
    b = tf.constant([1, 2], shape=[2, 2])
    c = tf.constant([[1, 2], [3, 4]], shape=[4])
    d = tf.constant([1, 2, 3, 4, 5, 6, 7], shape=[10])
    assert a.shape.as_list() == [2, 3] and d.shape.as_list() == [10]
    ra, rb, rc, rd = run([a, b, c, d])
    np.testing.assert_array_equal(ra, np.full((2, 3), 7))
    np.testing.assert_array_equal(rb, [[1, 2], [2, 2]])
    np.testing.assert_array_equal(rc, [1, 2, 3, 4])
    np.testing.assert_array_equal(rd, [1, 2, 3, 4, 5, 6, 7, 7, 7, 7])


def test_constant_too_many_elements():
    """TF: 'Too many elements provided. Needed at most 5, but received 7' (ValueError)."""
    with pytest.raises(
        ValueError, match="Too many elements provided. Needed at most 5, but received 7"
    ):
        tf.constant([1, 2, 3, 4, 5, 6, 7], shape=[5])


def test_constant_verify_shape():
    """verify_shape=True requires the exact shape (TypeError)."""
    with pytest.raises(TypeError, match=re.escape("Expected Tensor's shape: (2, 2), got (2,).")):
        tf.constant([1, 2], shape=[2, 2], verify_shape=True)


def test_constant_explicit_dtype_converts():
    """An explicit dtype converts the value."""
    c = tf.constant([1, 2], dtype=tf.float64)
    out = run(c)
    assert out.dtype == np.float64
    np.testing.assert_array_equal(out, [1.0, 2.0])


def test_placeholder_and_identity():
    """A placeholder's fed value flows through identity."""
    p = tf.placeholder(tf.float32, shape=[None, 2], name="p")
    i = tf.identity(p)
    assert p.op.type == "Placeholder" and i.op.type == "Identity" and i.op.name == "Identity"
    assert i.shape.as_list() == [None, 2]
    out = run(i, {p: [[1, 2], [3, 4], [5, 6]]})
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, [[1, 2], [3, 4], [5, 6]])


def test_expand_dims():
    """expand_dims inserts a 1 at the axis (negative axes count from the end)."""
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    c = tf.constant(x)
    e0 = tf.expand_dims(c, 0)
    e1 = tf.expand_dims(c, -1)
    e2 = tf.expand_dims(c, 1)
    assert e0.op.name == "ExpandDims" and e0.op.type == "ExpandDims"
    assert e0.shape.as_list() == [1, 2, 3]
    assert e1.shape.as_list() == [2, 3, 1]
    assert e2.shape.as_list() == [2, 1, 3]
    r0, r1, r2 = run([e0, e1, e2])
    np.testing.assert_array_equal(r0, x[None])
    np.testing.assert_array_equal(r1, x[..., None])
    np.testing.assert_array_equal(r2, x[:, None])


def test_concat():
    """concat joins along an axis; the static shape adds up."""
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.arange(6, 12, dtype=np.float32).reshape(2, 3)
    c0 = tf.concat([tf.constant(a), tf.constant(b)], 0)
    c1 = tf.concat([tf.constant(a), tf.constant(b)], axis=1)
    assert c0.op.name == "concat" and c0.op.type == "ConcatV2"
    assert c0.shape.as_list() == [4, 3]
    assert c1.shape.as_list() == [2, 6]
    r0, r1 = run([c0, c1])
    np.testing.assert_array_equal(r0, np.concatenate([a, b], 0))
    np.testing.assert_array_equal(r1, np.concatenate([a, b], 1))


def test_reshape_with_minus_one():
    """reshape infers one -1 dimension, statically and at run time."""
    x = np.arange(12, dtype=np.int32).reshape(3, 4)
    c = tf.constant(x)
    r1 = tf.reshape(c, [-1])
    r2 = tf.reshape(c, [2, -1])
    r3 = tf.reshape(c, [2, 3, 2])
    assert r1.op.name == "Reshape" and r1.op.type == "Reshape"
    assert r1.shape.as_list() == [12]
    assert r2.shape.as_list() == [2, 6]
    assert r3.shape.as_list() == [2, 3, 2]
    o1, o2, o3 = run([r1, r2, r3])
    np.testing.assert_array_equal(o1, x.reshape(-1))
    np.testing.assert_array_equal(o2, x.reshape(2, -1))
    np.testing.assert_array_equal(o3, x.reshape(2, 3, 2))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    x=hnp.arrays(
        st.sampled_from([np.float32, np.int32, np.bool_]),
        hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=3),
    ),
    data=st.data(),
)
def test_tile_fill_and_reshape_match_numpy_for_shapes_fed_at_run_time(x, data):
    """The shape operands are fed, so the kernels work them out (0-d, empty and bool too)."""
    reps = data.draw(st.lists(st.integers(0, 3), min_size=x.ndim, max_size=x.ndim))
    dims = list(data.draw(st.permutations(x.shape)))
    if dims and x.size and data.draw(st.booleans()):
        dims[data.draw(st.integers(0, len(dims) - 1))] = -1
    value = x.reshape(-1)[0] if x.size else x.dtype.type(1)
    with tf.Graph().as_default():
        xp = tf.placeholder(tf.as_dtype(x.dtype), None)
        rp = tf.placeholder(tf.int32, [x.ndim])
        dp = tf.placeholder(tf.int32, [len(dims)])
        fetches = [tf.tile(xp, rp), tf.reshape(xp, dp), tf.fill(dp, tf.constant(value))]
        with tf.Session() as sess:
            if -1 in dims:
                fetches.pop()  # (fill takes no -1)
            feed = {xp: x, rp: np.array(reps, np.int32), dp: np.array(dims, np.int32)}
            got = sess.run(fetches, feed)
    expected = [np.tile(x, reps), x.reshape(dims)]
    if -1 not in dims:
        expected.append(np.full(dims, value, x.dtype))
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert np.shape(g) == e.shape and np.asarray(g).dtype == e.dtype
        np.testing.assert_array_equal(g, e)


def test_zeros_ones_fill():
    """zeros/ones default to float32; fill takes the value's dtype."""
    z = tf.zeros([2, 3])
    o = tf.ones([3], dtype=tf.int32)
    f = tf.fill([2, 2], 7)
    assert z.op.name == "zeros" and o.op.name == "ones"
    assert f.op.type == "Fill" and f.op.name == "Fill"
    assert z.dtype == tf.float32 and o.dtype == tf.int32 and f.dtype == tf.int32
    assert f.shape.as_list() == [2, 2]
    rz, ro, rf = run([z, o, f])
    np.testing.assert_array_equal(rz, np.zeros((2, 3), np.float32))
    assert rz.dtype == np.float32
    np.testing.assert_array_equal(ro, np.ones(3, np.int32))
    assert ro.dtype == np.int32
    np.testing.assert_array_equal(rf, np.full((2, 2), 7))


def test_stack():
    """stack packs same-shaped tensors along a new axis."""
    a = np.array([1, 2, 3], np.float32)
    b = np.array([4, 5, 6], np.float32)
    s0 = tf.stack([tf.constant(a), tf.constant(b)])
    s1 = tf.stack([tf.constant(a), tf.constant(b)], axis=1)
    assert s0.op.name == "stack" and s0.op.type == "Pack"
    assert s0.shape.as_list() == [2, 3]
    assert s1.shape.as_list() == [3, 2]
    r0, r1 = run([s0, s1])
    np.testing.assert_array_equal(r0, np.stack([a, b]))
    np.testing.assert_array_equal(r1, np.stack([a, b], axis=1))


def test_add_n():
    """add_n sums a list of tensors."""
    xs = [np.full((2, 2), i, np.float32) for i in range(1, 4)]
    s = tf.add_n([tf.constant(x) for x in xs])
    assert s.op.type == "AddN" and s.op.name == "AddN"
    np.testing.assert_array_equal(run(s), np.full((2, 2), 6.0))


@pytest.mark.parametrize(
    "axis, keepdims",
    [
        (None, False),
        (0, False),
        (1, False),
        ([0, 1], False),
        (-1, False),
        (None, True),
        (0, True),
        (1, True),
    ],
)
def test_reduce_sum_and_mean(axis, keepdims):
    """reduce_sum / reduce_mean over axes, with keepdims, match numpy."""
    x = np.arange(1, 7, dtype=np.float32).reshape(2, 3)
    c = tf.constant(x)
    s = tf.reduce_sum(c, axis=axis, keepdims=keepdims)
    m = tf.reduce_mean(c, axis=axis, keepdims=keepdims)
    np_axis = tuple(axis) if isinstance(axis, list) else axis
    want_s = np.sum(x, axis=np_axis, keepdims=keepdims)
    want_m = np.mean(x, axis=np_axis, keepdims=keepdims)
    assert s.op.type == "Sum" and m.op.type == "Mean"
    assert s.shape.as_list() == list(np.shape(want_s))
    assert m.shape.as_list() == list(np.shape(want_m))
    rs, rm = run([s, m])
    np.testing.assert_allclose(rs, want_s)
    np.testing.assert_allclose(rm, want_m)
    assert np.shape(rs) == np.shape(want_s)


def test_reduce_names_and_int_mean():
    """Reductions are named Sum / Mean; the mean of ints is an integer."""
    c = tf.constant([[1, 2], [3, 5]])
    s = tf.reduce_sum(c)
    m = tf.reduce_mean(c)
    assert s.op.name == "Sum" and m.op.name == "Mean"
    rs, rm = run([s, m])
    assert rs == 11
    assert rm == 2
    assert np.asarray(rm).dtype == np.int32


@pytest.mark.parametrize("ta, tb", [(False, False), (True, False), (False, True), (True, True)])
def test_matmul_with_transposes(ta, tb):
    """matmul(a, b, transpose_a, transpose_b) matches numpy."""
    rng = np.random.RandomState(0)
    a = rng.randn(3, 2).astype(np.float32) if ta else rng.randn(2, 3).astype(np.float32)
    b = rng.randn(4, 3).astype(np.float32) if tb else rng.randn(3, 4).astype(np.float32)
    m = tf.matmul(tf.constant(a), tf.constant(b), transpose_a=ta, transpose_b=tb)
    assert m.shape.as_list() == [2, 4]
    want = (a.T if ta else a) @ (b.T if tb else b)
    np.testing.assert_allclose(run(m), want, rtol=1e-5)


def test_matmul_operator():
    """`a @ b` builds a MatMul named matmul."""
    a = tf.constant([[1.0, 2.0]])
    b = tf.constant([[3.0], [4.0]])
    m = a @ b
    assert m.op.type == "MatMul" and m.op.name == "matmul"
    np.testing.assert_array_equal(run(m), [[11.0]])


def test_cast():
    """cast converts dtype (float->int truncates toward zero); a no-op cast returns x."""
    f = tf.constant([1.7, -1.7, 0.0])
    i = tf.cast(f, tf.int32)
    b = tf.cast(f, tf.bool)
    assert i.op.type == "Cast" and i.op.name == "Cast"
    assert i.dtype == tf.int32 and b.dtype == tf.bool
    assert tf.cast(f, tf.float32) is f
    ri, rb = run([i, b])
    np.testing.assert_array_equal(ri, [1, -1, 0])
    np.testing.assert_array_equal(rb, [True, True, False])


@pytest.mark.parametrize(
    "value, dtype, text",
    [([1.0], tf.string, "Cast float to string"), (["7"], tf.int32, "Cast string to int32")],
)
def test_cast_to_or_from_string_is_unimplemented_as_in_tf(value, dtype, text):
    """TF's Cast kernel converts no strings: building it fails at the first run with
    UnimplementedError naming both types and, as every kernel that refuses its node, the node;
    the session keeps working."""
    x = tf.cast(tf.constant(value), dtype)
    with tf.Session() as sess:
        with pytest.raises(tf.errors.UnimplementedError) as e:
            sess.run(x)
        assert e.value.message == "%s is not supported\n\t [[{{node Cast}}]]" % text
        assert e.value.op is x.op
        assert sess.run(tf.cast(tf.constant([2.5]), tf.int32)) == [2]


def test_transpose_names_shapes_values_and_gradient_as_tf():
    """``transpose/perm`` a Const when the rank is known (reversed by default); unknown rank:
    TF 1.15's ``(Rank - 1) - Range(0, Rank, 1)``; the gradient transposes back through
    ``InvertPermutation``; TF's shape and kernel errors."""
    x = tf.placeholder(tf.float32, [None, 3], name="x")
    u = tf.placeholder(tf.float32, name="u")
    t, t2 = tf.transpose(x), tf.transpose(tf.zeros([2, 3, 4]), [1, 0, 2], name="t2")
    tu = tf.transpose(u)
    assert (t.name, t.shape.as_list(), t.op.inputs[1].op.name) == (
        "transpose:0",
        [3, None],
        "transpose/perm",
    )
    assert t2.shape.as_list() == [3, 2, 4] and tu.shape.ndims is None
    ops = {op.name: op.type for op in tf.get_default_graph().get_operations()}
    for name, kind in (
        ("transpose_1/Rank", "Rank"),
        ("transpose_1/sub_1", "Sub"),
        ("transpose_1/Range", "Range"),
    ):
        assert ops[name] == kind
    (g,) = tf.gradients(tf.reduce_sum(t * tf.constant([[1.0], [2.0], [3.0]])), x)
    assert g.op.inputs[1].op.name == "gradients/transpose_grad/InvertPermutation"
    a = np.arange(6.0, dtype=np.float32).reshape(1, 2, 3)
    with tf.Session() as sess:
        got = sess.run([t, tu, g], {x: a[0], u: a})
        assert got[0].tolist() == a[0].T.tolist() and got[1].shape == (3, 2, 1)
        assert got[2].tolist() == [[1.0, 2.0, 3.0]] * 2
        with pytest.raises(tf.errors.InvalidArgumentError, match=r"1 is missing from \{0,0\}\."):
            sess.run(tf.transpose(x, [0, 0]), {x: a[0]})
    with pytest.raises(ValueError, match="Dimension must be 2 but is 3 for 'transpose_3'"):
        tf.transpose(x, [0, 1, 2])


def test_random_ops_shapes_dtypes_ranges():
    """random_normal / random_uniform / truncated_normal: shapes, dtypes and ranges."""
    n = tf.random_normal([3, 4], seed=1)
    u = tf.random_uniform([1000], minval=2.0, maxval=5.0, seed=2)
    t = tf.truncated_normal([1000], mean=10.0, stddev=2.0, seed=3)
    ui = tf.random_uniform([50], minval=0, maxval=3, dtype=tf.int32, seed=4)
    assert n.op.name == "random_normal" and u.op.name == "random_uniform"
    assert t.op.name == "truncated_normal"
    assert n.shape.as_list() == [3, 4] and u.shape.as_list() == [1000]
    assert n.dtype == tf.float32 and ui.dtype == tf.int32
    rn, ru, rt, rui = run([n, u, t, ui])
    assert rn.shape == (3, 4) and rn.dtype == np.float32
    assert ru.min() >= 2.0 and ru.max() < 5.0
    assert abs(ru.mean() - 3.5) < 0.2
    assert rt.min() >= 6.0 and rt.max() <= 14.0
    assert abs(rt.mean() - 10.0) < 0.3
    assert set(np.unique(rui)) <= {0, 1, 2}


def test_random_op_seed_reproducible_across_sessions():
    """An op-level seed gives the same values in every new session; runs within a session
    differ."""
    r = tf.random_normal([5], seed=42)
    with tf.Session() as s1:
        first = s1.run(r)
        second = s1.run(r)
    with tf.Session() as s2:
        again = s2.run(r)
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, second)


def test_graph_seed_reproducible_across_sessions():
    """With tf.set_random_seed, unseeded random ops are reproducible across sessions."""
    tf.set_random_seed(7)
    a = tf.random_uniform([4])
    b = tf.random_uniform([4])
    with tf.Session() as s1:
        va1, vb1 = s1.run([a, b])
    with tf.Session() as s2:
        va2, vb2 = s2.run([a, b])
    np.testing.assert_array_equal(va1, va2)
    np.testing.assert_array_equal(vb1, vb2)
    assert not np.array_equal(va1, vb1)  # different ops get different op seeds


# -- hypothesis: elementwise ops and reductions vs numpy ----------------------------------------

_FLOAT = st.floats(-100, 100, allow_nan=False, width=32)
_DIVISOR = st.one_of(st.floats(0.5, 100, width=32), st.floats(-100, -0.5, width=32))
_INT = st.integers(-1000, 1000)
_NONZERO_INT = st.integers(1, 50) | st.integers(-50, -1)


def _eval_in_fresh_graph(build, *arrays):
    """Builds ops over constants in a new graph and runs them; returns (value, static shape)."""
    with tf.Graph().as_default() as g:
        out = build(*[tf.constant(a) for a in arrays])
        with tf.Session(graph=g) as sess:
            static = out.shape.as_list() if isinstance(out, tf.Tensor) else None
            return sess.run(out), static


@HYP
@given(
    data=st.data(), shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=3, max_side=4)
)
@pytest.mark.parametrize(
    "name, tf_fn, np_fn",
    [
        ("add", lambda a, b: a + b, np.add),
        ("sub", lambda a, b: a - b, np.subtract),
        ("mul", lambda a, b: a * b, np.multiply),
        ("tf.add", tf.add, np.add),
        ("tf.multiply", tf.multiply, np.multiply),
    ],
)
def test_float_binary_ops_match_numpy(name, tf_fn, np_fn, data, shapes):
    """Broadcasting float32 elementwise ops agree with numpy (values and static shape)."""
    sx, sy = shapes.input_shapes
    x = data.draw(hnp.arrays(np.float32, sx, elements=_FLOAT))
    y = data.draw(hnp.arrays(np.float32, sy, elements=_FLOAT))
    out, static = _eval_in_fresh_graph(tf_fn, x, y)
    want = np_fn(x, y)
    assert static == list(shapes.result_shape)
    assert np.shape(out) == want.shape
    assert np.asarray(out).dtype == np.float32
    np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-6)


@HYP
@given(
    data=st.data(), shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=3, max_side=4)
)
def test_float_division_matches_numpy(data, shapes):
    """Broadcasting RealDiv and FloorDiv on float32 agree with numpy (TF's float FloorDiv is
    floor(x / y), computed in the tensor's dtype)."""
    sx, sy = shapes.input_shapes
    x = data.draw(hnp.arrays(np.float32, sx, elements=_FLOAT))
    y = data.draw(hnp.arrays(np.float32, sy, elements=_DIVISOR))
    out, static = _eval_in_fresh_graph(lambda a, b: a / b, x, y)
    assert static == list(shapes.result_shape)
    np.testing.assert_allclose(out, x / y, rtol=1e-6)
    fout, _ = _eval_in_fresh_graph(lambda a, b: a // b, x, y)
    np.testing.assert_allclose(fout, np.floor(x / y), rtol=1e-6)  # TF: floor(x / y)


@HYP
@given(
    data=st.data(), shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=3, max_side=4)
)
def test_int_binary_ops_match_numpy(data, shapes):
    """int32 +, -, *, // (floor semantics) and / (float64) agree with numpy."""
    sx, sy = shapes.input_shapes
    x = data.draw(hnp.arrays(np.int32, sx, elements=_INT))
    y = data.draw(hnp.arrays(np.int32, sy, elements=_NONZERO_INT))
    (add, sub, mul, fdiv, tdiv), _ = _eval_in_fresh_graph(
        lambda a, b: [a + b, a - b, a * b, a // b, a / b], x, y
    )
    np.testing.assert_array_equal(add, x + y)
    np.testing.assert_array_equal(sub, x - y)
    np.testing.assert_array_equal(mul, x * y)
    np.testing.assert_array_equal(fdiv, np.floor_divide(x, y))
    assert np.asarray(tdiv).dtype == np.float64
    np.testing.assert_allclose(tdiv, x.astype(np.float64) / y.astype(np.float64))


@HYP
@given(
    x=hnp.arrays(np.float32, hnp.array_shapes(min_dims=0, max_dims=3, max_side=4), elements=_FLOAT)
)
def test_unary_ops_match_numpy(x):
    """Neg and Square agree with numpy for any shape."""
    (neg, sq), static = _eval_in_fresh_graph(lambda a: [-a, tf.square(a)], x)
    np.testing.assert_array_equal(neg, -x)
    np.testing.assert_allclose(sq, x * x, rtol=1e-6)
    assert np.shape(neg) == x.shape


@HYP
@given(
    data=st.data(),
    x=hnp.arrays(np.float32, hnp.array_shapes(min_dims=1, max_dims=3, max_side=4), elements=_FLOAT),
    keepdims=st.booleans(),
)
def test_reductions_match_numpy(data, x, keepdims):
    """reduce_sum / reduce_mean over random axes agree with numpy, static shape included."""
    rank = x.ndim
    axis = data.draw(
        st.one_of(
            st.none(),
            st.integers(-rank, rank - 1),
            st.lists(st.integers(0, rank - 1), min_size=1, max_size=rank, unique=True),
        )
    )
    np_axis = tuple(axis) if isinstance(axis, list) else axis
    with tf.Graph().as_default() as g:
        c = tf.constant(x)
        s = tf.reduce_sum(c, axis=axis, keepdims=keepdims)
        m = tf.reduce_mean(c, axis=axis, keepdims=keepdims)
        with tf.Session(graph=g) as sess:
            rs, rm = sess.run([s, m])
    want_s = np.sum(x, axis=np_axis, keepdims=keepdims, dtype=np.float64)
    want_m = np.mean(x, axis=np_axis, keepdims=keepdims, dtype=np.float64)
    assert s.shape.as_list() == list(np.shape(want_s))
    assert np.shape(rs) == np.shape(want_s)
    np.testing.assert_allclose(rs, want_s, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(rm, want_m, rtol=1e-4, atol=1e-3)


@HYP
@given(x=hnp.arrays(np.int32, hnp.array_shapes(min_dims=1, max_dims=3, max_side=4), elements=_INT))
def test_int_reduce_sum_matches_numpy(x):
    """reduce_sum over all axes of an int32 tensor is exact."""
    out, static = _eval_in_fresh_graph(lambda a: tf.reduce_sum(a), x)
    assert static == []
    assert out == np.sum(x)
    assert np.asarray(out).dtype == np.int32
