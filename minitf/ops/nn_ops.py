"""``tf.nn``: the activations, losses and helpers of a small MLP, with TF 1.15's op types,
default names, static shapes and error texts (reference/tf1_semantics_part2.md §16.2).

Book section: "Training" (the chapter's replicas train a network: dense layers with ReLU, a
softmax cross-entropy loss) and the MNIST examples it refers back to.  The kernels live in
``kernels/nn_kernels.py``, the gradients in ``ops/nn_grad.py``.  ``one_hot`` (TF's
``array_ops.one_hot``) is built here too, next to the losses that use its encoding.
"""

from __future__ import annotations

import numbers

import numpy as np

from minitf.framework import dtypes, tensor_shape
from minitf.framework.graph import DTypeLike, Tensor, convert_to_tensor, name_scope
from minitf.ops import array_ops, math_ops, random_ops
from minitf.ops.array_ops import TensorLike
from minitf.ops.math_ops import check_allowed_dtype, grad_op
from minitf.ops.op_def import apply_op, register_op, shape_error

for _t in (
    "Relu",
    "Sigmoid",
    "Tanh",
    "Softmax",
    "LogSoftmax",
    "BiasAdd",
    "L2Loss",
    "ReluGrad",
    "SigmoidGrad",
    "TanhGrad",
    "BiasAddGrad",
    "SparseSoftmaxCrossEntropyWithLogits",
    "SoftmaxCrossEntropyWithLogits",
    "OneHot",
    "InTopKV2",
    "Elu",
    "EluGrad",
    "Selu",
    "SeluGrad",
    "LeakyRelu",
    "LeakyReluGrad",
):
    register_op(_t)

_FLOATS = ("bfloat16", "float16", "float32", "float64")
_FLOATS_COMPLEX = _FLOATS + ("complex64", "complex128")


def _same_shape_op(op_type, x, name, allowed=None, param="x"):
    """An op with one input whose output has the input's dtype and shape."""
    x = convert_to_tensor(x, name=param)
    if allowed is not None:
        check_allowed_dtype(param, x, allowed)
    dt = x.dtype.base_dtype
    return apply_op(op_type, [x], [(dt, x.shape)], name or op_type, {"T": dt}).outputs[0]


def relu(features: TensorLike, name: str | None = None) -> Tensor:
    """``Relu``: ``max(features, 0)``."""
    with name_scope(name, "Relu", [features]) as scope:
        return _same_shape_op("Relu", features, scope, param="features")


_ELU_TYPES = ("float16", "bfloat16", "float32", "float64")  # in TF's op-def order


def elu(features: TensorLike, name: str | None = None) -> Tensor:
    """``Elu``: ``features`` where positive, ``exp(features) - 1`` elsewhere (the book's
    chapter 11 activation, for the networks of this chapter's exercises)."""
    with name_scope(name, "Elu", [features]) as scope:
        return _same_shape_op("Elu", features, scope, _ELU_TYPES, param="features")


def selu(features: TensorLike, name: str | None = None) -> Tensor:
    """``Selu``: the scaled ELU, ``scale * elu(features)`` with TF's alpha and scale."""
    with name_scope(name, "Selu", [features]) as scope:
        return _same_shape_op("Selu", features, scope, _ELU_TYPES, param="features")


def leaky_relu(features: TensorLike, alpha: float = 0.2, name: str | None = None) -> Tensor:
    """``LeakyRelu``: ``features`` where positive, ``alpha * features`` elsewhere; ``alpha`` an
    attribute of the op, integer features cast to float32 first (TF 1.15)."""
    with name_scope(name, "LeakyRelu", [features]) as scope:
        x = convert_to_tensor(features, name="features")
        if x.dtype.is_integer:
            x = math_ops.cast(x, dtypes.float32)
        dt = x.dtype.base_dtype
        attrs = {"T": dt, "alpha": float(np.float32(alpha))}  # a float attr is float32
        return apply_op("LeakyRelu", [x], [(dt, x.shape)], scope, attrs).outputs[0]


