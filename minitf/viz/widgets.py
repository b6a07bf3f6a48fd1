"""Live views for JupyterLab: the placement explorer and the step-through scheduler.

Book sections: "Placing Operations on Devices" (:class:`PlacementExplorer`: change a pin, the
number of GPUs, soft placement or a device function, and see the placer's answer) and
"Parallel Execution" (:class:`StepThrough`: Figure 12-5 one event at a time — pending-input
counts, ready queues, which thread picks what).

Both are ipywidgets with a static fallback: a saved notebook (or GitHub) shows their HTML/SVG
even without a live kernel.  Both can be driven from Python (``explorer.set_pin(...)``,
``stepper.next()``), which is how the tests use them.
"""

from xml.sax.saxutils import escape

import ipywidgets as w

from minitf.framework import errors
from minitf.runtime import devices as devices_mod
from minitf.runtime import placer
from minitf.runtime.simulate import Simulation
from minitf.viz import labels
from minitf.viz.graph_view import GraphView
from minitf.viz.timeline_view import TimelineView

AS_BUILT = "(as built)"


def _bundle(widget, html):
    """The widget for a live kernel plus HTML for everything else (saved notebooks, GitHub)."""
    data = widget._repr_mimebundle_() or {}
    data = dict(data[0]) if isinstance(data, tuple) else dict(data)
    data["text/html"] = html
    return data


def _emulated_devices(num_gpus, memory=4 << 30):
    gpus = [
        devices_mod.PhysicalGPU(i, "minitf emulated GPU", memory, (7, 0), True)
        for i in range(num_gpus)
    ]
    out = [devices_mod.Device("localhost", 0, 0, "CPU", 0, devices_mod.CPU_MEMORY_LIMIT)]
    out += [devices_mod.Device("localhost", 0, 0, "GPU", i, memory, g) for i, g in enumerate(gpus)]
    return out


def books_device_function(op):
    """The book's dynamic placement function, as TF 1.x really runs it: it tests
    ``op.type == "Variable"``, which never matches (the op type is ``VariableV2``)."""
    return "/cpu:0" if op.type == "Variable" else "/gpu:0"


def variables_on_cpu(op):
    """The fixed version: variables (``VariableV2``) on the CPU, everything else on GPU 0."""
    return "/cpu:0" if op.type in ("Variable", "VariableV2") else "/gpu:0"


DEVICE_FUNCTIONS = {
    "none": None,
    "book's function (op.type == 'Variable')": books_device_function,
    "variables on CPU (VariableV2)": variables_on_cpu,
}


