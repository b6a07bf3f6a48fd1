"""The graph one step runs: the ops its fetches need, and an ``_Arg`` node per fed tensor.

Book section: "Placing Operations on Devices" (a run only executes what its fetches need).  TF
rewrites the client's graph for each (fetches, targets, feeds) signature before splitting it
(``core/graph/subgraph.cc``); so does minitf, into a :class:`StepGraph` of :class:`Node`\\ s:

* pruning: only the ops the fetches and targets depend on, stopping at fed tensors;
* each fed tensor becomes an ``_Arg`` node (named ``_arg_<op>_<output>``) on the device the
  caller chooses (a local session: the client's CPU; the master: the device of the fed op), and
  its consumers read it instead.

When the session's ``ConfigProto`` turns on ``rewrite_options.dependency_optimization``, the
step graph then goes through that one pass of TF's graph optimizer (``dependency_optimizer.py``),
as TF runs Grappler on the pruned graph.  The partitioner (``graph_partition.py``) then splits the step graph over devices or tasks, and
the executor (``executor.py``) runs the pieces.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from minitf.framework.graph import NodeDef, Operation, Tensor
from minitf.ops.sendrecv_ops import ARG_OP
from minitf.runtime import dependency_optimizer
from minitf.runtime.config_proto import ConfigProto


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
        return cls(
            op.name, op.type, device_name, op._attrs, [(t.dtype, t.shape) for t in op._outputs], op
        )

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


def prune(fetch_ops: Iterable[Operation], feed_tensors: Iterable[Tensor] | dict) -> set:
    """The ops a run needs: everything the fetch/target ops depend on, cut at fed tensors."""
    needed = set()
    stack = list(fetch_ops)
    while stack:
        op = stack.pop()
        if op in needed:
            continue
        needed.add(op)
        for t in op._inputs:
            if t not in feed_tensors:
                stack.append(t.op)
        stack.extend(op._control_inputs)
    return needed


def arg_node(tensor: Tensor, index: int, device: str, name: str | None = None) -> Node:
    """The ``_Arg`` node that hands a step the value fed for ``tensor`` (named
    ``_arg_<op>_<output>`` unless ``name`` is given)."""
    dtype = tensor.dtype.base_dtype
    if name is None:
        name = "_arg_%s_%d" % (tensor.op.name, tensor.value_index)
    return Node(
        name,
        ARG_OP,
        device,
        {"T": dtype, "index": index, "tensor_name": tensor.name},
        [(dtype, tensor.shape)],
    )


def build_step_graph(
    ops: Sequence[Operation],
    device_of: dict,
    fetch_tensors: Sequence[Tensor],
    target_ops: Sequence[Operation],
    feed_tensors: Sequence[Tensor],
    feed_device: Callable[[Tensor], str],
    arg_name: Callable[[Tensor], str] | None = None,
    config: ConfigProto | None = None,
) -> StepGraph:
    """The :class:`StepGraph` of one signature over the placed ``ops`` (graph order);
    ``device_of[op]`` is the op's Device, ``feed_device(t)`` names the device of fed ``t``'s
    ``_Arg`` node (and ``arg_name(t)`` its name, if given); ``config``: the session's
    ConfigProto, whose rewrite options may ask for the dependency optimizer."""
    feed_index = {t: j for j, t in enumerate(feed_tensors)}
    needed = prune(
        [t.op for t in fetch_tensors if t not in feed_index] + list(target_ops), feed_index
    )
    node_of = {op: Node.of(op, device_of[op].name) for op in ops if op in needed}
    args = [
        arg_node(t, j, feed_device(t), arg_name(t) if arg_name else None)
        for t, j in feed_index.items()
    ]
    arg_of = dict(zip(feed_index, args))

    def source(t):
        a = arg_of.get(t)
        return (a, 0) if a is not None else (node_of[t.op], t._value_index)

    for op, node in node_of.items():
        node.inputs = [source(t) for t in op._inputs]
        node.control_inputs = [node_of[c] for c in op._control_inputs]
    step = StepGraph(
        list(node_of.values()) + args,
        [source(t) for t in fetch_tensors],
        args,
        [node_of[op] for op in target_ops],
    )
    if dependency_optimizer.enabled(config):
        dependency_optimizer.optimize(step, {t.op.name for t in feed_index})
    return step
