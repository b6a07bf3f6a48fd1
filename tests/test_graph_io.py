"""minitf/framework/graph_io.py: a graph as TF's GraphDef and MetaGraphDef bytes.

Parsed back twice: with minitf's own protos, and with the copy of TF's protos that TensorBoard
bundles (``tensorboard.compat.proto``: TF's schema, so the field numbers are TF's)."""

import numpy as np
import pytest
from tensorboard.compat.proto import graph_pb2 as tb_graph_pb2
from tensorboard.compat.proto import meta_graph_pb2 as tb_meta_graph_pb2
from tensorboard.compat.proto import types_pb2 as tb_types_pb2

import minitf as tf
from minitf.framework import graph_io
from minitf.lib.protobuf import tf_protos_pb2 as pb


def _small_graph():
    g = tf.Graph()
    with g.as_default():
        a = tf.constant([[1.0, 2.0], [3.0, 4.0]], name="a")
        b = tf.placeholder(tf.float32, [None, 2], name="b")
        with tf.device("/job:worker/task:1/cpu:0"):
            c = tf.matmul(b, a, name="c")
        with tf.control_dependencies([c]):
            tf.identity(a, name="d")
        q = tf.FIFOQueue(3, [tf.float32, tf.int32], name="q")
        tf.identity(q.dequeue()[1], name="second")
        tf.constant(["x", "yz"], name="s")
        tf.constant(1.5, dtype=tf.float16, name="h")
        tf.constant(7, dtype=tf.int64, name="i")
        tf.constant(True, name="t")
    return g


def _nodes(graph_def):
    return {n.name: n for n in graph_def.node}


@pytest.mark.parametrize("cls", [pb.GraphDef, tb_graph_pb2.GraphDef])
def test_nodes_inputs_devices(cls):
    gd = cls.FromString(graph_io.graph_def(_small_graph()))
    nodes = _nodes(gd)
    assert list(nodes)[:4] == ["a", "b", "c", "d"]  # creation order
    assert nodes["c"].op == "MatMul"
    assert list(nodes["c"].input) == ["b", "a"]
    assert nodes["c"].device == "/job:worker/task:1/device:CPU:0"
    assert list(nodes["d"].input) == ["a", "^c"]  # a control input
    assert list(nodes["second"].input) == ["q_Dequeue:1"]  # output 1 of a two-output op
    assert nodes["q_Dequeue"].op == "QueueDequeueV2"
    assert gd.versions.producer == graph_io.GRAPH_DEF_VERSION


@pytest.mark.parametrize("cls", [pb.GraphDef, tb_graph_pb2.GraphDef])
def test_attrs(cls):
    nodes = _nodes(cls.FromString(graph_io.graph_def(_small_graph())))
    assert nodes["b"].attr["dtype"].type == tb_types_pb2.DT_FLOAT
    assert [d.size for d in nodes["b"].attr["shape"].shape.dim] == [-1, 2]
    assert nodes["c"].attr["transpose_a"].b is False
    assert nodes["c"].attr["transpose_a"].WhichOneof("value") == "b"
    assert nodes["c"].attr["T"].type == tb_types_pb2.DT_FLOAT
    q = nodes["q"]
    assert q.op == "FIFOQueueV2"
    assert q.attr["capacity"].i == 3
    assert q.attr["container"].s == b""  # a str attr is TF's bytes `s`
    assert list(q.attr["component_types"].list.type) == [
        tb_types_pb2.DT_FLOAT,
        tb_types_pb2.DT_INT32,
    ]
    assert q.attr["shapes"].WhichOneof("value") == "list"  # an empty list is still a list
    assert nodes["s"].attr["dtype"].type == tb_types_pb2.DT_STRING


def test_scalar_shape_attr_is_present():
    g = tf.Graph()
    with g.as_default():
        tf.Variable(3.0, name="v")
    v = _nodes(tb_graph_pb2.GraphDef.FromString(graph_io.graph_def(g)))["v"]
    assert v.attr["shape"].WhichOneof("value") == "shape"
    assert list(v.attr["shape"].shape.dim) == []
    read = _nodes(pb.GraphDef.FromString(graph_io.graph_def(g)))["v/read"]
    assert list(read.attr["_class"].list.s) == [b"loc:@v"]