class PlacementExplorer:
    """Re-places a graph as you change pins, GPUs, soft placement or a device function.

    The graph itself is never changed: pins and device functions are applied to the ops'
    *requested* devices only while the placer runs (the function is applied to the finished
    ops, not while they are built, so colocated ops follow their variable by the placer's
    colocation rule rather than by ``tf.colocate_with``).  ``language``: of the controls and
    the picture's legend ("en", "zh"; None: the default of :func:`minitf.viz.set_language`).
    """

    def __init__(self, graph=None, num_gpus=2, allow_soft_placement=False, language=None):
        from minitf.framework.graph import get_default_graph

        self.language = labels.resolve(language)
        t = self._t

        self.graph = graph or get_default_graph()
        self.ops = self.graph.get_operations()
        self.pins = {}
        self._pin_values = []
        names = [op.name for op in self.ops]
        self._op = w.Dropdown(options=names, description=t("op"))
        self._pin = w.Dropdown(description=t("pin to"))
        self._gpus = w.IntSlider(value=num_gpus, min=0, max=4, description=t("GPUs"))
        self._soft = w.Checkbox(value=allow_soft_placement, description=t("soft placement"))
        self._fn = w.Dropdown(
            options=[(t(label), label) for label in DEVICE_FUNCTIONS], description=t("device fn")
        )
        self._out = w.HTML()
        self._updating = False
        self._refresh_pin_options()
        self._op.observe(lambda _: self._show_pin(), names="value")
        self._pin.observe(self._pin_changed, names="value")
        self._gpus.observe(lambda _: (self._refresh_pin_options(), self._replace()), names="value")
        for control in (self._soft, self._fn):
            control.observe(lambda _: self._replace(), names="value")
        self.widget = w.VBox(
            [w.HBox([self._op, self._pin]), w.HBox([self._gpus, self._soft, self._fn]), self._out]
        )
        self._replace()

    def _t(self, english):
        return labels.text(english, self.language)

    # -- driving it from Python (what the controls do) ----------------------------------------
    def set_pin(self, op_name, device):
        """Pins ``op_name`` to ``device`` (None: back to what the graph asked)."""
        self._op.value = op_name
        if device is not None and device not in self._pin_values:
            self.pins[op_name] = device
            self._refresh_pin_options()
            self._replace()
            return
        self._pin.value = AS_BUILT if device is None else device

    def set_gpus(self, n):
        self._gpus.value = n

    def set_soft_placement(self, on):
        self._soft.value = bool(on)

    def set_device_function(self, label):
        self._fn.value = label

    # -- the work -------------------------------------------------------------------------------
    def _refresh_pin_options(self):
        # one GPU more than exist, so a learner can pin to a missing device and see the error
        opts = [AS_BUILT, "", "/cpu:0"] + ["/gpu:%d" % i for i in range(self._gpus.value + 1)]
        opts += [p for p in self.pins.values() if p not in opts]
        self._pin_values = opts
        self._updating = True
        try:
            self._pin.options = [(self._t(o) if o == AS_BUILT else o, o) for o in opts]
        finally:
            self._updating = False
        self._show_pin()

    def _show_pin(self):
        self._updating = True
        try:
            self._pin.value = self.pins.get(self._op.value, AS_BUILT)
        finally:
            self._updating = False

    def _pin_changed(self, change):
        if self._updating:
            return
        if change["new"] == AS_BUILT:
            self.pins.pop(self._op.value, None)
        else:
            self.pins[self._op.value] = change["new"]
        self._replace()

    def requested(self, op):
        """The device ``op`` asks for: a pin, else the device function's answer, else what the
        graph recorded.  Ops colocated with another (a variable's Assign and read) take its
        request, as ``tf.colocate_with`` did when they were built."""
        if op.name in self.pins:
            return self.pins[op.name]
        fn = DEVICE_FUNCTIONS[self._fn.value]
        if fn is None:
            return op.device
        for cls in op._attrs.get("_class") or ():
            name = cls.decode()[len("loc:@") :] if isinstance(cls, bytes) else cls[5:]
            if name != op.name and name in self.graph._nodes_by_name:
                return self.requested(self.graph._nodes_by_name[name])
        return fn(op)

    def _replace(self):
        saved = [(op, op._device) for op in self.ops]
        self.error = None
        self.placement = None
        try:
            for op in self.ops:
                op._device = self.requested(op)
            devs = _emulated_devices(self._gpus.value)
            self.placement = placer.place(
                self.ops, devs, self._soft.value, has_cuda=bool(self._gpus.value)
            )
        except errors.OpError as e:
            self.error = e
        finally:
            for op, device in saved:
                op._device = device
        self._out.value = self.html()

    @property
    def log_lines(self):
        return self.placement.log_lines if self.placement is not None else []

    def html(self):
        parts = []
        if self.error is not None:
            parts.append(
                '<pre style="color:#b00020">%s: %s</pre>'
                % (type(self.error).__name__, escape(self.error.message))
            )
        else:
            view = GraphView(
                self.graph,
                placement={op.name: d.name for op, d in self.placement.device_of.items()},
                language=self.language,
            )
            parts.append(view.to_svg())
        rows = "".join(
            "<tr><td>%s</td><td>%s</td><td>%s</td></tr>"
            % (
                escape(op.name),
                escape(self.requested(op) or "''"),
                escape(self.placement.device_of[op].name if self.placement else "-"),
            )
            for op in self.ops
        )
        head = "".join("<th>%s</th>" % self._t(h) for h in ("op", "requested", "assigned"))
        parts.append("<table><tr>%s</tr>%s</table>" % (head, rows))
        parts.append("<pre>%s</pre>" % escape("\n".join(self.log_lines)))
        return "\n".join(parts)

    def _repr_mimebundle_(self, include=None, exclude=None):
        return _bundle(self.widget, self.html())


