"""A dashboard of several training loops at once: one line per worker, replica or client.

Book section: "Parallelizing Neural Networks on a TensorFlow Cluster" -- one network per
device (Figure 12-11: which hyperparameters learn fastest?), replicas of one model (are they
all as fast? who is the straggler?) and asynchronous data parallelism, whose gradients arrive
*stale*, computed several global steps ago (Figure 12-18).  Four panels:

* the loss against the step, one line per worker;
* the loss against the wall time (seconds since the dashboard was made, unless given);
* each worker's throughput in samples per second;
* a histogram of the recorded gradients' staleness, in global steps (only when recorded).

``record()`` may be called from many training threads at once; the notebook's own thread
redraws (``wait(threads)``), as :class:`~minitf.viz.live_figure.LiveFigure` explains::

    board = TrainingDashboard("learning rates")
    threads = [threading.Thread(target=train, args=(lr, board)) for lr in (0.01, 0.1)]
    for t in threads:
        t.start()
    board.wait(threads)         # live redraws until every thread ended, then the final one
    board.summary()             # plain per-worker numbers
"""

from __future__ import annotations

import operator
import threading
import time
from collections.abc import Callable, Hashable
from typing import Any, NamedTuple

from minitf.viz.live_figure import LiveFigure


class Record(NamedTuple):
    """One point of one worker."""

    step: int
    loss: float
    wall_time: float
    samples: int | None
    staleness: int | None


def _count(name: str, value: Any) -> int | None:
    """``value`` as an int >= 0 (None stays None), or a ValueError naming the argument."""
    if value is None:
        return None
    try:
        n = operator.index(value)
    except TypeError:
        raise ValueError("%s must be an integer, got %r" % (name, value)) from None
    if n < 0:
        raise ValueError("%s must be >= 0, got %d" % (name, n))
    return n


