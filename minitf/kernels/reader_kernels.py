"""Reader kernels: the reader resources and the asynchronous ``ReaderReadV2``.

Book section: "Loading Data Directly from the Graph" (TF's core/kernels/reader_base.cc and
``text_line_reader_op.cc``, ``fixed_length_record_reader_op.cc``, ``tf_record_reader_op.cc``,
``whole_file_read_ops.cc``, ``identity_reader_op.cc``).  A reader op (``TextLineReaderV2``
...) finds or makes its :class:`Reader` at its first run, as a queue op does: private
(``_<n>_<op name>``, one per session) unless it has a ``shared_name``.  A reader holds a
*work unit* (a file name dequeued from the filename queue) and a record source over that file.

``ReaderReadV2`` is asynchronous like the queue kernels: a read that needs a new file name
becomes a dequeue attempt of the queue and holds no thread while it waits.  Reads of one reader
are served one at a time in arrival order (TF holds the reader's mutex across the whole read).
Files are read whole when their work unit starts and closed at once, so a reader never keeps a
file handle open between reads.  WholeFileReader and IdentityReader save and restore their state
as TF's ``ReaderBaseState`` proto (``ReaderSerializeStateV2``, ``ReaderRestoreStateV2``).
"""

from __future__ import annotations

import threading
from collections import deque

import numpy as np

from minitf.framework import dtypes, errors
from minitf.kernels.registry import register
from minitf.kernels.resource_kernels import find_or_make, resource_op
from minitf.kernels.tensor_ops import invalid_argument
from minitf.lib import tf_record


