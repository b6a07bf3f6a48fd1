"""Steps on gRPC calls that stay open: the RunSteps, RunGraphs and RecvTensorsSteps streams.

Book section: "The Master and Worker Services".  Starting a call costs gRPC Python about as
much again as passing one message each way on a call that is already open (on a 2-core
machine about 450 us against 200 us).  A small step crosses one hop per task it involves, so
the client and every master keep a few calls open to each peer (:class:`StreamPool`) and run
each step on one of them (and every worker, for the RecvTensors requests of its steps):

* the step is one request message (every feed or send inline; larger ones take the
  one-step RunStep / RunGraph calls);
* its answer is one or more response messages, the last of which carries a ``StepEnd``
  (field 5 of RunStepResponse, RunGraphResponse and RecvTensorsResponse) with the step's
  status; a step that fails leaves the call open for the next one;
* a step that runs past its deadline, or that its caller abandons, cancels its call (the
  next step opens a fresh one): :data:`watchdog` enforces the deadlines that gRPC would
  enforce on a one-step call, and closes calls left idle for :data:`IDLE_SECONDS` (each open
  call holds a thread of the peer's server).

A failure reported in a ``StepEnd`` raises :class:`StepError`, which reads like the
``grpc.RpcError`` of a failed one-step call, so callers handle both in one place.
"""

import queue
import threading
import time
import weakref

import grpc

from minitf.distributed import protocol_pb2 as pb
from minitf.distributed import wire

#: Trailing metadata key marking a failure that the peer reported itself (its handler failed:
#: the peer is up, however grave the code) ...
REPORTED_HEADER = "minitf-reported"
#: ... and one marking a failure caused by another task's (TF's "derived" status).
DERIVED_HEADER = "minitf-derived"
END_FIELD = pb.RunStepResponse.DESCRIPTOR.fields_by_name["end"].number
assert END_FIELD == pb.RunGraphResponse.DESCRIPTOR.fields_by_name["end"].number
assert END_FIELD == pb.RecvTensorsResponse.DESCRIPTOR.fields_by_name["end"].number
_END_KEY = END_FIELD << 3 | 2
#: Open calls kept per peer and method between steps, and how long one may stay unused.
MAX_IDLE = 2
IDLE_SECONDS = 30.0
_CODES = {c.value[0]: c for c in grpc.StatusCode}
_OK_END = pb.RunStepResponse(end=pb.StepEnd()).SerializeToString()


def _headers(reported, derived):
    return ((REPORTED_HEADER, "1"),) * bool(reported) + ((DERIVED_HEADER, "1"),) * bool(derived)


class StepError(grpc.RpcError):
    """A step's failure reported in its ``StepEnd`` (``reported``), or one of a step on an open
    call that the caller saw (its deadline passing, the call closing): ``code()``,
    ``details()`` and ``trailing_metadata()`` as on the RpcError of a failed one-step call."""

    def __init__(self, code, details, derived=False, reported=False):
        super().__init__(details)
        self._code, self._details = code, details
        self._metadata = _headers(reported, derived)

    def code(self):
        return self._code

    def details(self):
        return self._details

    def trailing_metadata(self):
        return self._metadata


class ChannelClosed(StepError):
    """A call that could not start because its channel was closed meanwhile: another call
    found the peer gone and dropped the channel (``Channels.failed``).  UNAVAILABLE, derived
    from that failure; it says nothing new about the peer (a fresh channel may reach it)."""

    def __init__(self, peer="the peer"):
        super().__init__(grpc.StatusCode.UNAVAILABLE, "The channel to %s was closed." % peer, True)


def abort(context, exc, derived=False):
    """Ends the RPC of a handler that failed with ``exc`` (its status from
    wire.status_from_error), marked as reported by this peer (and as ``derived``)."""
    status = wire.status_from_error(exc)
    forget_frames(exc)
    context.set_trailing_metadata(_headers(True, derived))
    context.abort(*status)


def forget_frames(exc):
    """Drops the tracebacks of ``exc`` and of the exceptions it was raised from or during.

    A traceback keeps every frame it passed through alive, and with them their locals: a
    failed step's feeds and values (64 MiB each for a large feed).  A handler reports an
    exception by aborting its call, which raises again from inside its ``except`` block, so
    the failure's frames would live as long as whatever holds the aborting exception (gRPC's
    server keeps it with the call's state) or until a full garbage collection.  TF frees a
    failed step's tensors as soon as the step ends; so does minitf once the frames are gone.
    """
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        exc.__traceback__ = None
        if exc.__cause__ is not None and exc.__context__ is not None:
            forget_frames(exc.__cause__)
        exc = exc.__context__ if exc.__context__ is not None else exc.__cause__


def _has_header(e, key):
    try:
        return any(k == key for k, _ in (e.trailing_metadata() or ()))
    except Exception:  # noqa: BLE001 - an RpcError without a call behind it
        return False


