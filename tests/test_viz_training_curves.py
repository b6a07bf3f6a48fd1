"""TrainingCurves: metrics recorded per step, redrawn at most every redraw_secs, a PNG that a
saved notebook keeps, and one display output updated in place inside IPython."""

import pytest

from minitf.viz.training_curves import TrainingCurves


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_history_and_redraw_rate():
    clock = Clock()
    curves = TrainingCurves("loss", "accuracy", redraw_secs=1.0, display=False, clock=clock)
    for step in range(10):
        clock.now = step * 0.25
        curves.add(step, loss=1.0 / (step + 1), accuracy=step / 10)
    assert curves.history["loss"][0] == list(range(10))
    assert curves.history["accuracy"][1][-1] == pytest.approx(0.9)
    assert curves.draws == 3  # at t = 0, 1.0 and 2.0
    curves.close()
    assert curves.draws == 4


def test_png_and_figure():
    curves = TrainingCurves("loss", title="MLP", display=False)
    curves.add(0, loss=2.0)
    curves.add(1, loss=1.5)
    png = curves._repr_png_()
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    fig = curves.figure()
    (ax,) = fig.axes
    assert ax.get_title() == "loss: 1.5" and fig._suptitle.get_text() == "MLP"
    assert list(ax.lines[0].get_xdata()) == [0, 1]


def test_errors():
    with pytest.raises(ValueError, match="at least one metric"):
        TrainingCurves()
    curves = TrainingCurves("loss", display=False)
    with pytest.raises(ValueError, match=r"unknown metric \['acc'\]"):
        curves.add(0, acc=1.0)


def test_one_display_output_updated_in_place(monkeypatch):
    import IPython
    import IPython.display

    shown = []

    class Handle:
        def update(self, obj):
            shown.append(("update", obj))

    def fake_display(obj, display_id=False):
        shown.append(("display", obj))
        return Handle()

    monkeypatch.setattr(IPython, "get_ipython", lambda: object())
    monkeypatch.setattr(IPython.display, "display", fake_display)
    curves = TrainingCurves("loss", redraw_secs=0.0)
    curves.add(0, loss=1.0)
    curves.add(1, loss=0.5)
    curves.close()
    assert [kind for kind, _ in shown] == ["display", "update", "update"]
    assert all(obj is curves for _, obj in shown)
