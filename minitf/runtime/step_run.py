"""One step with expensive or asynchronous nodes: the executor's general driver.

Book section: "Parallel Execution" (Figure 12-5).  The rules, which the simulator
(``simulate.py``) follows too:

* the caller's thread starts the step: it runs the cheap source nodes itself and, depth first,
  every cheap node they make ready (``scheduler.runs_inline``);
* an *expensive* node waits in the ready queue of its device's pool
  (``pools.PoolSet.queue_of``: the shared inter-op pool, or a GPU's own in gpu_private mode);
  a thread of that pool takes it and goes on the same way with what it makes ready;
* a *splittable* kernel run by a pool thread splits its work over the device's intra-op pool
  (``PoolSet.intra_for``: CPU kernels, and an emulated card's in gpu_private mode);
* an *asynchronous* kernel (a ``_Recv``) returns at once and holds no thread while it waits;
  when its callback comes (on whatever thread sent the tensor) the node is done and the nodes it
  made ready go to their pools' queues, or, in a step without pools, back to the caller;
* a failure, a cancel or the step's deadline stops everything: nothing new starts, the step's
  rendezvous is aborted (so no ``_Recv`` waits for a ``_Send`` that will not come), the
  callbacks kernels registered with ``StepContext.on_cancel`` run (a queue op stops waiting),
  and the caller gets the first error.
"""

from __future__ import annotations

import functools
import itertools
import threading
import time
from collections import deque
from collections.abc import Callable

from minitf.framework import errors
from minitf.runtime import device_programs, pools
from minitf.runtime.blas_threads import BlasThreads as _BlasThreads
from minitf.runtime.executor import (
    SIGNAL_SLICE,
    ExecutionPlan,
    NodeContext,
    StepContext,
    deadline_error,
    now_micros,
    run_serial,
)
from minitf.runtime.pools import PoolSet
from minitf.runtime.scheduler import Step, runs_inline, schedule_ready
from minitf.runtime.step_end import StepEnd


