"""Turning a placed graph into runnable steps, and the serial executor that runs them.

Book sections: "Placing Operations on Devices" (a run only executes what its fetches need) and
"Parallel Execution" (the dependency-counting :class:`~minitf.runtime.scheduler.Step`).

:func:`build` prunes the graph to the ops a run needs, instantiates one kernel per op on its
assigned device, and adds a feed node per fed tensor.  :func:`run_step` runs one step: on the
calling thread when every op is cheap (:func:`run_serial`), else over each device's inter-op
pool, splittable kernels splitting their work over the device's intra-op pool
(:class:`_ThreadedRun`).  Both drive the same :class:`~minitf.runtime.scheduler.Step`.
"""

import threading
import time

import numpy as np

from minitf.framework import errors
from minitf.kernels import registry
from minitf.ops.op_def import get_op_def
from minitf.runtime import pools
from minitf.runtime.config_proto import StepStats
from minitf.runtime.devices import launcher_for
from minitf.runtime.placer import attach_node
from minitf.runtime.resource_mgr import VariableRef
from minitf.runtime.scheduler import Plan, Step
from minitf.runtime.step_stats import (ChunkStats, DeviceStepStats, NodeExecStats, TensorOutput,
                                       TransferStats, timeline_label)


INLINE_ELEMENTS = 1 << 15  # ops producing more elements than this go to the inter-op pool


def is_expensive(op, kdef):
    """TF's cost estimate, simplified: a kernel declared expensive (MatMul), or any op whose
    static inputs or outputs have more than ``INLINE_ELEMENTS`` elements, is sent to the
    device's inter-op pool; everything else runs inline on the thread that made it ready."""
    if kdef.cost == "expensive":
        return True
    for t in op._outputs + op._inputs:
        n = t.shape.num_elements()
        if n is not None and n > INLINE_ELEMENTS:
            return True
    return False


class ExecutionPlan:
    """A plan plus its kernels: ``kernels[i](ctx, inputs)`` computes node ``i``.

    ``expensive[i]``: node ``i`` goes to its device's inter-op pool rather than running inline;
    ``splittable[i]``: its kernel may split its work over the device's intra-op pool.
    """

    def __init__(self, plan, kernels, names, ops, fetch_slots, expensive, splittable):
        self.plan = plan
        self.kernels = kernels
        self.names = names    # node name per index (feed nodes: "_arg_<tensor>")
        self.ops = ops        # Operation per index (None for feed nodes)
        self.fetch_slots = fetch_slots  # (node, output index) per fetched tensor
        self.expensive = expensive
        self.splittable = splittable
        self.any_expensive = any(expensive)
        self.node_devices = []  # Device per node (None: a feed, held on the host)

    def device_of_node(self, i):
        return self.node_devices[i]


def prune(fetch_ops, feed_tensors):
    """The ops a run needs: everything the fetch/target ops depend on, cut at fed tensors."""
    needed = set()
    stack = list(fetch_ops)
    while stack:
        op = stack.pop()
        if op in needed:
            continue
        needed.add(op)
        for t in op._inputs:
            if t not in feed_tensors:
                stack.append(t.op)
        stack.extend(op._control_inputs)
    return needed


def _deref_inputs(kernel, positions):
    """Wraps a kernel whose inputs at ``positions`` are variable references it must read."""
    def compute(ctx, ins):
        for p in positions:
            ins[p] = ins[p].read()
        return kernel(ctx, ins)
    return compute


def _accounted(kernel, allocator, op):
    """Wraps a kernel of a device with a memory allocator: its outputs are allocated there and
    live until the end of the step (variables account for their own storage)."""
    name = op.name

    def compute(ctx, ins):
        outs = kernel(ctx, ins)
        for v in outs:
            nbytes = getattr(v, "nbytes", 0) if type(v) is not VariableRef else 0
            if nbytes:
                ctx.allocations.append((allocator, allocator.allocate(
                    int(nbytes), name, getattr(v, "shape", None), str(getattr(v, "dtype", "")))))
        return outs
    return compute


