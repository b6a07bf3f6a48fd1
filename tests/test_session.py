"""Tests for ``tf.Session``: fetches, feeds, eval/run helpers, lifetime, placement and its log,
soft placement, the session's devices and run-time errors (spec §2, §3, §5.3, §6.3, §6.4, §8,
§11.4-§11.6).  Book sections: "Placing Operations on Devices" (simple placement, logging
placements, soft placement), "Managing the GPU RAM" (CUDA_VISIBLE_DEVICES, visible_device_list)
and every example that calls ``sess.run``.
"""

import collections
import re

import numpy as np
import pytest

import minitf as tf

CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"
GPU0 = "/job:localhost/replica:0/task:0/device:GPU:0"
GPU1 = "/job:localhost/replica:0/task:0/device:GPU:1"
LOCAL = "/job:localhost/replica:0/task:0/device:"


def placements(text):
    """{node name: (op type, device)} from log_device_placement lines, plus the name order."""
    found = {}
    order = []
    for line in text.splitlines():
        m = re.match(r"^(\S+): \((\w+)\): (/job:\S+)$", line)
        if m:
            found[m.group(1)] = (m.group(2), m.group(3))
            order.append(m.group(1))
    return found, order


def mapping(text):
    """{device name: description} from the 'Device mapping:' block."""
    out = {}
    for line in text.splitlines():
        m = re.match(r"^(/job:\S+) -> (.*)$", line)
        if m:
            out[m.group(1)] = m.group(2)
    return out


def pci_bus_id(description):
    return re.search(r"pci bus id: ([^,]+)", description).group(1)


def log_config(**kw):
    return tf.ConfigProto(log_device_placement=True, **kw)


# -- fetches --------------------------------------------------------------------------------


def test_fetch_tensor_and_operation():
    """Fetching a tensor gives its value; fetching an op gives None (but runs it)."""
    v = tf.Variable(1.0, name="v")
    c = tf.constant([1.0, 2.0], name="c")
    with tf.Session() as sess:
        assert sess.run(v.initializer) is None
        out = sess.run(c)
        assert isinstance(out, np.ndarray)
        np.testing.assert_array_equal(out, [1.0, 2.0])
        assert sess.run(v) == 1.0


def test_fetch_scalar_is_numpy_scalar():
    """A computed scalar comes back as a numpy scalar of the tensor's dtype."""
    a = tf.constant(2.0) * 3
    i = tf.constant(2) + 1
    with tf.Session() as sess:
        fa, fi = sess.run([a, i])
    assert type(fa) is np.float32 and fa == 6.0
    assert type(fi) is np.int32 and fi == 3


def test_fetch_by_name():
    """Fetches may be names: 'c:0' is a tensor, 'c' an op (→ None)."""
    c = tf.constant(3.0, name="c")
    with tf.Session() as sess:
        assert sess.run("c:0") == 3.0
        assert sess.run("c") is None
        assert sess.run(["c:0", c]) == [3.0, 3.0]


def test_fetch_variable():
    """Fetching a Variable gives its current value."""
    v = tf.Variable([1, 2, 3], name="v")
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        out = sess.run(v)
        np.testing.assert_array_equal(out, [1, 2, 3])
        assert out.dtype == np.int32
        sess.run(v.assign([4, 5, 6]))
        np.testing.assert_array_equal(sess.run(v), [4, 5, 6])


def test_fetch_structures():
    """Lists, tuples, namedtuples, dicts and nestings come back with the same structure."""
    Pair = collections.namedtuple("Pair", "x y")
    a = tf.constant(1.0, name="a")
    b = tf.constant([2, 3], name="b")
    noop = tf.no_op(name="noop")
    with tf.Session() as sess:
        lst = sess.run([a, b])
        assert isinstance(lst, list) and lst[0] == 1.0
        np.testing.assert_array_equal(lst[1], [2, 3])
        tup = sess.run((a, noop))
        assert isinstance(tup, tuple) and tup == (1.0, None)
        nt = sess.run(Pair(a, b))
        assert isinstance(nt, Pair) and nt.x == 1.0
        np.testing.assert_array_equal(nt.y, [2, 3])
        d = sess.run({"a": a, "both": [a, (b, noop)], "pair": Pair(x=a, y=a)})
        assert set(d) == {"a", "both", "pair"}
        assert d["a"] == 1.0
        assert isinstance(d["both"], list) and isinstance(d["both"][1], tuple)
        np.testing.assert_array_equal(d["both"][1][0], [2, 3])
        assert d["both"][1][1] is None
        assert d["pair"] == Pair(1.0, 1.0)
        od = sess.run(collections.OrderedDict([("z", a), ("y", b)]))
        assert isinstance(od, collections.OrderedDict) and list(od) == ["z", "y"]
        assert sess.run([]) == []


def test_fetch_duplicates():
    """The same tensor may be fetched several times (computed once, returned each time)."""
    a = tf.constant([1.0, 2.0], name="a")
    with tf.Session() as sess:
        x, y, z = sess.run([a, a, "a:0"])
    for out in (x, y, z):
        np.testing.assert_array_equal(out, [1.0, 2.0])


