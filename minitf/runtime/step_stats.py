"""The record of one traced step: who ran what, where and when.

Book section: "Parallel Execution".  ``sess.run(..., options=RunOptions(trace_level=FULL_TRACE),
run_metadata=md)`` fills ``md.step_stats`` with one :class:`DeviceStepStats` per device, each
holding a :class:`NodeExecStats` per op (the fields TF's ``step_stats.proto`` has, plus the
pool and thread that ran it and the intra-op chunks of a split kernel), and a
:class:`TransferStats` per tensor that crossed devices.  Every view (timeline, Chrome trace,
step-through widget) reads this one record; the simulator produces the same record on a
virtual clock.  :class:`Tracer` is what a real step records with.
"""

from minitf.framework.dead_tensor import DEAD
from minitf.framework.resource_mgr import VariableRef
from minitf.runtime import pools
from minitf.runtime.config_proto import StepStats
from minitf.runtime.deadness import DeadOutputs


class TensorOutput:
    """One output of a node: slot, dtype name, shape and bytes."""

    __slots__ = ("slot", "dtype", "shape", "requested_bytes")

    def __init__(self, slot, dtype, shape, requested_bytes):
        self.slot, self.dtype, self.shape, self.requested_bytes = (
            slot,
            dtype,
            shape,
            requested_bytes,
        )

    def __repr__(self):
        return "TensorOutput(%d, %s, %s, %d bytes)" % (
            self.slot,
            self.dtype,
            self.shape,
            self.requested_bytes,
        )


class ChunkStats:
    """One chunk of a kernel split over a device's intra-op pool."""

    __slots__ = ("index", "thread_id", "thread_name", "start_micros", "end_micros")

    def __init__(self, index, thread_id, thread_name, start_micros, end_micros):
        self.index, self.thread_id, self.thread_name = index, thread_id, thread_name
        self.start_micros, self.end_micros = start_micros, end_micros

    def __repr__(self):
        return "ChunkStats(#%d on %s, %d..%d)" % (
            self.index,
            self.thread_name,
            self.start_micros,
            self.end_micros,
        )


class NodeExecStats:
    """One op's execution: TF's ``NodeExecStats`` fields plus minitf's pool/thread/chunks.

    Times: ``all_start_micros`` is absolute (microseconds since the epoch for real runs, since
    the step's start for simulated ones); the ``*_rel_micros`` are relative to it.
    """

    __slots__ = (
        "node_name",
        "op_type",
        "all_start_micros",
        "op_start_rel_micros",
        "op_end_rel_micros",
        "all_end_rel_micros",
        "scheduled_micros",
        "thread_id",
        "thread_name",
        "pool",
        "timeline_label",
        "output",
        "chunks",
    )

    def __init__(
        self,
        node_name,
        op_type,
        all_start_micros,
        all_end_rel_micros,
        thread_id,
        thread_name,
        pool,
        timeline_label,
        scheduled_micros=0,
        output=(),
        chunks=(),
    ):
        self.node_name = node_name
        self.op_type = op_type
        self.all_start_micros = all_start_micros
        self.op_start_rel_micros = 0
        self.op_end_rel_micros = all_end_rel_micros
        self.all_end_rel_micros = all_end_rel_micros
        self.scheduled_micros = scheduled_micros
        self.thread_id = thread_id
        self.thread_name = thread_name
        self.pool = pool  # "inter_op" (a pool thread) or "inline" (the caller)
        self.timeline_label = timeline_label
        self.output = list(output)
        self.chunks = list(chunks)

    @property
    def end_micros(self):
        return self.all_start_micros + self.all_end_rel_micros

    def __repr__(self):
        return "NodeExecStats(%s on %s, %d+%d us)" % (
            self.node_name,
            self.thread_name,
            self.all_start_micros,
            self.all_end_rel_micros,
        )


class DeviceStepStats:
    """The node stats of one device, in start order."""

    __slots__ = ("device", "node_stats")

    def __init__(self, device, node_stats=()):
        self.device = device
        self.node_stats = list(node_stats)

    def __repr__(self):
        return "DeviceStepStats(%s, %d nodes)" % (self.device, len(self.node_stats))