def sigmoid(x: TensorLike, name: str | None = None) -> Tensor:
    """``Sigmoid``: ``1 / (1 + exp(-x))`` (``tf.sigmoid``, ``tf.nn.sigmoid``; scope
    ``Sigmoid``)."""
    with name_scope(name, "Sigmoid", [x]) as scope:
        return _same_shape_op("Sigmoid", x, scope, _FLOATS_COMPLEX)


def tanh(x: TensorLike, name: str | None = None) -> Tensor:
    """``Tanh``: the hyperbolic tangent (``tf.tanh``, ``tf.nn.tanh``; scope ``Tanh``)."""
    with name_scope(name, "Tanh", [x]) as scope:
        return _same_shape_op("Tanh", x, scope, _FLOATS_COMPLEX)


def _softmax(op_type, logits, axis, dim, name):
    if axis is not None and dim is not None:
        raise ValueError("Cannot specify both 'axis' and 'dim'")
    axis = -1 if axis is None and dim is None else (dim if axis is None else axis)
    logits = convert_to_tensor(logits)
    check_allowed_dtype("logits", logits, ("float16", "bfloat16", "float32", "float64"))
    rank = logits.shape.ndims
    with name_scope(name, op_type, [logits]) as scope:
        return _softmax_op(op_type, logits, axis, rank, scope)


def _softmax_op(op_type, logits, axis, rank, scope):
    if rank == 0:
        raise shape_error(op_type, scope, [logits], "Shape must be at least rank 1 but is rank 0")
    if axis != -1 and (rank is None or axis % rank != rank - 1):
        raise ValueError(
            "minitf: tf.nn.%s computes over the last axis only (got axis=%r for rank %s)"
            % ("softmax" if op_type == "Softmax" else "log_softmax", axis, rank)
        )
    return _same_shape_op(op_type, logits, scope, param="logits")


def softmax(
    logits: TensorLike, axis: int | None = None, name: str | None = None, dim: int | None = None
) -> Tensor:
    """``Softmax`` over the last axis: ``exp(x) / sum(exp(x))`` (``dim``: ``axis``'s old
    name)."""
    return _softmax("Softmax", logits, axis, dim, name)


def log_softmax(
    logits: TensorLike, axis: int | None = None, name: str | None = None, dim: int | None = None
) -> Tensor:
    """``LogSoftmax`` over the last axis: ``x - log(sum(exp(x)))``."""
    return _softmax("LogSoftmax", logits, axis, dim, name)


def bias_add(
    value: TensorLike,
    bias: TensorLike,
    data_format: str | None = None,
    name: str | None = None,
) -> Tensor:
    """``BiasAdd`` (scope ``BiasAdd``): ``value + bias`` along the last dimension (NHWC)."""
    if data_format not in (None, "NHWC"):
        raise ValueError("minitf: tf.nn.bias_add supports data_format 'NHWC' only")
    with name_scope(name, "BiasAdd", [value, bias]) as scope:
        value = convert_to_tensor(value, name="input")
        bias = convert_to_tensor(bias, dtype=value.dtype.base_dtype, name="bias")
        vs, bs = value.shape, bias.shape
        if bs.ndims is not None and bs.ndims != 1:
            raise shape_error(
                "BiasAdd", scope, [value, bias], "Shape must be rank 1 but is rank %d" % bs.ndims
            )
        if vs.ndims is not None and vs.ndims < 2:
            raise shape_error(
                "BiasAdd",
                scope,
                [value, bias],
                "Shape must be at least rank 2 but is rank %d" % vs.ndims,
            )
        shape = vs
        if vs.ndims is not None and bs.ndims is not None:
            last, n = vs[-1], bs[0]
            if not last.is_compatible_with(n):
                raise shape_error(
                    "BiasAdd",
                    scope,
                    [value, bias],
                    "Dimensions must be equal, but are %s and %s" % (last, n),
                )
            shape = tensor_shape.TensorShape(vs.as_list()[:-1] + [last.merge_with(n).value])
        dt = value.dtype.base_dtype
        attrs = {"T": dt, "data_format": "NHWC"}
        return apply_op("BiasAdd", [value, bias], [(dt, shape)], scope, attrs).outputs[0]


