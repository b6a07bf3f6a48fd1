"""GraphView (minitf.viz.graph_view): ops coloured and grouped by device, as DOT and SVG.

The conftest gives every test a fresh default graph and two emulated GPUs.
"""

import os
import re
import stat
import sys
import time
import xml.etree.ElementTree as ET

import pytest

import minitf as tf
from minitf.viz import GraphView, graph_view
from minitf.viz.graph_view import DEVICE_PALETTE, UNPLACED_COLOR, device_colors

CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"
GPU0 = "/job:localhost/replica:0/task:0/device:GPU:0"
GPU1 = "/job:localhost/replica:0/task:0/device:GPU:1"
SVG = "{http://www.w3.org/2000/svg}"


# -- helpers ---------------------------------------------------------------------------------


def build_model():
    """A variable on the CPU, a name scope spread over both GPUs, one control edge."""
    with tf.device("/cpu:0"):
        v = tf.Variable(tf.zeros([3]), name="v")
    with tf.name_scope("layer"):
        with tf.device("/gpu:0"):
            a = tf.constant([1.0, 2.0, 3.0], name="a")
            b = tf.add(a, v, name="add")
        with tf.device("/gpu:1"):
            c = tf.square(b, name="c")
            with tf.control_dependencies([b]):
                d = tf.identity(c, name="d")
    return v, d


def placed_view(**kw):
    v, d = build_model()
    sess = tf.Session()
    sess.run(tf.global_variables_initializer())
    sess.run(d)
    view = GraphView(session=sess, **kw)
    sess.close()
    return view


def node_attrs(dot):
    """{node id: attribute text} for every node statement of a DOT text."""
    out = {}
    for m in re.finditer(r'^\s*"([^"]+)" \[(.*)\];$', dot, re.M):
        out[m.group(1)] = m.group(2)
    return out


def edge_attrs(dot):
    """{(src, dst): [attribute text, ...]} for every edge statement."""
    out = {}
    for m in re.finditer(r'^\s*"([^"]+)" -> "([^"]+)" \[(.*)\];$', dot, re.M):
        out.setdefault((m.group(1), m.group(2)), []).append(m.group(3))
    return out


def cluster_paths(dot):
    """{node id: [labels of the clusters around it, outermost first]}."""
    stack, paths = [], {}
    for line in dot.splitlines():
        s = line.strip()
        if s.startswith("subgraph "):
            stack.append(None)
        elif s.startswith("label=") and stack and stack[-1] is None:
            stack[-1] = re.match(r'label="(.*)";', s).group(1)
        elif s == "}" and stack:
            stack.pop()
        else:
            m = re.match(r'"([^"]+)" \[', s)
            if m and "->" not in s:
                paths[m.group(1)] = list(stack)
    return paths


def fill_of(attrs):
    return re.search(r'fillcolor="([^"]+)"', attrs).group(1)


def no_graphviz(monkeypatch, tmp_path):
    """No ``dot`` on PATH and no importable pygraphviz: only the builtin drawing is left."""
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.setitem(sys.modules, "pygraphviz", None)


def fake_dot(tmp_path, monkeypatch, body):
    """A ``dot`` executable on PATH running the shell ``body``."""
    bindir = tmp_path / "fake-bin"
    bindir.mkdir()
    exe = bindir / "dot"
    exe.write_text("#!/bin/sh\n" + body + "\n")
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", str(bindir) + os.pathsep + "/usr/bin" + os.pathsep + "/bin")


def big_graph(blocks=27, width=25):
    """blocks x width x 3 ops in nested scopes over three devices, plus ``width`` inputs."""
    prev = [tf.constant(1.0, name="in%d" % i) for i in range(width)]
    for k in range(blocks):
        dev = "/cpu:0" if k % 3 == 0 else "/gpu:%d" % (k % 2)
        with tf.name_scope("block%d" % k), tf.device(dev):
            nxt = []
            for i in range(width):
                with tf.name_scope("unit%d" % i):
                    x = tf.add(prev[i], prev[(i * 7 + 3) % width])
                    nxt.append(tf.negative(tf.square(x)))
            prev = nxt
    return tf.get_default_graph()


# -- colours -------------------------------------------------------------------------------------


