"""A small layered ("Sugiyama-style") graph drawing in plain SVG, with no dependencies.

Used by :class:`minitf.viz.GraphView` when Graphviz is not available, so a notebook can always
show a graph.  It draws the same model the DOT text describes (nodes, edges, nested clusters
and a legend), in four steps:

1. **Layers** -- every node goes one layer below its lowest input (longest path from the
   sources), so data flows from top to bottom.  A cycle, should a graph have one, is broken by
   placing its earliest-created node as if its unplaced inputs did not exist.
2. **Bands** -- every cluster (job, task, device, name scope) owns a vertical band of the
   picture, nested like the clusters; a node is drawn in the band of its innermost cluster.
   Each cluster is therefore one rectangle, whatever layers its nodes are in.
3. **Ordering** -- inside a band, the nodes of a layer are sorted by the *barycentre* (mean x)
   of their neighbours, sweeping down (inputs) and up (consumers) a few times; this removes
   most edge crossings.
4. **Drawing** -- straight edges from the bottom of a producer to the top of a consumer, an
   arrowhead per edge, a ``<title>`` on every node for hover text.

The output depends only on the input (no random numbers, no ids that change between runs), so
two drawings of one graph are the same text.  It is meant for readable teaching pictures, not
for beating Graphviz: long edges are straight lines that may cross nodes.
"""

import functools
import math
from xml.sax.saxutils import escape

__all__ = ["Node", "Edge", "Cluster", "LegendItem", "render_svg"]

FONT = "Helvetica, Arial, sans-serif"
FONT_SIZE = 11
CHAR_W = 6.4  # estimated width of one character at FONT_SIZE
LINE_H = 14  # height of one text line
MAX_CHARS = 32  # longer label lines are shortened (the full text stays in the title)
H_GAP = 14  # between two nodes of a layer
BAND_GAP = 12  # between two sibling bands
BASE_V_GAP = 28  # between two layers, before room for cluster labels is added
CLUSTER_PAD = 8  # inner padding of a cluster box, per side
CLUSTER_LABEL_H = 16  # room for a cluster's label above its content
MARGIN = 16
SWEEPS = 4


class Node:
    """A box to draw: ``lines`` of text, a fill (one colour, or ``stripes``: a list of
    ``(colour, fraction)``), a ``shape`` ("box", "cylinder", "box3d"), hover text, and the
    innermost :class:`Cluster` it belongs to (None: top level)."""

    __slots__ = ("id", "lines", "fill", "stripes", "shape", "tooltip", "cluster", "css")

    def __init__(
        self,
        id,  # noqa: A002 - the DOT node id
        lines,
        fill="#ffffff",
        shape="box",
        tooltip="",  # noqa: A002
        cluster=None,
        stripes=None,
        css="node",
    ):
        self.id, self.lines, self.fill, self.shape = id, list(lines), fill, shape
        self.tooltip, self.cluster, self.stripes, self.css = tooltip, cluster, stripes, css


class Edge:
    """An arrow from node id ``src`` to node id ``dst``."""

    __slots__ = ("src", "dst", "dashed", "color", "width", "label", "tooltip", "css")

    def __init__(
        self, src, dst, dashed=False, color="#555555", width=1.0, label="", tooltip="", css="edge"
    ):
        self.src, self.dst, self.dashed, self.color, self.width = src, dst, dashed, color, width
        self.label, self.tooltip, self.css = label, tooltip, css


class Cluster:
    """A labelled box around nodes and smaller clusters; ``children`` in drawing order."""

    __slots__ = ("id", "label", "color", "parent", "children", "css", "opacity")

    def __init__(
        self,
        id,  # noqa: A002 - the DOT cluster id
        label,
        color="#888888",
        parent=None,
        css="cluster",  # noqa: A002
        opacity=0.08,
    ):
        self.id, self.label, self.color, self.parent, self.css = id, label, color, parent, css
        self.opacity = opacity
        self.children = []
        if parent is not None:
            parent.children.append(self)


