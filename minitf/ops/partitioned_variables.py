"""Partitioned variables: one logical variable stored as several shards, ``var/part_0`` ... .

Book section: "Sharding Variables Across Multiple Parameter Servers".  A variable too big for one
ps task (or one that would make one task carry most of a step's bytes) is cut along one axis;
each shard is an ordinary variable, so ``replica_device_setter`` deals the shards round robin
over the ps tasks like any other variables.  ``tf.get_variable(..., partitioner=...)`` (or a
``variable_scope``'s ``partitioner``) returns a :class:`PartitionedVariable`, which reads as the
concatenation of its shards.  TF 1.15's python/ops/partitioned_variables.py and the
``PartitionedVariable`` class of python/ops/variables.py.

Not here: ``variable_axis_size_partitioner``, the shards' save-slice information (a ``Saver``
saves each shard under its own name; TF saves one tensor in slices), ``tf.nn.embedding_lookup``
on shards.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from minitf.framework import dtypes, tensor_shape
from minitf.framework.graph import Tensor, get_default_graph, register_tensor_conversion_function
from minitf.ops import array_ops, math_ops
from minitf.ops.variables import SaveSliceInfo, Variable

Partitioner = Callable[..., list]


class _PartitionInfo:
    """What an initializer learns of the shard it initialises (TF's ``_PartitionInfo``):
    the whole variable's shape and where the shard starts in it."""

    def __init__(self, full_shape: Sequence[int], var_offset: Sequence[int]) -> None:
        self.full_shape = list(full_shape)
        self.var_offset = list(var_offset)


def fixed_size_partitioner(num_shards: int, axis: int = 0) -> Partitioner:
    """``num_shards`` shards along ``axis`` (fewer if the axis is shorter)."""

    def _partitioner(shape: Any, **unused: Any) -> list:
        shape = tensor_shape.as_shape(shape)
        partitions = [1] * shape.ndims
        partitions[axis] = min(num_shards, shape.dims[axis].value)
        return partitions

    return _partitioner


def min_max_variable_partitioner(
    max_partitions: int = 1,
    axis: int = 0,
    min_slice_size: int = 256 << 10,
    bytes_per_string_element: int = 16,
) -> Partitioner:
    """As many shards along ``axis`` as keep each at least ``min_slice_size`` bytes, at most
    ``max_partitions`` (and at most the axis's length)."""
    if axis != 0:
        raise ValueError("minitf: min_max_variable_partitioner supports axis 0 only")

    def _partitioner(shape: Any, dtype: Any, **unused: Any) -> list:
        shape = tensor_shape.as_shape(shape)
        dtype = dtypes.as_dtype(dtype)
        size = (
            bytes_per_string_element if dtype.base_dtype == dtypes.string else dtype.size
        ) * shape.num_elements()
        slices = max(1, min(shape.dims[axis].value, max_partitions, size // min_slice_size))
        partitions = [1] * shape.ndims
        partitions[axis] = int(slices)
        return partitions

    return _partitioner


def shard_shapes(full: Sequence[int], axis: int, num: int) -> list[tuple[list[int], list[int]]]:
    """(offset, shape) of each of ``num`` shards along ``axis``: the first ``full[axis] % num``
    shards get one row more, as in TF."""
    size, extra = divmod(full[axis], num)
    out, start = [], 0
    for i in range(num):
        rows = size + (1 if i < extra else 0)
        offset = [0] * len(full)
        offset[axis] = start
        shape = list(full)
        shape[axis] = rows
        out.append((offset, shape))
        start += rows
    return out


def partition_axis(full: Sequence[int], partitions: Sequence[int]) -> int:
    """The one axis ``partitions`` cuts (TF cuts along one axis only)."""
    if len(partitions) != len(full):
        raise ValueError(
            "Partitioner returned a partition list that does not match the Variable's rank: "
            "%s vs. %s" % (list(partitions), list(full))
        )
    if any(p < 1 for p in partitions):
        raise ValueError("Partitioner returned zero partitions for some axes: %s" % partitions)
    cut = [i for i, p in enumerate(partitions) if p > 1]
    if len(cut) > 1:
        raise ValueError(
            "Can only slice a variable along one dimension: shape: %s, "
            "partitioning: %s" % (list(full), list(partitions))
        )
    return cut[0] if cut else 0


class PartitionedVariable:
    """One logical variable made of shards (``tf.get_variable`` with a partitioner returns
    it): iterate it for the shards; it reads, wherever a tensor is needed, as their
    concatenation along the partitioned axis."""

    def __init__(
        self,
        name: str,
        shape: Sequence[int],
        dtype: Any,
        variable_list: list[Variable],
        partitions: Sequence[int],
    ) -> None:
        self._name = name
        self._shape = tensor_shape.as_shape(shape)
        self._dtype = dtypes.as_dtype(dtype)
        self._variable_list = list(variable_list)
        self._partitions = list(partitions)

    def __iter__(self) -> Iterator[Variable]:
        return iter(self._variable_list)

    def __len__(self) -> int:
        return len(self._variable_list)

    def __repr__(self) -> str:
        return "<tf.PartitionedVariable '%s' shape=%s dtype=%s parts=%d>" % (
            self._name,
            self._shape,
            self._dtype.name,
            len(self),
        )

    @property
    def name(self) -> str:
        return self._name

    @property
    def dtype(self):
        return self._dtype

    @property
    def shape(self):
        return self._shape

    def get_shape(self):
        return self._shape

    def _get_variable_list(self) -> list[Variable]:
        return list(self._variable_list)

    def _get_partitions(self) -> list[int]:
        return list(self._partitions)

    def as_tensor(self) -> Tensor:
        """The whole value: a new ``<name>/ConcatPartitions/concat`` of the shards and its
        ``Identity`` named ``<name>``, outside any control-dependency block (as TF: each use
        makes its own)."""
        with get_default_graph().control_dependencies(None):
            return self._concat()

    def _concat(self) -> Tensor:
        g = get_default_graph()
        if len(self._variable_list) == 1:
            with g.name_scope(None):
                return array_ops.identity(self._variable_list[0], name=self._name)
        axis = partition_axis(self._shape.as_list(), self._partitions)
        with g.name_scope(self._name + "/ConcatPartitions/"):
            concatenated = array_ops.concat(self._variable_list, axis)
        with g.name_scope(None):
            return array_ops.identity(concatenated, name=self._name)


def _to_tensor(v: PartitionedVariable, dtype=None, name=None, as_ref=False) -> Tensor:
    if as_ref:
        raise NotImplementedError("PartitionedVariable doesn't support being used as a reference.")
    if dtype is not None and not dtype.is_compatible_with(v.dtype):
        raise ValueError(
            "Incompatible type conversion requested to type '%s' for variable of "
            "type '%s'" % (dtype.name, v.dtype.name)
        )
    return v.as_tensor()


register_tensor_conversion_function(PartitionedVariable, _to_tensor)
math_ops._install_operators(PartitionedVariable)


def make_partitioned(
    name: str,
    shape: Any,
    dtype: Any,
    partitioner: Partitioner,
    make_shard: Callable,
) -> PartitionedVariable:
    """The shards of the variable ``name``: ``make_shard(part_name, shard_shape,
    partition_info)`` makes each (``get_variable`` passes its own maker)."""
    shape = tensor_shape.as_shape(shape)
    if not shape.is_fully_defined():
        raise ValueError(
            "Shape of a new partitioned variable (%s) must be fully defined, but instead "
            "was %s." % (name, shape)
        )
    full = shape.as_list()
    partitions = list(partitioner(shape=shape, dtype=dtypes.as_dtype(dtype)))
    axis = partition_axis(full, partitions)
    num = partitions[axis]
    shards = []
    for i, (offset, part_shape) in enumerate(shard_shapes(full, axis, num)):
        shard = make_shard("part_%d" % i, part_shape, _PartitionInfo(full, offset))
        shard._save_slice_info = SaveSliceInfo(name, full, offset, part_shape)
        shards.append(shard)
    return PartitionedVariable(name, full, dtype, shards, partitions)
