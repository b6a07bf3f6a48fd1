"""Graphs as GraphDef messages and back: attrs, nodes, import into a minitf Graph, chunked
GraphDefs.

Book section: "The Master and Worker Services" (the client's graph to the master, one
partition per task to the workers).
"""

from __future__ import annotations

import contextlib
import heapq
import sys
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, NamedTuple

import numpy as np
from google.protobuf.message import DecodeError

from minitf.distributed import protocol_pb2 as pb
from minitf.distributed.wire.limits import DEFAULT_CHUNK_BYTES, MAX_GRAPH_BYTES, MAX_TENSOR_BYTES
from minitf.distributed.wire.tensors import (
    EncodedTensor,
    _dims_from_proto,
    _dtype_from_name,
    _invalid,
    _shape_to_proto,
    _short,
    check_tensor,
    proto_to_tensor,
    tensor_to_proto,
)
from minitf.framework import dtypes, errors, tensor_shape
from minitf.framework import graph as ops_graph
from minitf.ops import func_graph
from minitf.ops import op_def as op_def_mod
from minitf.runtime.subgraph import Node

#: Attrs that :func:`graph_to_proto` adds to every node and :func:`import_graph_def` consumes.
OUTPUT_TYPES_ATTR = "_output_types"
OUTPUT_SHAPES_ATTR = "_output_shapes"

_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1

# -- attrs -----------------------------------------------------------------------------------

_LIST_KINDS = ("s", "i", "f", "b", "type", "shape", "tensor", "u")


def _scalar_kind(v):
    if isinstance(v, (np.ndarray, EncodedTensor)):
        return "tensor"
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
    if isinstance(v, bytes):
        return "s"
    if isinstance(v, str):
        return "u"
    return None


def _check_int64(v, where):
    v = int(v)
    if not _INT64_MIN <= v <= _INT64_MAX:
        raise _invalid("%s: integer %d does not fit in 64 bits." % (where, v))
    return v


def _tensor_proto(value):
    """A tensor attr as a TensorProto (one received undecoded is sent as it came)."""
    if isinstance(value, EncodedTensor):
        return pb.TensorProto.FromString(value)
    return tensor_to_proto(value)


def attr_to_proto(value: Any, where: str) -> pb.AttrValue:
    msg = pb.AttrValue()
    if value is None:
        return msg
    if isinstance(value, func_graph.FuncGraph):
        _function_to_proto(value, msg.func)
        return msg
    kind = _scalar_kind(value)
    if kind == "b":
        msg.b = bool(value)
    elif kind == "type":
        msg.type = value.name
    elif kind == "shape":
        _shape_to_proto(value, msg.shape)
    elif kind == "i":
        msg.i = _check_int64(value, where)
    elif kind == "f":
        msg.f = float(value)
    elif kind == "s":
        msg.s = value
    elif kind == "u":
        msg.u = value
    elif kind == "tensor":
        msg.tensor.CopyFrom(_tensor_proto(value))
    elif isinstance(value, (list, tuple)):
        msg.list.SetInParent()
        kinds = {_scalar_kind(x) for x in value}
        if len(kinds) > 1 or None in kinds:
            raise _invalid(
                "%s: a list attr must hold values of one supported kind, got %s."
                % (where, sorted(type(x).__name__ for x in value))
            )
        if value:
            kind = kinds.pop()
            field = getattr(msg.list, kind)
            for x in value:
                if kind == "type":
                    field.append(x.name)
                elif kind == "shape":
                    _shape_to_proto(x, field.add())
                elif kind == "tensor":
                    field.add().CopyFrom(_tensor_proto(x))
                elif kind == "i":
                    field.append(_check_int64(x, where))
                elif kind == "f":
                    field.append(float(x))
                elif kind == "b":
                    field.append(bool(x))
                else:
                    field.append(x)
    else:
        raise _invalid("%s: a value of type %s cannot be sent." % (where, type(value).__name__))
    return msg


