"""The CUDA backend: ``tensor_ops.TensorOps`` on numba.cuda, for real cards and the simulator.

Book section: "Operations and kernels".  On a real CUDA card (or with
``MINITF_GPU_BACKEND=cudasim``, Numba's simulator) a GPU device's kernels call this backend,
whose functions launch the numba.cuda kernels of ``cuda.py``.  Tensors stay on the card as numba
device arrays; they cross to the host only in a ``_Send`` to another device, a fetch or a feed
(``to_host`` / ``from_host``).  Every CUDA call goes through the card's
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


def is_device_array(v) -> bool:
    return hasattr(v, "copy_to_host")


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

    # -- the surface ---------------------------------------------------------------------------
    def map(self, fn: str):
        return lambda ctx, x, out=None: self._call("unary", fn, self.from_host(x), out)

    def zip(self, fn: str):
        return lambda ctx, x, y, out=None: self._call(
            "binary", fn, self.from_host(x), self.from_host(y), out
        )

    def zip_scalars(self, fn: str):
        return None  # scalars live on the card too: no host shortcut

    def reduce(self, fn: str, keep_dims: bool, dtype):
        return lambda ctx, x, axes: self._call(
            "reduce", fn, self.from_host(x), list(axes), keep_dims
        )

    def matmul(self, transpose_a: bool, transpose_b: bool):
        return lambda ctx, a, b: self._call(
            "matmul", self.from_host(a), self.from_host(b), transpose_a, transpose_b
        )

    def add_n(self):
        return lambda ctx, xs: self._call("add_n", [self.from_host(x) for x in xs])

    def cast(self, dtype):
        return lambda ctx, x: self._call("cast", self.from_host(x), dtype)

    def constant(self, value):
        value = np.asarray(value)
        if value.dtype.kind not in "biuf":  # strings stay on the host, as in TF
            return lambda ctx: value[()] if value.ndim == 0 else value
        cached = []

        def compute(ctx):
            if not cached:  # uploaded once per kernel, like TF's constant on a GPU
                cached.append(self._call("to_device", value))
            return cached[0]

        return compute

    def copy(self, x):
        return self._call("device_copy", self.from_host(x))

    def shape(self, x) -> tuple:
        return tuple(x.shape) if is_device_array(x) else np.shape(x)

    def to_host(self, x):
        if not is_device_array(x):
            return x
        value = self._call("to_host", x)
        return value[()] if isinstance(value, np.ndarray) and value.ndim == 0 else value

    def from_host(self, value):
        if is_device_array(value) or type(value) is VariableRef:
            return value
        return self._call("to_device", np.asarray(value))

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
