"""``tf.train.MomentumOptimizer``: a velocity slot per variable (``w/Momentum``).

Book section: "Distributing TensorFlow" (an optimizer's slots live with their variable on its
ps task).  TF's ``python/training/momentum.py``: ``accum = momentum * accum + g;
w -= lr * accum`` (Nesterov: ``w -= lr * g + lr * momentum * accum``), one ``ApplyMomentum``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from minitf.framework.graph import Operation, Tensor, convert_to_tensor
from minitf.ops import math_ops, training_ops
from minitf.ops.variables import Variable
from minitf.train.optimizer import Optimizer


class MomentumOptimizer(Optimizer):
    """Momentum: slot ``"momentum"``; constants ``<name>/learning_rate``, ``<name>/momentum``."""

    def __init__(
        self,
        learning_rate: float | Tensor | Callable[[], Any],
        momentum: float | Tensor | Callable[[], Any],
        use_locking: bool = False,
        name: str = "Momentum",
        use_nesterov: bool = False,
    ) -> None:
        super().__init__(use_locking, name)
        self._learning_rate = learning_rate
        self._momentum = momentum
        self._use_nesterov = use_nesterov
        self._learning_rate_tensor = self._momentum_tensor = None

    def _create_slots(self, var_list: list[Variable]) -> None:
        for v in var_list:
            self._zeros_slot(v, "momentum", self._name)

    def _prepare(self) -> None:
        lr = self._call_if_callable(self._learning_rate)
        momentum = self._call_if_callable(self._momentum)
        self._learning_rate_tensor = convert_to_tensor(lr, name="learning_rate")
        self._momentum_tensor = convert_to_tensor(momentum, name="momentum")

    def _apply_dense(self, grad: Tensor, var: Variable) -> Operation:
        dtype = var.dtype.base_dtype
        return training_ops.apply_momentum(
            var,
            self.get_slot(var, "momentum"),
            math_ops.cast(self._learning_rate_tensor, dtype),
            grad,
            math_ops.cast(self._momentum_tensor, dtype),
            use_locking=self._use_locking,
            use_nesterov=self._use_nesterov,
        ).op
