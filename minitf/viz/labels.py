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
import re
import unicodedata
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
    # PlacementExplorer: the pin choices, device functions and the table of ops
    "(as built)": "（按构建时的请求）",
    "none": "无",
    "book's function (op.type == 'Variable')": "书中的函数（op.type == 'Variable'）",
    "variables on CPU (VariableV2)": "变量放在 CPU 上（VariableV2）",
    "requested": "请求的设备",
    "assigned": "分配的设备",
    # StepThrough's status line and tables
    "last event: ": "上一事件：",
    "%s %s on %s (%s)": "%s %s · %s（%s）",
    "start": "开始",
    "end": "结束",
    "step done": "本步完成",
    "thread": "线程",
    "running": "正在运行",
    "pool": "线程池",
    "ready queue": "就绪队列",
    "_Recv waiting for its tensor (no thread): ": "等待张量的 _Recv（不占线程）：",
    "waiting op": "等待中的操作",
    "inputs still awaited": "尚未到达的输入数",
    # hover texts (SVG <title>) of GraphView, TimelineView and QueueView
    "%s (name scope, %d ops)": "%s（名称作用域，%d 个操作）",
    "device: %s": "设备：%s",
    "requested: %s": "请求的设备：%s",
    "colocated with: %s": "同位于：%s",
    "thread: %s": "线程：%s",
    "start: +%s": "开始：+%s",
    "duration: %s": "时长：%s",
    "%s chunk %d of %d (%s)": "%s 第 %d 块，共 %d 块（%s）",
    "%s: %d bytes": "%s：%d 字节",
    "copy time: %s": "复制时间：%s",
    "%d of %d": "%d / %d",
    # the lanes of a timeline: the threads minitf names (see thread_name below)
    "caller": "调用方线程",
    "thread %s": "线程 %s",
    # StackView's floors (minitf.teaching.software_stack)
    "Your code": "你的代码",
    "Framework": "框架",
    "minitf %s: graph, placer, executor, thread pools": "minitf %s：计算图、放置器、执行器、线程池",
    "Kernels (cuDNN / CUDA libraries)": "内核（cuDNN / CUDA 库）",
    "numba.cuda kernels on the card": "在卡上运行的 numba.cuda 内核",
    "numpy kernels (emulated cards too)": "numpy 内核（模拟卡也用它们）",
    "CUDA driver": "CUDA 驱动程序",
    "found": "已找到",
    "not found (no NVIDIA driver)": "未找到（没有 NVIDIA 驱动程序）",
    "GPU cards": "GPU 卡",
    "%d real card(s)": "%d 块真实的卡",
    "%d emulated card(s) of %d GiB": "%d 块模拟卡，每块 %d GiB",
    # the CUDA lesson's pictures (minitf.viz.cuda_view)
    "idle": "空闲",
    "load": "载入",
    "step %d": "第 %d 步",
    "GPU memory used (MiB) per training step": "每个训练步使用的 GPU 内存（MiB）",
}

