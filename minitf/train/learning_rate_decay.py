"""``tf.train.exponential_decay``: a learning rate that shrinks with the global step.

Book section: "Distributing TensorFlow" (training loops driven by the shared global step).
TF 1.15's ``python/training/learning_rate_decay.py`` (through ``ExponentialDecay``):
``learning_rate * decay_rate ** (global_step / decay_steps)``, the exponent floored when
``staircase``.  Ops, in name scope ``name`` or ``ExponentialDecay``: ``initial_learning_rate``,
``Cast`` (decay_steps), ``Cast_1`` (decay_rate), ``Cast_2`` (the step), ``truediv``,
[``Floor``,] ``Pow``, and the result, a ``Mul`` named like the scope.
"""

from __future__ import annotations

from typing import Any

from minitf.framework.graph import Tensor, convert_to_tensor, name_scope
from minitf.ops import math_ops


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
