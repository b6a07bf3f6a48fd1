"""The scheduler on a virtual clock: deterministic timelines of one ``sess.run``.

Book section: "Parallel Execution" (Figure 12-5).  A real run's timeline depends on the
machine, the operating system's thread scheduler and luck.  This module replays the *same*
dependency-counting algorithm the executors use (:class:`~minitf.runtime.scheduler.Step`) with
the same thread pools, but every op takes a fixed number of *virtual* microseconds given by a
:class:`CostModel`.  The result is the record a traced real run produces (a ``StepStats`` with
one ``DeviceStepStats`` per device), identical on every machine, so notebook figures and tests
can rely on it.  :class:`Simulation` can also be advanced one event at a time, which is what the
step-through widget shows: which nodes wait in which device's ready queue, how many inputs each
blocked node still waits for, and which thread runs what.

The rules it follows are those of minitf's threaded executor (``executor._ThreadedRun``):

* each device has an *inter-op* pool of ``inter_op_threads`` threads (``"GPU:0 inter-op #0"``,
  ``#1`` ...), and an *intra-op* pool of ``intra_op_threads`` threads (``"GPU:0 intra-op #0"``
  ...); the thread that called ``run()`` is ``"caller"``;
* the source nodes (no inputs, no control inputs) are ready at time 0, made ready by the
  caller;
* a ready node that is not *expensive* runs *inline* on the thread that made it ready, if that
  thread belongs to the node's device (the caller takes nodes of any device).  A thread keeps a
  stack of such nodes and runs them right after the node it is running, last pushed first
  (depth first);
* every other ready node waits in its device's ready queue (first in, first out) until one of
  the device's inter-op threads is free; the lowest-numbered free thread takes it;
* a *splittable* kernel running on a pool thread splits its work when it is large (the kernels'
  own rule: a ``MatMul`` with ``m*k*n >= SPLIT_FLOPS`` and ``m >= 2``, an elementwise op on
  two same-shaped operands of at least ``SPLIT_ELEMENTS`` elements, see
  :func:`split_count`) into ``min(intra_op_threads, rows or elements)`` equal chunks, as
  ``ThreadPool.parallel_for`` does: chunk 0 runs on the node's own thread, the others on the
  device's intra-op threads (lowest-numbered free one first, queueing behind chunks of other
  nodes when the pool is busy).  Each chunk takes ``ceil(cost / chunks)`` plus
  :data:`CHUNK_OVERHEAD_MICROS`; the node ends when its last chunk ends;
* simultaneous happenings are ordered deterministically: all ends at time ``t`` (by node index)
  before any start at ``t``; inline continuations (by thread id) before queue dispatches (by
  session device order).

A node's ``pool`` in the record is ``"inline"`` when it ran on the caller's thread and
``"inter_op"`` when it ran on a pool thread (as the real tracer records it).

What is *not* modelled: the hand-off latency between threads, memory, and transfer time.
Cross-device tensors are recorded as :class:`~minitf.runtime.step_stats.TransferStats` (with the
bytes and the microseconds a copy would take at :data:`TRANSFER_BYTES_PER_MICRO`), but the
consumer does not wait for the copy.

Pool sizes default to the session's ``ConfigProto`` (``0`` means ``os.cpu_count()``, as in
TF).  For figures that must look the same on every machine, pass ``inter_op_threads`` and
``intra_op_threads`` explicitly.
"""

import heapq
import math
import numbers
import os
from collections import deque, namedtuple

from minitf.kernels import cpu as _cpu_kernels
from minitf.runtime.config_proto import StepStats
from minitf.runtime.scheduler import Step
from minitf.runtime.step_stats import (ChunkStats, DeviceStepStats, NodeExecStats, TensorOutput,
                                       TransferStats, timeline_label)

# -- the cost model --------------------------------------------------------------------------

BASE_MICROS = 1
"""Every op costs at least this many virtual microseconds (launching a kernel is not free)."""

CPU_ELEMENTS_PER_MICRO = 1000
"""Elementwise throughput of a CPU device: 1000 elements per microsecond (1 G elements/s)."""

CPU_FLOPS_PER_MICRO = 10000
"""Matrix-multiply throughput of a CPU device: 10 000 flops per microsecond (10 GFLOP/s)."""

