"""Dead tensors at run time: how the branch of a ``tf.cond`` that is not taken does not run.

Book section: none directly; TF's executor does this for every graph with a ``Switch``.  A node
is dead when one of its data inputs is ``DEAD`` or one of its control inputs was a dead node
(``Merge`` is the exception: dead only when all its inputs are).  A dead node's kernel does not
run: its outputs are ``DEAD`` and it leaves no trace in the step stats (TF records only the
nodes that ran).  ``_Send`` and ``_Recv`` are transfer nodes: they run dead or alive, carrying
``DEAD`` to the other side.

Only a plan with control flow pays for this: the executor wraps each kernel (:func:`dead_aware`)
of a plan that has a ``Switch``, or a ``_Recv`` from another task, whose partition may have one
(:func:`may_see_dead`), and leaves every other plan's kernels as they are.
"""

from __future__ import annotations

from minitf.framework import errors
from minitf.framework.dead_tensor import DEAD, SWITCH_OPS


class DeadOutputs(tuple):
    """The outputs of a node that did not run because it was dead (all ``DEAD``)."""

    __slots__ = ()


def dead_outputs(n: int) -> DeadOutputs:
    return DeadOutputs((DEAD,) * n)


def may_see_dead(nodes, local_recvs) -> bool:
    """Whether a plan over ``nodes`` (a step graph's partitions) can meet a dead value: it has
    a ``Switch``, or a ``_Recv`` (not among the indices ``local_recvs``, whose ``_Send`` is in
    the plan) that takes a tensor from another task's partition, which may have one."""
    return any(
        n.type in SWITCH_OPS or (n.type == "_Recv" and i not in local_recvs)
        for i, n in enumerate(nodes)
    )


def _is_dead(ins, controls, dead):
    for v in ins:
        if v is DEAD:
            return True
    for c in controls:
        if c in dead:
            return True
    return False


def dead_aware(kernel, node, i: int, controls: list, is_async: bool):
    """``kernel`` of node ``i`` (control inputs ``controls``: node indices), made to respect
    deadness; the step's dead nodes are the set ``ctx.dead``."""
    n_out = len(node.outputs)
    if node.type == "_Send":

        def send(ctx, ins):
            if _is_dead(ins, controls, ctx.dead):
                ctx.dead.add(i)
                return kernel(ctx, [DEAD])
            return kernel(ctx, ins)

        return send
    if is_async:

        def compute_async(ctx, ins, done):
            if node.type != "_Recv" and _is_dead(ins, controls, ctx.dead):
                ctx.dead.add(i)
                done(dead_outputs(n_out))
                return None

            def finished(outs, error=None):
                if error is None and outs and outs[0] is DEAD:
                    ctx.dead.add(i)
                    outs = dead_outputs(n_out)
                done(outs, error)

            return kernel(ctx, ins, finished)

        return compute_async
    merge = node.type == "Merge"

    def compute(ctx, ins):
        if _is_dead(() if merge else ins, controls, ctx.dead):
            ctx.dead.add(i)
            return dead_outputs(n_out)
        outs = kernel(ctx, ins)
        if merge and outs[0] is DEAD:
            ctx.dead.add(i)
            return dead_outputs(n_out)
        return outs

    return compute


def dead_fetch_error(names: list[str], n: int) -> errors.InvalidArgumentError:
    """TF's error for fetching a dead tensor: ``Retval[i] does not have value``, ``i`` its
    place among the fetched names sorted (the order TF's session keys its outputs by)."""
    index = sorted(set(names)).index(names[n])
    return errors.InvalidArgumentError(None, None, "Retval[%d] does not have value" % index)
