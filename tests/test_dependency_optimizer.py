"""The dependency optimizer (TF Grappler's rule: a stateless node read only through control
edges runs as a NoOp), opt-in through ``rewrite_options.dependency_optimization``."""

import numpy as np
import pytest

import minitf as tf
from helpers import node_stats, traced_run
from minitf.runtime.config_proto import RewriterConfig

ON = RewriterConfig.ON


def config(toggle=ON, **kw):
    return tf.ConfigProto(
        graph_options=tf.GraphOptions(
            rewrite_options=RewriterConfig(dependency_optimization=toggle, **kw)
        )
    )


@pytest.fixture(autouse=True)
def fresh_graph():
    with tf.Graph().as_default():
        yield


def traced(sess, fetches, feed_dict=None):
    """The fetched values and {node name: op type} of the nodes the step ran."""
    out, md = traced_run(sess, fetches, feed_dict)
    return out, {ns.node_name: ns.op_type for ns in node_stats(md)}


def mlp_step():
    """Two dense layers trained by GradientDescentOptimizer with TF's default GATE_OP."""
    rng = np.random.default_rng(0)
    x = tf.placeholder(tf.float32, [8, 5], name="x")
    y = tf.placeholder(tf.int64, [8], name="y")
    w1 = tf.Variable(rng.standard_normal((5, 4)).astype(np.float32), name="w1")
    w2 = tf.Variable(rng.standard_normal((4, 3)).astype(np.float32), name="w2")
    h = tf.nn.relu(tf.matmul(x, w1, name="layer1"))
    logits = tf.matmul(h, w2)
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
    train = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
    feed = {x: rng.standard_normal((8, 5)).astype(np.float32), y: np.arange(8) % 3}
    return loss, train, feed, [w1, w2]


def input_gradient(ran):
    """The MatMul computing the gradient of layer1 with respect to the fed x."""
    names = [n for n in ran if n.startswith("gradients/layer1_grad/MatMul") and "_1" not in n]
    assert len(names) == 1, ran
    return names[0]


def train_steps(cfg):
    with tf.Graph().as_default():
        loss, train, feed, weights = mlp_step()
        sess = tf.Session(config=cfg)
    with sess:
        sess.run(tf.global_variables_initializer())
        runs = [traced(sess, [loss, train], feed) for _ in range(3)]
        return [out[0] for out, _ in runs], sess.run(weights), runs[-1][1]


def test_gate_op_input_gradient_runs_as_noop_only_with_the_option_on():
    losses_off, weights_off, ran_off = train_steps(None)
    losses_on, weights_on, ran_on = train_steps(config())
    assert ran_off[input_gradient(ran_off)] == "MatMul"
    assert ran_on[input_gradient(ran_on)] == "NoOp"  # same name, still in the trace
    assert ran_on["gradients/layer1_grad/MatMul_1"] == "MatMul"  # dW1 is read: computed
    assert losses_on == losses_off
    for a, b in zip(weights_on, weights_off):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(
    "cfg",
    [
        None,
        config(RewriterConfig.DEFAULT),
        config(RewriterConfig.OFF),
        config(ON, disable_meta_optimizer=True),
    ],
)
def test_default_off_and_disabled_meta_optimizer_run_the_graph_as_written(cfg):
    _, _, ran = train_steps(cfg)
    assert ran[input_gradient(ran)] == "MatMul"


def test_aggressive_converts_too():
    _, _, ran = train_steps(config(RewriterConfig.AGGRESSIVE))
    assert ran[input_gradient(ran)] == "NoOp"


def test_a_chain_read_only_through_a_control_edge_becomes_noops():
    a = tf.constant(np.ones((3, 3), np.float32), name="a")
    b = tf.matmul(a, a, name="b")
    c = tf.nn.relu(b, name="c")
    d = tf.square(c, name="d")
    with tf.control_dependencies([d]):
        out = tf.identity(tf.constant(1.0), name="out")
    with tf.Session(config=config()) as sess:
        value, ran = traced(sess, out)
    assert value == 1.0
    assert [ran[n] for n in ("b", "c", "d")] == ["NoOp"] * 3
    assert ran["a"] == "Const"  # TF leaves a Const alone (no data inputs to pass on)
    with tf.Session() as sess:
        _, ran = traced(sess, out)
    assert [ran[n] for n in ("b", "c", "d")] == ["MatMul", "Relu", "Square"]


