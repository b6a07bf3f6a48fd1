"""Measuring stale gradients: how many updates other replicas applied while one computed its own.

Book section: "Data parallelism" → "Asynchronous updates" (Figure 12-18, stale gradients).  The
book says a gradient may be applied after the parameters were updated "N-1 times" by the other
replicas; this module measures it instead of assuming it.  minitf only: TF has no such helper.

The probe adds two tensors to the replica's training run: the global step read on its own
device (the ps task that holds it) as the run starts, next to the parameter reads, and the new
global step that this run's ``AssignAdd`` returns.  In between, ``after - before - 1`` other
updates landed: the staleness of this run's gradients, in global steps (0 with one replica).
The probe's read runs before this run's own update (a control edge); the reads of the step and
of the weights are not ordered, so an update landing exactly between them may be counted one
off: the histogram is what it is about.

``StalenessHook`` does it in a ``MonitoredTrainingSession``; ``staleness_probe`` gives the two
tensors for a plain ``Session.run`` loop.
"""

from __future__ import annotations

from typing import Any

from minitf.framework.graph import Operation, Tensor
from minitf.ops import array_ops
from minitf.train import training_util
from minitf.train.session_run_hook import SessionRunArgs, SessionRunHook


def staleness_probe(train_op: Operation | Tensor, global_step: Any = None) -> tuple[Tensor, Tensor]:
    """``(step before, step after)`` for a train op made by ``minimize(..., global_step=gs)``
    (the step's ``AssignAdd``): fetch both in the same run as ``train_op``."""
    op = train_op.op if isinstance(train_op, Tensor) else train_op
    if op.type != "AssignAdd" or not op.outputs:
        raise ValueError(
            "staleness_probe needs the train op that optimizer.minimize(loss, "
            "global_step=...) returns (an AssignAdd of the global step), got %s (%s)"
            % (op.name, op.type)
        )
    if global_step is None:
        global_step = training_util.get_global_step(op.graph)
    if global_step is None:
        raise ValueError("staleness_probe needs a global step")
    with op.graph.as_default(), op.graph.colocate_with(op):
        # a read of its own (a copy of the step when it runs), never after this run's update
        before = array_ops.identity(_ref_of(global_step), name="staleness/step_before")
    op._add_control_input(before.op)
    return before, op.outputs[0]


def _ref_of(global_step: Any) -> Any:
    return global_step._ref() if hasattr(global_step, "_ref") else global_step


def staleness_of(before: Any, after: Any) -> int:
    """Updates other replicas applied between a run's start and its own update."""
    return int(after) - int(before) - 1


class StalenessHook(SessionRunHook):
    """Records each run's staleness (``.staleness``) and new global step (``.steps``)."""

    def __init__(self, train_op: Operation | Tensor, global_step: Any = None) -> None:
        self._train_op = train_op
        self._global_step = global_step
        self._fetches: tuple[Tensor, Tensor] | None = None
        self.staleness: list[int] = []
        self.steps: list[int] = []

    def begin(self) -> None:
        self._fetches = staleness_probe(self._train_op, self._global_step)

    def before_run(self, run_context: Any) -> SessionRunArgs | None:
        """Adds the probe to the runs that train (those that fetch the train op)."""
        if not _fetches_op(run_context.original_args.fetches, self._fetches[1].op):
            return None
        return SessionRunArgs(self._fetches)

    def after_run(self, run_context: Any, run_values: Any) -> None:
        if run_values.results is None:
            return
        before, after = run_values.results
        self.staleness.append(staleness_of(before, after))
        self.steps.append(int(after))


def _fetches_op(fetches: Any, op: Operation) -> bool:
    """Whether ``op`` (or one of its outputs) is among the nested ``fetches``."""
    if isinstance(fetches, dict):
        return any(_fetches_op(f, op) for f in fetches.values())
    if isinstance(fetches, (list, tuple)):
        return any(_fetches_op(f, op) for f in fetches)
    return fetches is op or (isinstance(fetches, Tensor) and fetches.op is op)