class StepRun(StepEnd):
    """One run of an execution plan with a :class:`~minitf.runtime.executor.StepContext`, over
    ``pool_set`` (None: every node on the caller's thread)."""

    def __init__(self, eplan, ctx, pool_set):
        self.eplan = eplan
        self.plan = eplan.plan
        if ctx.tracer is None:  # the constants are done: their values are the plan's
            start, head = eplan.head_start()
            self.step = Step(self.plan, head)
            self.vals = list(start)
            self.roots = head.roots
        else:  # a traced step runs (and records) every node
            self.step = Step(self.plan)
            self.vals = [None] * self.plan.n
            self.roots = self.plan.roots
        self.life = eplan.lifetimes
        self.unread = list(self.life.uses)  # reads of each node's outputs still to come
        self.ctx = ctx
        self.tracer = ctx.tracer
        self.pools = pool_set
        # a threaded untraced step times its expensive nodes (``kernel_stats``)
        timed = pool_set is not None and ctx.tracer is None and eplan.any_expensive
        self.learn = eplan.kernel_stats if timed else None
        self.queue_of = (
            {d: pool_set.queue_of(d) for d in eplan.devices} if pool_set is not None else None
        )
        self.cond = threading.Condition()
        self.handoff = deque()  # nodes made ready by a completion, for the caller (no pools)
        StepEnd.__init__(self)  # (``outstanding``: pool tasks and asynchronous kernels)
        self.deadline = None  # (monotonic seconds) checked between nodes where no pool runs

    # -- the caller's side ---------------------------------------------------------------------
    def run(self, timeout_ms=0, on_start=None):
        """Runs the step; returns every node's outputs, or raises the step's first error."""
        if on_start is not None:
            on_start(self.cancel)
        deadline = time.monotonic() + timeout_ms / 1000.0 if timeout_ms > 0 else None
        # a step without pools runs on this thread: its deadline is checked between nodes
        self.deadline = deadline if self.pools is None else None

        def body():
            self._process(list(self.roots), False)
            self._wait(deadline)

        self.run_to_end(body)
        if self.learn is not None:
            self.learn.run_ended()
        return self.vals

    def _wait(self, deadline):
        """Waits for the step to end, running on this thread what completions hand back."""
        while True:
            with self.cond:
                while not self.finished() and not self.handoff:
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        self.cancel_locked(deadline_error())
                        return
                    # in slices: a Ctrl-C that the OS hands to another thread of the process
                    # (gRPC's, BLAS's) only interrupts this wait when it wakes up
                    self.cond.wait(
                        SIGNAL_SLICE if remaining is None else min(remaining, SIGNAL_SLICE)
                    )
                if self.finished():
                    return
                ready = list(self.handoff)
                self.handoff.clear()
            self._process(ready, False)

    def finished(self):
        if self.error is not None:
            return self.outstanding == 0
        return self.step.done

    def ended_cleanly(self):
        return self.step.done

    # -- running nodes -------------------------------------------------------------------------
    def _process(self, ready, on_pool, first=None, queue=None):
        """Runs ``first`` (a node popped from pool queue ``queue``) and, depth first, every node
        that becomes ready after it and runs here; hands the others to the pools."""
        stack = []
        self._route(ready, stack, False, None)
        if first is not None:
            stack.append(first)
        while stack:
            if self.cancelled:
                return
            if self.deadline is not None and time.monotonic() > self.deadline:
                self.cancel(deadline_error())
                return
            i = stack.pop()
            try:
                finished = self._execute(i, on_pool)
            except Exception as e:  # noqa: BLE001 - reported to the caller
                self.fail(e, i)
                return
            if finished:
                with self.cond:
                    self._died_after(i)
                    newly = self.step.finish(i)
                    if self.step.done:
                        self.cond.notify_all()
                if newly:
                    self._route(newly, stack, False, queue)
            if self.handoff and not on_pool:
                with self.cond:
                    stack.extend(self.handoff)
                    self.handoff.clear()

    def _died_after(self, i):
        """Node ``i`` has run (caller holds ``cond``): the values it read last die, and its own
        outputs if nothing reads them (``tensor_lifetime``)."""
        life, unread = self.life, self.unread
        dead = [s for s, _ in self.plan.inputs[i]]
        if i in life.kept_until:  # a _Recv: the value its _Send left can go now
            dead.append(life.kept_until[i])
        if unread[i] == 0:
            unread[i] = 1
            dead.append(i)
        for s in dead:
            unread[s] -= 1
            if unread[s] == 0 and not life.pinned[s]:
                self.vals[s] = None
                self.ctx.memory.release(s)

    def _kernel_of(self, i):
        """Node ``i``'s kernel: the forwarding variant when it is the last reader of the input
        it may write into (no other reader is running: they count down when they end)."""
        p = self.life.forward[i]
        if p >= 0 and self.unread[self.plan.inputs[i][p][0]] == 1:
            return self.eplan.forwarding[i]
        return self.eplan.kernels[i]

    def _execute(self, i, on_pool):
        """Runs node ``i``; False when it is asynchronous (it completes in ``_async_done``)."""
        eplan, vals = self.eplan, self.vals
        src = self.plan.inputs[i]
        if len(src) == 2:  # most ops, unrolled: a comprehension is a call of its own (3.11)
            (s0, k0), (s1, k1) = src
            ins = [vals[s0][k0], vals[s1][k1]]
        else:
            ins = [vals[s][k] for s, k in src]
        ctx = self.ctx
        if on_pool and eplan.splittable[i]:
            intra = self.pools.intra_for(self.plan.device[i])
            if intra is not None:
                ctx = NodeContext(ctx, intra)
        start = now_micros() if self.tracer is not None else 0
        pool = "inter_op" if on_pool else "inline"
        if eplan.is_async[i]:
            with self.cond:
                self.outstanding += 1
            once = itertools.count()  # the callback, or the kernel's own failure, ends it once
            callback = functools.partial(self._async_done, i, start, pool, pools.current_thread())

            def done(*args, **kwargs):
                if next(once) == 0:
                    callback(*args, **kwargs)

            try:
                eplan.kernels[i](ctx, ins, done)
            except BaseException:  # it failed before handing its work on: no callback comes
                if next(once) == 0:
                    self.task_ended()
                raise
            return False
        if self.learn is not None and eplan.expensive[i]:
            t0 = time.perf_counter_ns()
            vals[i] = outs = self._kernel_of(i)(ctx, ins)
            self.learn.record(i, (time.perf_counter_ns() - t0) / 1000.0)
        else:
            vals[i] = outs = self._kernel_of(i)(ctx, ins)
        if self.tracer is not None:
            self.tracer.record(i, outs, start, now_micros(), pool, getattr(ctx, "chunks", ()))
        return True

    def _async_done(self, i, start, pool, thread, outs, error=None):
        """An asynchronous kernel's callback: node ``i`` is done (or failed with ``error``)."""
        try:
            if error is not None:
                self.fail(error, i)
                return
            self.vals[i] = outs
            if self.tracer is not None:
                self.tracer.record(i, outs, start, now_micros(), pool, thread=thread)
            with self.cond:
                self._died_after(i)
                newly = self.step.finish(i)
                if self.pools is None and newly:
                    self.handoff.extend(newly)
                    self.cond.notify_all()
                elif self.step.done:
                    self.cond.notify_all()
                # else the caller has nothing to do yet: waking it for nothing would cost a
                # thread switch and the GIL per _Recv
            if self.pools is not None:
                self._route(newly, None, True, None)
        finally:
            self.task_ended()

    def _route(self, nodes, stack, after_async, queue):
        """Nodes made ready by a thread (of pool queue ``queue``; None: the caller, or a
        completion): onto its ``stack``, or into their pools' queues (``schedule_ready``)."""
        if self.pools is None:
            stack.extend(nodes)
            return
        if (
            stack is not None
            and len(nodes) == 1
            and runs_inline(self.eplan.expensive[nodes[0]], after_async)
        ):
            stack.append(nodes[0])  # one node that runs here: schedule_ready's answer, sooner
            return
        here, queued = schedule_ready(
            nodes,
            self.eplan.expensive,
            after_async,
            queue,
            lambda j: self.queue_of[self.plan.device[j]],
            stack is not None and not stack,
        )
        if here:
            stack.extend(here)
        for j in queued:
            self._enqueue(j)

    def _enqueue(self, j):
        queue = self.queue_of[self.plan.device[j]]
        with self.cond:
            if self.cancelled:  # a failed or timed-out step starts nothing new
                return
            self.step.enqueue(j, queue)
            self.outstanding += 1
        try:
            self.pools.pool(queue).submit(self._pool_task, queue)
        except errors.CancelledError as e:  # the pools closed (server stopping)
            self.cancel(e)
            self.task_ended()

    def _pool_task(self, queue):
        try:
            with self.cond:
                i = self.step.pop_ready(queue)
            if i is not None and not self.cancelled:
                self._process((), True, first=i, queue=queue)
        finally:
            self.task_ended()