def test_fetched_arrays_are_copies():
    """Mutating a fetched value changes neither the variable nor the constant."""
    v = tf.Variable([1.0, 2.0], name="v")
    c = tf.constant([5.0, 6.0], name="c")
    with tf.Session() as sess:
        sess.run(v.initializer)
        got = sess.run(v)
        got[0] = 100.0
        np.testing.assert_array_equal(sess.run(v), [1.0, 2.0])
        fetched = sess.run(c)
        fetched[:] = 0
        np.testing.assert_array_equal(sess.run(c), [5.0, 6.0])
        read = sess.run(v.value())
        read[1] = -1
        np.testing.assert_array_equal(sess.run(v), [1.0, 2.0])


# -- feeds ----------------------------------------------------------------------------------


def test_feed_by_tensor_and_by_name():
    """feed_dict keys may be tensors or tensor names."""
    p = tf.placeholder(tf.float32, shape=[2], name="p")
    y = p * 2
    with tf.Session() as sess:
        np.testing.assert_array_equal(sess.run(y, {p: [1, 2]}), [2.0, 4.0])
        np.testing.assert_array_equal(sess.run(y, feed_dict={"p:0": [3, 4]}), [6.0, 8.0])
        out = sess.run(y, {p: np.array([1, 2], np.int64)})
        assert out.dtype == np.float32  # fed values are converted to the tensor's dtype


def test_feed_non_placeholder_replaces_value():
    """Any tensor can be fed: its value is replaced and its producer does not run."""
    p = tf.placeholder(tf.float32, name="p")
    x = tf.identity(p, name="x")
    y = x * 10
    v = tf.Variable(1.0, name="v")
    z = v.value() + 1  # v is never initialised
    with tf.Session() as sess:
        assert sess.run(y, {x: 3.0}) == 30.0  # p is not needed
        assert sess.run(z, {v.value(): 5.0}) == 6.0  # the uninitialised read does not run
        c = tf.constant(1.0, name="c")
        d = c + 1
        assert sess.run(d, {c: 41.0}) == 42.0


def test_feed_shape_mismatch():
    """§11.4: feeding a value of the wrong shape is a ValueError with TF's text."""
    p = tf.placeholder(tf.float32, shape=[2], name="p")
    with tf.Session() as sess:
        with pytest.raises(
            ValueError,
            match=re.escape("Cannot feed value of shape (3,) for Tensor p:0, which has shape (2,)"),
        ):
            sess.run(p, {p: [1.0, 2.0, 3.0]})
        q = tf.placeholder(tf.float32, shape=[None, 2], name="q")
        np.testing.assert_array_equal(sess.run(q, {q: np.ones((5, 2))}), np.ones((5, 2)))
        with pytest.raises(ValueError, match="Cannot feed value of shape"):
            sess.run(q, {q: np.ones((5, 3))})


def test_fed_and_fetched_scalar_is_0d_array():
    """§11.5: a fetched tensor that was also fed comes back as a 0-d ndarray."""
    p = tf.placeholder(tf.float32, shape=[], name="p")
    with tf.Session() as sess:
        out = sess.run(p, {p: 3.0})
        assert isinstance(out, np.ndarray)
        assert out.shape == () and out.dtype == np.float32
        assert out == 3.0
        computed = sess.run(p * 2, {p: 3.0})
        assert computed == 6.0 and np.ndim(computed) == 0


def test_missing_feed_error():
    """§8: an unfed placeholder fails with InvalidArgumentError naming it, dtype and shape."""
    p = tf.placeholder(tf.float32, shape=[2], name="p")
    y = p + 1
    with tf.Session() as sess:
        with pytest.raises(tf.errors.InvalidArgumentError) as e:
            sess.run(y)
    assert (
        "You must feed a value for placeholder tensor 'p' with dtype float and shape [2]"
        in e.value.message
    )
    assert e.value.error_code == tf.errors.INVALID_ARGUMENT
    assert e.value.op is not None and e.value.op.name == "p"
    assert "[[" in e.value.message


def test_missing_feed_unknown_shape_and_int():
    """The message leaves out the shape when it is unknown; int32 is 'int32'."""
    p = tf.placeholder(tf.int32, name="p")
    with tf.Session() as sess:
        with pytest.raises(
            tf.errors.InvalidArgumentError,
            match="You must feed a value for placeholder tensor 'p' with dtype int32",
        ):
            sess.run(p + 1)


def test_feed_dict_bad_key_and_value():
    """A feed key that is not a tensor is a TypeError; so is a Tensor as a feed value."""
    p = tf.placeholder(tf.float32, name="p")
    c = tf.constant(1.0, name="c")
    with tf.Session() as sess:
        with pytest.raises(TypeError):
            sess.run(p, {1: 2.0})
        with pytest.raises(TypeError, match="The value of a feed cannot be a tf.Tensor object"):
            sess.run(p, {p: c})


# -- eval / run with a default session ---------------------------------------------------------


