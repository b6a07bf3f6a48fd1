"""The scheduler on a virtual clock: deterministic timelines of one ``sess.run``.

Book section: "Parallel Execution" (Figure 12-5).  A real run's timeline depends on the
machine, the operating system's thread scheduler and luck.  This module replays the *same*
plan with the same dependency counting (:class:`~minitf.runtime.scheduler.Step`) and routing
rule (:func:`~minitf.runtime.scheduler.schedule_ready`) as the executor, over the same thread
pools, but every node takes a fixed number of *virtual* microseconds given by a
:class:`~minitf.runtime.cost_model.CostModel`.  The result is the record a traced real run
produces (a ``StepStats`` with one ``DeviceStepStats`` per device), identical on every machine,
so notebook figures and tests can rely on it.  :class:`Simulation` can also be advanced one event
at a time, which is what the step-through widget shows: which nodes wait in which ready queue,
how many inputs each blocked node still waits for, and which thread runs what.

The rules are those of the executor (``step_run.py``), with the pools of ``pools.py``:

* the thread that called ``run()`` is ``"caller"``; it makes the source nodes ready;
* ``gpu_thread_mode="global"`` (TF's default): one shared inter-op pool of
  ``inter_op_threads`` threads (``"inter-op #0"`` ...) runs the ops of every device, and one
  intra-op pool of ``intra_op_threads`` threads (``"intra-op #0"`` ...) runs the chunks of split
  CPU kernels; GPU kernels are not split;
* ``gpu_thread_mode="gpu_private"`` (``TF_GPU_THREAD_MODE``, the book's Figure 12-5): each GPU
  also has ``gpu_thread_count`` inter-op threads of its own (``"GPU:0 inter-op #0"`` ...) that
  run only its ops, and an intra-op pool of its own (``"GPU:0 intra-op #0"`` ...) its kernels
  split over;
* a ready node that is not *expensive* runs *inline*, right after the node that made it ready,
  on that node's thread (a stack per thread: last pushed first); every other ready node waits in
  its pool's ready queue (first in, first out) until one of the pool's threads is free (the
  lowest-numbered one takes it), except that a pool thread left with nothing else to run keeps
  the last expensive node of its own pool for itself (TF's executor: no hand-over where there
  is no parallelism to gain); a step without expensive nodes runs entirely on the caller;
* a ``_Recv`` is asynchronous: issuing it takes no thread time; it ends when its ``_Send`` has
  ended and the tensor has crossed (``cost_model.transfer_micros``), and the nodes it makes ready
  go to their pools' queues (to the caller, in a step without pools), never inline;
* a *splittable* kernel running on a pool thread, on a device with an intra-op pool, splits its
  work as the real kernel would (``cost_model.split_count``) into equal chunks: chunk 0 on the
  node's own thread, the others on the intra-op pool's threads (lowest-numbered free one first,
  queueing behind chunks of other nodes).  Each chunk takes ``ceil(cost / chunks)`` plus
  ``CHUNK_OVERHEAD_MICROS``; the node ends when its last chunk ends;
* simultaneous happenings are ordered deterministically: all ends at time ``t`` (by node index)
  before any start at ``t``; inline continuations (by thread id) before queue dispatches (shared
  queue first, then each GPU's, in session device order).

A node's ``pool`` in the record is ``"inline"`` when it ran on the caller's thread and
``"inter_op"`` when it ran on a pool thread (as the real tracer records it).  Not modelled: the
hand-off latency between threads, memory, and dead nodes (with no values to test, both branches
of a ``tf.cond`` run).

Pool sizes default to the session's ``ConfigProto`` (``0`` means one per schedulable core, as in
TF) and the thread mode to ``TF_GPU_THREAD_MODE``.  For figures that must look the same on every
machine, pass ``inter_op_threads`` and ``intra_op_threads`` explicitly.
"""

import heapq
import numbers
from collections import deque, namedtuple

from minitf.kernels.sendrecv_kernels import edge_key, producer_of
from minitf.runtime import pools
from minitf.runtime.config_proto import StepStats
from minitf.runtime.cost_model import (
    CHUNK_OVERHEAD_MICROS,
    CostModel,
    device_type,
    output_bytes,
    split_count,
    transfer_micros,
)
from minitf.runtime.scheduler import Step, schedule_ready
from minitf.runtime.step_stats import (
    ChunkStats,
    DeviceStepStats,
    NodeExecStats,
    TensorOutput,
    TransferStats,
    timeline_label,
)

Event = namedtuple("Event", ["kind", "time", "node", "device", "thread"])
Event.__doc__ = """One step of a simulation: ``kind`` is ``"start"`` or ``"end"``, ``time`` the
virtual microsecond, ``node`` the node name, ``device`` its full device name, ``thread`` the name
of the thread running it."""