class LegendItem:
    """One legend row: ``kind`` is "swatch" (a filled square of ``color``), "edge" (a line
    with ``color``/``dashed``/``width``), "shape" (a small ``shape`` outline) or "note"."""

    __slots__ = ("kind", "text", "color", "dashed", "width", "shape")

    def __init__(self, kind, text, color="#ffffff", dashed=False, width=1.0, shape="box"):
        self.kind, self.text, self.color, self.dashed = kind, text, color, dashed
        self.width, self.shape = width, shape


# -- helpers ----------------------------------------------------------------------------------


def _f(x):
    """A coordinate as short, stable text."""
    s = "%.1f" % x
    return s[:-2] if s.endswith(".0") else s


def _attr(text):
    return escape(str(text), {'"': "&quot;"})


def _shorten(line):
    return line if len(line) <= MAX_CHARS else "\u2026" + line[-(MAX_CHARS - 1) :]


def _text_w(text):
    return len(text) * CHAR_W


# -- 1. layers ----------------------------------------------------------------------------------


def _layers(n, preds, succs):
    """Longest-path layer of every node (index order breaks ties and cycles)."""
    import heapq

    missing = [len(p) for p in preds]
    layer = [0] * n
    done = [False] * n
    ready = [i for i in range(n) if missing[i] == 0]
    heapq.heapify(ready)
    next_forced = 0
    placed = 0
    while placed < n:
        if ready:
            v = heapq.heappop(ready)
            if done[v]:
                continue
        else:  # a cycle: take the earliest node not yet placed
            while done[next_forced]:
                next_forced += 1
            v = next_forced
        done[v] = True
        placed += 1
        layer[v] = max((layer[u] + 1 for u in preds[v] if done[u]), default=0)
        for w in succs[v]:
            missing[w] -= 1
            if missing[w] == 0 and not done[w]:
                heapq.heappush(ready, w)
    return layer


# -- 2. bands -----------------------------------------------------------------------------------


class _Band:
    """Geometry of one cluster (or of the top level): x range, own nodes per layer."""

    __slots__ = (
        "cluster",
        "children",
        "rows",
        "own_w",
        "w",
        "x0",
        "own_x0",
        "depth",
        "height",
        "lo",
        "hi",
    )

    def __init__(self, cluster, depth):
        self.cluster, self.depth = cluster, depth
        self.children = []
        self.rows = {}  # layer -> [node index] (own nodes only)
        self.own_w = self.w = self.x0 = self.own_x0 = 0.0
        self.height = 0  # cluster levels below this one
        self.lo = self.hi = None  # first and last layer of any node inside


def _measure(band, widths, has_box):
    """Widths bottom-up; returns the band's width."""
    own = 0.0
    for row in band.rows.values():
        own = max(own, sum(widths[i] for i in row) + H_GAP * (len(row) - 1))
    band.own_w = own
    parts = [own] if own else []
    for child in band.children:
        parts.append(_measure(child, widths, True))
        band.height = max(band.height, child.height + 1)
    spans = [(c.lo, c.hi) for c in band.children if c.lo is not None]
    if band.rows:
        spans.append((min(band.rows), max(band.rows)))
    if spans:
        band.lo = min(lo for lo, _ in spans)
        band.hi = max(hi for _, hi in spans)
    inner = sum(parts) + BAND_GAP * max(0, len(parts) - 1)
    if has_box:
        label_w = _text_w(band.cluster.label) + 2 * CLUSTER_PAD
        band.w = max(inner + 2 * CLUSTER_PAD, label_w)
    else:
        band.w = inner
    return band.w


def _place_bands(band, x0, has_box):
    band.x0 = x0
    inner_w = band.w - (2 * CLUSTER_PAD if has_box else 0)
    parts_w = (
        band.own_w
        + sum(c.w for c in band.children)
        + BAND_GAP * max(0, len(band.children) + (1 if band.own_w else 0) - 1)
    )
    x = x0 + (CLUSTER_PAD if has_box else 0) + (inner_w - parts_w) / 2
    band.own_x0 = x
    if band.own_w:
        x += band.own_w + BAND_GAP
    for child in band.children:
        _place_bands(child, x, True)
        x += child.w + BAND_GAP


