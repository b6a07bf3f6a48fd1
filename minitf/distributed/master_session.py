"""One client session on a master: its graph, placed over the cluster, split per task.

Book sections: "Placing Operations on Devices" (placement over every device of the cluster, TF
1.15's rules) and "The Master and Worker Services" (TF's ``MasterSession``).  The client's graph
grows with ``ExtendSession``; at the first step after it grew it is placed again (ops that hold
state stay where they were).  For each (fetches, targets, feeds) signature the step graph is
split by task with the one partitioner (``runtime/graph_partition.py``, added nodes named
``<op>_S<n>``) and each task's piece is registered on its worker; ``step_run.py`` runs a step
of them.  As in TF, a signature's partitions stay registered until the session closes, the
graph growing or not: another thread's step may be running them (a QueueRunner's enqueue while
the main thread adds ops), and the ops they hold keep their meaning.
"""

from __future__ import annotations

import threading

import grpc

from minitf.distributed import protocol_pb2 as pb
from minitf.distributed import wire
from minitf.distributed.received_graph import ReceivedGraph, dismantle
from minitf.framework import errors
from minitf.runtime import device_name_utils as dnu
from minitf.runtime import graph_partition, placer, subgraph

#: What a step cancelled by its session's close (or a reset) reports, as TF's MasterSession.
CLOSED_SESSION_STEP = "Step was cancelled by an explicit call to `Session::Close()`."


class RemoteDevice:
    """What the placer needs of a device of some task of the cluster."""

    def __init__(self, attrs):
        self.name = attrs.name
        self.device_type = attrs.device_type
        self.memory_limit = attrs.memory_limit
        self.incarnation = attrs.incarnation
        self.parsed = dnu.parse_full_name(attrs.name)
        self.task = dnu.task_name(self.parsed.job, self.parsed.task)
        self.job, self.task_index = self.parsed.job, self.parsed.task


class Signature:
    """The partitions of one (fetches, targets, feeds) signature, registered on the workers."""

    def __init__(self, handles, fetch_at, feed_at):
        self.handles = handles  # task -> graph handle
        self.fetch_at = fetch_at  # task -> [tensor names fetched from that partition]
        self.feed_at = feed_at  # task -> [fed tensor names its _Arg nodes take]
        self.tasks = sorted(handles)
        self._heads = {}  # (task, session, trace level, timeout) -> serialized request head

    def run_graph_request(self, task, session_handle, options, step_id=0):
        """The RunGraphRequest of ``task``'s partition, its sends given apart."""
        return pb.RunGraphRequest(
            session_handle=session_handle,
            graph_handle=self.handles[task],
            step_id=step_id,
            recv_key=self.fetch_at.get(task, ()),
            options=options,
        )

    def run_graph_head(self, task, session_handle, options):
        """The serialized RunGraphRequest of ``task``'s partition without its step id and sends
        (protobuf reads concatenated messages as one, so a step appends those): made once per
        task and options (``wire.kept_head``), as every step of a training loop sends the same."""
        key = (task, session_handle, options.trace_level, options.timeout_in_ms)
        return wire.kept_head(
            self._heads, key, self._serialized_head, task, session_handle, options
        )

    def _serialized_head(self, task, session_handle, options):
        return self.run_graph_request(task, session_handle, options).SerializeToString()


def _step_graph(graph, device_of, fetch_names, target_names, feed_names, new_name, config):
    """The step graph of a signature over ``graph`` (the nodes it needs, placed)."""
    try:
        fetches = [graph.get_tensor_by_name(n) for n in fetch_names]
        targets = [graph.get_operation_by_name(n) for n in target_names]
        feeds = [graph.get_tensor_by_name(n) for n in feed_names]
    except (KeyError, ValueError, TypeError) as e:
        raise errors.InvalidArgumentError(
            None, None, "Unknown fetch, target or feed: %s" % str(e)[:300]
        ) from None
    fed = set(feeds)
    fetches = [t for t in fetches if t not in fed]  # fed values come back from the master
    return subgraph.build_step_graph(
        graph.get_operations(),
        device_of,
        fetches,
        targets,
        feeds,
        lambda t: device_of[t.op].name,
        lambda t: new_name(t.op.name + "/_arg"),
        config,
    )


