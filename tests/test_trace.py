"""Chrome-trace export of a traced step ("Parallel Execution", Figure 12-5 made visible).

The StepStats are built by hand, so these tests pin the format of
tf1_semantics.md §7.2 independently of the executor.
"""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minitf.runtime import trace
from minitf.runtime.config_proto import RunMetadata, StepStats
from minitf.runtime.step_stats import (
    ChunkStats,
    DeviceStepStats,
    NodeExecStats,
    TensorOutput,
    TransferStats,
)

CPU = "/job:localhost/replica:0/task:0/device:CPU:0"
GPU0 = "/job:localhost/replica:0/task:0/device:GPU:0"
GPU1 = "/job:localhost/replica:0/task:0/device:GPU:1"


def node(
    name, label, start, dur, outputs=(), thread=(7, "CPU inter-op #0"), chunks=(), op_type=None
):
    outs = [TensorOutput(k, "float32", (2,), nbytes) for k, nbytes in enumerate(outputs)]
    return NodeExecStats(
        name,
        op_type or "Op",
        start,
        dur,
        thread[0],
        thread[1],
        "inter_op",
        label,
        output=outs,
        chunks=chunks,
    )


def stats(*devs, transfers=()):
    s = StepStats()
    for device, nodes in devs:
        s.dev_stats.append(DeviceStepStats(device, nodes))
    s.transfers.extend(transfers)
    return s


def events(step_stats, **kw):
    return json.loads(trace.Timeline(step_stats).generate_chrome_trace_format(**kw))["traceEvents"]


def of(evs, ph, cat=None):
    return [e for e in evs if e["ph"] == ph and (cat is None or e.get("cat") == cat)]


def ops(evs):
    return {e["args"]["name"]: e for e in of(evs, "X", "Op")}


# -- pids and metadata ------------------------------------------------------------------------


def test_pids_and_process_names():
    s = stats(
        (CPU, [node("a", "a = Const()", 10, 5, [8])]), (GPU0, [node("b", "b = Neg(a)", 20, 5, [8])])
    )
    evs = events(s)
    meta = of(evs, "M")
    assert meta == [
        {"name": "process_name", "ph": "M", "pid": 0, "args": {"name": "Allocators"}},
        {"name": "process_name", "ph": "M", "pid": 1, "args": {"name": CPU + " Compute"}},
        {"name": "process_name", "ph": "M", "pid": 2, "args": {"name": CPU + " Tensors"}},
        {"name": "process_name", "ph": "M", "pid": 3, "args": {"name": GPU0 + " Compute"}},
        {"name": "process_name", "ph": "M", "pid": 4, "args": {"name": GPU0 + " Tensors"}},
    ]
    assert evs[:5] == meta  # metadata first
    assert not [e for e in evs if e["name"] == "thread_name"]
    assert ops(evs)["a"]["pid"] == 1 and ops(evs)["b"]["pid"] == 3


def test_empty_step_stats_has_only_allocators():
    evs = events(StepStats())
    assert evs == [{"name": "process_name", "ph": "M", "pid": 0, "args": {"name": "Allocators"}}]


# -- lanes ------------------------------------------------------------------------------------


def test_overlapping_nodes_get_two_lanes():
    s = stats((CPU, [node("a", "a = Const()", 100, 50), node("b", "b = Const()", 120, 10)]))
    o = ops(events(s))
    assert (o["a"]["tid"], o["b"]["tid"]) == (0, 1)


def test_touching_nodes_open_a_new_lane():
    # b starts exactly when a ends: "strictly before" fails, so b does not reuse lane 0
    s = stats((CPU, [node("a", "a = Const()", 100, 50), node("b", "b = Const()", 150, 10)]))
    o = ops(events(s))
    assert (o["a"]["tid"], o["b"]["tid"]) == (0, 1)