def test_eval_and_run_with_session_context():
    """`with sess:` makes sess the default session for Tensor.eval() and Operation.run()."""
    v = tf.Variable(2.0, name="v")
    y = v * 3
    with tf.Session() as sess:
        assert tf.get_default_session() is sess
        tf.global_variables_initializer().run()
        assert y.eval() == 6.0
        p = tf.placeholder(tf.float32, name="p")
        assert (p + 1).eval(feed_dict={p: 1.0}) == 2.0
        v.assign(5.0).op.run()
        assert v.eval() == 5.0
    assert tf.get_default_session() is None


def test_eval_with_as_default_and_explicit_session():
    """sess.as_default() and eval(session=...) also work; as_default does not close."""
    c = tf.constant(4.0, name="c")
    sess = tf.Session()
    with sess.as_default():
        assert c.eval() == 4.0
        assert tf.get_default_session() is sess
    assert tf.get_default_session() is None
    assert c.eval(session=sess) == 4.0
    tf.no_op(name="n").run(session=sess)
    assert sess.run(c) == 4.0  # still open
    sess.close()


def test_eval_without_default_session():
    """Tensor.eval() with no default session is a ValueError with TF's text."""
    c = tf.constant(1.0)
    with pytest.raises(
        ValueError,
        match=re.escape("Cannot evaluate tensor using `eval()`: No default session is registered."),
    ):
        c.eval()


def test_run_without_default_session():
    """Operation.run() with no default session is a ValueError with TF's text."""
    op = tf.no_op()
    with pytest.raises(
        ValueError,
        match=re.escape(
            "Cannot execute operation using `run()`: No default session is registered."
        ),
    ):
        op.run()


def test_eval_with_session_of_another_graph():
    """eval/run refuse a (default or given) session whose graph is another graph."""
    c = tf.constant(1.0)
    op = tf.no_op()
    other = tf.Graph()
    with other.as_default():
        tf.constant(0.0)
    sess = tf.Session(graph=other)
    with pytest.raises(
        ValueError,
        match="Cannot use the given session to evaluate tensor: the "
        "tensor's graph is different from the session's graph",
    ):
        c.eval(session=sess)
    with pytest.raises(
        ValueError,
        match="Cannot use the given session to execute operation: "
        "the operation's graph is different from the "
        "session's graph",
    ):
        op.run(session=sess)
    with sess.as_default():
        with pytest.raises(
            ValueError,
            match="Cannot use the default session to evaluate "
            "tensor: the tensor's graph is different from the "
            "session's graph",
        ):
            c.eval()
        with pytest.raises(
            ValueError,
            match="Cannot use the default session to execute "
            "operation: the operation's graph is different "
            "from the session's graph",
        ):
            op.run()
    sess.close()


def test_interactive_session():
    """InteractiveSession installs itself as the default session until closed."""
    c = tf.constant(5.0, name="c")
    sess = tf.InteractiveSession()
    try:
        assert tf.get_default_session() is sess
        assert c.eval() == 5.0
        d = c * 2  # more ops can be added afterwards
        assert d.eval() == 10.0
    finally:
        sess.close()
    assert tf.get_default_session() is None
    with pytest.raises(ValueError):
        c.eval()


# -- fetch errors ---------------------------------------------------------------------------


def test_fetch_tensor_of_another_graph():
    """Fetching a tensor that is not in the session's graph is a ValueError."""
    with tf.Graph().as_default():
        other = tf.constant(1.0, name="other")
    tf.constant(0.0)
    with tf.Session() as sess:
        with pytest.raises(ValueError, match="cannot be interpreted as a Tensor") as e:
            sess.run(other)
    assert "is not an element of this graph" in str(e.value)


def test_fetch_unknown_names():
    """Fetching an unknown tensor or op name is a ValueError."""
    tf.constant(0.0, name="c")
    with tf.Session() as sess:
        with pytest.raises(ValueError, match="cannot be interpreted as a Tensor"):
            sess.run("nope:0")
        with pytest.raises(ValueError, match="nope"):
            sess.run("nope")
        with pytest.raises(ValueError):
            sess.run("c:3")


def test_fetch_bad_types():
    """§11.4: fetching 1 or None is a TypeError."""
    tf.constant(0.0, name="c")
    with tf.Session() as sess:
        with pytest.raises(
            TypeError,
            match=re.escape(
                'Argument `fetch` = 1 has invalid type "int" must be a string or Tensor.'
            ),
        ):
            sess.run(1)
        with pytest.raises(TypeError, match="None"):
            sess.run(None)
        with pytest.raises(TypeError):
            sess.run([tf.constant(1.0), 2.5])


# -- lifetime -----------------------------------------------------------------------------------


def test_closed_session():
    """§8: a closed session raises RuntimeError('Attempted to use a closed Session.')."""
    c = tf.constant(1.0)
    sess = tf.Session()
    assert sess.run(c) == 1.0
    sess.close()
    with pytest.raises(RuntimeError, match=re.escape("Attempted to use a closed Session.")):
        sess.run(c)
    with tf.Session() as s2:
        s2.run(c)
    with pytest.raises(RuntimeError, match="Attempted to use a closed Session"):
        s2.run(c)


