"""The gradients of ``Switch`` and ``Merge``: how ``tf.gradients`` goes back through a
``tf.cond``.

Book section: none directly (``ops/cond.py``).  Backwards, the two ops trade places: the
gradient arriving at a cond's ``Merge`` is split by a ``Switch`` on the same predicate
(``<merge>_grad/cond_grad``), so it flows only into the branch that ran; the two gradients of
a branch's ``Switch`` (one of them zeros made on the other side,
``cond.zeros_like_outside_loop``) meet again in a ``Merge`` (``<switch>_grad/cond_grad``).
"""

from minitf.ops import math_ops
from minitf.ops.cond import CondContext, merge, output_context, switch, switch_ref_or_tensor
from minitf.ops.op_def import RegisterGradient


@RegisterGradient("Switch")
def _switch_grad(op, *grad):
    ctx = op._get_control_flow_context()
    if isinstance(ctx, CondContext):
        if grad[1 - ctx.branch] is None:  # a dtype nothing flows back through
            return None, None
        return merge(list(grad), name="cond_grad")[0], None
    false_grad = switch(grad[0], op.inputs[1])[0]
    true_grad = switch(grad[1], op.inputs[1])[1]
    return merge([false_grad, true_grad])[0], None


RegisterGradient("RefSwitch")(_switch_grad)


@RegisterGradient("Merge")
def _merge_grad(op, grad, _):
    ctx = output_context(op.inputs[0].op)
    if isinstance(ctx, CondContext):
        return switch_ref_or_tensor(grad, ctx.pred, name="cond_grad")
    n = len(op.inputs)
    picked = [math_ops.equal(op.outputs[1], i) for i in range(n)]
    return [switch(grad, picked[i])[1] for i in range(n)]