def test_const_values_as_tensor_protos():
    nodes = _nodes(tb_graph_pb2.GraphDef.FromString(graph_io.graph_def(_small_graph())))
    a = nodes["a"].attr["value"].tensor
    assert a.dtype == tb_types_pb2.DT_FLOAT
    assert [d.size for d in a.tensor_shape.dim] == [2, 2]
    assert np.frombuffer(a.tensor_content, "<f4").tolist() == [1.0, 2.0, 3.0, 4.0]
    assert list(nodes["s"].attr["value"].tensor.string_val) == [b"x", b"yz"]
    h = nodes["h"].attr["value"].tensor
    assert list(h.half_val) == [int(np.array(1.5, np.float16).view(np.uint16))]
    assert list(nodes["i"].attr["value"].tensor.int64_val) == [7]
    assert list(nodes["t"].attr["value"].tensor.bool_val) == [True]


def test_tensor_to_proto_kinds():
    one = graph_io.tensor_to_proto(np.float32(2.5))
    assert list(one.float_val) == [2.5] and not one.tensor_content
    c = graph_io.tensor_to_proto(np.array([1 + 2j], np.complex64))
    assert list(c.scomplex_val) == [1.0, 2.0]
    big = graph_io.tensor_to_proto(np.arange(3, dtype=np.int32))
    assert np.frombuffer(big.tensor_content, "<i4").tolist() == [0, 1, 2]
    assert list(graph_io.tensor_to_proto(np.array(5, np.int32)).int_val) == [5]
    assert graph_io.tensor_to_proto(np.array(b"q", object), tf.string).string_val == [b"q"]


def test_attr_to_proto_kinds():
    assert graph_io.attr_to_proto(2.5).f == 2.5
    assert graph_io.attr_to_proto("s").s == b"s"
    assert graph_io.attr_to_proto(tf.TensorShape(None)).shape.unknown_rank
    assert list(graph_io.attr_to_proto([1, 2]).list.i) == [1, 2]
    assert list(graph_io.attr_to_proto([0.5]).list.f) == [0.5]
    assert list(graph_io.attr_to_proto([True]).list.b) == [True]
    assert len(graph_io.attr_to_proto([tf.TensorShape([2])]).list.shape) == 1
    assert len(graph_io.attr_to_proto([np.zeros(2)]).list.tensor) == 1
    assert graph_io.attr_to_proto([1, "x"]) is None  # mixed kinds have no AttrValue form
    assert graph_io.attr_to_proto(object()) is None


def test_attrs_without_an_attr_value_form_are_left_out():
    g = tf.Graph()
    with g.as_default():
        op = tf.no_op(name="n")
    op._set_attr("_minitf_private", object())
    assert "_minitf_private" not in _nodes(pb.GraphDef.FromString(graph_io.graph_def(g)))["n"].attr


def test_add_shapes():
    gd = tb_graph_pb2.GraphDef.FromString(graph_io.graph_def(_small_graph(), add_shapes=True))
    shapes = _nodes(gd)["c"].attr["_output_shapes"].list.shape
    assert [[d.size for d in s.dim] for s in shapes] == [[-1, 2]]
    plain = pb.GraphDef.FromString(graph_io.graph_def(_small_graph()))
    assert "_output_shapes" not in _nodes(plain)["c"].attr


def test_meta_graph_def():
    g = _small_graph()
    with g.as_default():
        loss = tf.constant(1.0, name="loss")
        g.add_to_collection("losses", loss)
        g.add_to_collection("ops", loss.op)
        g.add_to_collection("other", 3)  # not graph elements: left out
    saver_def = pb.SaverDef(filename_tensor_name="save/Const:0", max_to_keep=5, version=2)
    mg = tb_meta_graph_pb2.MetaGraphDef.FromString(graph_io.meta_graph_def(g, saver_def))
    assert mg.meta_info_def.tensorflow_version == graph_io.TENSORFLOW_VERSION
    assert [n.name for n in mg.graph_def.node][:3] == ["a", "b", "c"]
    assert mg.saver_def.filename_tensor_name == "save/Const:0"
    assert mg.saver_def.max_to_keep == 5 and mg.saver_def.version == 2
    assert list(mg.collection_def["losses"].node_list.value) == ["loss:0"]
    assert list(mg.collection_def["ops"].node_list.value) == ["loss"]
    assert "other" not in mg.collection_def
    assert pb.MetaGraphDef.FromString(graph_io.meta_graph_def(g)).HasField("saver_def") is False
