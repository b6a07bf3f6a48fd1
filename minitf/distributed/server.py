"""``tf.train.Server``: a gRPC server hosting a master service and a worker service.

Book sections: "Multiple Devices Across Multiple Servers" (one server per task of the
cluster) and "The Master and Worker Services".
Unlike TF, a server can be stopped (``stop()``) and port 0 picks a free port (``target`` and
``bound_address`` report the port chosen).  It binds the host of its own cluster entry.
An optional shared-secret token (``token=`` or env ``MINITF_CLUSTER_TOKEN``) must then come
with every RPC in the ``minitf-cluster-token`` metadata entry.
"""

from __future__ import annotations

import concurrent.futures
import concurrent.futures.thread  # registers its exit hook before ours (see _stop_at_exit)
import hmac
import os
import threading
import weakref
from typing import Any, Literal

import grpc

from minitf.distributed import master_interface, services, wire
from minitf.distributed.cluster_spec import ClusterSpec
from minitf.distributed.master import Master
from minitf.distributed.worker import Worker
from minitf.distributed.worker_cache import TOKEN_HEADER
from minitf.framework import errors
from minitf.runtime import devices as devices_mod
from minitf.runtime.config_proto import ConfigProto

#: Handler threads of a server per class of method: ``{class: (threads, methods)}`` ("control":
#: every other method).  A call holds a thread while it waits (a RecvTensor for a step that has
#: not run yet, a step on an open call), so a class that waits cannot take the threads of the
#: others: a thousand RecvTensor calls without a deadline leave the server's other methods
#: answering, and the steps of many client threads (each holding a master's "step" thread)
#: leave the threads that their partitions' tensors cross (TF's server holds no thread while a
#: call waits: its calls are asynchronous).
HANDLER_POOLS = {
    "control": (64, ()),
    "step": (256, ("RunStep", "RunSteps")),
    "graph": (1024, ("RunGraph", "RunGraphs")),
    "recv": (1024, ("RecvTensor", "RecvTensors", "RecvTensorsSteps")),
}
#: Calls a server accepts at once (past it gRPC answers RESOURCE_EXHAUSTED): the pools' threads
#: and as many calls again waiting for one.
MAX_CONCURRENT_RPCS = 2 * sum(n for n, _ in HANDLER_POOLS.values())


#: The servers of this process that are serving (stopped at interpreter exit).
_running: weakref.WeakSet = weakref.WeakSet()


def _stop_at_exit() -> None:
    """Stops the servers still serving when the interpreter exits, as a TF process simply ends:
    without it, Python would wait for their handler threads (a step call kept open holds one
    up to streams.IDLE_SECONDS) before exiting.  Registered with threading's exit hooks, which
    run before those that join the threads of thread pools."""
    for server in list(_running):
        try:
            server.stop()
        except Exception:  # noqa: BLE001 - the process is ending
            pass


threading._register_atexit(_stop_at_exit)  # type: ignore[attr-defined]


class ServerDef:
    """The definition of a server: cluster, job name, task index, protocol, default config."""

    def __init__(
        self,
        cluster: ClusterSpec | dict[str, Any],
        job_name: str,
        task_index: int,
        protocol: str = "grpc",
        default_session_config: ConfigProto | None = None,
    ) -> None:
        self.cluster = cluster
        self.job_name = job_name
        self.task_index = task_index
        self.protocol = protocol
        self.default_session_config = default_session_config

    def __repr__(self) -> str:
        return "ServerDef(cluster=%s, job_name=%r, task_index=%d, protocol=%r)" % (
            self.cluster,
            self.job_name,
            self.task_index,
            self.protocol,
        )


