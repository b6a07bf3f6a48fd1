"""Checkpoint ops: ``SaveV2``, ``RestoreV2``, ``MergeV2Checkpoints``, ``ShardedFilename`` and
``StringJoin`` (TF's ``python/ops/io_ops.py``, ``gen_io_ops``, ``string_ops.string_join``).

Book section: "Saving and restoring" (``tf.train.Saver`` builds these ops); in the
distributed chapter a sharded saver puts one ``SaveV2`` on each parameter server's CPU, so each
task writes its own shard, and one ``MergeV2Checkpoints`` joins them.
"""

from __future__ import annotations

from collections.abc import Sequence

from minitf.framework import dtypes, tensor_shape
from minitf.framework.graph import Operation, Tensor, convert_to_tensor, name_scope
from minitf.ops import array_ops
from minitf.ops.array_ops import TensorLike
from minitf.ops.op_def import NotDifferentiable, apply_op, register_op

# No dtype attr to key kernels on: their kernels take any dtypes.
register_op("SaveV2", is_stateful=True)
register_op("RestoreV2", is_stateful=True)
register_op("MergeV2Checkpoints", is_stateful=True)
register_op("ShardedFilename")
register_op("StringJoin")
for _op_type in ("SaveV2", "RestoreV2", "MergeV2Checkpoints", "ShardedFilename", "StringJoin"):
    NotDifferentiable(_op_type)

_SCALAR = tensor_shape.TensorShape([])


def _strings(value, name):
    return convert_to_tensor(value, dtype=dtypes.string, name=name)


def save_v2(
    prefix: TensorLike,
    tensor_names: TensorLike,
    shape_and_slices: TensorLike,
    tensors: Sequence[TensorLike],
    name: str | None = None,
) -> Operation:
    """``SaveV2``: writes ``tensors`` under ``tensor_names`` as the bundle ``prefix`` (an
    ``.index`` and one ``.data-00000-of-00001`` file).  ``shape_and_slices``: "" per tensor
    (minitf saves whole tensors only)."""
    with name_scope(name, "SaveV2", [prefix]) as scope:
        prefix = _strings(prefix, "prefix")
        tensor_names = _strings(tensor_names, "tensor_names")
        shape_and_slices = _strings(shape_and_slices, "shape_and_slices")
        tensors = [convert_to_tensor(t) for t in tensors]
        return apply_op(
            "SaveV2",
            [prefix, tensor_names, shape_and_slices, *tensors],
            [],
            scope,
            {"dtypes": [t.dtype.base_dtype for t in tensors]},
        )


def restore_v2(
    prefix: TensorLike,
    tensor_names: TensorLike,
    shape_and_slices: TensorLike,
    dtypes_: Sequence[dtypes.DType],
    name: str | None = None,
) -> list[Tensor]:
    """``RestoreV2``: the tensors saved under ``tensor_names`` in the bundle ``prefix``, one
    output per name, of the given dtypes (shapes known only when it runs)."""
    with name_scope(name, "RestoreV2", [prefix]) as scope:
        prefix = _strings(prefix, "prefix")
        tensor_names = _strings(tensor_names, "tensor_names")
        shape_and_slices = _strings(shape_and_slices, "shape_and_slices")
        dts = [dtypes.as_dtype(d).base_dtype for d in dtypes_]
        op = apply_op(
            "RestoreV2",
            [prefix, tensor_names, shape_and_slices],
            [(d, tensor_shape.unknown_shape()) for d in dts],
            scope,
            {"dtypes": dts},
        )
        return list(op.outputs)


def merge_v2_checkpoints(
    checkpoint_prefixes: TensorLike,
    destination_prefix: TensorLike,
    delete_old_dirs: bool = True,
    name: str | None = None,
) -> Operation:
    """``MergeV2Checkpoints``: joins the bundles ``checkpoint_prefixes`` (the shards of a
    sharded save) into ``destination_prefix``; removes their directories if
    ``delete_old_dirs`` (and they are empty)."""
    with name_scope(name, "MergeV2Checkpoints", [destination_prefix]) as scope:
        if isinstance(checkpoint_prefixes, (list, tuple)):
            checkpoint_prefixes = array_ops.stack(
                list(checkpoint_prefixes), name="checkpoint_prefixes"
            )
        prefixes = _strings(checkpoint_prefixes, "checkpoint_prefixes")
        destination = _strings(destination_prefix, "destination_prefix")
        return apply_op(
            "MergeV2Checkpoints",
            [prefixes, destination],
            [],
            scope,
            {"delete_old_dirs": bool(delete_old_dirs)},
        )


def sharded_filename(
    basename: TensorLike, shard: TensorLike, num_shards: TensorLike, name: str | None = None
) -> Tensor:
    """``ShardedFilename``: ``"<basename>-00000-of-00002"``."""
    with name_scope(name, "ShardedFilename", [basename]) as scope:
        basename = _strings(basename, "basename")
        shard = convert_to_tensor(shard, dtype=dtypes.int32, name="shard")
        num_shards = convert_to_tensor(num_shards, dtype=dtypes.int32, name="num_shards")
        op = apply_op(
            "ShardedFilename", [basename, shard, num_shards], [(dtypes.string, _SCALAR)], scope
        )
        return op.outputs[0]


def string_join(
    inputs: Sequence[TensorLike], separator: str = "", name: str | None = None
) -> Tensor:
    """``StringJoin`` of scalar strings (``tf.strings.join``)."""
    with name_scope(name, "StringJoin", []) as scope:
        tensors = [_strings(x, "inputs_%d" % i) for i, x in enumerate(inputs)]
        shape = _SCALAR
        for t in tensors:
            if t.shape.ndims:
                shape = t.shape
        op = apply_op(
            "StringJoin",
            tensors,
            [(dtypes.string, shape)],
            scope,
            {"separator": separator, "N": len(tensors)},
        )
        return op.outputs[0]
