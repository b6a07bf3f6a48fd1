"""CPU kernels of the checkpoint ops (TF's ``core/kernels/save_restore_v2_ops.cc``,
``save_restore_tensor.cc``, ``string_join_op.cc``): they read and write tensor bundles
(``minitf.lib.tensor_bundle``) on the file system of the process they run in.

Book section: "Saving and restoring"; with a sharded saver in a cluster each parameter server's
``SaveV2`` writes its own shard, so every task must see one file system (as in TF).
"""

import numpy as np

from minitf.framework import errors
from minitf.kernels.numpy_ops import scalarize
from minitf.kernels.registry import register
from minitf.kernels.tensor_ops import host_kernel
from minitf.lib import tensor_bundle, tensor_slice
from minitf.ops import io_ops  # noqa: F401  (registers the ops a worker may be sent)


def _text(x):
    x = np.asarray(x, dtype=object).reshape(-1)[0] if np.ndim(x) else np.asarray(x).item()
    return x.decode("utf-8") if isinstance(x, bytes) else str(x)


def _texts(x):
    return [_text(e) for e in np.asarray(x, dtype=object).reshape(-1)]


def _check_names(names, slices, n, op_type):
    if len(names) != n or len(slices) != n:
        raise errors.InvalidArgumentError(
            None,
            None,
            "Expected %d tensor names and shape_and_slices for %s, got %d and %d"
            % (n, op_type, len(names), len(slices)),
        )
    # each spec: "" (the whole tensor) or "<full shape> <slice>", e.g. "10 4 0,4:-"
    return [tensor_slice.parse_shape_and_slice(spec) if spec else None for spec in slices]


@host_kernel
def _save_v2(op, device):
    dts = op.get_attr("dtypes")

    def compute(ctx, ins):
        prefix, names, slices = _text(ins[0]), _texts(ins[1]), _texts(ins[2])
        specs = _check_names(names, slices, len(dts), "SaveV2")
        tensors = [
            (n, np.asarray(t), d, *(spec or ()))
            for n, t, d, spec in zip(names, ins[3:], dts, specs)
        ]
        tensor_bundle.write_bundle(prefix, tensors)
        return ()

    return compute


def _restored(reader, name, dtype, spec):
    saved, _ = reader.dtype_and_shape(name)
    if saved != dtype:
        raise errors.InvalidArgumentError(
            None,
            None,
            "tensor_name = %s; expected dtype %s does not equal original dtype %s"
            % (name, dtype.type_string, saved.type_string),
        )
    if spec is not None:
        return scalarize(reader.lookup_slice(name, *spec))
    return scalarize(reader.lookup(name))


@host_kernel
def _restore_v2(op, device):
    dts = op.get_attr("dtypes")

    def compute(ctx, ins):
        prefix, names, slices = _text(ins[0]), _texts(ins[1]), _texts(ins[2])
        specs = _check_names(names, slices, len(dts), "RestoreV2")
        reader = tensor_bundle.BundleReader(prefix)
        return tuple(_restored(reader, n, d, sp) for n, d, sp in zip(names, dts, specs))

    return compute


@host_kernel
def _merge_v2(op, device):
    delete_old_dirs = op.get_attr("delete_old_dirs")

    def compute(ctx, ins):
        tensor_bundle.merge(_texts(ins[0]), _text(ins[1]), delete_old_dirs)
        return ()

    return compute


@host_kernel
def _sharded_filename(op, device):
    def compute(ctx, ins):
        name = "%s-%05d-of-%05d" % (_text(ins[0]), int(ins[1]), int(ins[2]))
        return (name.encode("utf-8"),)

    return compute


def _as_bytes(x):
    return x.encode("utf-8") if isinstance(x, str) else bytes(x)


@host_kernel
def _string_join(op, device):
    sep = _as_bytes(op.get_attr("separator"))

    def compute(ctx, ins):
        parts = np.broadcast_arrays(*[np.asarray(x, dtype=object) for x in ins])
        out = np.empty(parts[0].shape, dtype=object)
        for idx in np.ndindex(out.shape):
            out[idx] = sep.join(_as_bytes(p[idx]) for p in parts)
        return (scalarize(out),)

    return compute


register("SaveV2", _save_v2, cpu="any", cost="expensive")
register("RestoreV2", _restore_v2, cpu="any", cost="expensive", allocates=True)
register("MergeV2Checkpoints", _merge_v2, cpu="any", cost="expensive")
register("ShardedFilename", _sharded_filename, cpu="any", allocates=True)
register("StringJoin", _string_join, cpu="any", allocates=True)