def _load(path):
    """The whole file, with TF's errors for what cannot be opened."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        raise errors.NotFoundError(None, None, "%s; No such file or directory" % path) from None
    except IsADirectoryError:
        raise errors.FailedPreconditionError(None, None, "%s; Is a directory" % path) from None
    except PermissionError:
        raise errors.PermissionDeniedError(None, None, "%s; Permission denied" % path) from None


# -- record sources: one per work unit; ``next()`` -> (record or None, at_end) -----------------


class _TextLines:
    """TextLineReader: lines split on ``\\n`` (one trailing ``\\r`` dropped); the last line
    counts without a newline; header lines are skipped but counted in the keys."""

    def __init__(self, work, skip_header_lines):
        self.work, self.data, self.pos, self.line = work, _load(work), 0, 0
        while self.line < skip_header_lines and self._line() is not None:
            self.line += 1

    def _line(self):
        if self.pos >= len(self.data):
            return None
        end = self.data.find(b"\n", self.pos)
        last = end < 0
        text = self.data[self.pos :] if last else self.data[self.pos : end]
        self.pos = len(self.data) if last else end + 1
        if text.endswith(b"\r"):
            text = text[:-1]
        return None if last and not text else text

    def next(self):
        text = self._line()
        if text is None:
            return None, True
        self.line += 1
        return ("%s:%d" % (self.work, self.line), text), False


class _FixedLength:
    """FixedLengthRecordReader: record k is ``record_bytes`` bytes at ``header + k * hop``,
    produced only while ``record_bytes + footer_bytes`` bytes remain from its start.  A file
    shorter than its header fails with TF's OutOfRangeError ("reached end of file"), which a
    queue runner takes for the end of the input."""

    def __init__(self, work, record, header, footer, hop):
        self.work, self.data = work, _load(work)
        if len(self.data) < header:  # TF's SkipNBytes over the header fails the work unit
            raise errors.OutOfRangeError(None, None, "reached end of file")
        self.record, self.footer, self.hop = record, footer, hop or record
        self.start, self.index = header, 0

    def next(self):
        if self.start + self.record + self.footer > len(self.data) or (
            self.index and self.hop == 0
        ):
            return None, True
        value = self.data[self.start : self.start + self.record]
        key = "%s:%d" % (self.work, self.index)
        self.start += self.hop
        self.index += 1
        return (key, value), False


class _TFRecords:
    """TFRecordReader: keys are byte offsets; a bad record fails every later read too."""

    def __init__(self, work):
        self.work, self.data, self.offset = work, _load(work), 0

    def next(self):
        if self.offset == len(self.data):
            return None, True
        record = tf_record.read_record(self.data, self.offset)
        if record is None:  # a partial header: the file ends there, as TF's RecordReader reads
            return None, True
        payload, after = record
        key = "%s:%d" % (self.work, self.offset)
        self.offset = after
        return (key, payload), False


class _WholeFile:
    """WholeFileReader: one record, the file name and the whole contents."""

    def __init__(self, work):
        self.record = (work, _load(work))

    def next(self):
        return self.record, True


class _Identity:
    """IdentityReader: one record, the work item as key and value (no file)."""

    def __init__(self, work):
        self.record = (work, work.encode("utf-8", "surrogateescape"))

    def next(self):
        return self.record, True


# -- the reader resource -----------------------------------------------------------------------


class _Read:
    """One waiting ``read`` / ``read_up_to``: its queue, how many records, what it has."""

    __slots__ = (
        "queue",
        "n",
        "callback",
        "keys",
        "values",
        "attempt",
        "work",
        "sync",
        "cancelled",
        "lock",
    )

    def __init__(self, queue, n, callback):
        self.queue, self.n, self.callback = queue, n, callback
        self.keys, self.values = [], []
        self.attempt = None  # the dequeue attempt of a file name, while it waits
        self.work = None  # (tuple, error) the dequeue ended with, until handled
        self.sync = False  # the dequeue is being submitted by the serving thread
        self.cancelled = False  # the step was cancelled while it waited
        self.lock = threading.Lock()


class Reader:
    """A reader's state (TF's ``ReaderBase``): the current work unit and its record source, the
    counters, and the reads waiting their turn.  ``open_source(work)`` makes the source."""

    def __init__(self, name, open_source, op_name="", serializable=False):
        self.name = name
        self.op_name = op_name  # TF's reader name in its messages: type and op name
        self.serializable = serializable  # WholeFileReader and IdentityReader only
        self._open_source = open_source
        self._lock = threading.Lock()
        self._reads = deque()  # waiting reads; the head is being served
        self._serving = False
        self._source = None
        self.work = ""  # the current (or last) work unit, as TF's ``work_``
        self.work_started = self.work_finished = self.records_produced = 0

    def __repr__(self):
        return "<Reader '%s' produced=%d>" % (self.name, self.records_produced)

    def pending(self):
        """How many reads wait (the one being served included)."""
        with self._lock:
            return len(self._reads)

    def read(self, queue, n, callback) -> _Read:
        """Starts a read of up to ``n`` records of one file; ``callback(keys_values, error)``."""
        request = _Read(queue, n, callback)
        with self._lock:
            self._reads.append(request)
            if self._serving:
                return request
            self._serving = True
        self._serve()
        return request

    def cancel(self, request):
        """Ends a read that still waits (the step was cancelled)."""
        with self._lock:
            if request not in self._reads:
                return
            waiting = request is not self._reads[0]
            if waiting:
                self._reads.remove(request)
            request.cancelled = True
            attempt = request.attempt
        if waiting:
            request.callback(None, _cancelled())
        elif attempt is not None:
            request.queue.cancel(attempt)  # the dequeue's callback ends the read

    def reset(self):
        """``ReaderResetV2``: forgets the work unit and the counters."""
        with self._lock:
            self._source = None
            self.work = ""
            self.work_started = self.work_finished = self.records_produced = 0

    def state(self):
        """``(work_started, work_finished, num_records_produced, current_work)``: TF's
        ``ReaderBaseState``."""
        with self._lock:
            return self.work_started, self.work_finished, self.records_produced, self.work

    def restore(self, started, finished, produced, work):
        """Takes over a saved state (TF accepts none with a work unit in progress)."""
        with self._lock:
            self.work_started, self.work_finished = started, finished
            self.records_produced, self.work, self._source = produced, work, None

    # -- serving the head read ------------------------------------------------------------------
    def _serve(self):
        """Serves the head read until it must wait for a file name or no read is left."""
        while True:
            with self._lock:
                if not self._reads:
                    self._serving = False
                    return
                head = self._reads[0]
            if not self._advance(head):
                return  # waiting for the queue: the dequeue's callback serves again
            with self._lock:
                self._reads.popleft()

    def _advance(self, request):
        """Moves ``request`` on; True when it ended (its callback called)."""
        while True:
            source = self._source  # a reset from another thread may drop it meanwhile
            if source is None:
                if not self._next_work(request):
                    return False
                error = self._start_work(request)
                if error is not None:
                    return self._end(request, error)
                continue
            try:
                record, at_end = source.next()
            except errors.OpError as e:
                return self._end(request, e)
            with self._lock:
                if record is not None:
                    request.keys.append(record[0])
                    request.values.append(record[1])
                    self.records_produced += 1
                if at_end and self._source is source:
                    self._source = None
                    self.work_finished = self.work_started
            if len(request.keys) == request.n or (at_end and request.keys):
                return self._end(request, None)

    def _end(self, request, error):
        if error is not None:
            request.callback(None, error)
        else:
            request.callback((request.keys, request.values), None)
        return True

    def _next_work(self, request):
        """Asks the queue for a file name; True when the answer is there already."""
        with request.lock:
            request.sync = True
        attempt = request.queue.dequeue(1, lambda r, e: self._on_work(request, r, e))
        with self._lock:
            request.attempt = attempt
            cancelled = request.cancelled
        if cancelled:  # cancelled before the attempt was known: end it now
            request.queue.cancel(attempt)
        with request.lock:
            request.sync = False
            return request.work is not None

    def _on_work(self, request, result, error):
        with request.lock:
            request.work = (result, error)
            if request.sync:
                return  # the serving thread goes on with it
        error = self._start_work(request)
        if error is not None:
            self._end(request, error)
        elif not self._advance(request):
            return
        with self._lock:
            self._reads.popleft()
        self._serve()

    def _start_work(self, request):
        """The dequeued file name becomes the work unit; the error to end the read with."""
        (result, error), request.work = request.work, None
        if error is not None:
            return error
        if len(result) != 1:
            return invalid_argument("Expected single component queue")
        if request.queue.component_types[0] != dtypes.string:
            return invalid_argument("Expected queue with single string component")
        item = np.asarray(result[0], dtype=object)
        if item.size != 1:
            return invalid_argument("Expected to dequeue a one-element string tensor")
        work = item.reshape(-1)[0]
        if isinstance(work, bytes):
            work = work.decode("utf-8", "surrogateescape")
        try:
            source = self._open_source(str(work))
        except errors.OpError as e:
            return e  # not retried: the next read asks for the next file name
        with self._lock:
            self.work_started += 1
            self.work = str(work)
            self._source = source
        return None


def _cancelled():
    return errors.CancelledError(None, None, "Dequeue operation was cancelled")


# -- kernels -----------------------------------------------------------------------------------


def _non_negative(op, *attrs):
    """TF's constructor checks: ``skip_header_lines must be >= 0 not -1``."""
    for attr in attrs:
        value = op.get_attr(attr)
        if value < 0:
            raise invalid_argument("%s must be >= 0 not %d" % (attr, value))