def test_empty_graph():
    """§8: running a session over an empty graph is a RuntimeError."""
    sess = tf.Session(graph=tf.Graph())
    with pytest.raises(
        RuntimeError,
        match=re.escape(
            "The Session graph is empty.  Add operations to the graph before calling run()."
        ),
    ):
        sess.run([])
    sess.close()


def test_session_graph_property():
    """A session runs the default graph, or the graph it was given."""
    g = tf.Graph()
    with g.as_default():
        c = tf.constant(2.0)
    sess = tf.Session(graph=g)
    assert sess.graph is g
    assert sess.run(c) == 2.0
    sess.close()
    with tf.Session() as s2:
        assert s2.graph is tf.get_default_graph()


def test_unknown_target_not_found():
    """§6.3: a target no session factory accepts raises NotFoundError."""
    with pytest.raises(
        tf.errors.NotFoundError, match="No session factory registered for the given session options"
    ):
        tf.Session("foo://x:1")
    with pytest.raises(tf.errors.NotFoundError):
        tf.Session("local")


def test_session_reset_cancels_old_sessions():
    """§6.4: tf.Session.reset('') closes local sessions; using one raises CancelledError."""
    v = tf.Variable(1.0, name="v")
    sess = tf.Session()
    sess.run(v.initializer)
    assert sess.run(v) == 1.0
    tf.Session.reset("")
    with pytest.raises(tf.errors.CancelledError, match="Session has been closed."):
        sess.run(v)
    with tf.Session() as fresh:  # new sessions work, variables start uninitialised
        with pytest.raises(tf.errors.FailedPreconditionError):
            fresh.run(v)


def test_sessions_do_not_share_variables():
    """§6.4: local sessions never share variables."""
    v = tf.Variable(1.0, name="v")
    s1, s2 = tf.Session(), tf.Session()
    s1.run(v.initializer)
    s1.run(v.assign(7.0))
    assert s1.run(v) == 7.0
    with pytest.raises(tf.errors.FailedPreconditionError):
        s2.run(v)
    s1.close()
    s2.close()


# -- placement and its log (§2, §3) -------------------------------------------------------------


def test_placement_at_first_run_and_after_growth(capsys):
    """§2.1/§3: the whole graph is placed (and logged) at the first run and again only when
    the graph grew."""
    a = tf.constant(1.0, name="a")
    b = tf.constant(2.0, name="b")
    c = a + b
    unused = tf.constant(3.0, name="unused")  # not fetched, still placed
    sess = tf.Session(config=log_config())
    capsys.readouterr()
    assert sess.run(c) == 3.0
    first, _ = placements(capsys.readouterr().out)
    assert set(first) == {"a", "b", "add", "unused"}
    assert sess.run(c) == 3.0
    assert placements(capsys.readouterr().out)[0] == {}
    d = c * 2
    assert sess.run(c) == 3.0  # the graph grew: placed and logged again, new op included
    second, _ = placements(capsys.readouterr().out)
    assert set(second) == {"a", "b", "add", "unused", "mul", "mul/y"}
    assert second["mul"] == ("Mul", GPU0)
    assert sess.run(d) == 6.0
    assert placements(capsys.readouterr().out)[0] == {}
    sess.close()
    assert unused.op.device == ""


def test_log_line_format_and_order(capsys):
    """§3: '<name>: (<type>): <device>' for every node; generators come after the others."""
    a = tf.constant(1.0, name="a")
    b = tf.constant(2.0, name="b")
    c = tf.add(a, b, name="c")
    v = tf.Variable(1.0, name="v")
    with tf.Session(config=log_config()) as sess:
        capsys.readouterr()
        sess.run(c)
        out = capsys.readouterr().out
    found, order = placements(out)
    assert order == ["c", "v", "v/Assign", "v/read", "a", "b", "v/initial_value"]
    assert "c: (AddV2): " + GPU0 in out.splitlines()
    assert found["v"] == ("VariableV2", GPU0)
    assert found["v/Assign"] == ("Assign", GPU0)
    assert found["v/read"] == ("Identity", GPU0)
    assert found["a"] == ("Const", GPU0)
    assert v.op.device == ""


def test_device_mapping_block(capsys):
    """§3: with log_device_placement a session prints 'Device mapping:' at construction."""
    sess = tf.Session(config=log_config())
    out = capsys.readouterr().out
    assert "Device mapping:" in out.splitlines()
    m = mapping(out)
    assert set(m) == {GPU0, GPU1}  # plain CPUs have no description
    assert m[GPU0].startswith("device: 0, name: ")
    assert m[GPU1].startswith("device: 1, name: ")
    assert re.search(r"pci bus id: \S+, compute capability: \d+\.\d+$", m[GPU0])
    assert pci_bus_id(m[GPU0]) != pci_bus_id(m[GPU1])
    sess.close()


def test_device_mapping_no_known_devices(capsys):
    """§3: a CPU-only session prints 'Device mapping: no known devices.'"""
    sess = tf.Session(config=log_config(device_count={"GPU": 0}))
    assert "Device mapping: no known devices." in capsys.readouterr().out.splitlines()
    sess.close()