def _walk(band):
    yield band
    for child in band.children:
        yield from _walk(child)


# -- 3. ordering --------------------------------------------------------------------------------


def _pack(band, layer, widths, xs):
    row = band.rows[layer]
    total = sum(widths[i] for i in row) + H_GAP * (len(row) - 1)
    x = band.own_x0 + (band.own_w - total) / 2
    for i in row:
        xs[i] = x + widths[i] / 2
        x += widths[i] + H_GAP


def _barycentre(nbrs, xs, i):
    """Sort key of node ``i`` in its row: the mean x of its neighbours (its own x if none)."""
    ns = nbrs[i]
    return sum(xs[j] for j in ns) / len(ns) if ns else xs[i]


def _order(bands_by_layer, n_layers, preds, succs, widths, xs):
    for band, layer in ((b, ly) for ly in range(n_layers) for b in bands_by_layer[ly]):
        _pack(band, layer, widths, xs)
    for sweep in range(SWEEPS):
        down = sweep % 2 == 0
        layers = range(1, n_layers) if down else range(n_layers - 2, -1, -1)
        key = functools.partial(_barycentre, preds if down else succs, xs)
        for layer in layers:
            for band in bands_by_layer[layer]:
                row = band.rows[layer]
                if len(row) < 2:
                    continue
                row.sort(key=key)
                _pack(band, layer, widths, xs)


# -- 4. drawing ---------------------------------------------------------------------------------


_STROKE = 'stroke="#333333" stroke-width="1"'


def _node_svg(out, node, x, y, w, h):
    cls = _attr(node.css)
    out.append(
        '<g class="%s" data-name="%s"><title>%s</title>'
        % (cls, _attr(node.id), escape(node.tooltip or "\n".join(node.lines)))
    )
    left, top = x - w / 2, y
    if node.shape == "cylinder":
        _cylinder_svg(out, node, x, left, top, w, h)
    else:
        if node.shape == "box3d":  # a box with a second one peeking out behind it
            out.append(
                '<rect x="%s" y="%s" width="%s" height="%s" fill="#ffffff" %s/>'
                % (_f(left + 4), _f(top), _f(w - 4), _f(h - 4), _STROKE)
            )
            left, top, w, h = left, top + 4, w - 4, h - 4
        _box_svg(out, node, left, top, w, h)
    ty = top + (h - LINE_H * len(node.lines)) / 2 + LINE_H - 3
    for k, line in enumerate(node.lines):
        weight = ' font-weight="bold"' if k == 0 else ""
        out.append(
            '<text x="%s" y="%s" text-anchor="middle"%s>%s</text>'
            % (_f(x), _f(ty + k * LINE_H), weight, escape(_shorten(line)))
        )
    out.append("</g>")


def _cylinder_svg(out, node, x, left, top, w, h):
    """A variable's drum: a body and an elliptic top."""
    ry = 5
    out.append(
        '<path d="M%s,%s v%s a%s,%s 0 0,0 %s,0 v-%s" fill="%s" %s/>'
        % (
            _f(left),
            _f(top + ry),
            _f(h - 2 * ry),
            _f(w / 2),
            ry,
            _f(w),
            _f(h - 2 * ry),
            node.fill,
            _STROKE,
        )
    )
    out.append(
        '<ellipse cx="%s" cy="%s" rx="%s" ry="%s" fill="%s" %s/>'
        % (_f(x), _f(top + ry), _f(w / 2), ry, node.fill, _STROKE)
    )