#: Received shapes, shared: a big graph repeats a few shapes (TensorShape is never changed in
#: place; ``set_shape`` makes a new one), so each op's outputs need not hold copies.
_SHAPES: dict = {}
_SHAPES_MAX = 4096


def _shape_from_proto(msg):
    dims = _dims_from_proto(msg)
    key = None if dims is None else tuple(dims)
    shape = _SHAPES.get(key)
    if shape is None:
        shape = tensor_shape.TensorShape(dims)
        if len(_SHAPES) < _SHAPES_MAX:
            _SHAPES[key] = shape
    return shape


def _tensor_attr(msg, max_tensor_bytes, decode_tensors):
    if decode_tensors:
        return proto_to_tensor(msg, max_tensor_bytes)
    check_tensor(msg, max_tensor_bytes)
    return None if decode_tensors is None else EncodedTensor(msg.SerializeToString())


def attr_from_proto(
    msg: pb.AttrValue, max_tensor_bytes: int, decode_tensors: bool | None = True
) -> Any:
    """The minitf value of a received attr (checked as :func:`proto_to_tensor` checks
    tensors); ``decode_tensors=False`` keeps a tensor as an :class:`EncodedTensor`, ``None``
    only checks it (its value is None)."""
    which = msg.WhichOneof("value")
    if which is None:
        return None
    if which in ("s", "u", "f", "b"):
        v = getattr(msg, which)
        return bytes(v) if which == "s" else v
    if which == "i":
        return int(msg.i)
    if which == "type":
        return _dtype_from_name(msg.type)
    if which == "shape":
        return _shape_from_proto(msg.shape)
    if which == "tensor":
        return _tensor_attr(msg.tensor, max_tensor_bytes, decode_tensors)
    if which == "func":
        return _function_from_proto(msg.func, max_tensor_bytes, decode_tensors)
    lst = msg.list
    used = [k for k in _LIST_KINDS if len(getattr(lst, k))]
    if len(used) > 1:
        raise _invalid("A list attr mixes kinds %s." % used)
    if not used:
        return []
    kind = used[0]
    items = getattr(lst, kind)
    if kind == "type":
        return [_dtype_from_name(x) for x in items]
    if kind == "shape":
        return [_shape_from_proto(x) for x in items]
    if kind == "tensor":
        return [_tensor_attr(x, max_tensor_bytes, decode_tensors) for x in items]
    if kind == "s":
        return [bytes(x) for x in items]
    return list(items)


# -- functions (a dataset's map, a one-shot iterator's factory) -----------------------------


def _function_to_proto(fn, msg):
    msg.name = fn.name
    msg.graph.CopyFrom(graph_to_proto(fn))
    msg.inputs.extend(t.name for t in fn.inputs)
    msg.captures.extend(t.name for t in fn.captures.values())
    msg.outputs.extend(t.name for t in fn.outputs)


def _function_from_proto(msg, max_tensor_bytes, decode_tensors):
    """A received function as a FuncGraph (checked as a graph is; None when only checking).
    Its captured values arrive as the inputs of the node that runs it, so each capture
    placeholder stands for itself."""
    if decode_tensors is None:
        check_graph_def(msg.graph, {}, max_tensor_bytes)
        return None
    g = func_graph.FuncGraph(msg.name, ops_graph.Graph())
    import_graph_def(msg.graph, g, max_tensor_bytes, decode_tensors)

    def tensors(names):
        try:
            return [g.get_tensor_by_name(n) for n in names]
        except (KeyError, ValueError, TypeError):
            raise _invalid(
                "Function %s names a tensor it does not have." % _short(msg.name)
            ) from None

    g.inputs, g.outputs = tensors(msg.inputs), tensors(msg.outputs)
    g.captures = {p: p for p in tensors(msg.captures)}
    g.structured_outputs = list(g.outputs)
    return g


# -- graphs ----------------------------------------------------------------------------------