def test_no_log_without_flag(capsys):
    """Nothing is printed unless log_device_placement is set."""
    c = tf.constant(1.0) + 1
    with tf.Session() as sess:
        sess.run(c)
    assert capsys.readouterr().out == ""


def test_unpinned_ops_go_to_gpu0(capsys):
    """§2.4: an op with no request goes to the best device: GPU:0 when a GPU kernel exists."""
    x = tf.constant([[1.0, 2.0]], name="x")
    m = tf.matmul(x, x, transpose_b=True, name="m")
    iv = tf.Variable(3, name="iv")  # no int32 VariableV2 kernel on GPUs -> CPU
    with tf.Session(config=log_config()) as sess:
        capsys.readouterr()
        sess.run([m, iv.initializer])
        found, _ = placements(capsys.readouterr().out)
    assert found["m"] == ("MatMul", GPU0)
    assert found["iv"] == ("VariableV2", CPU0)
    assert found["iv/Assign"][1] == CPU0 and found["iv/read"][1] == CPU0


def test_unpinned_constant_follows_consumer(capsys):
    """§2.3: a generator goes where all its consumers went; else to the first candidate."""
    a = tf.constant(1.0, name="a")
    with tf.device("/cpu:0"):
        b = tf.identity(a, name="b")
    s = tf.constant(2.0, name="s")
    with tf.device("/cpu:0"):
        s1 = tf.identity(s, name="s1")
    with tf.device("/gpu:1"):
        s2 = tf.identity(s, name="s2")
    with tf.device("/gpu:1"):
        k = tf.constant(3.0, name="k")  # pinned generators keep their pin
    k1 = tf.identity(k, name="k1")
    with tf.Session(config=log_config()) as sess:
        capsys.readouterr()
        sess.run([b, s1, s2, k1])
        found, _ = placements(capsys.readouterr().out)
    assert found["b"][1] == CPU0
    assert found["a"][1] == CPU0
    assert found["s1"][1] == CPU0 and found["s2"][1] == GPU1
    assert found["s"][1] == GPU0  # consumers disagree: first candidate
    assert found["k"][1] == GPU1
    assert found["k1"][1] == GPU0


def test_partial_pins_completed(capsys):
    """§2.4: a partial pin selects the best matching device."""
    with tf.device("/job:localhost"):
        a = tf.identity(tf.constant(1.0), name="a")
    with tf.device("/device:CPU:*"):
        b = tf.identity(tf.constant(1.0), name="b")
    with tf.device("/gpu:1"):
        c = tf.identity(tf.constant(1.0), name="c")
    with tf.Session(config=log_config()) as sess:
        capsys.readouterr()
        sess.run([a, b, c])
        found, _ = placements(capsys.readouterr().out)
    assert found["a"][1] == GPU0
    assert found["b"][1] == CPU0
    assert found["c"][1] == GPU1


def test_stateful_ops_keep_device_after_replacement(capsys):
    """§2.1: when the graph grows, stateful nodes keep their earlier placement (and state)."""
    v = tf.Variable(5.0, name="v")
    cfg = log_config(allow_soft_placement=True)
    sess = tf.Session(config=cfg)
    capsys.readouterr()
    sess.run(v.initializer)
    first, _ = placements(capsys.readouterr().out)
    assert first["v"] == ("VariableV2", GPU0)
    # A new op colocated with v and asking for the CPU: a fresh placement would move the
    # whole group to CPU:0; the session keeps v where its value lives.
    with tf.colocate_with(v):
        with tf.device("/cpu:0"):
            z = tf.identity(v.value(), name="z")
    assert z.op.get_attr("_class") == [b"loc:@v"]
    assert sess.run(v) == 5.0
    second, _ = placements(capsys.readouterr().out)
    assert second["v"] == ("VariableV2", GPU0)
    assert "z" in second
    assert sess.run(z) == 5.0
    sess.close()


def test_pin_to_missing_device_fails_at_run():
    """§2.5: an unsatisfiable pin fails at run time with InvalidArgumentError naming the op."""
    with tf.device("/device:GPU:7"):
        g = tf.identity(tf.constant(1.0, name="c"), name="g")
    sess = tf.Session()
    with pytest.raises(tf.errors.InvalidArgumentError) as e:
        sess.run(g)
    msg = e.value.message
    assert msg.startswith("Cannot assign a device for operation g: ")
    assert (
        "was explicitly assigned to /device:GPU:7 but available devices are [ "
        "/job:localhost/replica:0/task:0/device:CPU:0, "
        "/job:localhost/replica:0/task:0/device:GPU:0, "
        "/job:localhost/replica:0/task:0/device:GPU:1 ]" in msg
    )
    assert "Make sure the device specification refers to a valid device." in msg
    assert "[[" in msg
    assert e.value.op is not None and e.value.op.name == "g"
    sess.close()


