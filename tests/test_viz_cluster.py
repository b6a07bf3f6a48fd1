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