def _number(name: str, value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ValueError("%s must be a number, got %r" % (name, value)) from None


def _worker_order(worker: Hashable) -> tuple:
    """Numbers first, in numeric order, then names in alphabetical order."""
    if isinstance(worker, int):
        return (0, worker, "")
    return (1, 0, str(worker))


def _throughput(records: list[Record]) -> float | None:
    """Samples per second between a worker's first and last record (the first record's
    samples were processed before the period measured starts)."""
    if len(records) < 2 or any(r.samples is None for r in records[1:]):
        return None
    seconds = records[-1].wall_time - records[0].wall_time
    if seconds <= 0:
        return None
    return sum(r.samples for r in records[1:]) / seconds


def _worker_summary(records: list[Record]) -> dict[str, Any]:
    samples = [r.samples for r in records if r.samples is not None]
    stale = [r.staleness for r in records if r.staleness is not None]
    return {
        "records": len(records),
        "first_step": records[0].step,
        "last_step": records[-1].step,
        "last_loss": records[-1].loss,
        "min_loss": min(r.loss for r in records),
        "wall_time": records[-1].wall_time,
        "samples": sum(samples) if samples else None,
        "samples_per_sec": _throughput(records),
        "mean_staleness": sum(stale) / len(stale) if stale else None,
        "max_staleness": max(stale) if stale else None,
    }


class TrainingDashboard(LiveFigure):
    """Loss, speed and staleness of several workers, recorded from any thread."""

    def __init__(
        self,
        title: str | None = None,
        redraw_secs: float = 0.5,
        display: bool = True,
        clock: Callable[[], float] = time.monotonic,
        language: str | None = None,
    ) -> None:
        super().__init__(redraw_secs=redraw_secs, display=display, clock=clock, language=language)
        self.title = title
        self._start = clock()
        self._lock = threading.Lock()
        self._records: dict[Hashable, list[Record]] = {}

    def record(
        self,
        worker: Hashable,
        step: int,
        loss: float,
        wall_time: float | None = None,
        samples: int | None = None,
        staleness: int | None = None,
    ) -> None:
        """Records one point of ``worker`` (any name or number): its global ``step``, ``loss``,
        the ``wall_time`` in seconds (default: since the dashboard was made), the ``samples``
        processed since its previous record, the ``staleness`` of the gradient it applied (in
        global steps).  Thread-safe; redraws when called on the owner's thread."""
        try:
            hash(worker)
        except TypeError:
            raise ValueError("worker must be a name or a number, got %r" % (worker,)) from None
        point = Record(
            _count("step", step),
            _number("loss", loss),
            self._clock() - self._start if wall_time is None else _number("wall_time", wall_time),
            _count("samples", samples),
            _count("staleness", staleness),
        )
        with self._lock:
            self._records.setdefault(worker, []).append(point)
        self.tick()

    def workers(self) -> list[Hashable]:
        """The workers recorded so far: numbers in order, then names in alphabetical order."""
        with self._lock:
            return sorted(self._records, key=_worker_order)

    def records(self, worker: Hashable) -> list[Record]:
        """A copy of ``worker``'s points, in the order they were recorded."""
        with self._lock:
            if worker not in self._records:
                raise KeyError("no record of worker %r" % (worker,))
            return list(self._records[worker])

    def summary(self) -> dict[Hashable, dict[str, Any]]:
        """Per worker, plain numbers: ``records``, ``first_step``, ``last_step``,
        ``last_loss``, ``min_loss``, ``wall_time`` (of the last record), ``samples`` (their
        sum), ``samples_per_sec``, ``mean_staleness``, ``max_staleness`` (None where nothing
        was recorded to compute them)."""
        snapshot = self._snapshot()
        return {w: _worker_summary(recs) for w, recs in snapshot.items()}

    def _snapshot(self) -> dict[Hashable, list[Record]]:
        with self._lock:
            return {w: list(self._records[w]) for w in sorted(self._records, key=_worker_order)}

    def __repr__(self) -> str:
        # the same text all along: a notebook keeps the first display's text next to the
        # picture updated in place (the numbers are in summary())
        return "<TrainingDashboard %s>" % (repr(self.title) if self.title else "(untitled)")

    def figure(self) -> Any:
        """A matplotlib Figure of every worker so far (no pyplot state is touched)."""
        from matplotlib.figure import Figure

        snapshot = self._snapshot()
        has_staleness = any(r.staleness is not None for rs in snapshot.values() for r in rs)
        if has_staleness:
            fig = Figure(figsize=(10.0, 6.4), layout="constrained")
            axes = [fig.add_subplot(2, 2, i + 1) for i in range(4)]
        else:
            fig = Figure(figsize=(13.0, 3.4), layout="constrained")
            axes = [fig.add_subplot(1, 3, i + 1) for i in range(3)]
        _draw_losses(axes[0], axes[1], snapshot, self._t)
        _draw_throughput(axes[2], snapshot, self._t)
        if has_staleness:
            _draw_staleness(axes[3], snapshot, self._t)
        if self.title:
            fig.suptitle(self._t(self.title))
        return fig


def _draw_losses(
    by_step: Any, by_time: Any, snapshot: dict[Hashable, list[Record]], t: Callable[[str], str]
) -> None:
    for i, (worker, recs) in enumerate(snapshot.items()):
        color = "C%d" % (i % 10)
        losses = [r.loss for r in recs]
        by_step.plot([r.step for r in recs], losses, color=color, label=str(worker))
        by_time.plot([r.wall_time for r in recs], losses, color=color, label=str(worker))
    for ax, xlabel in ((by_step, "step"), (by_time, "wall time (s)")):
        ax.set_xlabel(t(xlabel))
        ax.set_ylabel(t("loss"))
        ax.grid(alpha=0.3)
    by_step.set_title(t("loss per step"))
    by_time.set_title(t("loss over time"))
    if snapshot:
        by_step.legend(fontsize="small")


def _draw_throughput(
    ax: Any, snapshot: dict[Hashable, list[Record]], t: Callable[[str], str]
) -> None:
    names, speeds, colors = [], [], []
    for i, (worker, recs) in enumerate(snapshot.items()):
        speed = _throughput(recs)
        names.append(str(worker))
        speeds.append(0.0 if speed is None else speed)
        colors.append("C%d" % (i % 10))
    ax.bar(range(len(names)), speeds, color=colors)
    ax.set_xticks(range(len(names)), names, rotation=30, ha="right", fontsize="small")
    ax.set_ylabel(t("samples/s"))
    ax.set_title(t("throughput"))
    ax.grid(alpha=0.3, axis="y")


def _draw_staleness(
    ax: Any, snapshot: dict[Hashable, list[Record]], t: Callable[[str], str]
) -> None:
    values, labels, colors = [], [], []
    for i, (worker, recs) in enumerate(snapshot.items()):
        stale = [r.staleness for r in recs if r.staleness is not None]
        if stale:
            values.append(stale)
            labels.append(str(worker))
            colors.append("C%d" % (i % 10))
    top = max(max(v) for v in values)
    bins = [b - 0.5 for b in range(top + 2)]
    ax.hist(values, bins=bins, stacked=True, color=colors, label=labels)
    ax.set_xlabel(t("staleness (global steps)"))
    ax.set_ylabel(t("gradients"))
    ax.set_title(t("stale gradients (Figure 12-18)"))
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize="small")
