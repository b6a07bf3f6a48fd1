"""The kernel registry: which device types can run an op, for which dtypes.

Book section: "Operations and kernels".  A kernel is the implementation of an op for one device
type and a set of dtypes.  The placer asks "which device types have a kernel for this op?"; the
runtime asks for the kernel of the device an op was placed on.  The GPU registrations mirror
TF's: e.g. ``VariableV2`` and ``Assign`` have no int32 GPU kernel, so the book's
``tf.Variable(3)`` pinned to ``/gpu:0`` cannot be placed.

A kernel *factory* is called once per (session, op, device) with ``(op, device)`` and returns a
``compute(ctx, inputs) -> tuple of outputs`` function (TF builds one OpKernel per node too).
"""

from minitf.framework import dtypes
from minitf.ops.op_def import get_op_def

DEVICE_PRIORITY = {"GPU": 210, "CPU": 60}

_KERNELS = {}  # op type -> [KernelDef]


class KernelDef:
    __slots__ = ("op_type", "device_type", "dtypes", "factory", "cost", "splittable")

    def __init__(self, op_type, device_type, dtype_set, factory, cost, splittable):
        self.op_type = op_type
        self.device_type = device_type
        self.dtypes = dtype_set  # frozenset of DType, or None for "any"
        self.factory = factory
        self.cost = cost  # "cheap" (may run inline) or "expensive" (always goes to the pool)
        self.splittable = splittable  # splits its work over the intra-op pool when large

    def matches(self, dtype):
        return self.dtypes is None or dtype is None or dtype in self.dtypes


def register(op_type, factory, cpu=None, gpu=None, cost="cheap", splittable=False):
    """Registers ``factory`` for CPU with dtypes ``cpu`` and for GPU with dtypes ``gpu``.

    ``cpu``/``gpu``: an iterable of DTypes, ``"any"`` (no constraint) or None (no kernel).
    """
    for device_type, allowed in (("CPU", cpu), ("GPU", gpu)):
        if allowed is None:
            continue
        dset = None if allowed == "any" else frozenset(allowed)
        _KERNELS.setdefault(op_type, []).append(
            KernelDef(op_type, device_type, dset, factory, cost, splittable))
    _lookup_cache.clear()


def _kernel_dtype(op):
    attr = get_op_def(op.type).type_attr
    dt = op._attrs.get(attr)
    return dt.base_dtype if isinstance(dt, dtypes.DType) else None


_lookup_cache = {}  # (op type, dtype) -> (supported types, {device type: KernelDef})


def _lookup(op):
    key = (op.type, _kernel_dtype(op))
    hit = _lookup_cache.get(key)
    if hit is None:
        kernels = {}
        for k in _KERNELS.get(op.type, ()):
            if k.matches(key[1]):
                kernels.setdefault(k.device_type, k)
        types = sorted(kernels, key=lambda t: -DEVICE_PRIORITY.get(t, 50))
        hit = _lookup_cache[key] = (types, kernels)
    return hit


def supported_device_types(op):
    """Device types with a kernel for ``op`` (its dtype attr included), highest priority first."""
    return list(_lookup(op)[0])


def find_kernel(op, device_type):
    return _lookup(op)[1].get(device_type)


def registered_devices():
    types = {k.device_type for ks in _KERNELS.values() for k in ks}
    return sorted(types, key=lambda t: -DEVICE_PRIORITY.get(t, 50))


def registered_kernels_text(op):
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