def test_disjoint_nodes_share_a_lane_and_first_free_lane_wins():
    s = stats(
        (
            CPU,
            [
                node("a", "a = Const()", 100, 50),  # lane 0 until 150
                node("b", "b = Const()", 110, 100),  # lane 1 until 210
                node("c", "c = Const()", 151, 10),  # lane 0 free again (150 < 151)
                node("d", "d = Const()", 205, 10),  # lane 0 free (161 < 205), not 1
                node("e", "e = Const()", 206, 10),
            ],
        )
    )  # lanes 0 and 1 busy -> lane 2
    o = ops(events(s))
    assert [o[n]["tid"] for n in "abcde"] == [0, 1, 0, 0, 2]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 50), st.integers(0, 20)), min_size=1, max_size=12))
def test_lanes_never_hold_touching_or_overlapping_ops(spans):
    spans = sorted(spans)
    nodes = [node("n%d" % i, "n%d = Const()" % i, 1 + s, d) for i, (s, d) in enumerate(spans)]
    o = ops(events(stats((CPU, nodes))))
    last_end = {}
    for i, (s, d) in enumerate(spans):
        lane = o["n%d" % i]["tid"]
        if lane in last_end:
            assert last_end[lane] < 1 + s  # strictly before
        # greedy: every lower lane was still busy
        assert all(last_end[k] >= 1 + s for k in range(lane) if k in last_end)
        assert set(range(lane)) <= set(last_end)  # lanes are opened in order
        last_end[lane] = 1 + s + d


def test_lanes_are_per_device_and_ignore_thread_ids():
    s = stats(
        (CPU, [node("a", "a = Const()", 100, 50, thread=(5, "x"))]),
        (GPU0, [node("b", "b = Const()", 100, 50, thread=(9, "y"))]),
    )
    o = ops(events(s))
    assert o["a"]["tid"] == 0 and o["b"]["tid"] == 0


def test_input_stats_are_not_modified():
    a = node("a", "a = Const()", 100, 50, thread=(5, "t"))
    b = node("b", "b = Const()", 120, 10, thread=(5, "t"))
    trace.Timeline(stats((CPU, [a, b]))).generate_chrome_trace_format()
    assert (a.thread_id, b.thread_id) == (5, 5)


# -- op events --------------------------------------------------------------------------------


def test_op_event_fields_and_inputs_from_label():
    s = stats(
        (
            CPU,
            [
                node("x", "x = Split(v)", 10, 5, [8, 8]),
                node("c", "c = NoOp()", 10, 1),
                node("y", "y = AddN(x, x:1, ^c)", 20, 7, [8]),
            ],
        )
    )
    evs = events(s)
    y = ops(evs)["y"]
    assert y == {
        "ph": "X",
        "cat": "Op",
        "name": "AddN",
        "pid": 1,
        "tid": 0,
        "ts": 20,
        "dur": 7,
        "args": {"name": "y", "op": "AddN", "input0": "x", "input1": "x:1", "input2": "^c"},
    }
    assert ops(evs)["c"]["args"] == {"name": "c", "op": "NoOp"}
    assert list(y) == ["ph", "cat", "name", "pid", "tid", "ts", "dur", "args"]


def test_unparsable_send_label_gives_unknown():
    label = "a/_0 = _Send(a @%s" % GPU0  # TF's Send label has no closing parenthesis
    s = stats((CPU, [node("a/_0", label, 10, 5)]))
    e = ops(events(s))["a/_0"]
    assert e["name"] == "unknown"
    assert e["args"] == {"name": "a/_0", "op": "unknown"}


def test_parse_op_label():
    assert trace.parse_op_label("y = MatMul(a, b:1, ^c)") == ("y", "MatMul", ["a", "b:1", "^c"])
    assert trace.parse_op_label("_SOURCE = NoOp()") == ("_SOURCE", "NoOp", [])
    assert trace.parse_op_label("garbage") == ("unknown", "unknown", [])


def test_gputrace_device_splits_node_name_and_skips_dataflow():
    stream = "/device:GPU:0/stream:all"
    s = stats(
        (CPU, [node("a", "a = Const()", 10, 5, [8])]),
        (stream, [node("b:MatMul", "b = MatMul(a)", 20, 5)]),
    )
    evs = events(s)
    b = [e for e in of(evs, "X") if e["pid"] == 3][0]
    assert b["name"] == "MatMul" and b["args"] == {"name": "b", "op": "MatMul"}
    assert of(evs, "s") == []