def _free_step_memory(allocations):
    for allocator, token in allocations:
        allocator.free(token)
    allocations.clear()


def _move_between(src, dst):
    """How a tensor crosses from device ``src`` (None: the host) to ``dst``: (launcher of the
    card to copy down from or None, launcher of the card to copy up to or None), or None when
    both ends share memory (TF's Send/Recv pair, made explicit only where a copy is needed)."""
    down = launcher_for(src) if src is not None and src.backend == "cuda" else None
    up = launcher_for(dst) if dst.backend == "cuda" else None
    if down is up:  # both on the host, or on the same card (or the simulator's one launcher)
        return None
    return down, up


def _move_inputs(kernel, moves):
    """Copies inputs between the host and CUDA cards before the kernel runs: ``(position,
    launcher of the card it comes from or None, launcher of the card it goes to or None)``."""
    from minitf.kernels import cuda_ops

    def compute(ctx, ins):
        for pos, src, dst in moves:
            v = ins[pos]
            if type(v) is VariableRef:
                continue
            if src is not None:
                v = cuda_ops.to_host(src, v)
            if dst is not None:
                v = cuda_ops.to_device(dst, v)
            ins[pos] = v
        return kernel(ctx, ins)
    return compute


def host_value(value, device):
    """A fetched value as numpy: variables read, arrays on a CUDA card copied back."""
    if type(value) is VariableRef:
        value = value.read()
    if device is not None and device.backend == "cuda":
        from minitf.kernels import cuda_ops
        value = cuda_ops.to_host(launcher_for(device), value)
        if isinstance(value, np.ndarray) and value.ndim == 0:
            value = value[()]
    return value


def _feed_kernel(j):
    return lambda ctx, ins: (ctx.feeds[j],)


def build(graph_ops, placement, client_device, fetch_tensors, target_ops, feed_tensors,
          kernel_cache):
    """Builds the :class:`ExecutionPlan` of one (fetches, targets, feeds) signature.

    ``kernel_cache`` (a :class:`KernelCache`) keeps each op's kernel (and the state it holds,
    e.g. a random generator's) for every later plan of the same session or partition.
    """
    feed_index = {t: j for j, t in enumerate(feed_tensors)}
    fetch_ops = [t.op for t in fetch_tensors if t not in feed_index] + list(target_ops)
    needed = prune(fetch_ops, feed_index)
    ops = [op for op in graph_ops if op in needed]
    index = {op: i for i, op in enumerate(ops)}
    n = len(ops)
    feed_node = {}
    for t, j in feed_index.items():
        feed_node[t] = n + j
    inputs, controls, devices, kernels, names = [], [], [], [], []
    expensive, splittable = [], []
    for op in ops:
        device = placement.device_of[op]
        kdef = registry.find_kernel(op, device.device_type)
        kernel = kernel_cache.get(op, device.name)
        if kernel is None:
            if device.backend == "cuda":
                launcher = launcher_for(device)  # first: it may switch the simulator on
                from minitf.kernels import cuda_ops
                kernel = cuda_ops.make_kernel(op, device, launcher)
            else:
                kernel = kdef.factory(op, device)
            kernel_cache.put(op, device.name, kernel)
        refs = get_op_def(op.type).ref_inputs
        edges, deref, moves = [], [], []
        for pos, t in enumerate(op._inputs):
            if t in feed_node:
                edges.append((feed_node[t], 0))
                src_dev = None  # feeds arrive on the host
            else:
                edges.append((index[t.op], t._value_index))
                if t.dtype.is_ref_dtype and not (pos < len(refs) and refs[pos]):
                    deref.append(pos)
                src_dev = placement.device_of[t.op]
            move = _move_between(src_dev, device)
            if move is not None:
                moves.append((pos,) + move)
        if moves:
            kernel = _move_inputs(kernel, moves)
        if deref:
            kernel = _deref_inputs(kernel, deref)
        if device.allocator is not None:
            kernel = _accounted(kernel, device.allocator, op)
        inputs.append(edges)
        controls.append([index[c] for c in op._control_inputs])
        devices.append(device.name)
        kernels.append(kernel)
        names.append(op.name)
        expensive.append(is_expensive(op, kdef))
        splittable.append(kdef.splittable)
    for t, j in feed_index.items():
        inputs.append([])
        controls.append([])
        devices.append(client_device)
        kernels.append(_feed_kernel(j))
        names.append("_arg_%s_%d" % (t.op.name, t.value_index))
        expensive.append(False)
        splittable.append(False)
    fetch_slots = [(feed_node[t], 0) if t in feed_node else (index[t.op], t._value_index)
                   for t in fetch_tensors]
    eplan = ExecutionPlan(Plan(inputs, controls, devices), kernels, names,
                          ops + [None] * len(feed_index), fetch_slots, expensive, splittable)
    eplan.node_devices = [placement.device_of[op] for op in ops] + [None] * len(feed_index)
    return eplan