def bias_add_grad(
    out_backprop: TensorLike, data_format: str = "NHWC", name: str | None = None
) -> Tensor:
    """``BiasAddGrad``: the sum of ``out_backprop`` over every axis but the last."""
    g = convert_to_tensor(out_backprop, name="out_backprop")
    shape = tensor_shape.unknown_shape(rank=1)
    with name_scope(name, "BiasAddGrad", [g]) as scope:
        if g.shape.ndims is not None:
            if g.shape.ndims < 2:
                reason = "Shape must be at least rank 2 but is rank %d" % g.shape.ndims
                raise shape_error("BiasAddGrad", scope, [g], reason)
            shape = tensor_shape.TensorShape([g.shape[-1]])
        dt = g.dtype.base_dtype
        attrs = {"T": dt, "data_format": data_format}
        return apply_op("BiasAddGrad", [g], [(dt, shape)], scope, attrs).outputs[0]


def elu_grad(gradients: TensorLike, outputs: TensorLike, name: str | None = None) -> Tensor:
    """``EluGrad``: ``gradients * (outputs + 1)`` where the output is negative, else as is."""
    return grad_op("EluGrad", gradients, outputs, name, ("gradients", "outputs"))


def selu_grad(gradients: TensorLike, outputs: TensorLike, name: str | None = None) -> Tensor:
    """``SeluGrad``: ``gradients * (outputs + scale * alpha)`` where the output is negative,
    ``gradients * scale`` elsewhere."""
    return grad_op("SeluGrad", gradients, outputs, name, ("gradients", "outputs"))


def leaky_relu_grad(gradients, features, alpha: float = 0.2, name: str | None = None) -> Tensor:
    """``LeakyReluGrad``: ``gradients`` where ``features > 0``, ``alpha * gradients`` else."""
    names = ("gradients", "features")
    return grad_op("LeakyReluGrad", gradients, features, name, names, alpha=alpha)


def relu_grad(gradients: TensorLike, features: TensorLike, name: str | None = None) -> Tensor:
    """``ReluGrad``: ``gradients`` where ``features > 0``, else 0."""
    return grad_op("ReluGrad", gradients, features, name, ("gradients", "features"))


def sigmoid_grad(y: TensorLike, dy: TensorLike, name: str | None = None) -> Tensor:
    """``SigmoidGrad``: ``dy * y * (1 - y)``, ``y`` the sigmoid's output."""
    return grad_op("SigmoidGrad", y, dy, name, ("y", "dy"))


def tanh_grad(y: TensorLike, dy: TensorLike, name: str | None = None) -> Tensor:
    """``TanhGrad``: ``dy * (1 - y * y)``, ``y`` the tanh's output."""
    return grad_op("TanhGrad", y, dy, name, ("y", "dy"))


def l2_loss(t: TensorLike, name: str | None = None) -> Tensor:
    """``L2Loss``: ``sum(t ** 2) / 2``, a scalar (weight decay)."""
    with name_scope(name, "L2Loss", [t]) as scope:
        t = convert_to_tensor(t, name="t")
        check_allowed_dtype("t", t, ("float16", "bfloat16", "float32", "float64"))
        dt = t.dtype.base_dtype
        return apply_op("L2Loss", [t], [(dt, tensor_shape.scalar())], scope, {"T": dt}).outputs[0]


