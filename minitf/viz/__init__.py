"""Pictures of graphs and steps that a notebook shows even without a live kernel.

* :class:`GraphView` -- ops coloured and grouped by device (Figure 12-1);
* :class:`TimelineView` -- which thread of which device ran which op when (Figure 12-5).

Both give SVG (``_repr_svg_``, so a notebook draws them; ``.save("x.svg")``), always the same
text for the same input.
"""

from minitf.viz.graph_view import GraphView
from minitf.viz.timeline_view import TimelineView

__all__ = ["GraphView", "TimelineView"]
