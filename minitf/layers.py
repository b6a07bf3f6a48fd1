"""``tf.layers``: TF 1.15's functional layers; here ``tf.layers.dense``, the layer of the
chapter's MLPs, and ``tf.layers.dropout``.

Book section: "Training" (each replica builds ``tf.layers.dense`` layers).  A call makes the
variables ``<name>/kernel`` (Glorot uniform unless told otherwise) and ``<name>/bias`` (zeros)
through ``tf.get_variable`` in a variable scope named after the layer (``dense``, then
``dense_1`` ...), and the ops ``<name>/MatMul``, ``<name>/BiasAdd`` and the activation's
(``<name>/Relu``) in its name scope.  ``tf.layers.dropout`` drops only while ``training`` is
true: a Python bool picks at build time, a tensor (chapter 11's ``training`` placeholder with
default False) builds a ``tf.cond`` (``dropout/cond/...``) that decides at every run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from minitf.framework.graph import Tensor, convert_to_tensor
from minitf.ops import array_ops, init_ops, math_ops, nn_ops
from minitf.ops.array_ops import TensorLike
from minitf.ops.cond import smart_cond
from minitf.ops.variable_scope import get_variable, variable_scope

__all__ = ["dense", "dropout"]


def dense(
    inputs: TensorLike,
    units: int,
    activation: Callable[[Tensor], Tensor] | None = None,
    use_bias: bool = True,
    kernel_initializer: Any = None,
    bias_initializer: Any = init_ops.zeros_initializer(),  # noqa: B008 - TF's default
    kernel_regularizer: Callable[[Tensor], Tensor] | None = None,
    bias_regularizer: Callable[[Tensor], Tensor] | None = None,
    activity_regularizer: Callable[[Tensor], Tensor] | None = None,
    kernel_constraint: Any = None,
    bias_constraint: Any = None,
    trainable: bool = True,
    name: str | None = None,
    reuse: bool | None = None,
) -> Tensor:
    """A densely connected layer: ``activation(matmul(inputs, kernel) + bias)`` for 2-D
    ``inputs`` ``[batch, n]``; kernel ``[n, units]``, bias ``[units]``.  With ``reuse`` (or
    inside a reusing scope) a named layer takes its existing variables."""
    _check_unsupported(
        kernel_regularizer=kernel_regularizer,
        bias_regularizer=bias_regularizer,
        activity_regularizer=activity_regularizer,
        kernel_constraint=kernel_constraint,
        bias_constraint=bias_constraint,
    )
    units = int(units)
    if units <= 0:
        raise ValueError(
            "Received an invalid value for `units`, expected a positive integer, got %d." % units
        )
    x = convert_to_tensor(inputs)
    last = _input_size(x, name)
    dtype = x.dtype.base_dtype
    with variable_scope(name, default_name="dense", values=[x], reuse=reuse):
        kernel = get_variable(
            "kernel", [last, units], dtype, initializer=kernel_initializer, trainable=trainable
        )
        bias = None
        if use_bias:
            bias = get_variable(
                "bias", [units], dtype, initializer=bias_initializer, trainable=trainable
            )
        outputs = math_ops.matmul(x, kernel)
        if bias is not None:
            outputs = nn_ops.bias_add(outputs, bias)
        if activation is not None:
            outputs = activation(outputs)
        return outputs


def dropout(
    inputs: TensorLike,
    rate: float = 0.5,
    noise_shape: TensorLike = None,
    seed: int | None = None,
    training: Any = False,
    name: str | None = None,
) -> Tensor:
    """``tf.nn.dropout(inputs, rate=rate)`` while ``training`` (a Python bool or a bool
    tensor), else ``inputs`` unchanged (an ``Identity``), in variable scope ``dropout``
    (``dropout_1`` ...)."""
    x = convert_to_tensor(inputs)
    with variable_scope(name, default_name="dropout", values=[x]):
        return smart_cond(
            training,
            lambda: nn_ops.dropout(x, noise_shape=noise_shape, seed=seed, rate=rate),
            lambda: array_ops.identity(x),
        )


def _check_unsupported(**args: Any) -> None:
    for what, arg in args.items():
        if arg is not None:
            raise ValueError("minitf: tf.layers.dense does not support %s" % what)


def _input_size(x: Tensor, name: str | None) -> int:
    """The size of the last dimension of the layer's input, with Keras's checks."""
    if not (x.dtype.is_floating or x.dtype.is_complex):
        raise TypeError("Unable to build `Dense` layer with non-floating point dtype %s" % x.dtype)
    if x.shape.ndims is not None and x.shape.ndims < 2:
        raise ValueError(
            "Input 0 of layer %s is incompatible with the layer: expected min_ndim=2, found "
            "ndim=%d. Full shape received: %s" % (name or "dense", x.shape.ndims, x.shape.as_list())
        )
    if x.shape.ndims != 2:
        raise ValueError("minitf: tf.layers.dense takes 2-D inputs (got shape %s)" % x.shape)
    last = x.shape[-1].value
    if last is None:
        raise ValueError(
            "The last dimension of the inputs to `Dense` should be defined. Found `None`."
        )
    return last
