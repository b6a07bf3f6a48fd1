"""Dependency counting: the one scheduling algorithm every executor of minitf drives.

Book section: "Parallel Execution".  Each node starts with a count of its inputs (data and
control edges).  Nodes whose count is zero (the "source" ops) are ready first; when a node
finishes, every node it feeds loses one from its count and becomes ready at zero.  A ready node
either runs at once on the thread that made it ready, or waits in a ready queue for a thread of
its pool (:func:`runs_inline`, :func:`schedule_ready`).  This module is pure logic: no threads,
no clock, no kernels; the threaded executor and the simulator run the same :class:`Step` and
the same :func:`schedule_ready`, and the serial executor runs the order :func:`serial_order`
gives.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence


def runs_inline(expensive: bool, after_async: bool) -> bool:
    """Whether a node that just became ready runs on the thread that made it ready (TF's
    executor): yes for a cheap node, unless an asynchronous kernel's completion made it ready
    (a ``_Recv`` called back by its ``_Send``: TF hands those successors to the pool)."""
    return not expensive and not after_async


def schedule_ready(
    nodes: Sequence[int],
    expensive: Sequence[bool],
    after_async: bool,
    own_queue: str | None,
    queue_of: Callable[[int], str],
    idle: bool,
) -> tuple[list[int], list[int]]:
    """Where nodes just made ready on a thread go (TF's ``ScheduleReady``): ``(run here,
    queued)``.  Cheap nodes run here (:func:`runs_inline`); expensive ones wait in their pool's
    ready queue, except one: a pool thread (``own_queue``: its pool's queue) that would be left
    with nothing to run (``idle``, and no cheap node among these) keeps the last expensive node
    of its own queue and runs it itself, so that a chain of expensive ops is not handed from
    thread to thread: a hand-over only where there is parallelism to gain."""
    here, queued = [], []
    for j in nodes:
        (here if runs_inline(expensive[j], after_async) else queued).append(j)
    if idle and not here and own_queue is not None and not after_async:
        for k in range(len(queued) - 1, -1, -1):
            if queue_of(queued[k]) == own_queue:
                here.append(queued.pop(k))
                break
    return here, queued


class Plan:
    """The static shape of a step: per node its inputs, successors and device."""

    __slots__ = ("inputs", "successors", "pending0", "roots", "device", "n")

    def __init__(
        self, inputs: Sequence[list], control_inputs: Sequence[list], device: Sequence[str]
    ):
        """``inputs[i]``: list of (source node, output index) data edges of node ``i``;
        ``control_inputs[i]``: source nodes of its control edges; ``device[i]``: the name of
        the device node ``i`` runs on."""
        n = len(inputs)
        successors: list[list[int]] = [[] for _ in range(n)]
        pending0 = [0] * n
        for i in range(n):
            for src, _ in inputs[i]:
                successors[src].append(i)
                pending0[i] += 1
            for src in control_inputs[i]:
                successors[src].append(i)
                pending0[i] += 1
        self.n = n
        self.inputs = inputs
        self.successors = successors
        self.pending0 = pending0
        self.roots = [i for i in range(n) if pending0[i] == 0]
        self.device = device


class HeadStart:
    """What a plan looks like once some of its nodes are done before a step starts (the
    constants, whose values a plan computes once): the pending counts and ready nodes left."""

    __slots__ = ("done", "pending", "roots")

    def __init__(self, plan: Plan, done: Sequence[int]):
        self.done = list(done)
        step = Step(plan)
        skip = set(self.done)
        ready = [i for i in plan.roots if i not in skip]
        for i in self.done:
            ready.extend(step.finish(i))
        self.pending = step.pending
        self.roots = ready


class Step:
    """One run of a plan: live pending counts and the ready queues (one per queue key: a
    pool's, see ``pools.PoolSet.queue_of``)."""

    __slots__ = ("plan", "pending", "ready", "finished")

    def __init__(self, plan: Plan, head_start: HeadStart | None = None):
        """``head_start``: nodes already done before the step starts (see :class:`HeadStart`)."""
        self.plan = plan
        self.pending = list(plan.pending0 if head_start is None else head_start.pending)
        self.ready: dict[str, deque] = {}
        self.finished = 0 if head_start is None else len(head_start.done)

    def finish(self, i: int) -> list[int]:
        """Marks node ``i`` done; returns the nodes that just became ready."""
        self.finished += 1
        newly = []
        pending = self.pending
        for j in self.plan.successors[i]:
            pending[j] -= 1
            if pending[j] == 0:
                newly.append(j)
        return newly

    def enqueue(self, j: int, queue: str) -> None:
        """Appends ready node ``j`` to ready queue ``queue``."""
        q = self.ready.get(queue)
        if q is None:
            q = self.ready[queue] = deque()
        q.append(j)

    def pop_ready(self, queue: str) -> int | None:
        q = self.ready.get(queue)
        return q.popleft() if q else None

    @property
    def done(self) -> bool:
        return self.finished == self.plan.n


def serial_order(plan: Plan) -> list[int]:
    """The order the serial driver runs a plan's nodes in: depth first from the source nodes,
    a node as soon as its last input is done (what :meth:`Step.finish` would make ready, run at
    once on the calling thread).  Computed once per plan: a serial run is a loop over it."""
    pending = list(plan.pending0)
    successors = plan.successors
    stack = list(plan.roots)
    stack.reverse()
    order = []
    while stack:
        i = stack.pop()
        order.append(i)
        for j in successors[i]:
            pending[j] -= 1
            if pending[j] == 0:
                stack.append(j)
    return order
