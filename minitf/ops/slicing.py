"""``x[1:, 0]``: Python indexing of tensors and variables, as TF's ``StridedSlice`` op.

Book section: none of its own -- indexing is everyday TF code (``tf.shape(x)[0]`` for a batch's
size, ``x[:, 0]`` for a column).  As TF's ``array_ops._slice_helper`` does, the index becomes
three int32 vectors (``begin``, ``end``, ``strides``: Consts ``strided_slice/stack``,
``stack_1``, ``stack_2``) and five bit masks; the op is ``strided_slice``.  What it selects is
``lib/strided_slice.py``'s, shared with the kernel; its gradient scatters the incoming gradient
into zeros of the input's shape (``StridedSliceGrad``).
"""

from __future__ import annotations

import numbers

import numpy as np

from minitf.framework import dtypes, tensor_shape
from minitf.framework.graph import Tensor, convert_to_tensor, name_scope
from minitf.lib.strided_slice import (
    MASK_ATTRS,
    Masks,
    SliceError,
    index_form,
    named_dims,
    numpy_index,
    result_shape,
)
from minitf.ops import array_ops
from minitf.ops.array_ops import TensorLike, _static_value
from minitf.ops.op_def import apply_op, register_op, shape_error

register_op("StridedSlice", type_attr="T")
register_op("StridedSliceGrad", type_attr="T")

_INDEX_ERROR = (
    "Only integers, slices (`:`), ellipsis (`...`), tf.newaxis (`None`) and scalar "
    "tf.int32/tf.int64 tensors are valid indices"
)


def _check_index(value):
    """TF's check: a Python int (a bool is one), a Dimension, or an int32/int64 tensor."""
    if isinstance(value, (numbers.Integral, tensor_shape.Dimension)):
        return value.value if isinstance(value, tensor_shape.Dimension) else value
    if isinstance(value, Tensor) and value.dtype.base_dtype in (dtypes.int32, dtypes.int64):
        return value
    raise TypeError(_INDEX_ERROR + ", got %r" % (value,))


def _spec(slice_spec):
    """(begin, end, strides, Masks) of a Python index, bit i for position i (TF's rules)."""
    if not isinstance(slice_spec, (list, tuple)):
        slice_spec = [slice_spec]
    begin, end, strides, bits = [], [], [], dict.fromkeys(Masks._fields, 0)
    for i, s in enumerate(slice_spec):
        if isinstance(s, slice):
            for bound, out, mask in ((s.start, begin, "begin"), (s.stop, end, "end")):
                if bound is None:
                    out.append(0)
                    bits[mask] |= 1 << i
                else:
                    out.append(_check_index(bound))
            strides.append(1 if s.step is None else _check_index(s.step))
        elif s is Ellipsis or s is None:
            begin.append(0), end.append(0), strides.append(1)
            bits["ellipsis" if s is Ellipsis else "new_axis"] |= 1 << i
        else:
            s = _check_index(s)
            begin.append(s), end.append(s + 1), strides.append(1)
            bits["shrink_axis"] |= 1 << i
    return begin, end, strides, Masks(**bits)


def slice_helper(tensor: TensorLike, slice_spec) -> Tensor:
    """``tensor[slice_spec]`` (``Tensor.__getitem__``, ``Variable.__getitem__``); a bool
    index (a Python bool, a bool tensor or array) is ``tf.boolean_mask``, as in TF."""
    if _is_bool_mask(slice_spec):
        return array_ops.boolean_mask(tensor, slice_spec)
    begin, end, strides, masks = _spec(slice_spec)
    tensor = convert_to_tensor(tensor)
    with name_scope(None, "strided_slice", [tensor]) as scope:
        if begin:
            vectors = [_vector(v, "stack") for v in (begin, end, strides)]
        else:
            vectors = [array_ops.constant([], dtype=dtypes.int32)] * 3
        return strided_slice(tensor, *vectors, *masks, name=scope)


def _is_bool_mask(spec):
    if isinstance(spec, (bool, np.bool_)):
        return True
    if isinstance(spec, Tensor):
        return spec.dtype.base_dtype == dtypes.bool
    return isinstance(spec, np.ndarray) and spec.dtype == bool


