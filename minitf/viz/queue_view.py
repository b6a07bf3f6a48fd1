"""The queues of a session, live: how full each one is, how fast elements go in and out, who
waits on it.

Book sections: "Asynchronous Communication Using TensorFlow Queues" and "Loading Data Directly
from the Graph" (Figures 12-8 to 12-10: reader threads fill a queue, the training step empties
it).  One row per queue: its name and type, a bar of its capacity filled to its size (a
``RandomShuffleQueue`` also marks its ``min_after_dequeue`` floor), the enqueue and dequeue
rates over the last ``window`` seconds, how many enqueues (producers) and dequeues (consumers)
are blocked on it now, and whether it is closed::

    view = QueueView(sess)          # every queue of sess.graph; or queues=[q1, q2]
    view.show()                     # an ipywidget; a saved notebook keeps the SVG
    view.start()                    # redraw every `interval` seconds from a thread
    ...
    view.stop()                     # the thread ends (also on close(), or `with view:`),
                                    # and the output of show() gets the last picture

The numbers come from the queues themselves (``QueueResource.stats()``), which a local session
hands out when its queue op's handle is fetched.  A queue the session cannot hand over (a
session on a cluster's master keeps it in another process) shows its name, type and capacity,
and its size and closed state through two ops the view adds to the graph once (``QueueSizeV2``
and ``QueueIsClosedV2`` under ``queue_view/``; not on a finalized graph); its rates and waiters
stay unknown.  ``snapshot()`` returns the rows as plain :class:`QueueRecord` values.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from xml.sax.saxutils import escape

from minitf.framework import dtypes, errors, tensor_shape
from minitf.framework.queue_resource import QueueResource
from minitf.ops.op_def import apply_op
from minitf.viz import labels
from minitf.viz.files import SavesToFile
from minitf.viz.live_figure import display_in_place

QUEUE_OP_TYPES = ("FIFOQueueV2", "RandomShuffleQueueV2", "PaddingFIFOQueueV2", "PriorityQueueV2")
LEFT, BAR_WIDTH, BAR_HEIGHT, ROW = 10, 300, 18, 62
FILL_COLOR, FLOOR_COLOR, EMPTY_COLOR = "#4e79a7", "#e15759", "#eeeeee"


@dataclass
class QueueRecord:
    """One queue at one moment.  ``None``: not known (a queue in another process)."""

    name: str
    type: str
    capacity: int | None
    min_after_dequeue: int
    size: int | None = None
    closed: bool | None = None
    enqueued: int | None = None
    dequeued: int | None = None
    enqueue_rate: float | None = None  # elements per second over the window
    dequeue_rate: float | None = None
    blocked_enqueues: int | None = None  # producers waiting for room
    blocked_dequeues: int | None = None  # consumers waiting for elements

    @property
    def fraction(self) -> float | None:
        """How full it is: ``size / capacity`` (None when either is unknown)."""
        if self.size is None or not self.capacity:
            return None
        return self.size / self.capacity


def _session_of(sess: Any) -> Any:
    """The plain session under a MonitoredSession's wrappers (their ``_sess``)."""
    while getattr(sess, "_sess", None) is not None:
        sess = sess._sess
    return sess


def _queue_ops(graph: Any, queues: Any) -> list:
    """The queue-making ops: of ``queues`` (queue objects, their handles or ops, or op names),
    or every queue op of the graph."""
    if queues is None:
        return [op for op in graph.get_operations() if op.type in QUEUE_OP_TYPES]
    ops = []
    for q in queues:
        if isinstance(q, str):
            q = graph.get_operation_by_name(q)
        q = getattr(q, "queue_ref", q)
        op = getattr(q, "op", q)
        if getattr(op, "type", None) not in QUEUE_OP_TYPES:
            raise TypeError("QueueView shows queues; %r is not a queue, its handle or its op" % q)
        ops.append(op)
    return ops


