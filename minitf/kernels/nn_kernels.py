"""The kernels of ``tf.nn`` (``ops/nn_ops.py``): activations, softmax, losses, bias_add.

Book section: "Training" (the chapter's replicas train an MLP) and "Operations and kernels".
The elementwise ones (Relu, Sigmoid, Tanh and their gradient helpers) and BiasAdd /
BiasAddGrad are written against the backend surface (``tensor_ops.py``: ``map``, ``zip``,
``reduce``), so they run as CUDA kernels on a card.  Softmax, the cross-entropies, L2Loss and
OneHot compute with numpy on the host (``host_kernel``) on any device, numerically stable:
every exponential is taken of ``x - max(x)``.  float16 is computed in float32.
"""

import numpy as np

from minitf.framework import dtypes as D
from minitf.framework import errors
from minitf.kernels.math_kernels import _map, _zip
from minitf.kernels.numpy_ops import scalarize
from minitf.kernels.registry import ALL, FLOATS, GPU_ARRAY, INTS, register
from minitf.kernels.tensor_ops import host_kernel, invalid_argument, shape_text

_UNARY = {"allocates": True, "forwards": (0,)}
_SAME_SHAPE = {"allocates": True, "forwards": (0, 1)}

register("Relu", _map("relu"), cpu=FLOATS + INTS, gpu=FLOATS, **_UNARY)
register("Sigmoid", _map("sigmoid"), cpu=FLOATS, gpu=FLOATS, **_UNARY)
register("Tanh", _map("tanh"), cpu=FLOATS, gpu=FLOATS, **_UNARY)
register("ReluGrad", _zip("relu_grad"), cpu=FLOATS + INTS, gpu=FLOATS, **_SAME_SHAPE)
register("SigmoidGrad", _zip("sigmoid_grad"), cpu=FLOATS, gpu=FLOATS, **_SAME_SHAPE)
register("TanhGrad", _zip("tanh_grad"), cpu=FLOATS, gpu=FLOATS, **_SAME_SHAPE)


def _precise(x):
    x = np.asarray(x)
    return x.astype(np.float32) if x.dtype == np.float16 else x


def log_softmax_rows(x):
    """``log(softmax(x))`` over the last axis without overflow: ``x - m - log(sum(exp(x -
    m)))`` with ``m`` the row maximum."""
    shifted = x - np.max(x, axis=-1, keepdims=True)
    return shifted - np.log(np.sum(np.exp(shifted), axis=-1, keepdims=True))


def _softmax_kernel(log):
    @host_kernel
    def factory(op, device):
        def compute(ctx, ins):
            x = np.asarray(ins[0])
            if x.ndim < 1:
                raise errors.InvalidArgumentError(
                    None, None, "logits must have >= 1 dimension, got %s" % shape_text(x.shape)
                )
            out = log_softmax_rows(_precise(x))
            return ((out if log else np.exp(out)).astype(x.dtype),)

        return compute

    return factory


register("Softmax", _softmax_kernel(False), cpu=FLOATS, gpu=FLOATS, allocates=True)
register("LogSoftmax", _softmax_kernel(True), cpu=FLOATS, gpu=FLOATS, allocates=True)


def _bias_add(op, device):
    backend = device.backend
    add, shape = backend.zip("add"), backend.shape

    def compute(ctx, ins):
        value, bias = ins
        vs, bs = shape(value), shape(bias)
        if len(vs) < 2:
            raise errors.InvalidArgumentError(
                None, None, "Input tensor must be at least 2D: %s" % shape_text(vs)
            )
        if len(bs) != 1:
            raise errors.InvalidArgumentError(None, None, "Biases must be 1D: %s" % shape_text(bs))
        if bs[0] != vs[-1]:
            raise errors.InvalidArgumentError(
                None,
                None,
                "Must provide as many biases as the last dimension of the input tensor: "
                "%s vs. %s" % (shape_text(bs), shape_text(vs)),
            )
        return (add(ctx, value, bias),)

    return compute