class _Thread:
    __slots__ = ("tid", "name", "queue", "busy", "stack", "free_at")

    def __init__(self, tid, name, queue):
        self.tid, self.name, self.queue = tid, name, queue  # queue: None for the caller
        self.busy = None  # node index running now
        self.stack = []  # nodes made ready by this thread, waiting to run inline
        self.free_at = 0  # intra-op threads: when their last reserved chunk ends


def _thread_count(value, what, minimum=0):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(
            "%s must be an int >= %d (0: one per core), got %r" % (what, minimum, value)
        )
    value = int(value)
    if value < minimum:
        raise ValueError("%s must be >= %d (0: one per core), got %d" % (what, minimum, value))
    return value or pools.schedulable_cores()


def _tensor_outputs(node):
    """TensorOutputs of a node's static outputs: bytes = elements x dtype size, 0 if unknown."""
    out = []
    for k, (dtype, shape) in enumerate(node.outputs):
        dims = None if shape.ndims is None else tuple(shape.as_list())
        out.append(TensorOutput(k, dtype.base_dtype.name, dims, output_bytes(node, k)))
    return out


class _Pools:
    """The simulated threads of a step: the caller, the shared pools, each private GPU's."""

    def __init__(self, devices, inter, intra, mode, gpu_threads):
        self.caller = _Thread(0, "caller", None)
        self.mode = mode
        self.inter, self.intra = {}, {}  # queue key -> [threads]
        tid = 1
        queues = [pools.SHARED] + [
            pools.queue_key(d, mode) for d in devices if pools.is_private(d, mode)
        ]
        for q in queues:
            shared = q == pools.SHARED
            prefix = "" if shared else q + " "
            n = inter if shared else gpu_threads
            self.inter[q] = [_Thread(tid + k, "%sinter-op #%d" % (prefix, k), q) for k in range(n)]
            tid += n
            self.intra[q] = [
                _Thread(tid + k, "%sintra-op #%d" % (prefix, k), q) for k in range(intra)
            ]
            tid += intra
        self.queues = queues
        self.all = [self.caller] + [t for q in queues for t in self.inter[q]]

    def intra_for(self, device_name):
        """The intra-op threads a node of that device splits over (None: no split)."""
        key = pools.intra_key(device_name, self.mode)
        return None if key is None else self.intra[key]

    def reset(self):
        for t in self.all + [t for ts in self.intra.values() for t in ts]:
            t.busy, t.stack, t.free_at = None, [], 0


