"""What a master keeps of a client's graph (issue 24, item 5).

Book section: "The Master and Worker Services".  As TF 1.15's GrpcSession, a minitf client
sends its whole graph, unused constants included, and the master places all of it (so
``log_device_placement`` lists every op and a placement error of an unused op fails the step).
What it keeps is the received NodeDefs and a device per node (``received_graph.py``):
Operations are built while the graph is placed and, per step signature, for the nodes that
step needs; constants are forwarded to the workers undecoded.
"""

import gc
import tracemalloc

import numpy as np
import psutil
import pytest

import minitf as tf
from minitf.distributed import LocalCluster, wire
from minitf.distributed import protocol_pb2 as pb
from minitf.distributed.master_session import RemoteDevice
from minitf.distributed.received_graph import ReceivedGraph, dismantle
from minitf.framework import errors
from minitf.runtime import placer

CPU = "/job:worker/replica:0/task:0/device:CPU:0"
DEVICES = [RemoteDevice(pb.DeviceAttributes(name=CPU, device_type="CPU"))]


def scalar_constants_graph(n):
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [None], name="x")
        for i in range(n):
            tf.constant(float(i), name="c%d" % i)
        out = x + 1.0
    return g, x, out


def mixed_graph():
    """About 6.4 MiB of GraphDef: 4,500 small ops and six 1 MB constants the step never runs."""
    g = tf.Graph()
    rng = np.random.default_rng(0)
    with g.as_default():
        x = tf.placeholder(tf.float32, [None, 100], name="x")
        for i in range(6):
            tf.constant(rng.random((250, 1000), np.float32), name="big%d" % i)
        y = x
        for _ in range(1500):
            y = y * tf.constant(1.0001) + 0.5
        out = x + 1.0
    return g, x, out


def received(g):
    rg = ReceivedGraph()
    rg.extend(wire.graph_to_proto(g))
    return rg


@pytest.mark.parametrize(
    "make", [lambda: scalar_constants_graph(5_000)[0], lambda: mixed_graph()[0]]
)
def test_a_placed_graph_costs_the_master_about_its_graphdef(make):
    g = make()
    data = wire.graph_to_proto(g).SerializeToString()
    gc.collect()
    tracemalloc.start()
    try:
        rg = ReceivedGraph()
        rg.extend(wire.assemble_graph_def([data]))
        rg.place(placer.GraphPlacer(DEVICES), log=False)
        gc.collect()
        kept, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    print("\nkept %.2fx its GraphDef, peak %.1f MiB" % (kept / len(data), peak / 2**20))
    assert kept < 1.5 * len(data)  # about 8x for tiny nodes when each was an Operation
    assert len(rg) == len(g.get_operations())


def test_every_node_is_placed_and_logged(capsys):
    g, _, _ = scalar_constants_graph(20)
    rg = received(g)
    rg.place(placer.GraphPlacer(DEVICES), log=True)
    lines = capsys.readouterr().out.splitlines()
    assert "c7: (Const): " + CPU in lines and "x: (Placeholder): " + CPU in lines
    assert len(lines) == len(g.get_operations())


def test_a_placement_error_of_an_op_no_step_runs_still_fails():
    g, _, _ = scalar_constants_graph(3)
    with g.as_default(), tf.device("/job:nowhere"):
        tf.constant(1.0, name="stray")
    rg = received(g)
    with pytest.raises(
        errors.InvalidArgumentError, match="Cannot assign a device for operation stray"
    ):
        rg.place(placer.GraphPlacer(DEVICES), log=False)


def test_a_step_builds_only_the_nodes_it_needs():
    g = tf.Graph()
    with g.as_default():
        a = tf.constant(2.0, name="a")
        b = tf.identity(a, name="b")
        c = tf.multiply(b, 3.0, name="c")
        with tf.control_dependencies([tf.no_op(name="ctl")]):
            tf.add(c, 1.0, name="d")
        tf.constant(np.ones(1000, np.float32), name="unused")
    rg = received(g)
    rg.place(placer.GraphPlacer(DEVICES), log=False)
    graph, device_of = rg.step_ops(["d:0"], [], ["c:0"])  # fed c: a and b are cut off
    try:
        names = [op.name for op in graph.get_operations()]
        # the fed op and what it reads come too, so that its name resolves as in the graph
        assert set(names) == {"a", "b", "c", "c/y", "ctl", "d", "d/y"}
        assert all(device_of[op].name == CPU for op in graph.get_operations())
        value = graph.get_operation_by_name("d/y").get_attr("value")
        assert isinstance(value, wire.EncodedTensor)  # forwarded as received, not decoded
    finally:
        dismantle(graph)
    graph, _ = rg.step_ops(["d:0"], [], [])
    assert "unused" not in [op.name for op in graph.get_operations()]
    dismantle(graph)


def test_an_extension_is_checked_against_the_kept_nodes():
    g, _, _ = scalar_constants_graph(2)
    rg = received(g)
    version = len(g.get_operations())
    with g.as_default():
        tf.identity(g.get_tensor_by_name("c1:0"), name="later")
    rg.extend(wire.graph_to_proto(g, since_version=version))
    assert len(rg) == version + 1
    bad = pb.GraphDef()
    bad.CopyFrom(wire.graph_to_proto(g, since_version=version))
    bad.node[0].name = "later2"
    bad.node[0].input[0] = "c1:3"
    with pytest.raises(errors.InvalidArgumentError, match="c1 has 1 outputs"):
        rg.extend(bad)
    bad.node[0].name = "c0"
    bad.node[0].input[0] = "c1"
    with pytest.raises(errors.InvalidArgumentError, match="Duplicate node name in graph: 'c0'"):
        rg.extend(bad)
    assert len(rg) == version + 1  # nothing added


