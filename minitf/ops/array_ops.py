"""Array ops: constants, placeholders, identity, reshaping and joining.

Book sections: "Placing Operations on Devices" (constants and placeholders are the "generator"
nodes that the simple placer puts next to their consumer) and every example that feeds data.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from minitf.framework import dtypes, tensor_shape
from minitf.framework.graph import (
    DTypeLike,
    ShapeLike,
    Tensor,
    convert_to_tensor,
    name_scope,
    register_tensor_conversion_function,
)
from minitf.ops.op_def import apply_op, register_op, shape_error

# What the annotations of the op constructors call a value that becomes a tensor (Any: kept
# simple): a Tensor, a Variable, or what convert_to_tensor converts: 3.0, [1, 2], numpy arrays ...
TensorLike = Any

register_op("Const", type_attr="dtype")
register_op("Placeholder", type_attr="dtype")
register_op("Identity")
register_op("ExpandDims")
register_op("ConcatV2")
register_op("Reshape")
register_op("Fill")
register_op("Pack")
for _t in (
    "Shape",
    "Size",
    "Rank",
    "ZerosLike",
    "OnesLike",
    "Tile",
    "StopGradient",
    "PreventGradient",
):
    register_op(_t)
register_op("BroadcastGradientArgs")
for _t in ("LogicalNot", "Where", "Squeeze"):
    register_op(_t)
register_op("GatherV2", type_attr="Tparams")


def _check_elements(raw: np.ndarray, value: Any, dtype: dtypes.DType) -> None:
    """TF's errors for elements a constant of ``dtype`` cannot hold: None, or a number where
    strings are expected."""
    if raw.dtype != object:
        if dtype == dtypes.string and raw.dtype.kind not in "US" and raw.size:
            bad = raw.reshape(-1)[0].item()
            raise TypeError(
                "Expected string, got %r of type '%s' instead." % (bad, type(bad).__name__)
            )
        return
    if value is None:
        raise ValueError("None values not supported.")
    for v in raw.reshape(-1):
        if v is None or (
            dtype == dtypes.string and not isinstance(v, (str, bytes, np.str_, np.bytes_))
        ):
            raise TypeError(
                "Expected %s, got %r of type '%s' instead." % (dtype.name, v, type(v).__name__)
            )


def _const_array(value, dtype, shape, verify_shape):
    if dtype is None:
        dtype = dtypes.infer_dtype(value)
    np_dtype = dtype.as_numpy_dtype
    raw = np.asarray(value, dtype=object if dtype == dtypes.string else None)
    _check_elements(raw, value, dtype)
    if dtype.is_integer or dtype.is_bool:
        if raw.dtype.kind in "fc" and raw.size and not np.all(np.mod(raw.real, 1) == 0):
            bad = raw.reshape(-1)[np.argmax(np.mod(raw.real.reshape(-1), 1) != 0)]
            raise TypeError(
                "Expected %s, got %r of type '%s' instead."
                % (dtype.name, bad.item(), type(bad.item()).__name__)
            )
    if raw.dtype.kind in "US" and dtype != dtypes.string:
        raise TypeError(
            "Expected %s, got %r of type 'str' instead." % (dtype.name, raw.reshape(-1)[0].item())
        )
    if dtype == dtypes.string:
        raw = np.vectorize(_as_bytes, otypes=[object])(raw) if raw.size else raw
    try:
        arr = np.array(raw, dtype=np_dtype)
    except (TypeError, ValueError, OverflowError):  # a dict, a set, an object: TF's text
        raise TypeError(
            "Failed to convert object of type %s to Tensor. Contents: %s. Consider "
            "casting elements to a supported type." % (type(value), value)
        ) from None
    if shape is not None:
        shape = tuple(tensor_shape.as_shape(shape).as_list())
        size = int(np.prod(shape, dtype=np.int64))
        if verify_shape and arr.shape != shape:
            raise TypeError("Expected Tensor's shape: %s, got %s." % (shape, arr.shape))
        if arr.size == size:
            arr = arr.reshape(shape)
        elif arr.size == 1:
            arr = np.full(shape, arr.reshape(-1)[0], dtype=np_dtype)
        elif arr.size < size:
            if arr.size == 0:
                raise ValueError(
                    "Cannot create a tensor of shape %s from an empty value." % (shape,)
                )
            flat = np.concatenate(
                [arr.reshape(-1), np.repeat(arr.reshape(-1)[-1:], size - arr.size)]
            )
            arr = flat.reshape(shape)
        else:
            raise ValueError(
                "Too many elements provided. Needed at most %d, but received %d" % (size, arr.size)
            )
    return arr, dtype


def _as_bytes(x):
    """TF strings are bytes: ``sess.run(tf.constant("hi"))`` gives ``b'hi'``."""
    return x.encode("utf-8") if isinstance(x, str) else x


def constant(
    value: TensorLike,
    dtype: DTypeLike = None,
    shape: ShapeLike = None,
    name: str = "Const",
    verify_shape: bool = False,
) -> Tensor:
    """A ``Const`` op holding ``value`` (a Python or numpy value) with an optional dtype/shape."""
    if dtype is not None:
        dtype = dtypes.as_dtype(dtype)
    arr, dtype = _const_array(value, dtype, shape, verify_shape)
    op = apply_op(
        "Const",
        [],
        [(dtype, tensor_shape.TensorShape(arr.shape))],
        name,
        {"value": arr, "dtype": dtype},
    )
    return op.outputs[0]


def _constant_conversion(value, dtype=None, name=None, as_ref=False):
    return constant(value, dtype=dtype, name=name or "Const")


def _nested_tensor_dtype(values: Sequence[Any]) -> dtypes.DType | None:
    """The dtype of the first tensor in nested lists/tuples (None when they hold none)."""
    for v in values:
        if isinstance(v, Tensor):
            return v.dtype.base_dtype
        if isinstance(v, (list, tuple)):
            found = _nested_tensor_dtype(v)
            if found is not None:
                return found
    return None


def _autopack(values: Sequence[Any], dtype: dtypes.DType, name: str) -> Any:
    """TF's autopacking: a nested list holding tensors becomes ``Pack`` ops named ``packed``."""
    with name_scope(name) as scope:
        elems, must_pack = [], False
        for i, v in enumerate(values):
            if isinstance(v, (list, tuple)):
                v = _autopack(v, dtype, str(i))
            if isinstance(v, Tensor):
                if v.dtype.base_dtype != dtype:
                    raise TypeError(
                        "Cannot convert a list containing a tensor of dtype %s to %s "
                        "(Tensor is: %r)" % (v.dtype, dtype, v)
                    )
                must_pack = True
            elems.append(v)
        if not must_pack:
            return elems
        tensors = [
            v if isinstance(v, Tensor) else constant(v, dtype=dtype, name=str(i))
            for i, v in enumerate(elems)
        ]
        return stack(tensors, name=scope)


