"""How a step whose nodes run on several threads ends: at its first failure, and freed once.

Book section: "Parallel Execution".  Both drivers that spread a step over threads
(``step_run.StepRun`` and ``device_programs.DeviceRun``) count the tasks they handed to other
threads (``outstanding``) and keep the step's first error.  On that error:

* nothing new starts (``cancelled``, read by every thread between two nodes);
* the step's rendezvous is aborted, so that no ``_Recv`` waits for a ``_Send`` that will not
  come (its waiters get the error, derived: the root cause stays the first one);
* the callbacks that waiting kernels registered with ``StepContext.on_cancel`` run (a queue op
  stops waiting);
* the caller raises that error, naming the failing node as TF does (``[[{{node ...}}]]``), or
  the cancel's error (a deadline, an interrupt, a canceller from another thread) as it is.

A KeyboardInterrupt in the caller stops the step the same way.  The step's memory on its
devices is freed once: by the caller when it returns, or, if tasks were still running then (an
interrupted caller), by the last of them to end.
"""

from __future__ import annotations

from minitf.framework import errors
from minitf.runtime.executor import node_error, raise_node_error


class StepEnd:
    """The end of a step that a driver shares with its threads.  The driver sets ``eplan``,
    ``ctx`` (its ``StepContext``) and ``cond`` (a ``threading.Condition`` guarding the step),
    calls ``StepEnd.__init__``, counts each task it hands to another thread in ``outstanding``
    (under ``cond``) and calls :meth:`task_ended` when one ends.  ``ended_cleanly()``: the step
    has finished (a cancel then changes nothing); ``finished()``: the caller need not wait any
    longer (default: no task outstanding)."""

    def __init__(self):
        self.outstanding = 0  # tasks on other threads (or asynchronous kernels) not ended
        self.error = None  # (exception, failing node or None for a cancel)
        self.cancelled = False  # a failure or a cancel: no thread starts another node
        self.ended = False  # the caller returned: the last outstanding task frees memory

    def ended_cleanly(self) -> bool:
        return False

    def finished(self) -> bool:
        return self.outstanding == 0

    def run_to_end(self, body):
        """Runs ``body()`` (the caller's part: it starts the step and waits for it), then frees
        the step's memory (or leaves that to the last task still running) and raises the
        step's first error, if it has one."""
        try:
            body()
        except BaseException as e:
            if not isinstance(e, Exception):  # KeyboardInterrupt: the step stops too
                self.cancel(errors.CancelledError(None, None, "The step was interrupted."))
            raise
        finally:
            with self.cond:
                self.ended = True
                idle = self.outstanding == 0
            if idle:
                self.ctx.free_memory()
        if self.error is not None:
            e, i = self.error
            if i is None:
                raise e
            raise_node_error(e, self.eplan, i)

    def task_ended(self):
        """A task handed to another thread ended: the waiting caller is woken if it need not
        wait any longer, and the last task of a step whose caller has returned frees it."""
        with self.cond:
            self.outstanding -= 1
            if self.finished():
                self.cond.notify_all()
            free = self.ended and self.outstanding == 0
        if free:
            self.ctx.free_memory()

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
