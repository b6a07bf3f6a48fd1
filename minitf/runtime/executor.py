"""Running a step: the execution plan of a split step graph, and the drivers that run it.

Book sections: "Placing Operations on Devices" (a run only executes what its fetches need;
tensors cross devices through ``_Send``/``_Recv`` pairs) and "Parallel Execution" (the
dependency-counting :class:`~minitf.runtime.scheduler.Step`, inter-op and intra-op pools).

:func:`build` turns the partitions of one (fetches, targets, feeds) signature
(``graph_partition.py``) into an :class:`ExecutionPlan`: one kernel per node made for its device,
each node's input slots, and per node whether it is *expensive* (it waits for a pool thread
instead of running inline), *splittable* (its kernel may split its work over an intra-op pool)
and *asynchronous* (it completes through a callback: a ``_Recv``).  TF runs one executor per
partition; minitf runs the partitions of a step in one loop over one pending-count table, which
is the same schedule, since partitions only meet at their ``_Send``/``_Recv`` pairs, through the
step's rendezvous (where every device has one thread of its own, each partition runs as one
program on it: ``device_programs.py``).

:func:`run_serial` runs a plan of cheap synchronous nodes on the calling thread in a tight
loop (and any plan of synchronous nodes whose pools all have one thread); ``step_run.py`` runs
any other (``step_run.run_step`` chooses).
"""

from __future__ import annotations

import threading
import time
from itertools import chain

from minitf.framework import errors
from minitf.framework.dead_tensor import DEAD
from minitf.framework.resource_mgr import VariableRef
from minitf.kernels import registry
from minitf.ops.op_def import get_op_def
from minitf.runtime import graph_partition
from minitf.runtime.allocator import shape_string, type_string
from minitf.runtime.deadness import dead_aware, may_see_dead
from minitf.runtime.gc_pause import gc_paused
from minitf.runtime.graph_partition import Partitions
from minitf.runtime.kernel_stats import KernelStats, is_cpu_blas, needs_no_intra_pool
from minitf.runtime.placer import attach_node
from minitf.runtime.scheduler import HeadStart, Plan, serial_order
from minitf.runtime.step_stats import ChunkStats
from minitf.runtime.tensor_lifetime import Lifetimes, StepMemory, charge

INLINE_ELEMENTS = 1 << 15  # ops producing more elements than this go to the inter-op pool
# ops that compute nothing whatever their size (an input handed on, a variable's reference): as
# TF's IdentityOp and VariableOp, never expensive; a pool hop would cost more than they do
PASS_THROUGH = frozenset({"Identity", "VariableV2", "StopGradient", "PreventGradient"})


def is_expensive(node, kdef) -> bool:
    """TF's cost estimate, simplified: a kernel declared expensive (MatMul), or any node whose
    static inputs or outputs have more than ``INLINE_ELEMENTS`` elements, waits for a thread of
    its pool; everything else runs inline on the thread that made it ready, and so does a
    kernel declared ``"inline"`` whatever its size (``_Send``, ``_Recv``, ``_Arg``: they only
    hand a tensor over) and a ``PASS_THROUGH`` op."""
    if kdef.cost != "cheap":
        return kdef.cost == "expensive"
    if node.type in PASS_THROUGH:
        return False
    for _, shape in node.outputs:
        n = shape.num_elements()
        if n is not None and n > INLINE_ELEMENTS:
            return True
    for src, k in node.inputs:
        n = src.outputs[k][1].num_elements()
        if n is not None and n > INLINE_ELEMENTS:
            return True
    return False


class KernelCache:
    """The kernels of a session (or of a worker's registered partition), keyed by (node name,
    device name): made once, reused by every plan (TF keeps a session's kernels in its
    OpSegment, by node name).  A kernel holds state of its own (a constant uploaded to a card, a
    random generator), so a signature's plan must not make a second one."""

    def __init__(self):
        self._store = {}
        self._charged = {}  # (name, device name) -> [(allocator, token)] of persistent outputs

    def get(self, name, device_name):
        return self._store.get((name, device_name))

    def put(self, name, device_name, kernel):
        self._store[(name, device_name)] = kernel

    def charge_once(self, name, device_name, allocator, outs):
        """Charges a persistent kernel's outputs (a constant on a card) to its device's
        allocator the first time it made them: they live as long as the kernel, as TF's
        constants do, not one step."""
        key = (name, device_name)
        if key in self._charged:
            return
        tokens = [charge(allocator, name, v) for v in outs]
        self._charged[key] = [(allocator, t) for t in tokens if t is not None]

    def clear(self):
        """The session closed: its kernels go, and what they held on its devices."""
        self._store.clear()
        for tokens in self._charged.values():
            for allocator, token in tokens:
                allocator.free(token)
        self._charged.clear()