class TransferStats:
    """A tensor copied from one device to another during the step (TF's Send/Recv pair).

    ``micros``: how long the copy took (modelled by the simulator; 0 in real in-process runs,
    where devices share memory and the copy is a hand-over); ``start_micros``: when the
    consumer received it (None where not recorded).
    """

    __slots__ = (
        "tensor_name",
        "src_node",
        "dst_node",
        "src_device",
        "dst_device",
        "bytes",
        "micros",
        "start_micros",
    )

    def __init__(
        self,
        tensor_name,
        src_node,
        dst_node,
        src_device,
        dst_device,
        nbytes,
        micros,
        start_micros=None,
    ):
        self.tensor_name, self.src_node, self.dst_node = tensor_name, src_node, dst_node
        self.src_device, self.dst_device = src_device, dst_device
        self.bytes, self.micros, self.start_micros = nbytes, micros, start_micros

    def __repr__(self):
        return "TransferStats(%s %s -> %s, %d bytes)" % (
            self.tensor_name,
            self.src_device,
            self.dst_device,
            self.bytes,
        )


def arrival_micros(node_stats):
    """When a tensor sent to this node is there: a ``_Recv`` ends when it arrived (it was
    issued long before); any other receiving node starts when it has its inputs."""
    if node_stats.op_type == "_Recv":
        return node_stats.all_start_micros + node_stats.all_end_rel_micros
    return node_stats.all_start_micros


def timeline_label(node):
    """TF's ``name = OpType(input, input, ^control)`` label of a node (an Operation or a step
    graph Node)."""
    nd = node.node_def
    return "%s = %s(%s)" % (nd.name, nd.op, ", ".join(nd.input))


def _nbytes(v):
    if type(v) is VariableRef:
        v = v.value
    return int(getattr(v, "nbytes", 0) or 0)


def _outputs(outs):
    return [
        TensorOutput(k, str(getattr(v, "dtype", "")), tuple(getattr(v, "shape", ())), _nbytes(v))
        for k, v in enumerate(outs or ())
        if v is not DEAD  # a Switch's side not taken
    ]


class Tracer:
    """Collects a :class:`NodeExecStats` per executed node of an execution plan, and a
    :class:`TransferStats` per tensor a ``_Recv`` received (``transfer``)."""

    def __init__(self, eplan):
        self.eplan = eplan
        self.nodes = [None] * eplan.plan.n
        self.transfers = []

    def record(self, i, outs, start, end, pool, chunks=(), thread=None):
        """Node ``i`` ran from ``start`` to ``end`` (microseconds) in ``pool`` and gave
        ``outs``, on ``thread`` ((id, name); default: the calling thread)."""
        if type(outs) is DeadOutputs:  # a dead node did not run (TF records none)
            return
        ident, tname = thread if thread is not None else pools.current_thread()
        node = self.eplan.nodes[i]
        self.nodes[i] = NodeExecStats(
            node.name,
            node.type,
            start,
            end - start,
            ident,
            tname,
            pool,
            timeline_label(node),
            output=_outputs(outs),
            chunks=chunks,
        )

    def transfer(self, tensor_name, src_node, dst_node, src_device, dst_device, nbytes, start, end):
        self.transfers.append(
            TransferStats(
                tensor_name, src_node, dst_node, src_device, dst_device, nbytes, end - start, start
            )
        )

    def step_stats(self, device_order):
        """The step's :class:`StepStats`: devices in ``device_order`` first (those that ran
        something), each one's nodes in start order, then the transfers."""
        per_device = {}
        for i, ns in enumerate(self.nodes):
            if ns is not None:
                per_device.setdefault(self.eplan.plan.device[i], []).append(ns)
        stats = StepStats()
        for d in list(device_order) + sorted(set(per_device) - set(device_order)):
            if d in per_device:
                nodes = sorted(per_device[d], key=lambda n: n.all_start_micros)
                stats.dev_stats.append(DeviceStepStats(d, nodes))
        stats.transfers.extend(self.transfers)
        return stats
