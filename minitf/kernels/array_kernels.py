"""Array kernels: constants, placeholders, identity, reshaping, joining and filling.

Book sections: "Operations and kernels" and "Placing Operations on Devices" (constants are the
"generator" nodes the placer puts next to their consumer).  Shape kernels compute on the host
(``tensor_ops.host_kernel``): a CUDA backend copies their operands over, as TF does for the
int32 shape operands it keeps in host memory.
"""

import numpy as np

from minitf.framework import errors
from minitf.kernels.numpy_ops import scalarize
from minitf.kernels.registry import ALL, GPU_ARRAY, register
from minitf.kernels.tensor_ops import host_kernel


def _const(op, device):
    f = device.backend.constant(np.asarray(op.get_attr("value")))
    return lambda ctx, ins: (f(ctx),)


def _placeholder(op, device):
    dtype, shape = op.get_attr("dtype"), op.get_attr("shape")
    shape_part = (
        ""
        if shape.ndims is None
        else " and shape [%s]" % ",".join("?" if d is None else str(d) for d in shape.as_list())
    )
    msg = "You must feed a value for placeholder tensor '%s' with dtype %s%s" % (
        op.name,
        dtype.type_string,
        shape_part,
    )

    def compute(ctx, ins):
        raise errors.InvalidArgumentError(None, None, msg)

    return compute


register("Const", _const, cpu=ALL, gpu=GPU_ARRAY, persistent=True)
register("Placeholder", _placeholder, cpu="any", gpu="any")
register("NoOp", lambda op, device: lambda ctx, ins: (), cpu="any", gpu="any")
register("Identity", lambda op, device: lambda ctx, ins: (ins[0],), cpu=ALL, gpu=GPU_ARRAY)


def _dims(shape_tensor):
    return [int(d) for d in np.reshape(shape_tensor, -1)]


@host_kernel
def _reshape(op, device):
    def compute(ctx, ins):
        x, shape = ins
        try:
            return (np.reshape(x, _dims(shape)),)
        except ValueError:
            raise errors.InvalidArgumentError(
                None,
                None,
                "Input to reshape is a tensor with %d values, but the requested "
                "shape has %d" % (np.size(x), int(np.prod(np.reshape(shape, -1)))),
            ) from None

    return compute


@host_kernel
def _expand_dims(op, device):
    return lambda ctx, ins: (np.expand_dims(ins[0], int(ins[1])),)


@host_kernel
def _concat(op, device):
    return lambda ctx, ins: (np.concatenate(ins[:-1], axis=int(ins[-1])),)


@host_kernel
def _pack(op, device):
    axis = op.get_attr("axis")
    return lambda ctx, ins: (np.stack(ins, axis=axis),)


@host_kernel
def _fill(op, device):
    np_dtype = op.get_attr("T").as_numpy_dtype
    return lambda ctx, ins: (scalarize(np.full(_dims(ins[0]), ins[1], dtype=np_dtype)),)


register("Reshape", _reshape, cpu=ALL, gpu=GPU_ARRAY)
register("ExpandDims", _expand_dims, cpu=ALL, gpu=GPU_ARRAY)
register("ConcatV2", _concat, cpu=ALL, gpu=GPU_ARRAY)
register("Pack", _pack, cpu=ALL, gpu=GPU_ARRAY)
register("Fill", _fill, cpu=ALL, gpu=GPU_ARRAY)
# PlaceholderWithDefault: its input, unless fed (a fed tensor is cut from the step graph)
register(
    "PlaceholderWithDefault",
    lambda op, device: lambda ctx, ins: (ins[0],),
    cpu=ALL,
    gpu=GPU_ARRAY,
)