class ExecutionPlan:
    """A plan plus its kernels: ``kernels[i]`` computes node ``i`` (``nodes[i]``, on
    ``node_devices[i]``); ``fetch_slots`` the (node, output) of each fetched tensor;
    ``lifetimes`` when each node's outputs die (``tensor_lifetime.Lifetimes``) and
    ``forwarding[i]`` the variant of node ``i``'s kernel that writes its result into input
    ``lifetimes.forward[i]`` (None where no input may be forwarded)."""

    def __init__(
        self, plan, nodes, kernels, node_devices, fetch_slots, flags, lifetimes, forwarding
    ):
        self.plan = plan
        self.nodes = nodes
        self.names = [n.name for n in nodes]
        self.kernels = kernels
        self.node_devices = node_devices
        self.fetch_slots = fetch_slots
        self.expensive, self.splittable, self.is_async = flags
        self.lifetimes = lifetimes
        self.forwarding = forwarding
        self.any_expensive = any(self.expensive)
        self.any_async = any(self.is_async)
        self.send_recv = []  # (_Send, _Recv) of one key, both in the step (set by build)
        self.device_programs = None  # made by device_programs.programs, on first use
        self._kernel_stats = None
        self.accounted = any(d.allocator is not None for d in node_devices)
        self.has_rendezvous = any(n.type in ("_Send", "_Recv") for n in nodes)
        self.devices = sorted(set(plan.device))
        self._program = None
        self._traced = None
        self._head_start = None
        self.fetch_owned = [False] * len(fetch_slots)
        # set by the session that made the plan, for the simulator
        self.session_devices = []
        self.config = None
        self.feed_tensors = []

    @property
    def kernel_stats(self) -> KernelStats:
        """What the plan's threaded runs learn of its expensive nodes, made on first use (a
        plan without expensive nodes never runs threaded, so never needs it)."""
        if self._kernel_stats is None:
            nodes, devices = self.nodes, self.node_devices
            self._kernel_stats = KernelStats(
                self.plan,
                self.expensive,
                [
                    needs_no_intra_pool(n.type, d.device_type, s)
                    for n, d, s in zip(nodes, devices, self.splittable)
                ],
                [is_cpu_blas(n.type, d.device_type) for n, d in zip(nodes, devices)],
            )
        return self._kernel_stats

    def device_of_node(self, i):
        return self.node_devices[i]

    def program(self):
        """The serial driver's program, made on first use: the values a run starts from (the
        outputs of persistent kernels without inputs, constants: computed here once) and, per
        other node in the one order it runs them, ``(node, kernel, input slots, nodes whose
        outputs die after it)``; the kernel is the forwarding variant where the node is the
        last reader of its forwarded input, and the kernel's plain function where it has one
        (``direct``, see ``_DIRECT``).  A record's dying nodes are one index when one dies
        (most records: no loop to run), else a tuple, or None."""
        if self._program is None:
            with gc_paused():  # thousands of records that live as long as the plan
                self._program = self._make_program()
        return self._program

    def _make_program(self):
        """Both programs in one pass over the serial order: the traced one (every node, each
        through its kernel) and the fast one (constants done, plain functions called as they
        are)."""
        plan, life = self.plan, self.lifetimes
        order = serial_order(plan)
        dead = life.deaths(order, plan.inputs)
        start = [None] * plan.n
        traced, records = [], []
        once = StepContext()  # what the constants' kernels see, the one time they run
        inputs, forward, persistent = plan.inputs, life.forward, life.persistent
        for i in order:
            kernel = self.kernels[i]
            p, d = forward[i], dead[i]
            if p >= 0 and d is not None and inputs[i][p][0] in d:
                kernel = self.forwarding[i]
            record = (i, kernel, _flat(inputs[i]), d[0] if d and len(d) == 1 else d)
            traced.append(record)
            if persistent[i] and not inputs[i] and not plan.pending0[i]:
                try:
                    start[i] = kernel(once, [])
                    continue
                except Exception:  # noqa: BLE001 - it fails again, reported, when run
                    pass
            direct = getattr(kernel, "direct", None)
            if direct is not None and len(record[2]) == 4:
                record = (i, direct, record[2] + _DIRECT, record[3])
            records.append(record)
        self._traced = traced
        return start, records

    def head_start(self):
        """The values and schedule a threaded step starts from: the program's constants done
        (``scheduler.HeadStart``), made on first use."""
        if self._head_start is None:
            start = self.program()[0]
            done = [i for i, v in enumerate(start) if v is not None]
            self._head_start = (start, HeadStart(self.plan, done))
        return self._head_start

    def traced_program(self):
        """The program's records with every node in it, each called through its kernel (a
        traced run records the constants too); made with ``program``."""
        self.program()
        return self._traced


