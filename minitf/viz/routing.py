"""Orthogonal arrows between boxes, and labels placed where they cross nothing.

Used by the cluster pictures (Figure 12-6's ``ClusterView``, Figure 12-7's ``ContainerView``):
tasks sit in columns; an arrow leaves its source box by a side edge, runs down a lane of its own
in the gap next to a column, and enters its destination box by a side edge.  Every arrow has its
own lane and its own height on each box edge, so no two arrows share a segment; each label is
put at the first candidate spot whose box meets no arrow, no other label and no box.
"""

from __future__ import annotations

from typing import NamedTuple
from xml.sax.saxutils import escape

from minitf.viz.labels import text_width

Rect = tuple[float, float, float, float]  # x, y, width, height
Point = tuple[float, float]

LANE = 12  # px between two lanes of one gap
PORT = 18  # px between two arrows on one box edge (a label fits between them)
LABEL_H = 14
LABEL_FONT = 11  # px: the labels' font-size
LABEL_EM = 0.62  # a Latin character's width in em, generous (Arial's capitals reach 0.72)


class Arrow(NamedTuple):
    points: list[Point]
    label: str
    label_box: Rect


def label_size(text: str) -> tuple[float, float]:
    """A label's box: its text (Chinese characters a full em wide) with 3 px each side."""
    return text_width(text, LABEL_FONT, LABEL_EM) + 6, LABEL_H


def rects_meet(a: Rect, b: Rect) -> bool:
    """Whether two rectangles overlap (touching edges do not count)."""
    return a[0] < b[0] + b[2] and b[0] < a[0] + a[2] and a[1] < b[1] + b[3] and b[1] < a[1] + a[3]


def segment_rect(p: Point, q: Point, width: float = 2.0) -> Rect:
    """An axis-parallel segment as a thin rectangle (its stroke)."""
    x0, x1 = sorted((p[0], q[0]))
    y0, y1 = sorted((p[1], q[1]))
    return (x0 - width / 2, y0 - width / 2, x1 - x0 + width, y1 - y0 + width)


def segments(points: list[Point]) -> list[tuple[Point, Point]]:
    return list(zip(points, points[1:]))


def gaps_used(src_column: int, dst_column: int) -> list[int]:
    """The gaps (numbered by the column on their left) an arrow runs down: between neighbour
    columns, the one gap between them; farther apart, the gap next to each end, joined by a
    channel above the boxes so that the arrow crosses no column on its way."""
    lo, hi = sorted((src_column, dst_column))
    if hi - lo <= 1:
        return [lo]
    return [src_column, dst_column - 1] if dst_column > src_column else [src_column - 1, dst_column]


def gap_width(lanes: int, labels: list[str]) -> float:
    """How wide a gap must be for ``lanes`` lanes, with room for the widest label before them
    (labels sit on the horizontal legs, between the boxes and the lanes)."""
    widest = max([label_size(t)[0] for t in labels] or [0])
    return widest + 16 + LANE * (lanes + 1)


