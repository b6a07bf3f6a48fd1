"""TimelineView (minitf.viz.timeline_view): one lane per thread, one box per op, as SVG.

The conftest gives every test a fresh default graph and two emulated GPUs.
"""

import json
import re
import xml.etree.ElementTree as ET

import pytest

import minitf as tf
from minitf.runtime.config_proto import StepStats
from minitf.runtime.simulate import Simulation, figure_12_5, simulate
from minitf.runtime.step_stats import ChunkStats, DeviceStepStats, NodeExecStats, TransferStats
from minitf.runtime.trace import Timeline
from minitf.viz import TimelineView
from minitf.viz.timeline_view import LANE_H, OP_PALETTE, TRANSFER_COLOR, op_color

CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"
GPU0 = "/job:localhost/replica:0/task:0/device:GPU:0"
GPU1 = "/job:localhost/replica:0/task:0/device:GPU:1"
SVG = "{http://www.w3.org/2000/svg}"


# -- helpers ---------------------------------------------------------------------------------


def node(name, op, start, dur, tid, thread, chunks=()):
    return NodeExecStats(
        name, op, start, dur, tid, thread, "inter_op", "%s = %s()" % (name, op), chunks=chunks
    )


def hand_built():
    """Known numbers: the step starts at t=1000 µs; y is split over two threads; y's output
    goes from the CPU to the GPU."""
    stats = StepStats()
    stats.dev_stats.append(
        DeviceStepStats(
            CPU0,
            [
                node("x", "Const", 1000, 10, 0, "caller"),
                node(
                    "y",
                    "MatMul",
                    1010,
                    200,
                    5,
                    "CPU:0 inter-op #1",
                    chunks=[
                        ChunkStats(0, 5, "CPU:0 inter-op #1", 1010, 1110),
                        ChunkStats(1, 7, "CPU:0 intra-op #0", 1012, 1108),
                    ],
                ),
                node("z", "Square", 1020, 50, 4, "CPU:0 inter-op #0"),
                node("tiny", "NoOp", 1030, 0, 4, "CPU:0 inter-op #0"),
            ],
        )
    )
    stats.dev_stats.append(
        DeviceStepStats(
            GPU0,
            [
                node("w", "Neg", 1300, 100, 9, "GPU:0 inter-op #0"),
            ],
        )
    )
    stats.transfers.append(TransferStats("y:0", "y", "w", CPU0, GPU0, 4096, 3))
    return stats


def groups(root, cls):
    return [g for g in root.iter(SVG + "g") if cls in g.get("class", "").split()]


def by_name(root, cls):
    return {g.get("data-name"): g for g in groups(root, cls)}


def rect_of(g):
    r = g.find(SVG + "rect")
    return tuple(float(r.get(k)) for k in ("x", "y", "width", "height"))


def lane_rows(root):
    """[(device, thread, y of the lane's bottom line)] in drawing order."""
    out = []
    for g in groups(root, "lane"):
        line = g.find(SVG + "line")
        out.append((g.get("data-device"), g.get("data-thread"), float(line.get("y1"))))
    return out


def fig_12_5_stats():
    """Figure 12-5 as the book draws it: GPUs with threads of their own, ops run as targets."""
    fig = figure_12_5()
    with tf.Session() as sess:
        return Simulation(
            sess,
            [t.op for t in fig.values()],
            inter_op_threads=2,
            intra_op_threads=3,
            gpu_thread_mode="gpu_private",
            gpu_thread_count=2,
        ).run()


# -- lanes ---------------------------------------------------------------------------------------


def test_one_lane_per_thread_grouped_by_device_caller_first():
    view = TimelineView(hand_built(), px_per_us=2)
    expected = [
        (CPU0, "caller"),
        (CPU0, "CPU:0 inter-op #0"),
        (CPU0, "CPU:0 inter-op #1"),
        (CPU0, "CPU:0 intra-op #0"),
        (GPU0, "GPU:0 inter-op #0"),
    ]
    assert view.lanes == expected
    root = ET.fromstring(view.to_svg())
    rows = lane_rows(root)
    assert [(d, t) for d, t, _ in rows] == expected
    ys = [y for _, _, y in rows]
    assert ys == sorted(ys)
    headers = [g.get("data-device") for g in groups(root, "device")]
    assert headers == [CPU0, GPU0]
    assert [t.text for g in groups(root, "lane") for t in g.iter(SVG + "text")] == [
        t for _, t in expected
    ]


