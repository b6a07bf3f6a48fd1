"""The global step: ``tf.train.get_or_create_global_step`` and friends.

Book section: "Distributing TensorFlow" (between-graph replication: every worker increments the
one ``global_step`` variable on a ps task; ``StopAtStepHook`` and checkpoints read it).  TF's
``python/training/training_util.py``, reference part 2 §17.3: an int64 scalar variable named
``global_step`` in collections ``variables`` and ``global_step``, made by ``get_variable`` with
the name scope reset (a surrounding variable scope still prefixes it).
"""

from __future__ import annotations

import logging
from typing import Any

from minitf.framework import dtypes
from minitf.framework.graph import Graph, GraphKeys, SessionLike, Tensor, get_default_graph
from minitf.ops import init_ops, variable_scope
from minitf.ops.variables import Variable

_log = logging.getLogger("minitf")


def global_step(sess: SessionLike, global_step_tensor: Variable | Tensor) -> int:
    """The global step's value as a Python int: ``int(sess.run(global_step_tensor))``."""
    return int(sess.run(global_step_tensor))


def get_global_step(graph: Graph | None = None) -> Variable | Tensor | None:
    """The only member of collection ``global_step``; if that is empty, the tensor named
    ``global_step:0``; None if there is none, or (logged as an error) more than one."""
    graph = graph or get_default_graph()
    found = graph.get_collection(GraphKeys.GLOBAL_STEP)
    if len(found) > 1:
        _log.error("Multiple tensors in global_step collection.")
        return None
    if found:
        step = found[0]
    else:
        try:
            step = graph.get_tensor_by_name("global_step:0")
        except KeyError:
            return None
    assert_global_step(step)
    return step


def assert_global_step(global_step_tensor: Any) -> None:
    """TF's checks of an existing global step: a variable or tensor, integer, scalar."""
    if not isinstance(global_step_tensor, (Variable, Tensor)):
        raise TypeError(
            'Existing "global_step" must be a Variable or Tensor: %s.' % (global_step_tensor,)
        )
    if not global_step_tensor.dtype.base_dtype.is_integer:
        raise TypeError(
            'Existing "global_step" does not have integer type: %s' % global_step_tensor.dtype
        )
    shape = global_step_tensor.get_shape()
    if shape.ndims != 0 and shape.is_fully_defined():
        raise TypeError('Existing "global_step" is not scalar: %s' % shape)


def create_global_step(graph: Graph | None = None) -> Variable:
    """Makes the global step (``ValueError`` if the graph has one): ops ``global_step``,
    ``global_step/Initializer/zeros``, ``global_step/Assign``, ``global_step/read``."""
    graph = graph or get_default_graph()
    if get_global_step(graph) is not None:
        raise ValueError('"global_step" already exists.')
    with graph.as_default() as g, g.name_scope(None):
        return variable_scope.get_variable(
            GraphKeys.GLOBAL_STEP,
            shape=[],
            dtype=dtypes.int64,
            initializer=init_ops.zeros_initializer(),
            trainable=False,
            collections=[GraphKeys.GLOBAL_VARIABLES, GraphKeys.GLOBAL_STEP],
        )


def get_or_create_global_step(graph: Graph | None = None) -> Variable | Tensor:
    """The graph's global step, made first if it has none."""
    graph = graph or get_default_graph()
    step = get_global_step(graph)
    if step is None:
        step = create_global_step(graph)
    return step
