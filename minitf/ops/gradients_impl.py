"""``tf.gradients``: symbolic reverse-mode differentiation over a graph.

Book section: "Training" (every replica of the chapter's data-parallel training computes its
gradients with it).  The whole mechanism, as TF 1.15 does it:

1. find the ops *between* the xs and the ys (reachable forward from the xs and backward from
   the ys) and, for each, how many of its outputs' consumers lie between (its pending count);
2. seed each y with ``grad_ys`` (ones of y's shape by default);
3. process the ops in a queue, each once every consumer has handed its gradient back: sum the
   gradients of each of its outputs (``gradients/AddN``), call the op type's gradient function
   (registered with ``RegisterGradient``) inside name scope ``gradients/<op>_grad``, and hand
   the result to its inputs' producers;
4. answer, for each x, the summed gradient of its tensor (None if no path led there).
"""

from __future__ import annotations

import collections
import contextlib
from typing import Any

from minitf.framework import dtypes
from minitf.framework.graph import Operation, Tensor, convert_to_tensor, name_scope
from minitf.ops import (
    array_grad,
    array_ops,
    cond,
    control_flow_grad,
    control_flow_ops,
    math_grad,
    math_ops,
    nn_grad,
)
from minitf.ops.op_def import get_gradient_function, graph_of

del array_grad, control_flow_grad, math_grad, nn_grad  # imported for their RegisterGradient calls


class AggregationMethod:
    """How the gradients several consumers hand back to one tensor are summed."""

    ADD_N = 0  # one AddN (per device, then one over the devices)
    DEFAULT = ADD_N
    EXPERIMENTAL_TREE = 1  # pairwise sums
    EXPERIMENTAL_ACCUMULATE_N = 2  # minitf: summed pairwise too


class UnconnectedGradients:
    """What ``tf.gradients`` answers for an x no y depends on."""

    NONE = "none"
    ZERO = "zero"


def gradients(
    ys: Any,
    xs: Any,
    grad_ys: Any = None,
    name: str = "gradients",
    colocate_gradients_with_ops: bool = False,
    gate_gradients: bool = False,
    aggregation_method: int | None = None,
    stop_gradients: Any = None,
    unconnected_gradients: str = UnconnectedGradients.NONE,
) -> list[Tensor | None]:
    """The symbolic derivative of ``sum(ys)`` with respect to each of ``xs`` (None where no y
    depends on it).  A variable in ``xs`` stands for its reference tensor (``w:0``)."""
    ys, xs = _as_list(ys), _as_list(xs)
    stop_gradients = _as_list(stop_gradients) if stop_gradients is not None else []
    grad_ys = _as_list(grad_ys) if grad_ys is not None else [None] * len(ys)
    if len(grad_ys) != len(ys):
        raise ValueError("Passed %d grad_ys for %d ys" % (len(grad_ys), len(ys)))
    if aggregation_method not in (None, 0, 1, 2):
        raise ValueError("Invalid aggregation_method specified %s." % aggregation_method)
    ys = [convert_to_tensor(y, name="y") for y in ys]
    xs = [convert_to_tensor(x, name="x", as_ref=True) for x in xs]
    stop_gradients = [convert_to_tensor(t) for t in stop_gradients]
    g = graph_of(ys + xs)
    with g.as_default(), name_scope(name, "gradients", ys + xs + stop_gradients):
        grad_ys = _default_grad_ys(grad_ys, ys, colocate_gradients_with_ops)
        walk = _Walk(g, ys, xs, stop_gradients)
        options = (colocate_gradients_with_ops, gate_gradients, aggregation_method)
        grads = walk.run(ys, grad_ys, options)
    with g.as_default():  # an unconnected x's zeros are made outside the scope, as TF
        return [_result(grads, x, unconnected_gradients) for x in xs]


def _as_list(x):
    return list(x) if isinstance(x, (list, tuple)) else [x]


def _maybe_colocate_with(op, colocate):
    return op.graph.colocate_with(op) if colocate else contextlib.nullcontext()


