"""``tf.summary.FileWriter``: event files that TensorBoard reads, and ``summary_iterator``
that reads them back.

Book section: "Distributing TensorFlow" (the chief worker writes summaries and the graph to its
``logdir``; TensorBoard watches it).  TF's pieces: ``python/summary/writer/writer.py``
(``FileWriter``, ``SummaryToEventTransformer``), ``event_file_writer.py`` (``EventFileWriter``),
``core/util/events_writer.cc`` (the file name and the first event) and
``python/summary/summary_iterator.py``.

An event file is ``events.out.tfevents.<unix seconds, 10 digits>.<hostname><suffix>`` in
``logdir``: TFRecord-framed ``Event`` protos (lib/tf_record.py), the first one
``file_version: "brain.Event:2"`` at step 0 with the file's second as its wall time.

Writing: TF hands events to a queue of ``max_queue`` that a thread drains, flushing every
``flush_secs``.  minitf keeps the queue and writes it out when it holds ``max_queue`` events,
when an event arrives ``flush_secs`` or more after the last flush, on ``flush()`` and
``close()``, and at interpreter exit for writers still open: no thread, so nothing ever
blocks exit.  As in TF, ``reopen()`` after ``close()`` starts a new file named by the current
second, which replaces a file of the same name (a reopen within the same second truncates the
first file: observed on TF 2.21).
"""

from __future__ import annotations

import atexit
import os
import socket
import threading
import time
import warnings
import weakref
from collections.abc import Iterator
from typing import Any

from minitf.framework import graph as ops_graph
from minitf.framework import graph_io
from minitf.lib.protobuf import tf_protos_pb2 as pb
from minitf.lib.tf_record import TFRecordWriter, tf_record_iterator

FILE_VERSION = "brain.Event:2"

_open_writers: weakref.WeakSet[EventFileWriter] = weakref.WeakSet()


def _flush_open_writers() -> None:
    for writer in list(_open_writers):
        writer.flush()


atexit.register(_flush_open_writers)


def _as_message(value: Any, cls: type) -> Any:
    """``value`` as a ``cls`` message: bytes are parsed; another library's message of the same
    schema (TF's, TensorBoard's) is copied through its bytes."""
    if isinstance(value, cls):
        return value
    if isinstance(value, (bytes, bytearray)):
        return cls.FromString(bytes(value))
    if hasattr(value, "SerializeToString"):
        return cls.FromString(value.SerializeToString())
    raise TypeError("Expected a %s proto or its bytes, got %s" % (cls.__name__, type(value)))


class EventFileWriter:
    """TF's ``EventFileWriter``: one event file in ``logdir`` and the queue in front of it."""

    def __init__(
        self,
        logdir: str,
        max_queue: int = 10,
        flush_secs: float = 120,
        filename_suffix: str | None = None,
    ) -> None:
        self._logdir = str(logdir)
        os.makedirs(self._logdir, exist_ok=True)
        self._max_queue = max_queue
        self._flush_secs = flush_secs
        self._suffix = filename_suffix or ""
        self._lock = threading.Lock()
        self._closed = True
        self._open()

    def _open(self) -> None:
        """Creates the file (``events.out.tfevents.<secs>.<host><suffix>``) and writes its
        ``file_version`` event at once (TF's ``EventsWriter::InitIfNeeded``)."""
        seconds = int(time.time())
        name = "events.out.tfevents.%010d.%s%s" % (seconds, socket.gethostname(), self._suffix)
        self._path = os.path.join(self._logdir, name)
        self._records = TFRecordWriter(self._path)
        first = pb.Event(wall_time=float(seconds), step=0, file_version=FILE_VERSION)
        self._records.write(first.SerializeToString())
        self._records.flush()
        self._queue: list[bytes] = []
        self._last_flush = time.monotonic()
        self._closed = False
        _open_writers.add(self)

    def get_logdir(self) -> str:
        return self._logdir

    def get_filename(self) -> str:
        """The path of the current event file (TF 2's ``EventFileWriter.get_filename``)."""
        return self._path

    def add_event(self, event: Any) -> None:
        """Queues ``event`` (an ``Event`` proto); nothing happens once closed."""
        data = _as_message(event, pb.Event).SerializeToString()
        with self._lock:
            if self._closed:
                return
            self._queue.append(data)
            due = time.monotonic() - self._last_flush >= self._flush_secs
            if len(self._queue) >= self._max_queue or due:
                self._flush_locked()

    def _flush_locked(self) -> None:
        for data in self._queue:
            self._records.write(data)
        self._queue.clear()
        self._records.flush()
        self._last_flush = time.monotonic()

    def flush(self) -> None:
        """Writes every queued event to the file."""
        with self._lock:
            if not self._closed:
                self._flush_locked()

    def close(self) -> None:
        """Flushes and closes the file; closing again does nothing."""
        with self._lock:
            if self._closed:
                return
            self._flush_locked()
            self._records.close()
            self._closed = True
        _open_writers.discard(self)

    def reopen(self) -> None:
        """After ``close()``: a new event file, named by the current second."""
        with self._lock:
            if self._closed:
                self._open()


