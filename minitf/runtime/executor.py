"""Turning a placed graph into runnable steps, and the serial executor that runs them.

Book sections: "Placing Operations on Devices" (a run only executes what its fetches need) and
"Parallel Execution" (the dependency-counting :class:`~minitf.runtime.scheduler.Step`).

:func:`build` prunes the graph to the ops a run needs, instantiates one kernel per op on its
assigned device, and adds a feed node per fed tensor.  :func:`run_serial` drives the scheduler
on the calling thread.
"""

from minitf.framework import errors
from minitf.kernels import registry
from minitf.ops.op_def import get_op_def
from minitf.runtime.placer import attach_node
from minitf.runtime.scheduler import Plan, Step


class StepContext:
    """What kernels may read during one step (the fed values, for feed nodes)."""

    __slots__ = ("feeds",)

    def __init__(self, feeds):
        self.feeds = feeds


class ExecutionPlan:
    """A plan plus its kernels: ``kernels[i](ctx, inputs)`` computes node ``i``."""

    def __init__(self, plan, kernels, names, ops, fetch_slots):
        self.plan = plan
        self.kernels = kernels
        self.names = names    # node name per index (feed nodes: "_arg_<tensor>")
        self.ops = ops        # Operation per index (None for feed nodes)
        self.fetch_slots = fetch_slots  # (node, output index) per fetched tensor


def prune(fetch_ops, feed_tensors):
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


def _deref_inputs(kernel, positions):
    """Wraps a kernel whose inputs at ``positions`` are variable references it must read."""
    def compute(ctx, ins):
        for p in positions:
            ins[p] = ins[p].read()
        return kernel(ctx, ins)
    return compute


def _feed_kernel(j):
    return lambda ctx, ins: (ctx.feeds[j],)


def build(graph_ops, placement, client_device, fetch_tensors, target_ops, feed_tensors,
          kernel_cache):
    """Builds the :class:`ExecutionPlan` of one (fetches, targets, feeds) signature.

    ``kernel_cache`` maps an op to its kernel, so each op's kernel (and the state it holds,
    e.g. a variable's storage) is made once per session.
    """
    feed_index = {t: j for j, t in enumerate(feed_tensors)}
    fetch_ops = [t.op for t in fetch_tensors if t not in feed_index] + list(target_ops)
    needed = prune(fetch_ops, feed_index)
    ops = [op for op in graph_ops if op in needed]
    index = {op: i for i, op in enumerate(ops)}
    n = len(ops)
    feed_node = {}
    for t, j in feed_index.items():
        feed_node[t] = n + j
    inputs, controls, devices, kernels, names = [], [], [], [], []
    for op in ops:
        device = placement.device_of[op]
        kdef = registry.find_kernel(op, device.device_type)
        kernel = kernel_cache.get(op)
        if kernel is None:
            kernel = kernel_cache[op] = kdef.factory(op, device)
        refs = get_op_def(op.type).ref_inputs
        edges, deref = [], []
        for pos, t in enumerate(op._inputs):
            if t in feed_node:
                edges.append((feed_node[t], 0))
            else:
                edges.append((index[t.op], t._value_index))
                if t.dtype.is_ref_dtype and not (pos < len(refs) and refs[pos]):
                    deref.append(pos)
        if deref:
            kernel = _deref_inputs(kernel, deref)
        inputs.append(edges)
        controls.append([index[c] for c in op._control_inputs])
        devices.append(device.name)
        kernels.append(kernel)
        names.append(op.name)
    for t, j in feed_index.items():
        inputs.append([])
        controls.append([])
        devices.append(client_device)
        kernels.append(_feed_kernel(j))
        names.append("_arg_%s_%d" % (t.op.name, t.value_index))
    fetch_slots = [(feed_node[t], 0) if t in feed_node else (index[t.op], t._value_index)
                   for t in fetch_tensors]
    return ExecutionPlan(Plan(inputs, controls, devices), kernels, names,
                         ops + [None] * len(feed_index), fetch_slots)


def node_error(exc, eplan, i):
    """Re-raises a kernel failure as TF does: same class, the node named in ``[[...]]``."""
    name = eplan.names[i]
    op = eplan.ops[i]
    if isinstance(exc, errors.OpError):
        cls, msg = type(exc), exc.message
    elif isinstance(exc, (ValueError, TypeError, ArithmeticError, IndexError)):
        cls, msg = errors.InvalidArgumentError, "%s: %s" % (type(exc).__name__, exc)
    else:
        cls, msg = errors.InternalError, "%s: %s" % (type(exc).__name__, exc)
    if "[[" not in msg:
        msg = attach_node(msg, name)
    return cls(op.node_def if op is not None else None, op, msg)


def run_serial(eplan, feeds):
    """Runs one step on the calling thread; returns the list of every node's outputs."""
    ctx = StepContext(feeds)
    plan = eplan.plan
    vals = [None] * plan.n
    kernels = eplan.kernels
    inputs = plan.inputs
    current = [0]

    def execute(i):
        current[0] = i
        vals[i] = kernels[i](ctx, [vals[s][k] for s, k in inputs[i]])

    try:
        Step(plan).run_inline(execute)
    except Exception as e:  # noqa: BLE001 - every kernel failure becomes a TF error
        raise node_error(e, eplan, current[0]) from (None if isinstance(e, errors.OpError)
                                                     else e)
    return vals