def _autopacking_conversion(value, dtype=None, name=None, as_ref=False):
    found = _nested_tensor_dtype(value)
    if found is None:
        return NotImplemented  # no tensor inside: a constant
    return _autopack(value, dtypes.as_dtype(dtype or found).base_dtype, name or "packed")


# Python and numpy values become constants wherever a tensor is expected (TF's priorities: lists
# and tuples holding tensors packed at 99, other lists and tuples at 100, anything else last,
# at 200).
register_tensor_conversion_function((list, tuple), _autopacking_conversion, 99)
register_tensor_conversion_function((list, tuple), _constant_conversion, 100)
register_tensor_conversion_function(object, _constant_conversion, 200)


def placeholder(dtype: DTypeLike, shape: ShapeLike = None, name: str | None = None) -> Tensor:
    """A ``Placeholder``: a tensor whose value must be fed to ``Session.run``."""
    dtype = dtypes.as_dtype(dtype)
    shape = tensor_shape.as_shape(shape) if shape is not None else tensor_shape.unknown_shape()
    op = apply_op(
        "Placeholder", [], [(dtype, shape)], name or "Placeholder", {"dtype": dtype, "shape": shape}
    )
    return op.outputs[0]


def identity(input: TensorLike, name: str | None = None) -> Tensor:  # noqa: A002 - TF's name
    """``Identity``: the same value, possibly on another device (a cheap way to move a tensor)."""
    if not isinstance(input, Tensor):
        input = convert_to_tensor(input)  # noqa: A001 - the argument, converted
    dt = input.dtype.base_dtype
    op = apply_op("Identity", [input], [(dt, input.shape)], name or "Identity", {"T": dt})
    return op.outputs[0]


