"""The kernel of ``Pow`` (``ops/decay_math_ops.py``), a host kernel with numpy.

Book section: "Operations and kernels" (the dtypes TF registers it for: floats and integers on
CPUs, floats and int64 on GPUs).  A CUDA card runs it on host copies
(``tensor_ops.host_kernel``).
"""

import numpy as np

from minitf.framework import dtypes as D
from minitf.framework import errors
from minitf.kernels.registry import FLOATS, register
from minitf.kernels.tensor_ops import host_kernel, shape_text


def _pow(op, device):
    def compute(ctx, ins):
        x, y = ins
        try:
            shape = np.broadcast_shapes(np.shape(x), np.shape(y))
        except ValueError:
            raise errors.InvalidArgumentError(
                None,
                None,
                "Incompatible shapes: %s vs. %s"
                % (shape_text(np.shape(x)), shape_text(np.shape(y))),
            ) from None
        if np.issubdtype(np.result_type(y), np.integer) and np.any(np.asarray(y) < 0):
            raise errors.InvalidArgumentError(
                None, None, "Integers to negative integer powers are not allowed"
            )
        return (np.asarray(np.power(x, y)).reshape(shape),)

    return compute


register("Pow", host_kernel(_pow), cpu=FLOATS + (D.int32, D.int64), gpu=FLOATS + (D.int64,))