def test_threads_sort_by_number_not_by_text():
    stats = StepStats()
    stats.dev_stats.append(
        DeviceStepStats(
            GPU1,
            [
                node("a", "Add", 0, 5, 10, "GPU:1 inter-op #10"),
                node("b", "Add", 0, 5, 2, "GPU:1 inter-op #2"),
                node("c", "Add", 0, 5, 0, "caller"),
                node("d", "Add", 0, 5, 33, None),
            ],
        )
    )
    view = TimelineView(stats)
    assert [t for _, t in view.lanes] == [
        "caller",
        "GPU:1 inter-op #2",
        "GPU:1 inter-op #10",
        "thread 33",
    ]


# -- boxes ---------------------------------------------------------------------------------------


def test_boxes_start_at_relative_time_and_are_as_wide_as_the_op():
    view = TimelineView(hand_built(), px_per_us=2)
    root = ET.fromstring(view.to_svg())
    ops = by_name(root, "op")
    assert set(ops) == {"x", "y", "z", "tiny", "w"}
    left = view.left
    expected = {"x": (0, 10), "y": (10, 200), "z": (20, 50), "w": (300, 100)}
    for name, (rel, dur) in expected.items():
        x, _, w, _ = rect_of(ops[name])
        assert x == pytest.approx(left + 2 * rel), name
        assert w == pytest.approx(2 * dur), name
        assert ops[name].get("data-start") == str(rel)
        assert ops[name].get("data-duration") == str(dur)
    # a zero-length op is still one pixel wide
    assert rect_of(ops["tiny"])[2] == 1.0
    # a box sits in the lane of its thread
    rows = {(d, t): y for d, t, y in lane_rows(root)}
    _, y, _, h = rect_of(ops["z"])
    bottom = rows[(CPU0, "CPU:0 inter-op #0")]
    assert bottom - LANE_H <= y and y + h <= bottom
    assert view.t0 == 1000 and view.makespan == 400


def test_default_scale_fits_the_width():
    view = TimelineView(hand_built(), width=800)
    assert view.scale == pytest.approx(2.0)  # 400 µs over 800 px
    x, _, w, _ = rect_of(by_name(ET.fromstring(view.to_svg()), "op")["w"])
    assert x + w == pytest.approx(view.left + 800)


def test_boxes_are_coloured_by_op_type_with_a_stable_palette():
    root = ET.fromstring(TimelineView(hand_built()).to_svg())
    ops = by_name(root, "op")
    for name, op in (("x", "Const"), ("y", "MatMul"), ("w", "Neg")):
        assert ops[name].find(SVG + "rect").get("fill") == op_color(op)
    assert op_color("MatMul") == op_color("MatMul") in OP_PALETTE
    assert TRANSFER_COLOR not in OP_PALETTE
    assert (
        len(
            {
                op_color(t)
                for t in (
                    "Add",
                    "MatMul",
                    "Const",
                    "Square",
                    "Neg",
                    "Mul",
                    "Identity",
                    "AddV2",
                    "Sub",
                )
            }
        )
        >= 5
    )


def test_chunks_are_thin_boxes_on_their_threads_lanes():
    view = TimelineView(hand_built(), px_per_us=2)
    root = ET.fromstring(view.to_svg())
    chunks = groups(root, "chunk")
    assert [(g.get("data-name"), g.get("data-index")) for g in chunks] == [("y", "0"), ("y", "1")]
    rows = {(d, t): y for d, t, y in lane_rows(root)}
    op_h = rect_of(by_name(root, "op")["y"])[3]
    for g, thread, rel, dur in (
        (chunks[0], "CPU:0 inter-op #1", 10, 100),
        (chunks[1], "CPU:0 intra-op #0", 12, 96),
    ):
        x, y, w, h = rect_of(g)
        assert x == pytest.approx(view.left + 2 * rel)
        assert w == pytest.approx(2 * dur)
        assert h < op_h
        bottom = rows[(CPU0, thread)]
        assert bottom - LANE_H <= y and y + h <= bottom
    assert "y chunk 1 of 2 (MatMul)" in chunks[1].find(SVG + "title").text


