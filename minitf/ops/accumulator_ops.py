"""``tf.ConditionalAccumulator``: gradients pushed by replicas, averaged once enough are in (TF's
python/ops/data_flow_ops.py, ``ConditionalAccumulatorBase`` and ``ConditionalAccumulator``).

Book section: "Data parallelism" → "Synchronous updates".  The object holds the handle tensor
of its ``ResourceConditionalAccumulator`` op (TF 1.15 builds the resource variants: its
``forward_compatible`` dates have passed); each method adds one op taking that handle, with
TF's names: ``ResourceAccumulatorApplyGradient``, ``ResourceAccumulatorTakeGradient`` (it
waits: an asynchronous kernel), ``<name>_NumAccumulated``, ``ResourceAccumulatorSetGlobalStep``.
What TF's Python checks before a run is checked here (the gradient's dtype and static shape,
scalar steps); the rest is the kernels' (``kernels/accumulator_kernels.py``).
"""

from __future__ import annotations

from typing import Any

from minitf.framework import dtypes as dtypes_mod
from minitf.framework import tensor_shape
from minitf.framework.graph import Tensor, convert_to_tensor, name_scope
from minitf.ops import math_ops
from minitf.ops.op_def import apply_op, register_op, shape_error

register_op(
    "ResourceConditionalAccumulator", is_stateful=True, has_container=True, type_attr="dtype"
)
register_op("ResourceAccumulatorApplyGradient", is_stateful=True, type_attr="dtype")
register_op("ResourceAccumulatorTakeGradient", is_stateful=True, type_attr="dtype")
register_op("ResourceAccumulatorNumAccumulated", is_stateful=True)
register_op("ResourceAccumulatorSetGlobalStep", is_stateful=True)

_SCALAR = tensor_shape.TensorShape([])


def _check_rank_0(op_type, scope, inputs, position):
    """The op's shape function: input ``position`` must be a scalar."""
    ndims = inputs[position].shape.ndims
    if ndims is not None and ndims != 0:
        raise shape_error(op_type, scope, inputs, "Shape must be rank 0 but is rank %d" % ndims)


def _as_int64(value):
    return math_ops.cast(convert_to_tensor(value), dtypes_mod.int64)


class ConditionalAccumulatorBase:
    """What every accumulator offers over its handle: its dtype, count and global step."""

    def __init__(self, dtype, shape, accumulator_ref: Tensor):
        self._dtype = dtype
        if shape is not None:
            self._shape = tensor_shape.TensorShape(shape)
        else:
            self._shape = tensor_shape.unknown_shape()
        self._accumulator_ref = accumulator_ref
        self._name = accumulator_ref.op.name.split("/")[-1]

    @property
    def accumulator_ref(self) -> Tensor:
        return self._accumulator_ref

    @property
    def name(self) -> str:
        return self._accumulator_ref.op.name

    @property
    def dtype(self):
        return self._dtype

    def num_accumulated(self, name: str | None = None) -> Tensor:
        """``ResourceAccumulatorNumAccumulated``: the fresh gradients in now (int32)."""
        if name is None:
            name = "%s_NumAccumulated" % self._name
        with name_scope(name, None, [self._accumulator_ref]) as scope:
            outs = [(dtypes_mod.int32, _SCALAR)]
            op = apply_op("ResourceAccumulatorNumAccumulated", [self._accumulator_ref], outs, scope)
        return op.outputs[0]

    def set_global_step(self, new_global_step: Any, name: str | None = None):
        """``ResourceAccumulatorSetGlobalStep``: gradients of earlier steps become stale (going
        back logs a warning)."""
        step = _as_int64(new_global_step)
        op_type = "ResourceAccumulatorSetGlobalStep"
        with name_scope(name, op_type, [self._accumulator_ref, step]) as scope:
            inputs = [self._accumulator_ref, step]
            _check_rank_0(op_type, scope, inputs, 1)
            return apply_op(op_type, inputs, [], scope)


class ConditionalAccumulator(ConditionalAccumulatorBase):
    """``tf.ConditionalAccumulator(dtype, shape=None, shared_name=None,
    name="conditional_accumulator", reduction_type="MEAN")``."""

    def __init__(
        self,
        dtype,
        shape=None,
        shared_name: str | None = None,
        name: str = "conditional_accumulator",
        reduction_type: str = "MEAN",
    ):
        base = dtypes_mod.as_dtype(dtype)
        if reduction_type not in ("MEAN", "SUM"):
            raise ValueError(
                "Value for attr 'reduction_type' of \"%s\" is not in the list of allowed values: "
                '"MEAN", "SUM"' % reduction_type
            )
        attrs = {
            "dtype": base,
            "shape": tensor_shape.as_shape(shape)
            if shape is not None
            else tensor_shape.unknown_shape(),
            "container": "",
            "shared_name": shared_name or "",
            "reduction_type": reduction_type,
        }
        with name_scope(name) as scope:
            outs = [(dtypes_mod.resource, _SCALAR)]
            op = apply_op("ResourceConditionalAccumulator", [], outs, scope, attrs)
        super().__init__(dtype, shape, op.outputs[0])

    def apply_grad(self, grad: Any, local_step: Any = 0, name: str | None = None):
        """``ResourceAccumulatorApplyGradient``: adds ``grad`` computed at ``local_step``; a
        stale one (``local_step`` below the accumulator's step) is silently dropped."""
        grad = convert_to_tensor(grad, dtype=self._dtype)
        grad.shape.assert_is_compatible_with(self._shape)
        local_step = _as_int64(local_step)
        op_type = "ResourceAccumulatorApplyGradient"
        inputs = [self._accumulator_ref, local_step, grad]
        with name_scope(name, op_type, inputs) as scope:
            _check_rank_0(op_type, scope, inputs, 1)
            attrs = {"dtype": grad.dtype.base_dtype}
            return apply_op(op_type, inputs, [], scope, attrs)

    def take_grad(self, num_required: Any, name: str | None = None) -> Tensor:
        """``ResourceAccumulatorTakeGradient``: waits for ``num_required`` fresh gradients and
        returns their mean; the accumulator's step then goes up by one."""
        op_type = "ResourceAccumulatorTakeGradient"
        with name_scope(name, op_type, [self._accumulator_ref]) as scope:
            n = convert_to_tensor(num_required, dtype=dtypes_mod.int32, name="num_required")
            inputs = [self._accumulator_ref, n]
            _check_rank_0(op_type, scope, inputs, 1)
            base = dtypes_mod.as_dtype(self._dtype).base_dtype
            attrs = {"dtype": base}
            op = apply_op(op_type, inputs, [(base, self._shape)], scope, attrs)
        return op.outputs[0]
