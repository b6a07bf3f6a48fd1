"""What a traced step adds up to (minitf.runtime.step_summary), the numbers notebook 13 reads
for "Model Parallelism" (Figures 12-14 to 12-16): bytes between devices, each device's busy
time, the time two devices worked at once, and ``_Recv`` waits drawn at their arrival."""

import numpy as np
import pytest

import minitf as tf
from minitf.runtime.config_proto import StepStats
from minitf.runtime.simulate import simulate
from minitf.runtime.step_stats import DeviceStepStats, NodeExecStats, TransferStats
from minitf.runtime.step_summary import (
    busy_intervals,
    busy_micros,
    overlap_micros,
    transfer_bytes,
    waits_collapsed,
)
from minitf.viz import TimelineView

PREFIX = "/job:localhost/replica:0/task:0/device:"
CPU0, GPU0, GPU1 = PREFIX + "CPU:0", PREFIX + "GPU:0", PREFIX + "GPU:1"


def node(name, op_type, start, duration):
    return NodeExecStats(name, op_type, start, duration, 1, "t", "inter_op", name)


def hand_made_step():
    """GPU:0 works 0-10 and 5-20 (merged: 0-20) and 30-40; GPU:1 waits in a _Recv 0-25, then
    works 25-35; two tensors cross GPU:0 -> GPU:1, one GPU:1 -> CPU:0."""
    stats = StepStats()
    stats.dev_stats.append(
        DeviceStepStats(
            GPU0, [node("a", "MatMul", 0, 10), node("b", "Relu", 5, 15), node("c", "Tanh", 30, 10)]
        )
    )
    stats.dev_stats.append(
        DeviceStepStats(GPU1, [node("b/_1", "_Recv", 0, 25), node("d", "MatMul", 25, 10)])
    )
    stats.transfers.extend(
        [
            TransferStats("b:0", "b/_0", "b/_1", GPU0, GPU1, 400, 0, 25),
            TransferStats("c:0", "c/_2", "c/_3", GPU0, GPU1, 100, 0, 40),
            TransferStats("d:0", "d/_4", "d/_5", GPU1, CPU0, 4, 0, 35),
        ]
    )
    return stats


def test_transfer_bytes_sums_each_pair_of_devices():
    assert transfer_bytes(hand_made_step()) == {(GPU0, GPU1): 500, (GPU1, CPU0): 4}


def test_busy_intervals_merge_and_leave_out_recv_waits():
    assert busy_intervals(hand_made_step()) == {GPU0: [(0, 20), (30, 40)], GPU1: [(25, 35)]}
    assert busy_micros(hand_made_step()) == {GPU0: 30, GPU1: 10}


def test_overlap_counts_only_time_both_devices_worked():
    stats = hand_made_step()
    assert overlap_micros(stats, GPU0, GPU1) == 5  # 30-35
    assert overlap_micros(stats, GPU1, GPU0) == 5
    assert overlap_micros(stats, "GPU:0", "GPU:1") == 5  # short names
    assert overlap_micros(stats, GPU0, CPU0) == 0  # CPU:0 never worked


def test_overlap_of_interleaved_intervals():
    stats = StepStats()
    stats.dev_stats.append(
        DeviceStepStats(GPU0, [node("a", "MatMul", 0, 10), node("b", "MatMul", 20, 10)])
    )
    stats.dev_stats.append(
        DeviceStepStats(GPU1, [node("c", "MatMul", 5, 20), node("d", "MatMul", 28, 10)])
    )
    # GPU:0 0-10, 20-30; GPU:1 5-25, 28-38: together 5-10, 20-25, 28-30
    assert overlap_micros(stats, "GPU:0", "GPU:1") == 12


def test_a_short_name_of_several_devices_is_refused():
    stats = StepStats()
    for task in (0, 1):
        name = "/job:worker/replica:0/task:%d/device:GPU:0" % task
        stats.dev_stats.append(DeviceStepStats(name, [node("a%d" % task, "MatMul", 0, 5)]))
    with pytest.raises(ValueError, match="names several devices"):
        overlap_micros(stats, "GPU:0", "/job:worker/replica:0/task:1/device:GPU:0")


