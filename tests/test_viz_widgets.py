"""The placement explorer and the step-through widget, driven from Python.

Book sections: "Placing Operations on Devices" and "Parallel Execution" (Figure 12-5).
"""

import re

import pytest

import minitf as tf
from minitf.runtime.simulate import figure_12_5
from minitf.viz.timeline_view import TimelineView
from minitf.viz.widgets import PlacementExplorer, StepThrough


def _book_graph():
    with tf.device("/cpu:0"):
        a = tf.Variable(3.0, name="a")
        b = tf.constant(4.0, name="b")
    c = a * b
    return a, b, c


def test_explorer_replaces_when_a_pin_changes():
    """Pinning mul to the CPU moves it there; pinning it to a missing GPU shows TF's error;
    clearing the pin brings GPU:0 back; the graph itself never changes."""
    a, b, c = _book_graph()
    ex = PlacementExplorer(num_gpus=2)
    assert "mul: (Mul): /job:localhost/replica:0/task:0/device:GPU:0" in ex.log_lines
    ex.set_pin("mul", "/cpu:0")
    assert "mul: (Mul): /job:localhost/replica:0/task:0/device:CPU:0" in ex.log_lines
    assert "#" in ex.html() and "<svg" in ex.html()
    ex.set_pin("mul", "/gpu:2")
    assert isinstance(ex.error, tf.errors.InvalidArgumentError)
    assert "was explicitly assigned to /gpu:2" in ex.html()
    ex.set_pin("mul", None)
    assert ex.error is None
    assert "mul: (Mul): /job:localhost/replica:0/task:0/device:GPU:0" in ex.log_lines
    assert c.op.device == "" and a.op.device == "/device:CPU:0"


def test_explorer_gpus_soft_placement_and_device_functions():
    """No GPUs: unpinned ops go to the CPU; the book's device function (op.type == "Variable")
    pins everything to /gpu:0 and fails without GPUs unless soft placement is on."""
    _book_graph()
    ex = PlacementExplorer(num_gpus=2)
    ex.set_gpus(0)
    assert "mul: (Mul): /job:localhost/replica:0/task:0/device:CPU:0" in ex.log_lines
    ex.set_device_function("book's function (op.type == 'Variable')")
    assert ex.error is not None and "was explicitly assigned to /gpu:0" in ex.error.message
    ex.set_soft_placement(True)
    assert ex.error is None
    ex.set_gpus(1)
    assert "a: (VariableV2): /job:localhost/replica:0/task:0/device:GPU:0" in ex.log_lines
    ex.set_device_function("variables on CPU (VariableV2)")
    assert "a: (VariableV2): /job:localhost/replica:0/task:0/device:CPU:0" in ex.log_lines
    bundle = ex._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert "<table>" in bundle["text/html"]


def test_step_through_figure_12_5():
    """Next event advances the simulation (running threads, queues, pending counts change);
    Play finishes; Reset starts over; the static HTML has the timeline with a time cursor."""
    ops = figure_12_5()
    sess = tf.Session()
    st = StepThrough(
        sess, [ops["D"], ops["E"], ops["A"], ops["B"]], inter_op_threads=2, intra_op_threads=2
    )
    first = st.html()
    assert "t = 0 µs" in first and "<svg" in first and 'stroke="red"' in first
    pending_before = st.sim.pending_counts()
    assert pending_before["D"] == 1 and pending_before["E"] == 1
    events = [st.next() for _ in range(6)]
    assert all(e is not None for e in events)
    assert st.html() != first
    st.buttons[1].click()  # Play
    assert st.sim.done and "step done" in st.html()
    assert st.next() is None
    st.buttons[2].click()  # Reset
    assert not st.sim.done and st.sim.pending_counts() == pending_before
    st.buttons[0].click()  # Next event
    assert st.last is not None and st.last.kind == "start"
    x = float(re.search(r'<line x1="([\d.]+)"[^>]*stroke="red"', st.timeline_svg()).group(1))
    view = TimelineView(st.final)
    assert x == pytest.approx(view.x_of(view.t0 + st.sim.time), abs=0.1)  # the cursor: now
    assert "text/html" in st._repr_mimebundle_()
    # the _Recv of each fetched value waits with no thread, and the widget says so
    while st.sim.waiting() == [] and not st.sim.done:
        st.next()
    assert st.sim.waiting() and "_Recv waiting for its tensor" in st.html()
