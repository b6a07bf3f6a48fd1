"""``minitf.smi``'s compact (``gpustat``-like) and live (``watch -n 1 nvidia-smi``) views, and
``TF_CPP_MIN_LOG_LEVEL`` (the blog of seed 003 uses all three; notebook 01b shows them)."""

import io
import logging
import threading

import pytest

import minitf as tf
import minitf.smi as smi_mod
from minitf.framework.accumulator_resource import ConditionalAccumulator
from minitf.lib import cpp_log_level
from minitf.runtime import card_registry

GiB = 1 << 30


@pytest.fixture
def held(fresh_cards):
    """Card 0 with 1 GiB held by a 'python3 train.py' of this process."""
    r = card_registry.reserve(0, 4 * GiB, GiB, owner="python3 train.py")
    yield
    r.release()


def test_compact_view_has_one_line_per_card(held):
    lines = smi_mod.compact_lines()
    assert "minitf" in lines[0] and len(lines) == 3
    assert lines[1] == "[0] minitf emulated GPU  |  1024 /  4096 MB | python3(1024M)"
    assert lines[2] == "[1] minitf emulated GPU  |     0 /  4096 MB"
    buf, buf2 = io.StringIO(), io.StringIO()
    tf.smi(buf, compact=True)
    smi_mod.gpustat(buf2)
    assert buf.getvalue().splitlines()[1:] == buf2.getvalue().splitlines()[1:] == lines[1:]


def test_a_real_card_shows_what_this_process_holds_there(monkeypatch):
    """On a real card minitf.smi lists this process with the bytes numba holds for it there
    (its pool's idle blocks too), and no process before its first CUDA context."""
    import os
    import weakref

    from minitf.runtime import cuda_memory, devices

    tf.config.emulate_gpus(None)
    card = devices.PhysicalGPU(0, "NVIDIA H100 80GB HBM3", 80 << 30, (9, 0), False)
    monkeypatch.setattr(devices, "_real_gpus", lambda: [card])
    monkeypatch.setattr(cuda_memory, "_managers", {})
    (before,) = smi_mod.smi_data()
    assert before["processes"] == [] and before["memory_used"] == 0 and not before["emulated"]

    class Manager:  # numba's memory manager of this process's context on card 0
        def held_bytes(self):
            return 64 << 20

    manager = Manager()
    cuda_memory._managers[0] = weakref.ref(manager)
    (after,) = smi_mod.smi_data()
    assert after["memory_used"] == 64 << 20
    assert [(p["pid"], p["memory"]) for p in after["processes"]] == [(os.getpid(), 64 << 20)]
    text = "\n".join(smi_mod.smi_lines())
    assert "64MiB" in text and "CUDA" in text and card_registry.process_name() in text
    assert "only this process is listed" in text


def test_compact_view_without_cards(cpu_only):
    assert smi_mod.compact_lines()[1:] == ["(no GPU card on this machine)"]


def test_command_line_compact(held, capsys):
    assert smi_mod.main(["--compact"]) == 0
    assert capsys.readouterr().out.splitlines()[1].startswith("[0] minitf emulated GPU  |  1024")


def test_watch_refreshes_count_times_and_calls_on_frame(held, no_thread_left):
    buf, seen = io.StringIO(), []
    assert smi_mod.watch(0, count=3, compact=True, file=buf, on_frame=seen.append) == 3
    assert seen == [0, 1, 2]
    text = buf.getvalue()
    assert text.count("[0] minitf emulated GPU") == 3 and "\x1b[2J" not in text  # not a tty


def test_watch_shows_what_changes_between_refreshes(fresh_cards):
    buf = io.StringIO()
    held = []

    def grab(i):
        if i == 0:
            held.append(card_registry.reserve(1, 4 * GiB, GiB, owner="python3 other.py"))

    try:
        smi_mod.watch(0, count=2, compact=True, file=buf, on_frame=grab)
    finally:
        for r in held:
            r.release()
    card1 = [ln for ln in buf.getvalue().splitlines() if ln.startswith("[1]")]
    assert "    0 /  4096 MB" in card1[0] and " 1024 /  4096 MB | python3(1024M)" in card1[1]


