"""Random tensors (``random_normal``, ``random_uniform``, ``truncated_normal``) and seeds.

Book section: the chapter's training examples initialise weights randomly; seeds follow TF1's
rules (a graph-level seed from ``tf.set_random_seed`` plus an op-level seed).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from minitf.framework import dtypes, tensor_shape
from minitf.framework.graph import (
    DTypeLike,
    Tensor,
    convert_to_tensor,
    get_default_graph,
    name_scope,
)
from minitf.ops.array_ops import TensorLike, constant
from minitf.ops.math_ops import add, multiply, subtract
from minitf.ops.op_def import apply_op, register_op

DEFAULT_GRAPH_SEED = 87654321
for _t in ("RandomStandardNormal", "RandomUniform", "TruncatedNormal", "RandomUniformInt"):
    register_op(_t, is_stateful=True, type_attr="dtype" if _t != "RandomUniformInt" else "Tout")
register_op("RandomShuffle", is_stateful=True)


def set_random_seed(seed: int | None) -> None:
    """Sets the graph-level seed of the default graph."""
    get_default_graph().seed = seed


def get_seed(op_seed: int | None) -> tuple[int | None, int | None]:
    """TF1's seed pair: (graph seed, op seed); (None, None) means non-deterministic."""
    g = get_default_graph()
    if g.seed is not None:
        seeds = g.seed, (op_seed if op_seed is not None else len(g._ops))
    elif op_seed is not None:
        seeds = DEFAULT_GRAPH_SEED, op_seed
    else:
        return None, None
    # (0, 0) means "non-deterministic" to the kernels: TF avoids computing it
    return (0, 2**31 - 1) if seeds == (0, 0) else seeds


def _shape_tensor(shape):
    if isinstance(shape, Tensor):
        return shape, tensor_shape.unknown_shape()
    dims = tensor_shape.as_shape(shape).as_list()
    return constant(dims, dtype=dtypes.int32, name="shape"), tensor_shape.TensorShape(dims)


def _random(op_type, shape_t, static, dtype, seed, attrs=None, inputs=()):
    s1, s2 = get_seed(seed)
    a = {"dtype": dtype, "seed": s1 or 0, "seed2": s2 or 0}
    a.update(attrs or {})
    return apply_op(op_type, [shape_t] + list(inputs), [(dtype, static)], op_type, a).outputs[0]


def _scaled_normal(op_type, default_name, shape, mean, stddev, dtype, seed, name):
    dtype = dtypes.as_dtype(dtype)
    with name_scope(name, default_name, [shape, mean, stddev]) as scope:
        shape_t, static = _shape_tensor(shape)
        mean_t = convert_to_tensor(mean, dtype=dtype, name="mean")
        std_t = convert_to_tensor(stddev, dtype=dtype, name="stddev")
        rnd = _random(op_type, shape_t, static, dtype, seed)
        return add(multiply(rnd, std_t, name="mul"), mean_t, name=scope)


def random_normal(
    shape: TensorLike,
    mean: TensorLike = 0.0,
    stddev: TensorLike = 1.0,
    dtype: DTypeLike = dtypes.float32,
    seed: int | None = None,
    name: str | None = None,
) -> Tensor:
    """Normal samples: ``RandomStandardNormal * stddev + mean`` (final op ``random_normal``)."""
    return _scaled_normal(
        "RandomStandardNormal", "random_normal", shape, mean, stddev, dtype, seed, name
    )


def truncated_normal(
    shape: TensorLike,
    mean: TensorLike = 0.0,
    stddev: TensorLike = 1.0,
    dtype: DTypeLike = dtypes.float32,
    seed: int | None = None,
    name: str | None = None,
) -> Tensor:
    """Normal samples redrawn until within two standard deviations of the mean."""
    return _scaled_normal(
        "TruncatedNormal", "truncated_normal", shape, mean, stddev, dtype, seed, name
    )


def random_uniform(
    shape: TensorLike,
    minval: TensorLike = 0,
    maxval: TensorLike = None,
    dtype: DTypeLike = dtypes.float32,
    seed: int | None = None,
    name: str | None = None,
) -> Tensor:
    """Uniform samples in ``[minval, maxval)`` (``maxval`` defaults to 1 for floats)."""
    dtype = dtypes.as_dtype(dtype)
    if maxval is None:
        if dtype.is_integer:
            raise ValueError("Must specify maxval for integer dtype %r" % dtype)
        maxval = 1
    with name_scope(name, "random_uniform", [shape, minval, maxval]) as scope:
        shape_t, static = _shape_tensor(shape)
        lo = convert_to_tensor(minval, dtype=dtype, name="min")
        hi = convert_to_tensor(maxval, dtype=dtype, name="max")
        if dtype.is_integer:
            s1, s2 = get_seed(seed)
            return apply_op(
                "RandomUniformInt",
                [shape_t, lo, hi],
                [(dtype, static)],
                scope,
                {"Tout": dtype, "seed": s1 or 0, "seed2": s2 or 0},
            ).outputs[0]
        rnd = _random("RandomUniform", shape_t, static, dtype, seed)
        return add(multiply(rnd, subtract(hi, lo, name="sub"), name="mul"), lo, name=scope)


def make_generator(op: Any) -> np.random.Generator:
    """The numpy generator a random kernel uses: seeded when the op got seeds, else fresh
    (``op``: an Operation or a step graph Node, anything with ``get_attr``)."""
    s1, s2 = op.get_attr("seed"), op.get_attr("seed2")
    if s1 == 0 and s2 == 0:
        return np.random.default_rng()
    return np.random.default_rng([int(s1), int(s2)])


def random_shuffle(value: TensorLike, seed: int | None = None, name: str | None = None) -> Tensor:
    """``RandomShuffle``: ``value`` with its first dimension permuted (a new permutation each
    run; an input producer's epochs, book: "Reading the Training Data Directly from the
    Graph")."""
    with name_scope(name, "RandomShuffle", [value]) as scope:
        value = convert_to_tensor(value, name="value")
        s1, s2 = get_seed(seed)
        attrs = {"T": value.dtype.base_dtype, "seed": s1 or 0, "seed2": s2 or 0}
        op = apply_op(
            "RandomShuffle", [value], [(value.dtype.base_dtype, value.shape)], scope, attrs
        )
    return op.outputs[0]