# -- building ----------------------------------------------------------------------------------


def _deref_inputs(kernel, positions, is_async):
    """Wraps a kernel whose inputs at ``positions`` are variable references it must read."""
    if is_async:

        def compute_async(ctx, ins, done):
            for p in positions:
                if ins[p] is not DEAD:  # (a Merge's input from the branch not taken)
                    ins[p] = ins[p].read()
            return kernel(ctx, ins, done)

        return compute_async

    def compute(ctx, ins):
        for p in positions:
            if ins[p] is not DEAD:
                ins[p] = ins[p].read()
        return kernel(ctx, ins)

    return compute


def _accounted(kernel, allocator, i, name, is_async):
    """Wraps the kernel of node ``i`` on a device with a memory allocator: its outputs are
    charged there until they die (``tensor_lifetime.StepMemory``; variables account for their
    own storage)."""
    if is_async:

        def compute_async(ctx, ins, done):
            def accounted(outs, error=None):
                if error is None:
                    try:
                        ctx.memory.account(i, allocator, name, outs)
                    except Exception as e:  # noqa: BLE001 - out of memory: the node fails
                        outs, error = None, e
                done(outs, error)

            return kernel(ctx, ins, accounted)

        return compute_async

    def compute(ctx, ins):
        outs = kernel(ctx, ins)
        ctx.memory.account(i, allocator, name, outs)
        return outs

    return compute


def _charged_once(kernel, cache, name, device):
    """Wraps a persistent kernel on a device with an allocator: its outputs are charged there
    once, for the life of the kernel (``KernelCache.charge_once``)."""

    def compute(ctx, ins):
        outs = kernel(ctx, ins)
        cache.charge_once(name, device.name, device.allocator, outs)
        return outs

    return compute


def _wrap(kernel, node, i, device, kdef, cache):
    """``kernel`` reading the variable references it does not take as references, and
    accounting for its outputs on a device with an allocator (for the step, or once for a
    persistent kernel)."""
    refs = get_op_def(node.type).ref_inputs
    deref = [
        pos
        for pos, (src, k) in enumerate(node.inputs)
        if src.outputs[k][0].is_ref_dtype and not (pos < len(refs) and refs[pos])
    ]
    if deref:
        kernel = _deref_inputs(kernel, deref, kdef.is_async)
    if device.allocator is not None:
        if kdef.persistent:
            return _charged_once(kernel, cache, node.name, device)
        kernel = _accounted(kernel, device.allocator, i, node.name, kdef.is_async)
    return kernel


def _cached_kernel(node, device, kdef, cache):
    if node.op is not None and node.type != node.op.type:
        # rewritten for this signature (dependency_optimizer: a NoOp), stateless: not cached,
        # so that another signature still gets the op's own kernel
        return _new_kernel(node, device, kdef)
    kernel = cache.get(node.name, device.name)
    if kernel is None:
        kernel = _new_kernel(node, device, kdef)
        cache.put(node.name, device.name, kernel)
    return kernel


def _new_kernel(node, device, kdef):
    """``kdef``'s kernel for ``node``.  A kernel that refuses its node (TF's ``OpKernel``
    constructor failing: ``Cast float to string is not supported``) raises its error with the
    node named, as TF reports it."""
    try:
        return kdef.factory(node, device)
    except errors.OpError as exc:
        if "[[" in exc.message:
            raise
        op = node.op
        node_def = op.node_def if op is not None else None
        raise type(exc)(node_def, op, attach_node(exc.message, node.name)) from None


def _is_scalar(node):
    for _, shape in node.outputs:  # a loop: a 10,000-node plan asks 10,000 times
        if shape.ndims != 0:
            return False
    return True