def test_soft_placement(capsys):
    """§2.6: soft placement drops type and index: GPU:7 -> GPU:0, CPU:5 -> best device of the
    task (GPU:0 for a float op with a GPU kernel, CPU:0 for an int32 variable)."""
    p = tf.constant(1.0, name="p")
    with tf.device("/device:GPU:7"):
        g = tf.identity(p, name="g")
    with tf.device("/device:CPU:5"):
        c = tf.identity(p, name="c")
        iv = tf.Variable(3, name="iv")
    with tf.Session(config=log_config(allow_soft_placement=True)) as sess:
        capsys.readouterr()
        sess.run([g, c, iv.initializer])
        found, _ = placements(capsys.readouterr().out)
    assert found["g"] == ("Identity", GPU0)
    assert found["c"] == ("Identity", GPU0)
    assert found["iv"] == ("VariableV2", CPU0)


def test_soft_placement_cpu_only(capsys):
    """§2.6 (observed on a 3-CPU machine): /device:CPU:5 -> CPU:0, /device:GPU:1 -> CPU:0."""
    p = tf.constant(1.0, name="p")
    with tf.device("/device:CPU:5"):
        a = tf.identity(p, name="a")
    with tf.device("/device:GPU:1"):
        b = tf.identity(p, name="b")
    cfg = log_config(allow_soft_placement=True, device_count={"CPU": 3, "GPU": 0})
    with tf.Session(config=cfg) as sess:
        capsys.readouterr()
        sess.run([a, b])
        found, _ = placements(capsys.readouterr().out)
    assert found["a"][1] == CPU0
    assert found["b"][1] == CPU0


def test_soft_placement_unknown_job_still_fails():
    """§2.6: soft placement keeps job/replica/task: /job:foo still fails."""
    with tf.device("/job:foo"):
        a = tf.identity(tf.constant(1.0), name="a")
    with tf.Session(config=tf.ConfigProto(allow_soft_placement=True)) as sess:
        with pytest.raises(
            tf.errors.InvalidArgumentError, match="Cannot assign a device for operation a"
        ):
            sess.run(a)


def test_int32_variable_on_gpu_fails_without_soft_placement():
    """§2.5 reason 2: an int32 variable pinned to a GPU has no kernel there."""
    with tf.device("/gpu:0"):
        iv = tf.Variable(3, name="iv")
    with tf.Session() as sess:
        with pytest.raises(
            tf.errors.InvalidArgumentError, match="Cannot assign a device for operation iv"
        ):
            sess.run(iv.initializer)


# -- the session's devices (§2.1, §5.3) ---------------------------------------------------------


def test_list_devices_default():
    """A local session has CPU:0 and one GPU per visible card."""
    with tf.Session() as sess:
        names = [d.name for d in sess.list_devices()]
        types = [d.device_type for d in sess.list_devices()]
    assert sorted(names) == [CPU0, GPU0, GPU1]
    assert sorted(types) == ["CPU", "GPU", "GPU"]


def test_device_count_gpu_zero_gives_cpu_only():
    """§5.3: device_count={'GPU': 0} hides the GPUs."""
    with tf.Session(config=tf.ConfigProto(device_count={"GPU": 0})) as sess:
        assert [d.name for d in sess.list_devices()] == [CPU0]
    with tf.device("/gpu:0"):
        c = tf.identity(tf.constant(1.0), name="c")
    with tf.Session(config=tf.ConfigProto(device_count={"GPU": 0})) as sess:
        with pytest.raises(
            tf.errors.InvalidArgumentError,
            match="available devices are \\[ " + re.escape(CPU0) + " \\]",
        ):
            sess.run(c)


def test_device_count_cpu_three(capsys):
    """§5.3: device_count={'CPU': 3} creates CPU:0..2; /cpu:2 can then be used."""
    cfg = tf.ConfigProto(device_count={"CPU": 3}, log_device_placement=True)
    with tf.device("/cpu:2"):
        c = tf.identity(tf.constant(1.0), name="c")
    with tf.Session(config=cfg) as sess:
        names = sorted(d.name for d in sess.list_devices())
        capsys.readouterr()
        assert sess.run(c) == 1.0
        found, _ = placements(capsys.readouterr().out)
    assert names == [LOCAL + "CPU:0", LOCAL + "CPU:1", LOCAL + "CPU:2", GPU0, GPU1]
    assert found["c"][1] == LOCAL + "CPU:2"


def test_visible_device_list_maps_gpu0_to_card1(capsys):
    """§5.3: visible_device_list='1' makes physical card 1 the session's GPU:0."""
    from minitf.runtime import devices

    card1_bus = devices.visible_gpus()[1].pci_bus_id
    cfg = log_config(gpu_options=tf.GPUOptions(visible_device_list="1"))
    sess = tf.Session(config=cfg)
    m = mapping(capsys.readouterr().out)
    assert list(m) == [GPU0]
    assert m[GPU0].startswith("device: 1, ")  # TF names the platform GPU id there
    assert pci_bus_id(m[GPU0]) == card1_bus
    assert sorted(d.name for d in sess.list_devices()) == [CPU0, GPU0]
    sess.close()


