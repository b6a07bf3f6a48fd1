"""Variable kernels: ``VariableV2`` and the assignments that write to it.

Book sections: "Operations and kernels" (no int32 ``VariableV2`` kernel on GPUs: the book's
placement error) and "Sharing State Across Sessions Using Resource Containers" (a variable's
storage is a resource of its device, found by container and name).
"""

import numpy as np

from minitf.framework import dtypes as D
from minitf.framework import errors
from minitf.framework.resource_mgr import VariableRef, check_container_name
from minitf.kernels.registry import ALL, GPU_STATE, NUMERIC, register
from minitf.kernels.tensor_ops import shape_text


def _variable(op, device):
    container = op.get_attr("container")
    try:
        check_container_name(container)
    except errors.InvalidArgumentError:
        # TF's ContainerInfo::Init fails the kernel's first run, before any storage exists
        return lambda ctx, ins: check_container_name(container)
    name = op.get_attr("shared_name") or op.name
    np_dtype = op.get_attr("dtype").as_numpy_dtype
    shape = op.get_attr("shape")
    shape = tuple(shape.as_list()) if shape.is_fully_defined() else None
    ref = device.resource_manager.lookup_or_create(
        container,
        name,
        lambda: VariableRef(name, np_dtype, shape, getattr(device, "allocator", None)),
    )
    out = (ref,)
    return lambda ctx, ins: out


def _assign(op, device):
    validate = op.get_attr("validate_shape")
    backend = device.backend

    def compute(ctx, ins):
        ref, value = ins
        with ref.lock:
            # Like TF, an uninitialised variable already has its declared shape.
            lhs = backend.shape(ref.value) if ref.value is not None else ref.shape
            rhs = backend.shape(value)
            if validate and lhs is not None and tuple(lhs) != tuple(rhs):
                raise errors.InvalidArgumentError(
                    None,
                    None,
                    "Assign requires shapes of both tensors to match. lhs shape= %s "
                    "rhs shape= %s" % (shape_text(lhs), shape_text(rhs)),
                )
            ref.set(backend.copy(value))
        return (ref,)

    return compute


def _update(fn):
    def factory(op, device):
        backend = device.backend
        f = backend.zip(fn)

        def compute(ctx, ins):
            ref, delta = ins
            with ref.lock:
                old = ref.read()
                if tuple(backend.shape(old)) != tuple(backend.shape(delta)):
                    raise errors.InvalidArgumentError(
                        None,
                        None,
                        "Must have the same shape. lhs shape= %s rhs shape= %s"
                        % (shape_text(backend.shape(old)), shape_text(backend.shape(delta))),
                    )
                ref.set(f(ctx, old, delta))
            return (ref,)

        return compute

    return factory


register("VariableV2", _variable, cpu=ALL, gpu=GPU_STATE)
register("Assign", _assign, cpu=ALL, gpu=GPU_STATE)
register("AssignAdd", _update("add"), cpu=NUMERIC, gpu=GPU_STATE)
register("AssignSub", _update("sub"), cpu=NUMERIC, gpu=GPU_STATE)
register(
    "IsVariableInitialized",
    lambda op, device: lambda ctx, ins: (np.bool_(ins[0].value is not None),),
    cpu=ALL,
    gpu=GPU_STATE,
)


def _count_up_to(op, device):
    """``CountUpTo``: the old value, the variable one higher; at the limit an error."""
    limit = op.get_attr("limit")

    def compute(ctx, ins):
        ref = ins[0]
        with ref.lock:
            old = ref.read()
            if old >= limit:
                raise errors.OutOfRangeError(None, None, "Reached limit of %d" % limit)
            ref.set(np.asarray(old + 1, dtype=old.dtype))
        return (np.asarray(old).copy()[()],)

    return compute


register("CountUpTo", _count_up_to, cpu=(D.int32, D.int64))