class KernelCache:
    """The kernels of a session (or of a worker's registered partition), keyed by (op, device
    name): made once, reused by every plan (TF keeps a session's kernels in its OpSegment)."""

    def __init__(self):
        self._store = {}

    def get(self, op, device_name):
        return self._store.get((op, device_name))

    def put(self, op, device_name, kernel):
        self._store[(op, device_name)] = kernel

    def clear(self):
        self._store.clear()


def node_error(exc, eplan, i):
    """Re-raises a kernel failure as TF does: same class, the node named in ``[[...]]``."""
    name = eplan.names[i]
    op = eplan.ops[i]
    if isinstance(exc, (ValueError, TypeError, ArithmeticError, IndexError)):
        cls, msg = errors.InvalidArgumentError, "%s: %s" % (type(exc).__name__, exc)
    else:
        exc = errors.as_op_error(exc)
        cls, msg = type(exc), exc.message
    if "[[" not in msg:
        msg = attach_node(msg, name)
    return cls(op.node_def if op is not None else None, op, msg)


# -- contexts handed to kernels ---------------------------------------------------------------

class StepContext:
    """What kernels may use during one step: the fed values, and ``parallel_for`` (serial here;
    a kernel run by a pool thread gets a :class:`_NodeContext` that splits for real)."""

    __slots__ = ("feeds", "allocations")

    def __init__(self, feeds):
        self.feeds = feeds
        self.allocations = []  # (allocator, token) of this step's device tensors

    def parallel_for(self, n, fn):
        fn(0, n)


class _NodeContext:
    __slots__ = ("feeds", "allocations", "_pool", "chunks")

    def __init__(self, step_ctx, pool):
        self.feeds = step_ctx.feeds
        self.allocations = step_ctx.allocations
        self._pool = pool
        self.chunks = []

    def parallel_for(self, n, fn):
        self._pool.parallel_for(n, fn, self._record)

    def _record(self, index, ident, name, start, end):
        self.chunks.append(ChunkStats(index, ident, name, start, end))


# -- tracing ----------------------------------------------------------------------------------

def _nbytes(v):
    if type(v) is VariableRef:
        v = v.value
    return int(getattr(v, "nbytes", 0) or 0)


class Tracer:
    """Collects a NodeExecStats per executed node (and cross-device transfers)."""

    def __init__(self, eplan):
        self.eplan = eplan
        self.nodes = [None] * eplan.plan.n
        self.transfers = []

    def record(self, i, vals, start, end, pool, chunks=()):
        ep = self.eplan
        ident, tname = pools.current_thread()
        outs = vals[i] or ()
        outputs = [TensorOutput(k, str(getattr(v, "dtype", "")), tuple(getattr(v, "shape", ())),
                                                    _nbytes(v)) for k, v in enumerate(outs)]
        self.nodes[i] = NodeExecStats(ep.names[i], ep.ops[i].type if ep.ops[i] else "_Arg",
                                      start, end - start, ident, tname, pool,
                                      timeline_label(ep.ops[i], ep.names[i]), output=outputs,
                                      chunks=chunks)
        dev = ep.plan.device
        for s, k in ep.plan.inputs[i]:
            if dev[s] != dev[i]:
                self.transfers.append(TransferStats(
                    "%s:%d" % (ep.names[s], k), ep.names[s], ep.names[i], dev[s], dev[i],
                    _nbytes(vals[s][k]), 0, start))

    def step_stats(self, device_order):
        per_device = {}
        for i, ns in enumerate(self.nodes):
            if ns is not None:
                per_device.setdefault(self.eplan.plan.device[i], []).append(ns)
        stats = StepStats()
        for d in device_order:
            if d in per_device:
                nodes = sorted(per_device[d], key=lambda n: n.all_start_micros)
                stats.dev_stats.append(DeviceStepStats(d, nodes))
        stats.transfers.extend(self.transfers)
        return stats