# -- dataflow ---------------------------------------------------------------------------------


def dataflow_stats():
    return stats(
        (
            CPU,
            [
                node("a", "a = Const()", 100, 10, [8]),
                node("b", "b = Neg(a)", 111, 10, [8]),  # lane 0, after a
                node("c", "c = Square(a)", 115, 10, [8]),
            ],
        ),  # lane 1
        (GPU0, [node("d", "d = Mul(b, c/_1)", 130, 10, [8])]),
    )


def test_dataflow_only_across_lanes_or_pids():
    evs = events(dataflow_stats())
    flows = [
        (e["ph"], e["name"], e["pid"], e["tid"], e["ts"], e["id"]) for e in evs if e["ph"] in "st"
    ]
    assert flows == [
        ("s", "a", 1, 0, 110, 0),
        ("t", "a", 1, 1, 115, 0),  # a -> c (lane 0 -> lane 1)
        ("s", "b", 1, 0, 121, 1),
        ("t", "b", 3, 0, 130, 1),  # b -> d (CPU -> GPU)
        ("s", "c", 1, 1, 125, 2),
        ("t", "c", 3, 0, 130, 2),  # "c/_1" stripped to "c"
    ]
    assert all(e["cat"] == "DataFlow" for e in evs if e["ph"] in "st")


def test_flows_follow_their_consumer_op():
    evs = [e for e in events(dataflow_stats()) if e["ph"] != "M"]
    kinds = [(e["ph"], e["args"]["name"] if e["ph"] == "X" else e["name"]) for e in evs]
    assert kinds == [
        ("X", "a"),
        ("X", "b"),
        ("X", "c"),
        ("s", "a"),
        ("t", "a"),
        ("X", "d"),
        ("s", "b"),
        ("t", "b"),
        ("s", "c"),
        ("t", "c"),
    ]


def test_no_dataflow_when_disabled():
    evs = events(dataflow_stats(), show_dataflow=False)
    assert of(evs, "s") == [] and of(evs, "t") == []
    assert len(of(evs, "X")) == 4


def test_control_inputs_make_no_flow():
    s = stats(
        (CPU, [node("a", "a = Const()", 100, 50, [8]), node("b", "b = NoOp(^a)", 120, 10)])
    )  # other lane
    evs = events(s)
    assert ops(evs)["b"]["tid"] == 1
    assert of(evs, "s") == []


# -- memory -----------------------------------------------------------------------------------


def memory_stats():
    return stats(
        (
            CPU,
            [
                node("a", "a = Const()", 100, 10, [40]),
                node("b", "b = Split(a)", 111, 10, [16, 24]),
                node("c", "c = Add(b, b:1)", 125, 10, [16]),
            ],
        ),
        (GPU1, [node("g", "g = Neg(a)", 112, 10, [40])]),
    )


def test_no_memory_events_by_default():
    evs = events(memory_stats())
    assert not [e for e in evs if e["ph"] in "NODC"]


def test_tensor_objects_with_show_memory():
    evs = events(memory_stats(), show_memory=True)
    n = [(e["name"], e["pid"], e["tid"], e["ts"], e["id"]) for e in of(evs, "N")]
    assert n == [
        ("a", 2, 0, 100, 0),
        ("b", 2, 0, 111, 1),
        ("b:1", 2, 0, 111, 2),
        ("c", 2, 0, 125, 3),
        ("g", 4, 0, 112, 4),
    ]
    assert all(e["cat"] == "Tensor" for e in evs if e["ph"] in "NOD")
    o = of(evs, "O")
    assert [(e["name"], e["ts"], e["id"]) for e in o] == [
        ("a", 109, 0),
        ("b", 120, 1),
        ("b:1", 120, 2),
        ("c", 134, 3),
        ("g", 121, 4),
    ]
    desc = o[2]["args"]["snapshot"]["tensor_description"]
    assert '"' not in desc
    assert "dtype: DT_FLOAT" in desc and "size: 2" in desc
    assert "requested_bytes: 24" in desc and "allocator_name: cpu" in desc
    assert "allocator_name: gpu_1" in o[4]["args"]["snapshot"]["tensor_description"]