class FileWriter:
    """``tf.summary.FileWriter(logdir, graph=None, max_queue=10, flush_secs=120,
    graph_def=None, filename_suffix=None, session=None)``.

    With ``graph`` (or the deprecated ``graph_def``) the file gets a ``graph_def`` event and then
    a ``meta_graph_def`` event, after its ``file_version`` one.  ``session`` is accepted for TF's
    signature; TF 1.15 then writes through summary-writer ops in that session's graph, minitf
    always writes from Python (the same events in the same file format).
    """

    def __init__(
        self,
        logdir: str,
        graph: Any = None,
        max_queue: int = 10,
        flush_secs: float = 120,
        graph_def: Any = None,
        filename_suffix: str | None = None,
        session: Any = None,
    ) -> None:
        self.event_writer = EventFileWriter(logdir, max_queue, flush_secs, filename_suffix)
        self._closed = False
        self._seen_summary_tags: set[str] = set()
        if graph is not None or graph_def is not None:
            graph_def_msg = self._graph_def_of(graph, graph_def)
            self._add_event(pb.Event(graph_def=graph_def_msg.SerializeToString()), None)
            meta = graph_io.meta_graph_from_graph_def(graph_def_msg)
            self.add_meta_graph(meta)

    # -- TF's SummaryToEventTransformer ------------------------------------------------------
    def add_summary(self, summary: Any, global_step: int | None = None) -> None:
        """Appends a ``Summary`` (a proto, or the bytes a summary op outputs) at
        ``global_step``.  As TF, a tag's plugin metadata is kept on its first value only."""
        given = _as_message(_unwrap_scalar(summary), pb.Summary)
        summary = pb.Summary()
        summary.CopyFrom(given)  # metadata is cleared on a copy, not on the caller's proto
        for value in summary.value:
            if not value.HasField("metadata"):
                continue
            if value.tag in self._seen_summary_tags:
                value.ClearField("metadata")
                continue
            self._seen_summary_tags.add(value.tag)
        self._add_event(pb.Event(summary=summary), global_step)

    def add_session_log(self, session_log: Any, global_step: int | None = None) -> None:
        """Appends a ``SessionLog`` (START, STOP, CHECKPOINT) event."""
        self._add_event(pb.Event(session_log=_as_message(session_log, pb.SessionLog)), global_step)

    def add_graph(self, graph: Any, global_step: int | None = None, graph_def: Any = None):
        """Appends a ``graph_def`` event of a ``tf.Graph`` (with ``_output_shapes``) or of a
        ``GraphDef`` (deprecated in TF; only one of ``graph`` and ``graph_def``)."""
        graph_def_msg = self._graph_def_of(graph, graph_def)
        self._add_event(pb.Event(graph_def=graph_def_msg.SerializeToString()), global_step)

    def add_meta_graph(self, meta_graph_def: Any, global_step: int | None = None) -> None:
        """Appends a ``meta_graph_def`` event; ``meta_graph_def`` must be a MetaGraphDef."""
        if not hasattr(meta_graph_def, "SerializeToString") or not type(
            meta_graph_def
        ).__name__.endswith("MetaGraphDef"):
            raise TypeError(
                "meta_graph_def must be type MetaGraphDef, saw type: %s" % type(meta_graph_def)
            )
        data = meta_graph_def.SerializeToString()
        self._add_event(pb.Event(meta_graph_def=data), global_step)

    @staticmethod
    def _graph_def_of(graph: Any, graph_def: Any) -> pb.GraphDef:
        if graph is not None and graph_def is not None:
            raise ValueError("Please pass only graph, or graph_def (deprecated), but not both.")
        given = graph if graph is not None else graph_def
        if isinstance(given, ops_graph.Graph):
            return graph_io.graph_def_proto(given, add_shapes=True)
        if hasattr(given, "SerializeToString") and type(given).__name__ == "GraphDef":
            return _as_message(given, pb.GraphDef)
        raise TypeError(
            "The passed graph must be an instance of `Graph` or the deprecated `GraphDef`"
        )

    def _add_event(self, event: pb.Event, step: int | None) -> None:
        event.wall_time = time.time()
        if step is not None:
            event.step = int(step)
        self.add_event(event)

    # -- TF's FileWriter ---------------------------------------------------------------------
    def _warn_if_closed(self) -> bool:
        if self._closed:
            warnings.warn(
                "Attempting to use a closed FileWriter. The operation will be a noop unless "
                "the FileWriter is explicitly reopened.",
                stacklevel=3,
            )
        return self._closed

    def get_logdir(self) -> str:
        """The ``logdir`` this writer was made with."""
        return self.event_writer.get_logdir()

    def add_event(self, event: Any) -> None:
        """Appends ``event`` as it is (its wall time and step untouched)."""
        if not self._warn_if_closed():
            self.event_writer.add_event(event)

    def flush(self) -> None:
        """Writes the queued events to disk."""
        if not self._warn_if_closed():
            self.event_writer.flush()

    def close(self) -> None:
        """Flushes and closes the file; later calls are no-ops until ``reopen()``."""
        self.event_writer.close()
        self._closed = True

    def reopen(self) -> None:
        """Opens a new event file after ``close()`` (does nothing while open)."""
        self.event_writer.reopen()
        self._closed = False

    def __enter__(self) -> FileWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _unwrap_scalar(value: Any) -> Any:
    """A string tensor's value may arrive as a 0-d numpy array: its element."""
    if getattr(value, "ndim", None) == 0 and hasattr(value, "dtype"):
        return value[()]
    return value


class FileWriterCache:
    """``tf.summary.FileWriterCache``: one FileWriter per logdir for the process (what
    MonitoredTrainingSession's summary hook uses); made with the default graph."""

    _cache: dict[str, FileWriter] = {}
    _lock = threading.RLock()

    @staticmethod
    def get(logdir: str) -> FileWriter:
        """The cached writer of ``logdir``, made on first use."""
        with FileWriterCache._lock:
            if logdir not in FileWriterCache._cache:
                graph = ops_graph.get_default_graph()
                FileWriterCache._cache[logdir] = FileWriter(logdir, graph=graph)
            return FileWriterCache._cache[logdir]

    @staticmethod
    def clear() -> None:
        """Closes every cached writer and forgets them."""
        with FileWriterCache._lock:
            for writer in FileWriterCache._cache.values():
                writer.close()
            FileWriterCache._cache = {}


def summary_iterator(path: str) -> Iterator[pb.Event]:
    """``tf.train.summary_iterator(path)``: the ``Event`` protos of an event file, in order."""
    for record in tf_record_iterator(path):
        yield pb.Event.FromString(record)