def test_transfers_are_arrows_from_producer_end_to_consumer_start():
    view = TimelineView(hand_built(), px_per_us=2)
    root = ET.fromstring(view.to_svg())
    arrows = groups(root, "transfer")
    assert len(arrows) == 1
    line = arrows[0].find(SVG + "line")
    rows = {(d, t): y for d, t, y in lane_rows(root)}
    assert float(line.get("x1")) == pytest.approx(view.left + 2 * 210)  # y ends
    assert float(line.get("x2")) == pytest.approx(view.left + 2 * 300)  # w starts
    assert float(line.get("y1")) == pytest.approx(rows[(CPU0, "CPU:0 inter-op #1")] - LANE_H / 2)
    assert float(line.get("y2")) == pytest.approx(rows[(GPU0, "GPU:0 inter-op #0")] - LANE_H / 2)
    assert line.get("stroke") == TRANSFER_COLOR
    assert arrows[0].find(SVG + "polygon") is not None
    title = arrows[0].find(SVG + "title").text
    assert "y:0: 4096 bytes" in title and CPU0 in title and GPU0 in title


def test_hover_titles_name_op_device_thread_start_and_duration():
    root = ET.fromstring(TimelineView(hand_built()).to_svg())
    title = by_name(root, "op")["y"].find(SVG + "title").text
    assert title.splitlines() == [
        "y (MatMul)",
        "device: " + CPU0,
        "thread: CPU:0 inter-op #1",
        "start: +10 \u00b5s",
        "duration: 200 \u00b5s",
    ]


def test_time_axis_ticks_in_microseconds_and_milliseconds():
    root = ET.fromstring(TimelineView(hand_built(), px_per_us=2).to_svg())
    labels = [g.find(SVG + "text").text for g in groups(root, "tick")]
    assert labels[0] == "0 \u00b5s" and "400 \u00b5s" in labels
    assert all(lb.endswith("\u00b5s") for lb in labels)
    stats = StepStats()
    stats.dev_stats.append(DeviceStepStats(CPU0, [node("long", "MatMul", 0, 2500, 0, "caller")]))
    root = ET.fromstring(TimelineView(stats).to_svg())
    labels = [g.find(SVG + "text").text for g in groups(root, "tick")]
    assert labels[:3] == ["0 ms", "0.5 ms", "1 ms"] and labels[-1] == "2.5 ms"
    ticks = [float(g.find(SVG + "line").get("x1")) for g in groups(root, "tick")]
    assert ticks == sorted(ticks)


def test_summary_line():
    root = ET.fromstring(TimelineView(hand_built()).to_svg())
    summary = [t.text for t in root.iter(SVG + "text") if t.get("class") == "summary"][0]
    # op time 10 + 200 + 50 + 0 + 100 = 360 µs over a 400 µs makespan
    assert "makespan 400 \u00b5s" in summary and "op time 360 \u00b5s" in summary
    assert "parallelism 0.90" in summary and "5 ops on 5 threads" in summary


# -- simulated and real steps --------------------------------------------------------------------


def test_figure_12_5_simulated_twice_gives_identical_svg():
    first = TimelineView(fig_12_5_stats(), title="Figure 12-5").to_svg()
    tf.reset_default_graph()
    second = TimelineView(fig_12_5_stats(), title="Figure 12-5").to_svg()
    assert first == second
    root = ET.fromstring(first)
    assert {g.get("data-name") for g in groups(root, "op")} == {
        "A_x",
        "A_w",
        "B_x",
        "A",
        "B",
        "C_x",
        "C",
        "D",
        "E",
    }
    threads = [t for _, t in TimelineView(fig_12_5_stats()).lanes]
    assert "GPU:0 intra-op #0" in threads and "GPU:1 inter-op #1" in threads
    assert len(groups(root, "chunk")) == 3  # A is split over three threads
    assert re.search(r"<title>Figure 12-5</title>|>Figure 12-5</text>", first)