def _topological(ops):
    """``ops`` in creation order, except that an op follows every op of ``ops`` it depends on
    (a control input added after creation can point forward)."""
    chosen = set(ops)
    deps = {
        op: {t.op for t in op.inputs if t.op in chosen}
        | {c for c in op.control_inputs if c in chosen}
        for op in ops
    }
    users = {op: [] for op in ops}
    for op, ds in deps.items():
        for d in ds:
            users[d].append(op)
    waiting = {op: len(ds) for op, ds in deps.items()}
    position = {op: i for i, op in enumerate(ops)}
    ready = [(op._id, i, op) for i, op in enumerate(ops) if not waiting[op]]
    heapq.heapify(ready)
    out = []
    while ready:
        _, _, op = heapq.heappop(ready)
        out.append(op)
        for u in users[op]:
            waiting[u] -= 1
            if not waiting[u]:
                heapq.heappush(ready, (u._id, position[u], u))
    if len(out) != len(ops):
        raise _invalid(
            "The graph has a cycle through %s." % sorted(op.name for op in ops if waiting[op])[:5]
        )
    return out


def node_to_proto(op: ops_graph.Operation | Node, msg: pb.NodeDef) -> None:
    """Fills NodeDef ``msg`` from an Operation or a step graph Node (runtime/subgraph.py):
    every attr, plus its output dtypes and shapes."""
    nd = op.node_def
    msg.name, msg.op = nd.name, nd.op
    msg.input.extend(nd.input)
    msg.device = nd.device or ""
    for key in sorted(nd.attr):
        if key in (OUTPUT_TYPES_ATTR, OUTPUT_SHAPES_ATTR):
            continue
        msg.attr[key].CopyFrom(attr_to_proto(nd.attr[key], "attr %r of node %r" % (key, nd.name)))
    specs = op.outputs if isinstance(op, Node) else [(t.dtype, t.shape) for t in op.outputs]
    msg.attr[OUTPUT_TYPES_ATTR].CopyFrom(attr_to_proto([dtype for dtype, _ in specs], ""))
    msg.attr[OUTPUT_SHAPES_ATTR].CopyFrom(attr_to_proto([shape for _, shape in specs], ""))


def topological(node_defs: Sequence[pb.NodeDef]) -> list[pb.NodeDef]:
    """NodeDefs ordered so that every input comes first (import_graph_def needs it)."""
    by_name = {n.name: n for n in node_defs}
    out, state = [], {}
    for root in node_defs:
        if root.name in state:
            continue
        stack = [(root, False)]
        while stack:
            n, done = stack.pop()
            if done:
                state[n.name] = 2
                out.append(n)
                continue
            if state.get(n.name):
                continue
            state[n.name] = 1
            stack.append((n, True))
            for i in n.input:
                src = i[1:] if i.startswith("^") else i.rsplit(":", 1)[0]
                d = by_name.get(src)
                if d is not None and not state.get(src):
                    stack.append((d, False))
    return out


def graph_to_proto(
    graph_or_ops: ops_graph.Graph | Iterable[ops_graph.Operation], since_version: int = 0
) -> pb.GraphDef:
    """A :class:`GraphDef` of a minitf Graph (or of a list of its Operations).

    Nodes come in topological order (creation order, adjusted only where a later control edge
    requires it) with every attr encoded, plus ``_output_types`` / ``_output_shapes`` so that
    :func:`import_graph_def` can rebuild the output tensors.  ``version`` is the number of ops the
    graph has; ``since_version=n`` keeps only ops created after the first ``n`` (what a client
    sends to extend a session it created at version ``n``).  Note: a control edge added later to
    an op that was already sent is not part of an extension.
    """
    if isinstance(graph_or_ops, ops_graph.Graph):
        graph, ops = graph_or_ops, graph_or_ops.get_operations()
    else:
        ops = list(graph_or_ops)
        graph = ops[0].graph if ops else None
        for op in ops:
            if not isinstance(op, ops_graph.Operation):
                raise TypeError(
                    "graph_to_proto needs a Graph or Operations, got %s" % type(op).__name__
                )
            if op.graph is not graph:
                raise ValueError("graph_to_proto: the ops come from different graphs")
    version = len(graph.get_operations()) if graph is not None else since_version
    ops = [op for op in ops if op._id >= since_version]
    msg = pb.GraphDef(version=version)
    for op in _topological(ops):
        node_to_proto(op, msg.node.add())
    return msg


