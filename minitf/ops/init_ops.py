"""Initializers for ``tf.get_variable`` (``zeros_initializer``, ``constant_initializer`` ...).

Book section: "Pinning Operations Across Tasks" and the blog's examples create variables with
``tf.get_variable(..., initializer=tf.constant_initializer(2))``; the ops an initializer makes
live under ``<variable>/Initializer/`` and are colocated with the variable.
"""

from __future__ import annotations

import math
from typing import Any

from minitf.framework import dtypes
from minitf.framework.graph import DTypeLike, ShapeLike, Tensor
from minitf.ops import array_ops, random_ops
from minitf.ops.array_ops import TensorLike


class Initializer:
    """Base class: ``init(shape, dtype=None, partition_info=None)`` returns a tensor."""

    def __init__(self, dtype: DTypeLike = dtypes.float32) -> None:
        self.dtype = dtypes.as_dtype(dtype)

    def _dtype(self, dtype):
        return dtypes.as_dtype(dtype) if dtype is not None else self.dtype


class Zeros(Initializer):
    def __call__(
        self, shape: ShapeLike, dtype: DTypeLike = None, partition_info: Any = None
    ) -> Tensor:
        return array_ops.zeros(shape, self._dtype(dtype))


class Ones(Initializer):
    def __call__(
        self, shape: ShapeLike, dtype: DTypeLike = None, partition_info: Any = None
    ) -> Tensor:
        return array_ops.ones(shape, self._dtype(dtype))


class Constant(Initializer):
    def __init__(
        self, value: TensorLike = 0, dtype: DTypeLike = dtypes.float32, verify_shape: bool = False
    ) -> None:
        super().__init__(dtype)
        self.value = value
        self.verify_shape = verify_shape

    def __call__(
        self,
        shape: ShapeLike,
        dtype: DTypeLike = None,
        partition_info: Any = None,
        verify_shape: bool | None = None,
    ) -> Tensor:
        return array_ops.constant(
            self.value,
            dtype=self._dtype(dtype),
            shape=shape,
            verify_shape=self.verify_shape if verify_shape is None else verify_shape,
        )


class RandomNormal(Initializer):
    def __init__(
        self,
        mean: TensorLike = 0.0,
        stddev: TensorLike = 1.0,
        seed: int | None = None,
        dtype: DTypeLike = dtypes.float32,
    ) -> None:
        super().__init__(dtype)
        self.mean, self.stddev, self.seed = mean, stddev, seed

    def __call__(
        self, shape: ShapeLike, dtype: DTypeLike = None, partition_info: Any = None
    ) -> Tensor:
        return random_ops.random_normal(
            shape, self.mean, self.stddev, self._dtype(dtype), seed=self.seed
        )


class TruncatedNormal(RandomNormal):
    def __call__(
        self, shape: ShapeLike, dtype: DTypeLike = None, partition_info: Any = None
    ) -> Tensor:
        return random_ops.truncated_normal(
            shape, self.mean, self.stddev, self._dtype(dtype), seed=self.seed
        )


class RandomUniform(Initializer):
    def __init__(
        self,
        minval: TensorLike = 0.0,
        maxval: TensorLike = None,
        seed: int | None = None,
        dtype: DTypeLike = dtypes.float32,
    ) -> None:
        super().__init__(dtype)
        self.minval, self.maxval, self.seed = minval, maxval, seed

    def __call__(
        self, shape: ShapeLike, dtype: DTypeLike = None, partition_info: Any = None
    ) -> Tensor:
        return random_ops.random_uniform(
            shape, self.minval, self.maxval, self._dtype(dtype), seed=self.seed
        )


class GlorotUniform(Initializer):
    """Uniform in ``[-limit, limit]`` with ``limit = sqrt(6 / (fan_in + fan_out))``:
    ``tf.get_variable``'s default for floating-point variables."""

    def __init__(self, seed: int | None = None, dtype: DTypeLike = dtypes.float32) -> None:
        super().__init__(dtype)
        self.seed = seed

    def __call__(
        self, shape: ShapeLike, dtype: DTypeLike = None, partition_info: Any = None
    ) -> Tensor:
        fan_in, fan_out = _compute_fans(_scale_shape(shape, partition_info))
        limit = math.sqrt(6.0 / max(1.0, (fan_in + fan_out)))
        return random_ops.random_uniform(shape, -limit, limit, self._dtype(dtype), seed=self.seed)


