"""What a master keeps of a client's graph (issue 24, item 5).

Book section: "The Master and Worker Services".  As TF 1.15's GrpcSession, a minitf client
sends its whole graph, unused constants included, and the master places all of it (so
``log_device_placement`` lists every op and a placement error of an unused op fails the step).
What it keeps per node must stay small: shapes and attr names are shared, a constant is one
array, placement keeps no log text unless asked, and the decoding's short-lived objects are
gone before the ops are made.
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
from minitf.framework.graph import Graph
from minitf.runtime import placer

CPU = "/job:worker/replica:0/task:0/device:CPU:0"


def scalar_constants_graph(n):
    g = tf.Graph()
    with g.as_default():
        for i in range(n):
            tf.constant(float(i), name="c%d" % i)
    return wire.graph_to_proto(g).SerializeToString()


def test_a_received_node_costs_the_master_under_1_kb():
    data = scalar_constants_graph(5_000)
    gc.collect()
    devices = [RemoteDevice(pb.DeviceAttributes(name=CPU, device_type="CPU"))]
    tracemalloc.start()
    try:
        graph = Graph()
        wire.import_graph_def(wire.assemble_graph_def([data]), graph)
        placement = placer.GraphPlacer(devices, False, has_cuda=False).place(graph.get_operations())
        gc.collect()
        kept, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    per_node = kept / 5_000
    print("\nkept per node: %d B, peak %.1f MiB" % (per_node, peak / 2**20))
    assert per_node < 1024  # about 1,500 B before (a copy of each attr dict, a log line ...)
    value = graph.get_operation_by_name("c7").get_attr("value")
    assert value == 7.0 and value.base is None and value.flags.writeable  # one array
    assert placement.log_lines[7] == "c7: (Const): " + CPU  # written when asked for


def mixed_graph():
    """About 7 MB of GraphDef: 3,000 small ops and six 1 MB constants the step never runs."""
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


@pytest.mark.cluster
@pytest.mark.slow
def test_a_7_mb_graph_grows_the_server_by_a_few_times_its_size():
    g, x, out = mixed_graph()
    size = len(wire.graph_to_proto(g).SerializeToString())
    feed = {x: np.ones((1, 100), np.float32)}
    with LocalCluster({"worker": 1}) as lc:
        server = psutil.Process(lc.pid("worker"))
        with tf.Session(lc.target("worker"), graph=g) as first:  # warms the server's caches
            first.run(out, feed)
            before = server.memory_info().rss
            with tf.Session(lc.target("worker"), graph=g) as second:
                second.run(out, feed)
                growth = server.memory_info().rss - before
    print("\nGraphDef %.1f MiB, server growth %.1f MiB" % (size / 2**20, growth / 2**20))
    assert growth < 3 * size  # about 3.9 times before