def _send_recv_pairs(nodes):
    """(``_Send``, ``_Recv``) node index pairs of one key inside the plan (a local crossing)."""
    sends, pairs = {}, []
    for i, n in enumerate(nodes):
        if n.type == "_Send":
            sends[n.get_attr("tensor_name"), n.get_attr("recv_device")] = i
    for i, n in enumerate(nodes):
        if n.type == "_Recv":
            s = sends.get((n.get_attr("tensor_name"), n.get_attr("recv_device")))
            if s is not None:
                pairs.append((s, i))
    return pairs


def _plan_kernels(nodes, node_devices, kdefs, raw, lifetimes, kernel_cache):
    """Each node's kernel as a plan calls it (``_wrap``), and its forwarding variant (None
    where no input may take its result)."""
    kernels, forwarding = [], []
    for i, node in enumerate(nodes):
        device, kdef = node_devices[i], kdefs[i]
        kernels.append(_wrap(raw[i], node, i, device, kdef, kernel_cache))
        p = lifetimes.forward[i]
        forwarding.append(
            None if p < 0 else _wrap(raw[i].forwarding[p], node, i, device, kdef, kernel_cache)
        )
    return kernels, forwarding


def plan(
    step,
    devices: dict,
    kernel_cache: KernelCache,
    names: tuple[str, set],
    fetch_device: str | None = None,
) -> ExecutionPlan:
    """A step graph split by device (a ``_Send``/``_Recv`` pair on each edge that crosses, its
    nodes named by ``names``: a pattern and the names taken) and made an
    :class:`ExecutionPlan`: what a local session, a worker's graph and a function each run."""
    parts = graph_partition.partition(
        step,
        lambda n: n.device,
        graph_partition.namer(*names),
        lambda name: devices[name].incarnation,
        fetch_device=fetch_device,
    )
    return build(parts, devices, kernel_cache)


def build(parts: Partitions, devices: dict, kernel_cache: KernelCache) -> ExecutionPlan:
    """The :class:`ExecutionPlan` of a split step graph; ``devices`` maps a device name to its
    Device (each node's kernel is made for its device)."""
    nodes = [n for part in parts.parts.values() for n in part]
    index = {n: i for i, n in enumerate(nodes)}
    inputs, controls, kdefs, raw = [], [], [], []
    for node in nodes:
        device = devices[node.device]
        kdef = registry.find_kernel(node, device.device_type)
        if kdef is None:
            raise errors.InternalError(
                None,
                None,
                "No %s kernel for node %s (%s)" % (device.device_type, node.name, node.type),
            )
        inputs.append([(index[src], k) for src, k in node.inputs])
        controls.append([index[c] for c in node.control_inputs])
        kdefs.append(kdef)
        raw.append(_cached_kernel(node, device, kdef, kernel_cache))
    fetch_slots = [(index[n], k) for n, k in parts.fetches]
    fetched = [s for s, _ in fetch_slots]
    send_recv = _send_recv_pairs(nodes)
    lifetimes = Lifetimes(
        inputs,
        [k.allocates for k in kdefs],
        [k.forwards for k in kdefs],
        [_is_scalar(n) for n in nodes],
        fetched,
        [k.persistent for k in kdefs],
        send_recv,
        [n.type == "Identity" for n in nodes],
    )
    node_devices = [devices[n.device] for n in nodes]
    kernels, forwarding = _plan_kernels(nodes, node_devices, kdefs, raw, lifetimes, kernel_cache)
    if may_see_dead(nodes, {r for _, r in send_recv}):  # a tf.cond: skip the branch not taken
        for i, node in enumerate(nodes):
            is_async = kdefs[i].is_async
            kernels[i] = dead_aware(kernels[i], node, i, controls[i], is_async)
            if forwarding[i] is not None:
                forwarding[i] = dead_aware(forwarding[i], node, i, controls[i], is_async)
    eplan = ExecutionPlan(
        Plan(inputs, controls, [n.device for n in nodes]),
        nodes,
        kernels,
        node_devices,
        fetch_slots,
        (
            [is_expensive(n, k) for n, k in zip(nodes, kdefs)],
            [k.splittable for k in kdefs],
            [k.is_async for k in kdefs],
        ),
        lifetimes,
        forwarding,
    )
    # a fetched output the step alone holds (its kernel allocated it, fetched once) can be
    # handed to the caller without a copy
    eplan.fetch_owned = [kdefs[s].allocates and fetched.count(s) == 1 for s in fetched]
    eplan.send_recv = send_recv
    return eplan


