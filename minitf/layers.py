"""``tf.layers``: TF 1.15's functional layers; here ``tf.layers.dense``, the layer of the
chapter's MLPs, ``tf.layers.dropout`` and ``tf.layers.batch_normalization``.

Book section: "Training" (each replica builds ``tf.layers.dense`` layers).  A call makes the
variables ``<name>/kernel`` (Glorot uniform unless told otherwise) and ``<name>/bias`` (zeros)
through ``tf.get_variable`` in a variable scope named after the layer (``dense``, then
``dense_1`` ...), and the ops ``<name>/MatMul``, ``<name>/BiasAdd`` and the activation's
(``<name>/Relu``) in its name scope.  ``tf.layers.dropout`` drops only while ``training`` is
true: a Python bool picks at build time, a tensor (chapter 11's ``training`` placeholder with
default False) builds a ``tf.cond`` (``dropout/cond/...``) that decides at every run.
``tf.layers.batch_normalization`` normalizes with the batch's moments while training and with
its moving averages otherwise; each training step's updates of those averages are ops in
``tf.GraphKeys.UPDATE_OPS``, which the training op must run (chapter 11's
``tf.control_dependencies(update_ops)``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from minitf.framework.graph import GraphKeys, Tensor, convert_to_tensor
from minitf.framework.graph import name_scope as _name_scope
from minitf.ops import array_ops, init_ops, math_ops, nn_impl, nn_ops, state_ops
from minitf.ops.array_ops import TensorLike
from minitf.ops.cond import smart_cond
from minitf.ops.variable_scope import get_variable, refuse_unsupported, variable_scope

__all__ = ["batch_normalization", "dense", "dropout"]


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
    refuse_unsupported(
        "tf.layers.dense",
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
            "kernel",
            [last, units],
            dtype,
            initializer=kernel_initializer,
            regularizer=kernel_regularizer,
            trainable=trainable,
        )
        bias = None
        if use_bias:
            bias = get_variable(
                "bias",
                [units],
                dtype,
                initializer=bias_initializer,
                regularizer=bias_regularizer,
                trainable=trainable,
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


def batch_normalization(
    inputs: TensorLike,
    axis: int = -1,
    momentum: float = 0.99,
    epsilon: float = 1e-3,
    center: bool = True,
    scale: bool = True,
    beta_initializer: Any = init_ops.zeros_initializer(),  # noqa: B008 - TF's default
    gamma_initializer: Any = init_ops.ones_initializer(),  # noqa: B008 - TF's default
    moving_mean_initializer: Any = init_ops.zeros_initializer(),  # noqa: B008 - TF's default
    moving_variance_initializer: Any = init_ops.ones_initializer(),  # noqa: B008
    beta_regularizer: Callable[[Tensor], Tensor] | None = None,
    gamma_regularizer: Callable[[Tensor], Tensor] | None = None,
    beta_constraint: Any = None,
    gamma_constraint: Any = None,
    training: Any = False,
    trainable: bool = True,
    name: str | None = None,
    reuse: bool | None = None,
    renorm: bool = False,
    renorm_clipping: Any = None,
    renorm_momentum: float = 0.99,
    fused: bool | None = None,
    virtual_batch_size: int | None = None,
    adjustment: Any = None,
) -> Tensor:
    """Batch normalization over the last axis: variables ``gamma``, ``beta`` (trainable),
    ``moving_mean``, ``moving_variance`` (not), in variable scope ``batch_normalization``.
    While ``training`` (a bool or a bool tensor) it normalizes with the batch's ``moments``
    and adds the moving averages' updates (``AssignMovingAvg``) to ``UPDATE_OPS``; otherwise it
    uses the moving averages.  TF's non-fused layer, as it builds it for a 2-D input."""
    refuse_unsupported(
        "tf.layers.batch_normalization",
        beta_constraint=beta_constraint,
        gamma_constraint=gamma_constraint,
        renorm=renorm or None,
        renorm_clipping=renorm_clipping,
        fused=fused or None,  # (False and None: the ops below, as TF builds them for 2-D)
        virtual_batch_size=virtual_batch_size,
        adjustment=adjustment,
    )
    del renorm_momentum  # used only with renorm
    x = convert_to_tensor(inputs)
    size = _normalized_size(x, axis)
    with variable_scope(name, default_name="batch_normalization", values=[x], reuse=reuse):
        gamma = beta = None
        if scale:
            gamma = _bn_weight("gamma", x, size, gamma_initializer, gamma_regularizer, trainable)
        if center:
            beta = _bn_weight("beta", x, size, beta_initializer, beta_regularizer, trainable)
        moving_mean = _bn_weight("moving_mean", x, size, moving_mean_initializer)
        moving_variance = _bn_weight("moving_variance", x, size, moving_variance_initializer)
        mean, variance = moving_mean, moving_variance
        if _constant_value(training) is not False:  # True, or only known at run time
            mean, variance = _training_moments(x, training, momentum, moving_mean, moving_variance)
        return nn_impl.batch_normalization(x, mean, variance, beta, gamma, epsilon)


def _normalized_size(x, axis):
    """The size of the last axis, the one batch normalization normalizes (minitf: only it)."""
    ndims = x.shape.ndims
    if ndims is None or axis not in (-1, ndims - 1):
        raise ValueError("minitf: tf.layers.batch_normalization normalizes the last axis only")
    size = x.shape.as_list()[-1]
    if size is None:
        raise ValueError("Input has undefined `axis` dimension. Input shape: %s" % x.shape)
    return size


def _bn_weight(name, x, size, initializer, regularizer=None, trainable=False):
    return get_variable(
        name, [size], x.dtype.base_dtype, initializer, regularizer, trainable=trainable
    )


def _constant_value(pred):
    """A predicate's value when the graph is built: a Python bool, a ``Const``; else None."""
    if isinstance(pred, Tensor):
        value = array_ops._static_value(pred)
        return None if value is None else bool(value)
    return bool(pred)


def _training_moments(x, training, momentum, moving_mean, moving_variance):
    """The batch's moments while ``training``, else the moving averages (``cond``,
    ``cond_1``); the averages' updates while training (``cond_2``, ``cond_3``) go to
    ``UPDATE_OPS``."""
    axes = list(range(x.shape.ndims - 1))
    batch_mean, batch_variance = nn_impl.moments(x, axes)
    mean = smart_cond(training, lambda: batch_mean, lambda: convert_to_tensor(moving_mean))
    variance = smart_cond(
        training, lambda: batch_variance, lambda: convert_to_tensor(moving_variance)
    )
    for var, value in ((moving_mean, mean), (moving_variance, variance)):
        update = smart_cond(
            training,
            lambda var=var, value=value: _assign_moving_average(var, value, momentum),
            lambda var=var: convert_to_tensor(var),
        )
        x.graph.add_to_collection(GraphKeys.UPDATE_OPS, update.op)
    return mean, variance


def _assign_moving_average(variable, value, momentum):
    """``variable -= (variable - value) * (1 - momentum)``, next to the variable
    (``AssignMovingAvg``)."""
    with _name_scope(None, "AssignMovingAvg", [variable, value]) as scope:
        with variable.graph.colocate_with(variable.op):
            decay = convert_to_tensor(1.0 - momentum, name="decay")
            if decay.dtype.base_dtype != variable.dtype.base_dtype:
                decay = math_ops.cast(decay, variable.dtype.base_dtype)
            delta = (variable - math_ops.cast(value, variable.dtype.base_dtype)) * decay
            return state_ops.assign_sub(variable, delta, name=scope)


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