def _now():
    return time.time_ns() // 1000


# -- the drivers ------------------------------------------------------------------------------

def run_serial(eplan, feeds, tracer=None):
    """Runs one step on the calling thread; returns the list of every node's outputs."""
    ctx = StepContext(feeds)
    plan = eplan.plan
    vals = [None] * plan.n
    kernels = eplan.kernels
    inputs = plan.inputs
    current = [0]

    def execute(i):
        current[0] = i
        vals[i] = kernels[i](ctx, [vals[s][k] for s, k in inputs[i]])

    def execute_traced(i):
        current[0] = i
        start = _now()
        vals[i] = kernels[i](ctx, [vals[s][k] for s, k in inputs[i]])
        tracer.record(i, vals, start, _now(), "inline")

    try:
        Step(plan).run_inline(execute if tracer is None else execute_traced)
    except Exception as e:  # noqa: BLE001 - every kernel failure becomes a TF error
        raise node_error(e, eplan, current[0]) from (None if isinstance(e, errors.OpError)
                                                     else e)
    finally:
        _free_step_memory(ctx.allocations)
    return vals


class _ThreadedRun:
    """One step over the per-device pools: cheap ops inline, expensive ones to the pool.

    A node that becomes ready runs inline on the thread that made it ready when it is cheap
    and on that thread's device (the caller's thread takes any device); otherwise it joins its
    device's ready queue and a thread of that device's inter-op pool picks it up.
    """

    def __init__(self, eplan, feeds, pool_set, tracer):
        self.eplan = eplan
        self.plan = eplan.plan
        self.step = Step(self.plan)
        self.vals = [None] * self.plan.n
        self.ctx = StepContext(feeds)
        self.feeds = feeds
        self.pools = pool_set
        self.tracer = tracer
        self.cond = threading.Condition()
        self.outstanding = 0
        self.error = None
        self.cancelled = False

    def run(self, timeout_ms):
        self._process(list(self.plan.roots), None)
        deadline = time.monotonic() + timeout_ms / 1000.0 if timeout_ms > 0 else None
        with self.cond:
            while not self._finished():
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    self.cancelled = True
                    raise errors.DeadlineExceededError(None, None,
                                                       "Timed out waiting for notification")
                self.cond.wait(remaining)
        if self.error is not None:
            e, i = self.error
            if i is None:   # cancelled
                raise e
            raise node_error(e, self.eplan, i) from (None if isinstance(e, errors.OpError)
                                                     else e)
        return self.vals

    def _finished(self):
        if self.error is not None:
            return self.outstanding == 0
        return self.step.done

    def cancel(self, error):
        """Stops the step from another thread: nothing new starts, kernels running finish, and
        ``run`` raises ``error`` (an OpError) if the step had not ended."""
        with self.cond:
            if self.error is None and not self.step.done:
                self.error = (error, None)
                self.cancelled = True
            self.cond.notify_all()

    def _execute(self, i, device):
        plan, vals = self.plan, self.vals
        ins = [vals[s][k] for s, k in plan.inputs[i]]
        if self.eplan.splittable[i] and device is not None:
            ctx = _NodeContext(self.ctx, self.pools.for_device(device).intra)
        else:
            ctx = self.ctx
        start = _now() if self.tracer is not None else 0
        vals[i] = self.eplan.kernels[i](ctx, ins)
        if self.tracer is not None:
            self.tracer.record(i, vals, start, _now(), "inter_op" if device else "inline",
                               getattr(ctx, "chunks", ()))

    def _process(self, ready, device, first=None):
        """Runs ``first`` (a node popped from a pool queue) and every cheap node that becomes
        ready after it on this thread; hands the rest to the pools."""
        stack = []
        self._route(ready, device, stack)
        if first is not None:
            stack.append(first)
        plan_device = self.plan.device
        while stack:
            if self.cancelled:
                return
            i = stack.pop()
            try:
                self._execute(i, plan_device[i] if device is not None else None)
            except Exception as e:  # noqa: BLE001 - reported to the caller
                with self.cond:
                    if self.error is None:
                        self.error = (e, i)
                    self.cancelled = True
                    self.cond.notify_all()
                return
            with self.cond:
                newly = self.step.finish(i, enqueue=False)
                if self.step.done:
                    self.cond.notify_all()
            if newly:
                self._route(newly, device, stack)

    def _route(self, nodes, device, stack):
        expensive, plan_device = self.eplan.expensive, self.plan.device
        for j in nodes:
            if not expensive[j] and (device is None or plan_device[j] == device):
                stack.append(j)
            else:
                with self.cond:
                    if self.cancelled:  # a failed or timed-out step starts nothing new
                        return
                    self.step.enqueue(j)
                    self.outstanding += 1
                try:
                    self.pools.for_device(plan_device[j]).inter.submit(self._pool_task,
                                                                       plan_device[j])
                except errors.CancelledError as e:   # the pools closed (server stopping)
                    with self.cond:
                        self.outstanding -= 1
                    self.cancel(e)
                    return

    def _pool_task(self, device):
        try:
            with self.cond:
                i = self.step.pop_ready(device)
            if i is not None and not self.cancelled:
                self._process((), device, first=i)
        finally:
            with self.cond:
                self.outstanding -= 1
                if self._finished():
                    self.cond.notify_all()
                if self.cancelled and self.outstanding == 0:
                    _free_step_memory(self.ctx.allocations)

    def release_memory(self):
        with self.cond:
            _free_step_memory(self.ctx.allocations)