class _TokenInterceptor(grpc.ServerInterceptor):
    def __init__(self, token):
        self._token = token.encode()

        def refuse(request, context):
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong cluster token")

        self._refuse = refuse

    def intercept_service(self, continuation, handler_call_details):
        for k, v in handler_call_details.invocation_metadata or ():
            if k == TOKEN_HEADER:
                got = v.encode() if isinstance(v, str) else bytes(v)
                if hmac.compare_digest(got, self._token):
                    return continuation(handler_call_details)
        handler = continuation(handler_call_details)
        if handler is None:
            return None
        if handler.request_streaming and handler.response_streaming:
            return grpc.stream_stream_rpc_method_handler(lambda it, ctx: self._refuse(None, ctx))
        if handler.request_streaming:
            return grpc.stream_unary_rpc_method_handler(lambda it, ctx: self._refuse(None, ctx))
        if handler.response_streaming:
            return grpc.unary_stream_rpc_method_handler(self._refuse)
        return grpc.unary_unary_rpc_method_handler(self._refuse)


def _split_address(address):
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise errors.InvalidArgumentError(
            None, None, 'Could not parse port for local server from "%s"' % address
        )
    return host, int(port)


def _server_def(server_or_cluster_def, job_name, task_index, protocol, config):
    """``(ClusterSpec, job name, task index, config)`` of a Server's arguments, with TF's
    checks and messages."""
    if isinstance(server_or_cluster_def, ServerDef):
        sd = server_or_cluster_def
        spec = ClusterSpec(sd.cluster)
        job_name = sd.job_name if job_name is None else job_name
        task_index = sd.task_index if task_index is None else task_index
        protocol = protocol or sd.protocol
        config = config if config is not None else sd.default_session_config
    else:
        spec = ClusterSpec(server_or_cluster_def)
    job_name, task_index = _task_of(spec, job_name, task_index)
    protocol = protocol or "grpc"
    if protocol != "grpc":
        raise errors.InvalidArgumentError(
            None,
            None,
            "No server factory registered for the given ServerDef: protocol %r" % protocol,
        )
    if config is not None and not isinstance(config, ConfigProto):
        raise TypeError("config must be a tf.ConfigProto, but got %s" % type(config))
    return spec, job_name, task_index, config


def _task_of(spec, job_name, task_index):
    if job_name is None:
        if len(spec.jobs) != 1:
            raise ValueError("Must specify an explicit `job_name`.")
        job_name = spec.jobs[0]
    if job_name not in spec.jobs:
        raise ValueError("No such job in cluster: %r" % job_name)
    if task_index is None:
        indices = spec.task_indices(job_name)
        if len(indices) != 1:
            raise ValueError("Must specify an explicit `task_index`.")
        task_index = indices[0]
    if task_index not in spec.task_indices(job_name):
        raise errors.InvalidArgumentError(
            None, None, 'Task %d was not defined in job "%s"' % (task_index, job_name)
        )
    return job_name, task_index


