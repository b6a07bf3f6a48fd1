"""``tf.train.AdamOptimizer``: slots ``m`` and ``v`` per variable, and two non-slot variables.

Book section: "Distributing TensorFlow" (where an optimizer's state lives under
``replica_device_setter``).  TF's ``python/training/adam.py``: slots ``w/Adam`` (m) and
``w/Adam_1`` (v); ``beta1_power`` and ``beta2_power`` (starting at beta1 and beta2) are made
once per graph, colocated with the variable whose name sorts first, and multiplied by beta1
and beta2 after every step (``Adam/mul``, ``Adam/Assign``, ``Adam/mul_1``, ``Adam/Assign_1``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from minitf.framework.graph import Operation, Tensor, convert_to_tensor, get_default_graph
from minitf.ops import control_flow_ops, math_ops, training_ops
from minitf.ops.variables import Variable
from minitf.train.optimizer import Optimizer, init_scope

Hyper = float | Tensor | Callable[[], Any]


class AdamOptimizer(Optimizer):
    """Adam (Kingma and Ba): one ``ApplyAdam`` per variable, then the beta powers' update."""

    def __init__(
        self,
        learning_rate: Hyper = 0.001,
        beta1: Hyper = 0.9,
        beta2: Hyper = 0.999,
        epsilon: Hyper = 1e-08,
        use_locking: bool = False,
        name: str = "Adam",
    ) -> None:
        super().__init__(use_locking, name)
        self._lr, self._beta1, self._beta2, self._epsilon = learning_rate, beta1, beta2, epsilon
        self._lr_t = self._beta1_t = self._beta2_t = self._epsilon_t = None

    def _get_beta_accumulators(self):
        with init_scope():
            g = get_default_graph()
            return (
                self._get_non_slot_variable("beta1_power", graph=g),
                self._get_non_slot_variable("beta2_power", graph=g),
            )

    def _create_slots(self, var_list: list[Variable]) -> None:
        first_var = min(var_list, key=lambda x: x.name)
        self._create_non_slot_variable(self._beta1, "beta1_power", first_var)
        self._create_non_slot_variable(self._beta2, "beta2_power", first_var)
        for v in var_list:
            self._zeros_slot(v, "m", self._name)
            self._zeros_slot(v, "v", self._name)

    def _prepare(self) -> None:
        values = [self._call_if_callable(h) for h in (self._lr, self._beta1, self._beta2)]
        eps = self._call_if_callable(self._epsilon)
        self._lr_t = convert_to_tensor(values[0], name="learning_rate")
        self._beta1_t = convert_to_tensor(values[1], name="beta1")
        self._beta2_t = convert_to_tensor(values[2], name="beta2")
        self._epsilon_t = convert_to_tensor(eps, name="epsilon")

    def _apply_dense(self, grad: Tensor, var: Variable) -> Operation:
        dtype = var.dtype.base_dtype
        beta1_power, beta2_power = self._get_beta_accumulators()
        hyper = [
            math_ops.cast(t, dtype)
            for t in (beta1_power, beta2_power, self._lr_t, self._beta1_t, self._beta2_t)
        ]
        return training_ops.apply_adam(
            var,
            self.get_slot(var, "m"),
            self.get_slot(var, "v"),
            *hyper,
            math_ops.cast(self._epsilon_t, dtype),
            grad,
            use_locking=self._use_locking,
        ).op

    def _finish(self, update_ops: list[Operation], name_scope: str) -> Operation:
        g = get_default_graph()
        with g.control_dependencies(update_ops):
            beta1_power, beta2_power = self._get_beta_accumulators()
            with g.colocate_with(beta1_power.op):
                update_beta1 = beta1_power.assign(
                    beta1_power * self._beta1_t, use_locking=self._use_locking
                )
                update_beta2 = beta2_power.assign(
                    beta2_power * self._beta2_t, use_locking=self._use_locking
                )
        return control_flow_ops.group(*update_ops + [update_beta1, update_beta2], name=name_scope)