GPU_SPEEDUP = 10
"""A GPU device is this many times faster than a CPU device, for elementwise ops and matmuls."""

FREE_OPS = frozenset({"Const", "Placeholder", "NoOp", "Identity", "VariableV2", "_Arg",
                      "IsVariableInitialized", "Reshape", "ExpandDims", "Shape", "Rank",
                      "Size", "StopGradient"})
"""Op types costing only :data:`BASE_MICROS`: they hand over a buffer without touching it."""

REDUCTION_OPS = frozenset({"Sum", "Mean", "Max", "Min", "Prod", "ArgMax", "ArgMin"})
"""Op types whose work is proportional to their *input* (they read every element once)."""

SPLIT_FLOPS = getattr(_cpu_kernels, "SPLIT_FLOPS", 1 << 21)
"""A splittable ``MatMul`` splits when ``m*k*n`` reaches this (the CPU kernels' constant)."""

SPLIT_ELEMENTS = getattr(_cpu_kernels, "SPLIT_ELEMENTS", 1 << 16)
"""A splittable elementwise op splits from this many elements (the CPU kernels' constant)."""

CHUNK_OVERHEAD_MICROS = 2
"""What each chunk of a split node adds to its share of the work (handing it to a thread)."""

TRANSFER_LATENCY_MICROS = 10
"""Fixed cost of one cross-device copy."""

TRANSFER_BYTES_PER_MICRO = 8000
"""Cross-device bandwidth: 8000 bytes per microsecond (8 GB/s, a PCIe 3.0 x16 link)."""


def _num_elements(shape):
    """Elements of a static shape, unknown dimensions (and unknown rank) counting as 1."""
    if shape.ndims is None:
        return 1
    total = 1
    for d in shape.as_list():
        total *= 1 if d is None else d
    return total


def _device_type(device_name):
    """``"GPU"`` for ``/job:localhost/replica:0/task:0/device:GPU:1``."""
    return short_device(device_name).split(":")[0].upper()


def short_device(device_name):
    """``"GPU:1"`` for ``/job:localhost/replica:0/task:0/device:GPU:1`` (thread names use it)."""
    return device_name.rsplit("/device:", 1)[-1]


