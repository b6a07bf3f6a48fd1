"""The session that runs graphs in this process (TF's ``DirectSession``).

Book sections: "Placing Operations on Devices" (placement happens at the first ``run()`` and
again whenever the graph grew; ``log_device_placement`` prints where every op went, here in the
notebook cell rather than on a terminal), "Parallel Execution" (each step runs over the
thread pools of ``pools.py``) and "Sharing State Across Sessions Using Resource Containers"
(``Session.reset("")`` clears the containers of this process's devices).

It is registered as the ``DIRECT_SESSION`` factory of ``session.py`` for the target ``""``.
"""

from __future__ import annotations

import sys
import threading
import weakref
from collections.abc import Sequence

import numpy as np

from minitf.framework import errors
from minitf.framework.dead_tensor import DEAD
from minitf.framework.graph import Graph, Operation, Tensor
from minitf.framework.rendezvous import LocalRendezvous
from minitf.lib import cpp_log_level
from minitf.runtime import devices as devices_mod
from minitf.runtime import (
    executor,
    gpu_process_state,
    placer,
    pools,
    step_run,
    subgraph,
)
from minitf.runtime.config_proto import ConfigProto, RunMetadata, RunOptions
from minitf.runtime.deadness import dead_fetch_error
from minitf.runtime.gc_pause import gc_paused
from minitf.runtime.session import SessionFactory, register_session_factory
from minitf.runtime.step_stats import Tracer

_live: weakref.WeakSet = weakref.WeakSet()


def _fetched(value, device, owned):
    """A value handed back to Python: variables are read, values on a card copied to the host,
    host arrays copied (callers may write to what they get) unless the step owned the only
    reference (``owned``: a fetched output its kernel allocated, as TF hands over a buffer
    nothing else holds)."""
    on_host = device.backend.name == "numpy"
    value = executor.host_value(value, device)
    if on_host and not owned and isinstance(value, np.ndarray):
        return value.copy()
    return value


def _log_creation(devices, config) -> None:
    """TF logs a ``Created TensorFlow device`` line per GPU at every session creation (a C++
    INFO line on stderr: ``TF_CPP_MIN_LOG_LEVEL`` >= 1 hides it).  minitf writes them to stderr
    too, except inside a notebook kernel, where they would fill every cell; there (and always
    with ``log_device_placement``) they come with the ``Device mapping:`` block on stdout."""
    created = gpu_process_state.creation_lines(devices, config.gpu_options)
    if not cpp_log_level.shown(cpp_log_level.INFO):
        created = []
    if config.log_device_placement:
        placer.print_log(created + devices_mod.device_mapping_lines(devices))
    elif created and "ipykernel" not in sys.modules:
        sys.stderr.write("".join(line + "\n" for line in created))
        sys.stderr.flush()


