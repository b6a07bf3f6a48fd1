"""A function's graph: what ``Dataset.map`` and the other ``tf.data`` transformations run for
each element (TF's ``FuncGraph`` and ``Defun``).

Book section: "Loading Data Directly from the Graph" (the Data API of the companion notebook).
TF traces the Python function of a ``map``, ``filter``, ``flat_map`` or ``interleave`` into a
graph of its own, a function of the graph's library: a placeholder per component of the element
(``args_0``, ``args_1`` ...), the ops the function builds, and its results.  A tensor of the
graph outside that the function reads is *captured*: the function gets one more placeholder, and
the dataset op takes the outside tensor as an input (its ``other_arguments``), so the step
computes it and hands it over.

``Dataset.make_one_shot_iterator`` copies the ops that build a dataset into a function too, *by
value* (TF's ``capture_by_value``): the iterator then builds its dataset itself, once, and
needs nothing from the step.  A placeholder or a stateful op (a variable) cannot be copied.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

from minitf.framework.graph import Graph, Operation, Tensor
from minitf.lib import nest
from minitf.ops import array_ops

_ids = itertools.count()


class FuncGraph(Graph):
    """The graph of one traced function: ``inputs`` (its arguments' placeholders), ``captures``
    (outside tensor -> its placeholder, in the order met) and ``outputs`` (flat tensors)."""

    _captures_inputs = True

    def __init__(self, name: str, outer_graph: Graph) -> None:
        super().__init__()
        self.name = name
        self.outer_graph = outer_graph
        self.seed = outer_graph.seed
        self.inputs: list[Tensor] = []
        self.captures: dict[Tensor, Tensor] = {}
        self.outputs: list[Tensor] = []
        self.structured_outputs: Any = None

    def __repr__(self) -> str:
        return "<function %s>" % self.name

    def create_op(self, op_type, inputs, output_specs, name, attrs=None, op_def=None):
        inputs = [t if t._op._graph is self else self.capture(t) for t in inputs]
        return super().create_op(op_type, inputs, output_specs, name, attrs, op_def)

    def capture(self, tensor: Tensor) -> Tensor:
        """The placeholder standing for an outside ``tensor`` (made at its first use)."""
        if tensor.graph is not self.outer_graph and isinstance(self.outer_graph, FuncGraph):
            tensor = self.outer_graph.capture(tensor)  # a function inside a function
        inner = self.captures.get(tensor)
        if inner is None:
            with self.as_default(), self.control_dependencies(None):
                inner = array_ops.placeholder(tensor.dtype.base_dtype, tensor.shape)
            self.captures[tensor] = inner
        return inner

    @property
    def captured_inputs(self) -> list[Tensor]:
        """The outside tensors the function reads, in the order of its extra placeholders."""
        return list(self.captures)


def trace(
    fn: Callable,
    name: str,
    arg_specs: Any,
    convert: Callable[[Any], Any],
    outer_graph: Graph,
) -> FuncGraph:
    """Traces ``fn`` over placeholders shaped like ``arg_specs`` (a nest of ``TensorSpec``
    leaves; a plain tuple is passed as separate arguments, anything else as one).  ``convert``
    turns ``fn``'s result into a nest of tensors, inside the function's graph."""
    g = FuncGraph("%s_%d" % (name, next(_ids)), outer_graph)
    leaves = nest.flatten(arg_specs, lists=False)
    with g.as_default():
        g.inputs = [
            array_ops.placeholder(spec.dtype, spec.shape, name="args_%d" % i)
            for i, spec in enumerate(leaves)
        ]
        args = nest.pack_sequence_as(arg_specs, g.inputs, lists=False)
        result = fn(*args) if type(args) is tuple else fn(args)
        g.structured_outputs = convert(result)
    g.outputs = nest.flatten(g.structured_outputs, lists=False)
    return g


def copy_by_value(outputs: Sequence[Tensor], name: str) -> FuncGraph:
    """A function, without arguments, whose ops are copies of those ``outputs`` depend on:
    TF's ``Defun(capture_by_value=True)``.  Raises TF's ValueError for a placeholder or a
    stateful op among them (a variable cannot be copied)."""
    outer = outputs[0].graph
    g = FuncGraph("%s_%d" % (name, next(_ids)), outer)
    copied: dict[Operation, Operation] = {}
    for op in _ancestors(outputs):
        if op.type in ("Placeholder", "PlaceholderWithDefault"):
            raise ValueError(
                "Cannot capture a placeholder (name:%s, type:%s) by value." % (op.name, op.type)
            )
        if op._op_def is not None and op._op_def.is_stateful:
            raise ValueError(
                "Cannot capture a stateful node (name:%s, type:%s) by value." % (op.name, op.type)
            )
        inputs = [copied[t.op].outputs[t.value_index] for t in op.inputs]
        specs = [(t.dtype, t.shape) for t in op.outputs]
        attrs = {k: v for k, v in op._attrs.items() if not k.startswith("_")}
        copied[op] = g.create_op(op.type, inputs, specs, op.name + "/", attrs, op._op_def)
    g.outputs = [copied[t.op].outputs[t.value_index] for t in outputs]
    g.structured_outputs = list(g.outputs)
    return g


def _ancestors(outputs: Sequence[Tensor]) -> list[Operation]:
    """The ops ``outputs`` are computed from (data inputs only), in the graph's order."""
    seen: set[Operation] = set()
    stack = [t.op for t in outputs]
    while stack:
        op = stack.pop()
        if op not in seen:
            seen.add(op)
            stack.extend(t.op for t in op.inputs)
    return sorted(seen, key=lambda op: op._id)
