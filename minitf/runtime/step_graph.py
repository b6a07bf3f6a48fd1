"""The records of a step's graph: :class:`Node` (one node) and :class:`StepGraph` (one step).

Book section: "Placing Operations on Devices" (what a run executes).  ``subgraph.py`` builds a
step graph from the client's graph, ``dependency_optimizer.py`` may rewrite some of its nodes,
``graph_partition.py`` splits it over devices or tasks and ``executor.py`` runs the pieces.
"""

from __future__ import annotations

from typing import Any

from minitf.framework.graph import NodeDef, Operation


class Node:
    """One node of a step: an op of the user's graph (``op``), or one the runtime added
    (``_Arg``, ``_Send``, ``_Recv``: ``op`` is None).  ``device`` is a full device name,
    ``inputs`` the (node, output index) of each data input, ``outputs`` the (dtype, static shape)
    of each output.  Kernels read it like an Operation: ``name``, ``type``, ``get_attr``."""

    __slots__ = ("name", "type", "device", "op", "_attrs", "inputs", "control_inputs", "outputs")

    def __init__(
        self,
        name: str,
        op_type: str,
        device: str,
        attrs: dict,
        outputs: list,
        op: Operation | None = None,
    ):
        self.name = name
        self.type = op_type
        self.device = device
        self.op = op
        self._attrs = attrs
        self.outputs = outputs
        self.inputs: list[tuple[Node, int]] = []
        self.control_inputs: list[Node] = []

    @classmethod
    def of(cls, op: Operation, device_name: str) -> Node:
        """The node of a graph op placed on ``device_name`` (no edges yet)."""
        outputs = [(t._dtype, t._shape) for t in op._outputs]
        return cls(op._name, op._type, device_name, op._attrs, outputs, op)

    def copy(self) -> Node:
        """The same node without its edges."""
        return Node(self.name, self.type, self.device, self._attrs, self.outputs, self.op)

    def get_attr(self, name: str) -> Any:
        try:
            return self._attrs[name]
        except KeyError:
            raise ValueError("Node '%s' has no attr named '%s'." % (self.name, name)) from None

    @property
    def node_def(self) -> NodeDef:
        """The node as TF's NodeDef record (its inputs as ``name``, ``name:k`` and ``^name``)."""
        inputs = [src.name if k == 0 else "%s:%d" % (src.name, k) for src, k in self.inputs]
        inputs += ["^" + c.name for c in self.control_inputs]
        return NodeDef(self.name, self.type, inputs, self.device, dict(self._attrs))

    def __repr__(self):
        return "<Node %s (%s) on %s>" % (self.name, self.type, self.device)


class StepGraph:
    """The nodes of one step (graph order, then the ``_Arg`` nodes in feed order), where each
    fetched tensor comes from, and the target nodes."""

    __slots__ = ("nodes", "fetches", "args", "targets")

    def __init__(
        self,
        nodes: list[Node],
        fetches: list[tuple[Node, int]],
        args: list[Node],
        targets: list[Node],
    ):
        self.nodes = nodes
        self.fetches = fetches
        self.args = args
        self.targets = targets