def in_top_k(
    predictions: TensorLike, targets: TensorLike, k: TensorLike, name: str | None = None
) -> Tensor:
    """``InTopKV2``: for each row, whether ``targets`` (class indices) is among the ``k`` largest
    of ``predictions`` [batch, classes] (ties at the boundary count as in; a row with a
    non-finite prediction, or a target out of range, is False).  The book's accuracy:
    ``tf.reduce_mean(tf.cast(tf.nn.in_top_k(logits, y, 1), tf.float32))``."""
    with name_scope(name, "in_top_k"):
        with name_scope(name, "InTopKV2", [predictions, targets, k]) as scope:
            p = convert_to_tensor(predictions, name="predictions")
            t = convert_to_tensor(targets, name="targets")
            check_allowed_dtype("predictions", p, ("float32",))
            check_allowed_dtype("targets", t, ("int32", "int64"))
            k = convert_to_tensor(k, dtype=t.dtype.base_dtype, name="k")
            batch = _checked_rows("InTopKV2", scope, [p, t, k], (2, 1, 0))
            attrs = {"T": t.dtype.base_dtype}
            out = [(dtypes.bool, tensor_shape.TensorShape([batch]))]
            return apply_op("InTopKV2", [p, t, k], out, scope, attrs).outputs[0]


def _checked_rows(op_type, scope, inputs, ranks):
    """A shape function's checks: each input of known rank has the rank given, and the first
    two agree on their first dimension (the rows), which is returned."""
    for t, rank in zip(inputs, ranks):
        if t.shape.ndims is not None and t.shape.ndims != rank:
            reason = "Shape must be rank %d but is rank %d" % (rank, t.shape.ndims)
            raise shape_error(op_type, scope, inputs, reason)
    a, b = inputs[0].shape, inputs[1].shape
    rows = a[0] if a.ndims is not None else tensor_shape.Dimension(None)
    if b.ndims is not None:
        if not rows.is_compatible_with(b[0]):
            reason = "Dimensions must be equal, but are %s and %s" % (rows, b[0])
            raise shape_error(op_type, scope, inputs, reason)
        rows = rows.merge_with(b[0])
    return rows


# -- cross-entropy losses -------------------------------------------------------------------


def _ensure_xent_args(name, sentinel, labels, logits):
    if sentinel is not None:
        raise ValueError("Only call `%s` with named arguments (labels=..., logits=..., ...)" % name)
    if labels is None or logits is None:
        raise ValueError("Both labels and logits must be provided.")


def _sparse_xent_op(logits, labels, name):
    """The fused ``SparseSoftmaxCrossEntropyWithLogits`` op: (loss [batch], backprop)."""
    with name_scope(name, "SparseSoftmaxCrossEntropyWithLogits", [logits, labels]) as scope:
        return _sparse_xent_in_scope(logits, labels, scope)


def _sparse_xent_in_scope(logits, labels, op_name):
    fs = logits.shape
    batch = _checked_rows("SparseSoftmaxCrossEntropyWithLogits", op_name, [logits, labels], (2, 1))
    classes = fs[1].value if fs.ndims is not None else None
    dt = logits.dtype.base_dtype
    op = apply_op(
        "SparseSoftmaxCrossEntropyWithLogits",
        [logits, labels],
        [
            (dt, tensor_shape.TensorShape([batch])),
            (dt, tensor_shape.TensorShape([batch.value, classes])),
        ],
        op_name,
        {"T": dt, "Tlabels": labels.dtype.base_dtype},
    )
    return op.outputs[0]


