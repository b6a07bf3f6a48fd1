"""How a step whose nodes run on several threads stops at its first failure.

Book section: "Parallel Execution".  Both drivers that spread a step over threads
(``step_run.StepRun`` and ``device_programs.DeviceRun``) keep the step's first error, and on it:

* nothing new starts (``cancelled``, read by every thread between two nodes);
* the step's rendezvous is aborted, so that no ``_Recv`` waits for a ``_Send`` that will not
  come (its waiters get the error, derived: the root cause stays the first one);
* the callbacks that waiting kernels registered with ``StepContext.on_cancel`` run (a queue op
  stops waiting);
* the caller raises that error, naming the failing node as TF does (``[[{{node ...}}]]``), or
  the cancel's error (a deadline, an interrupt, a canceller from another thread) as it is.
"""

from __future__ import annotations

from minitf.runtime.executor import node_error, raise_node_error


class StepFailure:
    """The failure state a driver shares with its threads.  The driver sets ``eplan``,
    ``ctx`` (its ``StepContext``) and ``cond`` (a ``threading.Condition`` guarding the step)
    and calls ``StepFailure.__init__``; ``ended_cleanly()`` says whether the step has already
    finished (a cancel then changes nothing)."""

    def __init__(self):
        self.error = None  # (exception, failing node or None for a cancel)
        self.cancelled = False  # a failure or a cancel: no thread starts another node

    def ended_cleanly(self) -> bool:
        return False

    def cancel(self, error):
        """Stops the step from another thread: nothing new starts, kernels running finish, and
        the caller raises ``error`` (an OpError) if the step had not ended."""
        with self.cond:
            self.cancel_locked(error)

    def cancel_locked(self, error):
        if self.error is None and not self.ended_cleanly():
            self.error = (error, None)
            self.cancelled = True
            if self.ctx.rendezvous is not None:
                self.ctx.rendezvous.abort(error)
            # waiting kernels (queue ops) end now; their callbacks may re-enter ``cond``
            self.ctx.start_cancel(error)
        self.cond.notify_all()

    def fail(self, exc, i):
        """Node ``i``'s kernel raised ``exc``: the first failure stops the step."""
        with self.cond:
            first = self.error is None
            if first:
                self.error = (exc, i)
            self.cancelled = True
            self.cond.notify_all()
        if first:
            if self.ctx.rendezvous is not None:
                self.ctx.rendezvous.abort(node_error(exc, self.eplan, i))
            self.ctx.start_cancel(exc)  # the step's other waiting kernels end too

    def raise_error(self):
        """Raises the step's first error, if it has one."""
        if self.error is not None:
            e, i = self.error
            if i is None:
                raise e
            raise_node_error(e, self.eplan, i)
