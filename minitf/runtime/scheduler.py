"""Dependency counting: the one scheduling algorithm every executor of minitf drives.

Book section: "Parallel Execution".  Each node starts with a count of its inputs (data and
control edges).  Nodes whose count is zero (the "source" ops) are ready first; when a node
finishes, every node it feeds loses one from its count and becomes ready at zero.  Ready nodes
wait in a queue per device.  This module is pure logic: no threads, no clock, no kernels; the
serial and threaded executors and the simulator all run the same :class:`Step`.
"""

from collections import deque


class Plan:
    """The static shape of a step: per node its inputs, successors and device."""

    __slots__ = ("inputs", "successors", "pending0", "roots", "device", "n")

    def __init__(self, inputs, control_inputs, device):
        """``inputs[i]``: list of (source node, output index) data edges of node ``i``;
        ``control_inputs[i]``: source nodes of its control edges; ``device[i]``: a key naming
        the device whose ready queue node ``i`` joins."""
        n = len(inputs)
        successors = [[] for _ in range(n)]
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


class Step:
    """One run of a plan: live pending counts and a ready queue per device."""

    __slots__ = ("plan", "pending", "ready", "finished")

    def __init__(self, plan):
        self.plan = plan
        self.pending = list(plan.pending0)
        self.ready = {}
        self.finished = 0

    def start(self):
        """Queues the source nodes (those with no inputs) and returns them."""
        for i in self.plan.roots:
            self.ready.setdefault(self.plan.device[i], deque()).append(i)
        return list(self.plan.roots)

    def finish(self, i, enqueue=True):
        """Marks node ``i`` done; returns the nodes that just became ready (and, with
        ``enqueue``, appends them to their device's ready queue)."""
        self.finished += 1
        newly = []
        pending = self.pending
        for j in self.plan.successors[i]:
            pending[j] -= 1
            if pending[j] == 0:
                newly.append(j)
                if enqueue:
                    self.enqueue(j)
        return newly

    def enqueue(self, j):
        """Appends ready node ``j`` to its device's queue."""
        self.ready.setdefault(self.plan.device[j], deque()).append(j)

    def pop_ready(self, device):
        q = self.ready.get(device)
        return q.popleft() if q else None

    @property
    def done(self):
        return self.finished == self.plan.n

    def run_inline(self, execute):
        """Runs every node on the calling thread, depth first (the serial executor).

        ``execute(i)`` runs node ``i``.  The loop is the algorithm of :meth:`finish`, written
        out so a chain of cheap ops costs little more than its kernels.
        """
        pending = self.pending
        successors = self.plan.successors
        stack = list(self.plan.roots)
        stack.reverse()
        pop, push = stack.pop, stack.append
        while stack:
            i = pop()
            execute(i)
            for j in successors[i]:
                c = pending[j] - 1
                pending[j] = c
                if c == 0:
                    push(j)
        self.finished = self.plan.n
        self.ready.clear()
