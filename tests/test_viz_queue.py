"""The queue view (``minitf.viz.QueueView``) and the queue counters it reads.

Book sections: "Asynchronous Communication Using TensorFlow Queues" and "Loading Data Directly
from the Graph" (Figures 12-8 to 12-10).
"""

import re
import threading

import pytest

import minitf as tf
from helpers import wait_until
from minitf.viz import QueueView


def make_queue(kind, capacity=4):
    if kind == "fifo":
        return tf.FIFOQueue(capacity, [tf.float32], shapes=[[]], name=kind)
    if kind == "padding":
        return tf.PaddingFIFOQueue(capacity, [tf.float32], shapes=[[]], name=kind)
    if kind == "shuffle":
        return tf.RandomShuffleQueue(capacity, 0, [tf.float32], shapes=[[]], name=kind, seed=1)
    return tf.PriorityQueue(capacity, [tf.float32], shapes=[[]], name=kind)


def enqueue_op(q, kind, n):
    if kind == "priority":
        return q.enqueue_many([tf.range(n, dtype=tf.int64), tf.zeros([n])])
    return q.enqueue_many([tf.zeros([n])])


@pytest.mark.parametrize("kind", ["fifo", "padding", "shuffle", "priority"])
def test_every_queue_kind_counts_elements_in_and_out(kind):
    q = make_queue(kind)
    enq, deq = enqueue_op(q, kind, 3), q.dequeue_many(2)
    with tf.Session() as s:
        s.run(enq)
        s.run(deq)
        (rec,) = QueueView(s).snapshot()
    assert (rec.name, rec.capacity, rec.size) == (kind, 4, 1)
    assert (rec.enqueued, rec.dequeued, rec.closed) == (3, 2, False)
    assert rec.type == q.queue_ref.op.type[:-2]


def test_snapshot_counts_blocked_producers_and_consumers(no_thread_left):
    """Two producers wait on a full queue, three consumers on an empty one; closing ends them."""
    full = tf.FIFOQueue(2, tf.float32, name="full")
    empty = tf.RandomShuffleQueue(10, 3, tf.float32, name="empty")
    push, pull = full.enqueue(1.0), empty.dequeue()
    with tf.Session() as s:
        s.run(push)
        s.run(push)
        view = QueueView(s, queues=[full, "empty"])
        producers = [run_in_thread_quietly(s, push) for _ in range(2)]
        consumers = [run_in_thread_quietly(s, pull) for _ in range(3)]
        assert wait_until(lambda: [r.blocked_enqueues for r in view.snapshot()] == [2, 0])
        assert wait_until(lambda: [r.blocked_dequeues for r in view.snapshot()] == [0, 3])
        records = view.snapshot()
        assert [(r.name, r.type, r.size, r.capacity) for r in records] == [
            ("full", "FIFOQueue", 2, 2),
            ("empty", "RandomShuffleQueue", 0, 10),
        ]
        assert records[0].fraction == 1.0 and records[1].min_after_dequeue == 3
        s.run([full.close(cancel_pending_enqueues=True), empty.close()])
        for t in producers + consumers:
            t.join()
        records = view.snapshot()
    assert [(r.closed, r.blocked_enqueues, r.blocked_dequeues) for r in records] == [
        (True, 0, 0),
        (True, 0, 0),
    ]
    assert "blocked: 0 producers, 0 consumers" in view.svg()
    assert "full</tspan> FIFOQueue (closed)" in view.svg()


def run_in_thread_quietly(sess, fetch):
    """A run on its own thread whose error (the close cancels it) is expected."""

    def body():
        try:
            sess.run(fetch)
        except (tf.errors.CancelledError, tf.errors.OutOfRangeError):
            pass

    t = threading.Thread(target=body)
    t.start()
    return t


def test_rates_are_positive_while_a_queue_runner_feeds(no_thread_left):
    q = tf.FIFOQueue(8, tf.float32, shapes=[[]], name="fed")
    runner = tf.train.QueueRunner(q, [q.enqueue(1.0)] * 2)
    take = q.dequeue_many(4)
    with tf.Session() as s:
        view = QueueView(s, window=10.0)
        coord = tf.train.Coordinator()
        threads = runner.create_threads(s, coord=coord, start=True)
        for _ in range(20):
            s.run(take)
        (rec,) = view.snapshot()
        coord.request_stop()
        s.run(q.close(cancel_pending_enqueues=True))
        coord.join(threads)
    assert rec.dequeued == 80 and rec.enqueued >= 80
    assert rec.enqueue_rate > 0 and rec.dequeue_rate > 0


def test_rates_cover_the_window_only():
    """A fake clock: the rate is the counters' change over the readings of the last window."""
    now = [0.0]
    q = tf.FIFOQueue(100, tf.float32, shapes=[[]])
    enq = q.enqueue_many([tf.zeros([10])])
    with tf.Session() as s:
        view = QueueView(s, window=2.0, clock=lambda: now[0])
        for t in (1.0, 2.0, 3.0, 4.0):
            now[0] = t
            s.run(enq)
            (rec,) = view.snapshot()
    assert rec.name == "fifo_queue"
    assert rec.enqueued == 40 and rec.enqueue_rate == 10.0  # 20 elements in the last 2 s