def sparse_softmax_cross_entropy_with_logits(
    _sentinel: None = None,
    labels: TensorLike = None,
    logits: TensorLike = None,
    name: str | None = None,
) -> Tensor:
    """The softmax cross-entropy of ``logits`` [..., classes] against class indices
    ``labels`` [...]: ``SparseSoftmaxCrossEntropyWithLogits`` in the scope of the same name
    (logits of rank > 2 are reshaped to 2-D around it); a loss per example."""
    _ensure_xent_args("sparse_softmax_cross_entropy_with_logits", _sentinel, labels, logits)
    with name_scope(name, "SparseSoftmaxCrossEntropyWithLogits", [labels, logits]):
        labels = convert_to_tensor(labels)
        logits = convert_to_tensor(logits)
        check_allowed_dtype("labels", labels, ("int32", "int64"))
        half = logits.dtype.base_dtype == dtypes.float16
        precise = math_ops.cast(logits, dtypes.float32) if half else logits
        labels_shape = array_ops.shape(labels)
        ls, fs = labels.shape, logits.shape
        if fs.ndims == 0:
            raise ValueError("Logits cannot be scalars - received shape %s." % fs)
        if fs.ndims is not None and ls.ndims is not None and ls.ndims != fs.ndims - 1:
            raise ValueError(
                "Rank mismatch: Rank of labels (received %s) should equal rank of logits "
                "minus 1 (received %s)." % (ls.ndims, fs.ndims)
            )
        if ls.is_fully_defined() and fs[:-1].is_fully_defined() and ls != fs[:-1]:
            raise ValueError(
                "Shape mismatch: The shape of labels (received %s) should equal the shape "
                "of logits except for the last dimension (received %s)." % (ls, fs)
            )
        if fs.ndims == 2:
            cost = _sparse_xent_op(precise, labels, name)
        else:
            cost = _sparse_xent_flattened(precise, labels, labels_shape, name)
        return math_ops.cast(cost, dtypes.float16) if half else cost


def _sparse_xent_flattened(logits, labels, labels_shape, name):
    """Logits of rank other than 2: flattened to [-1, classes] and the loss reshaped back to
    the labels' shape (``labels_shape``, their ``Shape``); minitf needs the number of classes
    statically."""
    fs = logits.shape
    if fs.ndims is None or fs[-1].value is None:
        raise ValueError(
            "minitf: logits of rank other than 2 need a known rank and number of classes "
            "(got %s)" % fs
        )
    flat_logits = array_ops.reshape(logits, [-1, fs[-1].value])
    flat_labels = array_ops.reshape(labels, [-1])
    cost = _sparse_xent_op(flat_logits, flat_labels, name)
    cost = array_ops.reshape(cost, labels_shape)
    cost.set_shape(labels.shape)
    return cost


def _xent_op(logits, labels, name):
    """The fused ``SoftmaxCrossEntropyWithLogits`` op on 2-D operands: (loss, backprop)."""
    for t in (logits, labels):
        if t.shape.ndims is not None and t.shape.ndims != 2:
            raise shape_error(
                "SoftmaxCrossEntropyWithLogits",
                name,
                [logits, labels],
                "Shape must be rank 2 but is rank %d" % t.shape.ndims,
            )
    try:
        shape = logits.shape.merge_with(labels.shape)
    except ValueError:
        a, b = math_ops._first_mismatch(logits.shape, labels.shape)
        raise shape_error(
            "SoftmaxCrossEntropyWithLogits",
            name,
            [logits, labels],
            "Dimensions must be equal, but are %d and %d" % (a, b),
        ) from None
    dt = logits.dtype.base_dtype
    op = apply_op(
        "SoftmaxCrossEntropyWithLogits",
        [logits, labels],
        [(dt, tensor_shape.TensorShape(shape.as_list()[:1])), (dt, shape)],
        name,
        {"T": dt},
    )
    return op.outputs[0]


