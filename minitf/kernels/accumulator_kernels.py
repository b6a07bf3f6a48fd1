"""Conditional accumulator kernels: ``ResourceConditionalAccumulator`` and its access kernels.

Book section: "Data parallelism" → "Synchronous updates" (TF's
core/kernels/conditional_accumulator_base_op.h, conditional_accumulator_op.cc).  The creating
kernel finds or makes its accumulator (``framework/accumulator_resource.py``) at its first run:
a shared one in its device's resource manager by container and ``shared_name`` (what every
replica's ``<var>/grad_accum`` is), a private one (``_<n>_<op name>``) held by the kernel.
``ResourceAccumulatorTakeGradient`` is asynchronous: its wait for enough gradients is an
attempt of the accumulator that holds no thread, ended by the accumulator or by the step's
cancellation (``ctx.on_cancel``: a timeout, a closed session).  The other kernels are
synchronous.  CPU only, as in TF; the creating kernel for half, float and double.
"""

import numpy as np

from minitf.framework import errors
from minitf.framework.accumulator_resource import ConditionalAccumulator
from minitf.kernels.registry import FLOATS, register
from minitf.kernels.resource_kernels import find_or_make, resource_op
from minitf.kernels.tensor_ops import invalid_argument


def _accumulator_op(op, device):
    """``ResourceConditionalAccumulator``: the accumulator, found or made at the first run (TF's
    MatchesNodeDef checks nothing: a later op shares the first one's accumulator as it is)."""
    shape = op.get_attr("shape")
    shape = None if shape.ndims is None else tuple(shape.as_list())

    def make(name):
        dtype = op.get_attr("dtype")
        return ConditionalAccumulator(name, dtype, shape, op.get_attr("reduction_type"))

    return resource_op(lambda: find_or_make(op, device, make, shared_names_public=True))


def _check_signature(acc, have_inputs, dtype, outputs=""):
    """TF's ``MatchSignature``: the op's gradient dtype must be the accumulator's."""
    if dtype != acc.dtype:
        raise invalid_argument(
            "Signature mismatch, have: %s%s->%s expected: %s%s->%s"
            % (
                have_inputs,
                "" if outputs else ", " + dtype.type_string,
                dtype.type_string if outputs else "",
                have_inputs,
                "" if outputs else ", " + acc.dtype.type_string,
                acc.dtype.type_string if outputs else "",
            )
        )


def _check_scalar(what, value):
    if np.ndim(value) != 0:
        raise invalid_argument(
            "Argument %s must be scalar, but had bad shape [%s]"
            % (what, ",".join(str(d) for d in np.shape(value)))
        )


def _apply_gradient(op, device):
    dtype = op.get_attr("dtype")

    def compute(ctx, ins):
        acc, local_step, grad = ins
        _check_signature(acc, "resource, int64", dtype)
        _check_scalar("local_step", local_step)
        acc.apply_grad(int(local_step), grad)
        return ()

    return compute


def _take_gradient(op, device):
    dtype = op.get_attr("dtype")

    def compute(ctx, ins, done):
        acc, num_required = ins
        try:
            _check_signature(acc, "resource, int32", dtype, outputs="yes")
            _check_scalar("num_required", num_required)
            token = []

            def callback(result, error):
                if token:
                    ctx.remove_on_cancel(token[0])
                if error is not None:
                    done(None, error)
                else:
                    done((result[()] if result.ndim == 0 else result,))

            attempt = acc.take_grad(int(num_required), callback)
        except errors.OpError as e:
            done(None, e)
            return
        if not attempt.finished:
            token.append(ctx.on_cancel(lambda error: acc.cancel(attempt)))

    return compute


def _num_accumulated(op, device):
    return lambda ctx, ins: (np.int32(ins[0].num_accumulated()),)


def _set_global_step(op, device):
    def compute(ctx, ins):
        acc, step = ins
        _check_scalar("new_global_step", step)
        acc.set_global_step(int(step))
        return ()

    return compute


register("ResourceConditionalAccumulator", _accumulator_op, cpu=FLOATS)
register("ResourceAccumulatorApplyGradient", _apply_gradient, cpu="any")
register("ResourceAccumulatorTakeGradient", _take_gradient, cpu="any", is_async=True)
register("ResourceAccumulatorNumAccumulated", _num_accumulated, cpu="any")
register("ResourceAccumulatorSetGlobalStep", _set_global_step, cpu="any")