def test_group_of_stateless_ops_becomes_a_noop_chain():
    a = tf.constant([1.0, 2.0], name="a")
    g = tf.group(tf.add(a, a, name="p"), tf.multiply(a, a, name="q"), name="g")
    with tf.Session(config=config()) as sess:
        _, ran = traced(sess, g)
    assert ran["p"] == ran["q"] == ran["g"] == "NoOp"


def test_stateful_ops_are_never_converted():
    v = tf.Variable(1.0, name="v")
    bump = tf.assign_add(v, 1.0, name="bump")
    put = tf.assign(tf.Variable(0.0, name="w"), 5.0, name="put")
    noise = tf.random_uniform([2], name="noise")
    q = tf.FIFOQueue(5, tf.float32, name="q")
    size = q.size(name="size")
    with tf.control_dependencies([bump, put, noise, size]):
        out = tf.identity(tf.constant(0.0), name="out")
    with tf.Session(config=config()) as sess:
        sess.run(tf.global_variables_initializer())
        _, ran = traced(sess, out)
        assert sess.run(v) == 2.0
    assert ran["bump"] == "AssignAdd"
    assert ran["put"] == "Assign"
    assert ran["noise/RandomUniform"] == "RandomUniform"  # stateful: its generator moves on
    assert ran["noise/mul"] == ran["noise"] == "NoOp"  # the arithmetic on it is not
    assert ran["size"] == "QueueSizeV2"


def test_fetched_fed_and_target_nodes_are_never_converted():
    x = tf.placeholder(tf.float32, [2], name="x")
    y = tf.square(x, name="y")
    z = tf.negative(y, name="z")
    t = tf.add(x, 1.0, name="t")
    with tf.control_dependencies([z, t]):
        out = tf.identity(x, name="out")
    with tf.Session(config=config()) as sess:
        _, ran = traced(sess, [out, z], {x: [1.0, 2.0]})  # z fetched: kept, and y it reads
        assert ran["z"] == "Neg" and ran["y"] == "Square"
        _, ran = traced(sess, [out, t.op], {x: [1.0, 2.0]})  # t a target
        assert ran["t"] == "AddV2" and ran["z"] == "NoOp" and ran["y"] == "NoOp"
        # y fed (z reads the fed value) and still run for a control edge: TF keeps a fed node
        with tf.control_dependencies([y.op, z]):
            out2 = tf.identity(x, name="out2")
        _, ran = traced(sess, out2, {x: [1.0, 2.0], y: [7.0, 7.0]})
        assert ran["y"] == "Square" and ran["z"] == "NoOp"


def test_a_signature_that_fetches_a_converted_node_gets_its_own_kernel():
    a = tf.constant([1.0, 2.0], name="a")
    b = tf.square(a, name="b")
    with tf.control_dependencies([b]):
        out = tf.identity(a, name="out")
    with tf.Session(config=config()) as sess:
        _, ran = traced(sess, out)
        assert ran["b"] == "NoOp"
        np.testing.assert_array_equal(sess.run(b), [1.0, 4.0])


def test_config_prints_in_tf_text_format():
    assert str(config()) == (
        "graph_options {\n  rewrite_options {\n    dependency_optimization: ON\n  }\n}\n"
    )
    with pytest.raises(ValueError, match='has no "nope" field'):
        RewriterConfig(nope=1)


@pytest.mark.cluster
def test_in_a_cluster_session_the_master_converts_too():
    server = tf.train.Server.create_local_server()
    try:
        loss, train, feed, _ = mlp_step()
        for cfg, kind in ((config(), "NoOp"), (None, "MatMul")):
            with tf.Session(server.target, config=cfg) as sess:
                sess.run(tf.global_variables_initializer())
                _, ran = traced(sess, [loss, train], feed)
            assert ran[input_gradient(ran)] == kind
    finally:
        server.stop()
