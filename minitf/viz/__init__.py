"""Pictures of graphs and steps that a notebook shows even without a live kernel.

* :class:`GraphView` -- ops coloured and grouped by device (Figure 12-1);
* :class:`TimelineView` -- which thread of which device ran which op when (Figure 12-5);
* :class:`MemoryView` -- each card's memory by process (Figures 12-3, 12-4);
* :class:`StackView` -- the software stack of this machine (Figure 12-2);
* :class:`ClusterView` -- machines, tasks, where variables live, bytes between tasks
  (Figure 12-6);
* :class:`QueueView` -- each queue of a session: fill, rates in and out, blocked producers
  and consumers, closed; redrawn live while a pipeline runs (Figures 12-8 to 12-10);
* :class:`TrainingCurves` -- loss, accuracy ... against the step, redrawn while training
  (matplotlib; a PNG, not SVG);
* :class:`TrainingDashboard` -- several workers' losses against steps and time, their
  samples/s and their gradients' staleness (Figures 12-11 and 12-18; matplotlib, a PNG);
* :class:`PlacementExplorer`, :class:`StepThrough` -- live widgets (``minitf.viz.widgets``,
  imported on first use so ``import minitf`` never needs ipywidgets).

The views give SVG (``_repr_svg_``, so a notebook draws them; ``.save("x.svg")``), always the
same text for the same input.  GraphView's SVG comes from real Graphviz (its ``dot`` program,
else Graphviz as WebAssembly: :mod:`minitf.viz.graphviz_render`), shown in a box that zooms
and pans (``text/html``, :mod:`minitf.viz.zoom_pan`).

Their words (legends, titles, axis titles, buttons) are English unless a view is built with
``language="zh"`` or after ``minitf.viz.set_language("zh")`` (:mod:`minitf.viz.labels`; the first
cell of every Chinese notebook).
"""

from minitf.viz.cluster_view import ClusterView
from minitf.viz.graph_view import GraphView
from minitf.viz.labels import get_language, set_language
from minitf.viz.memory_view import MemoryView
from minitf.viz.queue_view import QueueView
from minitf.viz.stack_view import StackView
from minitf.viz.timeline_view import TimelineView
from minitf.viz.training_curves import TrainingCurves
from minitf.viz.training_dashboard import TrainingDashboard

__all__ = [
    "ClusterView",
    "GraphView",
    "MemoryView",
    "PlacementExplorer",
    "QueueView",
    "StackView",
    "StepThrough",
    "TimelineView",
    "TrainingCurves",
    "TrainingDashboard",
    "get_language",
    "set_language",
]


def __getattr__(name):
    if name in ("PlacementExplorer", "StepThrough"):
        from minitf.viz import widgets

        return getattr(widgets, name)
    raise AttributeError("module 'minitf.viz' has no attribute %r" % name)
