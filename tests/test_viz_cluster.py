"""ClusterView: machines > tasks > devices, variables per ps task, bytes between tasks.

Book sections: "Multiple Devices Across Multiple Servers" (Figure 12-6) and "Sharding Variables
Across Multiple Parameter Servers".
"""

import socket
import xml.etree.ElementTree as ET

import numpy as np
import pytest

import minitf as tf
from minitf.runtime.config_proto import StepStats
from minitf.runtime.step_stats import DeviceStepStats, NodeExecStats, TransferStats
from minitf.viz import ClusterView

SPEC = {"ps": ["machine-a:2221"], "worker": ["machine-a:2222", "machine-b:2222"]}


def test_machines_tasks_variables_and_traffic_from_hand_built_stats():
    """Tasks grouped by machine; variables under the ps task the setter chose; an arrow per
    pair of tasks with the bytes they exchanged."""
    with tf.device(tf.train.replica_device_setter(ps_tasks=1)):
        tf.Variable(1.0, name="w")
        tf.Variable(2.0, name="b")
    ps, w1 = "/job:ps/replica:0/task:0/device:CPU:0", "/job:worker/replica:0/task:1/device:CPU:0"
    stats = StepStats()
    stats.dev_stats.extend(
        [
            DeviceStepStats(ps, [NodeExecStats("w", "VariableV2", 0, 1, 1, "t", "inline", "w")]),
            DeviceStepStats(w1, [NodeExecStats("m", "Mul", 2, 1, 1, "t", "inline", "m")]),
        ]
    )
    stats.transfers.extend(
        [
            TransferStats("w:0", "w", "m", ps, w1, 4096, 0),
            TransferStats("b:0", "b", "m", ps, w1, 1024, 0),
        ]
    )
    view = ClusterView(SPEC, tf.get_default_graph(), stats)
    assert view.variables[("ps", 0)] == ["w", "b"]
    assert view.traffic == {(("ps", 0), ("worker", 1)): 5120}
    assert view.op_counts == {("ps", 0): 1, ("worker", 0): 0, ("worker", 1): 1}
    svg = view.to_svg()
    ET.fromstring(svg)
    assert "machine machine-a" in svg and "machine machine-b" in svg
    assert "variables: w, b" in svg and "5.0 KiB" in svg
    assert (
        svg.index("/job:ps/task:0")
        < svg.index("/job:worker/task:0")
        < svg.index("machine machine-b")
    )
    assert svg == ClusterView(SPEC, tf.get_default_graph(), stats)._repr_svg_()


def test_views_save_the_format_their_file_extension_names(tmp_path):
    """Every view saves through one rule: the extension picks a format the view offers; any
    other extension is refused (not silently written as SVG)."""
    from minitf.viz import GraphView, MemoryView, TimelineView

    c = tf.constant(1.0, name="c")
    md = tf.RunMetadata()
    with tf.Session() as sess:
        sess.run(c, options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE), run_metadata=md)
    views = {
        ClusterView(SPEC, tf.get_default_graph(), StepStats()): {".svg"},
        MemoryView([]): {".svg"},
        GraphView(tf.get_default_graph()): {".svg", ".dot", ".gv", ".html"},
        TimelineView(md): {".svg", ".json"},
    }
    for view, formats in views.items():
        assert set(view.save_formats) == formats
        for ext in formats:
            path = view.save(str(tmp_path / ("v" + ext)))
            expected = getattr(view, view.save_formats[ext])()
            assert open(path, encoding="utf-8").read() == expected
        with pytest.raises(
            ValueError, match=r"%s\.save writes .*\.svg.* files, not '\.png'" % type(view).__name__
        ):
            view.save(str(tmp_path / "v.png"))
        assert not (tmp_path / "v.png").exists()


@pytest.mark.cluster
def test_cluster_view_of_a_real_traced_step():
    """A real 3-task cluster on 127.0.0.1: the ps task holds the variable, the worker ran the
    matmul, and the view counts the bytes that went from ps to worker."""
    ports = []
    for _ in range(3):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        ports.append(s.getsockname()[1])
        s.close()
    spec = {
        "ps": ["127.0.0.1:%d" % ports[0]],
        "worker": ["127.0.0.1:%d" % ports[1], "127.0.0.1:%d" % ports[2]],
    }
    tf.config.emulate_gpus(0)
    servers = [
        tf.train.Server(spec, job_name=j, task_index=i) for j in spec for i in range(len(spec[j]))
    ]
    try:
        with tf.device("/job:ps/task:0"):
            v = tf.Variable(np.ones((20, 20), np.float32), name="v")
        with tf.device("/job:worker/task:1"):
            m = tf.matmul(v, v, name="m")
        md = tf.RunMetadata()
        with tf.Session("grpc://" + spec["worker"][0]) as sess:
            sess.run(v.initializer)
            sess.run(m, options=tf.RunOptions(trace_level=3), run_metadata=md)
        view = ClusterView(spec, tf.get_default_graph(), md)
        assert view.variables[("ps", 0)] == ["v"]
        assert view.traffic[(("ps", 0), ("worker", 1))] >= 20 * 20 * 4
        assert view.op_counts[("worker", 1)] >= 1
        assert "machine 127.0.0.1" in view.to_svg()
    finally:
        for s in servers:
            s.stop()