def softmax_cross_entropy_with_logits_v2(
    labels: TensorLike,
    logits: TensorLike,
    axis: int | None = None,
    name: str | None = None,
    dim: int | None = None,
) -> Tensor:
    """The softmax cross-entropy of ``logits`` against probability distributions ``labels``
    (gradients flow into both): scope ``softmax_cross_entropy_with_logits``, operands
    flattened to 2-D (``Reshape``, ``Reshape_1``), the fused op named like the scope, the loss
    reshaped to the batch shape (``Reshape_2``)."""
    if axis is not None and dim is not None:
        raise ValueError("Cannot specify both 'axis' and 'dim'")
    axis = -1 if axis is None and dim is None else (dim if axis is None else axis)
    with name_scope(name, "softmax_cross_entropy_with_logits", [logits, labels]) as scope:
        logits = convert_to_tensor(logits, name="logits")
        labels = convert_to_tensor(labels, name="labels")
        half = logits.dtype.base_dtype == dtypes.float16
        precise = math_ops.cast(logits, dtypes.float32) if half else logits
        labels = math_ops.cast(labels, precise.dtype)
        fs = logits.shape
        if fs.ndims == 0:
            raise ValueError("Logits cannot be scalars - received shape %s." % fs)
        last = fs.ndims is not None and axis % fs.ndims == fs.ndims - 1
        if fs.ndims is None or fs[-1].value is None or not last:
            raise ValueError(
                "minitf: softmax cross-entropy needs logits of known rank and number of "
                "classes, over the last axis (got shape %s, axis %r)" % (fs, axis)
            )
        classes = fs[-1].value
        flat_logits = array_ops.reshape(precise, [-1, classes])
        lc = labels.shape[-1].value if labels.shape.ndims else None
        flat_labels = array_ops.reshape(labels, [-1, classes if lc is None else lc])
        cost = _xent_op(flat_logits, flat_labels, scope)
        batch = fs.as_list()[:-1]
        if any(d is None for d in batch[1:]):
            raise ValueError("minitf: only the first dimension of the logits may be unknown")
        cost = array_ops.reshape(cost, [-1 if d is None else d for d in batch])
        return math_ops.cast(cost, dtypes.float16) if half else cost


def softmax_cross_entropy_with_logits(
    _sentinel: None = None,
    labels: TensorLike = None,
    logits: TensorLike = None,
    dim: int = -1,
    name: str | None = None,
    axis: int | None = None,
) -> Tensor:
    """The deprecated softmax cross-entropy: no gradient flows into ``labels``
    (``StopGradient`` ``labels_stop_gradient``), all in scope
    ``softmax_cross_entropy_with_logits_sg``; otherwise ``..._v2``."""
    if axis is not None and dim != -1:
        raise ValueError("Cannot specify both 'axis' and 'dim'")
    axis = dim if axis is None else axis
    _ensure_xent_args("softmax_cross_entropy_with_logits", _sentinel, labels, logits)
    with name_scope(name, "softmax_cross_entropy_with_logits_sg", [logits, labels]) as scope:
        labels = array_ops.stop_gradient(labels, name="labels_stop_gradient")
    return softmax_cross_entropy_with_logits_v2(labels=labels, logits=logits, axis=axis, name=scope)


# -- dropout and one_hot -----------------------------------------------------------------------


def dropout(
    x: TensorLike,
    keep_prob: TensorLike = None,
    noise_shape: TensorLike = None,
    seed: int | None = None,
    name: str | None = None,
    rate: TensorLike = None,
) -> Tensor:
    """Dropout as TF 1.15 builds it (scope ``dropout``): each element is kept with
    probability ``1 - rate`` (``keep_prob``: the old, deprecated argument) and scaled by
    ``1 / (1 - rate)``: ``x * scale * Cast(random_uniform(noise_shape) >= rate)``."""
    if keep_prob is not None and rate is not None:
        raise ValueError("Cannot specify both 'rate' and 'keep_prob'")
    if keep_prob is not None:
        try:
            rate = 1.0 - keep_prob
        except TypeError:
            raise ValueError(
                "keep_prob must be a floating point number or Tensor (got %r)" % (keep_prob,)
            ) from None
    if rate is None:
        raise ValueError("You must provide a rate to dropout.")
    with name_scope(name, "dropout", [x]):
        x = convert_to_tensor(x, name="x")
        if not x.dtype.is_floating:
            raise ValueError(
                "x has to be a floating point tensor since it's going to be scaled. Got a %s "
                "tensor instead." % x.dtype
            )
        if isinstance(rate, numbers.Real) and not isinstance(rate, bool):
            if not 0 <= rate < 1:
                raise ValueError(
                    "rate must be a scalar tensor or a float in the range [0, 1), got %g" % rate
                )
            if rate == 0:
                return x
        rate = convert_to_tensor(rate, dtype=x.dtype.base_dtype, name="rate")
        if not rate.shape.is_compatible_with(tensor_shape.scalar()):
            raise ValueError(
                "Shapes %s and %s are incompatible" % (rate.shape, tensor_shape.scalar())
            )
        random_tensor = random_ops.random_uniform(
            _noise_shape(x, noise_shape), seed=seed, dtype=x.dtype.base_dtype
        )
        scale = 1 / (1 - rate)
        keep_mask = random_tensor >= rate
        ret = x * scale * math_ops.cast(keep_mask, x.dtype.base_dtype)
        ret.set_shape(x.shape)
        return ret