def test_device_colours_follow_sorted_device_names():
    colors = device_colors([GPU1, CPU0, GPU0])
    assert list(colors) == [CPU0, GPU0, GPU1]
    assert [colors[d] for d in (CPU0, GPU0, GPU1)] == list(DEVICE_PALETTE[:3])
    # natural order: GPU:2 comes before GPU:10, and every colour is different
    many = ["/device:GPU:%d" % i for i in range(16)]
    colors = device_colors(many)
    assert list(colors)[:3] == ["/device:GPU:0", "/device:GPU:1", "/device:GPU:2"]
    assert len(set(colors.values())) == 16
    assert UNPLACED_COLOR not in colors.values()


def test_each_op_is_filled_with_its_devices_colour():
    view = placed_view()
    nodes = node_attrs(view.dot)
    expected = {CPU0: DEVICE_PALETTE[0], GPU0: DEVICE_PALETTE[1], GPU1: DEVICE_PALETTE[2]}
    for name, dev in [
        ("v", CPU0),
        ("v/read", CPU0),
        ("zeros", CPU0),
        ("layer/a", GPU0),
        ("layer/add", GPU0),
        ("layer/c", GPU1),
        ("layer/d", GPU1),
    ]:
        assert view.device_of[name] == dev
        assert fill_of(nodes[name]) == expected[dev], name
    assert len({fill_of(nodes[n]) for n in ("v", "layer/a", "layer/c")}) == 3


def test_builtin_svg_uses_the_same_colours():
    view = placed_view(renderer="builtin")
    root = ET.fromstring(view.to_svg())
    fills = {}
    for g in root.iter(SVG + "g"):
        if "node" in g.get("class", "").split():
            shapes = [e for e in g if e.tag in (SVG + "rect", SVG + "path")]
            fills[g.get("data-name")] = shapes[-1].get("fill")
    assert fills["layer/c"] == fills["layer/d"] == DEVICE_PALETTE[2]
    assert fills["layer/a"] == DEVICE_PALETTE[1]
    assert fills["zeros"] == DEVICE_PALETTE[0]


def test_unplaced_ops_are_grey_and_listed_in_the_legend():
    tf.constant(1.0, name="nowhere")
    with tf.device("/gpu:1"):
        tf.constant(2.0, name="somewhere")
    view = GraphView()
    nodes = node_attrs(view.dot)
    assert fill_of(nodes["nowhere"]) == UNPLACED_COLOR
    assert fill_of(nodes["somewhere"]) == DEVICE_PALETTE[0]  # the only device named
    assert "not placed" in view.dot
    assert view.source == "requested"
    assert "requested only" in view.dot


# -- clusters ----------------------------------------------------------------------------------


def test_clusters_nest_job_task_device_scope():
    view = placed_view()
    paths = cluster_paths(view.dot)
    assert paths["layer/c"] == ["/job:localhost", "/replica:0/task:0", "/device:GPU:1", "layer"]
    assert paths["layer/a"] == ["/job:localhost", "/replica:0/task:0", "/device:GPU:0", "layer"]
    assert paths["zeros"] == ["/job:localhost", "/replica:0/task:0", "/device:CPU:0"]
    # a variable shares the cluster of its scope ("v" with "v/read" and "v/Assign")
    assert paths["v"] == paths["v/read"] == paths["zeros"] + ["v"]
    # every cluster subgraph's name starts with "cluster" (Graphviz draws only those)
    names = re.findall(r'subgraph "([^"]+)"', view.dot)
    assert names and all(n.startswith("cluster_") for n in names)
    assert len(names) == len(set(names))


def test_requested_devices_give_device_clusters_without_job():
    build_model()
    paths = cluster_paths(GraphView().dot)
    assert paths["layer/c"] == ["/device:GPU:1", "layer"]