def _growth_per_session(g, x, out, shape):
    """Server RSS growth of each of six sessions of ``g``, each run once (MiB)."""
    feed = {x: np.ones(shape, np.float32)}
    with LocalCluster({"worker": 1}) as lc:
        server = psutil.Process(lc.pid("worker"))
        sessions, rss = [], [server.memory_info().rss]
        try:
            for _ in range(6):
                sessions.append(tf.Session(lc.target("worker"), graph=g))
                sessions[-1].run(out, feed)
                rss.append(server.memory_info().rss)
        finally:
            for s in sessions:
                s.close()
    return [b - a for a, b in zip(rss, rss[1:])]


@pytest.mark.cluster
@pytest.mark.slow
@pytest.mark.parametrize("kind", ["40,000 scalar constants", "six 1 MB constants"])
def test_one_more_session_grows_the_server_by_less_than_3x_its_graphdef(kind):
    if kind.startswith("40"):
        (g, x, out), shape = scalar_constants_graph(40_000), (1,)
    else:
        (g, x, out), shape = mixed_graph(), (1, 100)
    size = len(wire.graph_to_proto(g).SerializeToString())
    growth = _growth_per_session(g, x, out, shape)
    print(
        "\nGraphDef %.1f MiB, growth per session: %s (x its size)"
        % (size / 2**20, ", ".join("%.1f" % (d / size) for d in growth))
    )
    # The first session also warms the server (its caches, the heap its peaks leave free).
    assert sum(growth[1:]) / 5 < 3 * size  # 9.3x for the scalars when each node was kept


def test_constants_are_checked_and_forwarded_as_they_came():
    g = tf.Graph()
    with g.as_default():
        tf.constant(np.arange(6, dtype=np.float32).reshape(2, 3), name="k")
        tf.constant([b"ab", b"c"], name="s")
    gdef = wire.graph_to_proto(g)
    imported = wire.import_graph_def(gdef, tf.Graph(), decode_tensors=False)
    for op, node in zip(imported, gdef.node):
        sent = pb.NodeDef()
        wire.node_to_proto(op, sent)
        assert sent.attr["value"] == node.attr["value"]  # the same TensorProto, re-sent
    np.testing.assert_array_equal(
        wire.proto_to_tensor(pb.TensorProto.FromString(imported[0].get_attr("value"))),
        np.arange(6, dtype=np.float32).reshape(2, 3),
    )
    gdef.node[0].attr["value"].tensor.content = b"\0" * 20  # 24 bytes are needed
    with pytest.raises(errors.InvalidArgumentError, match="needs 24 bytes of content, got 20"):
        ReceivedGraph().extend(gdef)


def _devices(*names):
    return [
        RemoteDevice(pb.DeviceAttributes(name=n, device_type=n.rsplit(":", 2)[-2])) for n in names
    ]


CLUSTER = _devices(
    "/job:ps/replica:0/task:0/device:CPU:0",
    "/job:worker/replica:0/task:0/device:CPU:0",
    "/job:worker/replica:0/task:0/device:GPU:0",
    "/job:worker/replica:0/task:1/device:CPU:0",
)


def _training_graph(gpu_request):
    """Variables on a ps (reference edges, ``_class`` colocations), an optimizer, a queue
    (resource edges), explicit devices, colocate_with and generator constants."""
    g = tf.Graph()
    with g.as_default():
        with tf.device(tf.train.replica_device_setter(ps_tasks=1)):
            w = tf.Variable(tf.zeros([3, 2]), name="w")
            b = tf.Variable(tf.zeros([2]), name="b")
        with tf.device("/job:worker/task:0"):
            q = tf.FIFOQueue(4, tf.float32, shapes=[3], name="q")
            enq = q.enqueue([tf.ones([3])], name="enq")
            x = tf.reshape(q.dequeue(), [1, 3])
            with tf.device(gpu_request):
                y = tf.matmul(x, w) + b
            loss = tf.reduce_sum(y * y, name="loss")
            train = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
        with tf.colocate_with(w):
            tf.identity(w, name="w_copy")
        with tf.device("/job:worker/task:1"):
            tf.constant(1.0, name="lonely") + 2.0
    return g, [enq, train]


@pytest.mark.parametrize("soft", [False, True])
@pytest.mark.parametrize("gpu", ["/device:GPU:0", "/device:GPU:3", "/job:ps/device:GPU:0"])
def test_the_master_places_as_the_ops_of_the_graph_would_be(capsys, soft, gpu):
    g, _ = _training_graph(gpu)
    try:
        expected = placer.GraphPlacer(CLUSTER, soft, has_cuda=True).place(g.get_operations())
    except errors.InvalidArgumentError as e:
        with pytest.raises(errors.InvalidArgumentError) as got:
            received(g).place(placer.GraphPlacer(CLUSTER, soft, has_cuda=True), log=True)
        assert got.value.message == e.message
        return
    received(g).place(placer.GraphPlacer(CLUSTER, soft, has_cuda=True), log=True)
    assert capsys.readouterr().out.splitlines() == expected.log_lines


def test_fields_minitf_does_not_know_are_skipped_when_nodes_are_kept():
    g, _, _ = scalar_constants_graph(2)
    data = wire.graph_to_proto(g).SerializeToString()
    unknown = b"\x78\x05" + b"\x85\x01abcd" + b"\x89\x01" + b"12345678" + b"\x92\x01\x02hi"
    rg = ReceivedGraph()
    rg.extend(pb.GraphDef.FromString(unknown + data + unknown))
    assert rg.names() == [op.name for op in g.get_operations()]
    assert rg.node(2).name == "c1" and rg.node(2).op == "Const"