def test_a_different_visible_device_list_in_the_same_process_is_rejected():
    """TF 1.x fixes a process's GPU ids at its first session: a later session whose
    visible_device_list maps GPU:0 to another card fails (tensorflow#19083); the same list
    again, or a new machine (emulate_gpus), is fine."""
    one = tf.ConfigProto(gpu_options=tf.GPUOptions(visible_device_list="1"))
    tf.Session(config=one).close()
    with pytest.raises(tf.errors.AlreadyExistsError) as e:
        tf.Session(config=tf.ConfigProto(gpu_options=tf.GPUOptions(visible_device_list="0")))
    assert str(e.value).startswith(
        "TensorFlow device (GPU:0) is being mapped to multiple CUDA devices (0 now, and 1 "
        "previously), which is not supported. This may be the result of providing different "
        "GPU configurations (ConfigProto.gpu_options, for example different "
        "visible_device_list) when creating multiple Sessions in the same process."
    )
    with pytest.raises(tf.errors.AlreadyExistsError):
        tf.Session()  # the default list maps GPU:0 to card 0 too
    tf.Session(config=one).close()
    tf.config.emulate_gpus(2)  # a new machine: its ids are free again
    tf.Session().close()


@pytest.mark.parametrize(
    "spec, fragment",
    [
        ("a", "Could not parse entry in 'visible_device_list': 'a'"),
        ("2", "'visible_device_list' listed an invalid GPU id '2' but visible device count is 2"),
        ("0,0", "visible_device_list contained a duplicate entry"),
    ],
)
def test_visible_device_list_errors(spec, fragment):
    """§5.3: unparsable, out-of-range and duplicate entries are InvalidArgumentError."""
    cfg = tf.ConfigProto(gpu_options=tf.GPUOptions(visible_device_list=spec))
    with pytest.raises(tf.errors.InvalidArgumentError, match=re.escape(fragment)):
        tf.Session(config=cfg)


def test_cuda_visible_devices_selects_and_renumbers(monkeypatch, capsys):
    """Figure 12-3: CUDA_VISIBLE_DEVICES=3,2 with 4 cards gives two GPUs, card 3 as GPU:0."""
    tf.config.emulate_gpus(4)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    tf.Session(config=log_config()).close()
    full = mapping(capsys.readouterr().out)
    assert len(full) == 4
    bus = {i: pci_bus_id(full[LOCAL + "GPU:%d" % i]) for i in range(4)}
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,2")
    sess = tf.Session(config=log_config())
    m = mapping(capsys.readouterr().out)
    assert sorted(d.name for d in sess.list_devices()) == [CPU0, GPU0, GPU1]
    assert pci_bus_id(m[GPU0]) == bus[3]
    assert pci_bus_id(m[GPU1]) == bus[2]
    sess.close()


@pytest.mark.parametrize("value", ["abc", "1,x", "3,,2"])
def test_cuda_visible_devices_malformed(monkeypatch, value):
    """A malformed CUDA_VISIBLE_DEVICES is an InvalidArgumentError at session creation."""
    tf.config.emulate_gpus(4)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", value)
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.Session()


def test_cuda_visible_devices_empty_means_no_gpu(monkeypatch):
    """CUDA_VISIBLE_DEVICES='' hides every card."""
    tf.config.emulate_gpus(4)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    with tf.Session() as sess:
        assert [d.name for d in sess.list_devices()] == [CPU0]


# -- run-time errors (§8) ---------------------------------------------------------------------


def test_uninitialized_variable_error():
    """§8: reading an uninitialised variable: FailedPreconditionError naming the reader."""
    v = tf.Variable(1.0, name="v")
    y = v * 2
    with tf.Session() as sess:
        with pytest.raises(tf.errors.FailedPreconditionError) as e:
            sess.run(y)
    assert "Attempting to use uninitialized value v" in e.value.message
    assert e.value.error_code == tf.errors.FAILED_PRECONDITION
    assert e.value.op is not None and e.value.op.name == "v/read"
    assert re.search(r"\n\t \[\[.*v/read.*\]\]", e.value.message)


def test_uninitialized_variable_fetched_directly():
    """Fetching the variable itself also fails with FailedPreconditionError."""
    v = tf.Variable(1.0, name="v")
    with tf.Session() as sess:
        with pytest.raises(
            tf.errors.FailedPreconditionError, match="Attempting to use uninitialized value v"
        ):
            sess.run(v)


def test_int_matmul_inner_mismatch_at_run_time():
    """Shapes known only at run time: MatMul fails with InvalidArgumentError."""
    a = tf.placeholder(tf.int32, name="a")
    b = tf.placeholder(tf.int32, name="b")
    m = tf.matmul(a, b)
    with tf.Session() as sess:
        np.testing.assert_array_equal(sess.run(m, {a: [[1, 2]], b: [[3], [4]]}), [[11]])
        with pytest.raises(tf.errors.InvalidArgumentError) as e:
            sess.run(m, {a: np.ones((2, 3), np.int32), b: np.ones((2, 3), np.int32)})
    assert "Matrix size-incompatible: In[0]: [2,3], In[1]: [2,3]" in e.value.message
    assert e.value.op is not None and e.value.op.name == "MatMul"
    assert "[[" in e.value.message