def _dense_stats():
    """Traffic between every pair of five tasks that notebook 08's sharding step produces, and
    more: the case whose arrows and byte labels used to sit on one vertical line."""

    def dev(job, task):
        return "/job:%s/replica:0/task:%d/device:CPU:0" % (job, task)

    pairs = [
        (("ps", 0), ("worker", 0), 12),
        (("ps", 1), ("worker", 0), 8),
        (("worker", 0), ("worker", 1), 4),
        (("worker", 0), ("worker", 2), 4),
        (("ps", 0), ("worker", 2), 8),
        (("ps", 1), ("worker", 2), 4096),
        (("worker", 1), ("worker", 0), 4),
        (("worker", 2), ("worker", 0), 4),
    ]
    stats = StepStats()
    for i, (s, d, n) in enumerate(pairs):
        stats.transfers.append(TransferStats("t%d:0" % i, "a", "b", dev(*s), dev(*d), n, 0))
    return stats


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"master": "worker/0"},
        {
            "master": ("ps", 1),
            "machines": {
                "machine A": ["ps/0", "worker/0"],
                "machine B": ["ps/1", "worker/1", "worker/2"],
            },
        },
    ],
)
def test_labels_never_cover_arrows_labels_or_boxes(options):
    """Every byte label's box meets no arrow segment (its own included), no other label and no
    task box; no two arrows run along the same line; every label is inside the picture."""
    from minitf.viz.routing import rects_meet, segment_rect, segments

    spec = {"ps": ["h:1", "h:2"], "worker": ["h:3", "h:4", "h:5"]}
    view = ClusterView(spec, None, _dense_stats(), **options)
    root = ET.fromstring(view.to_svg())
    width, height = float(root.get("width")), float(root.get("height"))
    assert len(view.arrows) == 8 + ("master" in options)
    strokes = [[segment_rect(p, q) for p, q in segments(a.points)] for a in view.arrows]
    labels = [a.label_box for a in view.arrows]
    for i, box in enumerate(labels):
        assert 0 <= box[0] and box[0] + box[2] <= width and 0 <= box[1] <= height - box[3]
        assert not any(rects_meet(box, s) for arrow in strokes for s in arrow), view.arrows[i]
        assert not any(rects_meet(box, other) for j, other in enumerate(labels) if j != i)
        assert not any(rects_meet(box, task_box) for task_box in view.boxes.values())
    for arrow in view.arrows:  # an arrow touches only its own two boxes, at their edges
        ends = [
            view.boxes[k]
            for k in view.boxes
            if _on_edge(arrow.points[0], view.boxes[k]) or _on_edge(arrow.points[-1], view.boxes[k])
        ]
        for p, q in segments(arrow.points):
            hit = [b for b in view.boxes.values() if rects_meet(segment_rect(p, q, 0.5), b)]
            assert all(b in ends for b in hit), (arrow, hit)
    boxes = ClusterView(spec, None, _dense_stats(), **options)
    drawn = {}
    boxes.to_svg()
    for arrow in boxes.arrows:
        for p, q in segments(arrow.points):
            line = ("h", p[1]) if p[1] == q[1] else ("v", p[0])
            span = sorted((p[0], q[0]) if line[0] == "h" else (p[1], q[1]))
            for other in drawn.get(line, []):
                assert span[1] <= other[0] or other[1] <= span[0], (line, span, other)
            drawn.setdefault(line, []).append(span)


def _on_edge(point, box):
    x, y, w, h = box
    return point[0] in (x, x + w) and y <= point[1] <= y + h


def test_figure_12_6_parts_client_master_services_and_gpu_less_ps():
    """With ``master`` and ``devices`` the view draws Figure 12-6's parts: a client with its
    session arrow to the master, both services in every task, GPUs listed per task and the ps
    marked GPU-less."""
    spec = {"ps": ["machine-a:2221"], "worker": ["machine-a:2222", "machine-b:2222"]}
    devices = ["/job:ps/replica:0/task:0/device:CPU:0"] + [
        "/job:worker/replica:0/task:%d/device:%s:%d" % (t, kind, i)
        for t in (0, 1)
        for kind, n in (("CPU", 1), ("GPU", 2))
        for i in range(n)
    ]
    view = ClusterView(spec, devices=devices, master="worker/1")
    svg = view.to_svg()
    ET.fromstring(svg)
    assert svg.count("master + worker services") == 3
    assert "the session&apos;s master" in svg or "the session's master" in svg
    assert "devices: CPU:0 (no GPU)" in svg
    assert svg.count("devices: CPU:0, GPU:0, GPU:1") == 2
    assert [a.label for a in view.arrows] == ["session (gRPC)"]
    assert abs(view.arrows[0].points[-1][0] - view_box_left(view, svg)) < 1


def view_box_left(view, svg):
    """The left edge of the master's task box, read back from the SVG (the arrow ends there)."""
    root = ET.fromstring(svg)
    ns = "{http://www.w3.org/2000/svg}"
    texts = [t for t in root.iter(ns + "text") if (t.text or "").startswith("/job:worker/task:1")]
    return float(texts[0].get("x")) - 8
