"""Views and widgets in the notebook's language (``minitf.viz.labels``, issue 26, 中文版).

Every view that shows words shows them in Chinese when built with ``language="zh"`` or after
``minitf.viz.set_language("zh")``, in English by default; what TF itself names (devices, ops,
queues) stays as TF writes it.
"""

import warnings
import xml.etree.ElementTree as ET

import pytest

import minitf as tf
import minitf.viz as viz
from helpers import EMULATED_CARD
from minitf.runtime.config_proto import StepStats
from minitf.runtime.simulate import figure_12_5
from minitf.runtime.step_stats import DeviceStepStats, NodeExecStats
from minitf.viz import labels

CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"
CARD = EMULATED_CARD


@pytest.fixture(autouse=True)
def english_afterwards():
    yield
    labels.set_language("en")


def _stats():
    stats = StepStats()
    stats.dev_stats.append(
        DeviceStepStats(CPU0, [NodeExecStats("m", "MatMul", 0, 5, 5, "t", "inline", "m")])
    )
    return stats


def _graph_view(**kw):
    a = tf.constant(1.0, name="a")
    tf.identity(a, name="b")
    return viz.GraphView(placement={"a": CPU0, "b": CPU0}, **kw)


def _queue_svg(**kw):
    tf.FIFOQueue(3, tf.float32, name="q")
    with tf.Session() as s:
        return viz.QueueView(s, **kw).to_svg()


SVG_VIEWS = {  # name -> (build the SVG, a Chinese label, its English original)
    "graph": (lambda **kw: _graph_view(**kw).to_svg(), "数据边", "data edge"),
    "timeline": (lambda **kw: viz.TimelineView(_stats(), **kw).to_svg(), "单步时间线", "Step"),
    "memory": (
        lambda **kw: viz.MemoryView([CARD], in_use={}, **kw).to_svg(),
        "（模拟）",
        "emulated",
    ),
    "stack": (
        lambda **kw: viz.StackView([("CUDA", "11.2", True)], **kw).to_svg(),
        "软件栈",
        "stack",
    ),
    "cluster": (
        lambda **kw: viz.ClusterView({"ps": ["127.0.0.1:1"]}, master="ps/0", **kw).to_svg(),
        "客户端",
        "client",
    ),
    "container": (lambda **kw: _container_svg(**kw), "客户端", "clients"),
    "queue": (_queue_svg, "队列", "Queues"),
}


def _container_svg(**kw):
    from minitf.viz.container_view import ContainerView

    return ContainerView({}, {}, **kw).to_svg()


@pytest.mark.parametrize("name", sorted(SVG_VIEWS))
def test_each_view_shows_chinese_labels_with_language_zh_and_english_by_default(name):
    build, chinese, english = SVG_VIEWS[name]
    default = build()
    assert english in default and chinese not in default
    zh = build(language="zh")
    ET.fromstring(zh)  # still well-formed SVG
    assert chinese in zh
    labels.set_language("zh")
    assert chinese in build()  # the module default
    assert english in build(language="en")  # the keyword wins


def test_tf_names_are_not_translated():
    svg = viz.TimelineView(_stats(), language="zh").to_svg()
    assert CPU0 in svg and "MatMul" in svg
    assert "/job:ps/task:0" in viz.ClusterView({"ps": ["127.0.0.1:1"]}, language="zh").to_svg()
    page = _graph_view(language="zh").to_html()
    assert "数据边" in page and '"\\u9002\\u5e94"' in page  # 适应 (fit), JSON-escaped in the script
    assert '"fit"' in _graph_view().to_html()


def test_queue_rows_in_chinese_drop_the_english_plural():
    q = tf.FIFOQueue(2, tf.float32, name="q")
    close = q.close()
    with tf.Session() as s:
        s.run(close)
        zh, en = viz.QueueView(s, language="zh").to_svg(), viz.QueueView(s).to_svg()
    assert "（已关闭）" in zh and "阻塞：0 个生产者，0 个消费者" in zh
    assert "(closed)" in en and "blocked: 0 producers, 0 consumers" in en


