"""``tf.train.AdagradOptimizer``: an ``accumulator`` slot of squared gradients per variable.

Book section: "Distributing TensorFlow" (an optimizer's slots live with their variable on its
ps task).  TF's ``python/training/adagrad.py``: ``accum += g²; w -= lr·g/sqrt(accum)``, one
``ApplyAdagrad``; the slot ``w/Adagrad`` starts at ``initial_accumulator_value``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from minitf.framework.graph import Operation, Tensor, convert_to_tensor
from minitf.ops import init_ops, math_ops, training_ops
from minitf.ops.variables import Variable
from minitf.train.optimizer import Optimizer


class AdagradOptimizer(Optimizer):
    """Adagrad: slot ``"accumulator"``; constant ``<name>/learning_rate``."""

    def __init__(
        self,
        learning_rate: float | Tensor | Callable[[], Any],
        initial_accumulator_value: float = 0.1,
        use_locking: bool = False,
        name: str = "Adagrad",
    ) -> None:
        if initial_accumulator_value <= 0.0:
            raise ValueError(
                "initial_accumulator_value must be positive: %s" % initial_accumulator_value
            )
        super().__init__(use_locking, name)
        self._learning_rate = learning_rate
        self._initial_accumulator_value = initial_accumulator_value
        self._learning_rate_tensor = None

    def _create_slots(self, var_list: list[Variable]) -> None:
        for v in var_list:
            dtype = v.dtype.base_dtype
            init = init_ops.constant_initializer(self._initial_accumulator_value, dtype=dtype)
            self._get_or_make_slot_with_initializer(
                v, init, v.get_shape(), dtype, "accumulator", self._name
            )

    def _prepare(self) -> None:
        lr = self._call_if_callable(self._learning_rate)
        self._learning_rate_tensor = convert_to_tensor(lr, name="learning_rate")

    def _apply_dense(self, grad: Tensor, var: Variable) -> Operation:
        lr = math_ops.cast(self._learning_rate_tensor, var.dtype.base_dtype)
        return training_ops.apply_adagrad(
            var, self.get_slot(var, "accumulator"), lr, grad, self._use_locking
        ).op