def _int_const(value, name):
    return constant(value, dtype=dtypes.int32, name=name)


def _static_value(t):
    """The numpy value of a tensor made by ``constant`` (None for anything computed)."""
    if t.op.type == "Const":
        return t.op.get_attr("value")
    return None


def expand_dims(
    input: TensorLike,  # noqa: A002 - TF's argument name
    axis: TensorLike = None,
    name: str | None = None,
    dim: TensorLike = None,
) -> Tensor:
    """``ExpandDims``: inserts a dimension of size 1 at ``axis``."""
    if axis is None:
        axis = dim
    if axis is None:
        raise ValueError("Must specify an axis argument to tf.expand_dims()")
    with name_scope(name, "ExpandDims", [input]) as scope:
        input = convert_to_tensor(input, name="input")  # noqa: A001 - the argument, converted
        axis_t = convert_to_tensor(axis, dtype=dtypes.int32, name="dim")
        shape = tensor_shape.unknown_shape()
        a = _static_value(axis_t)
        if input.shape.ndims is not None and a is not None:
            rank = input.shape.ndims
            a = int(a)
            if not -rank - 1 <= a <= rank:
                raise shape_error(
                    "ExpandDims",
                    scope,
                    [input, axis_t],
                    "Tried to expand dim index %d for tensor with %d dimensions." % (a, rank),
                )
            dims = list(input.shape.dims)
            dims.insert(a if a >= 0 else rank + 1 + a, 1)
            shape = tensor_shape.TensorShape(dims)
        dt = input.dtype.base_dtype
        return apply_op("ExpandDims", [input, axis_t], [(dt, shape)], scope, {"T": dt}).outputs[0]


def concat(values: TensorLike, axis: TensorLike, name: str | None = "concat") -> Tensor:
    """``ConcatV2``: joins tensors along ``axis``."""
    if not isinstance(values, (list, tuple)):
        values = [values]
    if len(values) == 1:
        with name_scope(name) as scope:
            convert_to_tensor(axis, dtype=dtypes.int32, name="concat_dim")
            return identity(values[0], name=scope)
    with name_scope(name, "concat", values) as scope:
        values = [convert_to_tensor(v, name="values_%d" % i) for i, v in enumerate(values)]
        dt = values[0].dtype.base_dtype
        for v in values[1:]:
            if v.dtype.base_dtype != dt:
                raise TypeError(
                    "Tensors in list passed to 'values' of 'ConcatV2' Op have types "
                    "[%s] that don't all match."
                    % ", ".join(x.dtype.base_dtype.name for x in values)
                )
        axis_t = convert_to_tensor(axis, dtype=dtypes.int32, name="axis")
        shape = _concat_shape(values, axis_t, scope)
        return apply_op(
            "ConcatV2", values + [axis_t], [(dt, shape)], scope, {"T": dt, "N": len(values)}
        ).outputs[0]


def _concat_shape(values, axis_t, scope):
    """The static shape of a concatenation (unknown unless the axis and every rank are);
    TF's shape errors for mismatched ranks, an axis out of range or unequal dimensions."""
    a = _static_value(axis_t)
    if a is None or any(v.shape.ndims is None for v in values):
        return tensor_shape.unknown_shape()
    inputs = values + [axis_t]
    rank = values[0].shape.ndims
    a = int(a)
    if any(v.shape.ndims != rank for v in values):
        raise shape_error(
            "ConcatV2",
            scope,
            inputs,
            "Shape must be rank %d but is rank %d"
            % (rank, next(v.shape.ndims for v in values if v.shape.ndims != rank)),
        )
    if not -rank <= a < rank:
        raise shape_error(
            "ConcatV2",
            scope,
            inputs,
            "ConcatOp : Expected concatenating dimensions in the "
            "range [%d, %d), but got %d" % (-rank, rank, a),
        )
    a %= rank
    dims = list(values[0].shape.as_list())
    for v in values[1:]:
        for i, d in enumerate(v.shape.as_list()):
            if i == a:
                dims[i] = None if dims[i] is None or d is None else dims[i] + d
            elif dims[i] is not None and d is not None and dims[i] != d:
                raise shape_error(
                    "ConcatV2",
                    scope,
                    inputs,
                    "Dimension %d in both shapes must be equal, but "
                    "are %d and %d. Shapes are %s and %s."
                    % (i, dims[i], d, values[0].shape, v.shape),
                )
            elif dims[i] is None:
                dims[i] = d
    return tensor_shape.TensorShape(dims)