class CostModel:
    """How long an op takes, in virtual microseconds, from its type and static shapes only.

    * ops in :data:`FREE_OPS` (constants, feeds, ``NoOp``, ``Identity`` ...):
      :data:`BASE_MICROS`;
    * ``MatMul``: ``BASE_MICROS + ceil(2*m*k*n / flops per microsecond)`` where a CPU device
      does :data:`CPU_FLOPS_PER_MICRO` and a GPU device :data:`GPU_SPEEDUP` times more;
    * reductions (:data:`REDUCTION_OPS`): proportional to the elements of their input;
      ``AddN``: to the elements of all its inputs;
    * every other op (elementwise math, casts, fills, assignments, random numbers ...):
      ``BASE_MICROS + ceil(output elements / elements per microsecond)``, a CPU device doing
      :data:`CPU_ELEMENTS_PER_MICRO` and a GPU device :data:`GPU_SPEEDUP` times more.

    Unknown dimensions count as 1.  ``overrides`` maps a node name or an op type to a fixed
    number of microseconds (a node name wins over its type), e.g.
    ``CostModel(overrides={"MatMul": 500, "loss": 20})``.
    """

    def __init__(self, overrides=None):
        overrides = dict(overrides or {})
        for key, value in overrides.items():
            if not isinstance(key, str):
                raise TypeError("CostModel overrides are keyed by node name or op type "
                                "(str), got %r" % (key,))
            if isinstance(value, bool) or not isinstance(value, (int, float)) \
                    or not math.isfinite(value) or value < 0:
                raise ValueError("CostModel override for %r must be a number of microseconds "
                                 ">= 0, got %r" % (key, value))
        self.overrides = {k: int(round(v)) for k, v in overrides.items()}

    @staticmethod
    def speed(device_type):
        """(elements per microsecond, flops per microsecond) of a device type."""
        factor = GPU_SPEEDUP if device_type == "GPU" else 1
        return CPU_ELEMENTS_PER_MICRO * factor, CPU_FLOPS_PER_MICRO * factor

    def micros(self, op, device_type, name=None):
        """The duration of ``op`` (an Operation, or None for a feed node named ``name``) on a
        device of type ``device_type`` (``"CPU"``/``"GPU"``)."""
        if name is None:
            name = op.name
        if name in self.overrides:
            return self.overrides[name]
        op_type = "_Arg" if op is None else op.type
        if op_type in self.overrides:
            return self.overrides[op_type]
        if op_type in FREE_OPS:
            return BASE_MICROS
        per_elem, per_flop = self.speed(device_type)
        if op_type == "MatMul":
            a, b = op._inputs[0].shape, op._inputs[1].shape
            m, k = _dims2(a, op.get_attr("transpose_a"))
            _, n = _dims2(b, op.get_attr("transpose_b"))
            return BASE_MICROS + -(-2 * m * k * n // per_flop)
        if op_type in REDUCTION_OPS:
            work = _num_elements(op._inputs[0].shape) if op._inputs else 1
        elif op_type == "AddN":
            work = sum(_num_elements(t.shape) for t in op._inputs)
        else:
            work = max([_num_elements(t.shape) for t in op._outputs] or [1])
        return BASE_MICROS + -(-work // per_elem)

    def __repr__(self):
        return "CostModel(overrides=%r)" % (self.overrides,)


def _dims2(shape, transposed):
    """(rows, cols) of a matmul operand as the product sees it; unknown dims count as 1."""
    if shape.ndims != 2:
        return 1, 1
    r, c = (1 if d is None else d for d in shape.as_list())
    return (c, r) if transposed else (r, c)


def split_count(op, intra_threads):
    """Into how many chunks the (splittable) kernel of ``op`` cuts its work on a device with
    ``intra_threads`` intra-op threads; 0 when it runs in one piece.

    The kernels decide from the actual operands; the simulator from the static shapes, so an
    op with an unknown dimension never splits here.
    """
    if op is None or intra_threads < 1:
        return 0
    ins = op._inputs
    if op.type == "MatMul":
        a, b = ins[0].shape, ins[1].shape
        if not (a.is_fully_defined() and b.is_fully_defined()) or a.ndims != 2:
            return 0
        m, k = _dims2(a, op.get_attr("transpose_a"))
        _, n = _dims2(b, op.get_attr("transpose_b"))
        if m * k * n < SPLIT_FLOPS or m < 2:
            return 0
        return min(intra_threads, m)
    if len(ins) == 2 and ins[0].shape.is_fully_defined() and ins[1].shape.is_fully_defined() \
            and ins[0].shape.as_list() == ins[1].shape.as_list():
        n = ins[0].shape.num_elements()
        if n >= SPLIT_ELEMENTS:
            return min(intra_threads, n)
    return 0


def _tensor_output(slot, dtype, shape):
    """TensorOutput of a static (dtype, shape): bytes = elements x dtype size, 0 if unknown."""
    base = dtype.base_dtype
    n = shape.num_elements()
    dims = None if shape.ndims is None else tuple(shape.as_list())
    return TensorOutput(slot, base.name, dims, 0 if n is None else n * base.size)


# -- the simulation --------------------------------------------------------------------------

Event = namedtuple("Event", ["kind", "time", "node", "device", "thread"])
Event.__doc__ = """One step of a simulation: ``kind`` is ``"start"`` or ``"end"``, ``time`` the
virtual microsecond, ``node`` the node name, ``device`` its full device name, ``thread`` the name
of the thread running it."""


class _Thread:
    __slots__ = ("tid", "name", "device", "kind", "busy", "stack", "free_at")

    def __init__(self, tid, name, device, kind):
        self.tid, self.name, self.device, self.kind = tid, name, device, kind
        self.busy = None     # node index running now
        self.stack = []      # cheap nodes made ready by this thread, waiting to run inline
        self.free_at = 0     # intra-op threads: when their last reserved chunk ends


def _thread_count(value, what):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError("%s must be an int >= 0 (0: one per core), got %r" % (what, value))
    value = int(value)
    if value < 0:
        raise ValueError("%s must be >= 0 (0: one per core), got %d" % (what, value))
    return value or os.cpu_count() or 1


class Simulation:
    """One ``session.run(fetches, feed_dict)`` step replayed on a virtual clock.

    The plan is exactly the one a real run executes (``session.plan``: same pruning,
    placement, feed nodes, and expensive/splittable flags); no kernel is ever called, so
    fetching a 10 000 x 10 000 matmul costs nothing.  ``inter_op_threads`` and
    ``intra_op_threads`` default to the session's ``ConfigProto`` (0: ``os.cpu_count()``).

    Use :meth:`run` for the whole record, or :meth:`next_event` to advance one node start or
    end at a time and look at :meth:`ready_queues`, :meth:`pending_counts` and :meth:`running`
    in between.
    """

    def __init__(self, session, fetches, feed_dict=None, cost_model=None,
                 inter_op_threads=None, intra_op_threads=None):
        if cost_model is None:
            cost_model = CostModel()
        elif not isinstance(cost_model, CostModel):
            raise TypeError("cost_model must be a CostModel, got %s" % type(cost_model).__name__)
        self.eplan = session.plan(fetches, feed_dict)
        config = self.eplan.config
        if inter_op_threads is None:
            inter_op_threads = config.inter_op_parallelism_threads
        if intra_op_threads is None:
            intra_op_threads = config.intra_op_parallelism_threads
        self.inter_op_threads = _thread_count(inter_op_threads, "inter_op_threads")
        self.intra_op_threads = _thread_count(intra_op_threads, "intra_op_threads")
        self.cost_model = cost_model
        self.session = session
        eplan = self.eplan
        plan = self.plan = eplan.plan
        names = eplan.names
        # the fed tensors, in the order of their feed nodes
        feed_tensors = eplan.feed_tensors
        n_ops = plan.n - len(feed_tensors)

        # devices: the session's order, restricted to those this plan uses
        used = set(plan.device)
        self.devices = [d for d in eplan.session_devices if d in used]
        self.devices += sorted(used.difference(self.devices))

        # static facts per node: op type, duration, outputs, label
        self._op_type, self._cost, self._outputs, self._label = [], [], [], []
        for i in range(plan.n):
            op = eplan.ops[i]
            dev_type = _device_type(plan.device[i])
            self._cost.append(cost_model.micros(op, dev_type, names[i]))
            if op is None:
                t = feed_tensors[i - n_ops]
                self._op_type.append("_Arg")
                self._outputs.append([_tensor_output(0, t.dtype, t.shape)])
                self._label.append(timeline_label(None, names[i]))
            else:
                self._op_type.append(op.type)
                self._outputs.append([_tensor_output(k, t.dtype, t.shape)
                                      for k, t in enumerate(op._outputs)])
                self._label.append(timeline_label(op))

        # cross-device data edges: one record per edge, as the real tracer does
        self.transfers = []
        for dst in range(plan.n):
            for src, k in plan.inputs[dst]:
                if plan.device[src] == plan.device[dst]:
                    continue
                nbytes = self._outputs[src][k].requested_bytes
                micros = TRANSFER_LATENCY_MICROS + -(-nbytes // TRANSFER_BYTES_PER_MICRO)
                self.transfers.append(TransferStats("%s:%d" % (names[src], k), names[src],
                                                    names[dst], plan.device[src],
                                                    plan.device[dst], nbytes, micros))

        # the threads: the caller (id 0), then per session device its inter-op then intra-op
        # pool, ids numbered in that order so they never depend on the plan
        self._caller = _Thread(0, "caller", None, "caller")
        self._inter, self._intra = {}, {}
        tid = 1
        for d in eplan.session_devices + self.devices:
            if d in self._inter:
                continue
            short = short_device(d)
            self._inter[d] = [_Thread(tid + k, "%s inter-op #%d" % (short, k), d, "inter_op")
                              for k in range(self.inter_op_threads)]
            tid += self.inter_op_threads
            self._intra[d] = [_Thread(tid + k, "%s intra-op #%d" % (short, k), d, "intra_op")
                              for k in range(self.intra_op_threads)]
            tid += self.intra_op_threads
        self._all_threads = [self._caller] + [t for d in self._inter for t in self._inter[d]]
        self.reset()

    # -- state ---------------------------------------------------------------------------------
    def reset(self):
        """Goes back to before the step's first event."""
        for t in self._all_threads:
            t.busy, t.stack, t.free_at = None, [], 0
        for ts in self._intra.values():
            for t in ts:
                t.busy, t.stack, t.free_at = None, [], 0
        self.time = 0
        self._step = Step(self.plan)
        for d in self.devices:                # every device of the plan has a (maybe empty)
            self._step.ready.setdefault(d, deque())  # ready queue from the start
        self._ends = []                       # heap of (end time, node index)
        self._ready_at = [None] * self.plan.n
        self._thread_of = [None] * self.plan.n
        self._stats = [None] * self.plan.n
        self._start_order = []
        self._chunks = []                     # (start, end, thread, node) of intra-op chunks
        self.events = []
        self._record = None
        self._route(self.plan.roots, self._caller)  # the caller makes the sources ready

    def _route(self, nodes, thread):
        """Where nodes made ready by ``thread`` go: cheap ones of the thread's device (any
        device for the caller) onto its inline stack, the others into their device's ready
        queue (the scheduler's FIFO, ``Step.enqueue``)."""
        expensive, device = self.eplan.expensive, self.plan.device
        for j in nodes:
            self._ready_at[j] = self.time
            if not expensive[j] and (thread.device is None or device[j] == thread.device):
                thread.stack.append(j)
            else:
                self._step.enqueue(j)

    @property
    def done(self):
        """True once every node of the step has ended."""
        return self._step.done

    def ready_queues(self):
        """``{device: [node names]}``: the nodes waiting for an inter-op thread of their
        device, first in line first (every device of the plan, empty lists included)."""
        names, ready = self.eplan.names, self._step.ready
        return {d: [names[i] for i in ready.get(d, ())] for d in self.devices}

    def inline_pending(self):
        """``{thread name: [node names]}``: cheap nodes that are ready and will run inline on
        that thread once it finishes what it runs now (next one first)."""
        names = self.eplan.names
        return {t.name: [names[i] for i in reversed(t.stack)]
                for t in self._all_threads if t.stack}

    def pending_counts(self):
        """``{node name: inputs still awaited}`` for the nodes not ready yet (data and control
        edges both count, as in the scheduler)."""
        names = self.eplan.names
        return {names[i]: c for i, c in enumerate(self._step.pending) if c > 0}

    def running(self):
        """``{thread name: node name}`` of every thread busy at the current time, intra-op
        threads running a chunk included."""
        names = self.eplan.names
        out = {t.name: names[t.busy] for t in self._all_threads if t.busy is not None}
        for start, end, thread, node in self._chunks:
            if start <= self.time < end:
                out[thread.name] = names[node]
        return out

    # -- the event loop ------------------------------------------------------------------------
    def next_event(self):
        """Advances to the next node start or end and returns it as an :class:`Event`
        (``None`` once :attr:`done`)."""
        if self.done:
            return None
        if self._ends and self._ends[0][0] == self.time:
            return self._end(*heapq.heappop(self._ends))
        start = self._next_start()
        if start is not None:
            return self._start(*start)
        if not self._ends:  # cannot happen with a plan built by the executor
            raise RuntimeError("simulation stalled: no node can start and none is running")
        return self._end(*heapq.heappop(self._ends))

    def __iter__(self):
        """Iterating a simulation yields its remaining events."""
        while True:
            ev = self.next_event()
            if ev is None:
                return
            yield ev

    def run(self):
        """Runs the simulation to the end and returns its ``StepStats``."""
        while self.next_event() is not None:
            pass
        if self._record is None:
            self._record = self._build_record()
        return self._record

    def _next_start(self):
        """(thread, node) of the next node to start at the current time, or None."""
        for t in self._all_threads:              # inline continuations, by thread id
            if t.busy is None and t.stack:
                return t, t.stack.pop()
        for d in self.devices:                   # ready queues, by session device order
            if self._step.ready[d]:
                for t in self._inter[d]:         # lowest-numbered free thread
                    if t.busy is None and not t.stack:
                        return t, self._step.pop_ready(d)
        return None

    def _start(self, thread, i):
        now = self.time
        cost = self._cost[i]
        end = now + cost
        chunks = []
        k = 0
        if thread.device is not None and self.eplan.splittable[i]:
            k = split_count(self.eplan.ops[i], self.intra_op_threads)
        if k:
            share = -(-cost // k) + CHUNK_OVERHEAD_MICROS
            chunks.append(ChunkStats(0, thread.tid, thread.name, now, now + share))
            intra = self._intra[self.plan.device[i]]
            for c in range(1, k):
                t = min(intra, key=lambda x: (max(x.free_at, now), x.tid))
                s = max(t.free_at, now)
                t.free_at = s + share
                chunks.append(ChunkStats(c, t.tid, t.name, s, s + share))
                self._chunks.append((s, s + share, t, i))
            end = max(ch.end_micros for ch in chunks)
        thread.busy = i
        self._thread_of[i] = thread
        self._stats[i] = NodeExecStats(
            self.eplan.names[i], self._op_type[i], now, end - now, thread.tid, thread.name,
            "inline" if thread.device is None else "inter_op", self._label[i],
            scheduled_micros=self._ready_at[i], output=self._outputs[i], chunks=chunks)
        self._start_order.append(i)
        heapq.heappush(self._ends, (end, i))
        return self._event("start", i, thread)

    def _end(self, time, i):
        self.time = time
        thread = self._thread_of[i]
        thread.busy = None
        self._route(self._step.finish(i, enqueue=False), thread)
        return self._event("end", i, thread)

    def _event(self, kind, i, thread):
        ev = Event(kind, self.time, self.eplan.names[i], self.plan.device[i], thread.name)
        self.events.append(ev)
        return ev

    def _build_record(self):
        by_device = {d: [] for d in self.devices}
        for i in self._start_order:
            by_device[self.plan.device[i]].append(self._stats[i])
        stats = StepStats()
        for d in self.devices:
            stats.dev_stats.append(DeviceStepStats(d, by_device[d]))
        for tr in self.transfers:
            stats.transfers.append(tr)
        return stats

    def __repr__(self):
        return "Simulation(%d nodes on %s, t=%d us%s)" % (
            self.plan.n, ", ".join(short_device(d) for d in self.devices), self.time,
            ", done" if self.done else "")


def simulate(session, fetches, feed_dict=None, cost_model=None, inter_op_threads=None,
             intra_op_threads=None):
    """``Simulation(...).run()``: the ``StepStats`` of one simulated ``session.run``."""
    return Simulation(session, fetches, feed_dict, cost_model, inter_op_threads,
                      intra_op_threads).run()


# -- Figure 12-5 -----------------------------------------------------------------------------

def figure_12_5(graph=None):
    """Builds the graph of the book's Figure 12-5 and returns ``{name: Tensor}`` for A to E.

    In the figure, A, B and C are source ops: A and B are placed on GPU #0 and go to its
    inter-op pool, where they run in parallel; A has a multithreaded kernel whose work the
    intra-op pool splits; C goes to GPU #1's inter-op pool.  When C finishes, the dependency
    counters of D and E (on GPU #1) drop to zero and both go to GPU #1's inter-op pool.

    Real ops need operands, so here the true sources are large constants (``A_x``, ``A_w``,
    ``B_x``, ``C_x``; big enough to be expensive, so they too go to the pools), and:

    * ``A = tf.matmul(A_x, A_w)``, 512 x 512 x 512: large enough for the kernel to split;
    * ``B = tf.square(B_x)`` and ``C = tf.square(C_x)`` on 1024 x 1024 tensors: expensive
      (more than ``executor.INLINE_ELEMENTS`` outputs) but not splittable;
    * ``D = tf.square(C)`` and ``E = tf.negative(C)``: one input each, so C finishing is what
      makes them ready.

    The simulator never runs kernels, so the sizes cost nothing.  Needs two GPUs
    (``tf.config.emulate_gpus(2)``).  Simulate it with
    ``Simulation(sess, list(fig.values()), inter_op_threads=2, intra_op_threads=3)``.
    """
    from minitf.framework import graph as ops_graph
    from minitf.ops import array_ops, math_ops

    g = graph if graph is not None else ops_graph.get_default_graph()
    with g.as_default():
        with g.device("/gpu:0"):
            a = math_ops.matmul(array_ops.ones([512, 512], name="A_x"),
                                array_ops.ones([512, 512], name="A_w"), name="A")
            b = math_ops.square(array_ops.ones([1024, 1024], name="B_x"), name="B")
        with g.device("/gpu:1"):
            c = math_ops.square(array_ops.ones([1024, 1024], name="C_x"), name="C")
            d = math_ops.square(c, name="D")
            e = math_ops.negative(c, name="E")
    return {"A": a, "B": b, "C": c, "D": d, "E": e}
