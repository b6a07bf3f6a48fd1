"""``tf.py_func``: a Python function as an op of the graph (TF 1.15's python/ops/script_ops.py).

Book section: "Loading Data Directly from the Graph" (a pipeline step that only Python can do,
and ``tf.data.Dataset.from_generator``, which is built on it).  The function stays in this
process: the op carries only a *token* (``pyfunc_0``, ``pyfunc_1`` ...) that names it in the
process's registry, so the op runs only in the process that made it (TF's rule too: on another
task's server the token names nothing).  Its outputs' shapes are unknown; their dtypes are
``Tout``'s, which the values returned must have exactly.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable

from minitf.framework import dtypes, tensor_shape
from minitf.framework.graph import Tensor, convert_to_tensor
from minitf.ops.op_def import NotDifferentiable, apply_op, register_op

for _op_type in ("PyFunc", "PyFuncStateless"):
    NotDifferentiable(_op_type)
register_op("PyFunc", is_stateful=True)
register_op("PyFuncStateless")

_lock = threading.Lock()
_ids = itertools.count()
_registry: dict[str, Callable] = {}  # token -> function, for the life of the process


def register(fn: Callable) -> str:
    """A new token naming ``fn`` in this process (TF's ``FuncRegistry.insert``)."""
    with _lock:
        token = "pyfunc_%d" % next(_ids)
        _registry[token] = fn
    return token


def lookup(token: str) -> Callable | None:
    return _registry.get(token)


def py_func(func, inp, Tout, stateful=True, name=None):  # noqa: N803 - TF's argument name
    """``PyFunc`` (``PyFuncStateless`` when not ``stateful``): ``func`` called with the numpy
    values of ``inp`` when the step runs; a list ``Tout`` gives a list of tensors."""
    if not callable(func):
        raise TypeError("func must be callable, got %r" % (func,))
    as_list = isinstance(Tout, (list, tuple))
    tout = [dtypes.as_dtype(t) for t in (Tout if as_list else [Tout])]
    inputs = [x if isinstance(x, Tensor) else convert_to_tensor(x) for x in inp]
    op_type = "PyFunc" if stateful else "PyFuncStateless"
    attrs = {
        "token": register(func),
        "Tin": [t.dtype.base_dtype for t in inputs],
        "Tout": tout,
    }
    specs = [(t, tensor_shape.unknown_shape()) for t in tout]
    op = apply_op(op_type, inputs, specs, name or op_type, attrs)
    return list(op.outputs) if as_list else op.outputs[0]
