"""No English left in the Chinese edition's pictures and widgets (``minitf.viz.labels``).

Every word a view or widget shows a learner -- hover texts (SVG ``<title>``), the StepThrough
status line and tables, the PlacementExplorer's choices and table, the floors of Figure 12-2,
the CUDA lesson's pictures, the titles the notebooks give -- is Chinese after
``set_language("zh")``; what TensorFlow itself names (devices, ops, op types) stays as TF
writes it, and English stays exactly as it was.  Each test renders a view in Chinese and
looks for any English word outside a short list of names the test itself made.
"""

import html
import json
import re
from pathlib import Path

import numpy as np
import pytest

import minitf as tf
import minitf.viz as viz
from helpers import EMULATED_CARD
from minitf import teaching
from minitf.runtime.config_proto import StepStats
from minitf.runtime.simulate import figure_12_5
from minitf.runtime.step_stats import ChunkStats, DeviceStepStats, NodeExecStats, TransferStats
from minitf.viz import cuda_view, labels

ROOT = Path(__file__).resolve().parents[1]
CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"
GPU0 = "/job:localhost/replica:0/task:0/device:GPU:0"
DEVICE = re.compile(
    r"(?:/(?:job|replica|task|device):[A-Za-z0-9_*]+(?::\d+)?)+|/(?:cpu|gpu):\d+|\b(?:CPU|GPU):\d+"
)
GRAPHVIZ_ID = re.compile(r"cluster_\d+_[a-z]+|->")  # ids Graphviz writes as group titles
WORD = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{2,}")
# names the tests' graphs give, op types, and what is code rather than prose
NAMES = {
    "Assign", "Const", "Identity", "MatMul", "Mul", "Neg", "NoOp", "Square", "VariableV2",
    "FIFOQueue", "read", "mul", "add", "Variable", "op.type", "type", "min_after_dequeue",
    "import", "minitf", "numpy", "numba.cuda", "cuDNN", "CUDA", "NVIDIA", "GPU", "GiB", "MiB",
    "half", "Recv", "Send", "pid", "python", "sans-serif", "legend", "cluster_legend",
}  # fmt: skip


@pytest.fixture(autouse=True)
def english_afterwards():
    yield
    labels.set_language("en")


def _visible(markup):
    """The text a reader sees (and hovers: ``<title>``, Graphviz's ``xlink:title``) in SVG/HTML
    ``markup``, device names removed."""
    text = re.sub(r"<script.*?</script>|<style.*?</style>", " ", markup, flags=re.S)
    hovered = " ".join(re.findall(r'xlink:title="([^"]*)"', text))
    text = html.unescape(re.sub(r"<[^>]*>", "\n", text) + "\n" + hovered)
    return GRAPHVIZ_ID.sub(" ", DEVICE.sub(" ", text))


def _english_words(markup, names=()):
    words = set()
    for token in WORD.findall(_visible(markup)):
        if token not in NAMES and token not in names and token.strip("_-") not in names:
            words.add(token)
    return sorted(words)


def _op_words():
    """Every part of every op name of the default graph (names the test's graph gives)."""
    ops = tf.get_default_graph().get_operations()
    return {part for op in ops for part in re.split(r"[/:]", op.name)}


def _titles(svg):
    """Every hover text of ``svg``: ``<title>`` elements and Graphviz's ``xlink:title``."""
    found = re.findall(r"<title>(.*?)</title>|xlink:title=\"([^\"]*)\"", svg, flags=re.S)
    return [html.unescape(a or b).replace("&#10;", "\n") for a, b in found]


def _graph():
    with tf.device("/cpu:0"):
        v = tf.Variable(3.0, name="v")
    with tf.name_scope("net"):
        a = tf.multiply(v, 2.0, name="a")
        b = tf.identity(a, name="b")
    with tf.device("/gpu:0"):
        tf.negative(b, name="out")
    return v


# -- widgets -------------------------------------------------------------------------------


def test_placement_explorer_table_and_choices_in_chinese():
    from minitf.viz.widgets import PlacementExplorer

    _graph()
    ex = PlacementExplorer(num_gpus=1, language="zh")
    page = ex.html()
    assert "<th>操作</th><th>请求的设备</th><th>分配的设备</th>" in page
    assert _english_words(page, _op_words()) == []
    assert ex._pin.label == "（按构建时的请求）" and ex._pin.value == "(as built)"
    assert [label for label, _ in ex._fn.options] == [
        "无",
        "书中的函数（op.type == 'Variable'）",
        "变量放在 CPU 上（VariableV2）",
    ]
    ex.set_device_function("variables on CPU (VariableV2)")  # driven by its English key
    assert ex._fn.label == "变量放在 CPU 上（VariableV2）" and ex.error is None
    ex.set_pin("v", "/gpu:3")  # a pin the slider does not offer still shows in the choices
    assert ex._pin.value == "/gpu:3" and ex.error is not None
    english = PlacementExplorer(num_gpus=1)
    assert "<th>op</th><th>requested</th><th>assigned</th>" in english.html()
    assert english._pin.label == "(as built)" and english._fn.label == "none"


