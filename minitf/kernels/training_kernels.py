"""Kernels of the ``Apply*`` training ops: a variable and its slots updated in place.

Book section: "Distributing TensorFlow" (asynchronous data parallelism: every worker's update
op runs on the variable's ps task, against the one copy of the variable there) and TF's
``core/kernels/training_ops.cc``.  As in TF:

* the update writes into the variable's (and its slots') stored buffer: every backend
  function is asked to write its result into it (``out=``), which it does when the buffer can
  hold it (an array; a numpy scalar is immutable, so a scalar variable gets a new value);
* ``use_locking=True`` holds every referenced variable's lock for the whole update; with
  ``use_locking=False`` (the optimizers' default) concurrent updates race: Hogwild;
* the output is the reference to the variable;
* the kernels exist for float16, float32 and float64, on CPUs and GPUs.

The formulas are TF's functors (``ApplyAdam``: ``m += (g - m)(1 - beta1)`` ...); each update
is written once against the backend surface (``tensor_ops.py``), so it runs on numpy (CPU,
emulated cards) and on CUDA.
"""

from __future__ import annotations

import contextlib

import numpy as np

from minitf.framework import errors
from minitf.kernels.registry import FLOATS, register
from minitf.kernels.tensor_ops import shape_text
from minitf.ops.training_ops import INPUTS

# the op attributes (besides T and use_locking) an update reads
_ATTRS = {"ApplyMomentum": ("use_nesterov",), "ApplyAdam": ("use_nesterov",)}
_ATTRS["ApplyAdagrad"] = ("update_slots",)


class _Math:
    """The backend functions the updates use, made once per kernel."""

    def __init__(self, backend, np_dtype):
        self.add, self.sub, self.mul, self.div = (
            backend.zip(f) for f in ("add", "sub", "mul", "realdiv")
        )
        self.square = backend.map("square")
        self.sqrt = backend.map("sqrt")
        self.rsqrt = backend.map("rsqrt")
        self.one = backend.constant(np.asarray(1, np_dtype))


def _gradient_descent(ctx, m, attrs, var, alpha, delta):
    return [m.sub(ctx, var, m.mul(ctx, delta, alpha), out=var)]


def _gradient_descent_in_delta(ctx, m, attrs, var, alpha, delta):
    """The same where ``delta`` dies with the update (see ``_SCRATCH``): ``delta * alpha`` is
    written into its buffer, so no step of plain SGD allocates a variable-sized temporary
    (TF's Eigen expression ``var -= grad * lr`` makes none either)."""
    return [m.sub(ctx, var, m.mul(ctx, delta, alpha, out=delta), out=var)]


#: The updates that can write into a gradient that dies with them, and which input it is: the
#: executor calls ``compute.forwarding[p]`` when input ``p`` is the step's last use of a buffer
#: its producer made (runtime/tensor_lifetime.py), otherwise the plain ``compute``.
_SCRATCH = {"ApplyGradientDescent": (2, _gradient_descent_in_delta)}


def _momentum(ctx, m, attrs, var, accum, lr, grad, momentum):
    accum = m.add(ctx, m.mul(ctx, accum, momentum, out=accum), grad, out=accum)
    if attrs["use_nesterov"]:
        step = m.mul(ctx, m.mul(ctx, accum, momentum), lr)
        step = m.add(ctx, m.mul(ctx, grad, lr), step, out=step)
    else:
        step = m.mul(ctx, accum, lr)
    return [m.sub(ctx, var, step, out=var), accum]


def _decay_toward(ctx, m, slot, target, rate):
    """``slot += (target - slot) * (1 - rate)``, in ``slot``'s buffer."""
    t = m.sub(ctx, target, slot)
    t = m.mul(ctx, t, m.sub(ctx, m.one(ctx), rate), out=t)
    return m.add(ctx, slot, t, out=slot)


def _adam(ctx, m, attrs, var, m_, v, b1_power, b2_power, lr, beta1, beta2, epsilon, grad):
    one = m.one(ctx)
    alpha = m.div(
        ctx, m.mul(ctx, lr, m.sqrt(ctx, m.sub(ctx, one, b2_power))), m.sub(ctx, one, b1_power)
    )
    m_ = _decay_toward(ctx, m, m_, grad, beta1)
    v = _decay_toward(ctx, m, v, m.square(ctx, grad), beta2)
    if attrs["use_nesterov"]:
        num = m.add(ctx, m.mul(ctx, grad, m.sub(ctx, one, beta1)), m.mul(ctx, m_, beta1))
    else:
        num = m_
    denom = m.sqrt(ctx, v)
    denom = m.add(ctx, denom, epsilon, out=denom)
    step = m.mul(ctx, num, alpha)
    step = m.div(ctx, step, denom, out=step)
    return [m.sub(ctx, var, step, out=var), m_, v]


def _rms_step(ctx, m, mom, lr, momentum, grad, denom):
    """``mom = mom * momentum + grad * lr / sqrt(denom)``, in ``mom``'s buffer."""
    denom = m.sqrt(ctx, denom, out=denom)
    t = m.mul(ctx, grad, lr)
    t = m.div(ctx, t, denom, out=t)
    return m.add(ctx, m.mul(ctx, mom, momentum, out=mom), t, out=mom)


