"""A matplotlib picture that a notebook redraws in place while training runs.

Book section: "Training" and "Parallelizing Neural Networks on a TensorFlow Cluster" (what a
learner watches while one or many training loops run).  The one mechanism behind
:class:`~minitf.viz.training_curves.TrainingCurves` and
:class:`~minitf.viz.training_dashboard.TrainingDashboard`:

* a subclass draws its data into a fresh matplotlib ``Figure`` (``figure()``; no pyplot state);
* ``_repr_png_`` renders that figure, so the last picture stays in a saved notebook and shows
  without a live kernel;
* inside IPython the picture is **one** output (a display handle) updated in place, at most
  every ``redraw_secs`` (``tick()``), and once more by ``close()`` with every point drawn;
* only the thread that owns the picture (the one that created it, in a notebook the kernel's)
  talks to the display: other threads may record data, and the owner redraws it
  (``wait(threads)`` does so until the threads end).
"""

from __future__ import annotations

import io
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from minitf.viz import labels


def display_in_place(obj: Any, handle: Any = None) -> Any:
    """Shows ``obj`` as one notebook output: a new display when ``handle`` is None, else an
    update of ``handle`` in place.  Returns the output's display handle (None outside IPython,
    e.g. in a script, where there is nothing to draw into)."""
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:
        return None
    if get_ipython() is None:
        return None
    if handle is None:
        return display(obj, display_id=True)
    handle.update(obj)
    return handle


def _running(worker: Any) -> bool:
    """True while a ``threading.Thread`` or a ``concurrent.futures.Future`` is still at work."""
    if hasattr(worker, "is_alive"):
        return bool(worker.is_alive())
    if hasattr(worker, "done"):
        return not worker.done()
    raise TypeError("wait() takes threads or futures, got %s" % type(worker).__name__)


class LiveFigure:
    """Base class: throttled redraws of ``figure()`` into one display output."""

    def __init__(
        self,
        redraw_secs: float = 0.5,
        display: bool = True,
        clock: Callable[[], float] = time.monotonic,
        language: str | None = None,
    ) -> None:
        self.language = labels.resolve(language)
        if redraw_secs < 0:
            raise ValueError("redraw_secs must be >= 0, got %r" % (redraw_secs,))
        self._redraw_secs, self._clock = redraw_secs, clock
        self._last_draw: float | None = None
        self._handle = None
        self._want_display = display
        self._owner = threading.get_ident()
        self.draws = 0

    def figure(self) -> Any:  # pragma: no cover - every subclass draws its own
        raise NotImplementedError

    def tick(self) -> bool:
        """Redraws if ``redraw_secs`` passed since the last redraw and this is the owner's
        thread; True when it redrew."""
        if threading.get_ident() != self._owner:
            return False
        now = self._clock()
        if self._last_draw is not None and now - self._last_draw < self._redraw_secs:
            return False
        self._last_draw = now
        self._show()
        return True

    def show(self) -> None:
        """Draws the picture now (the first call creates the notebook output); the next
        throttled redraw comes ``redraw_secs`` later."""
        self._last_draw = self._clock()
        self._show()

    def close(self) -> None:
        """Draws the final picture (every point recorded)."""
        self._show()

    def wait(self, workers: Iterable[Any], timeout: float | None = None) -> bool:
        """Waits for ``workers`` (threads or futures) to finish, redrawing every
        ``redraw_secs`` meanwhile, then draws the final picture.  Returns False when
        ``timeout`` seconds passed first (the workers are left running)."""
        workers = list(workers)
        deadline = None if timeout is None else time.monotonic() + timeout
        poll = min(max(self._redraw_secs, 0.01), 0.1)
        while any(_running(w) for w in workers):
            if deadline is not None and time.monotonic() >= deadline:
                self.close()
                return False
            busy = next(w for w in workers if _running(w))
            if hasattr(busy, "join"):
                busy.join(poll)
            else:
                threading.Event().wait(poll)
            self.tick()
        self.close()
        return True

    def _t(self, english: str) -> str:
        """``english`` in this figure's language (axis titles, panel titles)."""
        return labels.text(english, self.language)

    def _repr_png_(self) -> bytes:
        buf = io.BytesIO()
        with labels.figure_fonts(self.language):
            self.figure().savefig(buf, format="png", dpi=80)
        return buf.getvalue()

    def _show(self) -> None:
        self.draws += 1
        if not self._want_display or threading.get_ident() != self._owner:
            return
        self._handle = display_in_place(self, self._handle)
