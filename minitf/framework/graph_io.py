"""A minitf graph as TF's ``GraphDef`` and ``MetaGraphDef`` protos (the bytes TF and
TensorBoard read).

Book section: "Distributing TensorFlow" (the chief writes the graph to the event file so that
TensorBoard draws it; ``tf.train.Saver`` exports meta graphs).  TF's pieces:
``Graph.as_graph_def(add_shapes=...)`` (``python/framework/ops.py``), ``make_tensor_proto``
(``tensor_util.py``) and ``create_meta_graph_def`` (``meta_graph.py``).

A node keeps its name, op type, inputs (``"x"`` for output 0, ``"x:k"`` for output k > 0,
``"^x"`` for a control input), requested device and attrs.  Attr values map onto
``AttrValue`` as TF's ``_MakeAttrValue`` does: DType → ``type``, TensorShape → ``shape``,
int → ``i``, float → ``f``, bool → ``b``, str/bytes → ``s``, numpy array → ``tensor``, lists of
one kind → ``list``.  An attr whose value has no AttrValue form is left out of the proto.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from minitf.framework import dtypes, tensor_shape
from minitf.framework.graph import Graph, Operation, Tensor
from minitf.lib import file_io
from minitf.lib.protobuf import tf_protos_pb2 as pb

#: ``versions.producer`` of the GraphDefs written (TF 1.15's ``TF_GRAPH_DEF_VERSION``).
GRAPH_DEF_VERSION = 134
#: ``meta_info_def.tensorflow_version`` of the MetaGraphDefs written: the TF minitf follows.
TENSORFLOW_VERSION = "1.15.5"


def shape_to_proto(shape: Any, msg: pb.TensorShapeProto) -> pb.TensorShapeProto:
    """Fills ``msg``: ``unknown_rank`` for an unknown shape, else one dim each (-1 unknown)."""
    shape = tensor_shape.as_shape(shape)
    msg.SetInParent()  # a scalar's shape has no field set but must be present
    if shape.ndims is None:
        msg.unknown_rank = True
    else:
        for d in shape.as_list():
            msg.dim.add().size = -1 if d is None else int(d)
    return msg


# dtype name -> the TensorProto field a scalar (or a size-1 tensor) of it goes into
_VAL_FIELDS = {
    "float32": "float_val",
    "float64": "double_val",
    "int32": "int_val",
    "int16": "int_val",
    "int8": "int_val",
    "uint8": "int_val",
    "uint16": "int_val",
    "int64": "int64_val",
    "bool": "bool_val",
    "uint32": "uint32_val",
    "uint64": "uint64_val",
    "complex64": "scomplex_val",
    "complex128": "dcomplex_val",
}


def _as_bytes(x: Any) -> bytes:
    return x.encode("utf-8") if isinstance(x, str) else bytes(x)


def tensor_to_proto(value: Any, dtype: Any = None, msg: pb.TensorProto | None = None):
    """``tf.make_tensor_proto``'s layout: strings in ``string_val``; other tensors of more than
    one element as raw little-endian ``tensor_content``; single elements in the typed field
    (``float_val``, ``int_val`` ...; half floats as their bits in ``half_val``)."""
    msg = pb.TensorProto() if msg is None else msg
    dtype = dtypes.as_dtype(dtype if dtype is not None else np.asarray(value).dtype).base_dtype
    arr = np.asarray(value, dtype=None if dtype.name == "string" else dtype.as_numpy_dtype)
    msg.dtype = dtype.as_datatype_enum
    shape_to_proto(arr.shape, msg.tensor_shape)
    if dtype.name == "string":
        msg.string_val.extend(_as_bytes(x) for x in arr.flat)
    elif arr.size > 1:
        msg.tensor_content = arr.astype(arr.dtype.newbyteorder("<")).tobytes()
    elif dtype.name == "float16":
        msg.half_val.extend(int(x) for x in arr.reshape(-1).view(np.uint16))
    elif dtype.is_complex:
        getattr(msg, _VAL_FIELDS[dtype.name]).extend(
            p for x in arr.flat for p in (float(x.real), float(x.imag))
        )
    else:
        getattr(msg, _VAL_FIELDS[dtype.name]).extend(arr.reshape(-1).tolist())
    return msg


def shape_from_proto(msg: pb.TensorShapeProto) -> tensor_shape.TensorShape:
    """The TensorShape of ``msg`` (-1: an unknown dimension)."""
    if msg.unknown_rank:
        return tensor_shape.unknown_shape()
    return tensor_shape.TensorShape([None if d.size < 0 else d.size for d in msg.dim])


def tensor_from_proto(msg: pb.TensorProto) -> np.ndarray:
    """The array of a TensorProto in any of TF's layouts (``tf.make_ndarray``): a typed field
    shorter than the shape repeats its last value, an empty one means zeros."""
    dtype = dtypes.as_dtype(msg.dtype).base_dtype
    shape = [d.size for d in msg.tensor_shape.dim]
    n = int(np.prod(shape, dtype=np.int64))
    if dtype.name == "string":
        values = np.array(list(msg.string_val), dtype=object)
    elif msg.tensor_content:
        little = np.dtype(dtype.as_numpy_dtype).newbyteorder("<")
        return np.frombuffer(msg.tensor_content, little).astype(dtype.as_numpy_dtype).reshape(shape)
    elif dtype.name == "float16":
        values = np.array(msg.half_val, np.uint16).view(np.float16)
    elif dtype.is_complex:
        pairs = np.array(getattr(msg, _VAL_FIELDS[dtype.name]), dtype.real_dtype.as_numpy_dtype)
        values = (pairs[0::2] + 1j * pairs[1::2]).astype(dtype.as_numpy_dtype)
    else:
        values = np.array(getattr(msg, _VAL_FIELDS[dtype.name]), dtype.as_numpy_dtype)
    if values.size == n:
        return values.reshape(shape)
    if not values.size:
        empty = b"" if dtype.name == "string" else 0
        return np.full(shape, empty, dtype=values.dtype)
    out = np.empty(n, values.dtype)
    out[: values.size] = values[:n]
    out[values.size :] = values[-1]
    return out.reshape(shape)


_VALUE_KINDS = ("s", "i", "f", "b", "type", "shape", "tensor")  # the AttrValue kinds read


def _one_from_proto(kind: str, v: Any, raw_bytes: bool) -> Any:
    if kind == "type":
        return dtypes.as_dtype(v)
    if kind == "shape":
        return shape_from_proto(v)
    if kind == "tensor":
        return tensor_from_proto(v)
    if kind == "s":
        return bytes(v) if raw_bytes else bytes(v).decode("utf-8", "surrogateescape")
    return {"i": int, "f": float, "b": bool}[kind](v)


def attr_from_proto(msg: pb.AttrValue, key: str) -> Any:
    """The minitf value of attr ``key`` (the inverse of :func:`attr_to_proto`): text attrs are
    ``str``, except the colocation groups of ``_class``, which minitf keeps as bytes.
    Raises ValueError for a kind minitf has no value for (a function, a placeholder)."""
    which = msg.WhichOneof("value")
    raw = key == "_class"
    if which == "list":
        kinds = [k for k in _VALUE_KINDS if getattr(msg.list, k)]
        if len(kinds) > 1:
            raise ValueError("attr %s mixes kinds %s" % (key, kinds))
        items = getattr(msg.list, kinds[0]) if kinds else []
        return [_one_from_proto(kinds[0], v, raw) for v in items]
    if which in _VALUE_KINDS:
        return _one_from_proto(which, getattr(msg, which), raw)
    raise ValueError("attr %s has a value minitf cannot read (%s)" % (key, which))


def _kind(v: Any) -> str | None:
    """The AttrValue field of a single value, or None when it has none."""
    if isinstance(v, (bool, np.bool_)):
        return "b"
    if isinstance(v, dtypes.DType):
        return "type"
    if isinstance(v, tensor_shape.TensorShape):
        return "shape"
    if isinstance(v, (int, np.integer)):
        return "i"
    if isinstance(v, (float, np.floating)):
        return "f"
    if isinstance(v, (str, bytes)):
        return "s"
    if isinstance(v, np.ndarray):
        return "tensor"
    return None


def _set_one(kind: str, v: Any, holder: Any) -> None:
    """Sets ``holder.<kind>`` to ``v`` (an AttrValue), or appends it (a ListValue)."""
    repeated = isinstance(holder, pb.AttrValue.ListValue)
    if kind == "shape":
        shape_to_proto(v, holder.shape.add() if repeated else holder.shape)
    elif kind == "tensor":
        tensor_to_proto(v, None, holder.tensor.add() if repeated else holder.tensor)
    else:
        if kind == "type":
            v = v.as_datatype_enum
        elif kind == "s":
            v = v.encode("utf-8") if isinstance(v, str) else v
        elif kind in ("i", "f", "b"):
            v = {"i": int, "f": float, "b": bool}[kind](v)
        if repeated:
            getattr(holder, kind).append(v)
        else:
            setattr(holder, kind, v)


def attr_to_proto(value: Any) -> pb.AttrValue | None:
    """The AttrValue of a minitf attr value, or None if it has no AttrValue form."""
    msg = pb.AttrValue()
    if isinstance(value, (list, tuple)):
        kinds = {_kind(v) for v in value}
        if None in kinds or len(kinds) > 1:
            return None
        msg.list.SetInParent()
        for v in value:
            _set_one(_kind(v), v, msg.list)
        return msg
    kind = _kind(value)
    if kind is None:
        return None
    _set_one(kind, value, msg)
    return msg


def node_to_proto(
    op: Operation, msg: pb.NodeDef, add_shapes: bool = False, add_types: bool = False
) -> pb.NodeDef:
    """Fills NodeDef ``msg`` from ``op``; ``add_shapes`` adds TF's ``_output_shapes`` attr (what
    ``FileWriter.add_graph`` and a Saver's ``.meta`` ask for, so that TensorBoard labels edges
    with shapes), ``add_types`` minitf's ``_output_types`` (what a graph imported from a
    ``.meta`` file needs: minitf has no per-op type inference; TF ignores ``_`` attrs)."""
    nd = op.node_def
    msg.name, msg.op, msg.device = nd.name, nd.op, nd.device
    msg.input.extend(nd.input)
    attrs = dict(nd.attr)
    if add_shapes:
        attrs["_output_shapes"] = [t.shape for t in op.outputs]
    if add_types:
        attrs["_output_types"] = [t.dtype for t in op.outputs]
    for key in sorted(attrs):
        value = attrs[key]
        if op.type == "Const" and key == "value":
            value = tensor_to_proto(value, op.get_attr("dtype"))
            msg.attr[key].tensor.CopyFrom(value)
            continue
        converted = attr_to_proto(value)
        if converted is not None:
            msg.attr[key].CopyFrom(converted)
    return msg


def graph_def_proto(graph: Graph, add_shapes: bool = False, add_types: bool = False) -> pb.GraphDef:
    """The GraphDef message of ``graph``: its ops in creation order (TF's order too)."""
    msg = pb.GraphDef()
    for op in graph.get_operations():
        node_to_proto(op, msg.node.add(), add_shapes, add_types)
    msg.versions.producer = GRAPH_DEF_VERSION
    return msg


def graph_def(graph: Graph, add_shapes: bool = False) -> bytes:
    """``graph.as_graph_def(add_shapes=...).SerializeToString()`` of TF."""
    return graph_def_proto(graph, add_shapes).SerializeToString()


def _collection_def(items: list) -> pb.CollectionDef | None:
    """A collection of graph elements as a ``node_list`` of their names, and one of variables
    as a ``bytes_list`` of their ``VariableDef`` protos (``Variable.to_proto``), as TF writes
    them; other kinds (queue runners, cond contexts) are left out."""
    if not items:
        return None
    msg = pb.CollectionDef()
    if all(isinstance(i, (Operation, Tensor)) for i in items):
        msg.node_list.value.extend(i.name for i in items)
        return msg
    protos = [i.to_proto() if hasattr(i, "to_proto") else None for i in items]
    if all(isinstance(p, pb.VariableDef) for p in protos):
        msg.bytes_list.value.extend(p.SerializeToString() for p in protos)
        return msg
    return None


def meta_graph_from_graph_def(
    graph_def_msg: pb.GraphDef, saver_def: pb.SaverDef | None = None
) -> pb.MetaGraphDef:
    """TF's ``create_meta_graph_def(graph_def=...)``: meta info (the TF version minitf
    follows), the GraphDef and the SaverDef if given; no collections (what
    ``FileWriter(logdir, graph)`` writes)."""
    msg = pb.MetaGraphDef()
    msg.meta_info_def.tensorflow_version = TENSORFLOW_VERSION
    msg.graph_def.CopyFrom(graph_def_msg)
    if saver_def is not None:
        msg.saver_def.CopyFrom(saver_def)
    return msg


def meta_graph_def_proto(
    graph: Graph, saver_def: pb.SaverDef | None = None, add_shapes: bool = True
) -> pb.MetaGraphDef:
    """TF's ``create_meta_graph_def(graph=...)``: :func:`meta_graph_from_graph_def` of the
    graph (with ``_output_shapes``, as a Saver exports it, and ``_output_types``, which
    importing it needs), plus its collections (see :func:`_collection_def`)."""
    graph_def_msg = graph_def_proto(graph, add_shapes, add_types=True)
    msg = meta_graph_from_graph_def(graph_def_msg, saver_def)
    for key in sorted(graph.get_all_collection_keys()):
        coll = _collection_def(graph.get_collection(key))
        if coll is not None:
            msg.collection_def[key].CopyFrom(coll)
    return msg


def meta_graph_def(graph: Graph, saver_def: pb.SaverDef | None = None) -> bytes:
    """The serialized MetaGraphDef of ``graph`` (see :func:`meta_graph_def_proto`)."""
    return meta_graph_def_proto(graph, saver_def).SerializeToString()


def write_graph(graph_or_graph_def: Any, logdir: str, name: str, as_text: bool = True) -> str:
    """``tf.train.write_graph``: ``graph_or_graph_def`` as a GraphDef file ``logdir/name``
    (protobuf text format by default, binary with ``as_text=False``); makes ``logdir``.  What
    a Supervisor and a CheckpointSaverHook leave as ``graph.pbtxt``.  Returns the path."""
    from google.protobuf import text_format

    msg = graph_or_graph_def
    if isinstance(graph_or_graph_def, Graph):
        msg = graph_def_proto(graph_or_graph_def)
    os.makedirs(logdir, exist_ok=True)
    path = os.path.join(logdir, name)
    data = text_format.MessageToString(msg).encode() if as_text else msg.SerializeToString()
    file_io.atomic_write_string_to_file(path, data)
    return path
