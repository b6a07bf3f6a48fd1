"""Machines, tasks and devices of a cluster; where each variable lives; what crossed the network.

Book sections: "Multiple Devices Across Multiple Servers" (Figure 12-6: machines host tasks,
tasks own devices) and "Sharding Variables Across Multiple Parameter Servers" (variables spread
round robin over the ps tasks).  ``ClusterView(cluster, graph, run_metadata)`` draws:

* one box per machine (the host part of the task addresses), holding its tasks;
* per task its devices, the variables placed on it and how many ops it ran in the traced step;
* one arrow per pair of tasks that exchanged tensors in the step, labelled with the bytes sent;
* with ``master=``, the client and its session's arrow to that task's master service, and in each
  task its two services (Figure 12-6).  ``devices=`` lists every device of the cluster (e.g.
  ``sess.list_devices()``), so GPU cards show even when the step did not use them, and a task
  without any is marked GPU-less.

Arrows never share a segment and labels never cover an arrow, another label or a box
(``minitf.viz.routing``).  ``machines=`` ({title: ["ps/0", ...]}) groups the tasks as a picture
should when they all run on one computer (the real addresses are still written in each task).

Variables are located from the traced step when it ran them, else from the device they asked
for (``op.device``, e.g. what ``replica_device_setter`` chose).
"""

from xml.sax.saxutils import escape

from minitf.distributed.cluster_spec import ClusterSpec
from minitf.runtime import device_name_utils as dnu
from minitf.runtime.pools import short_device
from minitf.runtime.step_summary import transfer_bytes
from minitf.viz import labels
from minitf.viz.files import SavesToFile
from minitf.viz.routing import PORT, Router, arrows_svg, gap_width, gaps_used

TASK_W, TASK_LINE, PAD = 300, 16, 14


def _task_of(device_name):
    p = dnu.parse_full_name(device_name or "")
    if p is None or p.job is None:
        return None
    return (p.job, p.task if p.task is not None else 0)


def _size(n):
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return "%.1f %s" % (n / float(scale), unit)
    return "%d B" % n


