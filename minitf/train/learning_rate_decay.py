"""``tf.train.exponential_decay`` and ``tf.train.piecewise_constant``: learning rates that
change with the global step.

Book section: "Distributing TensorFlow" (training loops driven by the shared global step).
TF 1.15's ``python/training/learning_rate_decay.py`` (through ``ExponentialDecay``):
``learning_rate * decay_rate ** (global_step / decay_steps)``, the exponent floored when
``staircase``.  Ops, in name scope ``name`` or ``ExponentialDecay``: ``initial_learning_rate``,
``Cast`` (decay_steps), ``Cast_1`` (decay_rate), ``Cast_2`` (the step), ``truediv``,
[``Floor``,] ``Pow``, and the result, a ``Mul`` named like the scope.  ``piecewise_constant``:
``values[i]`` between ``boundaries[i-1]`` (excluded) and ``boundaries[i]``, a ``tf.case`` in
scope ``PiecewiseConstant`` (the boundaries and values converted, and cast to the step's
int64, before it, as TF's v1 wrapper does).
"""

from __future__ import annotations

from typing import Any

from minitf.framework import dtypes
from minitf.framework.graph import Tensor, convert_to_tensor, name_scope
from minitf.ops import math_ops
from minitf.ops.case import case


def _cast(x, dtype):
    """TF's ``math_ops.cast``: a ``Cast`` scope (its constant ``Cast/x``) unless ``x`` is a
    tensor of ``dtype`` already; no op when the value already has ``dtype``."""
    if isinstance(x, Tensor) and x.dtype.base_dtype == dtype:
        return x
    with name_scope(None, "Cast", [x]) as scope:
        x = convert_to_tensor(x, name="x")
        if x.dtype.base_dtype == dtype:
            return x
        return math_ops.cast(x, dtype, name=scope)


def exponential_decay(
    learning_rate: Any,
    global_step: Any,
    decay_steps: Any,
    decay_rate: Any,
    staircase: bool = False,
    name: str | None = None,
) -> Tensor:
    """``learning_rate * decay_rate ** (global_step / decay_steps)`` (floored exponent when
    ``staircase``), a tensor recomputed from the global step at every run."""
    if global_step is None:
        raise ValueError("global_step is required for exponential_decay.")
    with name_scope(name or "ExponentialDecay") as scope:
        lr = convert_to_tensor(learning_rate, name="initial_learning_rate")
        dtype = lr.dtype.base_dtype
        steps = _cast(decay_steps, dtype)
        rate = _cast(decay_rate, dtype)
        p = math_ops.truediv(_cast(global_step, dtype), steps)
        if staircase:
            p = math_ops.floor(p)
        return math_ops.multiply(lr, math_ops.pow(rate, p), name=scope)


def piecewise_constant(x: Any, boundaries: list, values: list, name: str | None = None) -> Tensor:
    """``values[0]`` while ``x <= boundaries[0]``, ``values[i]`` while ``boundaries[i-1] < x <=
    boundaries[i]``, ``values[-1]`` past the last boundary."""
    if len(boundaries) != len(values) - 1:
        raise ValueError("The length of boundaries should be 1 less than the length of values")
    bounds = [convert_to_tensor(b) for b in boundaries]
    vals = [convert_to_tensor(v) for v in values]
    x = convert_to_tensor(x)
    step = x.dtype.base_dtype
    for i, b in enumerate(bounds):
        if b.dtype.base_dtype != step:
            if b.dtype.base_dtype != dtypes.int32 or step != dtypes.int64:
                raise ValueError(
                    "Boundaries (%s) must have the same dtype as x (%s)."
                    % (b.dtype.base_dtype.name, step.name)
                )
            bounds[i] = math_ops.cast(b, step)  # int32 boundaries for an int64 step
    for v in vals[1:]:
        if v.dtype.base_dtype != vals[0].dtype.base_dtype:
            raise ValueError(
                "Values must have elements all with the same dtype (%s vs %s)."
                % (vals[0].dtype.base_dtype.name, v.dtype.base_dtype.name)
            )
    with name_scope(name, "PiecewiseConstant"):
        pairs = [(x <= bounds[0], lambda: vals[0]), (x > bounds[-1], lambda: vals[-1])]
        for low, high, v in zip(bounds[:-1], bounds[1:], vals[1:-1]):
            pairs.append(((x > low) & (x <= high), lambda v=v: v))
        return case(pairs, lambda: vals[0], exclusive=True)
