"""The words the views and widgets show, in the notebook's language (issue 26, 中文版).

Book section: all of them -- the Chinese edition of the course (``notebooks/zh/``) shows the same
pictures as the English one, with their legends, titles, axis titles and buttons in Chinese.

One mechanism for every view: a view looks its words up with :func:`text` (English in, the
chosen language out).  The language is the ``language=`` keyword where the view is built, else
the module default that :func:`set_language` sets (``minitf.viz.set_language("zh")``, the first
cell of every Chinese notebook); English is the default, so English notebooks never change.
What TensorFlow itself prints -- device names, op names, log lines -- is never translated.
"""

import contextlib
import warnings
from typing import Dict, Iterator, List, Optional

LANGUAGES = ("en", "zh")

ZH: Dict[str, str] = {
    # GraphView's legend and boxes
    "Legend": "图例",
    "not placed": "未放置",
    "data edge": "数据边",
    "control edge": "控制依赖边",
    "copy between devices": "设备间复制",
    "copy": "复制",
    "variable": "变量",
    "name scope (collapsed)": "名称作用域（折叠）",
    "(cylinder)": "（圆柱）",
    "(3-d box)": "（立体框）",
    "devices: the session's placement": "设备：会话实际的放置",
    "devices: the placement given": "设备：给定的放置",
    "devices: requested only (graph not placed yet)": "设备：仅为请求的设备（图尚未放置）",
    "%d ops": "%d 个操作",
    # the zoom-and-pan box around a GraphView (minitf.viz.zoom_pan)
    "zoom out": "缩小",
    "zoom in": "放大",
    "fit": "适应",
    "the whole graph": "显示整个图",
    "natural size": "原始大小",
    "drag to pan, Ctrl + wheel to zoom": "拖动以平移，Ctrl + 滚轮缩放",
    # TimelineView
    "Step timeline": "单步时间线",
    "makespan %s \u00b7 op time %s \u00b7 parallelism %.2f\u00d7 \u00b7 %d ops on %d threads": (
        "总时长 %s \u00b7 操作时间 %s \u00b7 并行度 %.2f\u00d7 \u00b7 %d 个操作，%d 个线程"
    ),
    # MemoryView
    " (emulated)": "（模拟）",
    "tensors %s: %s": "张量%s：%s",
    "peak": "峰值",
    "in use": "使用中",
    "GPU memory": "GPU 内存",
    "No GPU card in this process (CPU only).": "本进程没有 GPU 卡（只有 CPU）。",
    " (this process)": "（本进程）",
    "dark strip: memory this process's tensors use now (darker) and at their peak": (
        "深色条：本进程的张量现在（较深）和峰值时占用的内存"
    ),
    # ClusterView / ContainerView
    "machine %s": "机器 %s",
    "client": "客户端",
    "session (gRPC)": "会话（gRPC）",
    "  <- the session's master": "  <- 会话的主服务",
    "master + worker services": "主服务 + 工作服务",
    "devices: ": "设备：",
    " (no GPU)": "（无 GPU）",
    "variables: ": "变量：",
    "ops run in the step: %d": "本步运行的操作：%d",
    "variable %s": "变量 %s",
    'container "%s"': "容器“%s”",
    "  (the default one)": "（默认容器）",
    "clients": "客户端",
    # StackView
    "Figure 12-2: the software stack": "图 12-2：软件栈",
    # QueueView
    "Queues": "队列",
    "No queue in this graph.": "这个图里没有队列。",
    " (closed)": "（已关闭）",
    "unbounded": "无上限",
    "in %s  out %s": "入 %s  出 %s",
    "in another process: rates and waiters not measured": "在另一个进程中：未测量速率和等待者",
    # %.0s: the English plural "s" is not written in Chinese
    "blocked: %d producer%s, %d consumer%s": "阻塞：%d 个生产者%.0s，%d 个消费者%.0s",
    # TrainingCurves / TrainingDashboard
    "step": "步",
    "loss": "损失",
    "accuracy": "准确率",
    "wall time (s)": "墙钟时间（秒）",
    "loss per step": "每步的损失",
    "loss over time": "随时间变化的损失",
    "samples/s": "样本/秒",
    "throughput": "吞吐量",
    "staleness (global steps)": "过时程度（全局步数）",
    "gradients": "梯度",
    "stale gradients (Figure 12-18)": "过时梯度（图 12-18）",
    # widgets
    "op": "操作",
    "pin to": "固定到",
    "soft placement": "软放置",
    "device fn": "设备函数",
    "GPUs": "GPU 数",
    "Next event": "下一事件",
    "Play": "播放",
    "Reset": "重置",
}

TABLES: Dict[str, Dict[str, str]] = {"en": {}, "zh": ZH}

_default = "en"


def resolve(language: Optional[str] = None) -> str:
    """``language``, or the module default when None; a clear error for an unknown one."""
    chosen = _default if language is None else language
    if chosen not in LANGUAGES:
        raise ValueError(
            "language must be one of %s, got %r" % (", ".join(repr(x) for x in LANGUAGES), chosen)
        )
    return chosen


def set_language(language: str) -> None:
    """Makes ``language`` ("en" or "zh") the default of every view built from now on (returns
    nothing, so the notebook cell that calls it shows no output)."""
    global _default
    _default = resolve(language)


def get_language() -> str:
    """The language views are built in when they are given none."""
    return _default


def text(english: str, language: Optional[str] = None) -> str:
    """``english`` in ``language`` (the default when None); English where no translation is
    known (a device or op name passes through unchanged)."""
    return TABLES[resolve(language)].get(english, english)


def cjk_font_families() -> List[str]:
    """The CJK sans-serif families matplotlib knows on this machine (Debian: fonts-noto-cjk)."""
    from matplotlib import font_manager

    names = {f.name for f in font_manager.fontManager.ttflist}
    found = [n for n in names if "CJK" in n and "Sans" in n and "Mono" not in n]
    return sorted(found, key=lambda n: (not n.endswith(" SC"), n))  # Simplified Chinese first


@contextlib.contextmanager
def figure_fonts(language: Optional[str] = None) -> Iterator[None]:
    """Around building and saving a matplotlib figure: for Chinese, a CJK font after
    matplotlib's own (it falls back glyph by glyph); without one the words still show, as
    boxes, and matplotlib's "Glyph missing" warnings are not printed into the notebook."""
    if resolve(language) == "en":
        yield
        return
    import matplotlib

    families = ["DejaVu Sans"] + cjk_font_families()
    with matplotlib.rc_context({"font.family": families}):
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Glyph .* missing from")
            yield
