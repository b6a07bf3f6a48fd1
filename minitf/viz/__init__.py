"""Pictures of graphs and steps that a notebook shows even without a live kernel.

* :class:`GraphView` -- ops coloured and grouped by device (Figure 12-1);
* :class:`TimelineView` -- which thread of which device ran which op when (Figure 12-5);
* :class:`MemoryView` -- each card's memory by process (Figure 12-4).

All give SVG (``_repr_svg_``, so a notebook draws them; ``.save("x.svg")``), always the same
text for the same input.
"""

from minitf.viz.graph_view import GraphView
from minitf.viz.memory_view import MemoryView
from minitf.viz.timeline_view import TimelineView

__all__ = ["GraphView", "MemoryView", "TimelineView"]
