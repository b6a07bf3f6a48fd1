"""``Pow``: the math op a learning-rate schedule raises its decay rate with.

Book section: "Distributing TensorFlow" (the chapter's training loops decay their learning
rate with the shared global step): ``tf.train.exponential_decay`` computes
``lr * decay_rate ** floor(step / decay_steps)`` with ``Pow`` (TF's ``math_ops.pow``, default
op name ``Pow``) and ``Floor`` (``math_ops.floor``).
"""

from __future__ import annotations

from minitf.framework.graph import Tensor, name_scope
from minitf.ops.array_ops import TensorLike
from minitf.ops.math_ops import _binary
from minitf.ops.op_def import register_op

register_op("Pow")


def pow(x: TensorLike, y: TensorLike, name: str | None = None) -> Tensor:  # noqa: A001 - TF's name
    """``Pow``: ``x ** y`` elementwise, with numpy-style broadcasting."""
    with name_scope(name, "Pow", [x]) as scope:
        return _binary("Pow", x, y, scope)