class StepThrough:
    """Figure 12-5, one scheduling event at a time (a :class:`Simulation` behind buttons);
    ``language``: of the buttons and the timeline's title ("en", "zh"; None: the default)."""

    def __init__(
        self,
        session,
        fetches,
        feed_dict=None,
        inter_op_threads=None,
        intra_op_threads=None,
        cost_model=None,
        gpu_thread_mode=None,
        gpu_thread_count=None,
        language=None,
    ):
        self.language = labels.resolve(language)
        options = dict(
            cost_model=cost_model,
            inter_op_threads=inter_op_threads,
            intra_op_threads=intra_op_threads,
            gpu_thread_mode=gpu_thread_mode,
            gpu_thread_count=gpu_thread_count,
        )
        self.sim = Simulation(session, fetches, feed_dict, **options)
        self.final = Simulation(session, fetches, feed_dict, **options).run()
        self.last = None
        buttons = [w.Button(description=self._t(d)) for d in ("Next event", "Play", "Reset")]
        for b, fn in zip(buttons, (self.next, self.play, self.reset)):
            b.on_click(lambda _, fn=fn: fn())
        self.buttons = buttons
        self._out = w.HTML()
        self.widget = w.VBox([w.HBox(buttons), self._out])
        self._draw()

    def next(self):
        """Advances one event (a node starts or ends)."""
        ev = self.sim.next_event()
        if ev is not None:
            self.last = ev
        self._draw()
        return ev

    def play(self):
        """Runs to the end of the step."""
        while self.next() is not None:
            pass

    def reset(self):
        self.sim.reset()
        self.last = None
        self._draw()

    def _t(self, english):
        return labels.text(english, self.language)

    def _last_event(self):
        """The status line's last event: kind, node, thread and device, or "-"."""
        ev = self.last
        if ev is None:
            return "-"
        thread = labels.thread_name(ev.thread, self.language)
        return self._t("%s %s on %s (%s)") % (self._t(ev.kind), ev.node, thread, ev.device)

    def _table(self, head, rows):
        """An HTML table: ``head`` (English words, shown in the widget's language) and rows of
        cells (already text)."""
        th = "".join("<th>%s</th>" % self._t(h) for h in head)
        trs = "".join("<tr>%s</tr>" % "".join("<td>%s</td>" % escape(c) for c in r) for r in rows)
        return "<table><tr>%s</tr>%s</table>" % (th, trs)

    def state_html(self):
        sim = self.sim
        done = " &#8212; <b>%s</b>" % self._t("step done") if sim.done else ""
        rows = [
            "<b>t = %d µs</b> &#8212; %s%s%s"
            % (sim.time, self._t("last event: "), escape(self._last_event()), done)
        ]
        running = sorted(sim.running().items())
        rows.append(
            self._table(
                ("thread", "running"),
                [(labels.thread_name(t, self.language), n) for t, n in running],
            )
        )
        queues = sim.ready_queues().items()
        rows.append(
            self._table(
                ("pool", "ready queue"),
                [(labels.thread_name(d, self.language), ", ".join(q) or "-") for d, q in queues],
            )
        )
        waiting = sim.waiting()
        if waiting:
            rows.append(
                "<p>%s%s</p>"
                % (
                    self._t("_Recv waiting for its tensor (no thread): "),
                    escape(", ".join(waiting)),
                )
            )
        pending = sorted(sim.pending_counts().items())
        rows.append(
            self._table(("waiting op", "inputs still awaited"), [(n, str(c)) for n, c in pending])
        )
        return "\n".join(rows)

    def timeline_svg(self):
        """The whole step's timeline with a red line at the current simulated time."""
        view = TimelineView(self.final, language=self.language)
        svg = view.to_svg()
        x = view.x_of(view.t0 + self.sim.time)
        line = '<line x1="%.1f" y1="0" x2="%.1f" y2="100%%" stroke="red" stroke-width="2"/>' % (
            x,
            x,
        )
        return svg.replace("</svg>", line + "</svg>")

    def html(self):
        return self.state_html() + "\n" + self.timeline_svg()

    def _draw(self):
        self._out.value = self.html()

    def _repr_mimebundle_(self, include=None, exclude=None):
        return _bundle(self.widget, self.html())