def _uncompressed(op, attr):
    kind = op.get_attr(attr)
    if kind:
        raise errors.UnimplementedError(
            None,
            None,
            "%s: minitf reads uncompressed files only (%s '%s' is not supported; use '')"
            % (op.type, attr, kind),
        )


def _text_line_source(op):
    _non_negative(op, "skip_header_lines")
    skip = op.get_attr("skip_header_lines")
    return lambda work: _TextLines(work, skip)


def _fixed_length_source(op):
    _non_negative(op, "header_bytes", "record_bytes", "footer_bytes", "hop_bytes")
    _uncompressed(op, "encoding")
    sizes = [op.get_attr(a) for a in ("record_bytes", "header_bytes", "footer_bytes", "hop_bytes")]
    return lambda work: _FixedLength(work, *sizes)


def _tf_record_source(op):
    _uncompressed(op, "compression_type")
    return _TFRecords


_SOURCES = {
    "TextLineReaderV2": _text_line_source,
    "FixedLengthRecordReaderV2": _fixed_length_source,
    "TFRecordReaderV2": _tf_record_source,
    "WholeFileReaderV2": lambda op: _WholeFile,
    "IdentityReaderV2": lambda op: _Identity,
}


def _reader_op(op, device):
    """A reader op: its reader, found or made at the kernel's first run (like ``FIFOQueueV2``:
    private ``_<n>_<op name>`` unless ``shared_name``)."""

    def make(name):
        serializable = op.type in ("WholeFileReaderV2", "IdentityReaderV2")
        op_name = "%s '%s'" % (op.type[: -len("V2")], op.name)  # TF's "WholeFileReader 'wr'"
        return Reader(name, _SOURCES[op.type](op), op_name, serializable)

    return resource_op(lambda: find_or_make(op, device, make))


def _as_strings(texts):
    return np.array(
        [t.encode("utf-8", "surrogateescape") if isinstance(t, str) else t for t in texts],
        dtype=object,
    ).reshape(len(texts))


def _read(up_to):
    """``ReaderReadV2`` (one record, scalars) and ``ReaderReadUpToV2`` (vectors)."""

    def factory(op, device):
        def compute(ctx, ins, done):
            reader, queue = ins[0], ins[1]
            n = int(ins[2]) if up_to else 1
            if up_to and n <= 0:  # TF: nothing for 0; a negative count crashes its process
                if n == 0:
                    done((_as_strings([]), _as_strings([])))
                else:
                    done(None, invalid_argument("num_records must be >= 0, not %d" % n))
                return
            token, ended = [], []

            def callback(result, error):
                ended.append(True)
                if token:
                    ctx.remove_on_cancel(token[0])
                if error is not None:
                    done(None, error)
                    return
                keys, values = _as_strings(result[0]), _as_strings(result[1])
                done((keys, values) if up_to else (keys[0], values[0]))

            request = reader.read(queue, n, callback)
            if not ended:
                token.append(ctx.on_cancel(lambda error: reader.cancel(request)))

        return compute

    return factory


