"""tf.train.QueueRunner, add_queue_runner and start_queue_runners with a Coordinator
(reference/tf1_semantics_part2.md §15.2): threads fill a queue until the stop; the input
running out closes the queue so that its consumer drains it; errors reach the coordinator."""

import threading

import pytest

import minitf as tf


@pytest.fixture(autouse=True)
def fresh_graph():
    with tf.Graph().as_default():
        yield


def no_runner_threads_left():
    return not [t for t in threading.enumerate() if t.name.startswith("QueueRunnerThread-")]


def test_runner_threads_fill_a_queue_until_the_stop():
    q = tf.FIFOQueue(5, tf.float32, shapes=[], name="q")
    counter = tf.Variable(0.0, name="counter")
    enqueue = q.enqueue(tf.assign_add(counter, 1.0))
    qr = tf.train.QueueRunner(q, [enqueue] * 2)
    assert qr.name == "q" and qr.close_op.name == "q_Close" and qr.cancel_op.name == "q_Close_1"
    tf.train.add_queue_runner(qr)
    coord = tf.train.Coordinator()
    with tf.Session() as sess:
        sess.run(counter.initializer)
        threads = tf.train.start_queue_runners(sess, coord)
        assert [t.name for t in threads] == [
            "QueueRunnerThread-q-q_enqueue",
            "QueueRunnerThread-q-q_enqueue",
            "QueueRunnerThread-q-close_on_stop",
        ]
        assert all(t.daemon for t in threads)
        assert qr.create_threads(sess, coord) == []  # still running for this session
        got = [sess.run(q.dequeue()) for _ in range(10)]
        coord.request_stop()
        coord.join(threads, stop_grace_period_secs=10)
    assert sorted(got) == got and len(set(got)) == 10
    assert no_runner_threads_left()


def test_input_running_out_closes_the_queue_for_its_consumer():
    source = tf.FIFOQueue(10, tf.int32, shapes=[], name="source")
    fill = source.enqueue_many([[1, 2, 3, 4, 5]])
    close_source = source.close()
    q = tf.FIFOQueue(3, tf.int32, shapes=[], name="batch")
    qr = tf.train.QueueRunner(q, [q.enqueue(source.dequeue())] * 2)
    coord = tf.train.Coordinator()
    got = []
    with tf.Session() as sess:
        sess.run(fill)
        sess.run(close_source)
        threads = qr.create_threads(sess, coord=coord, start=True)
        assert not threads[0].daemon
        dequeue = q.dequeue()
        with pytest.raises(tf.errors.OutOfRangeError):
            while True:
                got.append(int(sess.run(dequeue)))
        coord.request_stop()
        coord.join(threads, stop_grace_period_secs=10)
    assert sorted(got) == [1, 2, 3, 4, 5]


def test_an_error_in_a_runner_thread_reaches_coord_join():
    q = tf.FIFOQueue(2, tf.float32, shapes=[], name="q")
    x = tf.placeholder(tf.float32, [], name="x")
    qr = tf.train.QueueRunner(q, [q.enqueue(x)])  # never fed: InvalidArgumentError
    coord = tf.train.Coordinator()
    with tf.Session() as sess:
        threads = qr.create_threads(sess, coord=coord, start=True)
        with pytest.raises(tf.errors.InvalidArgumentError, match="You must feed a value"):
            coord.join(threads, stop_grace_period_secs=10)
    assert no_runner_threads_left()


def test_without_a_coordinator_errors_are_kept_and_raised_in_the_thread():
    q = tf.FIFOQueue(2, tf.float32, shapes=[], name="q")
    x = tf.placeholder(tf.float32, [], name="x")
    qr = tf.train.QueueRunner(q, [q.enqueue(x)])
    seen = []
    hook = threading.excepthook
    threading.excepthook = lambda args: seen.append(args.exc_type)
    try:
        with tf.Session() as sess:
            (t,) = qr.create_threads(sess, start=True)
            t.join(10)
    finally:
        threading.excepthook = hook
    assert seen == [tf.errors.InvalidArgumentError]
    assert isinstance(qr.exceptions_raised[0], tf.errors.InvalidArgumentError)


def test_constructor_and_start_errors():
    q = tf.FIFOQueue(2, tf.float32, shapes=[])
    with pytest.raises(ValueError, match="Must provide queue and enqueue_ops."):
        tf.train.QueueRunner(q, [])
    with pytest.raises(TypeError, match="queue_closed_exception_types"):
        tf.train.QueueRunner(q, [q.enqueue(1.0)], queue_closed_exception_types=(ValueError,))
    with pytest.raises(ValueError, match="No default session is registered"):
        tf.train.start_queue_runners()
    with pytest.raises(TypeError, match="sess must be a `tf.Session` object"):
        tf.train.start_queue_runners(sess=object())
    with tf.Session() as sess:
        assert tf.train.start_queue_runners(sess) == []  # none defined: a warning, no threads