def test_step_through_status_line_and_tables_in_chinese():
    from minitf.viz.widgets import StepThrough

    ops = figure_12_5()
    with tf.Session() as sess:
        st = StepThrough(sess, [ops["D"], ops["E"]], language="zh")
        en = StepThrough(sess, [ops["D"], ops["E"]])
    names = _op_words()
    for _ in range(3):
        st.next()
        en.next()
        page = st.state_html()
        assert re.search(r"上一事件：(开始|结束) \S+ · [^（]+（/job:", page)
        assert "<th>线程</th><th>正在运行</th>" in page
        assert "<th>线程池</th><th>就绪队列</th>" in page
        assert "<th>等待中的操作</th><th>尚未到达的输入数</th>" in page
        assert _english_words(page, names) == [], page
    assert "last event: %s %s on " % (en.last.kind, en.last.node) in en.state_html()
    assert "<th>thread</th><th>running</th>" in en.state_html()
    st.play()
    page = st.html()
    assert "<b>本步完成</b>" in page and "上一事件：结束 " in page
    assert _english_words(page, names) == []
    en.play()
    assert "<b>step done</b>" in en.html() and "last event: end " in en.html()


# -- hover texts of the SVG views -------------------------------------------------------------


def test_graph_view_hover_texts_in_chinese():
    v = _graph()
    placement = {op.name: CPU0 for op in tf.get_default_graph().get_operations()}
    del placement["out"]
    zh = viz.GraphView(placement=placement, language="zh").to_svg()
    tips = "\n".join(_titles(zh))
    assert "设备：%s" % CPU0 in tips and "设备：未放置" in tips
    assert "请求的设备：/device:CPU:0" in tips or "请求的设备：/cpu:0" in tips
    assert "同位于：v" in tips
    collapsed = viz.GraphView(collapse_scopes=True, language="zh").to_svg()
    assert "net（名称作用域，3 个操作）\n未放置: 3" in "\n".join(_titles(collapsed))
    names = _op_words() | {"scope"}
    assert _english_words(zh, names) == [] and _english_words(collapsed, names) == []
    en = "\n".join(_titles(viz.GraphView(placement=placement).to_svg()))
    assert "device: not placed" in en and "colocated with: %s" % v.op.name in en


def _stats():
    """A step on two devices: a kernel split over two threads, a copy to the GPU, and a node
    whose thread has no name."""

    def node(name, op, start, dur, tid, thread, chunks=()):
        return NodeExecStats(name, op, start, dur, tid, thread, "inter_op", name, chunks=chunks)

    stats = StepStats()
    chunks = [
        ChunkStats(0, 5, "CPU:0 inter-op #1", 1010, 1110),
        ChunkStats(1, 7, "CPU:0 intra-op #0", 1012, 1108),
    ]
    stats.dev_stats.append(
        DeviceStepStats(
            CPU0,
            [
                node("x", "Const", 1000, 10, 0, "caller"),
                node("y", "MatMul", 1010, 200, 5, "CPU:0 inter-op #1", chunks),
                node("z", "Square", 1020, 50, 3, None),
            ],
        )
    )
    stats.dev_stats.append(
        DeviceStepStats(GPU0, [node("w", "Neg", 1300, 100, 9, "GPU:0 inter-op #0")])
    )
    stats.transfers.append(TransferStats("y:0", "y", "w", CPU0, GPU0, 4096, 3))
    return stats


def test_timeline_hover_texts_and_lanes_in_chinese():
    zh = viz.TimelineView(_stats(), language="zh").to_svg()
    tips = _titles(zh)
    assert "x (Const)\n设备：%s\n线程：调用方线程\n开始：+0 µs\n时长：10 µs" % CPU0 in tips
    assert any(t.startswith("y 第 1 块，共 2 块（MatMul）\n") for t in tips)
    assert "y:0：4096 字节\n%s \u2192 %s\n复制时间：3 µs" % (CPU0, GPU0) in tips
    lanes = re.findall(r'<text x="16" y="[\d.]+">(.*?)</text>', zh)
    assert lanes == [
        "调用方线程",
        "CPU:0 操作间线程 #1",
        "CPU:0 操作内线程 #0",
        "线程 3",
        "GPU:0 操作间线程 #0",
    ]
    assert _english_words(zh, {"µs", "ms"}) == []
    en = viz.TimelineView(_stats()).to_svg()
    assert "y chunk 1 of 2 (MatMul)\ndevice: %s\nthread: CPU:0 intra-op #0" % CPU0 in en
    assert "y:0: 4096 bytes" in en and "copy time: 3 µs" in en and ">thread 3<" in en


def test_queue_fill_hover_text_in_chinese():
    q = tf.FIFOQueue(3, tf.float32, name="q")
    enqueue = q.enqueue(1.0)
    with tf.Session() as s:
        s.run(enqueue)
        zh, en = viz.QueueView(s, language="zh").to_svg(), viz.QueueView(s).to_svg()
    assert "<title>1 / 3</title>" in zh and "<title>1 of 3</title>" in en
    assert _english_words(zh, {"q"}) == []