def test_delete_events_at_last_use():
    evs = events(memory_stats(), show_memory=True)
    d = {e["name"]: (e["pid"], e["tid"], e["ts"], e["id"]) for e in of(evs, "D")}
    # a: used by b (ends 121 -> 120) and g (ends 122 -> 121); its own end is 110
    assert d == {
        "a": (2, 0, 121, 0),
        "b": (2, 0, 134, 1),
        "b:1": (2, 0, 134, 2),
        "c": (2, 0, 135, 3),
        "g": (4, 0, 122, 4),
    }


def test_memory_counters_and_allocator_maximums():
    analysis = trace.Timeline(memory_stats()).analyze_step_stats()
    evs = analysis.chrome_trace.trace()["traceEvents"]
    cpu = [(e["ts"], e["args"]["cpu"]) for e in of(evs, "C") if e["name"] == "cpu"]
    # at 134 both outputs of b are freed, the larger (more negative) change first
    assert cpu == [
        (100, 40),
        (111, 56),
        (111, 80),
        (121, 40),
        (125, 56),
        (134, 32),
        (134, 16),
        (135, 0),
    ]
    gpu = [(e["ts"], e["args"]) for e in of(evs, "C") if e["name"] == "gpu_1"]
    assert gpu == [(112, {"gpu_1": 40}), (122, {"gpu_1": 0})]
    assert all(e["pid"] == 0 and e["tid"] == 0 and e["cat"] == "Memory" for e in of(evs, "C"))
    maxima = analysis.allocator_maximums
    assert set(maxima) == {"cpu", "gpu_1"}
    assert maxima["cpu"] == (111, 80, {"a", "b", "b:1"})
    assert maxima["cpu"].num_bytes == 80
    assert maxima["gpu_1"] == trace.AllocationMaximum(112, 40, {"g"})


def test_frees_sort_before_allocations_at_the_same_time():
    s = stats(
        (
            CPU,
            [
                node("a", "a = Const()", 100, 10, [40]),
                node("b", "b = Neg(a)", 111, 10, [40]),  # a's last use: 120
                node("c", "c = Const()", 120, 5, [8]),
            ],
        )
    )  # allocates at 120
    analysis = trace.Timeline(s).analyze_step_stats(show_memory=True)
    evs = analysis.chrome_trace.trace()["traceEvents"]
    series = [(e["ts"], e["args"]["cpu"]) for e in of(evs, "C")]
    assert series[2:4] == [(120, 40), (120, 48)]
    assert analysis.allocator_maximums["cpu"].num_bytes == 80


def test_a_sent_tensor_lives_until_its_recv_has_it():
    """The runtime frees a tensor handed to a ``_Send`` once its ``_Recv`` has it: the memory
    view deletes it at the ``_Recv``'s end, here later than the ``_Send``'s."""
    s = stats(
        (CPU, [node("a", "a = Const()", 100, 10, [40]), node("a/_0", "a/_0 = _Send(a)", 111, 5)]),
        (GPU0, [node("a/_1", "a/_1 = _Recv()", 100, 90, [40], op_type="_Recv")]),
        transfers=[TransferStats("a:0", "a", "a/_1", CPU, GPU0, 40, 112)],
    )
    (deleted,) = [e for e in of(events(s, show_memory=True), "D") if e["name"] == "a"]
    assert deleted["ts"] == 190


def test_memory_event_order():
    evs = events(memory_stats(), show_memory=True)
    phases = "".join(e["ph"] for e in evs)
    # metadata, N/O per tensor, X (+flows), D per tensor, C
    assert phases.startswith("M" * 5 + "NO" * 5)
    assert phases.endswith("D" * 5 + "C" * 10)
    body = phases[15:-15]
    assert set(body) <= set("Xst") and body[0] == "X"


