"""Which client sees which variable: the resource containers of a cluster's tasks (Figure 12-7).

Book section: "Sharing State Across Sessions Using Resource Containers".  A variable of a
distributed session lives in a *container* of the task that holds it, under its name; every
session whose graph names the same task, container and variable gets the same storage.
``ContainerView(servers, clients)`` draws that from what really happened:

* each task's containers and the resources in them, read from the tasks' resource managers
  (in-process servers, e.g. ``minitf.teaching.in_process_cluster``; a minitf-only look inside:
  TF1 offers no way to list a container);
* each client, with one arrow per variable its graph uses to the (task, container, name) that
  variable resolves to, labelled with the value the client read.
"""

from __future__ import annotations

from typing import Any
from xml.sax.saxutils import escape

from minitf.runtime import device_name_utils as dnu
from minitf.viz import labels
from minitf.viz.files import SavesToFile
from minitf.viz.routing import PORT, Router, arrows_svg, gap_width

PAD, ROW_H, CLIENT_W, TASK_W = 14, 22, 150, 260


def containers_of(server: Any) -> dict[str, list[str]]:
    """{container: [resource names]} over every device of an in-process ``tf.train.Server``."""
    found: dict[str, set] = {}
    for device in server.worker.devices:
        for container, names in device.resource_manager.containers().items():
            found.setdefault(container, set()).update(names)
    return {c: sorted(n) for c, n in sorted(found.items())}


def variables_used(graph: Any) -> list[tuple[str, str, str]]:
    """(task "job/i", container, name) of every variable in ``graph``, the container resolved
    as the kernel does: an empty ``container`` attr means the task's default (its job name)."""
    used = []
    for op in graph.get_operations():
        if op.type not in ("VariableV2", "Variable"):
            continue
        p = dnu.parse_full_name(op.device or "")
        if p is None or p.job is None:
            raise ValueError(
                "variable %r has no job in its device %r: pin it to a task" % (op.name, op.device)
            )
        task = "%s/%d" % (p.job, p.task or 0)
        container = op.get_attr("container") or p.job
        used.append((task, container, op.get_attr("shared_name") or op.name))
    return used


class ContainerView(SavesToFile):
    """An SVG of clients and containers (``_repr_svg_``, ``save``); attributes ``containers``
    {task: {container: [names]}}, ``links`` [(client, (task, container, name), value)];
    ``language``: of its words ("en", "zh"; None: the default of
    :func:`minitf.viz.set_language`)."""

    def __init__(
        self, servers: dict[str, Any], clients: dict[str, Any], language: str | None = None
    ) -> None:
        """``servers``: {"ps/0": in-process server}; ``clients``: {label: (graph, {variable
        name: value the client read})}, or a list of such pairs for a client that ran several
        graphs (Figure 12-7's client C uses an ``x`` in each container)."""
        self.language = labels.resolve(language)
        self.containers = {t: containers_of(s) for t, s in servers.items()}
        self.containers = {t: c for t, c in self.containers.items() if c}
        self.clients = list(clients)
        self.links = []
        for client, runs in clients.items():
            for graph, seen in [runs] if isinstance(runs, tuple) else runs:
                for task, container, name in variables_used(graph):
                    self.links.append((client, (task, container, name), seen.get(name, "?")))
        self.arrows: list = []

    def _ends(self):
        ends: dict = {}
        for client, row, _ in self.links:
            ends[client] = ends.get(client, 0) + 1
            ends[row] = ends.get(row, 0) + 1
        return ends

    def to_svg(self) -> str:
        ends, out, boxes = self._ends(), [], {}
        y = PAD + 24
        for client in self.clients:
            h = max(30, PORT * (ends.get(client, 0) + 1))
            boxes[client] = (PAD, y, CLIENT_W, h)
            out.append(
                '<rect x="%d" y="%d" width="%d" height="%d" rx="6" fill="#e8f5e9" '
                'stroke="#555"/>' % boxes[client]
            )
            out.append(
                '<text x="%d" y="%d" font-weight="bold">%s</text>'
                % (PAD + 8, y + 18, escape(self._t(client)))
            )
            y += h + PAD
        labels = ["%s = %s" % (row[2], value) for _, row, value in self.links]
        task_x = PAD + CLIENT_W + gap_width(len(self.links), labels)
        bottom = self._tasks_svg(out, boxes, ends, task_x)
        columns = {k: (0 if k in self.clients else 1) for k in boxes}
        router = Router(boxes, columns, {0: task_x - 6 - 12 * len(self.links)})
        paths = [(router.route(c, row, ""), "%s = %s" % (row[2], v)) for c, row, v in self.links]
        router.place_labels(paths, task_x + TASK_W + PAD)
        self.arrows = router.arrows
        return self._svg(out, task_x + TASK_W + PAD, max(y, bottom))

    def _tasks_svg(self, out, boxes, ends, x):
        """Task boxes holding container boxes holding one row per resource; returns the bottom."""
        y = PAD + 24
        for task, containers in sorted(self.containers.items()):
            top, y = y, y + 26
            for container, names in containers.items():
                ctop, y = y, y + 22
                for name in names:
                    h = max(ROW_H, PORT * (ends.get((task, container, name), 0) + 1))
                    boxes[(task, container, name)] = (x + 20, y, TASK_W - 40, h)
                    out.append(
                        '<rect x="%d" y="%d" width="%d" height="%d" fill="#fff" '
                        'stroke="#999"/>' % boxes[(task, container, name)]
                    )
                    out.append(
                        ('<text x="%d" y="%d">' + self._t("variable %s") + "</text>")
                        % (x + 28, y + 15, escape(name))
                    )
                    y += h + 4
                title = self._t('container "%s"') % container
                if container == task.split("/")[0]:
                    title += self._t("  (the default one)")
                out.insert(
                    0,
                    '<rect x="%d" y="%d" width="%d" height="%d" rx="4" fill="#fdf2e3" '
                    'stroke="#c9a26b"/>' % (x + 10, ctop, TASK_W - 20, y - ctop + 4),
                )
                out.append(
                    '<text x="%d" y="%d" font-size="11">%s</text>'
                    % (x + 16, ctop + 15, escape(title))
                )
                y += 10
            out.insert(
                0,
                '<rect x="%d" y="%d" width="%d" height="%d" rx="8" fill="#dce9f5" '
                'stroke="#555"/>' % (x, top, TASK_W, y - top),
            )
            out.append(
                '<text x="%d" y="%d" font-weight="bold">/job:%s/task:%s</text>'
                % ((x + 8, top + 18) + tuple(task.split("/")))
            )
            y += PAD
        return y

    def _svg(self, out, width, height):
        caption = '<text x="%d" y="%d" fill="#444">%s</text>' % (
            PAD,
            PAD + 12,
            escape(self._t("clients")),
        )
        return arrows_svg(
            out, self.arrows, (width, height), "#2e7d32", "carrow", PAD, extra=caption
        )

    def _t(self, english: str) -> str:
        return labels.text(english, self.language)

    def _repr_svg_(self) -> str:
        return self.to_svg()


__all__ = ["ContainerView", "containers_of", "variables_used"]
