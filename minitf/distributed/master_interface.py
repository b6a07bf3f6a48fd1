"""How a client reaches a master: over gRPC, or by direct calls to a server in this process.

Book section: "The Master and Worker Services".  TF's client side has one interface with two
implementations (``distributed_runtime/master_interface.h``): ``GrpcRemoteMaster`` sends each
call to the master's task, and ``LocalMaster`` calls the master of a ``tf.train.Server``
running in the client's own process directly, so the first hop of a step costs no RPC.  TF
uses the local one whenever the target is such a server's ``target``, unless the session's
``config.rpc_options.use_rpc_for_inprocess_master`` asks for gRPC anyway (the way to test the
RPC path with in-process servers).  The two give the same results and the same errors.

Both offer ``call(method, request, timeout)`` for the control methods of the master service,
``run_step(first, parts, timeout)`` (an iterator over the serialized response messages of a
step; ``parts``: the request messages after ``first``, None when the step's feeds all fit in
``first``) and ``failed(rpc_error)`` (what a failed call says about the way to the master).
"""

import itertools
import threading
import time
import weakref

import grpc

from minitf.distributed import streams, wire
from minitf.distributed.worker_cache import Channels

_channels = Channels(single_threaded_streams=True)  # the client's, shared by its sessions


class RemoteMaster:
    """The master of the task at ``address`` (``host:port``), over gRPC."""

    def __init__(self, address):
        self.address = address

    def call(self, method, request, timeout):
        for attempt in (0, 1):
            stub = _channels.master(self.address)
            try:
                return getattr(stub, method)(request, timeout=timeout, metadata=_channels.metadata)
            except streams.ChannelClosed:  # another session dropped it meanwhile: a fresh one
                if attempt:
                    raise streams.ChannelClosed(self.address) from None

    def run_step(self, first, parts, timeout):
        """A step whose feeds all fit in ``first`` runs on one of the open RunSteps calls,
        others on a RunStep call of their own."""
        if parts is None:
            return _channels.steps(self.address, "RunSteps").acquire().step(first, timeout)
        return self.call("RunStep", itertools.chain((first,), parts), timeout)

    def failed(self, e):
        _channels.failed(self.address, e)


class _Context:
    """What a servicer method uses of its gRPC context, for a direct call."""

    def __init__(self, timeout):
        self._deadline = None if timeout is None else time.monotonic() + timeout
        self._callbacks = []
        self._metadata = ()

    def time_remaining(self):
        return None if self._deadline is None else max(0.0, self._deadline - time.monotonic())

    def add_callback(self, fn):
        self._callbacks.append(fn)
        return True

    def set_trailing_metadata(self, metadata):
        self._metadata = metadata

    def abort(self, code, details):
        raise streams.StepError(
            code, details, reported=True, derived=(streams.DERIVED_HEADER, "1") in self._metadata
        )

    def ended_early(self):
        """The caller stopped reading before the answer ended (it failed or was
        interrupted): as when a gRPC client goes away."""
        for fn in self._callbacks:
            fn()


class LocalMaster:
    """The master of a server of this process, called directly: requests and responses are
    the messages themselves, except for a step's, which the master service takes and gives
    serialized (``services.RAW_REQUESTS`` / ``RAW_RESPONSES``)."""

    def __init__(self, server):
        self._server = server

    def call(self, method, request, timeout):
        return getattr(self._master(), method)(request, _Context(timeout))

    def run_step(self, first, parts, timeout):
        master = self._master()
        context = _Context(timeout)
        requests = map(wire.serialize, itertools.chain((first,), parts or ()))
        return _answer(master.RunStep(requests, context), context)

    def failed(self, e):
        pass

    def _master(self):
        server = self._server
        if server._stopped:
            raise streams.StepError(
                grpc.StatusCode.UNAVAILABLE, "The server of %s has stopped." % server.target
            )
        return server.master


def _answer(responses, context):
    ended = False
    try:
        for m in responses:
            yield wire.serialize(m)
        ended = True
    finally:
        if not ended:
            context.ended_early()


_lock = threading.Lock()
_local = weakref.WeakValueDictionary()  # target -> a started Server of this process


def register(server):
    """Makes ``server.target`` reach ``server``'s master directly (Server.start)."""
    with _lock:
        _local[server.target] = server


def unregister(server):
    """Server.stop: later sessions on its target go through gRPC (and find nobody)."""
    with _lock:
        if _local.get(server.target) is server:
            del _local[server.target]


def for_target(target, config=None):
    """The master a session on ``grpc://host:port`` ``target`` talks to: a server's target in
    this process gives its LocalMaster unless ``config.rpc_options`` asks for gRPC."""
    if isinstance(target, bytes):
        target = target.decode()
    rpc = config is not None and config.rpc_options.use_rpc_for_inprocess_master
    server = None if rpc else _local.get(target)
    if server is not None:
        return LocalMaster(server)
    return RemoteMaster(target[len("grpc://") :])
