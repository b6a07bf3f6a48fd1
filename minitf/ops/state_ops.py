"""Stateful ops of TF1 reference variables: ``VariableV2``, ``Assign``, ``AssignAdd`` ...

Book sections: "Placing Operations on Devices" (a variable is a ``VariableV2`` op; its
``Assign`` and ``read`` ops are colocated with it) and "Operations and kernels" (there is no GPU
kernel for an int32 ``VariableV2``, which is why the book's ``tf.Variable(3)`` on ``/gpu:0``
fails).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from minitf.framework import dtypes, tensor_shape
from minitf.framework.graph import DTypeLike, ShapeLike, Tensor, convert_to_tensor, name_scope
from minitf.ops.op_def import apply_op, register_op, shape_error

if TYPE_CHECKING:
    from minitf.ops.array_ops import TensorLike

register_op("VariableV2", is_stateful=True, has_container=True, type_attr="dtype")
register_op("Assign", ref_inputs=(True, False), is_stateful=True)
register_op("AssignAdd", ref_inputs=(True, False), is_stateful=True)
register_op("AssignSub", ref_inputs=(True, False), is_stateful=True)
register_op("IsVariableInitialized", ref_inputs=(True,), type_attr="dtype")
register_op("CountUpTo", ref_inputs=(True,), is_stateful=True)


def variable_op_v2(
    shape: ShapeLike,
    dtype: DTypeLike,
    name: str = "Variable",
    container: str = "",
    shared_name: str = "",
) -> Tensor:
    """The ``VariableV2`` op: its only output is a *reference* to the variable's storage."""
    dtype = dtypes.as_dtype(dtype).base_dtype
    shape = tensor_shape.as_shape(shape)
    op = apply_op(
        "VariableV2",
        [],
        [(dtype._as_ref, shape)],
        name,
        {"shape": shape, "dtype": dtype, "container": container, "shared_name": shared_name},
    )
    return op.outputs[0]


def _ref_and_value(op_type, ref, value, scope):
    ref = _as_ref(op_type, ref)
    value = convert_to_tensor(value, dtype=ref.dtype.base_dtype, name="value")
    if value.dtype.base_dtype != ref.dtype.base_dtype:
        raise TypeError(
            "Input 'value' of '%s' Op has type %s that does not match type %s of "
            "argument 'ref'." % (op_type, value.dtype.base_dtype.name, ref.dtype.base_dtype.name)
        )
    return ref, value


def _as_ref(op_type, ref):
    if hasattr(ref, "_ref") and not isinstance(ref, Tensor):
        ref = ref._ref()
    if not isinstance(ref, Tensor) or not ref.dtype.is_ref_dtype:
        raise TypeError(
            "'%s' Op requires that input 'ref' be a mutable tensor (e.g.: a tf.Variable)" % op_type
        )
    return ref


def assign(
    ref: TensorLike,
    value: TensorLike,
    validate_shape: bool | None = None,
    use_locking: bool | None = None,
    name: str | None = None,
) -> Tensor:
    """``Assign``: stores ``value`` in the variable ``ref``; returns the (reference) result."""
    validate = True if validate_shape is None else bool(validate_shape)
    with name_scope(name, "Assign", [ref, value]) as scope:
        ref, value = _ref_and_value("Assign", ref, value, scope)
        shape = value.shape
        if validate:
            if not ref.shape.is_compatible_with(value.shape):
                raise shape_error("Assign", scope, [ref, value], _shape_reason(ref, value))
            shape = ref.shape.merge_with(value.shape)
        op = apply_op(
            "Assign",
            [ref, value],
            [(ref.dtype, shape)],
            scope,
            {
                "T": ref.dtype.base_dtype,
                "validate_shape": validate,
                "use_locking": True if use_locking is None else bool(use_locking),
            },
        )
        return op.outputs[0]


def _shape_reason(ref, value):
    if (
        ref.shape.ndims is not None
        and value.shape.ndims is not None
        and ref.shape.ndims != value.shape.ndims
    ):
        return "Shapes must be equal rank, but are %d and %d" % (ref.shape.ndims, value.shape.ndims)
    for i, (a, b) in enumerate(zip(ref.shape.as_list(), value.shape.as_list())):
        if a is not None and b is not None and a != b:
            return (
                "Dimension %d in both shapes must be equal, but are %d and %d. Shapes are "
                "%s and %s." % (i, a, b, _brackets(ref.shape), _brackets(value.shape))
            )
    return "Shapes are incompatible"


def _brackets(shape):
    return "[%s]" % ",".join("?" if d is None else str(d) for d in shape.as_list())


def _update(op_type, default_name, ref, value, use_locking, name):
    with name_scope(name, default_name, [ref, value]) as scope:
        ref, value = _ref_and_value(op_type, ref, value, scope)
        if not ref.shape.is_compatible_with(value.shape):
            raise shape_error(op_type, scope, [ref, value], _shape_reason(ref, value))
        op = apply_op(
            op_type,
            [ref, value],
            [(ref.dtype, ref.shape)],
            scope,
            {"T": ref.dtype.base_dtype, "use_locking": bool(use_locking)},
        )
        return op.outputs[0]


def assign_add(
    ref: TensorLike, value: TensorLike, use_locking: bool | None = None, name: str | None = None
) -> Tensor:
    """``AssignAdd``: ``ref += value``."""
    return _update("AssignAdd", "AssignAdd", ref, value, use_locking, name)


def assign_sub(
    ref: TensorLike, value: TensorLike, use_locking: bool | None = None, name: str | None = None
) -> Tensor:
    """``AssignSub``: ``ref -= value``."""
    return _update("AssignSub", "AssignSub", ref, value, use_locking, name)


def is_variable_initialized(ref: TensorLike, name: str | None = None) -> Tensor:
    """``IsVariableInitialized``: a bool telling whether the variable holds a value yet."""
    ref = _as_ref("IsVariableInitialized", ref)
    op = apply_op(
        "IsVariableInitialized",
        [ref],
        [(dtypes.bool, tensor_shape.TensorShape([]))],
        name or "IsVariableInitialized",
        {"dtype": ref.dtype.base_dtype},
    )
    return op.outputs[0]


def count_up_to(ref: TensorLike, limit: int, name: str | None = None) -> Tensor:
    """``CountUpTo``: increments an integer variable and returns its old value; once it has
    reached ``limit``, ``OutOfRangeError("Reached limit of <limit>")`` (how ``num_epochs``
    ends an input producer, book: "Reading the Training Data Directly from the Graph")."""
    ref = _as_ref("CountUpTo", ref)
    with name_scope(name, "CountUpTo", [ref]) as scope:
        attrs = {"T": ref.dtype.base_dtype, "limit": int(limit)}
        op = apply_op(
            "CountUpTo", [ref], [(ref.dtype.base_dtype, tensor_shape.scalar())], scope, attrs
        )
    return op.outputs[0]
