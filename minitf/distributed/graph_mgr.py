"""The partitions registered on a worker, and how each runs a step (TF's ``GraphMgr``).

Book section: "The Master and Worker Services".  A master registers on each task the piece of a
session's graph that runs there (``RegisterGraph``): ops placed on this task's devices, the
``_Send``/``_Recv`` pairs that connect them to other tasks, and an ``_Arg`` per value the client
feeds here.  The worker keeps it as an :class:`Item` and, for each set of tensors the master
asks back (``recv_key``), splits it once more by device, as TF's GraphMgr does
(``runtime/graph_partition.py``, nodes named ``<op>_G<n>``), into an execution plan.  Variables
live in the resource managers of the task's devices and are shared by every registered graph
of every master, unless the session isolates its state (:class:`SessionDevice`).
"""

from __future__ import annotations

import itertools
import threading

from minitf.distributed import wire
from minitf.framework import errors
from minitf.framework.graph import Graph
from minitf.framework.resource_mgr import ResourceMgr
from minitf.ops.sendrecv_ops import ARG_OP
from minitf.runtime import executor, subgraph
from minitf.runtime.gc_pause import gc_paused


class SessionDevice:
    """A device as the partitions of one session with isolated state see it
    (``config.isolate_session_state``, TF's RenamedDevice of a WorkerSession): its own
    resource manager, so its variables are not those of other sessions; all else is the
    device's own."""

    def __init__(self, device):
        self._device = device
        self.resource_manager = ResourceMgr(device.resource_manager.default_container)

    def __getattr__(self, name):
        return getattr(self._device, name)


class SessionKernels(executor.KernelCache):
    """A registered graph's kernels.  Those of stateful ops (a queue, a reader, a random
    generator) are the session's, shared by every graph it registers, as TF's OpSegment keeps
    them by node name: a private queue is one queue for all the session's steps, whatever each
    step fetches.  The others belong to the graph (a ``_Recv`` of one partition is not that of
    another)."""

    def __init__(self, shared, stateful):
        super().__init__()
        self._shared, self._stateful = shared, stateful

    def get(self, name, device_name):
        if name in self._stateful:
            return self._shared.get(name, device_name)
        return super().get(name, device_name)

    def put(self, name, device_name, kernel):
        if name in self._stateful:
            self._shared.put(name, device_name, kernel)
        else:
            super().put(name, device_name, kernel)


class Item:
    """One registered graph: its ops on this task's devices, and a plan per fetch signature."""

    def __init__(self, session_handle, graph, device_of, devices, shared_kernels):
        self.session_handle = session_handle
        self.graph = graph
        self.ops = graph.get_operations()
        self.device_of = device_of
        self.devices = {d.name: d for d in devices}
        self.args = [
            (op.get_attr("index"), op.get_attr("tensor_name"))
            for op in self.ops
            if op.type == ARG_OP
        ]
        self.plans = {}
        stateful = {op.name for op in self.ops if op._op_def is not None and op._op_def.is_stateful}
        self.kernels = SessionKernels(shared_kernels, stateful)
        self.lock = threading.Lock()

    def plan(self, recv_keys):
        """The execution plan that computes the tensors named ``recv_keys``."""
        key = tuple(recv_keys)
        eplan = self.plans.get(key)
        if eplan is None:
            with self.lock:
                eplan = self.plans.get(key)
                if eplan is None:
                    with gc_paused():
                        eplan = self.plans[key] = self._build(recv_keys)
        return eplan

    def _build(self, recv_keys):
        try:
            fetches = [self.graph.get_tensor_by_name(n) for n in recv_keys]
        except (KeyError, ValueError, TypeError) as e:
            raise errors.InvalidArgumentError(
                None, None, "Unknown tensor in RunGraph: %s" % str(e)[:200]
            ) from None
        consumed = set()
        for op in self.ops:
            consumed.update(t.op for t in op.inputs)
            consumed.update(op.control_inputs)
        targets = [op for op in self.ops if op not in consumed]
        step = subgraph.build_step_graph(self.ops, self.device_of, fetches, targets, (), None)
        names = ("%s_G%d", {op.name for op in self.ops})
        return executor.plan(step, self.devices, self.kernels, names)

    def args_from(self, sends):
        """The values of this graph's ``_Arg`` nodes, by index, from a step's named sends."""
        args = {}
        for index, name in self.args:
            if name not in sends:
                raise errors.InvalidArgumentError(
                    None, None, "RunGraph is missing a value for fed tensor %s" % name[:200]
                )
            args[index] = sends[name]
        return args

    def reset_kernels(self):
        with self.lock:
            self.plans.clear()
            self.kernels.clear()


class GraphMgr:
    """The registered graphs of one worker, by handle."""

    def __init__(self, task_name, devices):
        self.task_name = task_name
        self.devices = devices
        self._items: dict[str, Item] = {}
        self._isolated: dict[str, list] = {}  # session handle -> its devices (isolated state)
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._kernels: dict[str, executor.KernelCache] = {}  # session -> its stateful kernels

    def register(self, session_handle, gdef, isolate) -> str:
        """Imports a partition; its handle.  Every op must be on a device of this task."""
        graph = Graph()
        ops = wire.import_graph_def(gdef, graph)
        devices = self._session_devices(session_handle) if isolate else self.devices
        by_name = {d.name: d for d in devices}
        device_of = {}
        for op in ops:
            d = by_name.get(op.device)
            if d is None:
                raise errors.InvalidArgumentError(
                    None,
                    None,
                    "Node %s is assigned to %s, "
                    "which is not a device of %s" % (op.name, op.device[:200], self.task_name),
                )
            device_of[op] = d
        handle = "%s/g%d" % (session_handle[:100], next(self._ids))
        with self._lock:
            shared = self._kernels.setdefault(session_handle, executor.KernelCache())
            self._items[handle] = Item(session_handle, graph, device_of, devices, shared)
        return handle

    def _session_devices(self, session_handle):
        with self._lock:
            devices = self._isolated.get(session_handle)
            if devices is None:
                devices = self._isolated[session_handle] = [SessionDevice(d) for d in self.devices]
            return devices

    def deregister(self, session_handle, graph_handle=None):
        """Drops one graph, or, without a handle, every graph of the session and its isolated
        state (the session ended)."""
        with self._lock:
            if graph_handle:
                self._items.pop(graph_handle, None)
                return
            for h in [h for h, it in self._items.items() if it.session_handle == session_handle]:
                del self._items[h]
            self._isolated.pop(session_handle, None)
            shared = self._kernels.pop(session_handle, None)
        if shared is not None:
            shared.clear()

    def get(self, graph_handle) -> Item:
        with self._lock:
            item = self._items.get(graph_handle)
        if item is None:
            raise errors.AbortedError(
                None,
                None,
                "Graph handle is not found: %s. Possibly, "
                "this worker just restarted." % graph_handle[:200],
            )
        return item

    def isolated_sessions(self):
        with self._lock:
            return list(self._isolated)

    def reset_kernels(self):
        """``CleanupAll``: every graph makes its kernels anew (their variables went)."""
        with self._lock:
            items = list(self._items.values())
            shared = list(self._kernels.values())
        for item in items:
            item.reset_kernels()
        for kernels in shared:
            kernels.clear()
