"""``tf.train.GradientDescentOptimizer``: ``w -= learning_rate * g``, no slots.

Book section: "Distributing TensorFlow" (the chapter's replicas train with plain SGD; each
update is an ``ApplyGradientDescent`` on the variable's ps task).  TF's
``python/training/gradient_descent.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from minitf.framework.graph import Operation, Tensor, convert_to_tensor
from minitf.ops import math_ops, training_ops
from minitf.ops.variables import Variable
from minitf.train.optimizer import Optimizer


class GradientDescentOptimizer(Optimizer):
    """Plain gradient descent: ops ``<name>/learning_rate`` and, per variable,
    ``<name>/update_<var>/ApplyGradientDescent``."""

    def __init__(
        self,
        learning_rate: float | Tensor | Callable[[], Any],
        use_locking: bool = False,
        name: str = "GradientDescent",
    ) -> None:
        super().__init__(use_locking, name)
        self._learning_rate = learning_rate
        self._learning_rate_tensor = None

    def _prepare(self) -> None:
        lr = self._call_if_callable(self._learning_rate)
        self._learning_rate_tensor = convert_to_tensor(lr, name="learning_rate")

    def _apply_dense(self, grad: Tensor, var: Variable) -> Operation:
        lr = math_ops.cast(self._learning_rate_tensor, var.dtype.base_dtype)
        return training_ops.apply_gradient_descent(var, lr, grad, use_locking=self._use_locking).op