class ClusterView(SavesToFile):
    """An SVG of a cluster (``_repr_svg_``, ``save("x.svg")``); attributes ``variables``
    {(job, task): [names]}, ``op_counts`` {(job, task): n}, ``traffic`` {(src, dst): bytes},
    ``arrows``, ``boxes`` (after drawing: each arrow's points, label and label box; each task's
    and the client's rectangle).  ``language``: of its words ("en", "zh"; None: the default of
    :func:`minitf.viz.set_language`); job, task and device names stay as TensorFlow writes them."""

    def __init__(
        self,
        cluster,
        graph=None,
        run_metadata=None,
        devices=None,
        master=None,
        machines=None,
        language=None,
    ):
        self.language = labels.resolve(language)
        self.spec = cluster if isinstance(cluster, ClusterSpec) else ClusterSpec(cluster)
        self.tasks = [(job, i) for job in self.spec.jobs for i in self.spec.task_indices(job)]
        self.devices = {t: {dnu.task_name(*t) + "/device:CPU:0"} for t in self.tasks}
        self._all_devices = devices is not None  # only then can a task be called GPU-less
        for d in devices or ():
            name = getattr(d, "name", d)
            if _task_of(name) in self.devices:
                self.devices[_task_of(name)].add(name)
        self.master = _task_key(master) if master is not None else None
        self.machine_titles = {k: [_task_key(t) for t in v] for k, v in (machines or {}).items()}
        self.variables = {t: [] for t in self.tasks}
        self.op_counts = {t: 0 for t in self.tasks}
        self.traffic = {}
        self.arrows = []
        ran = self._read_step(getattr(run_metadata, "step_stats", run_metadata))
        if graph is not None:
            for op in graph.get_operations():
                if op.type in ("VariableV2", "Variable", "VarHandleOp"):
                    task = ran.get(op.name) or _task_of(op.device)
                    if task in self.variables:
                        self.variables[task].append(op.name)

    def _read_step(self, stats):
        """Devices, op counts and task-to-task bytes of a traced step; {node: task it ran on}."""
        ran = {}
        for ds in stats.dev_stats if stats is not None else ():
            task = _task_of(ds.device)
            if task in self.devices:
                self.devices[task].add(ds.device)
                self.op_counts[task] += len(ds.node_stats)
                for ns in ds.node_stats:
                    ran[ns.node_name] = task
        crossed = transfer_bytes(stats) if stats is not None else {}
        for (src_dev, dst_dev), nbytes in crossed.items():
            src, dst = _task_of(src_dev), _task_of(dst_dev)
            if src != dst and src is not None and dst is not None:
                self.traffic[(src, dst)] = self.traffic.get((src, dst), 0) + nbytes
        return ran

    def _machines(self):
        if self.machine_titles:
            return {self._t(title): tasks for title, tasks in self.machine_titles.items()}
        machines = {}
        for job, i in self.tasks:
            host = self.spec.task_address(job, i).rsplit(":", 1)[0]
            machines.setdefault(self._t("machine %s") % host, []).append((job, i))
        return machines

    def _task_lines(self, task):
        devs = sorted(short_device(d) for d in self.devices[task])
        lines = []
        if self.master is not None:
            role = self._t("  <- the session's master") if task == self.master else ""
            lines.append(self._t("master + worker services") + role)
        gpus = [d for d in devs if "GPU" in d]
        gpu_less = self._all_devices and not gpus
        no_gpu = self._t(" (no GPU)") if gpu_less else ""
        lines.append(self._t("devices: ") + ", ".join(devs) + no_gpu)
        if self.variables[task]:
            lines.append(self._t("variables: ") + ", ".join(self.variables[task]))
        if self.op_counts[task]:
            lines.append(self._t("ops run in the step: %d") % self.op_counts[task])
        return lines

    def _t(self, english):
        return labels.text(english, self.language)

    def _links(self):
        """(src, dst, label) of every arrow: the session's, then the traffic."""
        links = (
            [("client", self.master, self._t("session (gRPC)"))] if self.master is not None else []
        )
        links += [(s, d, _size(n)) for (s, d), n in sorted(self.traffic.items())]
        return links

    def _columns(self):
        """{key: column} for the client (column 0 when drawn) and every task."""
        first = 1 if self.master is not None else 0
        columns = {"client": 0} if self.master is not None else {}
        for c, tasks in enumerate(self._machines().values()):
            columns.update({t: c + first for t in tasks})
        return columns

    def to_svg(self):
        """The picture; lays out columns, then routes arrows and places their labels."""
        columns, links = self._columns(), self._links()
        ncol = max(columns.values()) + 1 if columns else 1
        lanes = {c: 0 for c in range(ncol)}
        for s, d, _ in links:
            for gap in gaps_used(columns[s], columns[d]):
                lanes[gap] += 1
        out, boxes, gaps, x, height = [], {}, {}, PAD, 0
        self._ends = {}  # arrows per task: its box is tall enough to give each its own height
        for s, d, _ in links:
            for t in (s, d):
                self._ends[t] = self._ends.get(t, 0) + 1
        groups = [("client", ["client"])] if self.master is not None else []
        for c, (title, tasks) in enumerate(groups + list(self._machines().items())):
            if tasks == ["client"]:
                boxes["client"] = (x, PAD + 44, 90, 40)
                out.append(_CLIENT_SVG % (x, PAD + 44, x + 12, PAD + 68, escape(self._t("client"))))
                right = x + 90
            else:
                height = max(height, self._machine_svg(out, boxes, title, tasks, x))
                right = x + TASK_W + 2 * PAD
            labels = [t for s, d, t in links if gaps_used(columns[s], columns[d])[0] == c]
            width = gap_width(lanes[c], labels) if lanes[c] else 2 * PAD
            gaps[c] = right + width - 6 - 12 * lanes[c]
            x = right + width
        router = Router(boxes, columns, gaps)
        paths = [(router.route(s, d, t, channel=PAD + 36), t) for s, d, t in links]
        router.place_labels(paths, x)
        self.arrows, self.boxes = router.arrows, boxes
        return self._svg(out, x, height)

    def _svg(self, out, width, height):
        return arrows_svg(out, self.arrows, (width, height), "#c0392b", "arrow", PAD, titled=True)

    def _machine_svg(self, out, boxes, title, tasks, x):
        """A machine's box at ``x`` with a box per task (``boxes[task]``: its rectangle);
        returns the machine's bottom."""
        y = PAD + 44
        parts = []
        for task in tasks:
            lines = self._task_lines(task)
            h = max(
                24 + TASK_LINE * len(lines), PORT * (getattr(self, "_ends", {}).get(task, 0) + 1)
            )
            boxes[task] = (x + PAD, y, TASK_W, h)
            parts.append(
                '<rect x="%d" y="%d" width="%d" height="%d" rx="6" fill="%s" '
                'stroke="#555"/>'
                % (x + PAD, y, TASK_W, h, "#dce9f5" if task[0] == "ps" else "#fde6cf")
            )
            parts.append(
                '<text x="%d" y="%d" font-weight="bold">/job:%s/task:%d  (%s)</text>'
                % (x + PAD + 8, y + 17, task[0], task[1], escape(self.spec.task_address(*task)))
            )
            for k, line in enumerate(lines):
                parts.append(
                    '<text x="%d" y="%d" font-size="11">%s</text>'
                    % (x + PAD + 8, y + 34 + TASK_LINE * k, escape(line))
                )
            y += h + PAD
        out.append(
            '<rect x="%d" y="%d" width="%d" height="%d" rx="8" fill="#f7f7f7" '
            'stroke="#999"/>' % (x, PAD + 20, TASK_W + 2 * PAD, y - PAD - 20)
        )
        out.append('<text x="%d" y="%d" fill="#444">%s</text>' % (x + 6, PAD + 14, escape(title)))
        out.extend(parts)
        return y

    def _repr_svg_(self):
        return self.to_svg()


_CLIENT_SVG = (
    '<rect x="%d" y="%d" width="90" height="40" rx="6" fill="#e8f5e9" stroke="#555"/>'
    '<text x="%d" y="%d" font-weight="bold">%s</text>'
)


def _task_key(task):
    """("worker", 1) from ("worker", 1) or "worker/1"."""
    if isinstance(task, str):
        job, _, index = task.partition("/")
        return (job, int(index or 0))
    return (task[0], int(task[1]))
