"""The ``PyFunc`` kernel: a Python function called when the step runs (TF's py_func_op).

Book section: "Loading Data Directly from the Graph".  The op's token names its function in
this process's registry (``ops/script_ops.py``); the function gets its inputs as numpy values
and must return one value per ``Tout`` of exactly that dtype (a Python float is a double, as in
TF).  An exception it raises fails the step with ``InvalidArgumentError``, its class, text and
traceback in the message.
"""

from __future__ import annotations

import traceback

import numpy as np

from minitf.framework import dtypes, errors
from minitf.kernels.registry import register
from minitf.ops import script_ops


def tensor_value(x):
    """A Python value (what a generator or a ``py_func`` gives, a dataset's component) as
    minitf holds a tensor's: a string scalar as ``bytes``, a string array as an object array of
    ``bytes``, anything else as a numpy array."""
    if isinstance(x, str):
        return x.encode("utf-8")
    if isinstance(x, bytes):
        return x
    arr = np.asarray(x)
    if arr.dtype.kind in "SU":
        arr = np.vectorize(
            lambda v: v.encode("utf-8") if isinstance(v, str) else bytes(v), otypes=[object]
        )(arr)
    if arr.dtype.kind == "O" and arr.ndim == 0:
        return tensor_value(arr.item())
    return arr


def token_of(op) -> str:
    """The token an op's ``token`` attr holds, as text."""
    token = op.get_attr("token")
    return token.decode() if isinstance(token, bytes) else token


def registered(token):
    """The function ``token`` names in this process (TF's error when it names none: the op
    was made by another process)."""
    fn = script_ops.lookup(token)
    if fn is None:
        raise errors.InvalidArgumentError(
            None, None, "ValueError: callback %s is not found" % token
        )
    return fn


def _call(token, tout, args):
    """The values ``token``'s function returns for ``args``, checked against ``tout``."""
    fn = registered(token)
    try:
        ret = fn(*args)
    except Exception as e:  # noqa: BLE001 - whatever the learner's function raises
        raise errors.InvalidArgumentError(
            None, None, "%s: %s\n%s" % (type(e).__name__, e, traceback.format_exc())
        ) from None
    # TF's rule: a list or tuple returned is several values (return an array for one vector)
    values = list(ret) if isinstance(ret, (list, tuple)) else [ret]
    if not tout and ret is None:
        values = []
    if len(values) != len(tout):
        raise errors.InvalidArgumentError(
            None,
            None,
            "%s returns %d values, but expects to see %d values." % (token, len(values), len(tout)),
        )
    out = []
    for i, (value, want) in enumerate(zip(values, tout)):
        value = tensor_value(value)
        got = dtypes.string if isinstance(value, bytes) else dtypes.as_dtype(value.dtype)
        if got != want:
            raise errors.InvalidArgumentError(
                None,
                None,
                "%d-th value returned by %s is %s, but expects %s"
                % (i, token, got.type_string, want.type_string),
            )
        out.append(value[()] if isinstance(value, np.ndarray) and value.ndim == 0 else value)
    return tuple(out)


def _py_func(op, device):
    token, tout = token_of(op), list(op.get_attr("Tout"))
    return lambda ctx, ins: _call(
        token, tout, [np.asarray(x) if not isinstance(x, bytes) else x for x in ins]
    )


register("PyFunc", _py_func, cpu="any", cost="expensive")
register("PyFuncStateless", _py_func, cpu="any", cost="expensive")