class Server:
    """``tf.train.Server(server_or_cluster_def, job_name=None, task_index=None, protocol=None,
    config=None, start=True, token=None)``."""

    def __init__(
        self,
        server_or_cluster_def: ServerDef | ClusterSpec | dict[str, Any],
        job_name: str | None = None,
        task_index: int | None = None,
        protocol: str | None = None,
        config: ConfigProto | None = None,
        start: bool = True,
        token: str | None = None,
    ) -> None:
        spec, job_name, task_index, config = _server_def(
            server_or_cluster_def, job_name, task_index, protocol, config
        )
        self._config = config if config is not None else ConfigProto()
        host, port = _split_address(spec.task_address(job_name, task_index))
        self.job_name, self.task_index = job_name, task_index
        self._cluster = {
            j: dict((i, spec.task_address(j, i)) for i in spec.task_indices(j)) for j in spec.jobs
        }
        self.token = token if token is not None else os.environ.get("MINITF_CLUSTER_TOKEN")
        self._lock = threading.Lock()
        self._started = False
        self._stopped = False
        self._joined = False
        self._stop_event = threading.Event()
        devices = devices_mod.local_devices(self._config, job_name, task_index)
        self.worker = Worker(self, devices, self._config)
        self.master = Master(self)
        self._pools, self._grpc = self._grpc_server(job_name, task_index)
        bound = self._bind(host, port)
        self.bound_port = bound
        self.bound_address = "%s:%d" % (host, bound)
        self._cluster[job_name][task_index] = self.bound_address
        if start:
            self.start()

    def _grpc_server(self, job_name, task_index):
        """The grpcio server with the master and worker services, checking the cluster token if
        there is one; each class of method has its own pool of handler threads
        (:data:`HANDLER_POOLS`)."""
        interceptors = [_TokenInterceptor(self.token)] if self.token else []
        name = "minitf-grpc-%s-%d" % (job_name, task_index)
        pools = {
            cls: concurrent.futures.ThreadPoolExecutor(n, thread_name_prefix="%s-%s" % (name, cls))
            for cls, (n, _) in HANDLER_POOLS.items()
        }
        pool_of = {m: pools[cls] for cls, (_, methods) in HANDLER_POOLS.items() for m in methods}
        server = grpc.server(
            pools["control"],
            interceptors=interceptors,
            options=wire.GRPC_OPTIONS + (("grpc.so_reuseport", 0),),
            maximum_concurrent_rpcs=MAX_CONCURRENT_RPCS,
        )
        services.add_to_server(server, "MasterService", self.master, pool_of)
        services.add_to_server(server, "WorkerService", self.worker, pool_of)
        return list(pools.values()), server

    def _bind(self, host, port):
        """Binds the host of the server's own cluster entry (``localhost``: 127.0.0.1); the
        port bound (``port`` 0: a free one)."""
        bind_host = "127.0.0.1" if host == "localhost" else host
        bind = "[%s]:%d" % (bind_host, port) if ":" in bind_host else "%s:%d" % (bind_host, port)
        try:
            bound = self._grpc.add_insecure_port(bind)
        except RuntimeError:
            bound = 0
        if not bound:
            self._shutdown()
            raise errors.UnknownError(None, None, "Could not start gRPC server")
        return bound

    # -- TF API ------------------------------------------------------------------------------
    @staticmethod
    def create_local_server(config: ConfigProto | None = None, start: bool = True) -> Server:
        return Server({"local": ["localhost:0"]}, protocol="grpc", config=config, start=start)

    @property
    def target(self) -> str:
        return "grpc://localhost:%d" % self.bound_port

    @property
    def server_def(self) -> ServerDef:
        return ServerDef(
            self.cluster_spec().as_cluster_def(),
            self.job_name,
            self.task_index,
            "grpc",
            self._config,
        )

    @property
    def config(self) -> ConfigProto:
        return self._config

    def cluster_spec(self) -> ClusterSpec:
        return ClusterSpec({j: dict(t) for j, t in self._cluster.items()})

    def task_address(self, job: str, task: int) -> str:
        try:
            addr = self._cluster[job][task]
        except KeyError:
            raise errors.InvalidArgumentError(
                None, None, "Unknown task /job:%s/task:%s" % (str(job)[:100], task)
            ) from None
        return addr

    def start(self) -> None:
        with self._lock:
            if self._stopped:
                raise errors.FailedPreconditionError(None, None, "Server has stopped.")
            if self._joined and not self._started:
                raise errors.FailedPreconditionError(
                    None, None, "Server has been joined without being started."
                )
            if not self._started:
                self._grpc.start()
                self._started = True
                _running.add(self)
                master_interface.register(self)  # sessions in this process: direct calls

    def join(self, timeout: float | None = None) -> None:
        """Blocks until the server stops (or ``timeout`` seconds); returns at once if it was
        never started."""
        with self._lock:
            if not self._started:
                self._joined = True
                return
        self._stop_event.wait(timeout)

    def stop(self, grace: float | None = None) -> None:
        """Stops serving and frees the port (minitf only: TF cannot stop a server)."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
        _running.discard(self)
        master_interface.unregister(self)
        self._shutdown(grace)

    def _shutdown(self, grace=None):
        try:
            self.worker.close()
        finally:
            self.master.close()
            self._grpc.stop(grace).wait(5)
            for pool in self._pools:
                pool.shutdown(wait=False, cancel_futures=True)
            self._stop_event.set()

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc: Any) -> Literal[False]:
        self.stop()
        return False

    def __del__(self):
        try:
            if self._started and not self._stopped:
                self.stop()
        except Exception:  # noqa: BLE001
            pass