def _box_svg(out, node, left, top, w, h):
    """An op's box: filled with its colour, or striped by device colours (a folded scope)."""
    if not node.stripes:
        rx = 0 if node.shape == "box3d" else 4
        out.append(
            '<rect x="%s" y="%s" width="%s" height="%s" rx="%d" fill="%s" %s/>'
            % (_f(left), _f(top), _f(w), _f(h), rx, node.fill, _STROKE)
        )
        return
    sx = left
    for color, frac in node.stripes:
        sw = w * frac
        out.append(
            '<rect x="%s" y="%s" width="%s" height="%s" fill="%s"/>'
            % (_f(sx), _f(top), _f(sw), _f(h), color)
        )
        sx += sw
    out.append(
        '<rect x="%s" y="%s" width="%s" height="%s" fill="none" %s/>'
        % (_f(left), _f(top), _f(w), _f(h), _STROKE)
    )


def _arrowhead(x1, y1, x2, y2, color):
    dx, dy = x2 - x1, y2 - y1
    d = math.hypot(dx, dy) or 1.0
    ux, uy = dx / d, dy / d
    bx, by = x2 - 8 * ux, y2 - 8 * uy
    px, py = -uy * 3.5, ux * 3.5
    return '<polygon points="%s,%s %s,%s %s,%s" fill="%s"/>' % (
        _f(x2),
        _f(y2),
        _f(bx + px),
        _f(by + py),
        _f(bx - px),
        _f(by - py),
        color,
    )


def _legend_svg(out, items, x, y):
    """Draws the legend at (x, y); returns its (width, height)."""
    w = max([_text_w("Legend")] + [_text_w(it.text) + 34 for it in items]) + 16
    h = 24 + 18 * len(items)
    out.append('<g class="legend">')
    out.append(
        '<rect x="%s" y="%s" width="%s" height="%s" fill="#ffffff" stroke="#999999"/>'
        % (_f(x), _f(y), _f(w), _f(h))
    )
    out.append('<text x="%s" y="%s" font-weight="bold">Legend</text>' % (_f(x + 8), _f(y + 15)))
    for k, it in enumerate(items):
        ry = y + 24 + 18 * k
        sx = x + 8
        out.append('<g class="legend-item legend-%s">' % _attr(it.kind))
        if it.kind == "swatch":
            out.append(
                '<rect x="%s" y="%s" width="20" height="12" fill="%s" stroke="#333333"/>'
                % (_f(sx), _f(ry + 1), it.color)
            )
        elif it.kind == "edge":
            dash = ' stroke-dasharray="5,3"' if it.dashed else ""
            out.append(
                '<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="%s"%s/>'
                % (_f(sx), _f(ry + 7), _f(sx + 20), _f(ry + 7), it.color, _f(it.width), dash)
            )
        elif it.kind == "shape":
            if it.shape == "cylinder":
                out.append(
                    '<path d="M%s,%s v8 a10,3 0 0,0 20,0 v-8" fill="#ffffff" '
                    'stroke="#333333"/>' % (_f(sx), _f(ry + 3))
                )
                out.append(
                    '<ellipse cx="%s" cy="%s" rx="10" ry="3" fill="#ffffff" '
                    'stroke="#333333"/>' % (_f(sx + 10), _f(ry + 3))
                )
            else:
                out.append(
                    '<rect x="%s" y="%s" width="16" height="10" fill="#ffffff" '
                    'stroke="#333333"/>' % (_f(sx + 3), _f(ry))
                )
                out.append(
                    '<rect x="%s" y="%s" width="16" height="10" fill="#ffffff" '
                    'stroke="#333333"/>' % (_f(sx), _f(ry + 3))
                )
        tx = sx if it.kind == "note" else sx + 26
        out.append('<text x="%s" y="%s">%s</text></g>' % (_f(tx), _f(ry + 11), escape(it.text)))
    out.append("</g>")
    return w, h


def _adjacency(nodes, edges):
    """``(preds, succs, drawn)``: the distinct neighbours of every node index (self-loops and
    repeats left out) and the ``(src index, dst index, Edge)`` of every edge between known ids."""
    index = {nd.id: i for i, nd in enumerate(nodes)}
    n = len(nodes)
    preds = [[] for _ in range(n)]
    succs = [[] for _ in range(n)]
    seen = set()
    drawn = []
    for e in edges:
        s, d = index.get(e.src), index.get(e.dst)
        if s is None or d is None:
            continue
        drawn.append((s, d, e))
        if s == d or (s, d) in seen:
            continue
        seen.add((s, d))
        preds[d].append(s)
        succs[s].append(d)
    return preds, succs, drawn