def is_reported(e):
    """Whether the peer itself reported the failure of RPC error ``e`` (its handler failed),
    rather than the call failing on its way (no peer, connection lost, deadline)."""
    return _has_header(e, REPORTED_HEADER)


def is_derived(e):
    """Whether RPC error ``e`` reports a failure caused by another task's."""
    return _has_header(e, DERIVED_HEADER)


# -- the server's side --------------------------------------------------------------------------


def end_message(error=None):
    """A serialized response holding only the ``StepEnd`` of a step that ran (``error`` None)
    or failed with ``error``."""
    if error is None:
        return _OK_END
    status, details = wire.status_from_error(error)
    return pb.RunStepResponse(
        end=pb.StepEnd(
            code=status.value[0], message=details, derived=bool(getattr(error, "derived", False))
        )
    ).SerializeToString()


class Last:
    """A response message that its step's answer knows to be the last (see :func:`answer`)."""

    __slots__ = ("message",)

    def __init__(self, message):
        self.message = message


def answer(messages, hold=True):
    """Serializes the response messages of one step, its ``StepEnd`` appended to the last
    unless that one is large (protobuf reads concatenated messages as one).  With ``hold``
    False a message goes as soon as it is made, unless ``messages`` marks it as the last (a
    :class:`Last`), and the ``StepEnd`` alone after an unmarked one: a RecvTensors step,
    whose tensor held back until the next one is ready could wait for ever on a peer that
    first needs it.  An exception from ``messages`` ends the answer with the failure instead
    (what was held back is dropped: the caller discards the values of a failed step)."""
    held = None
    try:
        for m in messages:
            if held is not None:
                yield held
            last = type(m) is Last
            held = wire.serialize(m.message if last else m)
            if not (hold or last):
                yield held
                held = None
        end = end_message()
    except Exception as e:  # noqa: BLE001 - every failure is reported in the StepEnd
        held, end = None, end_message(e)
    if held is not None and len(held) > wire.SMALL_TENSOR_BYTES:
        yield held  # a large last message goes as it is: joining it would copy it
        held = None
    yield held + end if held is not None else end


def serve_steps(request_iterator, context, run_one, hold=True):
    """The body of a RunSteps / RunGraphs / RecvTensorsSteps handler: answers each request
    message with ``answer(run_one(requests, on_cancel), hold)``, where ``requests`` iterates
    over that one message and ``on_cancel(fn)`` asks for ``fn()`` to be called if the call
    ends during the step (the client went away)."""
    current = [None]

    def fire():
        fn = current[0]
        if fn is not None:
            fn()

    def on_cancel(fn):
        current[0] = fn

    context.add_callback(fire)
    for raw in request_iterator:
        try:
            yield from answer(run_one(iter((raw,)), on_cancel), hold)
        finally:
            current[0] = None


# -- the caller's side --------------------------------------------------------------------------


def split_end(raw):
    """``(the message's bytes without its StepEnd or None if nothing else, StepEnd or None)``
    of one serialized response; malformed bytes raise InvalidArgumentError."""
    view = memoryview(raw)
    rest, end, field_start = [], None, 0
    for key, start, stop in wire.message_fields(view, "RunStepResponse"):
        if key == _END_KEY:
            end = pb.StepEnd()
            try:
                end.MergeFromString(view[start:stop])
            except Exception:  # noqa: BLE001 - protobuf's DecodeError
                raise wire.malformed("StepEnd") from None
        else:
            rest.append((field_start, stop))
        field_start = stop
    if end is None:
        return raw, None
    if not rest:
        return None, end
    if len(rest) == 1:
        return bytes(view[rest[0][0] : rest[0][1]]), end
    return b"".join(view[a:b] for a, b in rest), end


class _Call:
    """One open call: requests go through a queue that gRPC's sending thread reads."""

    def __init__(self, pool):
        self.pool = pool
        self.idle_since = None
        self._requests = queue.SimpleQueue()
        self._call = pool.open(iter(self._requests.get, None))

    def broken(self):
        return self._call.done()

    def cancel(self):
        self._requests.put(None)  # lets gRPC's sending thread end
        self._call.cancel()

    def step(self, request, timeout):
        """Starts one step (the request is sent at once): a :class:`Step` to iterate over for
        its answer and to cancel it."""
        return Step(self, request, timeout)


