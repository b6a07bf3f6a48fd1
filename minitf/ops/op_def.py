"""The op registry: what the graph layer must know about each op type before any kernel runs.

Book section: "Operations and kernels".  An *op* is the abstract operation (``MatMul``,
``VariableV2``); a *kernel* is its implementation for one device type (see
``minitf.kernels.registry``).  This registry records, per op type, which inputs are references
(ops taking a reference are built next to their variable), whether the op is stateful, and whether
it has a ``container`` attribute (``tf.container`` fills it).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from minitf.framework import graph as ops_graph
from minitf.framework.dtypes import DType
from minitf.framework.tensor_shape import TensorShape

_REGISTRY: dict[str, OpDef] = {}


class OpDef:
    """Static facts about an op type."""

    __slots__ = ("type", "ref_inputs", "is_stateful", "has_container", "type_attr")

    def __init__(
        self,
        op_type: str,
        ref_inputs: Iterable[bool] = (),
        is_stateful: bool = False,
        has_container: bool = False,
        type_attr: str = "T",
    ) -> None:
        self.type = op_type
        self.ref_inputs = tuple(ref_inputs)  # one bool per (leading) input
        self.is_stateful = is_stateful
        self.has_container = has_container
        self.type_attr = type_attr  # the attr holding the dtype that kernels are keyed on


def register_op(op_type: str, **kw: Any) -> OpDef:
    op_def = OpDef(op_type, **kw)
    _REGISTRY[op_type] = op_def
    return op_def


def get_op_def(op_type: str) -> OpDef:
    try:
        return _REGISTRY[op_type]
    except KeyError:
        raise KeyError("Op type not registered '%s'" % op_type) from None


def graph_of(inputs: Sequence[Any]) -> ops_graph.Graph:
    """The graph an op over ``inputs`` belongs to: that of its tensor inputs, else the default.
    While a function is traced (``ops/func_graph.py``) its graph is the default and takes every
    op: it captures inputs from the graph outside."""
    default = ops_graph.get_default_graph()
    if default._captures_inputs:
        return default
    g = None
    for t in inputs:
        if isinstance(t, ops_graph.Tensor):
            if g is None:
                g = t.graph
            elif t.graph is not g:
                raise ValueError("%s must be from the same graph as %s." % (t, inputs[0]))
    return g if g is not None else ops_graph.get_default_graph()


def apply_op(
    op_type: str,
    inputs: Sequence[ops_graph.Tensor],
    output_specs: Sequence[tuple[DType, TensorShape]],
    name: str,
    attrs: dict[str, Any] | None = None,
) -> ops_graph.Operation:
    """Creates an op of a registered type in the inputs' graph and returns the Operation."""
    op_def = _REGISTRY[op_type]
    return graph_of(inputs).create_op(op_type, inputs, output_specs, name, attrs, op_def)


def shape_error(
    op_type: str, name: str, inputs: Sequence[ops_graph.Tensor], reason: str
) -> ValueError:
    """TF's graph-construction shape error: ``<reason> for '<name>' (op: '<type>') with input
    shapes: [2,3], [3].``"""
    shapes = ", ".join(_shape_text(t.shape) for t in inputs)
    return ValueError(
        "%s for '%s' (op: '%s') with input shapes: %s."
        % (reason, ops_graph.name_from_scope_name(name), op_type, shapes)
    )


def _shape_text(shape):
    if shape.ndims is None:
        return "?"
    return "[%s]" % ",".join("?" if d is None else str(d) for d in shape.as_list())


# -- gradients ---------------------------------------------------------------------------------
# Book section: "Training" (the chapter's replicas all run ``tf.gradients``).  TF keeps one
# gradient function per op type (``ops.RegisterGradient``); ``tf.gradients`` looks it up for
# every op between the xs and the ys.  A function gets the forward ``op`` and one incoming
# gradient per output (None for an output nothing flowed back to) and returns one gradient
# per input (None: no gradient flows to that input).

_GRADIENTS: dict[str, Any] = {}


class RegisterGradient:
    """``@RegisterGradient("Relu")`` registers the decorated function as ``Relu``'s gradient."""

    def __init__(self, op_type: str) -> None:
        if not isinstance(op_type, str):
            raise TypeError("op_type must be a string")
        self._op_type = op_type

    def __call__(self, fn: Any) -> Any:
        if self._op_type in _GRADIENTS:
            raise KeyError("Registering two gradient with name '%s'!" % self._op_type)
        _GRADIENTS[self._op_type] = fn
        return fn


def NotDifferentiable(op_type: str) -> None:  # noqa: N802 - TF's name
    """Declares that no gradient flows through ``op_type`` (``ArgMax``, ``Shape`` ...)."""
    if not isinstance(op_type, str):
        raise TypeError("op_type must be a string")
    _GRADIENTS[op_type] = None


def get_gradient_function(op: ops_graph.Operation) -> Any:
    """The gradient function of ``op``'s type: None if it is not differentiable; TF's
    ``LookupError`` if no gradient was ever registered for it."""
    try:
        return _GRADIENTS[op.type]
    except KeyError:
        raise LookupError(
            "No gradient defined for operation '%s' (op type: %s)" % (op.name, op.type)
        ) from None
