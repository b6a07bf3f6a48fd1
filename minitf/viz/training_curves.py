"""Live training curves: loss, accuracy or any metric against the step, redrawn in place.

Book section: "Training" (what every parallel-training lesson watches: does the loss go down,
and as fast with 2 replicas as with 1?).  Drawn with matplotlib, as every notebook reader
knows it; in a notebook the picture is one output that updates while the loop runs (a display
handle, at most every ``redraw_secs``), and the last picture stays in the saved notebook as a
PNG, so it shows without a live kernel (the machinery is :class:`LiveFigure`'s)::

    curves = TrainingCurves("loss", "accuracy", title="digits MLP")
    for step in tqdm(range(300)):
        loss_value, acc = sess.run([train, loss, accuracy], feed)[1:]
        curves.add(step, loss=loss_value, accuracy=acc)
    curves.close()     # the final picture, every point drawn
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from minitf.viz.live_figure import LiveFigure


class TrainingCurves(LiveFigure):
    """One panel per metric, each metric's values against the step."""

    def __init__(
        self,
        *metrics: str,
        title: str | None = None,
        redraw_secs: float = 0.5,
        display: bool = True,
        clock: Callable[[], float] = time.monotonic,
        language: str | None = None,
    ) -> None:
        if not metrics:
            raise ValueError("TrainingCurves needs at least one metric name, e.g. 'loss'")
        super().__init__(redraw_secs=redraw_secs, display=display, clock=clock, language=language)
        self.metrics = list(metrics)
        self.title = title
        self.history: dict[str, tuple[list, list]] = {m: ([], []) for m in metrics}

    def add(self, step: int, **values: float) -> None:
        """Records the metrics' values at ``step``; redraws when ``redraw_secs`` passed."""
        unknown = sorted(set(values) - set(self.metrics))
        if unknown:
            raise ValueError(
                "unknown metric %s: this TrainingCurves draws %s" % (unknown, self.metrics)
            )
        for name, value in values.items():
            steps, vals = self.history[name]
            steps.append(int(step))
            vals.append(float(value))
        self.tick()

    def figure(self) -> Any:
        """A matplotlib Figure of the curves so far (no pyplot state is touched)."""
        from matplotlib.figure import Figure

        fig = Figure(figsize=(4.2 * len(self.metrics), 3.0), layout="constrained")
        for i, name in enumerate(self.metrics):
            ax = fig.add_subplot(1, len(self.metrics), i + 1)
            steps, vals = self.history[name]
            ax.plot(steps, vals, color="C%d" % i)
            ax.set_xlabel(self._t("step"))
            shown = self._t(name)
            ax.set_title(shown if not vals else "%s: %.4g" % (shown, vals[-1]))
            ax.grid(alpha=0.3)
        if self.title:
            fig.suptitle(self._t(self.title))
        return fig