class _Watched:
    """One queue: its op, its resource once the session handed it out, recent counter
    readings ``(time, enqueued, dequeued)``."""

    def __init__(self, op: Any) -> None:
        self.op = op
        self.resource: QueueResource | None = None
        self.asked = False  # whether the session was asked for the resource
        self.probe: list | None = None  # [size, is_closed] tensors for a queue out of reach
        self.history: deque = deque()
        capacity = op.get_attr("capacity")
        self.capacity = None if capacity < 0 else capacity
        self.floor = op.get_attr("min_after_dequeue") if op.type == "RandomShuffleQueueV2" else 0

    def record(self, now: float, window: float, sess: Any) -> QueueRecord:
        rec = QueueRecord(self.op.name, self.op.type[:-2], self.capacity, self.floor)
        if self.resource is None:
            if self.probe is not None:
                try:
                    rec.size, rec.closed = (v.item() for v in sess.run(self.probe))
                except (RuntimeError, errors.OpError):
                    pass
            return rec
        stats = self.resource.stats()
        for key in ("size", "closed", "enqueued", "dequeued"):
            setattr(rec, key, stats[key])
        rec.blocked_enqueues = stats["blocked_enqueues"]
        rec.blocked_dequeues = stats["blocked_dequeues"]
        self.history.append((now, stats["enqueued"], stats["dequeued"]))
        while len(self.history) > 2 and now - self.history[1][0] >= window:
            self.history.popleft()
        t0, in0, out0 = self.history[0]
        span = now - t0
        rec.enqueue_rate = (stats["enqueued"] - in0) / span if span > 0 else 0.0
        rec.dequeue_rate = (stats["dequeued"] - out0) / span if span > 0 else 0.0
        return rec


class QueueView(SavesToFile):
    """Figures 12-8..12-10 from a running session: a row per queue, redrawn while it runs.

    ``language``: of its words ("en", "zh"; None: the default of
    :func:`minitf.viz.set_language`); queue names and op types stay as they are."""

    def __init__(
        self,
        sess: Any,
        queues: Any = None,
        interval: float = 0.25,
        window: float = 2.0,
        title: str | None = None,
        clock: Callable[[], float] = time.monotonic,
        language: str | None = None,
    ) -> None:
        self.language = labels.resolve(language)
        if title is None:
            title = "Queues"
        title = labels.text(title, self.language)
        if interval <= 0:
            raise ValueError("interval must be > 0, not %r" % (interval,))
        self.sess = _session_of(sess)
        self.interval, self.window, self.title = interval, window, title
        self._clock = clock
        self._watched = [_Watched(op) for op in _queue_ops(self.sess.graph, queues)]
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._widget: Any = None
        self._handle: Any = None  # the display handle of show()
        self._records = self.snapshot()

    # -- reading the queues ----------------------------------------------------------------------
    def _resolve(self, watched: _Watched) -> None:
        """Asks the session, once, for the queue behind the op (a local session returns it);
        else adds the two ops that read its size and closed state (a graph not finalized)."""
        try:
            handle = self.sess.run(watched.op.outputs[0])
        except errors.OpError:  # a handle that cannot travel (the queue is in another process)
            handle = None
        except (RuntimeError, TypeError, ValueError):  # a closed session: the graph's facts
            return
        if isinstance(handle, QueueResource):
            watched.resource = handle
            return
        graph = self.sess.graph
        if graph.finalized:
            return
        op = watched.op
        scalar = tensor_shape.TensorShape([])
        with graph.as_default(), graph.device(op.device), graph.name_scope("queue_view"):
            sizes = [
                apply_op(kind, [op.outputs[0]], [(dt, scalar)], graph.unique_name(kind) + "/")
                for kind, dt in (("QueueSizeV2", dtypes.int32), ("QueueIsClosedV2", dtypes.bool))
            ]
        watched.probe = [o.outputs[0] for o in sizes]

    def snapshot(self) -> list[QueueRecord]:
        """Every watched queue now, as plain records (rates over the last ``window`` s)."""
        with self._lock:
            now = self._clock()
            for watched in self._watched:
                if not watched.asked:
                    watched.asked = True
                    self._resolve(watched)
            self._records = [w.record(now, self.window, self.sess) for w in self._watched]
            return list(self._records)

    # -- live updates ----------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        """Whether the refresh thread is alive."""
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> QueueView:
        """Refreshes the widget every ``interval`` seconds from a thread, until ``stop()``."""
        if self.running:
            return self
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="QueueView", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Ends the refresh thread (waits for it) and draws the last reading, also into the
        output ``show()`` made (so a saved notebook keeps the final picture)."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join()
        self.refresh()
        if self._handle is not None:
            self._handle.update(self)

    def show(self) -> QueueView:
        """Displays the view in a notebook as an output that ``stop()`` updates (nothing
        outside IPython)."""
        self._handle = display_in_place(self)
        return self

    def close(self) -> None:
        """Stops, and closes the widget."""
        self.stop()
        if self._widget is not None:
            self._widget.close()

    def __enter__(self) -> QueueView:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            if self._widget is not None and getattr(self._widget, "comm", None) is None:
                return  # the widget was closed: nobody is looking any more
            self.refresh()

    def refresh(self) -> None:
        """Takes a snapshot and redraws the widget (if one was made)."""
        self.snapshot()
        if self._widget is not None and getattr(self._widget, "comm", None) is not None:
            self._widget.value = self.html()

    # -- pictures --------------------------------------------------------------------------------
    def to_svg(self) -> str:
        records = self._records
        height = 34 + ROW * max(1, len(records))
        out = [
            '<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
            'font-family="sans-serif" font-size="12">' % (LEFT + BAR_WIDTH + 330, height),
            '<text x="%d" y="20" font-size="14" font-weight="bold">%s</text>'
            % (LEFT, escape(self.title)),
        ]
        if not records:
            out.append(
                '<text x="%d" y="46">%s</text>'
                % (LEFT, escape(labels.text("No queue in this graph.", self.language)))
            )
        for i, rec in enumerate(records):
            _record_svg(out, rec, 34 + ROW * i, self.language)
        out.append("</svg>")
        return "\n".join(out)

    def svg(self) -> str:
        """The SVG of the last snapshot."""
        return self.to_svg()

    def _repr_svg_(self) -> str:
        return self.to_svg()

    def html(self) -> str:
        return "<div>%s</div>" % self.to_svg()

    @property
    def widget(self) -> Any:
        """An ``ipywidgets.HTML`` showing the view (made on first use)."""
        if self._widget is None:
            import ipywidgets

            self._widget = ipywidgets.HTML(self.html())
        return self._widget

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict:
        """The live widget for a kernel, the SVG as HTML for a saved notebook."""
        data = self.widget._repr_mimebundle_() or {}
        data = dict(data[0]) if isinstance(data, tuple) else dict(data)
        data["text/html"] = self.html()
        data["text/plain"] = "<QueueView of %d queue%s>" % (
            len(self._watched),
            "" if len(self._watched) == 1 else "s",
        )
        return data


