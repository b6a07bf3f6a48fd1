"""``tf.cond``: TF1's graph-level conditional, built from ``Switch`` and ``Merge``.

Book section: none directly; chapter 11's dropout and batch normalization switch on a
``training`` placeholder with it, and a learner brings that code to the cluster.  As TF 1.15
builds it (``control_flow_ops.cond``):

1. ``cond/Switch`` splits the predicate into ``switch_t`` and ``switch_f`` (the *pivots*), and
   ``pred_id`` is the predicate every other ``Switch`` of the cond reads;
2. each branch function runs inside a :class:`CondContext`: an op it creates that reads a
   tensor from outside the branch reads it through a ``Switch`` (``cond/<op>/Switch``, on the
   tensor's device) instead; an op without inputs (a constant) waits on the branch's pivot;
3. a ``Merge`` per result (``cond/Merge``) hands on the result of the branch that ran.

At run time the ``Switch`` outputs of the branch not taken are dead, so nothing of that branch
runs (``runtime/deadness.py``).  Ops inside a branch cannot be fetched, as in TF.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from minitf.framework import dtypes, tensor_shape
from minitf.framework.dead_tensor import SWITCH_OPS
from minitf.framework.graph import (
    GraphKeys,
    Operation,
    Tensor,
    convert_to_tensor,
    name_scope,
)
from minitf.lib.nest import flatten as _flatten
from minitf.lib.nest import is_sequence as _is_sequence
from minitf.lib.nest import pack_sequence_as as _pack
from minitf.ops import array_ops
from minitf.ops.control_flow_ops import with_dependencies
from minitf.ops.op_def import apply_op, register_op, shape_error

register_op("Switch")
register_op("RefSwitch", ref_inputs=(True,))
register_op("Merge")


# -- the two ops ------------------------------------------------------------------------------


def _switch_op(data: Tensor, pred: Tensor, name: str) -> tuple[Tensor, Tensor]:
    op_type = "RefSwitch" if data.dtype.is_ref_dtype else "Switch"
    if pred.dtype.base_dtype != dtypes.bool:
        raise TypeError(
            "Input 'pred' of '%s' Op has type %s that does not match expected type of bool."
            % (op_type, pred.dtype.base_dtype.name)
        )
    if pred.shape.ndims not in (None, 0):
        raise shape_error(
            op_type, name, [data, pred], "Shape must be rank 0 but is rank %d" % pred.shape.ndims
        )
    out = data.dtype if op_type == "RefSwitch" else data.dtype.base_dtype
    attrs = {"T": data.dtype.base_dtype}
    op = apply_op(op_type, [data, pred], [(out, data.shape)] * 2, name, attrs)
    return op.outputs[0], op.outputs[1]


def switch(data: Any, pred: Any, dtype: Any = None, name: str | None = None):
    """``(output_false, output_true)``: ``data`` on the side ``pred`` picks, dead on the other.
    ``data`` is read (a variable's reference gives its value)."""
    with name_scope(name, "Switch", [data, pred]) as scope:
        data = convert_to_tensor(data, dtype=dtype, name="data")
        pred = convert_to_tensor(pred, name="pred")
        return _switch_op(data, pred, scope)


def ref_switch(data: Tensor, pred: Any, name: str | None = None):
    """``switch`` of a variable's reference (``RefSwitch``): both outputs are references."""
    with name_scope(name, "RefSwitch", [data, pred]) as scope:
        return _switch_op(data, convert_to_tensor(pred, name="pred"), scope)


def switch_ref_or_tensor(data: Any, pred: Any, name: str = "Switch"):
    """The ``Switch`` of a value a branch reads, on the value's device (TF's
    ``_SwitchRefOrTensor``): a ``RefSwitch`` for a variable's reference."""
    data = convert_to_tensor(data, name="data", as_ref=True)
    g = data.graph
    with g.colocate_with(data.op, ignore_existing=True):
        if data.dtype.is_ref_dtype:
            return ref_switch(data, pred, name=name)
        return switch(data, pred, name=name)


def _merged_shape(shapes: list[tensor_shape.TensorShape]) -> tensor_shape.TensorShape:
    """TF's ``Merge`` shape: the dimensions all inputs agree on (unknown where they differ)."""
    first = shapes[0]
    if any(s.ndims is None or s.ndims != first.ndims for s in shapes):
        return tensor_shape.unknown_shape()
    dims = first.as_list()
    for s in shapes[1:]:
        dims = [a if a == b else None for a, b in zip(dims, s.as_list())]
    return tensor_shape.TensorShape(dims)


def merge(inputs: list, name: str | None = None) -> tuple[Tensor, Tensor]:
    """``(output, value_index)``: the one input that is alive, and its index."""
    if any(i is None for i in inputs):
        raise ValueError("At least one of the merge inputs is None: %s" % (inputs,))
    with name_scope(name, "Merge", inputs) as scope:
        inputs = [convert_to_tensor(t) for t in inputs]
        dt = inputs[0].dtype.base_dtype
        for t in inputs[1:]:
            if t.dtype.base_dtype != dt:
                raise TypeError(
                    "Inputs to Merge must all have the same type: %s, %s"
                    % (dt.name, t.dtype.base_dtype.name)
                )
        specs = [(dt, _merged_shape([t.shape for t in inputs])), (dtypes.int32, ())]
        attrs = {"T": dt, "N": len(inputs)}
        op = apply_op(
            "Merge", inputs, [(d, tensor_shape.as_shape(s)) for d, s in specs], scope, attrs
        )
        return op.outputs[0], op.outputs[1]


# -- the branch context -----------------------------------------------------------------------


def _in_context(op: Operation, ctx: CondContext) -> bool:
    """Whether ``op`` was built in ``ctx`` or in a branch nested inside it."""
    c = op._get_control_flow_context()
    while c is not None:
        if c is ctx:
            return True
        c = c.outer_context
    return False


class CondContext:
    """One branch of a ``tf.cond`` while it is built: which tensors it has seen (its own and
    the ``Switch`` outputs standing for outside ones) and the pivot its constants wait on."""

    def __init__(self, pred: Tensor, pivot: Tensor, branch: int):
        self._pred, self._pivot, self._branch = pred, pivot, branch
        self._outer_context = pred.graph._get_control_flow_context()
        self._values = {pred.name, pivot.name}  # tensor names usable inside the branch
        self._external_values = {pred.name: pred}  # outside name -> the tensor that stands in
        self._saved: list = []
        pivot.op._set_control_flow_context(self)

    pred = property(lambda self: self._pred)
    pivot = property(lambda self: self._pivot)
    branch = property(lambda self: self._branch)
    outer_context = property(lambda self: self._outer_context)

    def enter(self) -> None:
        g = self._pred.graph
        self._saved.append(g._get_control_flow_context())
        g._set_control_flow_context(self)

    def exit(self) -> None:
        self._pred.graph._set_control_flow_context(self._saved.pop())

    def add_value(self, val: Tensor) -> Tensor:
        """The tensor that stands for ``val`` inside the branch: ``val`` itself if the branch
        made it, else its ``Switch`` output on this branch's side (made once per tensor)."""
        if val.name in self._values:
            return self._external_values.get(val.name, val)
        outer = self._outer_stand_in(val)
        with val.graph.control_dependencies(None):  # (which leaves every branch context)
            result = switch_ref_or_tensor(outer, self._pred)[self._branch]
        result.op._set_control_flow_context(self)
        val.graph.prevent_fetching(result.op)
        self._mark_seen([result.name])
        self._external_values[val.name] = result
        return result

    def _outer_stand_in(self, val: Tensor) -> Tensor:
        """``val`` as the enclosing branch (if any) sees it, to be switched into this one."""
        self._values.add(val.name)
        if self._outer_context is None:
            return val
        outer = self._outer_context.add_value(val)
        self._values.add(outer.name)
        self._external_values[outer.name] = outer
        return outer

    def _mark_seen(self, names) -> None:
        """Tensors this branch (and every branch around it) may use as they are."""
        ctx = self
        while ctx is not None:
            ctx._values.update(names)
            ctx = ctx._outer_context

    def add_op(self, op: Operation) -> None:
        """Called for every op created while this branch is built (``Graph._create_op``)."""
        op._set_control_flow_context(self)
        if not op.inputs:
            if not any(_in_context(c, self) for c in op.control_inputs):
                op._add_control_input(self._pivot.op)
        else:
            with op.graph.name_scope(op.name + "/"):  # its Switches are <op>/Switch
                for index, x in enumerate(op.inputs):
                    real_x = self.add_value(x)
                    if real_x is not x:
                        op._update_input(index, real_x)
        self._mark_seen([t.name for t in op.outputs])
        op.graph.prevent_fetching(op)

    def build_branch(self, fn: Callable[[], Any]) -> tuple[Any, list | None]:
        """Runs ``fn`` inside the branch: ``(what it returned, its tensors as the branch's
        results)``."""
        original = fn()
        if original is None:
            return None, None
        result = [self._result_tensor(v) for v in _flatten(original)]
        return original, result

    def _result_tensor(self, v: Any) -> Tensor:
        if isinstance(v, Operation):  # an op: the pivot, once it ran
            return with_dependencies([v], self._pivot)
        val = convert_to_tensor(v)
        if val.name not in self._values:  # a tensor from outside (``lambda: x``): its Switch,
            # made inside the branch (as TF: ``cond/Switch_1``)
            real = switch_ref_or_tensor(self._outer_stand_in(val), self._pred)[self._branch]
            self._external_values[val.name] = real
            return real
        return self._external_values.get(val.name, val)


def output_context(op: Operation) -> CondContext | None:
    """The branch ``op``'s outputs belong to (TF's ``GetOutputContext``)."""
    return op._get_control_flow_context()


# -- nested results (TF's nest, for lists, tuples, namedtuples and dicts) ----------------------


def _structure_text(x: Any) -> str:
    return "type=%s str=%s" % (type(x).__name__, x)


def _first_difference(a: Any, b: Any) -> str | None:
    """Where two nested results first differ in structure (None if they agree)."""
    if _is_sequence(a) != _is_sequence(b):
        seq, other = (a, b) if _is_sequence(a) else (b, a)
        return 'Substructure "%s" is a sequence, while substructure "%s" is not' % (
            _structure_text(seq),
            _structure_text(other),
        )
    if not _is_sequence(a):
        return None
    if type(a) is not type(b) and not (isinstance(a, list) and isinstance(b, list)):
        return (
            "The two namedtuples don't have the same sequence type. First structure %s has "
            "type %s, while second structure %s has type %s"
            % (_structure_text(a), type(a).__name__, _structure_text(b), type(b).__name__)
        )
    ka = sorted(a) if isinstance(a, dict) else range(len(a))
    kb = sorted(b) if isinstance(b, dict) else range(len(b))
    if list(ka) != list(kb):
        return (
            "The two structures don't have the same sequence length. Input structure has "
            "length %d, while shallow structure has length %d." % (len(a), len(b))
        )
    for k in ka:
        diff = _first_difference(a[k], b[k])
        if diff is not None:
            return diff
    return None


def _check_same_structure(res_t: Any, res_f: Any) -> None:
    diff = _first_difference(res_t, res_f)
    if diff is not None:
        raise ValueError(
            "Incompatible return values of true_fn and false_fn: The two structures don't have "
            "the same nested structure.\n\nFirst structure: %s\n\nSecond structure: %s\n\n"
            "More specifically: %s" % (_structure_text(res_t), _structure_text(res_f), diff)
        )


def _unpack_if_singleton(res: Any) -> Any:
    if isinstance(res, (list, tuple)) and len(res) == 1:
        return res[0]
    return res


# -- tf.cond ----------------------------------------------------------------------------------


def _branch_fns(true_fn, false_fn, fn1, fn2):
    """The two branch functions, from TF 1.15's arguments or their deprecated names."""
    if fn1 is not None:
        if true_fn is not None:
            raise TypeError("cond(): true_fn and fn1 may not be set simultaneously.")
        true_fn = fn1
    if fn2 is not None:
        if false_fn is not None:
            raise TypeError("cond(): false_fn and fn2 may not be set simultaneously.")
        false_fn = fn2
    if not callable(true_fn):
        raise TypeError("true_fn must be callable.")
    if not callable(false_fn):
        raise TypeError("false_fn must be callable.")
    return true_fn, false_fn


def _build(ctx: CondContext, fn: Callable[[], Any], which: str) -> tuple[Any, list]:
    ctx.enter()
    try:
        original, result = ctx.build_branch(fn)
    finally:
        ctx.exit()
    if original is None:
        raise ValueError("%s must have a return value." % which)
    return original, result


def cond(
    pred: Any,
    true_fn: Callable[[], Any] | None = None,
    false_fn: Callable[[], Any] | None = None,
    strict: bool = False,
    name: str | None = None,
    fn1: Callable[[], Any] | None = None,
    fn2: Callable[[], Any] | None = None,
) -> Any:
    """``true_fn()`` if the scalar bool ``pred`` is true when the graph runs, else
    ``false_fn()``; only the ops of the branch taken run.  Both functions must return the same
    structure of tensors (of the same dtypes); a single result comes back as itself unless
    ``strict``."""
    true_fn, false_fn = _branch_fns(true_fn, false_fn, fn1, fn2)
    with name_scope(name, "cond", [pred]):
        if isinstance(pred, bool):
            raise TypeError("pred must not be a Python bool")
        p_2, p_1 = switch(pred, pred)
        pivot_1 = array_ops.identity(p_1, name="switch_t")
        pivot_2 = array_ops.identity(p_2, name="switch_f")
        pred = array_ops.identity(pred, name="pred_id")
        g = pred.graph
        for t in (p_1, p_2, pivot_1, pivot_2, pred):
            g.prevent_fetching(t.op)
        context_t = CondContext(pred, pivot_1, branch=1)
        orig_t, res_t = _build(context_t, true_fn, "true_fn")
        context_f = CondContext(pred, pivot_2, branch=0)
        orig_f, res_f = _build(context_f, false_fn, "false_fn")
        if not strict:
            orig_t, orig_f = _unpack_if_singleton(orig_t), _unpack_if_singleton(orig_f)
        _check_same_structure(orig_t, orig_f)
        if not res_t:
            raise ValueError("true_fn and false_fn must return at least one result.")
        for x, y in zip(res_t, res_f):
            if x.dtype.base_dtype != y.dtype.base_dtype:
                raise ValueError(
                    "Outputs of true_fn and false_fn must have the same type: %s, %s"
                    % (x.dtype.base_dtype.name, y.dtype.base_dtype.name)
                )
        merges = [merge([f, t])[0] for f, t in zip(res_f, res_t)]
        if context_t.outer_context is None:
            g.add_to_collection(GraphKeys.COND_CONTEXT, context_t)
            g.add_to_collection(GraphKeys.COND_CONTEXT, context_f)
        if not _is_sequence(orig_t):
            return merges[0]
        return _pack(orig_t, merges)


def smart_cond(pred: Any, true_fn: Callable, false_fn: Callable, name: str | None = None) -> Any:
    """``tf.cond`` when ``pred`` is a tensor whose value is only known at run time; otherwise
    (a Python bool, or a constant) just the branch it picks (TF's ``smart_cond``)."""
    if isinstance(pred, Tensor):
        value = array_ops._static_value(pred)
        if value is None:
            return cond(pred, true_fn=true_fn, false_fn=false_fn, name=name)
        pred = bool(value)
    elif pred not in (0, 1) or not isinstance(pred, (bool, int)):
        raise TypeError(
            "`pred` must be a Tensor, or a Python bool, or 1 or 0. Found instead: %s" % type(pred)
        )
    return true_fn() if pred else false_fn()


def zeros_like_outside_loop(op: Operation, index: int) -> Tensor:
    """Zeros standing for the gradient of output ``index`` of ``op`` that nothing flowed back
    to.  For a branch's ``Switch`` they are made on the side not taken by the branch (a
    ``Switch`` of its input, its ``Shape``, a ``Fill`` waiting on it), so that they exist
    exactly when that branch's gradient does not (TF's ``ZerosLikeOutsideLoop``)."""
    val = op.outputs[index]
    ctx = op._get_control_flow_context() if op.type in SWITCH_OPS else None
    if ctx is None:
        return array_ops.zeros_like(val, optimize=False)
    switch_val = switch(op.inputs[0], ctx.pred)[1 - ctx.branch]
    pivot = array_ops.identity(switch_val)
    zeros_shape = array_ops.shape_internal(switch_val, optimize=False)
    with op.graph.control_dependencies([pivot]):
        return array_ops.zeros(zeros_shape, dtype=val.dtype.base_dtype)
