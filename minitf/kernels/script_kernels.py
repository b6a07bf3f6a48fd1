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


def _dtype_of(value):
    """The dtype of a returned value (``str``/``bytes`` and their arrays: string)."""
    if isinstance(value, (bytes, str)):
        return dtypes.string, np.array(value.encode() if isinstance(value, str) else value, object)
    arr = np.asarray(value)
    if arr.dtype.kind in "SUO":
        return dtypes.string, arr.astype(object)
    return dtypes.as_dtype(arr.dtype), arr


def call(token, tout, args):
    """The values ``token``'s function returns for ``args``, checked against ``tout``."""
    fn = script_ops.lookup(token)
    if fn is None:
        raise errors.InvalidArgumentError(
            None, None, "ValueError: callback %s is not found" % token
        )
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
        got, arr = _dtype_of(value)
        if got != want:
            raise errors.InvalidArgumentError(
                None,
                None,
                "%d-th value returned by %s is %s, but expects %s"
                % (i, token, got.type_string, want.type_string),
            )
        out.append(arr[()] if arr.ndim == 0 else arr)  # a scalar as numpy's (bytes for strings)
    return tuple(out)


def _py_func(op, device):
    token, tout = op.get_attr("token"), list(op.get_attr("Tout"))
    token = token.decode() if isinstance(token, bytes) else token
    return lambda ctx, ins: call(
        token, tout, [np.asarray(x) if not isinstance(x, bytes) else x for x in ins]
    )


register("PyFunc", _py_func, cpu="any", cost="expensive")
register("PyFuncStateless", _py_func, cpu="any", cost="expensive")
