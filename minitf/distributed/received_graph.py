"""A client's graph as a master keeps it: each node's NodeDef bytes, Operations built on demand.

Book section: "The Master and Worker Services".  As TF 1.15's GrpcSession, a minitf client sends
its whole graph, unused constants included, and the master places all of it at the first step
(so ``log_device_placement`` lists every op, and a placement error of an op that no step runs
still fails the step).  A Python Operation with its Tensors, names and attrs costs about 1 KB:
many times the NodeDef of a small op (a scalar constant is about 120 bytes on the wire).  So the
master keeps no Operation per node.  :class:`ReceivedGraph` holds each checked node's serialized
NodeDef (its size on the wire) and the device chosen for it (two bytes).  To place the graph it
makes a slim record per node, what the placer reads (:class:`_PlacedOp`), dropped once placed;
Operations are built for each step signature only, of the nodes that step needs (TF's subgraph
pruning: what the fetches and targets depend on, cut at fed tensors), and constants are never
decoded (a master runs no kernel: they go to the workers as they came).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Sequence
from typing import Any

from minitf.distributed import protocol_pb2 as pb
from minitf.distributed import wire
from minitf.distributed.wire.limits import MAX_TENSOR_BYTES
from minitf.framework.graph import Graph
from minitf.ops.op_def import get_op_def
from minitf.runtime import placer

#: Nodes imported at a time by :meth:`ReceivedGraph.build`.
BUILD_BATCH = 2048


class _KnownOutputs:
    """The ``n_outputs`` that :func:`wire.check_graph_def` checks inputs against: the kept nodes'
    output counts (read from their NodeDef when asked for) and those of the nodes being
    checked."""

    def __init__(self, graph: ReceivedGraph) -> None:
        self.graph = graph
        self.index = graph.index() if len(graph) else {}
        self.new: dict[str, int] = {}

    def __contains__(self, name: str) -> bool:
        return name in self.new or name in self.index

    def __getitem__(self, name: str) -> int:
        n = self.new.get(name)
        if n is None:
            n = len(self.graph.node(self.index[name]).attr[wire.OUTPUT_TYPES_ATTR].list.type)
        return n

    def __setitem__(self, name: str, n: int) -> None:
        self.new[name] = n


def _graph_def(nodes: Iterable[bytes]) -> pb.GraphDef:
    """The GraphDef of serialized NodeDefs."""
    out = pb.GraphDef()
    add = out.node.add
    for data in nodes:
        add().MergeFromString(data)
    return out


class _PlacedTensor:
    """What the placer reads of a tensor: the op making it and its dtype."""

    __slots__ = ("op", "dtype")

    def __init__(self, op: _PlacedOp, dtype: Any) -> None:
        self.op = op
        self.dtype = dtype


class _PlacedOp:
    """What the placer reads of an op (name, type, requested device, edges, the kernel's dtype
    attr, colocation groups), made straight from a checked NodeDef: a few hundred bytes, where
    an imported Operation with its attrs and Tensors takes about 900."""

    __slots__ = (
        "name",
        "type",
        "device",
        "_id",
        "_attrs",
        "_inputs",
        "_outputs",
        "_control_inputs",
    )

    def colocation_groups(self) -> list[bytes]:
        """As :meth:`Operation.colocation_groups`: its ``_class`` groups, else its own."""
        cls = self._attrs.get("_class")
        return list(cls) if cls else [("loc:@" + self.name).encode()]


class _PlacedOps:
    """Builds the :class:`_PlacedOp` s of a graph's NodeDefs, in order, sharing what nodes
    have in common (op types, device strings, attr dicts)."""

    def __init__(self) -> None:
        self.ops: list[_PlacedOp] = []
        self.by_name: dict[str, _PlacedOp] = {}
        self.shared: dict = {}

    def _share(self, value):
        return self.shared.setdefault(value, value)

    def add(self, node: pb.NodeDef) -> None:
        op = _PlacedOp()
        op.name, op.type, op.device = node.name, self._share(node.op), self._share(node.device)
        op._id = len(self.ops)
        type_attr = get_op_def(op.type).type_attr
        attrs = {}
        if type_attr and type_attr in node.attr:
            attrs[type_attr] = wire.attr_from_proto(node.attr[type_attr], 0)
        if "_class" in node.attr:
            attrs["_class"] = wire.attr_from_proto(node.attr["_class"], 0)
        key = tuple(attrs.items()) if "_class" not in attrs else None
        op._attrs = attrs if key is None else self.shared.setdefault(("attrs", key), attrs)
        types = wire.attr_from_proto(node.attr[wire.OUTPUT_TYPES_ATTR], 0)
        op._outputs = [_PlacedTensor(op, t) for t in types]
        data = [t for t in node.input if not t.startswith("^")]
        op._inputs = [self._tensor(t) for t in data] if data else ()
        control = [self.by_name[t[1:]] for t in node.input if t.startswith("^")]
        op._control_inputs = control or ()
        self.ops.append(op)
        self.by_name[op.name] = op

    def _tensor(self, text: str) -> _PlacedTensor:
        src, _, index = text.partition(":")
        return self.by_name[src]._outputs[int(index) if index else 0]


def _op_name(name: str) -> str:
    return name[1:] if name.startswith("^") else name.partition(":")[0]


def _tensor_name(text: str) -> str:
    return text if ":" in text else text + ":0"


def dismantle(graph: Graph) -> None:
    """Breaks the reference cycles of a graph built here (each op and its graph, each op and
    its output tensors), so that its memory is freed at once rather than at the next full
    garbage collection."""
    for op in graph._ops:
        op._outputs, op._inputs, op._control_inputs = [], [], []
    graph._ops.clear()
    graph._nodes_by_name.clear()


class ReceivedGraph:
    """The nodes a session received, in graph order, and where the last placement put them.

    Per node it keeps its serialized NodeDef (all of them in one buffer), where that ends, its
    name (all names in one string) and the index of its device: no Python object per node.
    A name -> position dict is made only while a step signature is prepared or the graph grows.
    """

    def __init__(self) -> None:
        self._data = b""  # the NodeDefs, one after the other
        self._ends = array("Q")  # where each node's NodeDef ends in _data
        self._names = ""  # each node's name followed by a newline (names have none)
        self._device = array("H")  # per node: index into _devices, as last placed
        self._devices: list = []

    def __len__(self) -> int:
        return len(self._ends)

    def names(self) -> list[str]:
        """The node names, in graph order."""
        return self._names.split("\n")[:-1]

    def index(self) -> dict[str, int]:
        """``{name: position}`` of every node."""
        return {name: i for i, name in enumerate(self.names())}

    def _bytes(self, i: int) -> memoryview:
        return memoryview(self._data)[self._ends[i - 1] if i else 0 : self._ends[i]]

    def node(self, i: int) -> pb.NodeDef:
        """The NodeDef of the node at position ``i``."""
        return pb.NodeDef.FromString(self._bytes(i))

    def extend(self, graph_def: pb.GraphDef, max_tensor_bytes: int = MAX_TENSOR_BYTES) -> None:
        """Adds the nodes of ``graph_def`` after checking them as ``import_graph_def`` does
        (InvalidArgumentError, and nothing added, for a bad one)."""
        wire.check_graph_def(graph_def, _KnownOutputs(self), max_tensor_bytes)
        pieces, names, end = [self._data], [self._names], len(self._data)
        for node in graph_def.node:
            pieces.append(node.SerializeToString())
            end += len(pieces[-1])
            self._ends.append(end)
            names.append(node.name + "\n")
        self._data = b"".join(pieces)  # (one block of its exact size)
        self._names = "".join(names)

    def build(self, positions: Sequence[int] | None = None) -> Graph:
        """A new Graph of the nodes (all of them, or those at ``positions``, in order),
        imported :data:`BUILD_BATCH` nodes at a time (a batch's messages are freed before the
        next is read); constants stay encoded (:class:`wire.EncodedTensor`)."""
        positions = range(len(self)) if positions is None else positions
        graph = Graph()
        for k in range(0, len(positions), BUILD_BATCH):
            batch = _graph_def(map(self._bytes, positions[k : k + BUILD_BATCH]))
            wire.import_graph_def(batch, graph, decode_tensors=False)
        return graph

    def place(self, graph_placer: placer.GraphPlacer, log: bool) -> None:
        """Places every node with ``graph_placer`` (its devices) and keeps where each went;
        prints TF's placement log if ``log``."""
        nodes = _PlacedOps()
        for i in range(len(self)):
            nodes.add(self.node(i))
        ops = nodes.ops
        del nodes
        try:
            placement = graph_placer.place(ops)
            if log:
                placer.print_log(placement.log_lines)
            devices = list(graph_placer.devices)
            index = {id(d): i for i, d in enumerate(devices)}
            self._device = array("H", [index[id(placement.device_of[op])] for op in ops])
            self._devices = devices
        finally:
            for op in ops:  # (each op and its outputs refer to each other: freed now, not
                op._outputs = ()  # at the next full garbage collection)

    def step_ops(
        self, fetches: Sequence[str], targets: Sequence[str], feeds: Sequence[str]
    ) -> tuple[Graph, dict]:
        """``(graph, {op: device})``: a new Graph of the nodes a step of this signature needs
        (what the fetches and targets depend on, cut at the fed tensors, plus the fed ops and
        what they depend on, so that every name resolves as in the whole graph), placed."""
        index = self.index()
        fed = {_tensor_name(f) for f in feeds}
        roots = [_op_name(n) for n in fetches if _tensor_name(n) not in fed]
        roots += [_op_name(n) for n in targets]
        chosen = self._closure(index, roots, fed)
        chosen |= self._closure(index, [_op_name(n) for n in feeds], ())
        positions = sorted(chosen)
        graph = self.build(positions)
        ops = graph.get_operations()
        return graph, {op: self._devices[self._device[i]] for op, i in zip(ops, positions)}

    def _closure(self, index, roots, fed):
        """The positions of ``roots`` and of what they depend on, not going past fed tensors."""
        chosen, stack = set(), [index[r] for r in roots if r in index]
        while stack:
            i = stack.pop()
            if i in chosen:
                continue
            chosen.add(i)
            for text in self.node(i).input:
                if text.startswith("^") or _tensor_name(text) not in fed:
                    stack.append(index[_op_name(text)])
        return chosen