def node_error(exc, eplan, i):
    """Re-raises a kernel failure as TF does: same class, the node named in ``[[...]]``."""
    node = eplan.nodes[i]
    if isinstance(exc, MemoryError):
        cls, msg = (
            errors.ResourceExhaustedError,
            _host_oom_message(node, eplan.node_devices[i]),
        )
    elif isinstance(exc, (ValueError, TypeError, ArithmeticError, IndexError)):
        cls, msg = errors.InvalidArgumentError, "%s: %s" % (type(exc).__name__, exc)
    else:
        exc = errors.as_op_error(exc)
        cls, msg = type(exc), exc.message
    if "[[" not in msg:
        msg = attach_node(msg, node.name)
    op = node.op
    err = cls(op.node_def if op is not None else None, op, msg)
    err.derived = getattr(exc, "derived", False)  # a failure caused by another task's stays so
    return err


def _host_oom_message(node, device):
    """TF's allocator text for a kernel whose output the host could not allocate."""
    what = "OOM when allocating tensor"
    if len(node.outputs) == 1:
        dtype, shape = node.outputs[0]
        what += " with %s and type %s" % (shape_string(shape), type_string(dtype))
    allocator = getattr(getattr(device, "allocator", None), "name", "cpu")
    return "%s on %s by allocator %s" % (what, node.device, allocator)


#: seconds: how late a KeyboardInterrupt, or the step's deadline, reaches a caller waiting for its
#: step (a Ctrl-C that the OS hands to another thread, gRPC's or BLAS's, only interrupts a
#: wait when it wakes up)
SIGNAL_SLICE = 0.2


def deadline_error():
    """The error of a step that ran past its deadline (TF's text)."""
    return errors.DeadlineExceededError(None, None, "Timed out waiting for notification")


def raise_node_error(exc, eplan, i):
    raise node_error(exc, eplan, i) from (None if isinstance(exc, errors.OpError) else exc)


def host_value(value, device):
    """A value as numpy: a variable read, an array on a CUDA card copied back."""
    if type(value) is VariableRef:
        value = value.read()
    return device.backend.to_host(value) if device is not None else value


# -- what kernels see ---------------------------------------------------------------------------


# guards every step's cancellation callbacks: registering and cancelling are rare and short,
# and a lock per step would cost every Session.run its making
_CANCEL_LOCK = threading.Lock()


class StepContext:
    """What a step's kernels may use (TF's OpKernelContext, the step's part): ``args`` (the
    values fed to ``_Arg`` nodes), ``rendezvous`` (``_Send``/``_Recv``), ``parallel_for`` (in
    one piece here; a kernel run by a pool thread with an intra-op pool gets a
    :class:`NodeContext` that splits for real), ``tracing`` and ``record_transfer``."""

    #: ``parallel_for`` runs its work in one piece: a kernel need not cut it into blocks
    one_piece = True

    __slots__ = (
        "args",
        "rendezvous",
        "tracer",
        "tracing",
        "memory",
        "dead",
        "_cancel_fns",
        "cancel_error",
    )

    def __init__(self, args=(), rendezvous=None, tracer=None):
        self.args = args
        self.rendezvous = rendezvous  # None: the step has no _Send/_Recv
        self.tracer = tracer
        self.tracing = tracer is not None
        self.memory = StepMemory()  # this step's tensors on devices with an allocator
        self.dead = set()  # nodes found dead this step (runtime/deadness.py: tf.cond)
        self._cancel_fns = None  # token -> fn(error): what start_cancel calls (made on use)
        self.cancel_error = None  # the error the step was cancelled with, once it was

    # -- cancellation (TF's CancellationManager) -----------------------------------------------
    def on_cancel(self, fn):
        """Registers ``fn(error)``, called once when the step is cancelled (a failure, a
        timeout, a closed session): an asynchronous kernel's way to stop waiting.  Returns a
        token for ``remove_on_cancel``; if the step was cancelled already, calls ``fn`` at once
        and returns None."""
        with _CANCEL_LOCK:
            error = self.cancel_error
            if error is None:
                token = object()
                if self._cancel_fns is None:
                    self._cancel_fns = {}
                self._cancel_fns[token] = fn
                return token
        fn(error)
        return None

    def remove_on_cancel(self, token):
        """Forgets a callback (its wait ended); a None token is ignored."""
        if token is not None:
            with _CANCEL_LOCK:
                if self._cancel_fns is not None:
                    self._cancel_fns.pop(token, None)

    def start_cancel(self, error):
        """Cancels the step's waits with ``error``: each registered callback runs once, on this
        thread; later calls do nothing.  Returns True for the first call."""
        with _CANCEL_LOCK:
            if self.cancel_error is not None:
                return False
            self.cancel_error = error
            fns = list(self._cancel_fns.values()) if self._cancel_fns else []
            self._cancel_fns = None
        for fn in fns:
            fn(error)
        return True

    def parallel_for(self, n, fn):
        fn(0, n)

    def record_transfer(
        self, tensor_name, src_node, dst_node, src_device, dst_device, nbytes, start
    ):
        self.tracer.transfer(
            tensor_name, src_node, dst_node, src_device, dst_device, nbytes, start, now_micros()
        )

    def free_memory(self):
        """The step ended: what it still holds on its devices is freed."""
        self.memory.release_all()


