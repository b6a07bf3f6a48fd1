"""Weight regularizers: ``tf.contrib.layers.l1_regularizer`` and ``l2_regularizer``.

Book section: chapter 11's ℓ1 and ℓ2 regularization, which the chapter's replicas train with
too: a regularizer given to ``tf.get_variable`` or ``tf.layers.dense`` builds its loss
(``<variable>/Regularizer/l1_regularizer``) next to the variable and adds it to the
``REGULARIZATION_LOSSES`` collection; ``tf.losses.get_regularization_loss`` sums them.
"""

from __future__ import annotations

import logging
import numbers
from collections.abc import Callable

from minitf.framework.graph import Tensor, convert_to_tensor, name_scope
from minitf.ops import math_ops, nn_ops

logger = logging.getLogger("minitf")


def _disabled(scale: float) -> bool:
    """TF's checks of a regularizer's scale; True when it is 0 (no regularization)."""
    if isinstance(scale, numbers.Integral):
        raise ValueError("scale cannot be an integer: %s" % scale)
    if isinstance(scale, numbers.Real):
        if scale < 0.0:
            raise ValueError("Setting a scale less than 0 on a regularizer: %g" % scale)
        if scale == 0.0:
            logger.info("Scale of 0 disables regularizer.")
            return True
    return False


def _regularizer(kind: str, scale: float, scope: str | None, penalty: Callable) -> Callable:
    if _disabled(scale):
        return lambda _: None

    def regularize(weights, name=None):
        with name_scope(scope, kind, [weights]) as name:
            my_scale = convert_to_tensor(scale, dtype=weights.dtype.base_dtype, name="scale")
            return math_ops.multiply(my_scale, penalty(weights), name=name)

    regularize.__name__ = kind[: -len("_regularizer")]
    return regularize


def l1_regularizer(scale: float, scope: str | None = None) -> Callable[[Tensor], Tensor]:
    """``weights -> scale * sum(|weights|)`` (op ``l1_regularizer``)."""
    return _regularizer(
        "l1_regularizer", scale, scope, lambda w: math_ops.reduce_sum(math_ops.abs(w))
    )


def l2_regularizer(scale: float, scope: str | None = None) -> Callable[[Tensor], Tensor]:
    """``weights -> scale * sum(weights²) / 2`` (``L2Loss``, op ``l2_regularizer``)."""
    return _regularizer("l2_regularizer", scale, scope, nn_ops.l2_loss)
