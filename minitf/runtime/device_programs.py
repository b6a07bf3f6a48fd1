"""A step whose every device has one thread: each device's partition as one program on it.

Book section: "Parallel Execution" (Figure 12-5: each GPU with threads of its own,
``TF_GPU_THREAD_MODE=gpu_private``) and "Data parallelism" (towers on the cards of one machine).
TF runs one executor per partition of a step.  A card with one thread (``TF_GPU_THREAD_COUNT=1``)
runs its partition's kernels one after another, as its stream does, and a CPU whose inter-op
pool has one thread does the same with its own partition.  Nothing is then left for a shared
ready queue to decide, so minitf hands each device its partition as one program made once per
plan, like the serial driver's (``executor.run_serial``): a loop over records whose inputs,
forwarded buffers and dying values were resolved when the program was made.  The CPU's
partition runs on the caller, standing in for its one pool thread; each card's runs on the
card's own thread.  The general driver (``step_run.StepRun``) would pay a lock, a
dependency count and a routing decision per node and move every node across threads.

Partitions meet only at their ``_Send``/``_Recv`` pairs.  Every program lists its nodes in one
order common to the whole step: a topological order of the step's graph with an edge from each
``_Send`` to its ``_Recv`` (:func:`transfer_order`), and a ``_Recv`` waits, holding its thread,
until its tensor has come.  That cannot deadlock: the first node of that common order that has
not run is always first in its own program, and everything it waits for comes earlier in the
order, so has run.  The order is breadth first, so that each program takes what the others send
roughly as it comes (the CPU averages the first gradients while the cards still compute the
last ones).

What stays as in every step: a value dies after its last reader in its program, a value
handed to a ``_Send`` lives until its ``_Recv`` has it too (whichever comes last frees it), a
failure aborts the step's rendezvous so that no program waits for a tensor that will not come,
and a deadline or a cancel (``on_start``) stops every program between two nodes.  A traced step
keeps the general driver: its step stats show each node's thread as TF's executor picks it.
"""

from __future__ import annotations

import threading
import time
from collections import deque

from minitf.framework import errors
from minitf.runtime.executor import SIGNAL_SLICE, deadline_error
from minitf.runtime.pools import SHARED
from minitf.runtime.scheduler import Plan
from minitf.runtime.step_end import StepEnd


def transfer_order(plan: Plan, send_recv) -> list[int]:
    """A topological order of ``plan`` in which each ``_Send`` of the ``(send, recv)`` pairs
    ``send_recv`` comes before its ``_Recv``: breadth first, a node once its last input and
    its ``_Send`` are done."""
    after = {}
    pending = list(plan.pending0)
    for send, recv in send_recv:
        after.setdefault(send, []).append(recv)
        pending[recv] += 1
    ready = deque(i for i in range(plan.n) if pending[i] == 0)
    order = []
    while ready:
        i = ready.popleft()
        order.append(i)
        for j in plan.successors[i] + after.get(i, []):
            pending[j] -= 1
            if pending[j] == 0:
                ready.append(j)
    return order


def applies(eplan, ctx, pool_set) -> bool:
    """Whether a step runs as device programs: untraced, on pools that give every device one
    thread of its own (each GPU's in ``gpu_private`` mode, the CPU's shared one), over several
    devices, its only asynchronous nodes ``_Recv``s whose ``_Send`` is in the step (a kernel
    that waits for something else, a queue's, could hold its device's thread forever)."""
    return (
        ctx.tracer is None
        and pool_set.mode == "gpu_private"
        and pool_set.gpu_threads == 1
        and pool_set.inter_threads == 1
        and pool_set.intra_threads == 1
        and len(eplan.devices) > 1
        and programs(eplan, pool_set) is not None
    )


def try_run(eplan, ctx, pool_set, timeout_ms=0, on_start=None):
    """Runs the step as device programs where it :func:`applies` and no other step's programs
    run on these pools; returns every node's outputs, or None (the general driver runs it).
    One step at a time: a program holds its device's one thread while its ``_Recv`` waits, so
    two steps' programs queued on the same threads in opposite orders could wait for each
    other forever; the general driver's tasks never wait, so they cannot."""
    if not applies(eplan, ctx, pool_set):
        return None
    if not pool_set.programs_running.acquire(blocking=False):
        return None
    try:
        return DeviceRun(eplan, ctx, pool_set).run(timeout_ms, on_start)
    finally:
        pool_set.programs_running.release()


class Programs:
    """A plan's device programs: ``start`` (the constants' values, as the serial program has
    them), ``by_queue`` (each device's pool queue -> its records ``(node, kernel, input slots,
    dying nodes, handed nodes, asynchronous)``) and ``handed`` (each value handed to a
    ``_Send`` whose ``_Recv`` is in the step -> 1 + its ``_Recv``s: its own program and each
    ``_Recv`` count one down, the last frees it)."""

    __slots__ = ("start", "by_queue", "handed")

    def __init__(self, eplan, pool_set):
        plan, life = eplan.plan, eplan.lifetimes
        self.start = eplan.program()[0]
        order = [i for i in transfer_order(plan, eplan.send_recv) if self.start[i] is None]
        dead = life.deaths(order, plan.inputs, transfers=False)
        self.handed = {}
        for s in life.kept_until.values():
            if not life.pinned[s]:
                self.handed[s] = self.handed.get(s, 1) + 1
        self.by_queue = {}
        for i in order:
            kernel, p = eplan.kernels[i], life.forward[i]
            if p >= 0 and dead[i] is not None and plan.inputs[i][p][0] in dead[i]:
                kernel = eplan.forwarding[i]
            dying = tuple(s for s in dead[i] or () if s not in self.handed)
            handed = tuple(s for s in dead[i] or () if s in self.handed)
            if i in life.kept_until and life.kept_until[i] in self.handed:
                handed += (life.kept_until[i],)
            record = (i, kernel, tuple(plan.inputs[i]), dying, handed, eplan.is_async[i])
            self.by_queue.setdefault(pool_set.queue_of(plan.device[i]), []).append(record)


