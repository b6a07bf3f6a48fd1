"""GPU kernels for the executor: op types mapped onto the numba.cuda functions of ``cuda.py``.

Book section: "Operations and kernels".  On a real CUDA card (or with
``MINITF_GPU_BACKEND=cudasim``, Numba's simulator) an op placed on a GPU runs these kernels;
its tensors stay on the card as numba device arrays and only cross to the host on an edge to a
CPU op, a fetch or a feed (what TF's Send/Recv pairs do).  Every CUDA call goes through the
device's :class:`~minitf.kernels.cuda.CudaLauncher` thread.  Ops without a CUDA kernel here
(random numbers, shape ops, placeholders) run their CPU kernel on host copies: correct, and
marked as such in ``HOST_FALLBACK`` so a reader knows where time goes.
"""

import numpy as np

from minitf.framework import errors
from minitf.kernels import cuda
from minitf.kernels import registry
from minitf.runtime.resource_mgr import VariableRef

_BINARY = {"AddV2": "add", "Sub": "sub", "Mul": "mul", "RealDiv": "realdiv",
           "FloorDiv": "floordiv"}
_UNARY = {"Neg": "neg", "Square": "square"}


def is_device_array(v):
    return hasattr(v, "copy_to_host")


def to_host(launcher, v):
    return launcher.call(cuda.to_host, v) if is_device_array(v) else v


def to_device(launcher, v):
    if is_device_array(v):
        return v
    return launcher.call(cuda.to_device, np.asarray(v))


def _wrap_errors(fn):
    def compute(ctx, ins):
        try:
            return fn(ctx, ins)
        except ValueError as e:
            raise errors.InvalidArgumentError(None, None, str(e)) from None
    return compute


def _binary(kind, launcher):
    return _wrap_errors(lambda ctx, ins: (launcher.call(cuda.binary, kind, ins[0], ins[1]),))


def _unary(kind, launcher):
    return lambda ctx, ins: (launcher.call(cuda.unary, kind, ins[0]),)


def _matmul(op, launcher):
    ta, tb = op.get_attr("transpose_a"), op.get_attr("transpose_b")
    return _wrap_errors(lambda ctx, ins: (launcher.call(cuda.matmul, ins[0], ins[1], ta, tb),))


def _reduce(kind, op, launcher):
    keep = op.get_attr("keep_dims")

    def compute(ctx, ins):
        axes = [int(a) for a in np.reshape(to_host(launcher, ins[1]), -1)]
        return (launcher.call(cuda.reduce, kind, ins[0], axes, keep),)
    return _wrap_errors(compute)


def _const(op, launcher):
    value = np.asarray(op.get_attr("value"))
    cached = []

    def compute(ctx, ins):
        if not cached:  # uploaded once per session, like TF's constant on a GPU
            cached.append(launcher.call(cuda.to_device, value))
        return (cached[0],)
    return compute


def _assign(op, launcher, update=None):
    validate = op.get_attr("validate_shape") if update is None else True

    def compute(ctx, ins):
        ref, value = ins
        with ref.lock:
            old = ref.value
            lhs = tuple(old.shape) if old is not None else ref.shape
            if validate and lhs is not None and lhs != tuple(value.shape):
                raise errors.InvalidArgumentError(
                    None, None, "Assign requires shapes of both tensors to match. lhs shape= [%s]"
                    " rhs shape= [%s]" % (",".join(map(str, lhs)),
                                          ",".join(map(str, value.shape))))
            if update is None:
                new = launcher.call(cuda.device_copy, value)
            else:
                new = launcher.call(cuda.binary, update, ref.read(), value)
            ref.set(new)
        return (ref,)
    return compute


def _host_fallback(op, device, launcher):
    """The op's CPU kernel on host copies of its inputs, outputs uploaded back."""
    kdef = registry.find_kernel(op, "CPU") or registry.find_kernel(op, device.device_type)
    kernel = kdef.factory(op, device)

    def compute(ctx, ins):
        host = [v if type(v) is VariableRef else to_host(launcher, v) for v in ins]
        outs = kernel(ctx, host)
        return tuple(v if type(v) is VariableRef else to_device(launcher, v) for v in outs)
    return compute


def make_kernel(op, device, launcher):
    """The compute function of ``op`` on a CUDA device (a host fallback when none exists)."""
    t = op.type
    if t in _BINARY:
        return _binary(_BINARY[t], launcher)
    if t in _UNARY:
        return _unary(_UNARY[t], launcher)
    if t == "MatMul":
        return _matmul(op, launcher)
    if t in ("Sum", "Mean"):
        return _reduce("sum" if t == "Sum" else "mean", op, launcher)
    if t == "AddN":
        return lambda ctx, ins: (launcher.call(cuda.add_n, list(ins)),)
    if t == "Cast":
        dst = op.get_attr("DstT").as_numpy_dtype
        return lambda ctx, ins: (launcher.call(cuda.cast, ins[0], dst),)
    if t == "Identity":
        return lambda ctx, ins: (ins[0],)
    if t == "Const" and op.get_attr("dtype").is_numpy_compatible and \
            op.get_attr("dtype").name != "string":
        return _const(op, launcher)
    if t == "Assign":
        return _assign(op, launcher)
    if t in ("AssignAdd", "AssignSub"):
        return _assign(op, launcher, "add" if t == "AssignAdd" else "sub")
    if t == "VariableV2":
        return registry.find_kernel(op, "GPU").factory(op, device)
    return _host_fallback(op, device, launcher)