def test_memory_and_cluster_views_leave_no_english():
    memory = viz.MemoryView([EMULATED_CARD], this_pid=7, in_use={0: (1, 2)}, language="zh").to_svg()
    assert _english_words(memory) == []
    spec = {"ps": ["127.0.0.1:1"], "worker": ["127.0.0.1:2"]}
    machines = {"machine A": ["ps/0"], "machine B": ["worker/0"]}
    cluster = viz.ClusterView(spec, master="worker/0", machines=machines, language="zh").to_svg()
    assert "机器 A" in cluster and "机器 B" in cluster
    assert _english_words(cluster, {"gRPC", "job", "task", "ps", "worker"}) == []
    assert "machine A" in viz.ClusterView(spec, machines=machines).to_svg()
    from minitf.viz.container_view import ContainerView

    containers = ContainerView({}, {"client A": []}, language="zh").to_svg()
    assert ">客户端 A<" in containers and _english_words(containers) == []
    assert ">client A<" in ContainerView({}, {"client A": []}).to_svg()


# -- Figure 12-2 and the CUDA lesson ----------------------------------------------------------


def test_software_stack_floors_in_chinese():
    floors = teaching.software_stack(language="zh")
    assert floors[0] == ("你的代码", "import minitf as tf", True)
    assert floors[-1] == ("GPU 卡", "2 块模拟卡，每块 4 GiB", True)
    assert ("CUDA 驱动程序", "未找到（没有 NVIDIA 驱动程序）", False) in floors
    labels.set_language("zh")
    assert teaching.software_stack() == floors  # the module default, as in notebook 01
    svg = viz.StackView(floors).to_svg()
    assert _english_words(svg, {"tf", "as"}) == []
    assert teaching.software_stack(language="en")[0][0] == "Your code"


def test_cuda_lesson_pictures_in_chinese():
    block = np.zeros((1, 1, 2), int)
    thread_map = cuda_view.ThreadMap(block, block, (1, 1), grid_dim=(2, 1), language="zh")
    assert "空闲" in thread_map._repr_svg_() and "idle" not in thread_map._repr_svg_()
    tree = cuda_view.ReductionTree([1, 2, 3, 4], language="zh")._repr_svg_()
    assert ">载入<" in tree and ">load<" not in tree
    cards = [{"id": 0, "memory_used": 1 << 20}]
    memory = cuda_view.MemoryOverTime([(0, cards), (5, cards)], language="zh")._repr_svg_()
    assert "每个训练步使用的 GPU 内存（MiB）" in memory and ">第 5 步<" in memory
    assert _english_words(memory) == []
    english = cuda_view.MemoryOverTime([(0, cards), (5, cards)])._repr_svg_()
    assert ">step 5<" in english and "GPU memory used (MiB) per training step" in english


# -- the titles the notebooks give ---------------------------------------------------------------


def _notebook_code():
    paths = sorted(ROOT.glob("notebooks/*.ipynb")) + sorted(ROOT.glob("notebooks/solutions/*"))
    for path in paths:
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            if cell["cell_type"] == "code":
                yield "".join(cell["source"])


TITLE_ARGUMENT = re.compile(
    r'(?:title=|TrainingDashboard\(|train_replicas\()"([^"]+)"|"((?:machine|client) [A-Z])"'
)


def test_every_title_a_notebook_gives_has_its_chinese_and_every_translation_is_used():
    given = {a or b for code in _notebook_code() for a, b in TITLE_ARGUMENT.findall(code)}
    assert "Figure 12-2: the software stack on this machine" in given and "machine A" in given
    missing = sorted(given - set(labels.TITLES))
    assert not missing, "titles without a Chinese translation in labels.TITLES: %s" % missing
    unused = sorted(set(labels.TITLES) - given)
    assert not unused, "labels.TITLES entries no notebook uses: %s" % unused
    assert all(re.search(r"[\u4e00-\u9fff]", zh) for zh in labels.TITLES.values())


def test_views_look_their_given_titles_up():
    title = "one step over three tasks"
    labels.set_language("zh")
    assert "跨三个任务的一步" in viz.TimelineView(_stats(), title=title).to_svg()
    _graph()
    assert "跨三个任务的一步" in viz.GraphView(title=title).to_svg()
    assert "跨三个任务的一步" in viz.StackView([], title=title).to_svg()
    assert "跨三个任务的一步" in viz.MemoryView([], in_use={}, title=title).to_svg()
    curves = viz.TrainingCurves("loss", title=title, display=False)
    assert curves.figure()._suptitle.get_text() == "跨三个任务的一步"
    board = viz.TrainingDashboard(title, display=False)
    assert board.figure()._suptitle.get_text() == "跨三个任务的一步"
    assert "not a known title" in viz.StackView([], title="not a known title").to_svg()
    labels.set_language("en")
    assert title in viz.TimelineView(_stats(), title=title).to_svg()
