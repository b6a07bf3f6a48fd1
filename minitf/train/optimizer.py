"""``tf.train.Optimizer``: gradients in, one update op per variable out.

Book sections: "Distributing TensorFlow" (in-graph and between-graph replication both end in
``optimizer.minimize(loss, global_step=...)``) and "Sharding Variables Across Multiple
Parameter Servers".  TF's ``python/training/optimizer.py``, reference part 2 §17.1:

* ``compute_gradients`` is ``tf.gradients`` of the loss with respect to the trainable
  variables, gated by ``gate_gradients``;
* ``apply_gradients`` first creates the slots (``_create_slots``, outside any control
  dependency: TF's ``init_scope``), then, in name scope ``<name>`` (the optimizer's
  name, uniquified), runs ``_prepare`` (hyperparameters as constants) and builds, per variable,
  ``<name>/update_<var>/Apply...`` inside ``colocate_with(var)``: the update runs where the
  variable lives (its ps task).  The updates are grouped (one NoOp per device first); with a
  ``global_step``, an ``AssignAdd`` of 1 named ``<name>``, colocated with the step, runs after
  them and is the returned train op.  It is added to the ``train_op`` collection.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from minitf.framework import dtypes
from minitf.framework.graph import (
    GraphKeys,
    Operation,
    Tensor,
    convert_to_tensor,
    get_default_graph,
    name_scope,
)
from minitf.ops import control_flow_ops, gradients_impl, state_ops
from minitf.ops.variables import Variable, trainable_variables
from minitf.train import slot_creator

# in the order TF 1.15 lists them (its set), less bfloat16, which minitf does not have
_VALID_DTYPES = (dtypes.float32, dtypes.float64, dtypes.float16)


def _var_key(var):
    """How slots are keyed: by graph and op name (TF's ``_var_key`` in graph mode)."""
    return (var.op.graph, var.op.name)


@contextlib.contextmanager
def init_scope() -> Iterator[None]:
    """TF's ``init_scope`` in graph mode: no control dependencies, so that variables made
    inside (slots, Adam's beta powers) are initialised on their own; the name scope stays (TF:
    "entering an init_scope preserves the name scope"), so ``minimize`` called in scope
    ``train`` makes ``train/beta1_power``.  Slots are named by their variable, whatever the
    scope (``w/Adam``)."""
    with get_default_graph().control_dependencies(None):
        yield


class Optimizer:
    """Base class of the optimizers: subclasses define ``_create_slots``, ``_prepare``,
    ``_apply_dense`` and, for extra updates after the per-variable ones, ``_finish``."""

    GATE_NONE = 0
    GATE_OP = 1
    GATE_GRAPH = 2

    def __init__(self, use_locking: bool, name: str) -> None:
        if not name:
            raise ValueError("Must specify the optimizer name")
        self._use_locking = use_locking
        self._name = name
        self._slots: dict[str, dict] = {}  # slot name -> {var key: slot variable}
        self._non_slot_dict: dict[tuple, Variable] = {}  # (name, graph) -> variable

    def get_name(self) -> str:
        return self._name

    # -- minimize = compute_gradients + apply_gradients -----------------------------------------
    def minimize(
        self,
        loss: Tensor,
        global_step: Variable | Tensor | None = None,
        var_list: Iterable[Variable] | None = None,
        gate_gradients: int = GATE_OP,
        aggregation_method: int | None = None,
        colocate_gradients_with_ops: bool = False,
        name: str | None = None,
        grad_loss: Tensor | None = None,
    ) -> Operation:
        """Adds the ops that compute the gradients of ``loss`` and apply them; returns the
        train op (see :meth:`apply_gradients`)."""
        grads_and_vars = self.compute_gradients(
            loss,
            var_list=var_list,
            gate_gradients=gate_gradients,
            aggregation_method=aggregation_method,
            colocate_gradients_with_ops=colocate_gradients_with_ops,
            grad_loss=grad_loss,
        )
        if not [v for g, v in grads_and_vars if g is not None]:
            raise ValueError(
                "No gradients provided for any variable, check your graph for ops that do not "
                "support gradients, between variables %s and loss %s."
                % ([str(v) for _, v in grads_and_vars], loss)
            )
        return self.apply_gradients(grads_and_vars, global_step=global_step, name=name)

    def compute_gradients(
        self,
        loss: Tensor,
        var_list: Iterable[Variable] | None = None,
        gate_gradients: int = GATE_OP,
        aggregation_method: int | None = None,
        colocate_gradients_with_ops: bool = False,
        grad_loss: Tensor | None = None,
    ) -> list[tuple[Tensor | None, Variable]]:
        """``[(gradient, variable)]`` for the trainable variables (or ``var_list``); a
        variable the loss does not depend on (or through a non-differentiable op) gets None."""
        if gate_gradients not in (self.GATE_NONE, self.GATE_OP, self.GATE_GRAPH):
            raise ValueError(
                "gate_gradients must be one of: Optimizer.GATE_NONE, Optimizer.GATE_OP, "
                "Optimizer.GATE_GRAPH.  Not %s" % gate_gradients
            )
        self._assert_valid_dtypes([loss])
        if grad_loss is not None:
            self._assert_valid_dtypes([grad_loss])
        var_list = trainable_variables() if var_list is None else _flatten(var_list)
        if not var_list:
            raise ValueError("No variables to optimize.")
        grads = gradients_impl.gradients(
            loss,
            [v._ref() for v in var_list],
            grad_ys=grad_loss,
            gate_gradients=(gate_gradients == self.GATE_OP),
            aggregation_method=aggregation_method,
            colocate_gradients_with_ops=colocate_gradients_with_ops,
        )
        if gate_gradients == self.GATE_GRAPH:
            grads = control_flow_ops.tuple_(grads)
        grads_and_vars = list(zip(grads, var_list))
        self._assert_valid_dtypes([v for g, v in grads_and_vars if g is not None])
        return grads_and_vars

    def _assert_valid_dtypes(self, tensors):
        valid = self._valid_dtypes()
        for t in tensors:
            dtype = t.dtype.base_dtype
            if dtype not in valid:
                raise ValueError(
                    "Invalid type %r for %s, expected: %s." % (dtype, t.name, list(valid))
                )

    def _valid_dtypes(self):
        return _VALID_DTYPES

    # -- apply_gradients ------------------------------------------------------------------------
    def apply_gradients(
        self,
        grads_and_vars: Iterable[tuple[Any, Variable]],
        global_step: Variable | Tensor | None = None,
        name: str | None = None,
    ) -> Operation:
        """The update ops of every variable with a gradient, grouped; with ``global_step``,
        the ``AssignAdd`` that increments it after them (TF 1.15 returns that op)."""
        grads_and_vars = _convert_gradients(grads_and_vars)
        var_list = [v for g, v in grads_and_vars if g is not None]
        if not var_list:
            raise ValueError(
                "No gradients provided for any variable: %s."
                % ([str(v) for _, v in grads_and_vars],)
            )
        with init_scope():
            self._create_slots(var_list)
        g = get_default_graph()
        with name_scope(name, self._name) as scope:
            self._prepare()
            update_ops = []
            for grad, var in grads_and_vars:
                if grad is None:
                    continue
                with name_scope("update_" + var.op.name), g.colocate_with(var.op):
                    update_ops.append(self._apply_dense(grad, var))
            train_op = self._finish_with_step(update_ops, global_step, scope)
        collection = g.get_collection_ref(GraphKeys.TRAIN_OP)
        if train_op not in collection:
            collection.append(train_op)
        return train_op

    def _finish_with_step(self, update_ops, global_step, scope):
        if global_step is None:
            return self._finish(update_ops, scope)
        g = get_default_graph()
        with g.control_dependencies([self._finish(update_ops, "update")]):
            with g.colocate_with(_op_of(global_step)):
                return state_ops.assign_add(global_step, 1, name=scope).op

    # -- what subclasses define -----------------------------------------------------------------
    def _create_slots(self, var_list: list[Variable]) -> None:
        """Creates the slots of every variable in ``var_list`` (none here)."""

    def _prepare(self) -> None:
        """Converts the hyperparameters to tensors, in the update's name scope (none here)."""

    def _apply_dense(self, grad: Tensor, var: Variable) -> Operation:
        """The update op of ``var`` for the dense gradient ``grad``."""
        raise NotImplementedError(
            "%s does not implement _apply_dense: use a concrete optimizer such as "
            "GradientDescentOptimizer" % type(self).__name__
        )

    def _finish(self, update_ops: list[Operation], name_scope: str) -> Operation:
        """One op that runs every update: ``group`` (one NoOp per device first)."""
        return control_flow_ops.group(*update_ops, name=name_scope)

    # -- slots ----------------------------------------------------------------------------------
    def get_slot_names(self) -> list[str]:
        """The names of this optimizer's slots (``["momentum"]``, ``["m", "v"]``), sorted."""
        return sorted(self._slots)

    def get_slot(self, var: Variable, name: str) -> Variable | None:
        """The slot ``name`` of ``var``, or None."""
        named = self._slots.get(name)
        if not named:
            return None
        return named.get(_var_key(var))

    def variables(self) -> list[Variable]:
        """The slots and non-slot variables (Adam's beta powers) of the default graph,
        sorted by name."""
        g = get_default_graph()
        found = [v for (_, graph), v in self._non_slot_dict.items() if graph is g]
        for named in self._slots.values():
            found.extend(v for v in named.values() if v.op.graph is g)
        return sorted(found, key=lambda v: v.name)

    def _slot_dict(self, slot_name):
        return self._slots.setdefault(slot_name, {})

    def _get_or_make_slot(self, var, val, slot_name, op_name):
        """The slot ``slot_name`` of ``var``, made from the initializer ``val`` of ``var``'s
        shape and dtype if it does not exist yet."""
        return self._get_or_make_slot_with_initializer(
            var, val, var.get_shape(), var.dtype.base_dtype, slot_name, op_name
        )

    def _get_or_make_slot_with_initializer(
        self, var, initializer, shape, dtype, slot_name, op_name
    ):
        named = self._slot_dict(slot_name)
        key = _var_key(var)
        if key not in named:
            named[key] = slot_creator.create_slot_with_initializer(
                var, initializer, shape, dtype, op_name
            )
        return named[key]

    def _zeros_slot(self, var, slot_name, op_name):
        """The slot ``slot_name`` of ``var`` (``<var>/<op_name>``), zeros when first made."""
        named = self._slot_dict(slot_name)
        key = _var_key(var)
        if key not in named:
            named[key] = slot_creator.create_zeros_slot(var, op_name)
        return named[key]

    # -- non-slot variables ---------------------------------------------------------------------
    def _create_non_slot_variable(self, initial_value, name, colocate_with):
        """A variable of this optimizer, not of one variable (Adam's ``beta1_power``): made
        once per graph, colocated with ``colocate_with``."""
        graph = colocate_with.op.graph
        key = (name, graph)
        v = self._non_slot_dict.get(key)
        if v is None:
            with graph.colocate_with(colocate_with.op):
                v = Variable(initial_value, name=name, trainable=False)
            self._non_slot_dict[key] = v
        return v

    def _get_non_slot_variable(self, name, graph=None):
        return self._non_slot_dict.get((name, graph or get_default_graph()))

    def _non_slot_variables(self):
        return list(self._non_slot_dict.values())

    def _call_if_callable(self, param: Any | Callable[[], Any]) -> Any:
        """A hyperparameter given as a function is called when the update is built."""
        return param() if callable(param) else param


def _flatten(var_list):
    out = []
    for v in var_list:
        out.extend(_flatten(v) if isinstance(v, (list, tuple)) else [v])
    return out


def _op_of(x):
    return x.op if isinstance(x, (Tensor, Variable)) else x


def _convert_gradients(grads_and_vars):
    grads_and_vars = tuple(grads_and_vars)
    if not grads_and_vars:
        raise ValueError("No variables provided.")
    out = []
    for g, v in grads_and_vars:
        if g is not None:
            try:
                g = convert_to_tensor(g)
            except TypeError:
                raise TypeError(
                    "Gradient must be convertible to a Tensor or IndexedSlices, or None: %s" % (g,)
                ) from None
        out.append((g, v))
    return out
