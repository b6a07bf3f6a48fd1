"""Gradient clipping: ``tf.clip_by_value``, ``tf.clip_by_norm``, ``tf.global_norm`` and
``tf.clip_by_global_norm``, built op for op as TF 1.15's ``clip_ops`` builds them.

Book section: chapter 11's gradient clipping (``tf.clip_by_value(grad, -1., 1.)`` between
``compute_gradients`` and ``apply_gradients``); the norm-based ones are what most TF 1 code
clips with.
"""

from __future__ import annotations

from collections.abc import Sequence

from minitf.framework.graph import Tensor, convert_to_tensor, name_scope
from minitf.ops import array_ops, math_ops, nn_ops
from minitf.ops.array_ops import TensorLike


def clip_by_value(
    t: TensorLike,
    clip_value_min: TensorLike,
    clip_value_max: TensorLike,
    name: str | None = None,
) -> Tensor:
    """``t`` held between ``clip_value_min`` and ``clip_value_max``: ``Minimum`` then a
    ``Maximum`` named after the scope (``clip_by_value``), as TF builds it (book: gradient
    clipping, ``(tf.clip_by_value(g, -1., 1.), v)``).  The bounds may not broadcast ``t`` to a
    larger shape."""
    with name_scope(name, "clip_by_value", [t, clip_value_min, clip_value_max]) as scope:
        values = convert_to_tensor(t, name="t")
        lower = math_ops.minimum(values, clip_value_max)
        values.shape.merge_with(lower.shape)
        out = math_ops.maximum(lower, clip_value_min, name=scope)
        values.shape.merge_with(out.shape)
        return out


def clip_by_norm(
    t: TensorLike, clip_norm: TensorLike, axes: TensorLike = None, name: str | None = None
) -> Tensor:
    """``t * clip_norm / max(||t||, clip_norm)``, the L2 norm taken over ``axes`` (all by
    default): ``t`` unchanged unless its norm exceeds ``clip_norm``.  A zero norm goes through
    two ``Select`` ops, so that its gradient is not NaN (TF's)."""
    with name_scope(name, "clip_by_norm", [t, clip_norm]) as scope:
        values = convert_to_tensor(t, name="t")
        l2sum = math_ops.reduce_sum(values * values, axes, keepdims=True)
        pred = l2sum > 0
        l2sum_safe = math_ops.where(pred, l2sum, array_ops.ones_like(l2sum))
        l2norm = math_ops.where(pred, math_ops.sqrt(l2sum_safe), l2sum)
        intermediate = values * clip_norm
        values.shape.merge_with(intermediate.shape)  # no silent broadcast to a larger shape
        return array_ops.identity(intermediate / math_ops.maximum(l2norm, clip_norm), name=scope)


def global_norm(t_list: Sequence[TensorLike | None], name: str | None = None) -> Tensor:
    """``sqrt(sum(||t||²))`` over the tensors of ``t_list`` (None entries skipped): each
    ``L2Loss`` next to its tensor, ``stack``, ``Sum``, ``* 2``, ``Sqrt`` named
    ``global_norm``."""
    if not isinstance(t_list, (list, tuple)):
        raise TypeError("t_list should be a sequence")
    with name_scope(name, "global_norm", [t for t in t_list if t is not None]):
        values = [
            convert_to_tensor(t, name="t_%d" % i) if t is not None else None
            for i, t in enumerate(t_list)
        ]
        half_squared = []
        for v in values:
            if v is not None:
                with v.graph.colocate_with(v.op):
                    half_squared.append(nn_ops.l2_loss(v))
        total = math_ops.reduce_sum(array_ops.stack(half_squared))
        two = array_ops.constant(2.0, dtype=total.dtype.base_dtype)
        return math_ops.sqrt(total * two, name="global_norm")


def clip_by_global_norm(
    t_list: Sequence[TensorLike | None],
    clip_norm: TensorLike,
    use_norm: TensorLike = None,
    name: str | None = None,
) -> tuple[list[Tensor | None], Tensor]:
    """``(the tensors scaled by clip_norm / max(global_norm, clip_norm), global_norm)``: the
    same factor for all of them, so their directions keep their proportions (None entries stay
    None).  An infinite or NaN norm makes every tensor NaN, as in TF."""
    if not isinstance(t_list, (list, tuple)) or isinstance(t_list, str):
        raise TypeError("t_list should be a sequence")
    t_list = list(t_list)
    if use_norm is None:
        use_norm = global_norm(t_list, name)
    present = [t for t in t_list if t is not None]
    with name_scope(name, "clip_by_global_norm", present + [clip_norm]) as scope:
        inverse = 1.0 / use_norm
        one = array_ops.constant(1.0, dtype=use_norm.dtype.base_dtype)
        scale_for_finite = clip_norm * math_ops.minimum(inverse, one / clip_norm)
        scale = scale_for_finite + (use_norm - use_norm)  # NaN for an infinite or NaN norm
        clipped = []
        for i, t in enumerate(t_list):
            if t is None:
                clipped.append(None)
                continue
            v = convert_to_tensor(t, name="t_%d" % i)
            with v.graph.colocate_with(v.op):
                # named "<scope>_<i>" inside the scope, as TF names them
                clipped.append(array_ops.identity(v * scale, name="%s_%d" % (scope, i)))
        return clipped, use_norm