# -- choosing a driver --------------------------------------------------------------------------


def _pools_add_nothing(eplan, ctx, pool_set) -> bool:
    """Whether the step's pools could not run it any better than its caller can, alone: an
    untraced step (a trace shows the pool thread that ran each node) with TF's shared pools,
    each of one thread (the pool thread would run the nodes one after another while the caller
    waited), or whose plan's first runs showed that no two of its heavy nodes can run at once
    and that BLAS's threads can do their intra-op work (``kernel_stats``).  What the step
    computes, frees and forwards is the same; the caller saves a hand-off per expensive node
    and the pool's bookkeeping."""
    if pool_set.mode != "global" or ctx.tracer is not None:
        return False
    inter, intra = pool_set.inter_threads, pool_set.intra_threads
    return (inter == 1 and intra == 1) or eplan.kernel_stats.caller_may_run(inter, intra)


def run_step(
    eplan: ExecutionPlan,
    ctx: StepContext,
    pool_set: PoolSet | None = None,
    timeout_ms: int = 0,
    on_start: Callable | None = None,
) -> list:
    """Runs one step with ``ctx`` (a :class:`StepContext`); returns every node's outputs.

    A plan of cheap synchronous nodes runs inline on the caller, and so does every plan
    without ``pool_set`` (a session that runs steps in its caller's thread) or whose pools
    could not do better (:func:`_pools_add_nothing`); a plan over several devices that each
    have one thread runs each device's partition as one program on it
    (``device_programs``); any other runs in a
    :class:`StepRun` (over ``pool_set`` when it has expensive nodes,
    waiting at most ``timeout_ms``; ``on_start(cancel)`` then receives a function that stops it
    from another thread: ``cancel(error)`` makes the step raise ``error``).  A failed step
    aborts its rendezvous, so that no other part of the step waits for it.
    """
    try:
        if not eplan.any_expensive:  # no node would wait for a pool thread
            if not eplan.any_async:
                return run_serial(eplan, ctx)
            return StepRun(eplan, ctx, None).run(timeout_ms, on_start)
        if pool_set is not None and not _pools_add_nothing(eplan, ctx, pool_set):
            with _BlasThreads(1):
                vals = device_programs.try_run(eplan, ctx, pool_set, timeout_ms, on_start)
                if vals is not None:
                    return vals
                return StepRun(eplan, ctx, pool_set).run(timeout_ms, on_start)
        # one node at a time: BLAS's threads are its matmuls' intra-op threads
        with _BlasThreads(1 if pool_set is None else pool_set.intra_threads):
            if eplan.any_async or timeout_ms > 0 or on_start is not None:
                # completions and a cancel come from other threads: the caller waits
                return StepRun(eplan, ctx, None).run(timeout_ms, on_start)
            return run_serial(eplan, ctx)  # nothing comes from elsewhere: its program
    except errors.OpError as e:
        if ctx.rendezvous is not None:
            ctx.rendezvous.abort(e)
        raise
    except BaseException:
        if ctx.rendezvous is not None:
            ctx.rendezvous.abort(errors.CancelledError(None, None, "The step was interrupted."))
        raise