def reshape(tensor: TensorLike, shape: TensorLike, name: str | None = None) -> Tensor:
    """``Reshape``: the same elements in a new shape (one dimension may be -1)."""
    with name_scope(name, "Reshape", [tensor]) as scope:
        tensor = convert_to_tensor(tensor, name="tensor")
        shape_t = convert_to_tensor(shape, dtype=dtypes.int32, name="shape")
        target = _static_value(shape_t)
        out = tensor_shape.unknown_shape()
        if target is not None:
            target = [int(d) for d in np.reshape(target, -1)]
            if sum(d == -1 for d in target) > 1:
                raise shape_error(
                    "Reshape",
                    scope,
                    [tensor, shape_t],
                    "Cannot infer multiple unknown dimensions in shape %s" % target,
                )
            n = tensor.shape.num_elements()
            known = int(np.prod([d for d in target if d != -1], dtype=np.int64))
            if n is not None:
                if -1 in target:
                    if known == 0 or n % known:
                        raise shape_error(
                            "Reshape",
                            scope,
                            [tensor, shape_t],
                            "Cannot reshape a tensor with %d elements to shape %s" % (n, target),
                        )
                    target = [n // known if d == -1 else d for d in target]
                elif known != n:
                    raise shape_error(
                        "Reshape",
                        scope,
                        [tensor, shape_t],
                        "Cannot reshape a tensor with %d elements to shape %s "
                        "(%d elements)" % (n, target, known),
                    )
            out = tensor_shape.TensorShape([None if d == -1 else d for d in target])
        dt = tensor.dtype.base_dtype
        return apply_op("Reshape", [tensor, shape_t], [(dt, out)], scope, {"T": dt}).outputs[0]


def _shape_from_tensor(dims_t: Tensor) -> tensor_shape.TensorShape:
    """The static shape a 1-D shape tensor describes, as far as the graph knows it: a constant's
    value, the input shape of a ``Shape`` op, else only how many dimensions (TF's
    ``constant_value_as_shape``, as shape functions use it)."""
    d = _static_value(dims_t)
    if d is not None:
        return tensor_shape.TensorShape([int(x) for x in np.reshape(d, -1)])
    if dims_t.op.type == "Shape":
        return dims_t.op.inputs[0].shape
    n = dims_t.shape[0] if dims_t.shape.ndims == 1 else None
    return tensor_shape.unknown_shape() if n is None else tensor_shape.TensorShape([None] * n)


def fill(dims: TensorLike, value: TensorLike, name: str | None = None) -> Tensor:
    """``Fill``: a tensor of shape ``dims`` filled with ``value`` (made when the step runs)."""
    with name_scope(name, "Fill", [dims, value]) as scope:
        if isinstance(dims, Tensor) and dims.dtype.base_dtype == dtypes.int64:
            dims_t = dims
        elif isinstance(dims, (list, tuple)) and any(
            isinstance(d, Tensor) and d.dtype.base_dtype == dtypes.int64 for d in dims
        ):  # TF packs a list holding an int64 tensor as int64 (Fill's index_type)
            dims_t = convert_to_tensor(dims, dtype=dtypes.int64, name="dims")
        else:
            dims_t = convert_to_tensor(dims, dtype=dtypes.int32, name="dims")
        value_t = convert_to_tensor(value, name="value")
        shape = _shape_from_tensor(dims_t)
        dt = value_t.dtype.base_dtype
        attrs = {"T": dt, "index_type": dims_t.dtype.base_dtype}
        return apply_op("Fill", [dims_t, value_t], [(dt, shape)], scope, attrs).outputs[0]


def zeros(shape: TensorLike, dtype: DTypeLike = dtypes.float32, name: str | None = None) -> Tensor:
    """A tensor of zeros: a ``Const`` below 1,000 elements, else a ``Fill`` (as TF: a big
    constant would be built in host memory and copied into every GraphDef)."""
    dtype = dtypes.as_dtype(dtype).base_dtype
    return _filled(shape, dtype, name, "zeros", False if dtype == dtypes.bool else 0)


def ones(shape: TensorLike, dtype: DTypeLike = dtypes.float32, name: str | None = None) -> Tensor:
    """A tensor of ones: a ``Const`` below 1,000 elements, else a ``Fill`` (as TF)."""
    dtype = dtypes.as_dtype(dtype).base_dtype
    return _filled(shape, dtype, name, "ones", True if dtype == dtypes.bool else 1)


def _shape_as_tensor(shape: TensorLike) -> Tensor:
    """A static shape as TF's ``shape_as_tensor`` Const (int64 if a dimension needs it);
    ValueError for a partly known shape."""
    dims = tensor_shape.as_shape(shape).as_list()  # TypeError/ValueError: not a static shape
    if None in dims:
        raise ValueError("Cannot convert a partially known TensorShape to a Tensor: %s" % shape)
    dt = dtypes.int64 if any(d >= 2**31 for d in dims) else dtypes.int32
    return constant(dims, dtype=dt, name="shape_as_tensor")


def _filled(shape, dtype, name, default_name, value):
    """TF's zeros/ones: a Const when the static shape holds fewer than 1,000 elements, else
    ``Fill(shape_as_tensor, Const)``; a shape given as a tensor is always filled."""
    with name_scope(name, default_name, [shape]) as scope:
        if not isinstance(shape, Tensor):
            try:
                dims = tensor_shape.as_shape(shape).as_list()
                if None not in dims and math.prod(dims) < 1000:
                    return constant(value, dtype=dtype, shape=dims, name=scope)
                shape = _shape_as_tensor(shape)
            except (TypeError, ValueError):  # a list holding tensors
                shape = convert_to_tensor(shape, dtype=dtypes.int32)
        if shape.shape.ndims == 0:
            shape = reshape(shape, [-1])  # a vector of dimensions
        return fill(shape, constant(value, dtype=dtype), name=scope)


def stack(values: Sequence[TensorLike], axis: int = 0, name: str | None = "stack") -> Tensor:
    """``Pack``: stacks same-shaped tensors along a new axis.  A list with no tensor in it
    (an empty one too) is a ``Const`` of that name, as TF makes it along axis 0."""
    if axis == 0 and not any(
        isinstance(v, Tensor) or hasattr(v, "_as_graph_element") for v in values
    ):
        return convert_to_tensor(list(values), name=name or "stack")
    with name_scope(name, "stack", values) as scope:
        values = [convert_to_tensor(v, name="values_%d" % i) for i, v in enumerate(values)]
        if not values:
            raise ValueError("stack requires at least one tensor")
        dt = values[0].dtype.base_dtype
        shape = values[0].shape
        for v in values[1:]:
            if v.dtype.base_dtype != dt:
                raise TypeError(
                    "Tensors in list passed to 'values' of 'Pack' Op have types "
                    "[%s] that don't all match."
                    % ", ".join(x.dtype.base_dtype.name for x in values)
                )
            if not shape.is_compatible_with(v.shape):
                raise ValueError("Shapes %s and %s are incompatible" % (shape, v.shape))
            shape = shape.merge_with(v.shape)
        out = tensor_shape.unknown_shape()
        if shape.ndims is not None:
            rank = shape.ndims
            if not -rank - 1 <= axis <= rank:
                raise ValueError("axis = %d not in [%d, %d)" % (axis, -rank - 1, rank + 1))
            dims = list(shape.as_list())
            dims.insert(axis if axis >= 0 else rank + 1 + axis, len(values))
            out = tensor_shape.TensorShape(dims)
        return apply_op(
            "Pack", values, [(dt, out)], scope, {"T": dt, "N": len(values), "axis": axis}
        ).outputs[0]


# -- the ops gradients are built from -------------------------------------------------------
# Book section: "Training".  ``tf.gradients`` reads shapes at run time (``Shape``), broadcasts
# a gradient back (``Tile``), finds the axes a broadcast added (``BroadcastGradientArgs``) and
# fills the gradient of an output nothing flowed back to (``ZerosLike``).


def shape(
    input: TensorLike,  # noqa: A002 - TF's argument name
    name: str | None = None,
    out_type: DTypeLike = dtypes.int32,
) -> Tensor:
    """``Shape``: the run-time shape of ``input`` as a 1-D int32 (or int64) tensor.  As in TF 1.15
    (``shape_internal(optimize=True)``), a shape known in full when the graph is built is a
    ``Const`` of that name instead: nothing is left to compute at run time."""
    return shape_internal(input, name, optimize=True, out_type=out_type)


def shape_internal(
    input: TensorLike,  # noqa: A002 - TF's argument name
    name: str | None = None,
    optimize: bool = True,
    out_type: DTypeLike = dtypes.int32,
) -> Tensor:
    """``tf.shape``; with ``optimize=False`` always the ``Shape`` op, even for a shape known
    when the graph is built (the zeros of a ``tf.cond`` gradient need it run in the branch)."""
    with name_scope(name, "Shape", [input]) as scope:
        x = convert_to_tensor(input, name="input")
        out_type = dtypes.as_dtype(out_type).base_dtype
        if optimize and x.shape.is_fully_defined():
            return constant(x.shape.as_list(), dtype=out_type, name=scope)
        dims = tensor_shape.TensorShape([x.shape.ndims])
        attrs = {"T": x.dtype.base_dtype, "out_type": out_type}
        return apply_op("Shape", [x], [(out_type, dims)], scope, attrs).outputs[0]


def size(
    input: TensorLike,  # noqa: A002 - TF's argument name
    name: str | None = None,
    out_type: DTypeLike = dtypes.int32,
) -> Tensor:
    """``Size``: the number of elements of ``input`` (an int32 scalar by default); a ``Const``
    when the graph already knows it (every dimension known, or one of them 0), as in TF 1.15."""
    with name_scope(name, "Size", [input]) as scope:
        x = convert_to_tensor(input, name="input")
        out_type = dtypes.as_dtype(out_type).base_dtype
        dims = x.shape.as_list() if x.shape.ndims is not None else [None]
        if 0 in dims or None not in dims:
            return constant(x.shape.num_elements() or 0, dtype=out_type, name=scope)
        attrs = {"T": x.dtype.base_dtype, "out_type": out_type}
        return apply_op("Size", [x], [(out_type, tensor_shape.scalar())], scope, attrs).outputs[0]


def rank(input: TensorLike, name: str | None = None) -> Tensor:  # noqa: A002 - TF's name
    """``Rank``: how many dimensions ``input`` has, an int32 scalar; a ``Const`` when the graph
    knows it, as in TF 1.15."""
    with name_scope(name, "Rank", [input]) as scope:
        x = convert_to_tensor(input, name="input")
        if x.shape.ndims is not None:
            return constant(x.shape.ndims, dtype=dtypes.int32, name=scope)
        return rank_op(x, scope)


def rank_op(x: Tensor, name: str = "Rank") -> Tensor:
    """The ``Rank`` op itself, never folded (TF's ``gen_array_ops.rank``)."""
    out = (dtypes.int32, tensor_shape.scalar())
    return apply_op("Rank", [x], [out], name, {"T": x.dtype.base_dtype}).outputs[0]


def zeros_like(
    tensor: TensorLike, dtype: DTypeLike = None, name: str | None = None, optimize: bool = True
) -> Tensor:
    """Zeros of ``tensor``'s shape (and dtype, unless ``dtype`` is given), as TF 1.15 makes
    them: a ``zeros`` constant named ``zeros_like`` when the shape is known (and
    ``optimize``), else the ``ZerosLike`` op (a ``Fill`` of its ``Shape`` for another dtype)."""
    with name_scope(name, "zeros_like", [tensor]) as scope:
        x = convert_to_tensor(tensor, name="tensor")
        dt = dtypes.as_dtype(dtype).base_dtype if dtype is not None else x.dtype.base_dtype
        if optimize and x.shape.is_fully_defined():
            return zeros(x.shape.as_list(), dtype=dt, name=scope)
        if dt != x.dtype.base_dtype:
            return zeros(shape_internal(x, optimize=optimize), dtype=dt, name=scope)
        return apply_op("ZerosLike", [x], [(dt, x.shape)], scope, {"T": dt}).outputs[0]


def ones_like(
    tensor: TensorLike, dtype: DTypeLike = None, name: str | None = None, optimize: bool = True
) -> Tensor:
    """Ones of ``tensor``'s shape (and dtype, unless ``dtype`` is given), as TF 1.15 makes
    them: a ``Fill`` named ``ones_like`` of ``ones_like/Shape`` (a ``Const`` when the shape is
    known and ``optimize``) with ``ones_like/Const``."""
    with name_scope(name, "ones_like", [tensor]) as scope:
        x = convert_to_tensor(tensor, name="tensor")
        dt = dtypes.as_dtype(dtype).base_dtype if dtype is not None else x.dtype.base_dtype
        out = ones(shape_internal(x, optimize=optimize), dtype=dt, name=scope)
        out.set_shape(x.shape)
        return out


def tile(
    input: TensorLike,  # noqa: A002 - TF's argument name
    multiples: TensorLike,
    name: str | None = None,
) -> Tensor:
    """``Tile``: ``input`` repeated ``multiples[i]`` times along each axis ``i``."""
    with name_scope(name, "Tile", [input, multiples]) as scope:
        x = convert_to_tensor(input, name="input")
        m = convert_to_tensor(multiples, dtype=dtypes.int32, name="multiples")
        out = tensor_shape.unknown_shape(x.shape.ndims)
        reps = _static_value(m)
        if reps is not None and x.shape.ndims is not None:
            reps = [int(r) for r in np.reshape(reps, -1)]
            if len(reps) != x.shape.ndims:
                raise shape_error(
                    "Tile",
                    scope,
                    [x, m],
                    "Shape must be rank %d but is rank %d" % (x.shape.ndims, len(reps)),
                )
            out = tensor_shape.TensorShape(
                [None if d is None else d * r for d, r in zip(x.shape.as_list(), reps)]
            )
        dt = x.dtype.base_dtype
        return apply_op("Tile", [x, m], [(dt, out)], scope, {"T": dt}).outputs[0]


def broadcast_gradient_args(s0: Tensor, s1: Tensor, name: str | None = None) -> list[Tensor]:
    """``BroadcastGradientArgs``: for two shapes that broadcast together, the axes of the
    result each one was broadcast along (what a gradient must be summed over)."""
    with name_scope(name, "BroadcastGradientArgs", [s0, s1]) as scope:
        dt = s0.dtype.base_dtype
        outs = [(dt, tensor_shape.TensorShape([None]))] * 2
        return apply_op("BroadcastGradientArgs", [s0, s1], outs, scope, {"T": dt}).outputs


def stop_gradient(input: TensorLike, name: str | None = None) -> Tensor:  # noqa: A002
    """``StopGradient``: the same value, but ``tf.gradients`` treats it as a constant."""
    with name_scope(name, "StopGradient", [input]) as scope:
        x = convert_to_tensor(input, name="input")
        dt = x.dtype.base_dtype
        return apply_op("StopGradient", [x], [(dt, x.shape)], scope, {"T": dt}).outputs[0]


def prevent_gradient(
    input: TensorLike,  # noqa: A002 - TF's argument name
    message: str = "",
    name: str | None = None,
) -> Tensor:
    """``PreventGradient``: the same value; asking for its gradient is an error that says
    ``message`` (TF puts one after a fused op whose second derivative it has not)."""
    with name_scope(name, "PreventGradient", [input]) as scope:
        x = convert_to_tensor(input, name="input")
        dt = x.dtype.base_dtype
        attrs = {"T": dt, "message": message}
        return apply_op("PreventGradient", [x], [(dt, x.shape)], scope, attrs).outputs[0]


# -- selecting elements ---------------------------------------------------------------------
# Book section: "Managing sessions" (``report_uninitialized_variables`` picks the names of the
# variables not yet initialised with ``boolean_mask``).


def logical_not(x: TensorLike, name: str | None = None) -> Tensor:
    """``LogicalNot``: elementwise ``not`` of a bool tensor."""
    with name_scope(name, "LogicalNot", [x]) as scope:
        x = convert_to_tensor(x, dtype=dtypes.bool, name="x")
        return apply_op("LogicalNot", [x], [(dtypes.bool, x.shape)], scope).outputs[0]


def where_indices(condition: TensorLike, name: str | None = None) -> Tensor:
    """``Where`` with one argument (``tf.where(condition)``): the coordinates of the true
    elements, an int64 matrix with one row per element."""
    with name_scope(name, "Where", [condition]) as scope:
        c = convert_to_tensor(condition, name="condition", preferred_dtype=dtypes.bool)
        shape = tensor_shape.TensorShape([None, c.shape.ndims])
        if c.shape.ndims is None:
            shape = tensor_shape.unknown_shape(rank=2)
        attrs = {"T": c.dtype.base_dtype}
        return apply_op("Where", [c], [(dtypes.int64, shape)], scope, attrs).outputs[0]


def squeeze(
    input: TensorLike,  # noqa: A002 - TF's argument name
    axis: Sequence[int] | None = None,
    name: str | None = None,
) -> Tensor:
    """``Squeeze``: drops size-1 dimensions (those of ``axis``, or every one)."""
    with name_scope(name, "Squeeze", [input]) as scope:
        x = convert_to_tensor(input, name="input")
        axes = [] if axis is None else [int(a) for a in ([axis] if isinstance(axis, int) else axis)]
        out = tensor_shape.unknown_shape()
        if x.shape.ndims is not None:
            rank, dims = x.shape.ndims, x.shape.as_list()
            picked = {a % rank for a in axes}
            for a in picked:
                if dims[a] is not None and dims[a] != 1:
                    raise shape_error(
                        "Squeeze",
                        scope,
                        [x],
                        "Can not squeeze dim[%d], expected a dimension of 1, got %d" % (a, dims[a]),
                    )
            drop = picked if axes else {i for i, d in enumerate(dims) if d == 1}
            out = tensor_shape.TensorShape([d for i, d in enumerate(dims) if i not in drop])
        attrs = {"T": x.dtype.base_dtype, "squeeze_dims": axes}
        return apply_op("Squeeze", [x], [(x.dtype.base_dtype, out)], scope, attrs).outputs[0]


def gather(
    params: TensorLike, indices: TensorLike, axis: int = 0, name: str | None = None
) -> Tensor:
    """``GatherV2``: the slices of ``params`` along ``axis`` at ``indices``."""
    with name_scope(name, "GatherV2", [params, indices]) as scope:
        p = convert_to_tensor(params, name="params")
        i = convert_to_tensor(indices, name="indices")
        a = convert_to_tensor(axis, dtype=dtypes.int32, name="axis")
        out = tensor_shape.unknown_shape()
        if p.shape.ndims is not None and i.shape.ndims is not None:
            dims = p.shape.as_list()
            out = tensor_shape.TensorShape(dims[:axis] + i.shape.as_list() + dims[axis + 1 :])
        attrs = {"Tparams": p.dtype.base_dtype, "Tindices": i.dtype.base_dtype}
        return apply_op("GatherV2", [p, i, a], [(p.dtype.base_dtype, out)], scope, attrs).outputs[0]


def boolean_mask(
    tensor: TensorLike, mask: TensorLike, name: str = "boolean_mask", axis: int | None = None
) -> Tensor:
    """The elements (rows) of ``tensor`` where the 1-D bool ``mask`` is true:
    ``Where`` → ``Squeeze`` → ``GatherV2``, as TF builds it for a 1-D mask."""
    with name_scope(name, "boolean_mask", [tensor, mask]):
        tensor = convert_to_tensor(tensor, name="tensor")
        mask = convert_to_tensor(mask, dtype=dtypes.bool, name="mask")
        if mask.shape.ndims != 1 or axis not in (None, 0):
            raise ValueError(
                "minitf's boolean_mask takes a 1-D mask over axis 0, got a mask of shape %s"
                % mask.shape
            )
        indices = squeeze(where_indices(mask), axis=[1])
        return gather(tensor, indices, axis=0)


register_op("PlaceholderWithDefault", type_attr="dtype")


def placeholder_with_default(
    input: TensorLike,  # noqa: A002 - TF's name
    shape: ShapeLike,
    name: str | None = None,
) -> Tensor:
    """``PlaceholderWithDefault``: ``input`` unless a value is fed for it (``tf.train.Saver``
    feeds its checkpoint path into ``save/Const``, whose default is ``"model"``)."""
    with name_scope(name, "PlaceholderWithDefault", [input]) as scope:
        input = convert_to_tensor(input, name="input")  # noqa: A001 - the argument, converted
        shape = tensor_shape.as_shape(shape)
        if not shape.is_compatible_with(input.shape):
            raise shape_error(
                "PlaceholderWithDefault",
                scope,
                [input],
                "Shapes must be equal rank, but are %s and %s" % (input.shape.ndims, shape.ndims),
            )
        dt = input.dtype.base_dtype
        op = apply_op(
            "PlaceholderWithDefault", [input], [(dt, shape)], scope, {"dtype": dt, "shape": shape}
        )
        return op.outputs[0]
