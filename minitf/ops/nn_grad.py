"""Gradient functions of ``tf.nn``'s ops (TF's ``python/ops/nn_grad.py``, with Sigmoid's and
Tanh's from its math_grad.py).

Book section: "Training".  Each builds the ops TF 1.15 builds in ``gradients/<op>_grad/``
(reference/tf1_semantics_part2.md §16.2): ``ReluGrad(g, relu_output)``, ``SigmoidGrad(y, g)``
and ``TanhGrad(y, g)`` once ``g`` is there, ``BiasAddGrad``, and for the fused cross-entropies
``ExpandDims(g, -1) * backprop`` (``mul``), the sparse one's backprop wrapped in
``PreventGradient``.
"""

from __future__ import annotations

import numpy as np

from minitf.ops import array_ops, math_ops, nn_ops
from minitf.ops.op_def import NotDifferentiable, RegisterGradient

NotDifferentiable("OneHot")
NotDifferentiable("InTopKV2")

_SPARSE_XENT_SECOND_DERIVATIVE = (
    "Currently there is no way to take the second derivative of "
    "sparse_softmax_cross_entropy_with_logits due to the fused implementation's interaction "
    "with tf.gradients()"
)


@RegisterGradient("Relu")
def _relu_grad(op, grad):
    """``ReluGrad(g, y)``: ``g`` where the ReLU's output is positive (0 at x = 0)."""
    return nn_ops.relu_grad(grad, op.outputs[0])


@RegisterGradient("ReluGrad")
def _relu_grad_grad(op, grad):
    """``ReluGrad(g, features)`` is linear in ``g`` (masked by the same features); none
    flows to the features."""
    x = op.inputs[1]
    return nn_ops.relu_grad(grad, x), array_ops.zeros_like(x)


@RegisterGradient("Elu")
def _elu_grad(op, grad):
    """``EluGrad(g, y)``, from the ELU's output."""
    return nn_ops.elu_grad(grad, op.outputs[0])


@RegisterGradient("Selu")
def _selu_grad(op, grad):
    """``SeluGrad(g, y)``, from the SELU's output."""
    return nn_ops.selu_grad(grad, op.outputs[0])


@RegisterGradient("LeakyRelu")
def _leaky_relu_grad(op, grad):
    """``LeakyReluGrad(g, x)`` with the op's own alpha, from its input."""
    return nn_ops.leaky_relu_grad(grad, op.inputs[0], alpha=op.get_attr("alpha"))


@RegisterGradient("Sigmoid")
def _sigmoid_grad(op, grad):
    """``SigmoidGrad(y, g)`` = ``g * y * (1 - y)``, under a control dependency on ``g``."""
    y = op.outputs[0]
    with op.graph.control_dependencies([grad]):
        return nn_ops.sigmoid_grad(y, grad)


@RegisterGradient("Tanh")
def _tanh_grad(op, grad):
    """``TanhGrad(y, g)`` = ``g * (1 - y * y)``, under a control dependency on ``g``."""
    y = op.outputs[0]
    with op.graph.control_dependencies([grad]):
        return nn_ops.tanh_grad(y, grad)


@RegisterGradient("Softmax")
def _softmax_grad(op, grad):
    """``(g - sum(g * s, -1, keepdims)) * s`` with ``s`` the softmax."""
    s = op.outputs[0]
    total = math_ops.reduce_sum(grad * s, -1, keepdims=True)
    return (grad - total) * s


@RegisterGradient("LogSoftmax")
def _log_softmax_grad(op, grad):
    """``g - sum(g, -1, keepdims) * exp(log_softmax)``."""
    softmax = math_ops.exp(op.outputs[0])
    return grad - math_ops.reduce_sum(grad, -1, keepdims=True) * softmax


@RegisterGradient("BiasAdd")
def _bias_add_grad(op, grad):
    """``g`` for the value, ``BiasAddGrad(g)`` (its sum over all axes but the last) for the
    bias."""
    return grad, nn_ops.bias_add_grad(grad, data_format=op.get_attr("data_format"))


def _broadcast_mul(vec, mat):
    """``ExpandDims(vec, -1) * mat``: one loss gradient per row times that row."""
    return array_ops.expand_dims(vec, -1) * mat


@RegisterGradient("SparseSoftmaxCrossEntropyWithLogits")
def _sparse_xent_grad(op, grad_loss, _grad_backprop):
    """The logits' gradient ``ExpandDims(g, -1) * backprop`` (backprop = softmax - one_hot,
    the op's second output, behind a ``PreventGradient``); none for the labels."""
    backprop = array_ops.prevent_gradient(op.outputs[1], message=_SPARSE_XENT_SECOND_DERIVATIVE)
    return _broadcast_mul(grad_loss, backprop), None


def _is_zero(g):
    """Whether a gradient is zeros by construction (TF's ``IsZero``: a ``ZerosLike`` op, or a
    constant of zeros, which is what ``zeros_like`` of a known shape makes)."""
    if g.op.type in ("ZerosLike", "Zeros"):
        return True
    value = array_ops._static_value(g)
    return value is not None and bool(np.all(np.asarray(value) == 0))


@RegisterGradient("SoftmaxCrossEntropyWithLogits")
def _xent_grad(op, grad_loss, grad_backprop):
    """The logits' gradient ``ExpandDims(g, -1) * backprop`` (softmax - labels), plus, when a
    gradient reached the backprop output, its path through the softmax; the labels' gradient
    ``ExpandDims(g, -1) * -log_softmax(logits)``."""
    logits = op.inputs[0]
    grad = _broadcast_mul(grad_loss, op.outputs[1])
    if grad_backprop is not None and not _is_zero(grad_backprop):
        softmax = nn_ops.softmax(logits)
        inner = math_ops.reduce_sum(grad_backprop * softmax, -1, keepdims=True)
        grad = grad + (grad_backprop - inner) * softmax
    return grad, _broadcast_mul(grad_loss, -nn_ops.log_softmax(logits))


@RegisterGradient("L2Loss")
def _l2_loss_grad(op, grad):
    """d(sum(x²)/2) = ``x * g``."""
    return op.inputs[0] * grad