def _vector(values, name):
    """A list of ints as a Const (``stack``, ``stack_1``, ...); holding tensors, a Pack."""
    if all(isinstance(v, numbers.Integral) for v in values):
        return array_ops.constant(values, dtype=dtypes.int32, name=name)
    return array_ops.stack(values, name=name)


def strided_slice(
    input_: TensorLike,
    begin: TensorLike,
    end: TensorLike,
    strides: TensorLike = None,
    begin_mask: int = 0,
    end_mask: int = 0,
    ellipsis_mask: int = 0,
    new_axis_mask: int = 0,
    shrink_axis_mask: int = 0,
    var=None,
    name: str | None = None,
) -> Tensor:
    """``StridedSlice``: ``input_[begin:end:strides]`` per dimension, with TF's masks."""
    with name_scope(name, "StridedSlice", [input_, begin, end, strides]) as scope:
        x = convert_to_tensor(input_, name="input")
        if strides is None:
            strides = array_ops.ones_like(begin)
        named = zip((begin, end, strides), ("begin", "end", "strides"))
        vectors = [convert_to_tensor(v, name=n) for v, n in named]
        masks = Masks(begin_mask, end_mask, ellipsis_mask, new_axis_mask, shrink_axis_mask)
        shape = _static_shape(x, vectors, masks, scope)
        attrs = {"T": x.dtype.base_dtype, "Index": vectors[0].dtype.base_dtype}
        attrs.update(zip(MASK_ATTRS, masks))
        out = [(x.dtype.base_dtype, shape)]
        return apply_op("StridedSlice", [x] + vectors, out, scope, attrs).outputs[0]


def _static_shape(x, vectors, masks, scope):
    """The output's static shape (``lib/strided_slice.result_shape``), unknown when the input's
    rank is; with bounds known only at run time, what the masks alone say."""
    values = [_static_value(v) for v in vectors]
    if x.shape.ndims is None:
        return tensor_shape.unknown_shape()
    dims = x.shape.as_list()
    if any(v is None for v in values):  # bounds known only when run: each position's kind
        return _shape_from_masks(dims, vectors[0].shape, masks)
    try:
        index = numpy_index(dims, *(np.reshape(v, -1).tolist() for v in values), masks)
    except SliceError as e:
        raise shape_error("StridedSlice", scope, [x] + vectors, str(e)) from None
    return tensor_shape.TensorShape(result_shape(dims, index))


def _shape_from_masks(dims, spec_shape, masks):
    """The static shape when the bounds are tensors: what the masks alone say (a shrunk
    dimension goes, a new axis is 1, the ellipsis passes its dimensions through, a range's
    length is unknown)."""
    if spec_shape.ndims != 1 or spec_shape[0].value is None:
        return tensor_shape.unknown_shape()
    form = index_form(spec_shape[0].value, masks)
    if named_dims(form) > len(dims):
        return tensor_shape.unknown_shape()
    return tensor_shape.TensorShape(result_shape(dims, form))


def strided_slice_grad(shape, begin, end, strides, dy, masks: Masks, name=None) -> Tensor:
    """``StridedSliceGrad``: zeros of ``shape`` with ``dy`` where the slice took its values."""
    with name_scope(name, "StridedSliceGrad", [shape, begin, end, strides, dy]) as scope:
        dy = convert_to_tensor(dy, name="dy")
        out_shape = tensor_shape.unknown_shape()
        value = _static_value(shape)
        if value is not None:
            out_shape = tensor_shape.TensorShape(np.reshape(value, -1).tolist())
        attrs = {"T": dy.dtype.base_dtype, "Index": begin.dtype.base_dtype}
        attrs.update(zip(MASK_ATTRS, masks))
        inputs = [shape, begin, end, strides, dy]
        out = [(dy.dtype.base_dtype, out_shape)]
        return apply_op("StridedSliceGrad", inputs, out, scope, attrs).outputs[0]


Tensor.__getitem__ = slice_helper
