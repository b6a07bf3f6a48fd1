"""Which thread of which device ran which op, and when (the book's Figure 12-5, made live).

Book section: "Parallel Execution".  Trace a step (or simulate one) and draw it::

    md = tf.RunMetadata()
    sess.run(fetches, options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE),
             run_metadata=md)
    TimelineView(md)                         # the last cell's value: drawn in the notebook

    from minitf.runtime.simulate import simulate
    TimelineView(simulate(sess, fetches))    # the same picture on a virtual clock: identical
                                             # on every machine
    view.save("step.svg"); view.save("step.json")   # the JSON opens in ui.perfetto.dev

What the picture shows:

* one horizontal *lane* per thread that ran something, grouped by device (devices in the order
  of the step stats; in a device, the ``caller`` thread first, then the pool threads by name);
* one box per op: it starts where the op started (relative to the first op of the step) and is
  as wide as the op took (at least one pixel), coloured by op type (the same type always gets
  the same colour, in every picture);
* the chunks of a kernel split over a device's intra-op pool as thin bars on the lanes of the
  threads that ran them;
* every tensor copied between devices as a red arrow from the end of the op that produced it to
  the start of the op that used it;
* hover text on every box (op, device, thread, start, duration) and a time axis in µs or ms;
* a summary line: makespan, total op time and their ratio (how many threads were busy on
  average: the parallelism the step got).
"""

import hashlib
import math
from xml.sax.saxutils import escape

from minitf.runtime.step_stats import arrival_micros
from minitf.viz import labels
from minitf.viz.files import SavesToFile
from minitf.viz.graph_view import natural_key

# The line under the title: makespan, op time, parallelism, ops and threads.
SUMMARY = "makespan %s \u00b7 op time %s \u00b7 parallelism %.2f\u00d7 \u00b7 %d ops on %d threads"

__all__ = ["TimelineView", "OP_PALETTE", "TRANSFER_COLOR", "op_color"]

OP_PALETTE = (
    "#4e79a7",
    "#f28e2b",
    "#59a14f",
    "#edc948",
    "#b07aa1",
    "#76b7b2",
    "#ff9da7",
    "#9c755f",
    "#bab0ac",
    "#a0cbe8",
    "#ffbe7d",
    "#8cd17d",
    "#f1ce63",
    "#d4a6c8",
    "#86bcb6",
    "#fabfd2",
    "#d7b5a6",
    "#499894",
)
"""Op-type colours (no red: red means a transfer)."""

TRANSFER_COLOR = "#d62728"
FONT = "Helvetica, Arial, sans-serif"
LEFT = 190  # room for lane labels
RIGHT = 24
LANE_H = 22
DEVICE_H = 20  # the device's header row
TOP_PAD = 12
AXIS_H = 26
CHAR_W = 6.0


def op_color(op_type):
    """The colour of an op type: an md5 hash into :data:`OP_PALETTE` (stable everywhere)."""
    digest = hashlib.md5(str(op_type).encode("utf-8")).digest()
    return OP_PALETTE[int.from_bytes(digest[:4], "big") % len(OP_PALETTE)]


def _f(x):
    s = "%.2f" % x
    s = s.rstrip("0").rstrip(".")
    return s if s not in ("", "-0") else "0"


def _attr(text):
    return escape(str(text), {'"': "&quot;"})


def _text_color(fill):
    r, g, b = (int(fill[k : k + 2], 16) for k in (1, 3, 5))
    return "#000000" if 0.299 * r + 0.587 * g + 0.114 * b > 140 else "#ffffff"


def _number(v):
    return ("%.3f" % v).rstrip("0").rstrip(".")


def _duration(us):
    """``us`` microseconds as short text: ``850 µs``, ``1.25 ms``, ``2 s``."""
    if abs(us) < 1000:
        return "%s \u00b5s" % _number(us)
    if abs(us) < 1000000:
        return "%s ms" % _number(us / 1000.0)
    return "%s s" % _number(us / 1000000.0)


def _thread_label(thread_id, thread_name):
    return thread_name if thread_name is not None else "thread %s" % thread_id


def _lane_key(label):
    return (label != "caller", natural_key(label))


def _step_stats(source):
    if not hasattr(source, "dev_stats") and hasattr(source, "step_stats"):
        return source.step_stats
    return source


