"""``tf.nn``: the activations and losses of a small MLP (``ops/nn_ops.py``), under the name
TF 1.15 gives them (``tf.nn.relu``, ``tf.nn.sparse_softmax_cross_entropy_with_logits`` ...).

Book section: "Training".
"""

from minitf.ops.nn_impl import batch_normalization, moments
from minitf.ops.nn_ops import (
    bias_add,
    dropout,
    elu,
    in_top_k,
    l2_loss,
    leaky_relu,
    log_softmax,
    relu,
    selu,
    sigmoid,
    softmax,
    softmax_cross_entropy_with_logits,
    softmax_cross_entropy_with_logits_v2,
    sparse_softmax_cross_entropy_with_logits,
    tanh,
)

__all__ = [
    "batch_normalization",
    "bias_add",
    "dropout",
    "elu",
    "in_top_k",
    "l2_loss",
    "leaky_relu",
    "log_softmax",
    "moments",
    "relu",
    "selu",
    "sigmoid",
    "softmax",
    "softmax_cross_entropy_with_logits",
    "softmax_cross_entropy_with_logits_v2",
    "sparse_softmax_cross_entropy_with_logits",
    "tanh",
]
