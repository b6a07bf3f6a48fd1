"""The CUDA backend: ``tensor_ops.TensorOps`` on numba.cuda, for real cards and the simulator.

Book section: "Operations and kernels".  On a real CUDA card (or with
``MINITF_GPU_BACKEND=cudasim``, Numba's simulator) a GPU device's kernels call this backend,
whose functions launch the numba.cuda kernels of ``cuda.py``.  Tensors stay on the card as numba
device arrays; they cross to the host only in a ``_Send`` to another device, a fetch or a feed
(``to_host`` / ``from_host``).  int32 tensors never go to the card: as TF keeps a GPU kernel's
int32 inputs and outputs in host memory (shapes, axes, indices: ``HostMemory``), they stay numpy
values and their ops run on the host (``numpy_ops``), so a step's shape arithmetic costs no
transfers.  Every CUDA call goes through the card's
:class:`~minitf.kernels.cuda.CudaLauncher` thread.  Ops without a CUDA kernel here (random
numbers, shape ops, fills) run their host kernel on host copies (``on_host``): correct, and
where time goes to copies.

``cuda.py`` (the numba kernels) is imported when a backend is first used, so a CPU-only
process never imports numba.
"""

from __future__ import annotations

import os
import threading

import numpy as np

from minitf.framework.resource_mgr import VariableRef
from minitf.kernels.numpy_ops import NUMPY, scalarize
from minitf.kernels.tensor_ops import is_device_array

_INT32 = np.dtype(np.int32)


def in_host_memory(v) -> bool:
    """Whether ``v`` is an int32 value, which a card's kernels keep in host memory."""
    return getattr(v, "dtype", None) == _INT32 and not is_device_array(v)


class CudaOps:
    """``tensor_ops.TensorOps`` on one card, through its launcher thread."""

    name = "cuda"

    def __init__(self, card_key, emulated: bool):
        self._key = card_key
        self._emulated = emulated
        self._launcher = None

    # -- the card's launcher, made on first use ------------------------------------------------
    @property
    def launcher(self):
        if self._launcher is None:
            self._launcher = _launcher_for(self._key, self._emulated)
        return self._launcher

    def _call(self, fn_name, *args):
        launcher = self.launcher  # first: an emulated card switches the simulator on before
        from minitf.kernels import cuda  # numba.cuda is imported

        return launcher.call(getattr(cuda, fn_name), *args)

    # -- the surface: int32 operands are computed on the host ----------------------------------
    def map(self, fn: str):
        host = NUMPY.map(fn)

        def compute(ctx, x, out=None):
            if in_host_memory(x):
                return host(ctx, x)
            return self._call("unary", fn, self.from_host(x), out)

        return compute

    def zip(self, fn: str):
        host = NUMPY.zip(fn)

        def compute(ctx, x, y, out=None):
            if in_host_memory(x) and in_host_memory(y):
                return host(ctx, x, y)
            return self._call("binary", fn, self.from_host(x), self.from_host(y), out)

        return compute

    def zip_scalars(self, fn: str):
        return None  # scalars live on the card too: no host shortcut

    def reduce(self, fn: str, keep_dims: bool, dtype):
        host = NUMPY.reduce(fn, keep_dims, dtype)

        def compute(ctx, x, axes):
            if in_host_memory(x):
                return host(ctx, x, axes)
            return self._call("reduce", fn, self.from_host(x), list(axes), keep_dims)

        return compute

    def matmul(self, transpose_a: bool, transpose_b: bool):
        host = NUMPY.matmul(transpose_a, transpose_b)

        def compute(ctx, a, b):
            if in_host_memory(a) and in_host_memory(b):
                return host(ctx, a, b)
            return self._call(
                "matmul", self.from_host(a), self.from_host(b), transpose_a, transpose_b
            )

        return compute

    def add_n(self):
        host = NUMPY.add_n()

        def compute(ctx, xs):
            if all(in_host_memory(x) for x in xs):
                return host(ctx, xs)
            return self._call("add_n", [self.from_host(x) for x in xs])

        return compute

    def cast(self, dtype):
        host = NUMPY.cast(dtype)
        to_int32 = np.dtype(dtype) == _INT32

        def compute(ctx, x):
            if in_host_memory(x) or to_int32:
                return self.from_host(host(ctx, self.to_host(x)))
            return self._call("cast", self.from_host(x), dtype)

        return compute

    def constant(self, value):
        value = np.asarray(value)
        if value.dtype.kind not in "biuf" or value.dtype == _INT32:  # host memory, as in TF
            return lambda ctx: value[()] if value.ndim == 0 else value
        cached = []

        def compute(ctx):
            if not cached:  # uploaded once per kernel, like TF's constant on a GPU
                cached.append(self._call("to_device", value))
            return cached[0]

        return compute

    def copy(self, x):
        if in_host_memory(x):
            return NUMPY.copy(x)
        return self._call("device_copy", self.from_host(x))

    def shape(self, x) -> tuple:
        return tuple(x.shape) if is_device_array(x) else np.shape(x)

    def reshape(self, x, shape: tuple):
        """A view of ``x`` in ``shape`` (numba builds it without a CUDA call); through the host
        where numba has no such view."""
        if not is_device_array(x):
            return NUMPY.reshape(x, shape)
        if tuple(x.shape) == tuple(shape):
            return x
        if shape:  # (numba has no view of rank 0)
            try:
                return x.reshape(*shape)
            except NotImplementedError:  # (not C-contiguous: never a minitf result)
                pass
        return self.from_host(np.reshape(self.to_host(x), shape))

    def to_host(self, x):
        if not is_device_array(x):
            return x
        value = self._call("to_host", x)
        return value[()] if isinstance(value, np.ndarray) and value.ndim == 0 else value

    def from_host(self, value):
        if is_device_array(value) or type(value) is VariableRef:
            return value
        value = np.asarray(value)
        if value.dtype == _INT32:
            return scalarize(value)  # stays in host memory
        return self._call("to_device", value)

    def on_host(self, compute):
        def on_card(ctx, ins):
            host = [v if type(v) is VariableRef else self.to_host(v) for v in ins]
            outs = compute(ctx, host)
            return tuple(v if type(v) is VariableRef else self.from_host(v) for v in outs)

        return on_card

    def __repr__(self):
        return "<CudaOps card=%s%s>" % (self._key, " (simulator)" if self._emulated else "")


_launchers_lock = threading.Lock()
_launchers = {}
_backends = {}


def backend_for_card(physical_id: int, emulated: bool) -> CudaOps:
    """The one backend of a card (emulated cards all share Numba's simulator)."""
    key = "simulator" if emulated else physical_id
    with _launchers_lock:
        ops = _backends.get(key)
        if ops is None:
            ops = _backends[key] = CudaOps(key, emulated)
        return ops


def _launcher_for(key, emulated):
    """The one thread that makes every CUDA call for a card (created on first use).

    With emulated cards the simulator is switched on first (``NUMBA_ENABLE_CUDASIM=1``); it
    patches module globals while a kernel runs, so all emulated cards share one launcher.
    """
    with _launchers_lock:
        launcher = _launchers.get(key)
        if launcher is None:
            if emulated:
                os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
            from minitf.kernels.cuda import CudaLauncher

            launcher = _launchers[key] = CudaLauncher(
                0 if emulated else key, name="GPU %s launcher" % key
            )
        return launcher