def _rms_prop(ctx, m, attrs, var, ms, mom, lr, rho, momentum, epsilon, grad):
    ms = _decay_toward(ctx, m, ms, m.square(ctx, grad), rho)
    mom = _rms_step(ctx, m, mom, lr, momentum, grad, m.add(ctx, ms, epsilon))
    return [m.sub(ctx, var, mom, out=var), ms, mom]


def _centered_rms_prop(ctx, m, attrs, var, mg, ms, mom, lr, rho, momentum, epsilon, grad):
    ms = _decay_toward(ctx, m, ms, m.square(ctx, grad), rho)
    mg = _decay_toward(ctx, m, mg, grad, rho)
    denom = m.sub(ctx, ms, m.square(ctx, mg))
    denom = m.add(ctx, denom, epsilon, out=denom)
    mom = _rms_step(ctx, m, mom, lr, momentum, grad, denom)
    return [m.sub(ctx, var, mom, out=var), mg, ms, mom]


def _adagrad(ctx, m, attrs, var, accum, lr, grad):
    if attrs["update_slots"]:
        accum = m.add(ctx, accum, m.square(ctx, grad), out=accum)
    t = m.mul(ctx, grad, lr)
    t = m.mul(ctx, t, m.rsqrt(ctx, accum), out=t)
    return [m.sub(ctx, var, t, out=var), accum]


@contextlib.contextmanager
def _locked(refs):
    """TF's ``MaybeLockVariableInputMutexesInOrder`` with ``use_locking``: every distinct
    variable's lock, taken in one fixed order (without it nothing is locked: Hogwild)."""
    with contextlib.ExitStack() as stack:
        for ref in sorted({id(r): r for r in refs}.values(), key=id):
            stack.enter_context(ref.lock)
        yield


def _read(ref):
    value = ref.value
    if value is None:
        raise errors.FailedPreconditionError(
            None, None, "Attempting to use uninitialized variables: %s" % ref.name
        )
    return value


def _checker(backend, inputs):
    """TF's checks of an update's inputs, made once per kernel: ``check(values)`` raises unless
    the hyperparameters are scalars and the slots and the gradient have var's shape."""
    shape = backend.shape
    scalars = [(i, arg) for i, (arg, kind) in enumerate(inputs) if kind == "scalar"]
    shaped = [(i, arg) for i, (arg, kind) in enumerate(inputs) if i and kind != "scalar"]

    def check(values):  # (a backend's shape is a tuple: TensorOps.shape)
        for i, arg in scalars:
            got = shape(values[i])
            if got != ():
                raise errors.InvalidArgumentError(
                    None, None, "%s is not a scalar: %s" % (arg, shape_text(got))
                )
        var_shape = shape(values[0])
        for i, arg in shaped:
            got = shape(values[i])
            if got != var_shape:
                raise errors.InvalidArgumentError(
                    None,
                    None,
                    "var and %s do not have the same shape%s %s"
                    % (arg, shape_text(var_shape), shape_text(got)),
                )

    return check


def _factory(op_type, update):
    inputs = INPUTS[op_type]
    n_refs = sum(kind == "ref" for _, kind in inputs)

    def factory(op, device):
        backend = device.backend
        math = _Math(backend, op.get_attr("T").as_numpy_dtype)
        use_locking = bool(op.get_attr("use_locking"))
        attrs = {a: bool(op.get_attr(a)) for a in _ATTRS.get(op_type, ())}
        check = _checker(backend, inputs)

        def apply(ctx, refs, ins, update):
            values = [_read(r) for r in refs]
            values += ins[n_refs:]
            check(values)
            new = update(ctx, math, attrs, *values)
            for ref, old, value in zip(refs, values, new):
                if value is not old:  # it could not be written in place (a scalar)
                    ref.set(value)

        def kernel(update):
            def compute(ctx, ins):
                refs = ins[:n_refs]
                if use_locking:
                    with _locked(refs):
                        apply(ctx, refs, ins, update)
                else:  # Hogwild, the optimizers' default: no lock (no context manager to run)
                    apply(ctx, refs, ins, update)
                return (refs[0],)

            return compute

        compute = kernel(update)
        if op_type in _SCRATCH:
            p, into = _SCRATCH[op_type]
            compute.forwarding = {p: kernel(into)}
        return compute

    factory.__name__ = "%s_kernel" % op_type
    return factory


for _op_type, _update in (
    ("ApplyGradientDescent", _gradient_descent),
    ("ApplyMomentum", _momentum),
    ("ApplyAdam", _adam),
    ("ApplyRMSProp", _rms_prop),
    ("ApplyCenteredRMSProp", _centered_rms_prop),
    ("ApplyAdagrad", _adagrad),
):
    forwards = (_SCRATCH[_op_type][0],) if _op_type in _SCRATCH else ()
    register(_op_type, _factory(_op_type, _update), cpu=FLOATS, gpu=FLOATS, forwards=forwards)
