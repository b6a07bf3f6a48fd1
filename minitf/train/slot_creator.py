"""Slot variables: an optimizer's extra state per variable (``w/Momentum``, ``w/Adam`` ...).

Book section: "Sharding Variables Across Multiple Parameter Servers" (TF's
``python/training/slot_creator.py``).  A slot of variable ``w`` is a non-trainable global
variable named ``<w's op name>/<optimizer name>`` (``_1``, ``_2`` ... when taken), made with
``get_variable`` inside ``colocate_with(w)`` (minitf: for variables of fully known shape
only): it gets ``_class=[b"loc:@w"]`` and ``w``'s device,
and, because ``colocate_with`` empties the device-function stack, a surrounding
``replica_device_setter`` is not asked where to put it: the slot simply follows ``w`` to its
ps task, where the update op that reads and writes both runs.
"""

from __future__ import annotations

from typing import Any

from minitf.framework import dtypes, tensor_shape
from minitf.framework.graph import DTypeLike, get_default_graph
from minitf.ops import init_ops, variable_scope
from minitf.ops.variables import Variable


def _unique_slot_name(default_name: str) -> str:
    """TF's ``variable_scope(None, default_name)`` uniquification: ``w/Momentum``, then
    ``w/Momentum_1`` ... (counted per variable scope, as TF counts default-named scopes)."""
    store = variable_scope._store()
    outer = store.scope.name
    key = (outer + "/" if outer else "") + default_name
    n = store.scope_counts.get(key, 0)
    store.scope_counts[key] = n + 1
    return default_name if n == 0 else "%s_%d" % (default_name, n)


def _create_slot_var(primary, name, initializer, shape, dtype):
    full = _unique_slot_name(primary.op.name + "/" + name)
    with get_default_graph().colocate_with(primary.op):
        return variable_scope.get_variable(
            full,
            shape=shape,
            dtype=dtype,
            initializer=initializer,
            trainable=False,
        )


def create_slot_with_initializer(
    primary: Variable,
    initializer: Any,
    shape: tensor_shape.TensorShape,
    dtype: DTypeLike,
    name: str,
) -> Variable:
    """A slot of ``primary`` of ``shape`` and ``dtype`` made by ``initializer``."""
    shape = tensor_shape.as_shape(shape)
    if not shape.is_fully_defined():
        raise ValueError(
            "Shape of a new variable (%s/%s) must be fully defined, but instead was %s."
            % (primary.op.name, name, shape)
        )
    return _create_slot_var(primary, name, initializer, shape.as_list(), dtypes.as_dtype(dtype))


def create_zeros_slot(primary: Variable, name: str, dtype: DTypeLike = None) -> Variable:
    """A slot of ``primary`` holding zeros of its shape and dtype (``<slot>/Initializer/zeros``)."""
    dtype = primary.dtype.base_dtype if dtype is None else dtypes.as_dtype(dtype)
    return create_slot_with_initializer(
        primary, init_ops.zeros_initializer(), primary.get_shape(), dtype, name
    )
