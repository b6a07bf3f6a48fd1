"""``tf.nn.moments`` and ``tf.nn.batch_normalization``: batch normalization written with
ordinary ops, as TF 1.15's ``nn_impl.py`` writes it.

Book section: none in chapter 12; chapter 11's ``tf.layers.batch_normalization``
(``minitf/layers.py``) builds on these.
"""

from __future__ import annotations

from typing import Any

from minitf.framework.graph import Tensor, convert_to_tensor, name_scope
from minitf.ops import array_ops, math_ops
from minitf.ops.array_ops import TensorLike


def moments(
    x: TensorLike,
    axes: Any,
    shift: Any = None,
    name: str | None = None,
    keep_dims: bool = False,
) -> tuple[Tensor, Tensor]:
    """``(mean, variance)`` of ``x`` over ``axes`` (scope ``moments``: ``mean``, then the mean
    of ``SquaredDifference(x, StopGradient(mean))`` named ``variance``; ``Squeeze`` and
    ``Squeeze_1`` drop the reduced axes unless ``keep_dims``).  ``shift`` is unused, as in TF."""
    del shift
    with name_scope(name, "moments", [x, axes]):
        x = convert_to_tensor(x, name="x")
        y = math_ops.cast(x, "float32") if x.dtype.base_dtype.name == "float16" else x
        mean = math_ops.reduce_mean(y, axes, keepdims=True, name="mean")
        variance = math_ops.reduce_mean(
            math_ops.squared_difference(y, array_ops.stop_gradient(mean)),
            axes,
            keepdims=True,
            name="variance",
        )
        if not keep_dims:
            mean = array_ops.squeeze(mean, axes)
            variance = array_ops.squeeze(variance, axes)
        if x.dtype.base_dtype.name == "float16":
            return math_ops.cast(mean, x.dtype), math_ops.cast(variance, x.dtype)
        return mean, variance


def batch_normalization(
    x: TensorLike,
    mean: TensorLike,
    variance: TensorLike,
    offset: TensorLike,
    scale: TensorLike,
    variance_epsilon: float,
    name: str | None = None,
) -> Tensor:
    """``scale * (x - mean) / sqrt(variance + epsilon) + offset`` in scope ``batchnorm``, in
    TF's order: ``inv = Rsqrt(variance + epsilon) * scale``, then ``x * inv + (offset - mean *
    inv)`` (``offset`` and ``scale`` may be None)."""
    with name_scope(name, "batchnorm", [x, mean, variance, scale, offset]):
        x = convert_to_tensor(x, name="x")
        inv = math_ops.rsqrt(convert_to_tensor(variance) + variance_epsilon)
        if scale is not None:
            inv = inv * scale
        scaled = x * math_ops.cast(inv, x.dtype)
        shift = (offset - mean * inv) if offset is not None else -mean * inv
        return scaled + math_ops.cast(shift, x.dtype)