def _rate(value: float | None) -> str:
    return "?" if value is None else "%.1f/s" % value


def _record_svg(out: list, rec: QueueRecord, y: int, language: str = "en") -> None:
    """One queue's row: name and type, the fill bar (floor marked), rates and waiters."""
    closed = labels.text(" (closed)", language) if rec.closed else ""
    out.append(
        '<text x="%d" y="%d"><tspan font-weight="bold">%s</tspan> %s%s</text>'
        % (LEFT, y + 12, escape(rec.name), rec.type, closed)
    )
    bar_y = y + 18
    out.append(
        '<rect x="%d" y="%d" width="%d" height="%d" fill="%s" stroke="#999"/>'
        % (LEFT, bar_y, BAR_WIDTH, BAR_HEIGHT, EMPTY_COLOR)
    )
    fraction = rec.fraction
    if fraction is not None:
        out.append(
            '<rect class="fill" x="%d" y="%d" width="%.1f" height="%d" fill="%s">'
            "<title>%s</title></rect>"
            % (
                LEFT,
                bar_y,
                BAR_WIDTH * min(1.0, fraction),
                BAR_HEIGHT,
                FILL_COLOR,
                labels.text("%d of %d", language) % (rec.size, rec.capacity),
            )
        )
    if rec.min_after_dequeue and rec.capacity:
        x = LEFT + BAR_WIDTH * rec.min_after_dequeue / rec.capacity
        out.append(
            '<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s" stroke-width="2">'
            "<title>min_after_dequeue %d</title></line>"
            % (x, bar_y - 3, x, bar_y + BAR_HEIGHT + 3, FLOOR_COLOR, rec.min_after_dequeue)
        )
    size = "?" if rec.size is None else str(rec.size)
    capacity = labels.text("unbounded", language) if rec.capacity is None else str(rec.capacity)
    text_x = LEFT + BAR_WIDTH + 10
    out.append('<text x="%d" y="%d">%s / %s</text>' % (text_x, bar_y + 13, size, capacity))
    out.append(
        ('<text x="%d" y="%d" fill="#444">' + labels.text("in %s  out %s", language) + "</text>")
        % (text_x + 90, bar_y + 6, _rate(rec.enqueue_rate), _rate(rec.dequeue_rate))
    )
    if rec.blocked_enqueues is None:
        waiting = labels.text("in another process: rates and waiters not measured", language)
    else:
        waiting = labels.text("blocked: %d producer%s, %d consumer%s", language) % (
            rec.blocked_enqueues,
            "" if rec.blocked_enqueues == 1 else "s",
            rec.blocked_dequeues,
            "" if rec.blocked_dequeues == 1 else "s",
        )
    out.append('<text x="%d" y="%d" fill="#444">%s</text>' % (text_x + 90, bar_y + 22, waiting))