def test_builtin_svg_draws_nested_cluster_boxes():
    view = placed_view(renderer="builtin")
    root = ET.fromstring(view.to_svg())
    kinds = {}
    boxes = {}
    for g in root.iter(SVG + "g"):
        cls = g.get("class", "").split()
        if "cluster" in cls:
            rect = g.find(SVG + "rect")
            label = g.find(SVG + "title").text
            kinds.setdefault(cls[1], []).append(label)
            boxes[label] = tuple(float(rect.get(k)) for k in ("x", "y", "width", "height"))
    assert kinds["cluster-job"] == ["/job:localhost"]
    assert sorted(kinds["cluster-device"]) == ["/device:CPU:0", "/device:GPU:0", "/device:GPU:1"]

    def inside(inner, outer):
        x, y, w, h = boxes[inner]
        ox, oy, ow, oh = boxes[outer]
        return ox <= x and oy <= y and x + w <= ox + ow and y + h <= oy + oh

    assert inside("/replica:0/task:0", "/job:localhost")
    for dev in ("/device:CPU:0", "/device:GPU:0", "/device:GPU:1"):
        assert inside(dev, "/replica:0/task:0")


# -- edges ---------------------------------------------------------------------------------------


def test_control_edges_are_dashed_and_data_edges_are_not():
    view = placed_view()
    edges = edge_attrs(view.dot)
    assert any("style=dashed" in a for a in edges[("layer/add", "layer/d")])
    assert all("dashed" not in a for a in edges[("layer/c", "layer/d")])
    assert all("dashed" not in a for a in edges[("layer/a", "layer/add")])


def test_edges_between_devices_are_marked_as_copies():
    view = placed_view()
    edges = edge_attrs(view.dot)
    copies = {k for k, attrs in edges.items() if any('label="copy"' in a for a in attrs)}
    assert copies == {("v/read", "layer/add"), ("layer/add", "layer/c")}
    for k in copies:
        assert any("#d62728" in a and "bold" in a for a in edges[k])
    root = ET.fromstring(
        GraphView(view.graph, placement=view.device_of, renderer="builtin").to_svg()
    )
    copy_groups = [g for g in root.iter(SVG + "g") if g.get("class") == "edge copy"]
    assert len(copy_groups) == 2
    assert all(g.find(SVG + "line").get("stroke") == "#d62728" for g in copy_groups)
    assert all(g.find(SVG + "text").text == "copy" for g in copy_groups)


def test_explicit_placement_decides_the_copies():
    a = tf.constant(1.0, name="a")
    b = tf.negative(a, name="b")
    tf.square(b, name="c")
    view = GraphView(placement={"a": CPU0, "b": CPU0, "c": GPU0})
    assert view.source == "explicit"
    edges = edge_attrs(view.dot)
    assert all("copy" not in x for x in edges[("a", "b")])
    assert any("copy" in x for x in edges[("b", "c")])
    assert "the placement given" in view.dot


# -- variables, legend ---------------------------------------------------------------------------


def test_variables_are_cylinders():
    view = placed_view(renderer="builtin")
    nodes = node_attrs(view.dot)
    assert "shape=cylinder" in nodes["v"]
    assert "cylinder" not in nodes["v/read"]
    root = ET.fromstring(view.to_svg())
    variables = [
        g.get("data-name") for g in root.iter(SVG + "g") if "variable" in g.get("class", "").split()
    ]
    assert variables == ["v"]


def test_legend_names_every_device_colour():
    view = placed_view(renderer="builtin")
    for dev, color in (
        (CPU0, DEVICE_PALETTE[0]),
        (GPU0, DEVICE_PALETTE[1]),
        (GPU1, DEVICE_PALETTE[2]),
    ):
        assert re.search(
            r'<td bgcolor="%s"[^>]*> </td><td align="left">%s</td>' % (color, re.escape(dev)),
            view.dot,
        )
    assert "the session's placement" in view.dot
    root = ET.fromstring(view.to_svg())
    legend = [g for g in root.iter(SVG + "g") if g.get("class") == "legend"]
    assert len(legend) == 1
    rows = {}
    for item in legend[0].iter(SVG + "g"):
        rect = item.find(SVG + "rect")
        rows[item.find(SVG + "text").text] = rect.get("fill") if rect is not None else None
    assert rows[CPU0] == DEVICE_PALETTE[0] and rows[GPU1] == DEVICE_PALETTE[2]
    assert {"control edge", "copy between devices", "variable"} <= set(rows)


def test_unrun_session_falls_back_to_requested_devices():
    build_model()
    with tf.Session() as sess:
        view = GraphView(session=sess)
    assert view.source == "requested"
    assert view.device_of["layer/c"] == "/device:GPU:1"


