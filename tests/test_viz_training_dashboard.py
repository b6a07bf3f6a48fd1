"""TrainingDashboard: several workers recorded from their own threads, plain per-worker numbers,
a PNG with the loss, throughput and staleness panels, redraws only on the owner's thread; and
LiveFigure.wait, which redraws while worker threads or futures run."""

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

import minitf.viz
from minitf.viz.live_figure import LiveFigure
from minitf.viz.training_dashboard import Record, TrainingDashboard


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_exported_from_viz():
    assert minitf.viz.TrainingDashboard is TrainingDashboard
    assert issubclass(TrainingDashboard, LiveFigure)
    assert issubclass(minitf.viz.TrainingCurves, LiveFigure)


def test_summary_per_worker():
    clock = Clock()
    board = TrainingDashboard("search", display=False, clock=clock)
    for step in range(5):
        clock.now = 2.0 * step
        board.record("lr=0.1", step, loss=1.0 / (step + 1), samples=32)
    board.record(1, 10, loss=3.0, wall_time=1.0, samples=10, staleness=2)
    board.record(1, 12, loss=2.0, wall_time=3.0, samples=30, staleness=0)
    summary = board.summary()
    assert list(summary) == [1, "lr=0.1"] == board.workers()
    lr = summary["lr=0.1"]
    assert lr["records"] == 5 and (lr["first_step"], lr["last_step"]) == (0, 4)
    assert lr["last_loss"] == pytest.approx(0.2) and lr["min_loss"] == pytest.approx(0.2)
    assert lr["wall_time"] == 8.0 and lr["samples"] == 160
    assert lr["samples_per_sec"] == pytest.approx(4 * 32 / 8.0)  # the first batch ends at t=0
    assert lr["mean_staleness"] is None and lr["max_staleness"] is None
    one = summary[1]
    assert one["samples_per_sec"] == pytest.approx(30 / 2.0)
    assert one["mean_staleness"] == 1.0 and one["max_staleness"] == 2
    assert board.records(1)[0] == Record(10, 3.0, 1.0, 10, 2)
    assert repr(board) == "<TrainingDashboard 'search'>"


def test_throughput_unknown_without_samples_or_time():
    board = TrainingDashboard(display=False, clock=Clock())
    board.record("a", 0, 1.0, samples=8)
    board.record("b", 0, 1.0)
    board.record("b", 1, 0.5)
    board.record("c", 0, 1.0, wall_time=1.0, samples=8)
    board.record("c", 1, 0.5, wall_time=1.0, samples=8)
    summary = board.summary()
    assert summary["a"]["samples_per_sec"] is None  # one record: no period measured
    assert summary["b"]["samples_per_sec"] is None and summary["b"]["samples"] is None
    assert summary["c"]["samples_per_sec"] is None  # no time passed
    assert repr(TrainingDashboard(display=False)) == "<TrainingDashboard (untitled)>"


def test_bad_records_are_refused():
    board = TrainingDashboard(display=False)
    with pytest.raises(ValueError, match="step must be an integer, got 1.5"):
        board.record("w", 1.5, 1.0)
    with pytest.raises(ValueError, match="step must be >= 0, got -1"):
        board.record("w", -1, 1.0)
    with pytest.raises(ValueError, match="loss must be a number, got 'x'"):
        board.record("w", 0, "x")
    with pytest.raises(ValueError, match="samples must be >= 0"):
        board.record("w", 0, 1.0, samples=-3)
    with pytest.raises(ValueError, match="staleness must be an integer"):
        board.record("w", 0, 1.0, staleness=0.5)
    with pytest.raises(ValueError, match="worker must be a name or a number"):
        board.record(["w"], 0, 1.0)
    with pytest.raises(KeyError, match="no record of worker 'w'"):
        board.records("w")
    with pytest.raises(ValueError, match="redraw_secs must be >= 0"):
        TrainingDashboard(redraw_secs=-1)
    assert board.summary() == {}