def test_assign_shape_mismatch_at_run_time():
    """§8: Assign with validate_shape checks shapes at run time."""
    v = tf.Variable([1.0, 2.0, 3.0], name="v")
    p = tf.placeholder(tf.float32, name="p")
    a = tf.assign(v, p)
    with tf.Session() as sess:
        sess.run(v.initializer)
        with pytest.raises(tf.errors.InvalidArgumentError) as e:
            sess.run(a, {p: 5.0})
        np.testing.assert_array_equal(sess.run(v), [1.0, 2.0, 3.0])
    assert (
        "Assign requires shapes of both tensors to match. lhs shape= [3] rhs shape= []"
        in e.value.message
    )
    assert e.value.op is not None and e.value.op.name == "Assign"


def test_assign_shape_mismatch_on_uninitialized_variable():
    """TF's VariableV2 gives its storage the declared shape, so even the first Assign checks
    it: lhs shape= [3]."""
    v = tf.Variable([1.0, 2.0, 3.0], name="v")
    p = tf.placeholder(tf.float32, name="p")
    a = tf.assign(v, p)
    with tf.Session() as sess:
        with pytest.raises(
            tf.errors.InvalidArgumentError,
            match=re.escape(
                "Assign requires shapes of both tensors to match. lhs shape= [3] rhs shape= []"
            ),
        ):
            sess.run(a, {p: 5.0})


def test_assign_without_validate_shape_changes_shape():
    """validate_shape=False lets Assign replace the value with one of another shape."""
    v = tf.Variable([1.0, 2.0, 3.0], name="v")
    p = tf.placeholder(tf.float32, name="p")
    a = tf.assign(v, p, validate_shape=False)
    with tf.Session() as sess:
        sess.run(v.initializer)
        np.testing.assert_array_equal(sess.run(a, {p: [7.0, 8.0]}), [7.0, 8.0])
        np.testing.assert_array_equal(sess.run(v), [7.0, 8.0])


def test_broadcast_error_at_run_time():
    """Incompatible shapes known only at run time: InvalidArgumentError naming the op."""
    a = tf.placeholder(tf.float32, name="a")
    b = tf.placeholder(tf.float32, name="b")
    s = tf.add(a, b, name="s")
    with tf.Session() as sess:
        with pytest.raises(
            tf.errors.InvalidArgumentError, match=re.escape("Incompatible shapes: [2] vs. [3]")
        ) as e:
            sess.run(s, {a: [1, 2], b: [1, 2, 3]})
    assert e.value.op.name == "s"


def test_session_factories_choose_the_implementation_by_target(monkeypatch):
    """``tf.Session(target)`` asks the registered factories (TF's SessionFactory): the one that
    accepts the target makes the session's implementation, and ``Session.reset`` goes to the
    same factory.  The client class does the fetch and feed handling for every kind."""
    from minitf.runtime import session as session_mod

    made, resets = [], []

    class Fake:
        def __init__(self, target, graph, config):
            made.append(target)

        def run(self, fetch_tensors, target_ops, feed_tensors, feed_values, options, run_metadata):
            return [float(len(feed_values)) for _ in fetch_tensors]

        def list_devices(self):
            return []

        def close(self):
            made.append("closed")

    monkeypatch.setitem(
        session_mod._factories,
        "FAKE_SESSION",
        session_mod.SessionFactory(
            "FAKE_SESSION",
            lambda target: target.startswith("fake://"),
            Fake,
            lambda target, containers, config: resets.append((target, containers)),
        ),
    )
    c = tf.constant(1.0)
    p = tf.placeholder(tf.float32)
    with tf.Session("fake://x") as sess:
        assert sess.run([c, {"k": c}], {p: 3.0}) == [1.0, {"k": 1.0}]
        assert sess.placement is None
        with pytest.raises(tf.errors.UnimplementedError, match="no local plan"):
            sess.plan(c)
    assert made == ["fake://x", "closed"]
    tf.Session.reset("fake://x", ["c1"])
    assert resets == [("fake://x", ["c1"])]
    with pytest.raises(tf.errors.NotFoundError) as info:
        tf.Session("foo://x:1")
    assert (
        "Registered factories are {DIRECT_SESSION, FAKE_SESSION, GRPC_SESSION}."
        in info.value.message
    )


def test_a_run_feeding_fewer_tensors_after_one_feeding_more_gets_its_own_arg_nodes():
    """Each signature's ``_Arg`` nodes are named as TF names them, ``_arg_<op>_<output>_<index>``:
    ``p`` fed second, then alone, is two nodes with two kernels (one name for both made the
    second run read its feed from the wrong place)."""
    x = tf.placeholder(tf.float32, [], name="x")
    p = tf.placeholder(tf.float32, [], name="p")
    with tf.Session() as sess:
        assert sess.run(x + p, {x: 1.0, p: 2.0}) == 3.0
        assert sess.run(p * 2.0, {p: 3.0}) == 6.0
        assert sess.run(x - p, {p: 5.0, x: 1.0}) == -4.0
