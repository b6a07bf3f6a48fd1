"""GPU memory per card and per process (the book's Figure 12-4, drawn from live data).

Book section: "Managing the GPU RAM".  One bar per card: a segment per process holding a
reservation on it (this process's segment marked, with how much of it its tensors use right
now and at their peak), the free rest in light grey.  Two programs with
``per_process_gpu_memory_fraction=0.4`` show as two 40 % segments; with ``allow_growth`` the
segment grows as the program works.  The data is what ``minitf.smi()`` prints::

    MemoryView()            # the machine now
    MemoryView(data)        # a list of cards as returned by minitf.smi.smi_data()
"""

import os
from xml.sax.saxutils import escape

from minitf.viz import labels
from minitf.viz.files import SavesToFile

PROCESS_COLORS = ("#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#edc948", "#76b7b2")
FREE_COLOR = "#eeeeee"
STRIP_NOTE = "dark strip: memory this process's tensors use now (darker) and at their peak"
BAR_WIDTH, BAR_HEIGHT, LEFT, ROW = 560, 22, 170, 46


def _mib(n):
    return "%.0f MiB" % (n / float(1 << 20))


class MemoryView(SavesToFile):
    """Memory bars of the machine's GPU cards; ``_repr_svg_`` and ``save("x.svg")``.

    ``data``: cards as ``minitf.smi.smi_data()`` returns them (read now when omitted);
    ``this_pid``: the process to mark (default: this one); ``in_use``: {card id: (bytes in
    use, peak bytes)} of that process's tensors (default: this process's allocators);
    ``title``: the heading (default "GPU memory"; notebooks name the figure it draws);
    ``language``: of its words ("en", "zh"; None: the default of :func:`minitf.viz.set_language`).
    """

    def __init__(self, data=None, this_pid=None, in_use=None, title=None, language=None):
        self.language = labels.resolve(language)
        if data is None:
            from minitf.runtime import devices

            data = devices.card_usage()
        if in_use is None:
            from minitf.runtime import gpu_process_state

            in_use = {
                k: (sum(a.bytes_in_use for a in al), sum(a.peak_bytes_in_use for a in al))
                for k, al in gpu_process_state.process_gpu_allocators().items()
            }
        self.data = data
        self.title = self._t("GPU memory" if title is None else str(title))
        self.this_pid = os.getpid() if this_pid is None else this_pid
        self.in_use = in_use
        pids = sorted({p["pid"] for card in data for p in card["processes"]})
        self.colors = {pid: PROCESS_COLORS[i % len(PROCESS_COLORS)] for i, pid in enumerate(pids)}

    def _t(self, english):
        return labels.text(english, self.language)

    def to_svg(self):
        height = 40 + ROW * max(1, len(self.data)) + 20 * (len(self.colors) + 1)
        width = LEFT + BAR_WIDTH + 20
        out = [
            '<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
            'font-family="sans-serif" font-size="12">' % (width, height),
            '<text x="10" y="20" font-size="14" font-weight="bold">%s</text>' % escape(self.title),
        ]
        if not self.data:
            out.append(
                '<text x="10" y="50">%s</text>'
                % escape(self._t("No GPU card in this process (CPU only)."))
            )
        for row, card in enumerate(self.data):
            self._card_svg(out, card, 36 + ROW * row)
        self._legend_svg(out, 36 + ROW * max(1, len(self.data)) + 6)
        out.append("</svg>")
        return "\n".join(out)

    def _card_svg(self, out, card, y):
        """One card's row: its name and use, then a bar with a segment per process."""
        total = max(1, card["memory_total"])
        out.append(
            '<text x="10" y="%d">GPU %d%s</text>'
            % (y + 15, card["id"], self._t(" (emulated)") if card.get("emulated") else "")
        )
        out.append(
            '<text x="10" y="%d" fill="#666">%s / %s</text>'
            % (y + 30, _mib(card["memory_used"]), _mib(card["memory_total"]))
        )
        out.append(
            '<rect x="%d" y="%d" width="%d" height="%d" fill="%s" stroke="#999"/>'
            % (LEFT, y, BAR_WIDTH, BAR_HEIGHT, FREE_COLOR)
        )
        x = LEFT
        for p in card["processes"]:
            w = BAR_WIDTH * p["memory"] / total
            self._process_svg(out, card, p, x, y, w)
            x += w

    def _process_svg(self, out, card, p, x, y, w):
        """A process's segment of a card's bar; this process's also shows its tensors."""
        mine = p["pid"] == self.this_pid
        title = "pid %d %s: %s%s" % (
            p["pid"],
            p["name"],
            _mib(p["memory"]),
            self._t(" (this process)") if mine else "",
        )
        out.append(
            '<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s" '
            'stroke="%s" stroke-width="%d"><title>%s</title></rect>'
            % (
                x,
                y,
                w,
                BAR_HEIGHT,
                self.colors[p["pid"]],
                "#000" if mine else "#fff",
                2 if mine else 1,
                escape(title),
            )
        )
        used = self.in_use.get(card["id"]) if mine else None
        if used and p["memory"]:
            for value, opacity in ((used[1], 0.25), (used[0], 0.5)):
                out.append(
                    '<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="#000" '
                    'opacity="%s"><title>%s</title></rect>'
                    % (
                        x,
                        y + BAR_HEIGHT - 6,
                        w * min(1.0, value / p["memory"]),
                        6,
                        opacity,
                        self._t("tensors %s: %s")
                        % (self._t("peak" if opacity == 0.25 else "in use"), _mib(value)),
                    )
                )

    def _legend_svg(self, out, y):
        for pid, color in self.colors.items():
            out.append('<rect x="10" y="%d" width="12" height="12" fill="%s"/>' % (y, color))
            out.append(
                '<text x="28" y="%d">pid %d%s</text>'
                % (y + 10, pid, self._t(" (this process)") if pid == self.this_pid else "")
            )
            y += 20
        out.append(
            '<text x="10" y="%d" fill="#666">%s</text>' % (y + 10, escape(self._t(STRIP_NOTE)))
        )

    def _repr_svg_(self):
        return self.to_svg()