def test_simulated_cross_device_step_draws_its_transfers():
    with tf.device("/gpu:0"):
        b = tf.square(tf.ones([64, 64], name="a"), name="b")
    with tf.device("/gpu:1"):
        c = tf.negative(b, name="c")
    with tf.Session() as sess:
        stats = simulate(sess, c.op, inter_op_threads=1, intra_op_threads=1)
    nodes = {n.node_name: n for d in stats.dev_stats for n in d.node_stats}
    (t,) = stats.transfers
    assert (t.tensor_name, t.src_node) == ("b:0", "b")
    assert nodes[t.dst_node].op_type == "_Recv"  # what c reads
    view = TimelineView(stats)
    root = ET.fromstring(view.to_svg())
    arrows = groups(root, "transfer")
    assert [g.get("data-tensor") for g in arrows] == ["b:0"]
    line = arrows[0].find(SVG + "line")
    # from b's end to the tensor's arrival: the end of the _Recv, when c may start
    assert float(line.get("x1")) == pytest.approx(view.x_of(nodes["b"].end_micros), abs=0.01)
    assert float(line.get("x2")) == pytest.approx(view.x_of(nodes[t.dst_node].end_micros), abs=0.01)
    assert nodes["c"].all_start_micros == nodes[t.dst_node].end_micros


def test_real_traced_run_from_run_metadata():
    with tf.device("/gpu:0"):
        x = tf.constant([1.0, 2.0], name="x")
        y = tf.square(x, name="y")
    with tf.device("/gpu:1"):
        z = tf.negative(y, name="z")
    md = tf.RunMetadata()
    with tf.Session() as sess:
        sess.run(z, options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE), run_metadata=md)
    view = TimelineView(md)
    root = ET.fromstring(view.to_svg())
    assert {g.get("data-name") for g in groups(root, "op")} == {
        n.node_name for d in md.step_stats.dev_stats for n in d.node_stats
    }
    assert view.devices == [d.device for d in md.step_stats.dev_stats]
    for g in groups(root, "op"):
        assert float(g.get("data-start")) >= 0  # times are relative to the step


# -- outputs -------------------------------------------------------------------------------------


def test_chrome_trace_is_the_threaded_trace_json():
    stats = hand_built()
    view = TimelineView(stats)
    text = view.chrome_trace()
    assert text == Timeline(stats).generate_chrome_trace_format(show_threads=True)
    events = json.loads(text)["traceEvents"]
    assert {e["name"] for e in events if e.get("cat") == "Op"} == {
        "Const",
        "MatMul",
        "Square",
        "NoOp",
        "Neg",
    }
    assert len([e for e in events if e.get("cat") == "Chunk"]) == 2
    assert {e["args"]["name"] for e in events if e["name"] == "thread_name"} >= {
        "caller",
        "CPU:0 intra-op #0",
    }


def test_save_repr_and_wellformed_xml(tmp_path):
    view = TimelineView(hand_built(), title="a <step> & more")
    svg = view._repr_svg_()
    root = ET.fromstring(svg)
    assert root.tag == SVG + "svg"
    assert [t.text for t in root.iter(SVG + "text") if t.get("class") == "title"] == [
        "a <step> & more"
    ]
    assert open(view.save(str(tmp_path / "t.svg")), encoding="utf-8").read() == svg
    trace = json.load(open(view.save(str(tmp_path / "t.json")), encoding="utf-8"))
    assert "traceEvents" in trace
    with pytest.raises(ValueError):
        view.save(str(tmp_path / "t.png"))


def test_empty_step_still_draws():
    root = ET.fromstring(TimelineView(StepStats()).to_svg())
    assert root.tag == SVG + "svg" and not groups(root, "op")
