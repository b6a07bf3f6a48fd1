"""``Pow`` and ``Floor``: the math ops a learning-rate schedule is built from.

Book section: "Distributing TensorFlow" (the chapter's training loops decay their learning
rate with the shared global step): ``tf.train.exponential_decay`` computes
``lr * decay_rate ** floor(step / decay_steps)`` with these two ops (TF's ``math_ops.pow`` and
``gen_math_ops.floor``; default op names ``Pow`` and ``Floor``).
"""

from __future__ import annotations

from minitf.framework.graph import Tensor, name_scope
from minitf.ops.array_ops import TensorLike
from minitf.ops.math_ops import _binary, _unary
from minitf.ops.op_def import register_op

register_op("Pow")
register_op("Floor")


def pow(x: TensorLike, y: TensorLike, name: str | None = None) -> Tensor:  # noqa: A001 - TF's name
    """``Pow``: ``x ** y`` elementwise, with numpy-style broadcasting."""
    with name_scope(name, "Pow", [x]) as scope:
        return _binary("Pow", x, y, scope)


def floor(x: TensorLike, name: str | None = None) -> Tensor:
    """``Floor``: the largest integer not greater than ``x``, elementwise (floats only)."""
    return _unary("Floor", x, name or "Floor")