class DirectSession:
    """Places a graph on the devices of this process and runs steps of it."""

    def __init__(self, target: str, graph: Graph, config: ConfigProto):
        self.graph = graph
        self.config = config
        self.devices = devices_mod.local_devices(config)
        # bad gpu_options fail here, before any run
        gpu_process_state.memory_policies(self.devices, config.gpu_options)
        self.placement = None
        self.was_reset = False
        self._by_name = {d.name: d for d in self.devices}
        self._client = self.devices[0].name  # feeds and fetches live on the client's CPU
        self._placer = placer.GraphPlacer(
            self.devices, config.allow_soft_placement, has_cuda=bool(devices_mod.machine_gpus())
        )
        self._placed_version = -1
        self._kernels = executor.KernelCache()
        self._plans = {}
        self._lock = threading.Lock()
        self._pool_sets, self._owned_pools = pools.session_pools(config)
        self._in_caller = pools.runs_in_caller_thread(config)
        self._op_timeout = config.operation_timeout_in_ms
        self._running = set()  # the StepContexts of the steps running now
        _log_creation(self.devices, config)
        _live.add(self)

    def list_devices(self) -> list[devices_mod.DeviceAttributes]:
        return [
            devices_mod.DeviceAttributes(d.name, d.device_type, d.memory_limit, i + 1)
            for i, d in enumerate(self.devices)
        ]

    def close(self) -> None:
        """Frees the session's kernels (and the variables only they held) and its own pools.
        Steps still running are cancelled: a queue op waiting in one fails (TF's cancellation
        manager of the session)."""
        for ctx in list(self._running):
            ctx.start_cancel(errors.CancelledError(None, None, "Session has been closed."))
        self._kernels.clear()
        self._plans.clear()
        for p in self._owned_pools:
            p.close()
        self._owned_pools = []

    # -- placing and planning ------------------------------------------------------------------
    def _ensure_placed(self):
        g = self.graph
        if self._placed_version == g.version:
            return self.placement
        with self._lock:
            if self._placed_version == g.version:
                return self.placement
            version = g.version
            # "TensorFlow grabs all the RAM of all visible GPUs the first time you run a graph"
            gpu_process_state.ensure_gpu_memory(self.devices, self.config.gpu_options)
            placement = self._placer.place(list(g._ops))
            if self.config.log_device_placement:
                placer.print_log(placement.log_lines)
            self._plans.clear()
            self.placement = placement
            self._placed_version = version
            return placement

    def plan(
        self,
        fetch_tensors: Sequence[Tensor],
        target_ops: Sequence[Operation],
        feed_tensors: Sequence[Tensor],
    ) -> executor.ExecutionPlan:
        """The execution plan of one (fetches, targets, feeds) signature, made once: the step
        graph split by device (TF's DirectSession), a _Send/_Recv pair per crossing edge."""
        placement = self._ensure_placed()
        key = (tuple(fetch_tensors), tuple(target_ops), tuple(feed_tensors))
        eplan = self._plans.get(key)
        if eplan is None:
            with gc_paused():
                step = subgraph.build_step_graph(
                    placement.ops,
                    placement.device_of,
                    fetch_tensors,
                    target_ops,
                    feed_tensors,
                    lambda t: self._client,
                    config=self.config,
                )
                taken = {n.name for n in step.nodes}
                eplan = executor.plan(
                    step, self._by_name, self._kernels, ("%s/_%d", taken), self._client
                )
            eplan.session_devices = [d.name for d in self.devices]
            eplan.config = self.config
            eplan.feed_tensors = list(feed_tensors)
            self._plans[key] = eplan
        return eplan

    # -- running -------------------------------------------------------------------------------
    def run(
        self,
        fetch_tensors: Sequence[Tensor],
        target_ops: Sequence[Operation],
        feed_tensors: Sequence[Tensor],
        feed_values: Sequence,
        options: RunOptions | None,
        run_metadata: RunMetadata | None,
    ) -> list:
        eplan = self.plan(fetch_tensors, target_ops, feed_tensors)
        if options is None:  # (most runs: no option to read)
            pool_set, tracer, timeout = self._pool_sets[0], None, self._op_timeout
        else:
            pool_set, tracer, timeout = self._run_options(eplan, options, run_metadata)
        if self._in_caller and len(eplan.devices) == 1:  # TF: only a step of one executor
            pool_set = None
        rendezvous = LocalRendezvous() if eplan.has_rendezvous else None
        ctx = executor.StepContext(feed_values, rendezvous, tracer)
        self._running.add(ctx)
        try:
            vals = step_run.run_step(eplan, ctx, pool_set, timeout)
        finally:
            self._running.discard(ctx)
        if tracer is not None:
            stats = tracer.step_stats([d.name for d in self.devices])
            run_metadata.step_stats.dev_stats[:] = stats.dev_stats
            run_metadata.step_stats.transfers[:] = stats.transfers
        return self._fetch(eplan, vals, fetch_tensors)

    def _run_options(self, eplan, options, run_metadata):
        """``(pool set, tracer or None, timeout in ms)`` of a run with ``RunOptions``."""
        index = options.inter_op_thread_pool
        if not 0 <= index < len(self._pool_sets):
            raise errors.InvalidArgumentError(
                None, None, "Invalid inter_op_thread_pool: %d" % index
            )
        trace = options.trace_level > 0 and run_metadata is not None
        return (
            self._pool_sets[index],
            Tracer(eplan) if trace else None,
            options.timeout_in_ms if options.timeout_in_ms > 0 else self._op_timeout,
        )

    @staticmethod
    def _fetch(eplan, vals, fetch_tensors):
        out = []
        owned = eplan.fetch_owned
        for n, (t, (s, k)) in enumerate(zip(fetch_tensors, eplan.fetch_slots)):
            if vals[s][k] is DEAD:  # on the side of a tf.cond not taken
                raise dead_fetch_error([f.name for f in fetch_tensors], n)
            try:
                out.append(_fetched(vals[s][k], eplan.device_of_node(s), owned[n]))
            except errors.OpError as e:
                name = "_retval_%s_%d_%d" % (t.op.name, t.value_index, n)
                raise type(e)(None, t.op, placer.attach_node(e.message, name)) from None
        return out


def reset(target, containers=None, config=None):
    """``tf.Session.reset("")``: each live local session is closed (using it again raises
    ``CancelledError``) and the listed containers (default: each device's default container)
    are cleared on its devices."""
    for sess in list(_live):
        for d in sess.devices:
            for c in containers if containers is not None else [d.job]:
                d.resource_manager.cleanup(c)
        sess.close()
        sess.was_reset = True


register_session_factory(
    SessionFactory("DIRECT_SESSION", lambda target: target == "", DirectSession, reset)
)
