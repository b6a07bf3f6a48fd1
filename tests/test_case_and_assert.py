"""``tf.case`` (nested ``tf.cond``s, with TF's ``Assert``s for the default and ``exclusive``)
and ``tf.Assert`` (an ``AssertGuard`` cond unless all its data is string or int32): the graphs
TF 1.15 builds (tests/data/tf_case_assert_graph.txt), the values, and the assertion texts as
TF prints them."""

from pathlib import Path

import pytest

import minitf as tf

RECORDED = Path(__file__).parent / "data" / "tf_case_assert_graph.txt"


def _build():
    x = tf.placeholder(tf.int32, [], name="x")
    f = tf.placeholder(tf.float32, [2], name="f")
    r = tf.case(
        [(tf.less(x, 0), lambda: tf.constant(-1)), (tf.equal(x, 0), lambda: tf.constant(0))],
        default=lambda: tf.constant(1),
    )
    r2 = tf.case(
        [(tf.less(x, 0), lambda: tf.constant(-1)), (tf.greater(x, 5), lambda: tf.constant(9))],
        name="nodef",
    )
    r3 = tf.case(
        [(tf.less(x, 3), lambda: tf.constant(3)), (tf.less(x, 5), lambda: tf.constant(5))],
        default=lambda: tf.constant(7),
        exclusive=True,
        name="excl",
    )
    a = tf.Assert(tf.reduce_all(f > 0), [f, tf.constant([True, False])], name="chk")
    a2 = tf.Assert(x > 0, ["x must be positive", x], name="chk2")
    return x, f, (r, r2, r3), a, a2


def _listing(op):
    return "%s %s %s %s" % (
        op.name,
        op.type,
        [t.name for t in op.inputs],
        ["^" + c.name for c in op.control_inputs],
    )


def test_case_and_assert_build_tfs_graphs():
    x = _build()[0]
    lines = [_listing(op) for op in tf.get_default_graph().get_operations()]
    recorded = RECORDED.read_text().splitlines()
    assert lines == [line for line in recorded if not line.startswith("single")]
    single = tf.case([(tf.less(x, 0), lambda: tf.constant(-1))], name="single")
    lines = [_listing(op) for op in tf.get_default_graph().get_operations()]
    # one pair, no default: that pair's function behind an assert over no other predicate
    assert [line.split(" [")[0] for line in lines if line.startswith("single")] == [
        line.split(" [")[0] for line in recorded if line.startswith("single")
    ]
    assert single.name == "single/Const_1:0"


def test_case_picks_the_first_true_predicate_and_asserts_as_tf():
    x, f, (r, r2, r3), a, a2 = _build()
    outcomes = {
        -3: (-1, -1, "exclusive"),
        0: (0, "none", "exclusive"),
        2: (1, "none", "exclusive"),
        4: (1, "none", 5),
        6: (1, 9, 7),
    }
    with tf.Session() as sess:
        for v, want in outcomes.items():
            for t, w in zip((r, r2, r3), want):
                if isinstance(w, int):
                    assert sess.run(t, {x: v}) == w
                    continue
                with pytest.raises(tf.errors.InvalidArgumentError) as e:
                    sess.run(t, {x: v})
                first = e.value.message.splitlines()[0]
                if w == "none":
                    assert first == (
                        "assertion failed: [Input error: None of conditions evaluated as "
                        "True:] [0 0]"
                    )
                else:
                    assert first == (
                        "assertion failed: [Input error: exclusive=True: more than 1 "
                        "conditions (Less_2:0, Less_3:0) evaluated as True:] [1 1]"
                    )
        sess.run(a, {f: [1.0, 2.0]})
        with pytest.raises(tf.errors.InvalidArgumentError) as e:
            sess.run(a, {f: [1.0, -2.0]})
        assert e.value.message.splitlines()[0] == "assertion failed: [1 -2] [1 0]"
        with pytest.raises(tf.errors.InvalidArgumentError) as e:
            sess.run(a2, {x: -1})
        assert e.value.message.splitlines()[0] == "assertion failed: [x must be positive] [-1]"


def test_assert_prints_summarize_elements_as_tf_does():
    x = tf.placeholder(tf.int32, [], name="x")
    a = tf.Assert(x > 0, [tf.range(10), tf.constant([1.5, 2.25, 3.0, 4.0])], summarize=5)
    b = tf.Assert(x > 0, [tf.range(10)])
    with tf.Session() as sess:
        for op, text in ((a, "[0 1 2 3 4...] [1.5 2.25 3 4]"), (b, "[0 1 2...]")):
            with pytest.raises(tf.errors.InvalidArgumentError) as e:
                sess.run(op, {x: -1})
            assert e.value.message.splitlines()[0] == "assertion failed: " + text


def test_case_arguments_are_checked_as_tf_checks_them():
    x = tf.placeholder(tf.int32, [])
    with pytest.raises(TypeError, match="fns must be a list, tuple, or dict"):
        tf.case(lambda: x)
    with pytest.raises(TypeError, match="Each entry in pred_fn_pairs must be a 2-tuple"):
        tf.case([(x > 0,)])
    with pytest.raises(TypeError, match="pred must be a Tensor, got: True"):
        tf.case([(True, lambda: x)])
    with pytest.raises(TypeError, match="pred must be Tensor of type bool"):
        tf.case([(x, lambda: x)])
    with pytest.raises(TypeError, match="must be callable"):
        tf.case([(x > 0, x)])


PIECEWISE = Path(__file__).parent / "data" / "tf_piecewise_constant_graph.txt"


def test_piecewise_constant_is_tfs_case_on_the_global_step():
    gs = tf.train.get_or_create_global_step()
    lr = tf.train.piecewise_constant(gs, [10, 20], [1.0, 0.5, 0.1])
    b = tf.placeholder(tf.bool, [2])
    c = tf.placeholder(tf.bool, [2])
    both, either = b & c, b | c
    lines = ["%s %s %s" % (lr, both, either)] + [
        _listing(op)
        for op in tf.get_default_graph().get_operations()
        if not op.name.startswith("global_step")
    ]
    assert lines == PIECEWISE.read_text().splitlines()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        got = []
        for step in (0, 10, 11, 20, 21):
            sess.run(tf.assign(gs, step))
            got.append(float(sess.run(lr)))
        assert got == [1.0, 1.0, 0.5, 0.5, pytest.approx(0.1)]
        out = sess.run([both, either], {b: [True, False], c: [True, True]})
    assert [o.tolist() for o in out] == [[True, False], [True, True]]
    with pytest.raises(ValueError, match="should be 1 less than the length of values"):
        tf.train.piecewise_constant(gs, [10], [1.0])
    with pytest.raises(ValueError, match=r"Boundaries \(float32\) must have the same dtype"):
        tf.train.piecewise_constant(gs, [10.0], [1.0, 2.0])
