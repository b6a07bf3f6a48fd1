"""What a plan learns from its first runs: which nodes are heavy, and whether its pools can
ever run two of those at once.

Book section: "Parallel Execution".  TF's executor times its kernels and stops handing the
cheap ones to other threads (TF 2.x's ``KernelStats``: a kernel whose measured cost is under a
threshold runs inline).  In CPython a hand-off costs far more than in C++ (a thread wake and
the GIL, tens of microseconds, see ``bench/README.md``, "Where a split pays"), so minitf asks
the same question of a whole step: over a plan's first threaded runs it times every
*expensive* node; a node that took at least :data:`HEAVY_MICROS` is *heavy*.  The inter-op
pool can only gain where two heavy nodes may be ready together (neither depends on the other);
if there are none, or every heavy node that could run beside another is a CPU matmul and there
are at least as many intra-op threads as inter-op ones (BLAS's own threads then keep as many
cores busy on one product as the inter-op threads could on several), the inter-op pool has
nothing worth overlapping; and if every heavy node that splits its work is a CPU matmul, the
intra-op work can be BLAS's own threads.  Such a step may then run on its caller, one node
after another (``step_run._pools_add_nothing``), without the hand-offs.  Only untraced steps
take that path: a trace shows every pool thread at work.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from minitf.runtime.scheduler import Plan, serial_order

HEAVY_MICROS = 150
"""A node that takes this long is worth running beside another on a second thread: a split
matmul or add starts to pay at about this size on a 2-core VM (``bench/README.md``)."""

LEARNING_RUNS = 2
"""Threaded runs a plan times before it first decides (each node's fastest run counts: the
first run of a plan pays for cold caches).  Every later threaded run is timed too, so a node
that only looked heavy while the machine was busy stops counting once it ran faster."""

BLAS_OPS = frozenset({"MatMul"})
"""Op types whose CPU kernel is one BLAS call: BLAS's own threads can do its intra-op work."""


def is_cpu_blas(op_type: str, device_type: str) -> bool:
    """Whether a node's kernel is one BLAS call on the CPU (its intra-op work can be BLAS's)."""
    return device_type == "CPU" and op_type in BLAS_OPS


def needs_no_intra_pool(op_type: str, device_type: str, splittable: bool) -> bool:
    """Whether a node's intra-op work can do without minitf's intra-op pool when its caller runs
    it: its kernel never splits, it is a card's kernel (with TF's shared pools a GPU kernel is
    the card's work, never split over host threads), or it is one BLAS call on the CPU."""
    return not splittable or device_type != "CPU" or is_cpu_blas(op_type, device_type)


class KernelStats:
    """Per plan: the fastest measured time of each expensive node over its threaded untraced
    runs, and the decision :meth:`caller_may_run` reads, made after :data:`LEARNING_RUNS` runs
    and again whenever a node stops being heavy."""

    __slots__ = (
        "plan",
        "costs",
        "timed",
        "no_pool",
        "cpu_blas",
        "runs",
        "heavy",
        "overlap",
        "overlap_blas",
        "pool_free",
    )

    def __init__(
        self,
        plan: Plan,
        expensive: Sequence[bool],
        no_pool: Sequence[bool],
        cpu_blas: Sequence[bool],
    ):
        """``expensive[i]``: node ``i`` waits for a pool thread; ``no_pool[i]``: its intra-op
        work needs no intra-op pool (:func:`needs_no_intra_pool`); ``cpu_blas[i]``: its kernel
        is one BLAS call on the CPU (:func:`is_cpu_blas`)."""
        self.plan = plan
        self.costs = [math.inf if e else 0.0 for e in expensive]
        self.timed = [i for i, e in enumerate(expensive) if e]  # the nodes a run times
        self.no_pool = no_pool
        self.cpu_blas = cpu_blas
        self.runs = 0
        self.heavy: list[int] | None = None  # the heavy nodes of the last decision
        # nothing is decided before the runs.  overlap: two heavy nodes can be ready together;
        # overlap_blas: every heavy node that can run beside another is a CPU matmul
        self.overlap = self.overlap_blas = self.pool_free = False

    def record(self, i: int, micros: float) -> None:
        """Node ``i`` (expensive) ran in ``micros`` in a threaded untraced run."""
        if micros < self.costs[i]:
            self.costs[i] = micros

    def run_ended(self) -> None:
        """A timed run ended without an error; decides again if the heavy nodes changed."""
        self.runs += 1
        if self.runs < LEARNING_RUNS:
            return
        costs = self.costs
        # (a node never timed, a constant computed once with the plan, costs a step nothing)
        heavy = [i for i in self.timed if HEAVY_MICROS <= costs[i] < math.inf]
        if heavy != self.heavy:
            beside = unordered(self.plan, heavy)
            self.overlap = bool(beside)
            self.overlap_blas = all(self.cpu_blas[i] for i in beside)
            self.pool_free = all(self.no_pool[i] for i in heavy)
            self.heavy = heavy

    def caller_may_run(self, inter_threads: int, intra_threads: int) -> bool:
        """Whether, with pools of these sizes, the caller loses nothing by running the step
        alone, one node at a time with BLAS at ``intra_threads``:

        * the inter-op threads have nothing to gain: one thread, or no two heavy nodes that
          can be ready together, or every heavy node that can run beside another a CPU matmul
          with at least as many intra-op threads as inter-op ones (BLAS then gives each product
          the cores that overlapping that many single-threaded products would keep busy,
          without the hand-offs);
        * and no heavy node needs the intra-op pool: one intra-op thread, or none that splits
          its work but a BLAS call."""
        if self.heavy is None:
            return False
        inter_ok = (
            inter_threads == 1
            or not self.overlap
            or (self.overlap_blas and intra_threads >= inter_threads)
        )
        return inter_ok and (intra_threads == 1 or self.pool_free)


def unordered(plan: Plan, nodes: Sequence[int]) -> list[int]:
    """The nodes of ``nodes`` that some other of them is not ordered with by the plan's edges
    (the two can be ready at once); empty when ``nodes`` form one chain.  Each node's marked
    ancestors and descendants as integer bit sets, in one pass each way."""
    if len(nodes) <= 1:
        return []
    bit = {j: 1 << k for k, j in enumerate(nodes)}
    order = serial_order(plan)
    before = [0] * plan.n  # the marked nodes each node depends on
    for i in order:
        acc = before[i] | bit.get(i, 0)
        for j in plan.successors[i]:
            before[j] |= acc
    after = [0] * plan.n  # the marked nodes that depend on each node
    for i in reversed(order):
        acc = 0
        for j in plan.successors[i]:
            acc |= after[j] | bit.get(j, 0)
        after[i] = acc
    everything = (1 << len(nodes)) - 1
    return [j for j in nodes if before[j] | after[j] | bit[j] != everything]
