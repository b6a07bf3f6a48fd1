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
        dims = list(shape)
        if not dims:
            fan_in = fan_out = 1
        elif len(dims) == 1:
            fan_in = fan_out = dims[0]
        else:
            receptive = 1
            for d in dims[:-2]:
                receptive *= d
            fan_in, fan_out = dims[-2] * receptive, dims[-1] * receptive
        limit = math.sqrt(6.0 / max(1.0, (fan_in + fan_out)))
        return random_ops.random_uniform(shape, -limit, limit, self._dtype(dtype), seed=self.seed)


zeros_initializer = Zeros
ones_initializer = Ones
constant_initializer = Constant
random_normal_initializer = RandomNormal
truncated_normal_initializer = TruncatedNormal
random_uniform_initializer = RandomUniform
glorot_uniform_initializer = GlorotUniform