# -- collapsing ----------------------------------------------------------------------------------


def test_collapse_true_draws_one_box_per_top_level_scope():
    view = placed_view(collapse_scopes=True)
    nodes = node_attrs(view.dot)
    assert "scope:layer" in nodes and "scope:v" in nodes
    assert not any(n.startswith("layer/") or n.startswith("v/") for n in nodes)
    assert 'label="layer\\n4 ops"' in nodes["scope:layer"]
    # its ops are on two GPUs, half and half: striped, outside any one device cluster
    assert "striped" in nodes["scope:layer"]
    assert "%s;0.500:%s;0.500" % (DEVICE_PALETTE[1], DEVICE_PALETTE[2]) in nodes["scope:layer"]
    assert cluster_paths(view.dot)["scope:layer"] == ["/job:localhost", "/replica:0/task:0"]
    # the v scope is on the CPU only: its colour, in the CPU's cluster
    assert fill_of(nodes["scope:v"]) == DEVICE_PALETTE[0]
    assert "shape=box3d" in nodes["scope:v"]
    edges = edge_attrs(view.dot)
    assert any("copy" in a for a in edges[("scope:v", "scope:layer")])
    assert "name scope (collapsed)" in view.dot


def test_collapse_a_list_of_scopes():
    view = placed_view(collapse_scopes=["layer"])
    nodes = node_attrs(view.dot)
    assert "scope:layer" in nodes and "v/read" in nodes and "scope:v" not in nodes
    assert (
        GraphView(view.graph, placement=view.device_of, collapse_scopes="layer").dot
        == GraphView(view.graph, placement=view.device_of, collapse_scopes=["layer"]).dot
    )


def test_large_graphs_collapse_automatically():
    g = big_graph(blocks=6, width=10)
    n = len(g.get_operations())
    full = GraphView(g, max_nodes=None)
    assert full.node_count == n and not full.collapsed
    # the deepest scope level that fits: one box per block/unit scope (60) + 10 inputs
    auto = GraphView(g, max_nodes=100)
    assert auto.collapsed and auto.node_count == 70
    assert "scope:block0/unit0" in node_attrs(auto.dot)
    # less room: one box per top-level block scope
    coarse = GraphView(g, max_nodes=50)
    assert coarse.node_count == 16
    boxes = sorted(k for k in node_attrs(coarse.dot) if k.startswith("scope:"))
    assert boxes == ["scope:block%d" % k for k in range(6)]
    assert 'label="block0\\n30 ops"' in coarse.dot
    never = GraphView(g, max_nodes=5, collapse_scopes=False)
    assert never.node_count == n


# -- determinism, saving -------------------------------------------------------------------------


def test_two_builds_give_identical_text():
    first = placed_view(renderer="builtin")
    dot1, svg1 = first.dot, first.to_svg()
    tf.reset_default_graph()
    second = placed_view(renderer="builtin")
    assert second.dot == dot1
    assert second.to_svg() == svg1
    # the same placement given explicitly: the same picture but for the legend's note
    explicit = GraphView(second.graph, placement=second.device_of)
    assert explicit.dot == dot1.replace("the session's placement", "the placement given")


def test_save_svg_and_dot(tmp_path, monkeypatch):
    no_graphviz(monkeypatch, tmp_path)
    view = placed_view()
    svg_path = view.save(str(tmp_path / "g.svg"))
    dot_path = view.save(str(tmp_path / "g.dot"))
    assert open(svg_path, encoding="utf-8").read() == view._repr_svg_()
    assert open(dot_path, encoding="utf-8").read() == view.dot == view.to_dot()
    assert view._repr_svg_().startswith("<svg")
    with pytest.raises(ValueError):
        view.save(str(tmp_path / "g.png"))


# -- renderers -----------------------------------------------------------------------------------


def test_fallback_renderer_without_graphviz_gives_wellformed_svg(tmp_path, monkeypatch):
    no_graphviz(monkeypatch, tmp_path)
    view = placed_view()
    svg = view._repr_svg_()
    assert view.renderer_used == "builtin"
    root = ET.fromstring(svg)
    assert root.tag == SVG + "svg"
    names = {
        g.get("data-name") for g in root.iter(SVG + "g") if "node" in g.get("class", "").split()
    }
    assert names == {op.name for op in view.graph.get_operations()}
    titles = [t.text for t in root.iter(SVG + "title")]
    assert any(t.startswith("layer/c (Square)") for t in titles)
    assert len([g for g in root.iter(SVG + "g") if g.get("class") == "edge control"]) == 2