def _scale_shape(shape, partition_info):
    """The shape whose fans scale an initializer: a shard of a partitioned variable scales as
    the whole variable does (TF's ``partition_info.full_shape``)."""
    return list(shape) if partition_info is None else list(partition_info.full_shape)


def _compute_fans(dims):
    """(fan_in, fan_out) of a weight shape: its last two dimensions times the receptive
    field (the product of the others); a vector's fans are its length, a scalar's 1."""
    if not dims:
        return 1, 1
    if len(dims) == 1:
        return dims[0], dims[0]
    receptive = 1
    for d in dims[:-2]:
        receptive *= d
    return dims[-2] * receptive, dims[-1] * receptive


class VarianceScaling(Initializer):
    """TF 1.15's ``variance_scaling_initializer``: samples of variance ``scale / n`` with ``n``
    the fan in, the fan out or their mean (``mode``); ``distribution`` "truncated_normal" (the
    default; "normal" is its old name), "untruncated_normal" or "uniform".  He and Glorot
    initialisation are instances of it (book: the MLPs of the training examples)."""

    def __init__(
        self,
        scale: float = 1.0,
        mode: str = "fan_in",
        distribution: str = "truncated_normal",
        seed: int | None = None,
        dtype: DTypeLike = dtypes.float32,
    ) -> None:
        if scale <= 0.0:
            raise ValueError("`scale` must be positive float.")
        if mode not in {"fan_in", "fan_out", "fan_avg"}:
            raise ValueError("Invalid `mode` argument:", mode)
        distribution = distribution.lower()
        if distribution not in {"normal", "uniform", "truncated_normal", "untruncated_normal"}:
            raise ValueError("Invalid `distribution` argument:", distribution)
        super().__init__(dtype)
        self.scale, self.mode, self.distribution, self.seed = scale, mode, distribution, seed

    def __call__(
        self, shape: ShapeLike, dtype: DTypeLike = None, partition_info: Any = None
    ) -> Tensor:
        dtype = self._dtype(dtype)
        fan_in, fan_out = _compute_fans(_scale_shape(shape, partition_info))
        fan = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2.0}
        scale = self.scale / max(1.0, fan[self.mode])
        if self.distribution in ("normal", "truncated_normal"):
            # the standard deviation of a unit normal truncated to [-2, 2]
            stddev = math.sqrt(scale) / 0.87962566103423978
            return random_ops.truncated_normal(shape, 0.0, stddev, dtype, seed=self.seed)
        if self.distribution == "untruncated_normal":
            return random_ops.random_normal(shape, 0.0, math.sqrt(scale), dtype, seed=self.seed)
        limit = math.sqrt(3.0 * scale)
        return random_ops.random_uniform(shape, -limit, limit, dtype, seed=self.seed)


class GlorotNormal(VarianceScaling):
    """Truncated normal of variance ``2 / (fan_in + fan_out)`` (``glorot_normal_initializer``)."""

    def __init__(self, seed: int | None = None, dtype: DTypeLike = dtypes.float32) -> None:
        super().__init__(1.0, "fan_avg", "truncated_normal", seed, dtype)


def he_normal(seed: int | None = None) -> VarianceScaling:
    """He initialisation (for ReLU layers): truncated normal of variance ``2 / fan_in``."""
    return VarianceScaling(2.0, "fan_in", "truncated_normal", seed)


def he_uniform(seed: int | None = None) -> VarianceScaling:
    """He initialisation, uniform: in ``[-l, l]`` with ``l = sqrt(6 / fan_in)``."""
    return VarianceScaling(2.0, "fan_in", "uniform", seed)


zeros_initializer = Zeros
ones_initializer = Ones
constant_initializer = Constant
random_normal_initializer = RandomNormal
truncated_normal_initializer = TruncatedNormal
random_uniform_initializer = RandomUniform
glorot_uniform_initializer = GlorotUniform
glorot_normal_initializer = GlorotNormal
variance_scaling_initializer = VarianceScaling
