"""The ``Apply*`` training ops: one fused update of a variable (and its slots) per op.

Book section: "Sharding Variables Across Multiple Parameter Servers" and the async training of
"Distributing TensorFlow" (TF's ``python/training/gen_training_ops``): an optimizer's
``apply_gradients`` builds one of these ops per variable.  Its first inputs are references to
the variable and its slots (so, like ``Assign``, the op is colocated with the variable and
runs on the variable's ps task); the rest are values: hyperparameters (scalars) and the
gradient (the variable's shape).  Its output is the reference to the updated variable.

Graph-time checks follow TF's shape functions: a hyperparameter must have rank 0 and every
slot and the gradient must be compatible with the variable.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from minitf.framework.graph import Tensor, convert_to_tensor, name_scope
from minitf.ops.op_def import apply_op, register_op, shape_error
from minitf.ops.state_ops import _as_ref, _shape_reason

if TYPE_CHECKING:
    from minitf.ops.array_ops import TensorLike

# op type -> its inputs in order: (name, kind) with kind "ref", "scalar" or "tensor"
INPUTS = {
    "ApplyGradientDescent": (("var", "ref"), ("alpha", "scalar"), ("delta", "tensor")),
    "ApplyMomentum": (
        ("var", "ref"),
        ("accum", "ref"),
        ("lr", "scalar"),
        ("grad", "tensor"),
        ("momentum", "scalar"),
    ),
    "ApplyAdam": (
        ("var", "ref"),
        ("m", "ref"),
        ("v", "ref"),
        ("beta1_power", "scalar"),
        ("beta2_power", "scalar"),
        ("lr", "scalar"),
        ("beta1", "scalar"),
        ("beta2", "scalar"),
        ("epsilon", "scalar"),
        ("grad", "tensor"),
    ),
    "ApplyRMSProp": (
        ("var", "ref"),
        ("ms", "ref"),
        ("mom", "ref"),
        ("lr", "scalar"),
        ("rho", "scalar"),
        ("momentum", "scalar"),
        ("epsilon", "scalar"),
        ("grad", "tensor"),
    ),
    "ApplyCenteredRMSProp": (
        ("var", "ref"),
        ("mg", "ref"),
        ("ms", "ref"),
        ("mom", "ref"),
        ("lr", "scalar"),
        ("rho", "scalar"),
        ("momentum", "scalar"),
        ("epsilon", "scalar"),
        ("grad", "tensor"),
    ),
    "ApplyAdagrad": (("var", "ref"), ("accum", "ref"), ("lr", "scalar"), ("grad", "tensor")),
}

for _op_type, _inputs in INPUTS.items():
    register_op(_op_type, ref_inputs=tuple(kind == "ref" for _, kind in _inputs))


def _convert(op_type, inputs, values):
    """The op's input tensors: references checked, values converted to the variable's type."""
    var = _as_ref(op_type, values[0])
    dtype = var.dtype.base_dtype
    out = []
    for (arg, kind), value in zip(inputs, values):
        if kind == "ref":
            t = _as_ref(op_type, value)
        else:
            t = convert_to_tensor(
                value, dtype=None if isinstance(value, Tensor) else dtype, name=arg
            )
        if t.dtype.base_dtype != dtype:
            raise TypeError(
                "Input '%s' of '%s' Op has type %s that does not match type %s of argument "
                "'var'." % (arg, op_type, t.dtype.base_dtype.name, dtype.name)
            )
        out.append(t)
    return var, out


def _check_shapes(op_type, scope, inputs, tensors):
    var = tensors[0]
    for (_, kind), t in zip(inputs, tensors):
        if kind == "scalar":
            if t.shape.ndims not in (None, 0):
                raise shape_error(
                    op_type, scope, tensors, "Shape must be rank 0 but is rank %d" % t.shape.ndims
                )
        elif not var.shape.is_compatible_with(t.shape):
            raise shape_error(op_type, scope, tensors, _shape_reason(var, t))


def apply_training_op(
    op_type: str, values: list, use_locking: bool = False, name: str | None = None, **attrs
) -> Tensor:
    """Builds ``op_type`` (a key of :data:`INPUTS`) over ``values``; returns the reference."""
    inputs = INPUTS[op_type]
    with name_scope(name, op_type, values) as scope:
        var, tensors = _convert(op_type, inputs, values)
        _check_shapes(op_type, scope, inputs, tensors)
        all_attrs = {"T": var.dtype.base_dtype, "use_locking": bool(use_locking)}
        all_attrs.update(attrs)
        op = apply_op(op_type, tensors, [(var.dtype, var.shape)], scope, all_attrs)
        return op.outputs[0]


def apply_gradient_descent(
    var: TensorLike,
    alpha: TensorLike,
    delta: TensorLike,
    use_locking: bool = False,
    name: str | None = None,
) -> Tensor:
    """``ApplyGradientDescent``: ``var -= alpha * delta``."""
    return apply_training_op("ApplyGradientDescent", [var, alpha, delta], use_locking, name)


def apply_momentum(
    var: TensorLike,
    accum: TensorLike,
    lr: TensorLike,
    grad: TensorLike,
    momentum: TensorLike,
    use_locking: bool = False,
    use_nesterov: bool = False,
    name: str | None = None,
) -> Tensor:
    """``ApplyMomentum``: ``accum = accum * momentum + grad; var -= lr * accum`` (Nesterov:
    ``var -= lr * grad + lr * momentum * accum``)."""
    return apply_training_op(
        "ApplyMomentum",
        [var, accum, lr, grad, momentum],
        use_locking,
        name,
        use_nesterov=bool(use_nesterov),
    )


def apply_adam(
    var: TensorLike,
    m: TensorLike,
    v: TensorLike,
    beta1_power: TensorLike,
    beta2_power: TensorLike,
    lr: TensorLike,
    beta1: TensorLike,
    beta2: TensorLike,
    epsilon: TensorLike,
    grad: TensorLike,
    use_locking: bool = False,
    use_nesterov: bool = False,
    name: str | None = None,
) -> Tensor:
    """``ApplyAdam``: ``m += (g - m)(1 - beta1); v += (g² - v)(1 - beta2);
    var -= lr·sqrt(1 - beta2_power)/(1 - beta1_power) · m / (sqrt(v) + epsilon)``."""
    return apply_training_op(
        "ApplyAdam",
        [var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad],
        use_locking,
        name,
        use_nesterov=bool(use_nesterov),
    )


def apply_rms_prop(
    var: TensorLike,
    ms: TensorLike,
    mom: TensorLike,
    lr: TensorLike,
    rho: TensorLike,
    momentum: TensorLike,
    epsilon: TensorLike,
    grad: TensorLike,
    use_locking: bool = False,
    name: str | None = None,
) -> Tensor:
    """``ApplyRMSProp``: ``ms += (g² - ms)(1 - rho); mom = mom·momentum + lr·g/sqrt(ms + eps);
    var -= mom``."""
    return apply_training_op(
        "ApplyRMSProp", [var, ms, mom, lr, rho, momentum, epsilon, grad], use_locking, name
    )


def apply_centered_rms_prop(
    var: TensorLike,
    mg: TensorLike,
    ms: TensorLike,
    mom: TensorLike,
    lr: TensorLike,
    rho: TensorLike,
    momentum: TensorLike,
    epsilon: TensorLike,
    grad: TensorLike,
    use_locking: bool = False,
    name: str | None = None,
) -> Tensor:
    """``ApplyCenteredRMSProp``: RMSProp with the mean gradient ``mg`` subtracted:
    ``mom = mom·momentum + lr·g/sqrt(ms - mg² + eps)``."""
    return apply_training_op(
        "ApplyCenteredRMSProp",
        [var, mg, ms, mom, lr, rho, momentum, epsilon, grad],
        use_locking,
        name,
    )


def apply_adagrad(
    var: TensorLike,
    accum: TensorLike,
    lr: TensorLike,
    grad: TensorLike,
    use_locking: bool = False,
    update_slots: bool = True,
    name: str | None = None,
) -> Tensor:
    """``ApplyAdagrad``: ``accum += g²; var -= lr·g/sqrt(accum)``."""
    return apply_training_op(
        "ApplyAdagrad",
        [var, accum, lr, grad],
        use_locking,
        name,
        update_slots=bool(update_slots),
    )