def test_dot_on_path_is_used_and_its_version_comment_dropped(tmp_path, monkeypatch):
    fake_dot(
        tmp_path,
        monkeypatch,
        'cat > "$0.input"\n'
        'printf \'<?xml version="1.0"?>\\n<!-- Generated by graphviz version 99.0\\n -->\\n'
        '<svg xmlns="http://www.w3.org/2000/svg"><g class="graph"/></svg>\\n\'',
    )
    view = placed_view()
    svg = view.to_svg()
    assert view.renderer_used == "dot"
    assert "Generated by graphviz" not in svg
    assert svg.startswith("<svg")  # no prolog: the same element whichever renderer drew it
    ET.fromstring(svg)
    # dot read exactly the DOT text of the view
    assert (tmp_path / "fake-bin" / "dot.input").read_text() == view.dot


def test_failing_dot_falls_back_to_builtin(tmp_path, monkeypatch):
    fake_dot(tmp_path, monkeypatch, "echo 'syntax error' >&2; exit 1")
    monkeypatch.setitem(sys.modules, "pygraphviz", None)
    view = placed_view()
    ET.fromstring(view.to_svg())
    assert view.renderer_used == "builtin"
    strict = GraphView(view.graph, placement=view.device_of, renderer="dot")
    with pytest.raises(RuntimeError, match="syntax error"):
        strict.to_svg()


def test_asking_for_dot_without_dot_is_an_error(tmp_path, monkeypatch):
    no_graphviz(monkeypatch, tmp_path)
    tf.constant(1.0)
    with pytest.raises(RuntimeError, match="not on PATH"):
        GraphView(renderer="dot").to_svg()
    with pytest.raises(ImportError):
        GraphView(renderer="pygraphviz").to_svg()
    with pytest.raises(ValueError):
        GraphView(renderer="graphviz-online")


def test_pygraphviz_is_used_when_dot_is_missing(tmp_path, monkeypatch):
    seen = {}

    class FakeAGraph:
        def __init__(self, string):
            seen["dot"] = string

        def draw(self, format, prog):  # noqa: A002 - pygraphviz's argument name
            seen["args"] = (format, prog)
            return b"<!-- Generated by graphviz version 14.1.5\n -->\n<svg/>"

    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.setitem(sys.modules, "pygraphviz", type(sys)("pygraphviz"))
    sys.modules["pygraphviz"].AGraph = FakeAGraph
    view = placed_view()
    assert view.to_svg() == "<svg/>"
    assert view.renderer_used == "pygraphviz"
    assert seen == {"dot": view.dot, "args": ("svg", "dot")}
    # too big to lay out in-process: the builtin drawing instead
    monkeypatch.setattr(graph_view, "PYGRAPHVIZ_MAX_NODES", 3)
    again = GraphView(view.graph, placement=view.device_of)
    ET.fromstring(again.to_svg())
    assert again.renderer_used == "builtin"


def test_two_thousand_ops_render_in_the_fallback_path(tmp_path, monkeypatch):
    no_graphviz(monkeypatch, tmp_path)
    g = big_graph(blocks=27, width=25)
    n = len(g.get_operations())
    assert n >= 2000
    start = time.perf_counter()
    view = GraphView(g, max_nodes=None)
    svg = view.to_svg()
    elapsed = time.perf_counter() - start
    print("\nbuiltin layout of %d ops: %.3f s, %d bytes of SVG" % (n, elapsed, len(svg)))
    assert view.renderer_used == "builtin"
    root = ET.fromstring(svg)
    drawn = [g for g in root.iter(SVG + "g") if "node" in g.get("class", "").split()]
    assert len(drawn) == n
    assert elapsed < 3.0
    # by default the same graph collapses to at most max_nodes boxes, and draws fast
    small = GraphView(g)
    assert small.node_count <= 400
    ET.fromstring(small.to_svg())