def _default_grad_ys(grad_ys, ys, colocate):
    """Each y's starting gradient: ones of its shape (``gradients/Shape``, a ``Fill`` named
    ``gradients/grad_ys_i``), or the given one passed through an ``Identity`` of that name."""
    out = []
    for i, (grad_y, y) in enumerate(zip(grad_ys, ys)):
        with _maybe_colocate_with(y.op, colocate):
            if grad_y is None:
                if y.dtype.is_complex:
                    raise TypeError(
                        "Gradients of complex tensors must set grad_ys (y.dtype = %r)" % y.dtype
                    )
                shape = array_ops.shape(y)
                with name_scope("grad_ys_%d" % i) as scope:
                    one = array_ops.constant(1, dtype=y.dtype.base_dtype, name="Const")
                    out.append(array_ops.fill(shape, one, name=scope))
            else:
                grad_y = convert_to_tensor(grad_y, dtype=y.dtype.base_dtype)
                out.append(array_ops.identity(grad_y, name="grad_ys_%d" % i))
    return out


def _result(grads, x, unconnected):
    op_grads = grads.get(x.op)
    if op_grads is not None and op_grads[x.value_index] is not None:
        return op_grads[x.value_index]
    if unconnected == UnconnectedGradients.ZERO:
        return array_ops.zeros_like(x)
    if unconnected != UnconnectedGradients.NONE:
        raise ValueError("Unknown value for unconnected_gradients: %r" % (unconnected,))
    return None


class _Walk:
    """The ops between ``xs`` and ``ys`` and the order gradients flow back through them."""

    def __init__(self, graph, ys, xs, stop_gradients):
        self.consumers = collections.defaultdict(list)  # op -> ops that read its outputs
        for op in graph.get_operations():
            for t in op.inputs:
                self.consumers[t.op].append(op)
        self.to_ops = [y.op for y in ys]
        self.from_ops = [x.op for x in xs]
        reached = self._reached(self.from_ops)
        self.reachable_to_ops = {op for op in self.to_ops if op in reached}
        self.pending = self._between_and_pending(reached)
        self.stop_ops = self._stop_ops(stop_gradients)

    def _reached(self, from_ops):
        """The ops a gradient could reach forward from ``from_ops``: through outputs of a
        differentiable dtype only (an integer or bool result, such as a ``tf.cond``'s
        predicate, carries none)."""
        reached, stack = set(), list(from_ops)
        while stack:
            op = stack.pop()
            if op not in reached:
                reached.add(op)
                trainable = {t for t in op.outputs if _is_trainable(t)}
                if trainable:
                    stack.extend(
                        c for c in self.consumers[op] if any(t in trainable for t in c.inputs)
                    )
        return reached

    def _between_and_pending(self, reached):
        """The ops both reachable from the xs and leading to the ys, and per op how many input
        edges of those ops it feeds (it is ready when they all handed a gradient back)."""
        reached = set(reached)
        between, queue = [], collections.deque(self.to_ops)
        while queue:
            op = queue.popleft()
            if op in reached:
                between.append(op)
                reached.remove(op)
                queue.extend(t.op for t in op.inputs)
        self.between = set(between)
        pending = collections.Counter()
        for op in between:
            for t in op.inputs:
                if t.op in self.between:
                    pending[t.op] += 1
        return pending

    def _stop_ops(self, stop_gradients):
        """The xs' ops none of whose inputs come from between (nothing flows on from them),
        and the ops of ``stop_gradients``."""
        stop = {op for op in self.from_ops if all(self.pending[t.op] == 0 for t in op.inputs)}
        stop.update(t.op for t in stop_gradients)
        return stop

    def run(self, ys, grad_ys, options):
        """Hands the gradients back op by op, each once all its consumers between are done
        (a FIFO queue: the order TF builds them in, so AddN inputs come in TF's order)."""
        grads: dict[Operation, list] = {}
        for y, grad_y in zip(ys, grad_ys):
            _add_grad(grads, y, grad_y)
        queue, queued = collections.deque(), set()
        for op in self.to_ops:
            if self.pending[op] == 0 and op not in queued and op in self.reachable_to_ops:
                queued.add(op)
                queue.append(op)
        while queue:
            op = queue.popleft()
            with _maybe_colocate_with(op, options[0]):
                _backprop(op, grads, op in self.stop_ops, options)
            for t in op.inputs:
                self.pending[t.op] -= 1
                if self.pending[t.op] == 0 and t.op in self.between:
                    queue.append(t.op)
        return grads