def test_set_language_sets_the_default_and_rejects_unknown_languages():
    assert viz.get_language() == "en"
    assert viz.set_language("zh") is None
    assert viz.get_language() == "zh"
    with pytest.raises(ValueError, match="language must be one of 'en', 'zh', got 'fr'"):
        viz.set_language("fr")
    with pytest.raises(ValueError, match="got 'de'"):
        viz.TimelineView(_stats(), language="de")
    assert viz.get_language() == "zh"
    assert labels.text("a device name") == "a device name"  # unknown words pass through


def _figure_texts(fig):
    return {t.get_text() for ax in fig.axes for t in (ax.xaxis.label, ax.yaxis.label, ax.title)}


def test_training_figures_axis_titles_in_chinese():
    curves = viz.TrainingCurves("loss", display=False, language="zh")
    curves.add(1, loss=0.5)
    assert {"步", "损失: 0.5"} <= _figure_texts(curves.figure())
    assert "step" in _figure_texts(viz.TrainingCurves("loss", display=False).figure())
    board = viz.TrainingDashboard(display=False, language="zh")
    board.record("worker 0", step=1, loss=0.5, samples=10, staleness=1)
    assert {"每步的损失", "吞吐量", "过时程度（全局步数）"} <= _figure_texts(board.figure())
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "Glyph missing" warning reaches the notebook
        assert board._repr_png_().startswith(b"\x89PNG")


def test_figures_use_a_cjk_font_when_the_machine_has_one():
    """With fonts-noto-cjk (binder/apt.txt, ``make chromium``) Chinese text is drawn with real
    glyphs: matplotlib warns of no missing glyph inside ``figure_fonts("zh")``."""
    import io

    import matplotlib
    from matplotlib.figure import Figure

    families = labels.cjk_font_families()
    assert all("CJK" in f for f in families)
    if not families:  # then the words show as boxes, and no warning reaches the notebook
        return
    with labels.figure_fonts("zh"):
        assert matplotlib.rcParams["font.family"][1] == families[0]
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            fig = Figure()
            fig.text(0.1, 0.5, "每步的损失 loss")
            fig.savefig(io.BytesIO(), format="png")
    assert matplotlib.rcParams["font.family"] == ["sans-serif"]  # put back afterwards


def test_widgets_controls_in_chinese():
    from minitf.viz.widgets import PlacementExplorer, StepThrough

    with tf.device("/cpu:0"):
        a = tf.Variable(3.0, name="a")
    a * 2.0
    ex = PlacementExplorer(num_gpus=1, language="zh")
    assert ex._pin.description == "固定到" and ex._soft.description == "软放置"
    assert "图例" in ex.html()
    assert PlacementExplorer(num_gpus=1)._pin.description == "pin to"
    ops = figure_12_5()
    st = StepThrough(tf.Session(), [ops["D"], ops["E"]], language="zh")
    assert [b.description for b in st.buttons] == ["下一事件", "播放", "重置"]
    assert "单步时间线" in st.html()


def test_text_width_counts_a_chinese_character_as_a_full_em():
    """Boxes sized by ``labels.text_width`` hold Chinese text: a wide or full-width character
    is one em, any other the Latin share asked for."""
    assert labels.text_width("图例", 10) == 20
    assert labels.text_width("会话（gRPC）", 11, 0.5) == 4 * 11 + 4 * 5.5
    assert labels.text_width("gRPC", 10) == pytest.approx(4 * 5.6)
    assert labels.text_width("", 11) == 0


def test_a_chinese_arrow_label_gets_a_box_as_wide_as_its_characters():
    """The cluster picture's session arrow, 会话（gRPC）: its label box holds four characters
    one em wide (11 px each) beside the Latin ones; counted as Latin letters they overflowed
    the box into the arrow's bend (notebook zh/06's picture, before)."""
    spec = {"ps": ["h:1"], "worker": ["h:2", "h:3"]}
    view = viz.ClusterView(spec, None, StepStats(), master="worker/1", language="zh")
    ET.fromstring(view.to_svg())
    (arrow,) = view.arrows
    assert arrow.label == "会话（gRPC）"
    assert arrow.label_box[2] >= 4 * 11 + 4 * 11 * 0.6 + 6