# Titles the notebooks give their pictures (``title=``, ``machines=``, ContainerView's
# clients): a Chinese twin runs the
# very same code cells as its English notebook, so a view looks its given title up here too.
TITLES: Dict[str, str] = {
    "Figure 12-1: one graph over three devices (as placed)": (
        "图 12-1：一个图分布在三个设备上（实际放置）"
    ),
    "Figure 12-1: the step, a and b in parallel (simulated)": (
        "图 12-1：这一步中 a 和 b 并行运行（模拟）"
    ),
    "Figure 12-2: the software stack on this machine": "图 12-2：本机的软件栈",
    "Figure 12-3: each program on its own two cards": "图 12-3：每个程序使用自己的两块卡",
    "Figure 12-4: two programs, 40 % of every card each": "图 12-4：两个程序，各占每块卡的 40 %",
    "allow_growth: one program after its steps": "allow_growth：一个程序运行若干步之后",
    "placement of a two-layer model": "一个两层模型的放置",
    "Figure 12-5: requested devices": "图 12-5：请求的设备",
    "Figure 12-5 (simulated: each GPU with 2 inter-op, 3 intra-op threads)": (
        "图 12-5（模拟：每块 GPU 有 2 个操作间线程、3 个操作内线程）"
    ),
    "Figure 12-5 with TF's default: one shared inter-op pool": (
        "图 12-5，采用 TF 的默认设置：一个共享的操作间线程池"
    ),
    "real step, 2 inter-op threads": "真实的一步，2 个操作间线程",
    "real step, 1 inter-op thread": "真实的一步，1 个操作间线程",
    "one big product, 2 intra-op threads": "一个大矩阵乘积，2 个操作内线程",
    "control dependencies: dashed edges": "控制依赖：虚线边",
    "x and y wait for a and b (simulated)": "x 和 y 等待 a 和 b（模拟）",
    "free: all four fills first (simulated)": "不加约束：四个填充操作先全部运行（模拟）",
    "chained: one big tensor at a time (simulated)": "串联：一次只有一个大张量（模拟）",
    "client A": "客户端 A",
    "client B": "客户端 B",
    "client C": "客户端 C",
    "client D": "客户端 D",
    "machine A": "机器 A",
    "machine B": "机器 B",
    "one step over three tasks": "跨三个任务的一步",
    "Figure 12-9: filenames -> reader -> instances": "图 12-9：文件名 -> 读取器 -> 实例",
    "Figure 12-10: three readers, one queue": "图 12-10：三个读取器，一个队列",
    "the training pipeline": "训练流水线",
    "digits MLP fed from a TFRecord file": "从 TFRecord 文件读取数据的 digits MLP",
    "in-graph replication: three members and the aggregation": "图内复制：三个成员和汇总",
    "one network per device: four learning rates": "每个设备一个网络：四种学习率",
    "Split by layers: a real traced step": "按层切分：真实跟踪的一步",
    "Split vertically: a real traced step": "纵向切分：真实跟踪的一步",
    "Split vertically, fast cards (simulated)": "纵向切分，较快的卡（模拟）",
    "Two columns on two cards: a real traced step": "两块卡上的两列：真实跟踪的一步",
    "Deep RNN, one layer per card: a real traced step": "深度 RNN，每块卡一层：真实跟踪的一步",
    "Deep RNN, one layer per card (simulated)": "深度 RNN，每块卡一层（模拟）",
    "one synchronous step: two towers, the mean and the update on the CPU": (
        "同步的一步：两个塔，平均和更新在 CPU 上"
    ),
    "asynchronous updates: 2 replicas, 1 ps": "异步更新：2 个副本，1 个 ps",
}
ZH.update(TITLES)

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


def text_width(text: str, size: float, latin: float = 0.56) -> float:
    """About how wide ``text`` is drawn at font ``size`` (in the size's unit): a wide or
    full-width character (Chinese, ``（``) one em, any other ``latin`` em (Helvetica's and
    Arial's letters average about 0.56; a label that must never overflow asks for more).  The
    pictures drawn by minitf size their boxes with it, in every language."""
    return sum(size if unicodedata.east_asian_width(c) in "WF" else size * latin for c in text)


def thread_name(name: str, language: Optional[str] = None) -> str:
    """A thread's or pool's name as a picture shows it: the ones minitf names ("caller",
    "thread 7", "inter-op #0", "GPU:0 intra-op #1", the pool "inter-op") in ``language``; the
    device part stays as TF writes it."""
    if resolve(language) == "en":
        return name
    unnamed = re.fullmatch(r"thread (\d+)", name)
    if name == "caller" or unnamed:
        return (
            text("caller", language)
            if not unnamed
            else text("thread %s", language) % unnamed.group(1)
        )
    for words, chinese in _POOL_WORDS:
        name = name.replace(words, chinese)
    return name


_POOL_WORDS = (
    ("inter-op #", "操作间线程 #"),
    ("intra-op #", "操作内线程 #"),
    ("inter-op", "操作间线程池"),
    ("intra-op", "操作内线程池"),
)


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