def _noise_shape(x, noise_shape):
    """The shape of dropout's random tensor: ``x``'s (a ``Shape`` op), or ``noise_shape`` with
    its unknown dimensions taken from ``x``'s static shape."""
    if noise_shape is None:
        return array_ops.shape(x)
    if isinstance(noise_shape, Tensor):
        return noise_shape
    dims = tensor_shape.as_shape(noise_shape).as_list()
    if x.shape.ndims == len(dims):
        dims = [xd if nd is None else nd for nd, xd in zip(dims, x.shape.as_list())]
    return dims


def one_hot(
    indices: TensorLike,
    depth: TensorLike,
    on_value: TensorLike = None,
    off_value: TensorLike = None,
    axis: int | None = None,
    dtype: DTypeLike = None,
    name: str | None = None,
) -> Tensor:
    """``OneHot`` (TF's ``array_ops.one_hot``, scope ``one_hot``): ``on_value`` where the
    new ``axis`` (default -1) equals the index, ``off_value`` elsewhere (1 and 0 of ``dtype``,
    float32 by default)."""
    with name_scope(name, "one_hot", [indices, depth, on_value, off_value]) as scope:
        dtype = dtypes.as_dtype(dtype).base_dtype if dtype is not None else None
        on_dt = convert_to_tensor(on_value).dtype.base_dtype if on_value is not None else None
        off_dt = convert_to_tensor(off_value).dtype.base_dtype if off_value is not None else None
        for given, what in ((on_dt, "on_value"), (off_dt, "off_value")):
            if given is not None and dtype is not None and given != dtype:
                raise TypeError(
                    "dtype {0} of {1} does not match dtype parameter {2}".format(given, what, dtype)
                )
        dtype = dtype or on_dt or off_dt or dtypes.float32
        if on_dt is not None and off_dt is not None and on_dt != off_dt:
            raise TypeError(
                "dtype {0} of on_value does not match dtype {1} of off_value".format(on_dt, off_dt)
            )
        on = convert_to_tensor(1 if on_value is None else on_value, dtype, name="on_value")
        off = convert_to_tensor(0 if off_value is None else off_value, dtype, name="off_value")
        return _one_hot_op(indices, depth, on, off, -1 if axis is None else axis, scope)


def _one_hot_op(indices, depth, on, off, axis, scope):
    indices = convert_to_tensor(indices, name="indices")
    depth = convert_to_tensor(depth, dtype=dtypes.int32, name="depth")
    check_allowed_dtype("indices", indices, ("uint8", "int32", "int64"))
    ins = [indices, depth, on, off]
    shape = tensor_shape.unknown_shape()
    rank = indices.shape.ndims
    if axis < -1 or (rank is not None and axis > rank):
        raise shape_error(
            "OneHot",
            scope,
            ins,
            "Expected axis to be -1 or between [0, %s).  But received: %d"
            % (rank + 1 if rank is not None else "?", axis),
        )
    if rank is not None:
        d = array_ops._static_value(depth)
        dims = indices.shape.as_list()
        dims.insert(rank if axis == -1 else axis, None if d is None else int(d))
        shape = tensor_shape.TensorShape(dims)
    dt = on.dtype.base_dtype
    attrs = {"T": dt, "TI": indices.dtype.base_dtype, "axis": axis}
    return apply_op("OneHot", ins, [(dt, shape)], scope, attrs).outputs[0]
