"""The kernel registry: which device types can run an op, for which dtypes.

Book section: "Operations and kernels".  A kernel is the implementation of an op for one device
type and a set of dtypes.  The placer asks "which device types have a kernel for this op?"; the
runtime asks for the kernel of the device an op was placed on.  The GPU registrations mirror
TF's: e.g. ``VariableV2`` and ``Assign`` have no int32 GPU kernel, so the book's
``tf.Variable(3)`` pinned to ``/gpu:0`` cannot be placed.

A kernel *factory* is called once per (session, node, device) with ``(node, device)`` and
returns the node's compute function (TF builds one OpKernel per node too).  ``node`` offers
``name``, ``type`` and ``get_attr``; ``device`` its ``name``, ``backend`` (the
``tensor_ops.TensorOps`` the kernel computes with) and ``resource_manager``.  A kernel is

* synchronous: ``compute(ctx, inputs) -> tuple of outputs``, or
* asynchronous (``is_async=True``, TF's AsyncOpKernel): ``compute(ctx, inputs, done)`` returns at
  once and calls ``done(outputs)`` or ``done(None, error)`` later, from any thread.  A kernel
  that waits for something (a ``_Recv`` for its ``_Send``, a queue op for room) is asynchronous
  so that its wait holds no thread of the step.

A kernel registered with ``allocates=True`` returns new buffers and keeps no reference to its
inputs; one with ``forwards=(0, 1)`` can write its result into input 0 or 1 (the executor
hands it such an input only when the input dies with it: ``runtime/tensor_lifetime.py``).

``ctx`` is what the executor gives a step's kernels: ``parallel_for(n, fn)`` (a splittable
kernel's chunks on the intra-op pool), ``rendezvous`` (``_Send``/``_Recv``), ``args`` (the fed
values of ``_Arg`` nodes) and ``record_transfer`` (tracing).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from minitf.framework import dtypes
from minitf.framework import dtypes as D
from minitf.ops.op_def import get_op_def

DEVICE_PRIORITY = {"GPU": 210, "CPU": 60}

# The dtype lists of TF's kernel registrations.
FLOATS = (D.float16, D.float32, D.float64)
COMPLEX = (D.complex64, D.complex128)
INTS = (D.int8, D.int16, D.int32, D.int64, D.uint8, D.uint16)
NUMERIC = FLOATS + COMPLEX + INTS
ALL = NUMERIC + (D.bool, D.string)
GPU_MATH = FLOATS + COMPLEX + (D.int32, D.int64)
GPU_STATE = FLOATS + COMPLEX + (D.int64,)  # no int32 variables on GPUs (the book's error)
GPU_ARRAY = FLOATS + COMPLEX + (D.int32, D.int64, D.bool)

_KERNELS = {}  # op type -> [KernelDef]


class KernelDef:
    __slots__ = (
        "op_type",
        "device_type",
        "dtypes",
        "factory",
        "cost",
        "splittable",
        "is_async",
        "allocates",
        "forwards",
        "persistent",
    )

    def __init__(
        self,
        op_type,
        device_type,
        dtype_set,
        factory,
        cost,
        splittable,
        is_async=False,
        allocates=False,
        forwards=(),
        persistent=False,
    ):
        self.op_type = op_type
        self.device_type = device_type
        self.dtypes = dtype_set  # frozenset of DType, or None for "any"
        self.factory = factory
        # "cheap": runs inline unless its tensors are large; "expensive": always waits for a pool
        # thread; "inline": never does (TF's IsExpensive() false: _Send, _Recv, _Arg)
        self.cost = cost
        self.splittable = splittable  # splits its work over the intra-op pool when large
        self.is_async = is_async  # compute(ctx, inputs, done): completes through ``done``
        # its outputs are new buffers and it keeps no reference to its inputs
        self.allocates = allocates
        # input positions whose buffer it can write its result into: its compute function has
        # ``forwarding[p]``, the variant doing so (see runtime/tensor_lifetime.py)
        self.forwards = forwards
        # its outputs are the kernel's own, made once (TF's persistent tensors: a constant), not
        # charged to each step
        self.persistent = persistent

    def matches(self, dtype):
        return self.dtypes is None or dtype is None or dtype in self.dtypes


DtypesSpec = Iterable[dtypes.DType] | str | None


def register(
    op_type: str,
    factory: Callable[[Any, Any], Callable],
    cpu: DtypesSpec = None,
    gpu: DtypesSpec = None,
    cost: str = "cheap",
    splittable: bool = False,
    is_async: bool = False,
    allocates: bool = False,
    forwards: tuple[int, ...] = (),
    persistent: bool = False,
) -> None:
    """Registers ``factory`` for CPU with dtypes ``cpu`` and for GPU with dtypes ``gpu``.

    ``cpu``/``gpu``: an iterable of DTypes, ``"any"`` (no constraint) or None (no kernel).
    ``cost``: ``"cheap"``, ``"expensive"`` or ``"inline"`` (see KernelDef); ``allocates``,
    ``forwards`` and ``persistent``: what tensor lifetimes may rely on (KernelDef).
    """
    if cost not in ("cheap", "expensive", "inline"):
        raise ValueError("cost must be 'cheap', 'expensive' or 'inline', got %r" % (cost,))
    for device_type, allowed in (("CPU", cpu), ("GPU", gpu)):
        if allowed is None:
            continue
        dset = None if allowed == "any" else frozenset(allowed)
        _KERNELS.setdefault(op_type, []).append(
            KernelDef(
                op_type,
                device_type,
                dset,
                factory,
                cost,
                splittable,
                is_async,
                allocates,
                tuple(forwards),
                persistent,
            )
        )
    _lookup_cache.clear()


_lookup_cache = {}  # (op type, dtype attr) -> (supported types, {device type: KernelDef})


def _lookup(op):
    # keyed by the dtype attr as the op has it (a ref dtype too): no conversion on a hit
    op_type = op.type
    attr = op._attrs.get(get_op_def(op_type).type_attr)  # an Operation's or a step Node's
    key = (op_type, attr)
    try:
        return _lookup_cache[key]
    except (KeyError, TypeError):  # not seen yet; an attr value that is no DType
        pass
    is_dtype = isinstance(attr, dtypes.DType)
    dtype = attr.base_dtype if is_dtype else None
    kernels = {}
    for k in _KERNELS.get(op_type, ()):
        if k.matches(dtype):
            kernels.setdefault(k.device_type, k)
    types = tuple(sorted(kernels, key=lambda t: -DEVICE_PRIORITY.get(t, 50)))
    hit = (types, kernels)
    if is_dtype or attr is None:
        _lookup_cache[key] = hit
    return hit


def supported_device_types(op) -> list[str]:
    """Device types with a kernel for ``op`` (its dtype attr included), highest priority first."""
    return list(_lookup(op)[0])


def device_types(op) -> tuple[str, ...]:
    """``supported_device_types(op)`` as a tuple shared by every op of its type and dtype (the
    placer asks once per op of a graph)."""
    return _lookup(op)[0]


def find_kernel(op, device_type: str) -> KernelDef | None:
    """The kernel of ``op`` (an Operation or a step graph Node) for ``device_type``."""
    return _lookup(op)[1].get(device_type)


def registered_devices() -> list[str]:
    types = {k.device_type for ks in _KERNELS.values() for k in ks}
    return sorted(types, key=lambda t: -DEVICE_PRIORITY.get(t, 50))


def registered_kernels_text(op) -> str:
    """TF's ``Registered kernels:`` listing for an op type (one line per kernel)."""
    attr = get_op_def(op.type).type_attr
    lines = []
    for k in _KERNELS.get(op.type, ()):
        if k.dtypes is None:
            lines.append("  device='%s'" % k.device_type)
        else:
            names = ", ".join(d.enum_name for d in sorted(k.dtypes, key=lambda d: d.name))
            lines.append("  device='%s'; %s in [%s]" % (k.device_type, attr, names))
    return "\n".join(lines) if lines else "  <no registered kernels>"