def test_allocator_maximums_empty_without_memory():
    analysis = trace.Timeline(memory_stats()).analyze_step_stats(show_memory=False)
    assert analysis.allocator_maximums == {}
    assert not of(analysis.chrome_trace.trace()["traceEvents"], "C")


def test_default_allocator_names():
    assert trace.default_allocator(CPU) == "cpu"
    assert trace.default_allocator(GPU1) == "gpu_1"
    assert trace.default_allocator("/gpu:3") == "gpu_3"
    assert trace.default_allocator("/device:GPU:0/stream:all") == "gpu_0"


# -- minitf extras: show_threads ---------------------------------------------------------------


def threads_stats():
    chunks = [
        ChunkStats(0, 11, "CPU inter-op #0", 100, 140),
        ChunkStats(1, 21, "CPU intra-op #0", 101, 138),
        ChunkStats(2, 22, "CPU intra-op #1", 102, 139),
    ]
    return stats(
        (
            CPU,
            [
                node(
                    "a",
                    "a = MatMul(x, y)",
                    100,
                    50,
                    [8],
                    thread=(11, "CPU inter-op #0"),
                    chunks=chunks,
                ),
                node("b", "b = Const()", 100, 10, [8], thread=(12, "CPU inter-op #1")),
                node("c", "c = Neg(b)", 111, 10, [8], thread=(12, "CPU inter-op #1")),
            ],
        ),
        (GPU0, [node("d", "d = Add(a, c)", 160, 10, [8], thread=(0, "caller"))]),
        transfers=[
            TransferStats("a:0", "a", "d", CPU, GPU0, 8, 160),
            TransferStats("c:0", "c", "d", CPU, GPU0, 8, 160),
        ],
    )


def test_show_threads_off_is_tf_output():
    plain = trace.Timeline(threads_stats()).generate_chrome_trace_format()
    evs = json.loads(plain)["traceEvents"]
    assert not [e for e in evs if e.get("cat") in ("Chunk", "Transfer")]
    assert not [e for e in evs if e["name"] == "thread_name"]
    assert (ops(evs)["a"]["tid"], ops(evs)["b"]["tid"], ops(evs)["c"]["tid"]) == (0, 1, 1)


def test_show_threads_uses_real_threads_with_names():
    evs = events(threads_stats(), show_threads=True)
    names = [(e["pid"], e["tid"], e["args"]["name"]) for e in evs if e["name"] == "thread_name"]
    assert names == [
        (1, 11, "CPU inter-op #0"),
        (1, 21, "CPU intra-op #0"),
        (1, 22, "CPU intra-op #1"),
        (1, 12, "CPU inter-op #1"),
        (3, 0, "caller"),
    ]
    assert all(e["ph"] == "M" for e in evs if e["name"] == "thread_name")
    assert [e["ph"] for e in evs[:10]] == ["M"] * 10
    o = ops(evs)
    assert (o["a"]["tid"], o["b"]["tid"], o["c"]["tid"], o["d"]["tid"]) == (11, 12, 12, 0)


def test_show_threads_chunks():
    evs = events(threads_stats(), show_threads=True)
    chunks = of(evs, "X", "Chunk")
    assert [(e["name"], e["pid"], e["tid"], e["ts"], e["dur"]) for e in chunks] == [
        ("MatMul/chunk0", 1, 11, 100, 40),
        ("MatMul/chunk1", 1, 21, 101, 37),
        ("MatMul/chunk2", 1, 22, 102, 37),
    ]
    assert chunks[1]["args"] == {
        "name": "a",
        "op": "MatMul",
        "chunk": 1,
        "thread": "CPU intra-op #0",
    }
    body = [e for e in evs if e["ph"] == "X"]
    assert body[0]["cat"] == "Op" and [e["cat"] for e in body[1:4]] == ["Chunk"] * 3