class MasterSession:
    def __init__(self, master, handle, config):
        self.master = master
        self.handle = handle
        self.config = config
        self.graph = ReceivedGraph()  # its nodes as NodeDef bytes, and where they are placed
        self.lock = threading.Lock()
        self.devices = None
        self.placer = None
        self.placed_version = -1
        self.version = 0
        self.signatures = {}
        self.tasks = set()  # the tasks its partitions were ever registered on
        self.runs = set()  # its steps running now (PartitionRun), cancelled when it closes
        self.runs_lock = threading.Lock()
        self.closed = False

    def end(self):
        """Closed by its client or by a reset: running steps cancelled, partitions dropped."""
        with self.runs_lock:
            self.closed = True
        self.cancel_running_steps()
        with self.lock:
            self.close()

    def cancel_running_steps(self):
        """The session is closing: its running steps stop (TF's master cancels them), so a
        step blocked in a queue or an accumulator does not outlive the session."""
        with self.runs_lock:
            runs = list(self.runs)
        for run in runs:
            run.cancel_all(CLOSED_SESSION_STEP)

    def extend(self, gdef):
        with self.lock:
            self.graph.extend(gdef)
            self.version = len(self.graph)

    def ensure_placed(self):
        if self.devices is None:
            self.devices = self.master.cluster_devices(self.config)
        if self.placer is None:
            self.placer = placer.GraphPlacer(
                self.devices,
                self.config.allow_soft_placement,
                has_cuda=any(d.device_type == "GPU" for d in self.devices),
            )
        if self.placed_version == self.version:
            return
        self.graph.place(self.placer, self.config.log_device_placement)
        self.placed_version = self.version

    def close(self):
        """The session ended: every task it used drops its partitions and, for a session with
        isolated state, its variables."""
        self.signatures.clear()
        for task in self.tasks:
            self._deregister(task, "")

    def _deregister(self, task, graph_handle):
        try:
            self.master.worker_stub(task).DeregisterGraph(
                pb.DeregisterGraphRequest(session_handle=self.handle, graph_handle=graph_handle),
                timeout=wire.CONTROL_RPC_SECONDS,
                metadata=self.master.channels.metadata,
            )
        except grpc.RpcError:
            pass

    # -- partitioning ------------------------------------------------------------------------
    def signature(self, fetches, targets, feeds):
        key = (tuple(fetches), tuple(targets), tuple(feeds))
        sig = self.signatures.get(key)
        if sig is None:
            sig = self.signatures[key] = self._partition(fetches, targets, feeds)
        return sig

    def _partition(self, fetch_names, target_names, feed_names):
        """Splits the signature's step graph by task and registers each piece (Operations are
        built for the nodes the step needs only, and dropped once it is registered)."""
        graph, device_of = self.graph.step_ops(fetch_names, target_names, feed_names)
        try:
            return self._split(graph, device_of, fetch_names, target_names, feed_names)
        finally:
            dismantle(graph)

    def _split(self, graph, device_of, fetch_names, target_names, feed_names):
        new_name = graph_partition.namer("%s_S%d", set(self.graph.names()))
        step = _step_graph(
            graph, device_of, fetch_names, target_names, feed_names, new_name, self.config
        )
        incarnation = {d.name: d.incarnation for d in self.devices}
        parts = graph_partition.partition(
            step, lambda n: dnu.task_name_of(n.device), new_name, incarnation.__getitem__
        )
        fetch_at, feed_at = {}, {}
        for node, k in parts.fetches:
            fetch_at.setdefault(dnu.task_name_of(node.device), []).append("%s:%d" % (node.name, k))
        for arg in parts.args:
            feed_at.setdefault(dnu.task_name_of(arg.device), []).append(arg.get_attr("tensor_name"))
        graphs = {
            task: pb.GraphDef(node=wire.topological([_node_def(n) for n in nodes]))
            for task, nodes in parts.parts.items()
        }
        return Signature(self._register(graphs), fetch_at, feed_at)

    def _register(self, graphs):
        """Registers each task's GraphDef on its worker, in parallel: {task: handle}."""
        config = pb.SessionConfig(isolate_session_state=self.config.isolate_session_state)
        self.tasks.update(graphs)
        futures = {
            task: self.master.pool.submit(self.master.register, task, self.handle, config, gdef)
            for task, gdef in sorted(graphs.items())
        }
        handles, errs = {}, []
        for task, f in futures.items():
            try:
                handles[task] = f.result()
            except errors.OpError as e:
                errs.append(e)
        if errs:
            raise errs[0]
        return handles


def _node_def(node):
    msg = pb.NodeDef()
    wire.node_to_proto(node, msg)
    return msg