_blas_lock = threading.Lock()
_blas_users = 0
_blas_limiter = None
_blas_libraries = None


class _SingleThreadedBlas:
    """While threaded steps run, BLAS uses one thread: parallelism comes from minitf's own
    pools, sized as the user asked, not from BLAS threads multiplying them (threadpoolctl).
    The BLAS libraries are looked up once (numpy loaded them): a lookup reads the process's
    memory map, about 0.4 ms, and setting the limit on known libraries takes 15 us."""

    def __enter__(self):
        global _blas_users, _blas_limiter, _blas_libraries
        with _blas_lock:
            if _blas_users == 0:
                if _blas_libraries is None:
                    from threadpoolctl import ThreadpoolController
                    _blas_libraries = ThreadpoolController().select(user_api="blas")
                _blas_limiter = _blas_libraries.limit(limits=1)
            _blas_users += 1

    def __exit__(self, *exc):
        global _blas_users, _blas_limiter
        with _blas_lock:
            _blas_users -= 1
            if _blas_users == 0 and _blas_limiter is not None:
                _blas_limiter.restore_original_limits()
                _blas_limiter = None
        return False


def run_step(eplan, feeds, pool_set, tracer=None, timeout_ms=0, on_start=None):
    """Runs one step: inline on the caller when every node is cheap, else over the pools.
    ``on_start(cancel)``, for a step run over the pools, receives a function that stops it
    from another thread (``cancel(error)``: the step raises ``error``)."""
    if not eplan.any_expensive:
        return run_serial(eplan, feeds, tracer)
    with _SingleThreadedBlas():
        run = _ThreadedRun(eplan, feeds, pool_set, tracer)
        if on_start is not None:
            on_start(run.cancel)
        try:
            return run.run(timeout_ms)
        except BaseException as e:
            if not isinstance(e, Exception):   # KeyboardInterrupt: the step stops too
                run.cancel(errors.CancelledError(None, None, "The step was interrupted."))
            raise
        finally:
            if run.error is not None or not run.cancelled:
                run.release_memory()  # (a timed-out step frees when its last kernel ends)