def test_show_threads_transfers_and_dataflow():
    evs = events(threads_stats(), show_threads=True)
    data = [
        (e["ph"], e["name"], e["pid"], e["tid"], e["ts"], e["id"])
        for e in evs
        if e.get("cat") == "DataFlow"
    ]
    assert data == [
        ("s", "a", 1, 11, 150, 0),
        ("t", "a", 3, 0, 160, 0),
        ("s", "c", 1, 12, 121, 1),
        ("t", "c", 3, 0, 160, 1),
    ]  # b -> c same thread
    tr = [e for e in evs if e.get("cat") == "Transfer"]
    assert [(e["ph"], e["name"], e["pid"], e["tid"], e["ts"], e["id"]) for e in tr] == [
        ("s", "a:0", 1, 11, 150, 2),
        ("t", "a:0", 3, 0, 160, 2),
        ("s", "c:0", 1, 12, 121, 3),
        ("t", "c:0", 3, 0, 160, 3),
    ]
    assert tr[0]["args"] == {"bytes": 8, "src": CPU, "dst": GPU0}


def test_transfer_with_unknown_node_is_skipped():
    s = stats(
        (CPU, [node("a", "a = Const()", 100, 10, [8])]),
        transfers=[TransferStats("zz:0", "zz", "a", GPU0, CPU, 8, 100)],
    )
    evs = events(s, show_threads=True)
    assert not [e for e in evs if e.get("cat") == "Transfer"]
    assert len(of(evs, "X")) == 1


# -- formatting and convenience ---------------------------------------------------------------


def test_pretty_json_format():
    s = stats((CPU, [node("a", "a = Const()", 10, 5, [8])]))
    text = trace.Timeline(s).generate_chrome_trace_format()
    assert text.startswith('{\n    "traceEvents": [\n        {\n            "name": ')
    assert '"ph": "M",\n' in text
    assert json.loads(text)["traceEvents"][1]["args"]["name"] == CPU + " Compute"
    assert text == json.dumps(json.loads(text), indent=4, separators=(",", ": "))


def test_compact_format_to_string():
    s = stats((CPU, [node("a", "a = Const()", 10, 5, [8])]))
    fmt = trace.Timeline(s).analyze_step_stats(show_memory=False).chrome_trace
    compact = fmt.format_to_string()
    assert " " not in compact.replace(CPU + " ", "").replace(CPU, "")
    assert json.loads(compact) == json.loads(fmt.format_to_string(pretty=True))


def test_repeated_generation_is_identical():
    tl = trace.Timeline(memory_stats())
    first = tl.generate_chrome_trace_format(show_memory=True)
    assert tl.generate_chrome_trace_format(show_memory=True) == first


def test_chrome_trace_and_save_accept_run_metadata(tmp_path):
    md = RunMetadata()
    md.step_stats.dev_stats.append(DeviceStepStats(CPU, [node("a", "a = Const()", 10, 5, [8])]))
    d = trace.chrome_trace(md)
    assert ops(d["traceEvents"])["a"]["name"] == "Const"
    d2 = trace.chrome_trace(md, show_memory=True)
    assert of(d2["traceEvents"], "N")[0]["name"] == "a"
    path = trace.save(md, str(tmp_path / "step.json"), show_threads=True)
    with open(path) as f:
        saved = json.load(f)
    assert [e["args"]["name"] for e in saved["traceEvents"] if e["name"] == "thread_name"] == [
        "CPU inter-op #0"
    ]
    assert (
        trace.Timeline(md).generate_chrome_trace_format()
        == trace.Timeline(md.step_stats).generate_chrome_trace_format()
    )


@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"show_memory": True},
        {"show_threads": True},
        {"show_dataflow": False, "show_memory": True, "show_threads": True},
    ],
)
def test_every_mode_parses(kw):
    text = trace.Timeline(threads_stats()).generate_chrome_trace_format(**kw)
    evs = json.loads(text)["traceEvents"]
    assert evs and all({"ph", "pid", "name"} <= set(e) for e in evs)
    assert len(of(evs, "X", "Op")) == 4
