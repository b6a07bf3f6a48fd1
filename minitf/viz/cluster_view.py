"""Machines, tasks and devices of a cluster; where each variable lives; what crossed the network.

Book sections: "Multiple Devices Across Multiple Servers" (Figure 12-6: machines host tasks,
tasks own devices) and "Sharding Variables Across Multiple Parameter Servers" (variables spread
round robin over the ps tasks).  ``ClusterView(cluster, graph, run_metadata)`` draws:

* one box per machine (the host part of the task addresses), holding its tasks;
* per task its devices, the variables placed on it and how many ops it ran in the traced step;
* one arrow per pair of tasks that exchanged tensors in the step, labelled with the bytes sent.

Variables are located from the traced step when it ran them, else from the device they asked
for (``op.device``, e.g. what ``replica_device_setter`` chose).
"""

from xml.sax.saxutils import escape

from minitf.distributed.cluster_spec import ClusterSpec
from minitf.runtime import device_name_utils as dnu
from minitf.runtime.pools import short_device
from minitf.runtime.step_summary import transfer_bytes
from minitf.viz.files import SavesToFile

TASK_W, TASK_LINE, PAD = 230, 16, 14


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
    {(job, task): [names]}, ``op_counts`` {(job, task): n}, ``traffic`` {(src, dst): bytes}."""

    def __init__(self, cluster, graph=None, run_metadata=None):
        self.spec = cluster if isinstance(cluster, ClusterSpec) else ClusterSpec(cluster)
        self.tasks = [(job, i) for job in self.spec.jobs for i in self.spec.task_indices(job)]
        self.devices = {t: {dnu.task_name(*t) + "/device:CPU:0"} for t in self.tasks}
        self.variables = {t: [] for t in self.tasks}
        self.op_counts = {t: 0 for t in self.tasks}
        self.traffic = {}
        ran = {}
        stats = getattr(run_metadata, "step_stats", run_metadata)
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
        if graph is not None:
            for op in graph.get_operations():
                if op.type in ("VariableV2", "Variable", "VarHandleOp"):
                    task = ran.get(op.name) or _task_of(op.device)
                    if task in self.variables:
                        self.variables[task].append(op.name)

    def _machines(self):
        machines = {}
        for job, i in self.tasks:
            host = self.spec.task_address(job, i).rsplit(":", 1)[0]
            machines.setdefault(host, []).append((job, i))
        return machines

    def _task_lines(self, task):
        devs = sorted(short_device(d) for d in self.devices[task])
        lines = ["devices: " + ", ".join(devs)]
        if self.variables[task]:
            lines.append("variables: " + ", ".join(self.variables[task]))
        if self.op_counts[task]:
            lines.append("ops run in the step: %d" % self.op_counts[task])
        return lines

    def to_svg(self):
        out, boxes = [], {}
        x = PAD
        height = 0
        for host, tasks in self._machines().items():
            height = max(height, self._machine_svg(out, boxes, host, tasks, x))
            x += TASK_W + 3 * PAD
        for (src, dst), nbytes in sorted(self.traffic.items()):
            self._traffic_svg(out, boxes[src], boxes[dst], src, dst, nbytes)
        head = (
            '<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
            'font-family="sans-serif" font-size="12"><defs><marker id="arrow" '
            'viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" '
            'orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#c0392b"/></marker></defs>'
            % (x, height + PAD)
        )
        return "\n".join([head] + out + ["</svg>"])

    def _machine_svg(self, out, boxes, host, tasks, x):
        """A machine's box at ``x`` with a box per task (``boxes[task]``: its rectangle);
        returns the machine's bottom."""
        y = PAD + 44
        parts = []
        for task in tasks:
            lines = self._task_lines(task)
            h = 24 + TASK_LINE * len(lines)
            boxes[task] = (x + PAD, y, TASK_W, h)
            parts.append(
                '<rect x="%d" y="%d" width="%d" height="%d" rx="6" fill="%s" '
                'stroke="#555"/>'
                % (x + PAD, y, TASK_W, h, "#dce9f5" if task[0] == "ps" else "#fde6cf")
            )
            parts.append(
                '<text x="%d" y="%d" font-weight="bold">/job:%s/task:%d</text>'
                % (x + PAD + 8, y + 17, task[0], task[1])
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
        out.append(
            '<text x="%d" y="%d" fill="#444">machine %s</text>' % (x + 6, PAD + 14, escape(host))
        )
        out.extend(parts)
        return y

    @staticmethod
    def _traffic_svg(out, src_box, dst_box, src, dst, nbytes):
        """The arrow from one task's box to another's, with the bytes that went along it."""
        sx, sy, sw, sh = src_box
        dx, dy, dw, dh = dst_box
        x1, y1, x2, y2 = sx + sw / 2, sy + sh / 2, dx + dw / 2, dy + dh / 2
        title = "/job:%s/task:%d -> /job:%s/task:%d: %s" % (src + dst + (_size(nbytes),))
        out.append(
            '<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="#c0392b" '
            'stroke-width="2" marker-end="url(#arrow)"><title>%s</title></line>'
            % (x1, y1, x2, y2, escape(title))
        )
        out.append(
            '<text x="%.0f" y="%.0f" fill="#c0392b" font-size="11">%s</text>'
            % ((x1 + x2) / 2 + 4, (y1 + y2) / 2 - 4, _size(nbytes))
        )

    def _repr_svg_(self):
        return self.to_svg()