def test_watch_stops_on_event_and_on_interrupt(held):
    stop = threading.Event()
    assert smi_mod.watch(5.0, file=io.StringIO(), on_frame=lambda i: stop.set(), stop=stop) == 1

    def interrupt(i):
        raise KeyboardInterrupt

    assert smi_mod.watch(0, file=io.StringIO(), on_frame=interrupt) == 1


def test_watch_rejects_bad_arguments():
    with pytest.raises(ValueError, match="interval"):
        smi_mod.watch(-1, count=1)
    with pytest.raises(ValueError, match="count"):
        smi_mod.watch(0, count=0)


def test_watch_in_a_notebook_updates_one_display(held, monkeypatch):
    """In a kernel, the first refresh is displayed with a display id, later ones update it."""
    shown = []

    class Handle:
        def update(self, frame):
            shown.append(("update", frame))

    def display(frame, display_id=False):
        shown.append(("display", frame))
        assert display_id is True
        return Handle()

    class Shell:
        kernel = object()

    import IPython
    import IPython.display

    monkeypatch.setattr(IPython, "get_ipython", lambda: Shell())
    monkeypatch.setattr(IPython.display, "display", display)
    assert smi_mod.watch(0, count=3, compact=True) == 3
    assert [kind for kind, _ in shown] == ["display", "update", "update"]
    frame = shown[-1][1]
    assert repr(frame).splitlines()[1].startswith("[0] minitf emulated GPU")
    assert frame._repr_html_().startswith("<pre>") and "&lt;" not in frame._repr_html_()


@pytest.mark.parametrize(
    "raw, level", [(None, 0), ("0", 0), ("1", 1), ("2", 2), ("3", 3), ("5", 5), ("x", 0)]
)
def test_min_log_level_parsing(monkeypatch, raw, level):
    if raw is None:
        monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL", raising=False)
    else:
        monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", raw)
    assert cpp_log_level.min_log_level() == level
    shown = [cpp_log_level.shown(s) for s in (0, 1, 2, 3)]
    assert shown == [s >= level for s in (0, 1, 2, 3)]


@pytest.mark.parametrize("level, creating", [("0", 2), ("1", 0), ("3", 0)])
def test_log_level_hides_creating_device_lines_not_placements(monkeypatch, capsys, level, creating):
    """INFO lines go at level 1; the printf-ed device mapping and placement lines stay."""
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", level)
    c = tf.constant(1.0, name="c")
    with tf.Session(config=tf.ConfigProto(log_device_placement=True)) as sess:
        sess.run(c)
    out = capsys.readouterr().out.splitlines()
    assert sum(ln.startswith("Created TensorFlow device") for ln in out) == creating
    assert "Device mapping:" in out
    assert any(ln.startswith("c: (Const): ") for ln in out)


@pytest.mark.parametrize("level, warned", [("1", True), ("2", False)])
def test_log_level_hides_cpp_warnings_from_level_2(monkeypatch, caplog, level, warned):
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", level)
    acc = ConditionalAccumulator("acc", tf.float32.as_numpy_dtype, [1])
    acc.set_global_step(5)
    with caplog.at_level(logging.WARNING, logger="minitf"):
        acc.set_global_step(2)
    assert ("smaller value" in caplog.text) is warned
    assert acc.global_step == 2


def test_command_line_loop_is_watch(monkeypatch):
    """``python -m minitf.smi -l SEC [--compact]`` is ``watch(SEC)`` until interrupted."""
    calls = []
    monkeypatch.setattr(smi_mod, "watch", lambda *a, **kw: calls.append((a, kw)))
    assert smi_mod.main(["-l", "0.5", "--compact"]) == 0
    assert calls == [((0.5,), {"compact": True, "file": smi_mod.sys.stdout})]