class Step:
    """One step on an open call.  Iterating yields the serialized answer (the StepEnd taken
    off); a failure the step reports raises :class:`StepError`, a broken call its
    ``grpc.RpcError``, the deadline passing a DEADLINE_EXCEEDED StepError.  The call goes back
    to its pool when the step ended; stopping early or failing cancels it.

    ``cancel()`` (from any thread: a failing partition, the deadline watchdog, a client gone
    away) aborts the step, and does nothing once the step has ended: by then its call may
    already carry another step."""

    def __init__(self, call, request, timeout):
        self.call = call
        self.expired = False
        self._lock = threading.Lock()
        self._over = False
        watchdog.watch(self, time.monotonic() + timeout)
        call._requests.put(request)
        self._answer = self._read()

    def __iter__(self):
        return self

    def __next__(self):
        return next(self._answer)

    def close(self):
        self._answer.close()

    def cancel(self):
        with self._lock:
            if self._over:
                return
            self._over = True
        self.call.cancel()

    def _read(self):
        ended = False
        try:
            while True:
                try:
                    raw = next(self.call._call)
                except StopIteration:
                    raise StepError(
                        grpc.StatusCode.UNAVAILABLE,
                        "The peer closed the call before the step ended.",
                    ) from None
                except grpc.RpcError:
                    if self.expired:
                        raise StepError(
                            grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded"
                        ) from None
                    raise
                rest, end = split_end(raw)
                if rest is not None:
                    yield rest
                if end is not None:
                    ended = True
                    if end.code:
                        raise StepError(
                            _CODES.get(end.code, grpc.StatusCode.UNKNOWN),
                            end.message,
                            end.derived,
                            reported=True,
                        )
                    return
        finally:
            watchdog.unwatch(self)
            with self._lock:
                cancelled, self._over = self._over, True
            if ended and not cancelled:
                self.call.pool.release(self.call)
            else:
                self.call.cancel()


class StreamPool:
    """Open calls of one streaming method to one peer, reused step after step.

    ``open_call(request_iterator)`` starts a call (a ``grpc.StreamStreamMultiCallable`` with
    its metadata bound; kept as ``pool.open``).  ``acquire()`` gives a call for the caller's
    sole use: ``call.step(request, timeout)`` runs one step on it (a :class:`Step`) and gives it
    back when the step ended.
    """

    def __init__(self, open_call):
        self.open = open_call
        self._idle = []
        self._lock = threading.Lock()
        self._closed = False

    def acquire(self):
        while True:
            with self._lock:
                call = self._idle.pop() if self._idle else None
            if call is None:
                return _Call(self)  # (ChannelClosed when the channel was closed meanwhile)
            if not call.broken():  # a peer that went away while the call was idle
                return call
            call.cancel()

    def release(self, call):
        with self._lock:
            keep = not self._closed and len(self._idle) < MAX_IDLE
            if keep:
                call.idle_since = time.monotonic()
                self._idle.append(call)
        if keep:
            watchdog.keep(self)
        else:
            call.cancel()

    def reap(self, now):
        """Closes the calls unused for IDLE_SECONDS; True while some stay open."""
        with self._lock:
            old = [c for c in self._idle if now - c.idle_since > IDLE_SECONDS]
            self._idle = [c for c in self._idle if c not in old]
            left = bool(self._idle)
        for c in old:
            c.cancel()
        return left

    def close(self):
        with self._lock:
            self._closed = True
            calls, self._idle = self._idle, []
        for c in calls:
            c.cancel()


class _Watchdog:
    """One daemon thread per process: cancels the steps past their deadlines (every ``tick``
    seconds while steps run) and closes idle calls (see StreamPool.reap)."""

    tick = 0.05
    rest_after = 2.0  # seconds without steps before it sleeps until the next one

    def __init__(self):
        self._cond = threading.Condition()
        self._deadlines = {}
        self._pools = weakref.WeakSet()
        self._thread = None
        self._resting = False
        self._last = 0.0

    def watch(self, step, deadline):
        with self._cond:
            self._deadlines[step] = deadline
            self._last = time.monotonic()
            self._wake()

    def unwatch(self, step):
        with self._cond:
            self._deadlines.pop(step, None)

    def keep(self, pool):
        with self._cond:
            self._pools.add(pool)

    def _wake(self):
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(
                target=self._run, name="minitf-step-watchdog", daemon=True
            )
            self._thread.start()
        elif self._resting:
            self._cond.notify()

    def _run(self):
        next_reap = 0.0
        while True:
            with self._cond:
                now = time.monotonic()
                if not self._deadlines and now - self._last > self.rest_after:
                    self._resting = True  # only idle calls left: reap them once a second
                    self._cond.wait(1.0 if len(self._pools) else None)
                    self._resting = False
                    now = time.monotonic()
                expired = [c for c, d in self._deadlines.items() if d <= now]
                for c in expired:
                    del self._deadlines[c]
                pools = list(self._pools) if now >= next_reap else ()
            for c in expired:
                c.expired = True
                c.cancel()
            if pools:
                next_reap = now + 1.0
                for p in pools:
                    if not p.reap(now):
                        with self._cond:
                            self._pools.discard(p)
            time.sleep(self.tick)


watchdog = _Watchdog()