def _node_sizes(nodes):
    """``(widths, heights)`` of the nodes' boxes."""
    widths = []
    heights = []
    for nd in nodes:
        text = max((_text_w(_shorten(line)) for line in nd.lines), default=0)
        widths.append(max(56.0, text + 16))
        heights.append(LINE_H * len(nd.lines) + 10 + (8 if nd.shape == "cylinder" else 0))
    return widths, heights


def _add_band(cluster, parent, band_of_cluster):
    """The band of ``cluster`` (and of its children, recursively) under band ``parent``."""
    b = _Band(cluster, parent.depth + 1)
    band_of_cluster[id(cluster)] = b
    parent.children.append(b)
    for c in cluster.children:
        _add_band(c, b, band_of_cluster)


def _bands(nodes, clusters, layer, widths):
    """The measured and placed band tree: its root (the top level) and all its bands, root
    first then depth first."""
    root = _Band(None, 0)
    band_of_cluster = {}
    for c in clusters:
        _add_band(c, root, band_of_cluster)
    for i, nd in enumerate(nodes):
        b = band_of_cluster.get(id(nd.cluster), root) if nd.cluster is not None else root
        b.rows.setdefault(layer[i], []).append(i)
    _measure(root, widths, False)
    _place_bands(root, 0.0, False)
    return root, list(_walk(root))


def _x_positions(bands, n_layers, preds, succs, widths):
    """The x of every node's centre (relative to the left margin) after ordering the rows."""
    bands_by_layer = [[] for _ in range(n_layers)]
    for b in bands:
        for ly in sorted(b.rows):
            bands_by_layer[ly].append(b)
    xs = [0.0] * len(widths)
    _order(bands_by_layer, n_layers, preds, succs, widths, xs)
    return xs


def _top_pad(band):
    """Room above a cluster's first layer: its label and those of the clusters inside it."""
    return CLUSTER_PAD + CLUSTER_LABEL_H * (band.height + 1)


def _bottom_pad(band):
    return CLUSTER_PAD * (band.height + 1)


def _rows(bands, layer, heights, n_layers, top):
    """``(row_top, row_h, bottom)``: the y and height of every layer, starting at ``top``; each
    layer gap leaves room for the clusters that open or close there."""
    opening = [0.0] * (n_layers + 1)
    closing = [0.0] * (n_layers + 1)
    for b in bands[1:]:
        if b.lo is None:
            continue
        opening[b.lo] = max(opening[b.lo], _top_pad(b))
        closing[b.hi] = max(closing[b.hi], _bottom_pad(b))
    row_h = [0.0] * n_layers
    for i in range(len(heights)):
        row_h[layer[i]] = max(row_h[layer[i]], heights[i])
    row_top = []
    y = top
    for ly in range(n_layers):
        y += opening[ly] + (BASE_V_GAP if ly else 0)
        row_top.append(y)
        y += row_h[ly] + closing[ly]
    return row_top, row_h, y


def _clusters_svg(out, bands, row_top, row_h):
    """The cluster boxes, outermost first so inner boxes are drawn on top."""
    for b in bands[1:]:
        if b.lo is None:
            continue
        top = row_top[b.lo] - _top_pad(b)
        bottom = row_top[b.hi] + row_h[b.hi] + _bottom_pad(b)
        c = b.cluster
        out.append(
            '<g class="%s" data-name="%s"><title>%s</title>'
            % (_attr(c.css), _attr(c.id), escape(c.label))
        )
        out.append(
            '<rect x="%s" y="%s" width="%s" height="%s" rx="6" fill="%s" '
            'fill-opacity="%s" stroke="%s" stroke-width="1.2"/>'
            % (_f(MARGIN + b.x0), _f(top), _f(b.w), _f(bottom - top), c.color, c.opacity, c.color)
        )
        out.append(
            '<text x="%s" y="%s" font-weight="bold" fill="#333333">%s</text></g>'
            % (_f(MARGIN + b.x0 + CLUSTER_PAD), _f(top + CLUSTER_LABEL_H - 3), escape(c.label))
        )


