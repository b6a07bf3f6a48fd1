"""One rule of TF's graph optimizer (Grappler): a node whose outputs nobody reads runs as a NoOp.

Book section: "Parallel Execution" and "Control Dependencies" (which nodes a step evaluates).
TF hands each step's pruned graph to Grappler before splitting it over devices; by default its
dependency optimizer turns a stateless node whose outputs feed only control edges into a
``NoOp``: the node keeps its name, device and place in the graph (its control consumers still
wait for it), its data inputs become control inputs, and nothing is computed.  That can cascade:
once a node is a NoOp, its inputs may in turn feed only control edges.

The example that matters: ``GradientDescentOptimizer.minimize`` with ``GATE_OP`` groups each
op's input gradients with ``tf.tuple``, which makes every gradient a control input of the gate;
the first layer's gradient with respect to the fed input ``x`` is read by nothing else, so with
the rule on it is never computed.

A node is converted only when it is free of side effects and TF would not keep it: not stateful
(variables, ``Assign*``, random ops, queues, ``Assert``, ...), no reference inputs, no
``Placeholder``, no op with "Queue" in its type, not ``CheckNumerics``/``_Arg``/control-flow,
not an ``Identity`` that reads a variable or a ``_Recv``, no op without outputs, and never a
fetched, fed or target node.

minitf runs this pass only when the session's ``ConfigProto`` asks for it with
``graph_options.rewrite_options.dependency_optimization = RewriterConfig.ON`` (or
``AGGRESSIVE``) and ``disable_meta_optimizer`` is not set; DEFAULT and OFF leave the graph as
written (TF's DEFAULT would run it: see docs/design.md).  Both the local session and the master
of a cluster reach it through ``subgraph.build_step_graph``.
"""

from __future__ import annotations

from minitf.ops.op_def import get_op_def
from minitf.runtime.config_proto import ConfigProto, RewriterConfig
from minitf.runtime.step_graph import Node, StepGraph

#: ops TF's dependency optimizer never rewrites, whatever their outputs feed
_KEEP = frozenset(
    {
        "Assert",
        "CheckNumerics",
        "Const",  # TF's optimizer treats constants by another rule (not in minitf)
        "ControlTrigger",
        "Placeholder",
        "PlaceholderWithDefault",
        "NoOp",
        "_Arg",
        "_Retval",
        "_Send",
        "_Recv",
        "Switch",
        "RefSwitch",
        "Merge",
        "RefMerge",
        "Enter",
        "RefEnter",
        "Exit",
        "RefExit",
        "NextIteration",
        "RefNextIteration",
        "InplaceUpdate",
        "InplaceAdd",
        "InplaceSub",
        "_ParallelConcatUpdate",
    }
)
_VARIABLES = frozenset({"Variable", "VariableV2", "VarHandleOp", "ReadVariableOp", "_Recv"})


def enabled(config: ConfigProto | None) -> bool:
    """Whether ``config`` turns the pass on (ON or AGGRESSIVE, meta optimizer not disabled)."""
    if config is None:
        return False
    rewrite = config.graph_options.rewrite_options
    return not rewrite.disable_meta_optimizer and rewrite.dependency_optimization in (
        RewriterConfig.ON,
        RewriterConfig.AGGRESSIVE,
    )


def _free_of_side_effects(node: Node) -> bool:
    """TF's ``IsFreeOfSideEffect`` for a node of a step graph."""
    if node.type in _KEEP or "Queue" in node.type:
        return False
    try:
        op_def = get_op_def(node.type)
    except KeyError:  # TF leaves an op it cannot look up alone
        return False
    return not op_def.is_stateful and not any(op_def.ref_inputs)


def _convertible(node: Node, preserved: set) -> bool:
    if node.name in preserved or not node.outputs or not _free_of_side_effects(node):
        return False
    if any(src.type in ("Switch", "RefSwitch") for src, _ in node.inputs):
        return False  # TF anchors such an edge with a new Identity; minitf keeps the node
    if node.type in ("Identity", "IdentityN") and node.inputs:
        return node.inputs[0][0].type not in _VARIABLES
    return True


def _to_noop(node: Node) -> None:
    """``node`` runs as a NoOp: same name and device, its data inputs now control inputs."""
    controls = list(node.control_inputs)
    for src, _ in node.inputs:
        if src not in controls:
            controls.append(src)
    node.control_inputs = controls
    node.inputs = []
    node.type = "NoOp"
    node._attrs = {}
    node.outputs = []


def optimize(step: StepGraph, fed_ops: set) -> list[Node]:
    """Converts, in place, every node of ``step`` whose outputs feed only control edges into a
    NoOp, following the cascade; ``fed_ops`` names the fed ops (kept, as the fetched and target
    nodes are).  Returns the converted nodes."""
    preserved = set(fed_ops)
    preserved.update(n.name for n, _ in step.fetches)
    preserved.update(n.name for n in step.targets)
    readers = {n: 0 for n in step.nodes}
    for n in step.nodes:
        for src, _ in n.inputs:
            readers[src] += 1
    for n, _ in step.fetches:
        readers[n] += 1
    converted = []
    work = list(step.nodes)
    while work:
        node = work.pop()
        if node.type == "NoOp" or readers[node] or not _convertible(node, preserved):
            continue
        sources = [src for src, _ in node.inputs]
        _to_noop(node)
        converted.append(node)
        for src in sources:
            readers[src] -= 1
            work.append(src)
    return converted