def _bias_add_grad(op, device):
    backend = device.backend
    total = backend.reduce("sum", False, op.get_attr("T").as_numpy_dtype)

    def compute(ctx, ins):
        rank = len(backend.shape(ins[0]))
        if rank < 2:
            raise errors.InvalidArgumentError(
                None,
                None,
                "Input tensor must be at least 2D: %s" % shape_text(backend.shape(ins[0])),
            )
        return (total(ctx, ins[0], list(range(rank - 1))),)

    return compute


_GPU_FLOATS = FLOATS
register("BiasAdd", _bias_add, cpu=FLOATS + INTS, gpu=_GPU_FLOATS + (D.int32,), allocates=True)
register("BiasAddGrad", _bias_add_grad, cpu=FLOATS + INTS, gpu=_GPU_FLOATS, allocates=True)


@host_kernel
def _l2_loss(op, device):
    def compute(ctx, ins):
        x = np.asarray(ins[0])
        p = _precise(x)
        return (scalarize(np.asarray(np.sum(p * p) / 2).astype(x.dtype)),)

    return compute


register("L2Loss", _l2_loss, cpu=FLOATS, gpu=FLOATS, allocates=True)


def _check_rows(features, labels, what):
    if features.ndim != 2:
        raise errors.InvalidArgumentError(
            None, None, "logits must be 2-dimensional, got %s" % shape_text(features.shape)
        )
    if labels.shape[0] != features.shape[0]:
        raise errors.InvalidArgumentError(
            None,
            None,
            "logits and labels must have the same first dimension, got logits shape %s and "
            "%s shape %s" % (shape_text(features.shape), what, shape_text(labels.shape)),
        )


def _check_labels(labels, classes):
    """TF's error for a label outside ``[0, classes)`` (two reductions on the hot path)."""
    if labels.size and (labels.min() < 0 or labels.max() >= classes):
        bad = (labels < 0) | (labels >= classes)
        raise errors.InvalidArgumentError(
            None,
            None,
            "Received a label value of %d which is outside the valid range of [0, %d).  "
            "Label values: %s" % (labels[bad][0], classes, " ".join(str(int(v)) for v in labels)),
        )


def sparse_xent_rows(logits, labels):
    """TF's ``SparseXentFunctor``: with ``shifted = logits - max``, the loss is
    ``log(sum(exp(shifted))) - shifted[label]`` and the backprop ``exp(shifted) / sum -
    onehot(label)``; one exponential per logit, written into one buffer."""
    rows = np.arange(logits.shape[0])
    shifted = logits - logits.max(axis=-1, keepdims=True)  # (methods: no Python wrappers)
    backprop = np.exp(shifted)
    total = backprop.sum(axis=-1, keepdims=True)
    loss = np.log(total[:, 0]) - shifted[rows, labels]
    np.divide(backprop, total, out=backprop)
    backprop[rows, labels] -= 1
    return loss, backprop


@host_kernel
def _sparse_xent(op, device):
    def compute(ctx, ins):
        features, labels = np.asarray(ins[0]), np.asarray(ins[1])
        _check_rows(features, labels, "labels")
        _check_labels(labels, features.shape[1])
        loss, backprop = sparse_xent_rows(_precise(features), labels)
        return loss.astype(features.dtype, copy=False), backprop.astype(features.dtype, copy=False)

    return compute


@host_kernel
def _xent(op, device):
    def compute(ctx, ins):
        features, labels = np.asarray(ins[0]), np.asarray(ins[1])
        _check_rows(features, labels, "labels")
        if labels.shape != features.shape:
            raise errors.InvalidArgumentError(
                None,
                None,
                "logits and labels must be broadcastable: logits_size=%s labels_size=%s"
                % (shape_text(features.shape), shape_text(labels.shape)),
            )
        logp = log_softmax_rows(_precise(features))
        loss = -np.sum(labels * logp, axis=-1)
        backprop = np.exp(logp) - labels
        return loss.astype(features.dtype, copy=False), backprop.astype(features.dtype, copy=False)

    return compute


_XENT_GPU = (D.float16, D.float32, D.float64)
register(
    "SparseSoftmaxCrossEntropyWithLogits", _sparse_xent, cpu=FLOATS, gpu=_XENT_GPU, allocates=True
)
register("SoftmaxCrossEntropyWithLogits", _xent, cpu=FLOATS, gpu=_XENT_GPU, allocates=True)