class TimelineView(SavesToFile):
    """An SVG timeline of one step (see the module docstring).

    ``step_stats_or_run_metadata``: a ``RunMetadata`` after a traced run, or a ``StepStats``
    (``md.step_stats``, or what :func:`minitf.runtime.simulate.simulate` returns);
    ``title``: the heading; ``width``: the width of the plotted time range in pixels;
    ``px_per_us``: a fixed scale instead (pixels per microsecond); ``language``: of the title
    and the summary line ("en", "zh"; None: the default of :func:`minitf.viz.set_language`).
    """

    save_formats = {".svg": "to_svg", ".json": "chrome_trace"}

    def __init__(
        self, step_stats_or_run_metadata, title=None, width=900, px_per_us=None, language=None
    ):
        self.language = labels.resolve(language)
        self.step_stats = _step_stats(step_stats_or_run_metadata)
        self.title = labels.text("Step timeline" if title is None else title, self.language)
        self.devices = []
        nodes = []  # (device, NodeExecStats)
        lanes = {}  # device -> {thread label}
        for ds in self.step_stats.dev_stats:
            if ds.device not in lanes:
                self.devices.append(ds.device)
                lanes[ds.device] = set()
            for ns in ds.node_stats:
                nodes.append((ds.device, ns))
                lanes[ds.device].add(_thread_label(ns.thread_id, ns.thread_name))
                for ch in getattr(ns, "chunks", ()):
                    lanes[ds.device].add(_thread_label(ch.thread_id, ch.thread_name))
        self._nodes = nodes
        self.lanes = [(d, t) for d in self.devices for t in sorted(lanes[d], key=_lane_key)]
        starts = [ns.all_start_micros for _, ns in nodes]
        ends = [ns.all_start_micros + ns.all_end_rel_micros for _, ns in nodes]
        for _, ns in nodes:
            for ch in getattr(ns, "chunks", ()):
                starts.append(ch.start_micros)
                ends.append(ch.end_micros)
        self.t0 = min(starts) if starts else 0
        self.makespan = (max(ends) - self.t0) if ends else 0
        self.busy = sum(ns.all_end_rel_micros for _, ns in nodes)
        span = max(self.makespan, 1)
        self.scale = float(px_per_us) if px_per_us is not None else width / float(span)
        self.plot_width = span * self.scale
        self.left = LEFT
        self._svg = None

    def _t(self, english):
        return labels.text(english, self.language)

    def _hover(self, what, device, thread, start, duration):
        """The hover text of a box: ``what``, its device and thread, start and duration."""
        return "\n".join(
            (
                what,
                self._t("device: %s") % device,
                self._t("thread: %s") % labels.thread_name(thread, self.language),
                self._t("start: +%s") % _duration(start),
                self._t("duration: %s") % _duration(duration),
            )
        )

    # -- geometry --------------------------------------------------------------------------
    def x_of(self, micros):
        """The x coordinate of the absolute time ``micros``."""
        return self.left + (micros - self.t0) * self.scale

    def _layout_rows(self, top):
        """y of every device header and lane; returns the bottom."""
        self._device_y = {}
        self._lane_y = {}
        y = top
        for d in self.devices:
            self._device_y[d] = y
            y += DEVICE_H
            for dev, t in self.lanes:
                if dev == d:
                    self._lane_y[(d, t)] = y
                    y += LANE_H
        return y

    # -- drawing ---------------------------------------------------------------------------
    def to_svg(self):
        """The timeline as SVG text (the same text for the same step stats)."""
        if self._svg is None:
            self._svg = self._draw()
        return self._svg

    def _draw(self):
        title_h = 22
        summary_y = TOP_PAD + title_h + 4
        axis_top = summary_y + 12
        rows_top = axis_top + AXIS_H
        bottom = self._layout_rows(rows_top)
        width = self.left + self.plot_width + RIGHT
        height = bottom + TOP_PAD
        out = self._heading(width, height, summary_y)
        self._device_bands(out, width)
        self._lanes(out)
        self._axis(out, axis_top, bottom)
        self._ops_and_transfers(out)
        out.append("</svg>")
        return "\n".join(out) + "\n"

    def _heading(self, width, height, summary_y):
        """The ``<svg>`` element's opening, background, title and summary line."""
        par = self.busy / float(self.makespan) if self.makespan else 0.0
        return [
            '<svg xmlns="http://www.w3.org/2000/svg" width="%s" height="%s" '
            'viewBox="0 0 %s %s" font-family="%s" font-size="11">'
            % (_f(width), _f(height), _f(width), _f(height), FONT),
            '<rect x="0" y="0" width="%s" height="%s" fill="#ffffff"/>' % (_f(width), _f(height)),
            '<text class="title" x="10" y="%s" font-size="14" font-weight="bold">%s'
            "</text>" % (_f(TOP_PAD + 12), escape(self.title)),
            '<text class="summary" x="10" y="%%s" fill="#444444">%s</text>'
            % escape(labels.text(SUMMARY, self.language))
            % (
                _f(summary_y),
                _duration(self.makespan),
                _duration(self.busy),
                par,
                len(self._nodes),
                len(self.lanes),
            ),
        ]

    def _device_bands(self, out, width):
        """One band per device (alternately shaded), its name on its header row."""
        for k, d in enumerate(self.devices):
            y = self._device_y[d]
            n_lanes = sum(1 for dev, _ in self.lanes if dev == d)
            band_h = DEVICE_H + LANE_H * n_lanes
            out.append('<g class="device" data-device="%s">' % _attr(d))
            out.append(
                '<rect x="0" y="%s" width="%s" height="%s" fill="%s"/>'
                % (_f(y), _f(width), _f(band_h), "#f4f4f4" if k % 2 == 0 else "#ffffff")
            )
            out.append(
                '<text x="6" y="%s" font-weight="bold">%s</text></g>' % (_f(y + 14), escape(d))
            )

    def _lanes(self, out):
        """One lane per thread: its name and a line under it."""
        for d, t in self.lanes:
            y = self._lane_y[(d, t)]
            out.append('<g class="lane" data-device="%s" data-thread="%s">' % (_attr(d), _attr(t)))
            out.append(
                '<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#dddddd"/>'
                % (_f(self.left), _f(y + LANE_H), _f(self.left + self.plot_width), _f(y + LANE_H))
            )
            shown = labels.thread_name(t, self.language)
            out.append('<text x="16" y="%s">%s</text></g>' % (_f(y + 15), escape(shown)))

    def _ops_and_transfers(self, out):
        """Op boxes, then chunks on top of them, then the transfers' arrows."""
        where = {}
        for d, ns in self._nodes:
            lane = (d, _thread_label(ns.thread_id, ns.thread_name))
            where.setdefault((d, ns.node_name), (ns, lane))
            where.setdefault((None, ns.node_name), (ns, lane))
            self._op_box(out, d, ns, lane)
        for d, ns in self._nodes:
            for ch in getattr(ns, "chunks", ()):
                self._chunk_box(out, d, ns, ch)
        for tr in getattr(self.step_stats, "transfers", ()):
            self._transfer(out, tr, where)

    def _axis(self, out, top, bottom):
        span = max(self.makespan, 1)
        raw = span / 8.0
        mag = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1
        step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
        step = max(step, 1)
        out.append('<g class="axis">')
        out.append(
            '<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#333333"/>'
            % (
                _f(self.left),
                _f(top + AXIS_H - 4),
                _f(self.left + self.plot_width),
                _f(top + AXIS_H - 4),
            )
        )
        div, unit = (
            (1.0, "\u00b5s")
            if span < 1000
            else (1000.0, "ms")
            if span < 1000000
            else (1000000.0, "s")
        )
        tick = 0
        while tick <= span + 1e-9:
            x = self.left + tick * self.scale
            label = "%s %s" % (_number(tick / div), unit)  # one unit along the axis
            out.append(
                '<g class="tick"><line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#333333"/>'
                '<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#e6e6e6"/>'
                '<text x="%s" y="%s" text-anchor="middle" font-size="10">%s</text></g>'
                % (
                    _f(x),
                    _f(top + AXIS_H - 8),
                    _f(x),
                    _f(top + AXIS_H - 4),
                    _f(x),
                    _f(top + AXIS_H - 4),
                    _f(x),
                    _f(bottom),
                    _f(x),
                    _f(top + AXIS_H - 12),
                    label,
                )
            )
            tick += step
        out.append("</g>")

    def _op_box(self, out, device, ns, lane):
        y = self._lane_y[lane]
        x = self.x_of(ns.all_start_micros)
        w = max(1.0, ns.all_end_rel_micros * self.scale)
        op_type = ns.op_type or "unknown"
        fill = op_color(op_type)
        title = self._hover(
            "%s (%s)" % (ns.node_name, op_type),
            device,
            lane[1],
            ns.all_start_micros - self.t0,
            ns.all_end_rel_micros,
        )
        out.append(
            '<g class="op" data-name="%s" data-op="%s" data-start="%s" '
            'data-duration="%s"><title>%s</title>'
            % (
                _attr(ns.node_name),
                _attr(op_type),
                _f(ns.all_start_micros - self.t0),
                _f(ns.all_end_rel_micros),
                escape(title),
            )
        )
        out.append(
            '<rect x="%s" y="%s" width="%s" height="%s" fill="%s" stroke="#333333" '
            'stroke-width="0.5"/>' % (_f(x), _f(y + 3), _f(w), _f(LANE_H - 6), fill)
        )
        if w > len(ns.node_name) * CHAR_W + 6:
            out.append(
                '<text x="%s" y="%s" fill="%s" font-size="10">%s</text>'
                % (_f(x + 3), _f(y + 15), _text_color(fill), escape(ns.node_name))
            )
        out.append("</g>")

    def _chunk_box(self, out, device, ns, ch):
        lane = (device, _thread_label(ch.thread_id, ch.thread_name))
        y = self._lane_y[lane]
        x = self.x_of(ch.start_micros)
        w = max(1.0, (ch.end_micros - ch.start_micros) * self.scale)
        op_type = ns.op_type or "unknown"
        title = self._hover(
            self._t("%s chunk %d of %d (%s)") % (ns.node_name, ch.index, len(ns.chunks), op_type),
            device,
            lane[1],
            ch.start_micros - self.t0,
            ch.end_micros - ch.start_micros,
        )
        out.append(
            '<g class="chunk" data-name="%s" data-index="%d"><title>%s</title>'
            '<rect x="%s" y="%s" width="%s" height="6" fill="%s" stroke="#222222" '
            'stroke-width="0.5" fill-opacity="0.85"/></g>'
            % (
                _attr(ns.node_name),
                ch.index,
                escape(title),
                _f(x),
                _f(y + LANE_H - 9),
                _f(w),
                op_color(op_type),
            )
        )

    def _transfer(self, out, tr, where):
        src = where.get((tr.src_device, tr.src_node)) or where.get((None, tr.src_node))
        dst = where.get((tr.dst_device, tr.dst_node)) or where.get((None, tr.dst_node))
        if src is None or dst is None:
            return
        (sns, slane), (dns, dlane) = src, dst
        x1 = self.x_of(sns.all_start_micros + sns.all_end_rel_micros)
        y1 = self._lane_y[slane] + LANE_H / 2.0
        x2 = self.x_of(arrival_micros(dns))
        y2 = self._lane_y[dlane] + LANE_H / 2.0
        title = "%s\n%s \u2192 %s\n%s" % (
            self._t("%s: %d bytes") % (tr.tensor_name, tr.bytes),
            tr.src_device,
            tr.dst_device,
            self._t("copy time: %s") % _duration(tr.micros),
        )
        dx, dy = x2 - x1, y2 - y1
        d = math.hypot(dx, dy) or 1.0
        ux, uy = dx / d, dy / d
        bx, by = x2 - 7 * ux, y2 - 7 * uy
        px, py = -uy * 3, ux * 3
        out.append(
            '<g class="transfer" data-tensor="%s"><title>%s</title>'
            '<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="1.5"/>'
            '<polygon points="%s,%s %s,%s %s,%s" fill="%s"/></g>'
            % (
                _attr(tr.tensor_name),
                escape(title),
                _f(x1),
                _f(y1),
                _f(x2),
                _f(y2),
                TRANSFER_COLOR,
                _f(x2),
                _f(y2),
                _f(bx + px),
                _f(by + py),
                _f(bx - px),
                _f(by - py),
                TRANSFER_COLOR,
            )
        )

    # -- outputs ---------------------------------------------------------------------------
    def _repr_svg_(self):
        return self.to_svg()

    def chrome_trace(self):
        """The step as Chrome trace JSON text with the real threads (open it in Perfetto)."""
        from minitf.runtime.trace import Timeline

        return Timeline(self.step_stats).generate_chrome_trace_format(show_threads=True)

    def __repr__(self):
        return "<TimelineView: %d ops on %d threads of %d devices, %s>" % (
            len(self._nodes),
            len(self.lanes),
            len(self.devices),
            _duration(self.makespan),
        )