def test_numpy_values_are_accepted():
    import numpy as np

    board = TrainingDashboard(display=False)
    board.record(np.int64(3), np.int64(7), np.float32(0.5), samples=np.int32(4))
    assert board.records(3)[0].step == 7 and board.records(3)[0].loss == 0.5


def test_many_threads_record_at_once(no_thread_left):
    board = TrainingDashboard(display=False, redraw_secs=0.0)
    start = threading.Barrier(4)

    def train(worker):
        start.wait(5)
        for step in range(200):
            board.record(worker, step, loss=1.0, samples=1)

    threads = [threading.Thread(target=train, args=("w%d" % i,)) for i in range(4)]
    for t in threads:
        t.start()
    assert board.wait(threads, timeout=30)
    summary = board.summary()
    assert sorted(summary) == ["w0", "w1", "w2", "w3"]
    assert all(s["records"] == 200 and s["last_step"] == 199 for s in summary.values())
    assert all([r.step for r in board.records(w)] == list(range(200)) for w in summary)


def test_png_and_panels():
    board = TrainingDashboard("MLP", display=False)
    for step in range(3):
        board.record("gpu:0", step, 2.0 - step, wall_time=step, samples=64)
        board.record("gpu:1", step, 3.0 - step, wall_time=2 * step, samples=64)
    fig = board.figure()
    assert len(fig.axes) == 3 and fig._suptitle.get_text() == "MLP"
    by_step, by_time, speed = fig.axes
    assert [line.get_label() for line in by_step.lines] == ["gpu:0", "gpu:1"]
    assert list(by_time.lines[1].get_xdata()) == [0, 2, 4]
    assert [p.get_height() for p in speed.patches] == pytest.approx([64.0, 32.0])
    board.record("gpu:1", 3, 0.5, wall_time=5, samples=64, staleness=3)
    board.record("gpu:0", 3, 0.5, wall_time=5, samples=64, staleness=1)
    fig = board.figure()
    assert len(fig.axes) == 4
    stale = fig.axes[3]
    assert "staleness" in stale.get_xlabel()
    assert sum(p.get_height() for p in stale.patches) == 2  # one gradient each
    assert board._repr_png_().startswith(b"\x89PNG\r\n\x1a\n")


def test_redraw_throttle_and_owner_thread(monkeypatch):
    import IPython
    import IPython.display

    shown = []

    class Handle:
        def update(self, obj):
            shown.append("update")

    def fake_display(obj, display_id=False):
        assert obj is board and display_id
        shown.append("display")
        return Handle()

    monkeypatch.setattr(IPython, "get_ipython", lambda: object())
    monkeypatch.setattr(IPython.display, "display", fake_display)
    clock = Clock()
    board = TrainingDashboard(redraw_secs=1.0, clock=clock)
    board.show()
    for step in range(8):
        clock.now = 0.25 * step
        board.record("main", step, 1.0)
    assert shown == ["display", "update"]  # shown at t = 0, redrawn at t = 1.0
    other = threading.Thread(target=lambda: board.record("other", 0, 1.0, wall_time=0.0))
    clock.now = 10.0
    other.start()
    other.join(5)
    assert shown == ["display", "update"]  # no display from another thread
    assert board.records("other")[0].wall_time == 0.0
    board.close()
    assert shown == ["display", "update", "update"] and board.draws == 3


def test_wait_redraws_for_futures_and_times_out():
    board = TrainingDashboard(display=False, redraw_secs=0.0)
    release = threading.Event()
    with ThreadPoolExecutor(1) as pool:
        future = pool.submit(release.wait, 10)
        assert board.wait([future], timeout=0.05) is False
        release.set()
        assert board.wait([future], timeout=10) is True
    assert board.draws >= 2
    with pytest.raises(TypeError, match="wait\\(\\) takes threads or futures, got int"):
        board.wait([3])