@host_kernel
def _one_hot(op, device):
    axis = op.get_attr("axis")

    def compute(ctx, ins):
        indices, depth, on, off = (np.asarray(v) for v in ins)
        if depth.ndim != 0:
            raise errors.InvalidArgumentError(
                None, None, "depth must be a scalar, but got: %s" % shape_text(depth.shape)
            )
        if on.ndim != 0 or off.ndim != 0:
            raise errors.InvalidArgumentError(None, None, "on_value and off_value must be scalars")
        depth = int(depth)
        if depth < 0:
            raise errors.InvalidArgumentError(
                None, None, "depth must be non-negative, got: %d" % depth
            )
        hot = indices[..., None] == np.arange(depth)
        out = np.where(hot, on, off).astype(on.dtype)
        if axis != -1:
            out = np.moveaxis(out, -1, axis)
        return (scalarize(out),)

    return compute


register("OneHot", _one_hot, cpu=ALL, gpu=GPU_ARRAY, allocates=True)


@host_kernel
def _in_top_k(op, device):
    """``InTopKV2``: a row is in when fewer than k classes score strictly higher than its
    target and every score of the row is finite (TF's functor)."""

    def compute(ctx, ins):
        predictions, targets, k = (np.asarray(v) for v in ins)
        if k.ndim:
            raise invalid_argument("k must be 0-D, got shape %s" % shape_text(k.shape))
        _check_in_top_k_shapes(predictions, targets)
        classes = predictions.shape[1]
        inside = (targets >= 0) & (targets < classes)
        rows = np.arange(len(targets))
        scores = predictions[rows, np.where(inside, targets, 0)]
        higher = np.count_nonzero(predictions > scores[:, None], axis=1)
        finite = np.isfinite(predictions).all(axis=1)
        return (inside & finite & (higher < int(k)),)

    return compute


def _check_in_top_k_shapes(predictions, targets):
    if predictions.ndim != 2:
        raise invalid_argument("predictions must be 2-dimensional")
    if targets.ndim != 1:
        raise invalid_argument("targets must be 1-dimensional")
    if predictions.shape[0] != targets.shape[0]:
        raise invalid_argument(
            "First dimension of predictions %d must match length of targets %d"
            % (predictions.shape[0], targets.shape[0])
        )


register("InTopKV2", _in_top_k, cpu=(D.int32, D.int64), gpu=(D.int32, D.int64), allocates=True)


# The book's chapter 11 activations (for the exercises' networks): numpy on the host, on any
# device.  SELU's constants are TF's.
SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946


@host_kernel
def _elu_family(op, device):
    """``Elu``, ``Selu``, ``LeakyRelu`` and their gradients, one numpy expression each."""
    alpha = op.get_attr("alpha") if "LeakyRelu" in op.type else SELU_ALPHA
    forward = {
        "Elu": lambda x: np.where(x > 0, x, np.expm1(np.minimum(x, 0))),
        "Selu": lambda x: SELU_SCALE * np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0))),
        "LeakyRelu": lambda x: np.where(x > 0, x, alpha * x),
    }
    backward = {  # (gradients, outputs or features)
        "EluGrad": lambda g, y: np.where(y < 0, g * (y + 1), g),
        "SeluGrad": lambda g, y: np.where(y < 0, g * (y + SELU_SCALE * alpha), g * SELU_SCALE),
        "LeakyReluGrad": lambda g, x: np.where(x > 0, g, alpha * g),
    }
    if op.type in forward:
        f = forward[op.type]
        return lambda ctx, ins: (f(np.asarray(ins[0])).astype(np.asarray(ins[0]).dtype),)
    b = backward[op.type]
    return lambda ctx, ins: (
        b(np.asarray(ins[0]), np.asarray(ins[1])).astype(np.asarray(ins[0]).dtype),
    )


for _t in ("Elu", "Selu", "LeakyRelu", "EluGrad", "SeluGrad", "LeakyReluGrad"):
    register(_t, _elu_family, cpu=FLOATS, gpu=FLOATS, allocates=True)