def test_svg_draws_the_fill_and_the_floor():
    q = tf.RandomShuffleQueue(8, 2, tf.float32, shapes=[[]], name="shuffled")
    enq = q.enqueue_many([tf.zeros([6])])
    with tf.Session() as s:
        s.run(enq)
        view = QueueView(s)
    svg = view.svg()
    assert svg.startswith("<svg") and svg == view._repr_svg_()
    fill = re.search(r'<rect class="fill" x="10" y="\d+" width="([\d.]+)"', svg)
    assert float(fill.group(1)) == 300 * 6 / 8  # 6 of 8: three quarters of the bar
    assert "<title>6 of 8</title>" in svg and "6 / 8" in svg
    assert "<title>min_after_dequeue 2</title>" in svg


def test_a_graph_without_queues_says_so():
    tf.constant(1.0)
    with tf.Session() as s:
        view = QueueView(s)
    assert view.snapshot() == [] and "No queue in this graph." in view.svg()


def test_only_queues_are_accepted():
    c = tf.constant(1.0, name="c")
    with tf.Session() as s:
        with pytest.raises(TypeError, match="QueueView shows queues"):
            QueueView(s, queues=[c])
        with pytest.raises(ValueError, match="interval must be > 0"):
            QueueView(s, interval=0)


def test_start_refreshes_the_widget_and_stop_ends_the_thread(no_thread_left):
    q = tf.FIFOQueue(4, tf.float32, name="live")
    enq = q.enqueue(1.0)
    with tf.Session() as s:
        view = QueueView(s, interval=0.01)
        before = view.widget.value
        assert "0 / 4" in before
        with view:
            assert view.running
            for _ in range(3):
                s.run(enq)
            assert wait_until(lambda: "3 / 4" in view.widget.value)
        assert not view.running
        assert not any(t.name == "QueueView" for t in threading.enumerate())


def test_show_updates_its_output_when_stopped(monkeypatch):
    """In a notebook show() makes a display handle; stop() puts the last picture into it."""
    import IPython
    import IPython.display

    shown = []

    class Handle:
        def update(self, obj):
            shown.append(obj.html())

    monkeypatch.setattr(IPython, "get_ipython", lambda: object())
    monkeypatch.setattr(IPython.display, "display", lambda obj, display_id: Handle())
    q = tf.FIFOQueue(4, tf.float32, name="q")
    with tf.Session() as s:
        view = QueueView(s).show()
        s.run(q.enqueue(1.0))
        view.stop()
    assert len(shown) == 1 and "1 / 4" in shown[0]


def test_show_outside_ipython_does_nothing():
    q = tf.FIFOQueue(4, tf.float32, name="q")
    with tf.Session() as s:
        view = QueueView(s, queues=[q])
        assert view.show() is view and view._handle is None
        view.stop()


def test_closing_the_view_or_its_widget_ends_the_thread(no_thread_left):
    q = tf.FIFOQueue(4, tf.float32, name="q")
    with tf.Session() as s:
        view = QueueView(s, interval=0.01)
        view.widget.close()  # the front end closed it
        view.start()
        assert wait_until(lambda: not view.running)
        other = QueueView(s, queues=[q], interval=0.01)
        widget = other.widget
        other.start()
        other.close()
        assert not other.running and widget.comm is None


def test_mimebundle_has_the_widget_and_a_static_picture():
    q = tf.FIFOQueue(4, tf.float32, name="q")
    with tf.Session() as s:
        s.run(q.enqueue(2.0))
        bundle = QueueView(s)._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert bundle["text/html"].startswith("<div><svg") and "1 / 4" in bundle["text/html"]
    assert bundle["text/plain"] == "<QueueView of 1 queue>"


def test_a_monitored_session_is_looked_through(no_thread_left):
    q = tf.FIFOQueue(4, tf.float32, name="q")
    enq = q.enqueue(2.0)
    with tf.train.MonitoredSession() as sess:
        sess.run(enq)
        (rec,) = QueueView(sess).snapshot()
    assert (rec.size, rec.enqueued) == (1, 1)


def test_a_closed_session_shows_what_the_graph_says():
    q = tf.FIFOQueue(5, tf.float32, name="gone")
    s = tf.Session()
    s.close()
    (rec,) = QueueView(s, queues=[q]).snapshot()
    assert (rec.name, rec.capacity, rec.size, rec.enqueue_rate) == ("gone", 5, None, None)
    assert "rates and waiters not measured" in QueueView(s).svg()


@pytest.mark.cluster
def test_a_queue_on_another_task_shows_its_graph_facts():
    """A grpc session cannot hand over a queue living in a server process: the row keeps the
    name, type and capacity, gets size and closed state through two ops, and says the rest is
    not measured."""
    from minitf.distributed.local_cluster import LocalCluster

    with LocalCluster({"ps": 1, "worker": 1}) as cluster:
        with tf.device("/job:ps/task:0"):
            q = tf.FIFOQueue(5, tf.float32, shapes=[[]], name="remote_q")
        enq = q.enqueue(1.0)
        with tf.Session(cluster.target("worker")) as s:
            s.run(enq)
            view = QueueView(s)
            (rec,) = view.snapshot()
    assert (rec.name, rec.type, rec.capacity) == ("remote_q", "FIFOQueue", 5)
    assert (rec.size, rec.closed, rec.enqueue_rate, rec.blocked_enqueues) == (1, False, None, None)
    assert "in another process: rates and waiters not measured" in view.svg()
    assert "1 / 5" in view.svg()