def _reset(op, device):
    def compute(ctx, ins):
        ins[0].reset()
        return ()

    return compute


# -- ReaderBaseState, TF's proto of a reader's state (fields 1-3 int64, 4 bytes) ------------------

_STATE_FIELDS = ("work_started", "work_finished", "num_records_produced", "current_work")


def _varint(n):
    n &= (1 << 64) - 1  # negative int64s take ten bytes, as protobuf writes them
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def encode_state(started, finished, produced, work):
    """The wire bytes of a ``ReaderBaseState`` (proto3: zero fields left out)."""
    out = b""
    for number, value in ((1, started), (2, finished), (3, produced)):
        if value:
            out += bytes([number << 3]) + _varint(value)
    work = work.encode("utf-8", "surrogateescape")
    if work:
        out += b"\x22" + _varint(len(work)) + work
    return out


def _read_varint(data, i):
    value, shift = 0, 0
    while True:
        if i >= len(data) or shift > 63:
            raise ValueError("truncated varint")
        byte = data[i]
        value |= (byte & 0x7F) << shift
        i, shift = i + 1, shift + 7
        if not byte & 0x80:
            return value, i


def decode_state(data):
    """``[work_started, work_finished, num_records_produced, current_work]``; ValueError
    when ``data`` is not a ``ReaderBaseState``."""
    state, i = [0, 0, 0, ""], 0
    while i < len(data):
        key, i = _read_varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _read_varint(data, i)
            if 1 <= number <= 3:
                state[number - 1] = value - (1 << 64) if value >= 1 << 63 else value
        elif wire == 2:
            length, i = _read_varint(data, i)
            if i + length > len(data):
                raise ValueError("truncated field")
            if number == 4:
                state[3] = data[i : i + length].decode("utf-8", "surrogateescape")
            i += length
        else:
            raise ValueError("unexpected wire type %d" % wire)
    return state


def _state_text(state):
    """TF's DebugString of the state, in the restore errors."""
    parts = ["%s: %d" % (n, v) for n, v in zip(_STATE_FIELDS, state[:3]) if v]
    if state[3]:
        parts.append('current_work: "%s"' % c_escape(state[3].encode("utf-8", "surrogateescape")))
    return "".join(p + "\n" for p in parts)


def c_escape(data):
    """absl's CEscape: C escapes for quotes, backslash, \\n \\r \\t, octal for the rest."""
    special = {0x0A: "\\n", 0x0D: "\\r", 0x09: "\\t", 0x22: '\\"', 0x27: "\\'", 0x5C: "\\\\"}
    return "".join(special.get(b, chr(b) if 0x20 <= b < 0x7F else "\\%03o" % b) for b in data)


def _serialize_state(op, device):
    def compute(ctx, ins):
        reader = ins[0]
        if not reader.serializable:
            raise errors.UnimplementedError(None, None, "Reader SerializeState")
        return (encode_state(*reader.state()),)

    return compute


def _restore_state(op, device):
    def compute(ctx, ins):
        reader, data = ins[0], np.asarray(ins[1], dtype=object).reshape(-1)[0]
        data = data if isinstance(data, bytes) else str(data).encode()
        if not reader.serializable:
            reader.reset()
            raise errors.UnimplementedError(None, None, "Reader RestoreState")
        try:
            state = decode_state(data)
        except ValueError:
            reader.reset()
            raise invalid_argument(
                "Could not parse state for %s: %s" % (reader.op_name, c_escape(data))
            ) from None
        _check_state(reader, state)
        reader.restore(*state)
        return ()

    return compute


def _check_state(reader, state):
    """TF's ``RestoreBaseState`` checks (a failed restore resets the reader)."""
    started, finished, produced, _ = state
    if min(started, finished, produced) < 0:
        what = "Unexpected negative value when restoring in"
    elif started > finished:
        what = "Inconsistent work started vs. finished when restoring in"
    else:
        return
    reader.reset()
    raise invalid_argument("%s %s: %s" % (what, reader.op_name, _state_text(state)))


for _op_type in _SOURCES:
    register(_op_type, _reader_op, cpu="any")
register("ReaderReadV2", _read(False), cpu="any", is_async=True)
register("ReaderReadUpToV2", _read(True), cpu="any", is_async=True)
register(
    "ReaderNumRecordsProducedV2",
    lambda op, device: lambda ctx, ins: (np.int64(ins[0].records_produced),),
    cpu="any",
)
register(
    "ReaderNumWorkUnitsCompletedV2",
    lambda op, device: lambda ctx, ins: (np.int64(ins[0].work_finished),),
    cpu="any",
)
register("ReaderResetV2", _reset, cpu="any")
register("ReaderSerializeStateV2", _serialize_state, cpu="any")
register("ReaderRestoreStateV2", _restore_state, cpu="any")