class NodeContext:
    """The context of one splittable kernel run by a pool thread: its chunks go to ``pool``
    (an intra-op pool) and, in a traced step, are recorded for the step stats."""

    one_piece = False
    __slots__ = ("_step", "_pool", "chunks")

    def __init__(self, step_ctx, pool):
        self._step = step_ctx
        self._pool = pool
        self.chunks = []

    def __getattr__(self, name):
        return getattr(self._step, name)

    def parallel_for(self, n, fn):
        self._pool.parallel_for(n, fn, self._record if self._step.tracing else None)

    def _record(self, index, ident, name, start, end):
        self.chunks.append(ChunkStats(index, ident, name, start, end))


def now_micros():
    return time.time_ns() // 1000


# -- the serial driver --------------------------------------------------------------------------


# marks the input slots of a record whose kernel is a plain function of its two input values,
# returning its one output (``compute.direct``: a binary op on scalars): called as it is
_DIRECT = (None,)


def _flat(inputs):
    """A node's (source, output) input slots as one flat tuple ``(s0, k0, s1, k1, ...)``: one
    object per record instead of one per input, for the loop below."""
    return tuple(chain.from_iterable(inputs))


def _gather(vals, src):
    return [vals[src[j]][src[j + 1]] for j in range(0, len(src), 2)]


def run_serial(eplan, ctx):
    """Runs a plan of synchronous nodes on the calling thread, in the order of its program
    (``ExecutionPlan.program``), dropping each value once its last reader has run; returns
    every node's outputs (None for the ones that died)."""
    if ctx.tracer is not None:
        return _run_traced(eplan, ctx)
    start, program = eplan.program()
    vals = list(start)
    memory = ctx.memory if eplan.accounted else None
    i = -1
    try:
        for i, kernel, src, dead in program:
            n = len(src)
            if n == 4:  # most ops, unrolled: a comprehension is a call of its own (3.11)
                s0, k0, s1, k1 = src
                vals[i] = kernel(ctx, [vals[s0][k0], vals[s1][k1]])
            elif n == 5:  # a direct kernel (_DIRECT)
                s0, k0, s1, k1, _ = src
                vals[i] = (kernel(vals[s0][k0], vals[s1][k1]),)
            elif n == 2:
                vals[i] = kernel(ctx, [vals[src[0]][src[1]]])
            else:
                vals[i] = kernel(ctx, _gather(vals, src))
            if dead is not None:
                if dead.__class__ is int:  # one value dies here (most records): no loop
                    vals[dead] = None
                else:
                    for s in dead:
                        vals[s] = None
                if memory is not None:
                    memory.release_nodes(dead)
    except Exception as e:  # noqa: BLE001 - every kernel failure becomes a TF error
        raise_node_error(e, eplan, i)
    finally:
        ctx.free_memory()
    return vals


def _run_traced(eplan, ctx):
    """``run_serial`` recording each node's start and end for the step stats: every node runs,
    the constants too."""
    vals = [None] * eplan.plan.n
    tracer, memory = ctx.tracer, ctx.memory
    i = -1
    try:
        for i, kernel, src, dead in eplan.traced_program():
            start = now_micros()
            vals[i] = kernel(ctx, _gather(vals, src))
            tracer.record(i, vals[i], start, now_micros(), "inline")
            for s in (dead,) if dead.__class__ is int else dead or ():
                vals[s] = None
                memory.release(s)
    except Exception as e:  # noqa: BLE001 - every kernel failure becomes a TF error
        raise_node_error(e, eplan, i)
    finally:
        ctx.free_memory()
    return vals