class Simulation:
    """One ``session.run(fetches, feed_dict)`` step replayed on a virtual clock.

    The plan is exactly the one a real run executes (``session.plan``: same pruning,
    placement, partitions with their ``_Send``/``_Recv`` pairs, feed nodes, and
    expensive/splittable/asynchronous flags); no kernel is ever called, so fetching a 10 000 x
    10 000 matmul costs nothing.  ``inter_op_threads`` and ``intra_op_threads`` default to the
    session's ``ConfigProto`` (0: one per schedulable core), ``gpu_thread_mode`` and
    ``gpu_thread_count`` to ``TF_GPU_THREAD_MODE`` and ``TF_GPU_THREAD_COUNT``.

    Use :meth:`run` for the whole record, or :meth:`next_event` to advance one node start or
    end at a time and look at :meth:`ready_queues`, :meth:`pending_counts`, :meth:`running` and
    :meth:`waiting` in between.
    """

    def __init__(
        self,
        session,
        fetches,
        feed_dict=None,
        cost_model=None,
        inter_op_threads=None,
        intra_op_threads=None,
        gpu_thread_mode=None,
        gpu_thread_count=None,
    ):
        if cost_model is None:
            cost_model = CostModel()
        elif not isinstance(cost_model, CostModel):
            raise TypeError("cost_model must be a CostModel, got %s" % type(cost_model).__name__)
        self.eplan = session.plan(fetches, feed_dict)
        config = self.eplan.config
        if inter_op_threads is None:  # (a session running steps in its caller: one thread)
            caller = pools.runs_in_caller_thread(config)
            inter_op_threads = 1 if caller else config.inter_op_parallelism_threads
        if intra_op_threads is None:
            intra_op_threads = config.intra_op_parallelism_threads
        self.inter_op_threads = _thread_count(inter_op_threads, "inter_op_threads")
        self.intra_op_threads = _thread_count(intra_op_threads, "intra_op_threads")
        mode = gpu_thread_mode or pools.gpu_thread_mode()
        if mode not in ("global", "gpu_private"):
            raise ValueError("gpu_thread_mode must be 'global' or 'gpu_private', got %r" % mode)
        self.gpu_thread_mode = mode
        self.gpu_thread_count = _thread_count(
            gpu_thread_count or pools.gpu_thread_count(), "gpu_thread_count", 1
        )
        self.cost_model = cost_model
        self.session = session
        self.plan = self.eplan.plan
        used = set(self.plan.device)
        self.devices = [d for d in self.eplan.session_devices if d in used]
        self.devices += sorted(used.difference(self.devices))
        self._static_facts()
        self._pools = _Pools(
            self.eplan.session_devices + self.devices,
            self.inter_op_threads,
            self.intra_op_threads,
            mode,
            self.gpu_thread_count,
        )
        self._serial = not self.eplan.any_expensive  # the real step runs on the caller alone
        self.reset()

    def _static_facts(self):
        """Per node: duration, outputs, label, ready queue; each _Recv's _Send and bytes."""
        ep = self.eplan
        self._cost = [self.cost_model.micros(n, device_type(n.device)) for n in ep.nodes]
        self._outputs = [_tensor_outputs(n) for n in ep.nodes]
        self._label = [timeline_label(n) for n in ep.nodes]
        self._queue = [pools.queue_key(d, self.gpu_thread_mode) for d in self.plan.device]
        sends = {edge_key(n): i for i, n in enumerate(ep.nodes) if n.type == "_Send"}
        self._send_of = {
            i: sends[edge_key(n)]
            for i, n in enumerate(ep.nodes)
            if n.type == "_Recv" and edge_key(n) in sends
        }
        self._recv_of = {s: r for r, s in self._send_of.items()}

    # -- state ---------------------------------------------------------------------------------
    def reset(self):
        """Goes back to before the step's first event."""
        self._pools.reset()
        self.time = 0
        self._step = Step(self.plan)
        for q in self._pools.queues:  # every pool has a (maybe empty) ready queue
            self._step.ready.setdefault(q, deque())
        self._ends = []  # heap of (end time, node index)
        self._ready_at = [None] * self.plan.n
        self._thread_of = [None] * self.plan.n
        self._stats = [None] * self.plan.n
        self._send_end = {}  # _Send index -> its end time
        self._waiting = set()  # _Recv indices issued, their _Send not done yet
        self._issued = {}  # _Recv index -> when it was issued
        self._start_order = []
        self._chunks = []  # (start, end, thread, node) of intra-op chunks
        self.transfers = []
        self.events = []
        self._record = None
        self._route(self.plan.roots, self._pools.caller, False)  # the caller readies sources

    def _route(self, nodes, thread, after_async):
        """Where nodes made ready on ``thread`` go: inline ones onto its stack (the caller's
        in a step without pools), the others into their pool's ready queue."""
        for j in nodes:
            self._ready_at[j] = self.time
        if self._serial:
            self._pools.caller.stack.extend(nodes)
            return
        here, queued = schedule_ready(
            nodes,
            self.eplan.expensive,
            after_async,
            thread.queue,
            self._queue.__getitem__,
            not thread.stack,
        )
        thread.stack.extend(here)
        for j in queued:
            self._step.enqueue(j, self._queue[j])

    @property
    def done(self):
        """True once every node of the step has ended."""
        return self._step.done

    def ready_queues(self):
        """``{queue: [node names]}``: the nodes waiting for a thread of each pool
        (``"inter-op"``, or a GPU's own in gpu_private mode), first in line first."""
        names, ready = self.eplan.names, self._step.ready
        return {q: [names[i] for i in ready.get(q, ())] for q in self._pools.queues}

    def inline_pending(self):
        """``{thread name: [node names]}``: nodes that are ready and will run inline on that
        thread once it finishes what it runs now (next one first)."""
        names = self.eplan.names
        return {t.name: [names[i] for i in reversed(t.stack)] for t in self._pools.all if t.stack}

    def pending_counts(self):
        """``{node name: inputs still awaited}`` for the nodes not ready yet (data and control
        edges both count, as in the scheduler)."""
        names = self.eplan.names
        return {names[i]: c for i, c in enumerate(self._step.pending) if c > 0}

    def running(self):
        """``{thread name: node name}`` of every thread busy at the current time, intra-op
        threads running a chunk included."""
        names = self.eplan.names
        out = {t.name: names[t.busy] for t in self._pools.all if t.busy is not None}
        for start, end, thread, node in self._chunks:
            if start <= self.time < end:
                out[thread.name] = names[node]
        return out

    def waiting(self):
        """Names of the ``_Recv`` nodes issued and waiting for their tensor (no thread)."""
        names = self.eplan.names
        return sorted(names[i] for i in self._waiting)

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
        for t in self._pools.all:  # inline continuations, by thread id
            if t.busy is None and t.stack:
                return t, t.stack.pop()
        for q in self._pools.queues:  # ready queues: shared first, then each GPU's
            if self._step.ready[q]:
                for t in self._pools.inter[q]:  # lowest-numbered free thread
                    if t.busy is None and not t.stack:
                        return t, self._step.pop_ready(q)
        return None

    def _chunks_of(self, thread, i, cost):
        """The chunks of node ``i`` if it splits on ``thread`` (else [])."""
        if thread.queue is None or not self.eplan.splittable[i]:
            return []
        intra = self._pools.intra_for(self.plan.device[i])
        k = split_count(self.eplan.nodes[i], len(intra)) if intra else 0
        if not k:
            return []
        now = self.time
        share = -(-cost // k) + CHUNK_OVERHEAD_MICROS
        chunks = [ChunkStats(0, thread.tid, thread.name, now, now + share)]
        for c in range(1, k):
            t = min(intra, key=lambda x: (max(x.free_at, now), x.tid))
            s = max(t.free_at, now)
            t.free_at = s + share
            chunks.append(ChunkStats(c, t.tid, t.name, s, s + share))
            self._chunks.append((s, s + share, t, i))
        return chunks

    def _start(self, thread, i):
        now = self.time
        self._thread_of[i] = thread
        self._start_order.append(i)
        if self.eplan.is_async[i]:
            self._issued[i] = now
            self._issue(i)
            return self._event("start", i, thread)
        cost = self._cost[i]
        chunks = self._chunks_of(thread, i, cost)
        end = max(ch.end_micros for ch in chunks) if chunks else now + cost
        thread.busy = i
        self._stats[i] = self._node_stats(i, thread, now, end, chunks)
        heapq.heappush(self._ends, (end, i))
        return self._event("start", i, thread)

    def _node_stats(self, i, thread, start, end, chunks=()):
        return NodeExecStats(
            self.eplan.names[i],
            self.eplan.nodes[i].type,
            start,
            end - start,
            thread.tid,
            thread.name,
            "inline" if thread.queue is None else "inter_op",
            self._label[i],
            scheduled_micros=self._ready_at[i],
            output=self._outputs[i],
            chunks=chunks,
        )

    def _issue(self, recv):
        """A _Recv is issued: it ends once its _Send has ended and the tensor has crossed."""
        send = self._send_of.get(recv)
        if send is not None and send not in self._send_end:
            self._waiting.add(recv)
        else:
            self._arrive(recv, self._send_end.get(send, self.time))

    def _arrive(self, recv, sent):
        start = max(sent, self.time)
        nbytes = output_bytes(self.eplan.nodes[recv], 0)
        end = start + transfer_micros(nbytes)
        node = self.eplan.nodes[recv]
        tensor_name = node.get_attr("tensor_name")
        self.transfers.append(
            TransferStats(
                tensor_name,
                producer_of(tensor_name),
                node.name,
                node.get_attr("send_device"),
                node.device,
                nbytes,
                end - start,
                start,
            )
        )
        heapq.heappush(self._ends, (end, recv))

    def _end(self, time, i):
        self.time = time
        thread = self._thread_of[i]
        if self.eplan.is_async[i]:
            self._stats[i] = self._node_stats(i, thread, self._issued[i], time)
            self._route(self._step.finish(i), thread, True)
            return self._event("end", i, thread)
        thread.busy = None
        recv = self._recv_of.get(i)
        if recv is not None:
            self._send_end[i] = time
            if recv in self._waiting:
                self._waiting.discard(recv)
                self._arrive(recv, time)
        self._route(self._step.finish(i), thread, False)
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
        stats.transfers.extend(self.transfers)
        return stats

    def __repr__(self):
        return "Simulation(%d nodes on %s, t=%d us%s)" % (
            self.plan.n,
            ", ".join(pools.short_device(d) for d in self.devices),
            self.time,
            ", done" if self.done else "",
        )


def simulate(
    session,
    fetches,
    feed_dict=None,
    cost_model=None,
    inter_op_threads=None,
    intra_op_threads=None,
    gpu_thread_mode=None,
    gpu_thread_count=None,
):
    """``Simulation(...).run()``: the ``StepStats`` of one simulated ``session.run``."""
    return Simulation(
        session,
        fetches,
        feed_dict,
        cost_model,
        inter_op_threads,
        intra_op_threads,
        gpu_thread_mode,
        gpu_thread_count,
    ).run()


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
            a = math_ops.matmul(
                array_ops.constant(1.0, shape=[512, 512], name="A_x"),
                array_ops.constant(1.0, shape=[512, 512], name="A_w"),
                name="A",
            )
            b = math_ops.square(array_ops.constant(1.0, shape=[1024, 1024], name="B_x"), name="B")
        with g.device("/gpu:1"):
            c = math_ops.square(array_ops.constant(1.0, shape=[1024, 1024], name="C_x"), name="C")
            d = math_ops.square(c, name="D")
            e = math_ops.negative(c, name="E")
    return {"A": a, "B": b, "C": c, "D": d, "E": e}