def _add_grad(grads, t, grad):
    """Records one contribution to tensor ``t``'s gradient."""
    slots = grads.setdefault(t.op, [[] for _ in t.op.outputs])
    slots[t.value_index].append(grad)


def _backprop(op, grads, is_stop, options):
    """Sums ``op``'s output gradients, calls its gradient function inside ``<op>_grad`` and
    hands the input gradients to the producers of its inputs."""
    colocate, gate, aggregation = options
    out_grads = _aggregate(grads, op, aggregation)
    has_grads = any(g is not None for g in out_grads)
    grad_fn = get_gradient_function(op) if has_grads and not is_stop else None
    if grad_fn is None or not has_grads:
        return
    for i, g in enumerate(out_grads):
        if g is None and _is_trainable(op.outputs[i]):
            out_grads[i] = cond.zeros_like_outside_loop(op, i)
    with name_scope(op.name + "_grad"):
        in_grads = grad_fn(op, *out_grads)
        in_grads = list(in_grads) if isinstance(in_grads, (list, tuple)) else [in_grads]
        if len(in_grads) != len(op.inputs):
            raise ValueError(
                "Num gradients %d generated for op %s do not match num inputs %d"
                % (len(in_grads), op.node_def, len(op.inputs))
            )
        if gate and sum(g is not None for g in in_grads) > 1:
            with op.graph.device(None), op.graph.colocate_with(None, ignore_existing=True):
                in_grads = control_flow_ops.tuple_(in_grads)
    for i, (t_in, g) in enumerate(zip(op.inputs, in_grads)):
        if g is None:
            continue
        g = convert_to_tensor(g)
        if t_in.dtype.base_dtype != dtypes.resource:
            _check_shape(op, i, t_in, g)
        _add_grad(grads, t_in, g)


def _check_shape(op, i, t_in, g):
    try:
        g.set_shape(t_in.shape)
    except ValueError:
        raise ValueError(
            "Incompatible shapes between op input and calculated input gradient.  "
            "Forward operation: %s.  Input index: %d. Original input shape: %s.  "
            "Calculated input gradient shape: %s" % (op.name, i, t_in.shape, g.shape)
        ) from None


def _is_trainable(t):
    dt = t.dtype.base_dtype
    return dt.is_floating or dt.is_complex or dt == dtypes.resource


def _aggregate(grads, op, aggregation):
    """Each output's contributions summed into one tensor (None where there are none),
    stored back so an x's answer is the sum too."""
    slots = grads.get(op)
    if slots is None:
        return [None] * len(op.outputs)
    for i, parts in enumerate(slots):
        if not isinstance(parts, list):
            continue
        if len(parts) < 2:
            slots[i] = parts[0] if parts else None
        elif aggregation in (AggregationMethod.EXPERIMENTAL_TREE, 2):
            slots[i] = _tree_sum(parts, op, i)
        else:
            slots[i] = _multi_device_add_n(parts)
    return list(slots)


def _multi_device_add_n(parts):
    """One ``AddN`` per device the contributions are on (colocated with the first one there),
    then one over those (none when there is only one device)."""
    by_device = collections.defaultdict(list)
    for t in parts:
        by_device[t.device].append(t)
    summands = []
    for device in sorted(by_device):
        first = by_device[device][0]
        with first.graph.colocate_with(first.op, ignore_existing=True):
            summands.append(math_ops.add_n(by_device[device]))
    return math_ops.add_n(summands)


def _tree_sum(parts, op, i):
    """``AggregationMethod.EXPERIMENTAL_TREE``: running pairwise sums in ``<op>_gradient_sum``
    (each partial sum can be freed sooner than one AddN's inputs)."""
    with name_scope(op.name + "_gradient_sum"):
        total = parts[0]
        for t in parts[1:]:
            with t.graph.colocate_with(t.op, ignore_existing=True):
                total = math_ops.add_n([total, t])
        return total
