"""How a kernel launch reaches a real card: through numba the first time, then directly.

Book section: "Operations and kernels" (what launching a GPU kernel costs the host).
``kernel[grid, block, stream](*args)`` goes through numba's dispatcher at every call: it types
each argument, looks up the compiled overload, wraps every array in a memory view and builds a
launch configuration, tens of microseconds of Python before the driver is asked to launch
anything (bench/README.md: about 90 us an element-wise launch on an H100's host).  TF's GPU
launch is one C++ call.

:func:`launch` lets numba make the first launch of a kernel for each combination of argument
types (numba compiles it then), and remembers what numba chose: the compiled function, and how
each argument becomes kernel parameters.  In numba's data model an array is seven or more
parameters (meminfo, parent, number of items, item size, data pointer, shape, strides) and a
scalar one C value of its numba type.  Later launches with arguments of the same types pack
those parameters themselves and call cuda.core's ``launch`` directly, as numba does last.
Under Numba's simulator nothing is compiled and every launch goes through numba.

minitf's element-wise and reduction kernels take flat arrays (``flat=True``): a C-contiguous
array of any rank is passed as one dimension of all its items, without building a reshaped
view for it.
"""

from __future__ import annotations

import ctypes

from numba import cuda

from minitf.kernels.tensor_ops import is_device_array

#: how an argument becomes parameters: an array seen flat, an array as it is
FLAT = "flat"
ARRAY = "array"


def _simulator_enabled():
    flag = getattr(cuda, "simulator_enabled", None)
    if flag is not None:
        return bool(flag)
    import numba  # pragma: no cover - numba's built-in CUDA target

    return bool(getattr(numba.config, "ENABLE_CUDASIM", False))  # pragma: no cover


SIMULATOR = _simulator_enabled()

_UNSEEN = object()
_plans: dict = {}  # (kernel, stream, flat, argument kinds) -> _Plan, or None: numba's way
_PLANS_KEPT = 4096
_streams: dict = {}  # numba stream -> cuda.core stream
_configs: dict = {}  # (grid, block) -> cuda.core LaunchConfig


def flat_view(arr):
    """A 1-D view of a C-contiguous device array (0-d arrays become length 1)."""
    if arr.ndim == 1:
        return arr
    if arr.ndim > 1 and not arr.is_c_contiguous():
        raise ValueError("minitf CUDA kernels need C-contiguous device arrays")
    return arr.reshape(arr.size)


class _Plan:
    """What numba chose for one kernel and kinds of arguments."""

    __slots__ = ("function", "packers", "send")

    def __init__(self, function, packers, send):
        self.function = function  # cuda.core's Kernel of the compiled overload
        self.packers = packers  # per argument: FLAT, ARRAY or a ctypes constructor
        self.send = send  # cuda.core's launch, as numba calls it


def launch(kernel, grid, block, stream, args, flat=True):
    """``kernel[grid, block, stream](*args)``, directly once numba has launched it for these
    kinds of arguments (with ``flat``, every array argument is seen as 1-D)."""
    if SIMULATOR:
        _through_numba(kernel, grid, block, stream, args, flat)
        return
    key = (kernel, stream, flat) + tuple(_kind(a, flat) for a in args)
    plan = _plans.get(key, _UNSEEN)
    if plan is _UNSEEN:
        numba_args = _through_numba(kernel, grid, block, stream, args, flat)
        if len(_plans) >= _PLANS_KEPT:
            _plans.clear()
        _plans[key] = plan_for(kernel, numba_args, flat)
    elif plan is None:
        _through_numba(kernel, grid, block, stream, args, flat)
    else:
        _direct(plan, grid, block, stream, args)


def _kind(value, flat):
    """What the compiled overload and the packing depend on: an array's dtype and layout (and
    rank unless flat: a flat array must be C-contiguous, else numba's launch refuses it), a
    scalar's Python type."""
    if is_device_array(value):
        if flat:
            return (value.dtype, value.is_c_contiguous())
        return (value.dtype, value.ndim, value.is_c_contiguous())
    return type(value)


def _through_numba(kernel, grid, block, stream, args, flat):
    numba_args = [flat_view(a) if flat and is_device_array(a) else a for a in args]
    kernel[grid, block, stream](*numba_args)
    return numba_args


def plan_for(kernel, numba_args, flat):
    """The plan of the overload numba compiled for ``numba_args``, or None where minitf cannot
    launch it itself (a debug or cooperative kernel, argument extensions, an argument type it
    does not pack, another numba-cuda's internals)."""
    try:
        from numba.cuda import dispatcher

        send, _ = dispatcher.launch, dispatcher.LaunchConfig
        overload = kernel.overloads[tuple(kernel.typeof_pyval(a) for a in numba_args)]
        if overload.debug or overload.cooperative or kernel.targetoptions.get("extensions"):
            return None
        function = overload._codelibrary.get_cufunc().kernel
        packers = tuple(packer_for(t, flat) for t in overload.argument_types)
    except (AttributeError, ImportError, KeyError, TypeError, NotImplementedError):
        return None
    if any(p is None for p in packers):
        return None
    return _Plan(function, packers, send)


def packer_for(numba_type, flat):
    """How an argument of ``numba_type`` becomes parameters (None: not one minitf packs)."""
    from numba.cuda import types

    if isinstance(numba_type, types.Array):
        if numba_type.layout != "C":
            return None
        return FLAT if flat and numba_type.ndim == 1 else ARRAY
    if isinstance(numba_type, types.Boolean):
        return bool
    if isinstance(numba_type, types.Integer):
        return getattr(ctypes, "c_%s" % numba_type)
    if numba_type == types.float64:
        return ctypes.c_double
    if numba_type == types.float32:
        return ctypes.c_float
    return None


def parameters(packers, args) -> list:
    """The kernel parameters of ``args``, as numba's ``_Kernel.launch`` would pass them."""
    params: list = []
    for how, a in zip(packers, args):
        if how is FLAT:
            n = a.size
            item = a.dtype.itemsize
            params += (0, 0, n, item, a.device_ctypes_pointer.value, n, item)
        elif how is ARRAY:
            params += (0, 0, a.size, a.dtype.itemsize, a.device_ctypes_pointer.value)
            params += a.shape
            params += a.strides
        else:
            params.append(how(a))
    return params


def _direct(plan, grid, block, stream, args):
    core_stream = _streams.get(stream)
    if core_stream is None:
        from numba.cuda.cudadrv import driver

        core_stream = _streams[stream] = driver._to_core_stream(stream)
    config = _configs.get((grid, block))
    if config is None:
        config = _configs[(grid, block)] = _config(grid, block)
    plan.send(core_stream, config, plan.function, *parameters(plan.packers, args))


def _config(grid, block):
    from numba.cuda import dispatcher
    from numba.cuda.errors import normalize_kernel_dimensions

    griddim, blockdim = normalize_kernel_dimensions(grid, block)
    if dispatcher.CUDA_CORE_GE_1_0:
        return dispatcher.LaunchConfig(
            grid=griddim, block=blockdim, shmem_size=0, is_cooperative=False
        )
    return dispatcher.LaunchConfig(
        grid=griddim, block=blockdim, shmem_size=0, cooperative_launch=False
    )
