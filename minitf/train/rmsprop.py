"""``tf.train.RMSPropOptimizer``: slots ``rms`` (ones, as TF 1.15 starts them) and ``momentum``.

Book section: "Distributing TensorFlow" (an optimizer's slots live with their variable on its
ps task).  TF's ``python/training/rmsprop.py``: ``ms += (g² - ms)(1 - decay);
mom = momentum·mom + lr·g/sqrt(ms + epsilon); w -= mom`` with one ``ApplyRMSProp``; centered:
a third slot ``mg`` (the mean gradient) and ``ApplyCenteredRMSProp``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from minitf.framework.graph import Operation, Tensor, convert_to_tensor
from minitf.ops import init_ops, math_ops, training_ops
from minitf.ops.variables import Variable
from minitf.train.optimizer import Optimizer

Hyper = float | Tensor | Callable[[], Any]


class RMSPropOptimizer(Optimizer):
    """RMSProp: slots ``w/RMSProp`` (rms), [``mg``,] ``w/RMSProp_1`` (momentum)."""

    def __init__(
        self,
        learning_rate: Hyper,
        decay: Hyper = 0.9,
        momentum: Hyper = 0.0,
        epsilon: Hyper = 1e-10,
        use_locking: bool = False,
        centered: bool = False,
        name: str = "RMSProp",
    ) -> None:
        super().__init__(use_locking, name)
        self._learning_rate, self._decay = learning_rate, decay
        self._momentum, self._epsilon = momentum, epsilon
        self._centered = centered
        self._tensors: dict[str, Tensor] = {}

    def _create_slots(self, var_list: list[Variable]) -> None:
        for v in var_list:
            dtype = v.dtype.base_dtype
            ones = init_ops.ones_initializer(dtype=dtype)
            self._get_or_make_slot_with_initializer(
                v, ones, v.get_shape(), dtype, "rms", self._name
            )
            if self._centered:
                self._zeros_slot(v, "mg", self._name)
            self._zeros_slot(v, "momentum", self._name)

    def _prepare(self) -> None:
        for key in ("learning_rate", "decay", "momentum", "epsilon"):
            value = self._call_if_callable(getattr(self, "_" + key))
            self._tensors[key] = convert_to_tensor(value, name=key)

    def _apply_dense(self, grad: Tensor, var: Variable) -> Operation:
        dtype = var.dtype.base_dtype
        hyper = [
            math_ops.cast(self._tensors[k], dtype)
            for k in ("learning_rate", "decay", "momentum", "epsilon")
        ]
        rms, mom = self.get_slot(var, "rms"), self.get_slot(var, "momentum")
        if self._centered:
            return training_ops.apply_centered_rms_prop(
                var, self.get_slot(var, "mg"), rms, mom, *hyper, grad, self._use_locking
            ).op
        return training_ops.apply_rms_prop(var, rms, mom, *hyper, grad, self._use_locking).op
