"""``tf.losses``: the regularization losses of TF 1.15 (``get_regularization_losses``,
``get_regularization_loss``).

Book section: chapter 11's ℓ1 and ℓ2 regularization (``ops/regularizers.py``).
"""

from __future__ import annotations

from minitf.framework.graph import GraphKeys, Tensor, get_default_graph
from minitf.ops import array_ops, math_ops

__all__ = ["get_regularization_loss", "get_regularization_losses"]


def get_regularization_losses(scope: str | None = None) -> list[Tensor]:
    """The losses the regularizers added (``REGULARIZATION_LOSSES``), of ``scope`` if given."""
    return get_default_graph().get_collection(GraphKeys.REGULARIZATION_LOSSES, scope)


def get_regularization_loss(
    scope: str | None = None, name: str = "total_regularization_loss"
) -> Tensor:
    """Their sum (an ``AddN`` named ``total_regularization_loss``), or a 0.0 constant."""
    losses = get_regularization_losses(scope)
    if losses:
        return math_ops.add_n(losses, name=name)
    return array_ops.constant(0.0)
