"""The channels from one process to the tasks of its cluster (TF's ``WorkerCache``).

Book section: "The Master and Worker Services".  A master talks to the worker service of every
task, a worker to its peers (``RecvTensor``), a client to a master: each keeps one
:class:`Channels`, which holds one gRPC channel per peer address (made on first use), stubs of
the two services on it, and the pools of open step calls (``streams.py``).  :func:`rpc_error`
turns a failed call into the OpError TF would raise, naming the task that failed.
"""

import os
import threading

import grpc

from minitf.distributed import services, streams, wire
from minitf.framework import errors

#: The metadata entry carrying a cluster's shared-secret token (``Server(token=...)``).
TOKEN_HEADER = "minitf-cluster-token"


def client_metadata(token=None):
    token = token if token is not None else os.environ.get("MINITF_CLUSTER_TOKEN")
    return ((TOKEN_HEADER, token),) if token else ()


#: A lost peer is tried again after 100 ms, then at most every second (a restarted task is
#: reached at once).  gRPC reads ``min_reconnect_backoff_ms`` as something else: the least time
#: one connection attempt is given to complete, up to the peer's first HTTP/2 SETTINGS frame.
#: It stays at gRPC's 20 s: at 100 ms a busy machine's server that answered a new connection
#: late failed the call ("connection attempt timed out before receiving SETTINGS frame"), an
#: UnavailableError on which a MonitoredTrainingSession re-creates its session (a chief
#: initialises the model again).  A task that is down refuses at once, whatever this is.
_RECONNECT_OPTIONS = (
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 20000),
    ("grpc.max_reconnect_backoff_ms", 1000),
    ("grpc.use_local_subchannel_pool", 1),
)


class Channels:
    """One gRPC channel (and stubs, and pools of open step calls) per peer address, made on
    first use.

    ``single_threaded_streams``: unary-stream calls (RecvTensor) are read on the calling thread
    instead of through a "channel spin" thread that gRPC starts for every call when the channel
    has no other call in flight: about 100-200 us less per call.  A failing step still cancels
    them from another thread (``call.cancel()``), which ends the reader's wait with CANCELLED
    (the fault tests in test_distributed.py do it).
    """

    def __init__(self, token=None, single_threaded_streams=False):
        self._lock = threading.Lock()
        self._channels = {}
        self._stubs = {}
        self._pools = {}
        self._token = token
        self._options = wire.GRPC_OPTIONS + _RECONNECT_OPTIONS
        if single_threaded_streams:
            from grpc import experimental

            self._options += ((experimental.ChannelOptions.SingleThreadedUnaryStream, 1),)

    @property
    def metadata(self):
        return client_metadata(self._token)

    def _stub(self, address, service):
        stub = self._stubs.get((address, service))
        if stub is None:
            with self._lock:
                ch = self._channels.get(address)
                if ch is None:
                    ch = self._channels[address] = grpc.insecure_channel(
                        address, options=self._options
                    )
                stub = self._stubs[address, service] = services.Stub(ch, service)
        return stub

    def worker(self, address):
        """The worker service of the task at ``address`` (a services.Stub)."""
        return self._stub(address, "WorkerService")

    def master(self, address):
        """The master service of the task at ``address`` (a services.Stub)."""
        return self._stub(address, "MasterService")

    def steps(self, address, method):
        """The :class:`streams.StreamPool` of ``method`` ("RunSteps" of the master service,
        "RunGraphs" or "RecvTensorsSteps" of the worker service) to the task at ``address``."""
        pool = self._pools.get((address, method))
        if pool is None:
            stub = self._stub(address, services.SERVICE_OF[method])
            start, metadata = getattr(stub, method), self.metadata
            with self._lock:
                pool = self._pools.get((address, method))
                if pool is None:
                    pool = self._pools[address, method] = streams.StreamPool(
                        lambda requests: start(requests, metadata=metadata)
                    )
        return pool

    def failed(self, address, e):
        """Drops the channel to a peer that did not answer, so that a restarted task is
        reached at once rather than after the channel's reconnect backoff.  A failure the peer
        reported itself (even UNAVAILABLE: some task behind it is down) says nothing about the
        channel, which other calls may be using."""
        if (
            e.code() == grpc.StatusCode.UNAVAILABLE
            and not streams.is_reported(e)
            and not isinstance(e, streams.ChannelClosed)  # (it may have a fresh one already)
        ):
            self.forget(address)

    def forget(self, address):
        with self._lock:
            ch = self._channels.pop(address, None)
            self._stubs = {k: v for k, v in self._stubs.items() if k[0] != address}
            pools = [p for k, p in self._pools.items() if k[0] == address]
            self._pools = {k: p for k, p in self._pools.items() if k[0] != address}
        for p in pools:
            p.close()
        if ch is not None:
            ch.close()

    def close(self):
        with self._lock:
            chans, self._channels, self._stubs = list(self._channels.values()), {}, {}
            pools, self._pools = list(self._pools.values()), {}
        for p in pools:
            p.close()
        for ch in chans:
            ch.close()


def rpc_error(e, task=None):
    """The OpError of a failed RPC (``From <task>:`` prefixed when the peer is known and the
    message does not name a task yet).

    A call its caller did not cancel (callers check that first) and whose peer did not report
    CANCELLED itself was cut on its way: another call found the peer gone and closed the
    channel (gRPC: "Channel closed!"), or the peer's server went away mid-call.  That reads
    as TF reads a lost peer, UnavailableError, derived from the failure that cut it."""
    code = e.code()
    if code == grpc.StatusCode.CANCELLED and not streams.is_reported(e):
        err = errors.UnavailableError(None, None, e.details() or "Cancelled")
        err.derived = True
    else:
        err = wire.error_from_status(code, e.details())
        err.derived = streams.is_derived(e)
    if task and not err.message.startswith("From /job:"):
        derived = err.derived
        err = type(err)(None, None, "From %s:\n%s" % (task, err.message))
        err.derived = derived
    return err