def programs(eplan, pool_set) -> Programs | None:
    """The plan's :class:`Programs`, made on first use; None where a plan cannot run so (an
    asynchronous node other than a ``_Recv`` of the step)."""
    got = eplan.device_programs
    if got is None:
        recvs = {r for _, r in eplan.send_recv}
        if all(r in recvs for r, a in enumerate(eplan.is_async) if a):
            got = Programs(eplan, pool_set)
        else:
            got = False
        eplan.device_programs = got
    return got or None


class _Arrival:
    """What a ``_Recv`` waits for on its program's thread: its callback releases ``lock``."""

    __slots__ = ("lock", "outs", "error")

    def __init__(self):
        self.lock = threading.Lock()
        self.lock.acquire()
        self.outs = self.error = None

    def __call__(self, outs, error=None):
        self.outs, self.error = outs, error
        self.lock.release()


class DeviceRun(StepEnd):
    """One run of a plan's device programs with a ``StepContext``: the caller runs the CPU's
    program, each card's own thread its card's (``run``)."""

    def __init__(self, eplan, ctx, pool_set):
        self.eplan = eplan
        self.ctx = ctx
        self.pools = pool_set
        self.progs = programs(eplan, pool_set)
        self.vals = list(self.progs.start)
        self.memory = ctx.memory if eplan.accounted else None
        self.handed = dict(self.progs.handed)
        self.cond = threading.Condition()
        StepEnd.__init__(self)  # (``outstanding``: the programs not ended)
        self.deadline = None  # (monotonic seconds) kept by the caller's program and wait

    def run(self, timeout_ms=0, on_start=None):
        """Runs the step; returns every node's outputs, or raises the step's first error."""
        if on_start is not None:
            on_start(self.cancel)
        if timeout_ms > 0:
            self.deadline = time.monotonic() + timeout_ms / 1000.0

        def body():
            self._start_programs()
            self._wait()

        self.run_to_end(body)
        return self.vals

    def _start_programs(self):
        """Hands each card's program to the card's thread, then runs the CPU's here."""
        mine = None
        for queue, records in self.progs.by_queue.items():
            if queue == SHARED:
                mine = records
                continue
            with self.cond:
                self.outstanding += 1
            try:
                self.pools.pool(queue).submit(self._program, records, False)
            except errors.CancelledError as e:  # the pools closed (server stopping)
                self.task_ended()
                self.cancel(e)
        if mine is not None:
            with self.cond:
                self.outstanding += 1
            self._program(mine, True)

    def _wait(self):
        """Waits until every program has ended (a failed or cancelled one ends at its next
        node; a _Recv's wait ends when the rendezvous is aborted)."""
        with self.cond:
            while self.outstanding:
                remaining = None if self.deadline is None else self.deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    self.cancel_locked(deadline_error())
                    self.deadline = None
                    continue
                self.cond.wait(SIGNAL_SLICE if remaining is None else min(remaining, SIGNAL_SLICE))

    # -- a program, on its device's thread ------------------------------------------------------
    def _program(self, records, caller):
        vals, ctx, memory = self.vals, self.ctx, self.memory
        deadline = self.deadline if caller else None  # (the caller keeps the step's deadline)
        i = -1
        try:
            for i, kernel, src, dying, handed, is_async in records:
                if self.cancelled:
                    return
                if deadline is not None and time.monotonic() > deadline:
                    self.cancel(deadline_error())
                    return
                ins = [vals[s][k] for s, k in src]
                if is_async:
                    vals[i] = self._receive(kernel, ins, caller)
                else:
                    vals[i] = kernel(ctx, ins)
                for s in dying:
                    vals[s] = None
                if memory is not None and dying:
                    memory.release_nodes(dying)
                if handed:
                    self._hand_over(handed)
        except Exception as e:  # noqa: BLE001 - reported to the caller
            self.fail(e, i)
        finally:
            self.task_ended()

    def _receive(self, kernel, ins, caller):
        """A ``_Recv``'s outputs, once its tensor came; the caller's thread wakes in slices to
        keep the step's deadline (the cards' threads wait until the tensor comes or the step is
        aborted)."""
        arrival = _Arrival()
        kernel(self.ctx, ins, arrival)
        if caller:
            while not arrival.lock.acquire(timeout=SIGNAL_SLICE):
                if self.deadline is not None and time.monotonic() > self.deadline:
                    self.cancel(deadline_error())  # aborts the rendezvous: the callback comes
        else:
            arrival.lock.acquire()
        if arrival.error is not None:
            raise arrival.error
        return arrival.outs

    def _hand_over(self, nodes):
        """Counts down values handed to ``_Send``s (its program's last reader and each
        ``_Recv`` count one); the last frees it."""
        for s in nodes:
            with self.cond:
                left = self.handed[s] = self.handed[s] - 1
            if not left:
                self.vals[s] = None
                if self.memory is not None:
                    self.memory.release(s)