class Router:
    """Routes arrows between ``boxes`` ({key: rect}) in ``columns`` ({key: column}); ``gaps``:
    {column: x of the first lane in the gap right of that column}."""

    def __init__(self, boxes: dict, columns: dict, gaps: dict) -> None:
        self.boxes, self.columns, self.gaps = boxes, columns, gaps
        self._lanes: dict[int, int] = {}
        self._channels = 0
        self._legs: list[tuple[float, float, float]] = []  # horizontal legs: (y, x from, x to)
        self.arrows: list[Arrow] = []

    def lanes_used(self, gap: int) -> int:
        return self._lanes.get(gap, 0)

    def _port(self, key, x0: float, x1: float) -> float:
        """A height on a side edge of a box where a horizontal leg from ``x0`` to ``x1`` meets
        no other leg: arrows never share a line."""
        _, y, _, h = self.boxes[key]
        lo, hi = sorted((x0, x1))
        spots = [y + PORT * k for k in range(1, int(h // PORT) + 1) if PORT * k <= h - 4]
        for cy in spots + [y + 4 + 3 * k for k in range(int(h // 3))]:
            if not any(abs(cy - oy) < 4 and lo < b and a < hi for oy, a, b in self._legs):
                self._legs.append((cy, lo, hi))
                return cy
        return y + h / 2

    def route(self, src, dst, label: str, channel: float = 0.0) -> list[Point]:
        """An orthogonal path from ``src``'s box to ``dst``'s, through new lanes (and, between
        columns that are not neighbours, along a channel at height ``channel`` and below)."""
        cs, cd = self.columns[src], self.columns[dst]
        lanes = []
        for gap in gaps_used(cs, cd):
            k = self._lanes[gap] = self._lanes.get(gap, 0) + 1
            lanes.append(self.gaps[gap] + LANE * (k - 1))
        sx, _, sw, _ = self.boxes[src]
        dx, _, dw, _ = self.boxes[dst]
        start_x = sx + sw if cd >= cs else sx
        end_x = dx if cd > cs else dx + dw
        y1, y2 = self._port(src, start_x, lanes[0]), self._port(dst, lanes[-1], end_x)
        if len(lanes) == 1:
            return [(start_x, y1), (lanes[0], y1), (lanes[0], y2), (end_x, y2)]
        self._channels += 1
        ch = channel - 6 * (self._channels - 1)
        return [
            (start_x, y1),
            (lanes[0], y1),
            (lanes[0], ch),
            (lanes[1], ch),
            (lanes[1], y2),
            (end_x, y2),
        ]

    def place_labels(self, paths: list[tuple[list[Point], str]], limit_x: float) -> None:
        """Puts each path's label at the first spot that crosses nothing; ``limit_x``: where a
        label may go when no spot along its path is free (a column of labels on the right)."""
        obstacles = [segment_rect(p, q) for pts, _ in paths for p, q in segments(pts)]
        obstacles += list(self.boxes.values())
        for pts, text in paths:
            w, h = label_size(text)
            box = next(
                (b for b in _candidates(pts, w, h) if not any(rects_meet(b, o) for o in obstacles)),
                None,
            )
            if box is None:
                box = _free_spot(limit_x, pts[1][1], w, h, obstacles)
            obstacles.append(box)
            self.arrows.append(Arrow(pts, text, box))


def _candidates(points: list[Point], w: float, h: float):
    """Spots next to each segment of a path, middle of the segment first."""
    for p, q in segments(points):
        for t in (0.5, 0.3, 0.7, 0.15, 0.85):
            x, y = p[0] + (q[0] - p[0]) * t, p[1] + (q[1] - p[1]) * t
            if p[1] == q[1]:  # horizontal: above, then below
                yield (x - w / 2, y - h - 3, w, h)
                yield (x - w / 2, y + 3, w, h)
            else:  # vertical: right, then left
                yield (x + 4, y - h / 2, w, h)
                yield (x - w - 4, y - h / 2, w, h)


def _free_spot(x: float, y: float, w: float, h: float, obstacles: list[Rect]) -> Rect:
    """The first free box at ``x`` from height ``y`` downwards."""
    while True:
        box = (x, y, w, h)
        if not any(rects_meet(box, o) for o in obstacles):
            return box
        y += h + 2


def arrows_svg(
    out: list[str],
    arrows: list[Arrow],
    size: tuple[float, float],
    colour: str,
    marker: str,
    pad: float,
    titled: bool = False,
    extra: str = "",
) -> str:
    """The whole picture: ``out`` (the boxes' SVG) and the routed ``arrows`` in ``colour`` with
    their labels, in an ``<svg>`` grown to hold every label past ``size`` (width, height).
    ``marker``: the arrow head's id; ``titled``: each arrow carries its label as a tooltip;
    ``extra``: SVG put first (a caption)."""
    for arrow in arrows:
        pts = " ".join("%.0f,%.0f" % p for p in arrow.points)
        lx, ly, lw, lh = arrow.label_box
        title = "<title>%s</title>" % escape(arrow.label) if titled else ""
        out.append(
            '<polyline points="%s" fill="none" stroke="%s" stroke-width="2" '
            'marker-end="url(#%s)">%s</polyline>' % (pts, colour, marker, title)
        )
        out.append(
            '<text x="%.0f" y="%.0f" fill="%s" font-size="%d">%s</text>'
            % (lx + 3, ly + lh - 3, colour, LABEL_FONT, escape(arrow.label))
        )
    right = max([size[0]] + [a.label_box[0] + a.label_box[2] + pad for a in arrows])
    bottom = max([size[1]] + [a.label_box[1] + a.label_box[3] for a in arrows])
    head = (
        '<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
        'font-family="sans-serif" font-size="12"><defs><marker id="%s" '
        'viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" '
        'orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="%s"/></marker></defs>%s'
        % (right, bottom + pad, marker, colour, extra)
    )
    return "\n".join([head] + out + ["</svg>"])