def test_a_run_metadata_is_read_like_its_step_stats():
    md = tf.RunMetadata()
    md.step_stats.dev_stats.extend(hand_made_step().dev_stats)
    md.step_stats.transfers.extend(hand_made_step().transfers)
    assert transfer_bytes(md) == transfer_bytes(hand_made_step())
    assert busy_micros(md) == busy_micros(hand_made_step())


def test_something_else_is_a_type_error():
    with pytest.raises(TypeError, match="Expected a RunMetadata or a StepStats"):
        busy_micros([1, 2])


def test_waits_collapsed_puts_each_recv_at_its_arrival_and_keeps_the_record():
    stats = hand_made_step()
    collapsed = waits_collapsed(stats)
    recv = [ns for ds in collapsed.dev_stats for ns in ds.node_stats if ns.op_type == "_Recv"]
    assert [(ns.all_start_micros, ns.all_end_rel_micros) for ns in recv] == [(25, 0)]
    assert [ns.node_name for ns in collapsed.dev_stats[1].node_stats] == ["b/_1", "d"]
    assert list(collapsed.transfers) == list(stats.transfers)
    original = stats.dev_stats[1].node_stats[0]  # left as it was
    assert (original.all_start_micros, original.all_end_rel_micros) == (0, 25)
    assert busy_micros(collapsed) == busy_micros(stats)
    assert TimelineView(collapsed).makespan == 40


# -- on real and simulated steps ---------------------------------------------------------------


def layer_split_graph():
    """Figure 12-14's layer split: two products on GPU:0, then two on GPU:1."""
    h = tf.constant(np.ones((64, 128), np.float32), name="x")
    for i, device in enumerate(["/gpu:0", "/gpu:0", "/gpu:1", "/gpu:1"]):
        with tf.device(device):
            w = tf.constant(np.full((128, 128), 0.01, np.float32), name="w%d" % i)
            h = tf.matmul(h, w, name="layer%d" % i)
    with tf.device("/gpu:1"):
        return tf.reduce_sum(h, name="out")


def two_columns_graph():
    """Figure 12-15's two columns, one per card, meeting in a final add on GPU:0."""
    x = tf.constant(np.ones((64, 128), np.float32), name="x")
    tops = []
    for card in (0, 1):
        with tf.device("/gpu:%d" % card):
            w = tf.constant(np.full((128, 128), 0.01, np.float32), name="w%d" % card)
            h = x
            for i in range(3):
                h = tf.matmul(h, w, name="col%d_layer%d" % (card, i))
            tops.append(h)
    with tf.device("/gpu:0"):
        return tf.reduce_sum(tops[0] + tops[1], name="out")


def test_a_traced_layer_split_sends_one_activation_between_the_cards():
    out = layer_split_graph()
    md = tf.RunMetadata()
    with tf.Session() as sess:
        value = sess.run(
            out,
            options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE),
            run_metadata=md,
        )
    assert value > 0
    sent = transfer_bytes(md)
    assert sent[(GPU0, GPU1)] == 64 * 128 * 4  # layer1's output, and nothing else
    assert (GPU1, GPU0) not in sent
    assert sent[(GPU1, CPU0)] == 4  # the fetched scalar
    busy = busy_micros(md)
    assert busy[GPU0] > 0 and busy[GPU1] > 0


def simulated(fetch):
    with tf.Session() as sess:
        return simulate(
            sess,
            fetch,
            inter_op_threads=1,
            intra_op_threads=1,
            gpu_thread_mode="gpu_private",
            gpu_thread_count=1,
        )


def test_layer_split_cards_take_turns_and_columns_work_together():
    layers = simulated(layer_split_graph())
    assert overlap_micros(layers, "GPU:0", "GPU:1") == 0
    tf.reset_default_graph()
    columns = simulated(two_columns_graph())
    both = overlap_micros(columns, "GPU:0", "GPU:1")
    assert both > 0.5 * busy_micros(columns)[GPU1]
    assert transfer_bytes(columns)[(GPU1, GPU0)] == 64 * 128 * 4  # column 1's top, once