class NodeRecord(NamedTuple):
    """One received node, decoded to minitf values (DType, TensorShape, ndarray, lists ...).

    ``inputs``: the NodeDef input strings, a tuple (``"x"``, ``"x:1"``, ``"^ctrl"``); ``attrs``
    excludes ``_output_types`` / ``_output_shapes``, which become ``output_types`` (list of
    DType, or None when absent) and ``output_shapes`` (list of TensorShape, or None).
    """

    name: str
    op: str
    inputs: tuple
    device: str
    attrs: dict
    output_types: list
    output_shapes: list

    def node_def(self):
        """The record as minitf's :class:`minitf.NodeDef`."""
        return ops_graph.NodeDef(
            self.name, self.op, list(self.inputs), self.device, dict(self.attrs)
        )


def _node_record(node, max_tensor_bytes, decode_tensors):
    name = node.name
    if not ops_graph._VALID_OP_NAME.match(name):
        raise _invalid("Node name %s is not a valid op name." % _short(name))
    if not node.op:
        raise _invalid("Node %s has no op type." % name)
    attrs = {}
    for key, value in sorted(node.attr.items()):
        try:  # (interned: every node's "dtype", "value" ... key is then one string)
            attrs[sys.intern(key)] = attr_from_proto(value, max_tensor_bytes, decode_tensors)
        except errors.InvalidArgumentError as e:
            raise _invalid("attr %s of node %s: %s" % (_short(key), name, e.message)) from None
    out_types = attrs.pop(OUTPUT_TYPES_ATTR, None)
    out_shapes = attrs.pop(OUTPUT_SHAPES_ATTR, None)
    if out_types is not None and (
        not isinstance(out_types, list) or not all(isinstance(t, dtypes.DType) for t in out_types)
    ):
        raise _invalid("Node %s: %s must be a list of dtypes." % (name, OUTPUT_TYPES_ATTR))
    if out_shapes is not None:
        if not isinstance(out_shapes, list) or not all(
            isinstance(s, tensor_shape.TensorShape) for s in out_shapes
        ):
            raise _invalid("Node %s: %s must be a list of shapes." % (name, OUTPUT_SHAPES_ATTR))
        if out_types is None or len(out_shapes) != len(out_types):
            raise _invalid(
                "Node %s: %s and %s differ in length."
                % (name, OUTPUT_TYPES_ATTR, OUTPUT_SHAPES_ATTR)
            )
    return NodeRecord(
        name, sys.intern(node.op), tuple(node.input), node.device, attrs, out_types, out_shapes
    )


def proto_to_node_records(
    graph_def: pb.GraphDef, max_tensor_bytes: int = MAX_TENSOR_BYTES, decode_tensors: bool = True
) -> list[NodeRecord]:
    """The nodes of a received :class:`GraphDef` as :class:`NodeRecord` s, in order.

    Attr values are decoded through the whitelists (dtype names, shapes, tensors checked as in
    :func:`proto_to_tensor`); InvalidArgumentError names the node and attr that failed.
    ``decode_tensors=False`` keeps tensor attrs encoded (checked :class:`EncodedTensor` s).
    """
    return [_node_record(node, max_tensor_bytes, decode_tensors) for node in graph_def.node]


