"""The small surface every kernel backend offers, and how kernels are written against it.

Book section: "Operations and kernels".  A kernel is an op's implementation for one device type
(``registry.py``).  minitf writes each kernel once, against this surface, and every device
brings a backend that implements it (MiniTorch's ``TensorOps``: ``tensor_ops`` / ``fast_ops``
/ ``cuda_ops``):

* ``numpy_ops.NumpyOps``: the CPU and the emulated GPU cards; large elementwise ops, sums and
  matmuls split their work over the intra-op pool the step hands them (``ctx.parallel_for``);
* ``cuda_ops.CudaOps``: a real CUDA card, or Numba's simulator with
  ``MINITF_GPU_BACKEND=cudasim``; tensors stay on the card as numba device arrays and every
  CUDA call goes through the card's launcher thread.

The surface, where ``ctx`` is what the executor hands a kernel (its ``parallel_for``) and ``x``
a tensor of the backend (a numpy value or a device array):

==========================  ===================================================================
``map(fn)``                 ``f(ctx, x, out=None)``: unary elementwise, ``fn`` in ``MAP_FNS``
                            (``sqrt``: of floats, for the training kernels)
``zip(fn)``                 ``f(ctx, x, y, out=None)``: binary elementwise with numpy
                            broadcasting, ``fn`` in ``ZIP_FNS``; ``out`` of either: an input
                            that dies with the op, to write the result into if it fits
``zip_scalars(fn)``          ``g(x, y)`` for operands known to be scalars (by their static
                            shapes), or None: the backend has no faster way for them
``reduce(fn, keep, dtype)`` ``f(ctx, x, axes)``: ``fn`` in ``REDUCE_FNS`` over a list of axes,
                            computing in numpy dtype ``dtype``
``matmul(ta, tb)``          ``f(ctx, a, b)``: the product of two matrices, either transposed
``add_n()``                 ``f(ctx, xs)``: the sum of same-shape tensors
``cast(dtype)``             ``f(ctx, x)``: ``x`` converted to numpy dtype ``dtype``
``constant(value)``         ``f(ctx)``: a numpy value as a tensor of the backend (kept)
``copy(x)``                 a private copy of ``x`` (what a variable stores)
``shape(x)``                ``x``'s shape as a tuple
``reshape(x, shape)``       ``x``'s elements in ``shape`` (a view where the backend can make one)
``to_host(x)``              ``x`` as a numpy value (a _Send, a fetch)
``from_host(v)``            a numpy value as a tensor of the backend (a _Recv, a feed)
``on_host(compute)``        a host kernel ``compute(ctx, ins)`` made to take and give tensors
                            of the backend (ops the backend has no kernel for run on the host)
==========================  ===================================================================

Variable references (``framework.resource_mgr.VariableRef``) pass through ``on_host``
untouched.  Shape errors are the kernels' to raise (checked before a backend is called, or once
it refused), so every backend fails with the same TF message.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from minitf.framework import errors

ZIP_FNS = (
    "add",
    "sub",
    "mul",
    "realdiv",
    "floordiv",
    "maximum",
    "minimum",
    # the gradient helpers of tf.nn (same-shape operands): ReluGrad(g, features),
    # SigmoidGrad(y, g) = g*y*(1-y), TanhGrad(y, g) = g*(1-y*y); and of tf.math:
    # SqrtGrad(y, g) = 0.5*g/y, RsqrtGrad(y, g) = -0.5*(g*y)*(y*y), ReciprocalGrad(y, g) = -g*y*y
    "relu_grad",
    "sigmoid_grad",
    "tanh_grad",
    "sqrt_grad",
    "rsqrt_grad",
    "reciprocal_grad",
)
MAP_FNS = (
    "neg",
    "square",
    "abs",
    "relu",
    "exp",
    "log",
    "sqrt",
    "rsqrt",
    "reciprocal",
    "floor",
    "sigmoid",
    "tanh",
)
#: the ZIP_FNS only defined for floating-point tensors (TF registers no integer kernels)
FLOAT_ZIP_FNS = ("realdiv", "sqrt_grad", "rsqrt_grad", "reciprocal_grad")
#: the MAP_FNS only defined for floating-point tensors (TF registers no integer kernels)
FLOAT_MAP_FNS = ("exp", "log", "sqrt", "rsqrt", "reciprocal", "floor", "sigmoid", "tanh")
REDUCE_FNS = ("sum", "mean")

Compute = Callable[..., Any]


class TensorOps(Protocol):
    """What a kernel may ask of its device's backend (see the module docstring)."""

    name: str

    def map(self, fn: str) -> Compute: ...

    def zip(self, fn: str) -> Compute: ...

    def zip_scalars(self, fn: str) -> Compute | None: ...

    def reduce(self, fn: str, keep_dims: bool, dtype: Any) -> Compute: ...

    def matmul(self, transpose_a: bool, transpose_b: bool) -> Compute: ...

    def add_n(self) -> Compute: ...

    def cast(self, dtype: Any) -> Compute: ...

    def constant(self, value: Any) -> Compute: ...

    def copy(self, x: Any) -> Any: ...

    def shape(self, x: Any) -> tuple: ...

    def reshape(self, x: Any, shape: tuple) -> Any: ...

    def to_host(self, x: Any) -> Any: ...

    def from_host(self, value: Any) -> Any: ...

    def on_host(self, compute: Compute) -> Compute: ...


def host_kernel(factory: Callable[[Any, Any], Compute]) -> Callable[[Any, Any], Compute]:
    """A kernel factory whose kernel computes with numpy on the host, made to run on any
    device: a backend that keeps tensors elsewhere copies its inputs to the host and its
    outputs back (``on_host``)."""

    def on_device(op, device):
        return device.backend.on_host(factory(op, device))

    on_device.__name__ = getattr(factory, "__name__", "host_kernel")
    on_device.__doc__ = factory.__doc__
    return on_device


def is_device_array(value: Any) -> bool:
    """Whether ``value`` is a device array (numba's, or the simulator's), not a host value."""
    return hasattr(value, "copy_to_host")


def invalid_argument(text: str) -> errors.InvalidArgumentError:
    """The ``InvalidArgumentError`` a kernel raises (the executor names the node)."""
    return errors.InvalidArgumentError(None, None, text)


def shape_text(shape: Sequence[int]) -> str:
    """TF's ``[2,3]`` rendering of a shape in kernel error messages."""
    return "[%s]" % ",".join(str(d) for d in shape)
