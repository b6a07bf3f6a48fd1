"""The graph one step runs: the ops its fetches need, and an ``_Arg`` node per fed tensor.

Book section: "Placing Operations on Devices" (a run only executes what its fetches need).  TF
rewrites the client's graph for each (fetches, targets, feeds) signature before splitting it
(``core/graph/subgraph.cc``); so does minitf, into a :class:`StepGraph` of :class:`Node`\\ s
(``step_graph.py``, re-exported here):

* pruning: only the ops the fetches and targets depend on, stopping at fed tensors;
* each fed tensor becomes an ``_Arg`` node (named ``_arg_<op>_<output>_<index>``) on the device the
  caller chooses (a local session: the client's CPU; the master: the device of the fed op), and
  its consumers read it instead.

When the session's ``ConfigProto`` turns on ``rewrite_options.dependency_optimization``, the
step graph then goes through that one pass of TF's graph optimizer (``dependency_optimizer.py``),
as TF runs Grappler on the pruned graph.  The partitioner (``graph_partition.py``) then splits
the step graph over devices or tasks, and the executor (``executor.py``) runs the pieces.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from minitf.framework.graph import Operation, Tensor
from minitf.ops.sendrecv_ops import ARG_OP
from minitf.runtime import dependency_optimizer
from minitf.runtime.config_proto import ConfigProto
from minitf.runtime.step_graph import Node, StepGraph

__all__ = ["Node", "StepGraph", "arg_node", "build_step_graph", "prune"]


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
    """The ``_Arg`` node that hands a step the value fed for ``tensor``, its ``index``-th feed
    (named ``_arg_<op>_<output>_<index>`` as TF names it, unless ``name`` is given: two
    signatures feeding one tensor at different places have two nodes, and two kernels)."""
    dtype = tensor.dtype.base_dtype
    if name is None:
        name = "_arg_%s_%d_%d" % (tensor.op.name, tensor.value_index, index)
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
        if arg_of:
            node.inputs = [source(t) for t in op._inputs]
        else:  # nothing fed (a big graph's first run, often): no feed to look for
            node.inputs = [(node_of[t._op], t._value_index) for t in op._inputs]
        if op._control_inputs:
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