def _parse_input(text, node):
    """('data' | 'control', op name, output index) of a NodeDef input string."""
    if text.startswith("^"):
        src, kind, index = text[1:], "control", None
    else:
        kind = "data"
        src, sep, idx = text.rpartition(":")
        if not sep:
            src, index = text, 0
        elif idx.isdigit() and len(idx) < 10:  # isdigit: no sign, no spaces
            index = int(idx)
        else:
            raise _invalid("Node %s has a malformed input %s." % (node, _short(text)))
    if not ops_graph._VALID_OP_NAME.match(src):
        raise _invalid("Node %s has a malformed input %s." % (node, _short(text)))
    return kind, src, index


def import_graph_def(
    graph_def: pb.GraphDef,
    graph: ops_graph.Graph | None = None,
    max_tensor_bytes: int = MAX_TENSOR_BYTES,
    decode_tensors: bool = True,
) -> list[ops_graph.Operation]:
    """Rebuilds the nodes of ``graph_def`` as Operations of ``graph`` (default: the default graph).

    Every op keeps its name, type, device, attrs (``_class`` included), data inputs, control
    inputs and output dtypes/shapes: the graph's device, colocation, container and
    control-dependency blocks do not apply.  Inputs may name nodes earlier in ``graph_def`` or
    ops ``graph`` already has (a session extension).  Everything is checked before the first op
    is created, so a rejected GraphDef leaves ``graph`` unchanged.  Returns the new Operations.
    ``decode_tensors=False``: tensor attrs stay encoded, checked (:class:`EncodedTensor`: a
    master, which runs no kernel, only forwards them).
    The graph's build-time stacks are set aside during the import, so do not build ops in the
    same graph from another thread meanwhile (servers import into a graph of their own).

    Raises InvalidArgumentError: unregistered op type, input naming an unknown node (or a later
    one: nodes must be in topological order) or a missing output, duplicate node name, missing
    ``_output_types``, or any malformed attr.
    """
    graph = ops_graph.get_default_graph() if graph is None else graph
    if graph.finalized:
        raise RuntimeError("Graph is finalized and cannot be modified.")
    n_outputs = {op.name: len(op.outputs) for op in graph.get_operations()}
    plan = checked_nodes(graph_def, n_outputs, max_tensor_bytes, decode_tensors)
    created = []
    with _build_stacks_aside(graph):
        for r, op_def, specs, data, control in plan:
            inputs = [graph.get_operation_by_name(src).outputs[i] for src, i in data]
            op = graph.create_op(r.op, inputs, specs, r.name + "/", r.attrs, op_def=op_def)
            op._device = r.device
            op._attrs = r.attrs  # the record's own dict: not the copy create_op made
            op._control_inputs = []
            for src in control:
                op._add_control_input(graph.get_operation_by_name(src))
            _mark_name_used(graph, r.name)
            created.append(op)
    return created


def checked_nodes(
    graph_def: pb.GraphDef, n_outputs: Any, max_tensor_bytes: int, decode_tensors: bool = True
) -> list:
    """Checks every node of ``graph_def`` as :func:`import_graph_def` does, creating nothing:
    per node ``(record, op def, output specs, data inputs, control inputs)``.  ``n_outputs``
    maps the name of each node the graph already has to its number of outputs (anything with
    ``in``, ``[]`` and ``[]=``); the checked nodes are added to it."""
    records = proto_to_node_records(graph_def, max_tensor_bytes, decode_tensors)
    return [_checked_node(r, n_outputs) for r in records]


def check_graph_def(graph_def: pb.GraphDef, n_outputs: Any, max_tensor_bytes: int) -> None:
    """The checks of :func:`checked_nodes`, one node at a time, keeping nothing (tensors are
    checked, not decoded)."""
    for node in graph_def.node:
        _checked_node(_node_record(node, max_tensor_bytes, None), n_outputs)