def _edge_svg(out, e, src, dst, x1, y1, x2, y2):
    """One edge from (x1, y1) to (x2, y2) between the nodes ``src`` and ``dst``."""
    dash = ' stroke-dasharray="5,3"' if e.dashed else ""
    out.append(
        '<g class="%s"><title>%s</title>'
        % (_attr(e.css), escape(e.tooltip or "%s \u2192 %s" % (src.id, dst.id)))
    )
    out.append(
        '<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="%s"%s/>'
        % (_f(x1), _f(y1), _f(x2), _f(y2), e.color, _f(e.width), dash)
    )
    out.append(_arrowhead(x1, y1, x2, y2, e.color))
    if e.label:
        out.append(
            '<text x="%s" y="%s" fill="%s" font-size="%d">%s</text>'
            % (_f((x1 + x2) / 2 + 4), _f((y1 + y2) / 2), e.color, FONT_SIZE - 1, escape(e.label))
        )
    out.append("</g>")


def _svg_head(total_w, total_h, title):
    """The ``<svg>`` element's opening, the white background and the title line."""
    head = [
        '<svg xmlns="http://www.w3.org/2000/svg" width="%s" height="%s" '
        'viewBox="0 0 %s %s" font-family="%s" font-size="%d">'
        % (_f(total_w), _f(total_h), _f(total_w), _f(total_h), FONT, FONT_SIZE),
        '<rect x="0" y="0" width="%s" height="%s" fill="#ffffff"/>' % (_f(total_w), _f(total_h)),
    ]
    if title:
        head.append(
            '<text class="title" x="%s" y="%s" font-size="14" font-weight="bold">%s'
            "</text>" % (MARGIN, MARGIN + 12, escape(title))
        )
    return head


def render_svg(nodes, edges, clusters=(), legend=(), title=None):
    """The SVG text of a layered drawing.

    ``nodes``: :class:`Node` list (its order breaks every tie); ``edges``: :class:`Edge` list
    between node ids (unknown ids are ignored); ``clusters``: the top-level :class:`Cluster`
    objects (their ``children`` nest further; a node names its innermost cluster); ``legend``:
    :class:`LegendItem` rows drawn on the right; ``title``: a line above the drawing.
    """
    n = len(nodes)
    preds, succs, drawn = _adjacency(nodes, edges)
    layer = _layers(n, preds, succs)
    n_layers = max(layer, default=-1) + 1
    widths, heights = _node_sizes(nodes)
    root, bands = _bands(nodes, clusters, layer, widths)
    xs = _x_positions(bands, n_layers, preds, succs, widths)
    title_h = 26 if title else 0
    row_top, row_h, body_h = _rows(bands, layer, heights, n_layers, MARGIN + title_h)
    ys = [row_top[layer[i]] + (row_h[layer[i]] - heights[i]) / 2 for i in range(n)]

    out = []
    _clusters_svg(out, bands, row_top, row_h)
    for s, d, e in drawn:  # edges below nodes
        if s != d:
            _edge_svg(
                out,
                e,
                nodes[s],
                nodes[d],
                MARGIN + xs[s],
                ys[s] + heights[s],
                MARGIN + xs[d],
                ys[d],
            )
    for i, nd in enumerate(nodes):
        _node_svg(out, nd, MARGIN + xs[i], ys[i], widths[i], heights[i])

    width = MARGIN * 2 + root.w
    legend_w = legend_h = 0
    if legend:
        legend_w, legend_h = _legend_svg(out, legend, width, MARGIN + title_h)
    total_w = width + (legend_w + MARGIN if legend else 0)
    total_h = max(body_h, MARGIN + title_h + legend_h) + MARGIN
    return "\n".join(_svg_head(total_w, total_h, title) + out + ["</svg>"]) + "\n"