def _checked_node(r, n_outputs):
    """``(record, op def, output specs, data inputs, control inputs)`` of one node, every
    reference checked against the nodes before it (``n_outputs``: name -> outputs, updated)."""
    if r.name in n_outputs:
        raise _invalid("Duplicate node name in graph: %s." % _short(r.name))
    try:
        op_def = op_def_mod.get_op_def(r.op)
    except KeyError:
        raise _invalid("Op type not registered %s (node %s)." % (_short(r.op), r.name)) from None
    if r.output_types is None:
        raise _invalid(
            "Node %s has no %s attr: import only GraphDefs made by "
            "graph_to_proto." % (r.name, OUTPUT_TYPES_ATTR)
        )
    shapes = r.output_shapes or [tensor_shape.unknown_shape()] * len(r.output_types)
    data, control = [], []
    for text in r.inputs:
        kind, src, index = _parse_input(text, r.name)
        if src not in n_outputs:
            raise _invalid(
                "Node %s has input %s, which names no earlier node." % (r.name, _short(text))
            )
        if kind == "control":
            control.append(src)
            continue
        if control:
            raise _invalid(
                "Node %s has data input %s after a control input." % (r.name, _short(text))
            )
        if index >= n_outputs[src]:
            raise _invalid(
                "Node %s has input %s, but %s has %d outputs."
                % (r.name, _short(text), src, n_outputs[src])
            )
        data.append((src, index))
    n_outputs[r.name] = len(r.output_types)
    return r, op_def, list(zip(r.output_types, shapes)), data, control


@contextlib.contextmanager
def _build_stacks_aside(graph):
    """The graph's device, colocation, control-dependency, attr, container and name-scope
    stacks emptied while imported ops are created (they keep what the GraphDef says)."""
    names = (
        "_device_function_stack",
        "_colocation_stack",
        "_control_dependencies_stack",
        "_default_attrs",
        "_container",
        "_name_stack",
    )
    empty = ([], [], [], {}, "", "")
    with graph._lock:
        saved = [getattr(graph, n) for n in names]
        for n, value in zip(names, empty):
            setattr(graph, n, value)
        try:
            yield
        finally:
            for n, value in zip(names, saved):
                setattr(graph, n, value)


def _mark_name_used(graph, name):
    """Later ops built in ``graph`` get fresh names (``add_1`` after an imported ``add``), and
    scopes of imported names count as used too."""
    parts = name.split("/")
    for i in range(1, len(parts) + 1):
        scope = name if i == len(parts) else "/".join(parts[:i])
        lower = scope.lower()
        graph._names_in_use.setdefault(scope if lower == scope else lower, 1)  # (no copy)


def iter_graph_def_chunks(
    graph_def: pb.GraphDef, chunk_bytes: int = DEFAULT_CHUNK_BYTES
) -> Iterator[bytes]:
    """The serialized ``graph_def`` in pieces of at most ``chunk_bytes`` (at least one piece)."""
    if chunk_bytes < 1:
        raise ValueError("chunk_bytes must be positive, got %d" % chunk_bytes)
    data = graph_def.SerializeToString()
    yield data[:chunk_bytes]
    for offset in range(chunk_bytes, len(data), chunk_bytes):
        yield data[offset : offset + chunk_bytes]


def assemble_graph_def(pieces: Iterable[bytes], max_bytes: int = MAX_GRAPH_BYTES) -> pb.GraphDef:
    """The GraphDef whose serialization is the concatenation of ``pieces`` (bytes).

    InvalidArgumentError if the pieces add up to more than ``max_bytes`` (checked as they come)
    or do not parse.
    """
    kept, total = [], 0
    for piece in pieces:
        total += len(piece)
        if total > max_bytes:
            raise _invalid("GraphDef exceeds the limit of %d bytes." % max_bytes)
        kept.append(piece)
    try:  # (joined once: a buffer grown piece by piece leaves its old blocks in the heap)
        return pb.GraphDef.FromString(b"".join(kept))
    except DecodeError as e:
        raise _invalid("Malformed GraphDef: %s" % e) from None
