"""``tf.FIFOQueue`` in local sessions: op types and names, the blocking semantics, close, TF's
error classes and texts, and how a wait ends (close, timeouts, session close).

Book section: "Asynchronous Communication Using TensorFlow Queues".  Expected texts are TF
1.15's (the reference semantics' §13 and the recorded TF outputs of the queue example).
"""

import re
import time

import numpy as np
import pytest

import minitf as tf
from helpers import first_line, run_in_thread, wait_until
from minitf.framework.resource_mgr import check_container_name
from minitf.runtime.executor import StepContext

PRIVATE = r"'_\d+_q'"  # a private queue's name: a process-wide counter and the op's name


def waiting(sess, q, enqueues=0, dequeues=0):
    """Waits until the queue has that many waiting enqueue and dequeue attempts."""
    queue = sess.run(q.queue_ref)
    return wait_until(lambda: queue.pending() == (enqueues, dequeues))


# -- graph construction ------------------------------------------------------------------------


def test_ops_and_default_names():
    q = tf.FIFOQueue(10, [tf.float32], shapes=[[]], name="q")
    q.enqueue(1.0)
    q.enqueue_many([[1.0, 2.0]])
    q.dequeue()
    q.dequeue_many(2)
    q.dequeue_up_to(2)
    q.close()
    q.close(cancel_pending_enqueues=True)
    q.size()
    q.is_closed()
    q.dequeue()
    ops = [(o.name, o.type) for o in tf.get_default_graph().get_operations()]
    assert ops == [
        ("q", "FIFOQueueV2"),
        ("q_enqueue/component_0", "Const"),
        ("q_enqueue", "QueueEnqueueV2"),
        ("q_EnqueueMany/component_0", "Const"),
        ("q_EnqueueMany", "QueueEnqueueManyV2"),
        ("q_Dequeue", "QueueDequeueV2"),
        ("q_DequeueMany/n", "Const"),
        ("q_DequeueMany", "QueueDequeueManyV2"),
        ("q_DequeueUpTo/n", "Const"),
        ("q_DequeueUpTo", "QueueDequeueUpToV2"),
        ("q_Close", "QueueCloseV2"),
        ("q_Close_1", "QueueCloseV2"),
        ("q_Size", "QueueSizeV2"),
        ("q_Is_Closed", "QueueIsClosedV2"),
        ("q_Dequeue_1", "QueueDequeueV2"),
    ]
    op = tf.get_default_graph().get_operation_by_name("q")
    assert op.get_attr("capacity") == 10 and op.get_attr("shared_name") == ""
    assert q.name == "q" and q.queue_ref is op.outputs[0]
    assert q.queue_ref.dtype == tf.resource and q.queue_ref.shape == tf.TensorShape([])
    assert q.dtypes == [tf.float32] and q.shapes == [tf.TensorShape([])]


def test_names_in_a_scope_and_the_default_name():
    with tf.name_scope("outer"):
        q = tf.FIFOQueue(3, tf.int32)
        d = q.dequeue()
    assert q.name == "outer/fifo_queue"
    assert d.op.name == "outer/fifo_queue_Dequeue"
    assert q.shapes == [tf.TensorShape(None)]


def test_tuple_queue_static_shapes():
    q = tf.FIFOQueue(5, [tf.int32, tf.float32], shapes=[[], [2]])
    d = q.dequeue()
    assert q.name == "fifo_queue"
    assert isinstance(d, list) and [t.name for t in d] == [
        "fifo_queue_Dequeue:0",
        "fifo_queue_Dequeue:1",
    ]
    assert [t.shape.as_list() for t in q.dequeue_many(3)] == [[3], [3, 2]]
    assert [t.shape.as_list() for t in q.dequeue_up_to(3)] == [[None], [None, 2]]


def test_one_shape_as_a_list_of_ints():
    q = tf.FIFOQueue(5, tf.float32, shapes=[2])
    assert q.shapes == [tf.TensorShape([2])]


def test_graph_time_errors():
    with pytest.raises(ValueError, match=re.escape("All shapes must be fully defined")):
        tf.FIFOQueue(5, tf.float32, shapes=[[None]])
    with pytest.raises(ValueError, match="Queue shapes must have the same length as dtypes"):
        tf.FIFOQueue(5, [tf.float32, tf.int32], shapes=[[2]])
    with pytest.raises(ValueError, match="List of names must have the same length"):
        tf.FIFOQueue(5, tf.float32, names=["a", "b"])
    q = tf.FIFOQueue(5, tf.float32, shapes=[[2]], name="q")
    with pytest.raises(ValueError, match=re.escape("Shapes (3,) and (2,) are incompatible")):
        q.enqueue([[1.0, 2.0, 3.0]])
    with pytest.raises(ValueError, match=re.escape("Shapes (3,) and (2,) are incompatible")):
        q.enqueue_many([[[1.0, 2.0, 3.0]]])
    with pytest.raises(ValueError, match="Tensor conversion requested dtype float32"):
        q.enqueue(tf.constant([1, 2]))
    with pytest.raises(ValueError, match="Queue must have names to enqueue a dictionary"):
        q.enqueue({"x": [1.0, 2.0]})
    text = (
        "Input 'n' must be >= 0, but is -1 for 'q_DequeueMany' (op: 'QueueDequeueManyV2') "
        "with input shapes: [], [] and with computed input tensors: input[1] = <-1>."
    )
    with pytest.raises(ValueError, match=re.escape(text)):
        q.dequeue_many(-1)


def test_named_queue_takes_and_gives_dicts():
    q = tf.FIFOQueue(5, [tf.int32, tf.float32], shapes=[[], []], names=["x", "y"], name="q")
    with pytest.raises(ValueError, match="You must enqueue a dictionary in a Queue with names"):
        q.enqueue([1, 2.0])
    text = (
        "Keys in dictionary to enqueue do not match names of Queue.  Dictionary: "
        "(['x', 'z']), Queue: (['x', 'y'])"
    )
    with pytest.raises(ValueError, match=re.escape(text)):
        q.enqueue({"x": 1, "z": 2.0})
    enq = q.enqueue({"y": 2.5, "x": 7})
    d = q.dequeue()
    assert sorted(d) == ["x", "y"]
    with tf.Session() as s:
        s.run(enq)
        assert s.run(d) == {"x": 7, "y": 2.5}


# -- running -----------------------------------------------------------------------------------


def test_book_example_shared_by_two_sessions(no_thread_left):
    """The book's queue, shared by name between a producer's and a consumer's session on one
    server (a local session has devices of its own, hence its own queues: TF's DirectSession)."""
    server = tf.train.Server.create_local_server()
    try:
        q = tf.FIFOQueue(
            capacity=10, dtypes=[tf.float32], shapes=[[2]], name="q", shared_name="shared_q"
        )
        training_instance = tf.placeholder(tf.float32, shape=[2])
        enqueue = q.enqueue([training_instance])
        dequeue = q.dequeue()
        with tf.Session(server.target) as producer:
            producer.run(enqueue, feed_dict={training_instance: [1.0, 2.0]})
            producer.run(enqueue, feed_dict={training_instance: [3.0, 4.0]})
        with tf.Session(server.target) as consumer:  # another session finds it by its name
            np.testing.assert_array_equal(consumer.run(dequeue), [1.0, 2.0])
            np.testing.assert_array_equal(consumer.run(dequeue), [3.0, 4.0])
            assert consumer.run(q.size()) == 0
    finally:
        server.stop()


def test_local_sessions_have_their_own_shared_queues():
    q = tf.FIFOQueue(10, tf.float32, shapes=[[]], name="q", shared_name="sq1")
    enq, size = q.enqueue(1.0), q.size()
    with tf.Session() as a, tf.Session() as b:
        a.run(enq)
        assert a.run(size) == 1 and b.run(size) == 0


def test_private_queues_belong_to_their_session():
    q = tf.FIFOQueue(10, tf.float32, shapes=[[]], name="q")
    enq = q.enqueue(1.0)
    size = q.size()
    with tf.Session() as a, tf.Session() as b:
        a.run(enq)
        assert a.run(size) == 1 and b.run(size) == 0


def test_the_recorded_session():
    """The recorded TF run: full and empty waits time out, close, then drain."""
    q = tf.FIFOQueue(3, tf.float32, shapes=[[2]], name="q")
    x = tf.placeholder(tf.float32, [2])
    xs = tf.placeholder(tf.float32, [None, 2])
    enq, enq_many = q.enqueue(x), q.enqueue_many(xs)
    deq, deq_many, size, close = q.dequeue(), q.dequeue_many(2), q.size(), q.close()
    timeout = tf.RunOptions(timeout_in_ms=200)
    with tf.Session() as s:
        for i in range(3):
            s.run(enq, {x: [2.0 * i + 1, 2.0 * i + 2]})
        assert s.run(size) == 3
        with pytest.raises(tf.errors.DeadlineExceededError) as e:
            s.run(enq, {x: [0.0, 0.0]}, options=timeout)
        assert e.value.message == "Timed out waiting for notification" and e.value.error_code == 4
        np.testing.assert_array_equal(s.run(deq), [1.0, 2.0])
        np.testing.assert_array_equal(s.run(deq_many), [[3.0, 4.0], [5.0, 6.0]])
        for fetch in (deq, deq_many):
            with pytest.raises(tf.errors.DeadlineExceededError):
                s.run(fetch, options=timeout)
        s.run(enq_many, {xs: [[10.0, 11.0], [12.0, 13.0], [14.0, 15.0]]})
        assert s.run(size) == 3
        np.testing.assert_array_equal(s.run(deq), [10.0, 11.0])
        s.run(close)
        assert s.run(size) == 2
        with pytest.raises(tf.errors.CancelledError) as e:
            s.run(enq, {x: [0.0, 0.0]})
        assert re.fullmatch("FIFOQueue %s is closed." % PRIVATE, first_line(e.value))
        assert "[[{{node q_enqueue}}]]" in e.value.message
        np.testing.assert_array_equal(s.run(deq_many), [[12.0, 13.0], [14.0, 15.0]])
        for fetch, n in ((deq, 1), (deq_many, 2), (q.dequeue_up_to(2), 2)):
            with pytest.raises(tf.errors.OutOfRangeError) as e:
                s.run(fetch)
            text = r"FIFOQueue %s is closed and has insufficient elements \(requested %d, "
            assert re.fullmatch(text % (PRIVATE, n) + r"current size 0\)", first_line(e.value))
        with pytest.raises(tf.errors.CancelledError) as e:
            s.run(close)
        assert re.fullmatch("Queue %s is already closed." % PRIVATE, first_line(e.value))


def test_dequeue_up_to_after_close():
    q = tf.FIFOQueue(3, tf.float32, shapes=[[2]], name="q")
    enq = q.enqueue([[1.0, 2.0]])
    many, up_to = q.dequeue_many(2), q.dequeue_up_to(2)
    with tf.Session() as s:
        s.run(enq)
        s.run(q.close())
        with pytest.raises(tf.errors.OutOfRangeError) as e:
            s.run(many)
        assert "(requested 2, current size 1)" in first_line(e.value)
        np.testing.assert_array_equal(s.run(up_to), [[1.0, 2.0]])  # what is left will do
        with pytest.raises(tf.errors.OutOfRangeError) as e:
            s.run(up_to)
        assert "(requested 2, current size 0)" in first_line(e.value)


def test_tuple_queue_runs():
    q = tf.FIFOQueue(5, [tf.int32, tf.float32], shapes=[[], [2]])
    i = tf.placeholder(tf.int32, [])
    enq = q.enqueue((i, tf.cast(i, tf.float32) * tf.constant([1.0, 2.0])))
    with tf.Session() as s:
        for k in range(3):
            s.run(enq, {i: k})
        first = s.run(q.dequeue())
        assert isinstance(first[0], np.int32) and first[0] == 0
        np.testing.assert_array_equal(first[1], [0.0, 0.0])
        ints, floats = s.run(q.dequeue_many(2))
        np.testing.assert_array_equal(ints, [1, 2])
        np.testing.assert_array_equal(floats, [[1.0, 2.0], [2.0, 4.0]])
        assert ints.dtype == np.int32 and floats.dtype == np.float32


def test_dequeue_many_zero_returns_an_empty_batch():
    q = tf.FIFOQueue(3, tf.float32, shapes=[[2]])
    with tf.Session() as s:
        assert s.run(q.dequeue_many(0)).shape == (0, 2)


def test_run_time_errors():
    q = tf.FIFOQueue(3, tf.float32, shapes=[[2]], name="q")
    x = tf.placeholder(tf.float32)
    n = tf.placeholder(tf.int32)
    qn = tf.FIFOQueue(3, [tf.float32, tf.float32], name="qn")
    a, b = tf.placeholder(tf.float32), tf.placeholder(tf.float32)
    cases = [
        (q.enqueue(x), {x: [1.0, 2.0, 3.0]}, "Shape mismatch in tuple component 0. Expected "
         "[2], got [3]"),
        (q.dequeue_many(n), {n: -1}, "DequeueManyOp requested -1 < 0 elements"),
        (q.dequeue_up_to(n), {n: -1}, "DequeueUpToOp requested -1 < 0 elements"),
        (qn.enqueue_many([a, b]), {a: [1.0, 2.0], b: [1.0, 2.0, 3.0]}, "All input tensors must "
         "have the same size in the 0th dimension. Component 1 has 3, and should have 2"),
        (qn.dequeue_many(1), {}, "FIFOQueue's DequeueMany and DequeueUpTo require the "
         "components to have specified shapes."),
    ]  # fmt: skip
    with tf.Session() as s:
        for fetch, feed, text in cases:
            with pytest.raises(tf.errors.InvalidArgumentError) as e:
                s.run(fetch, feed)
            assert first_line(e.value) == text
        assert s.run(q.size()) == 0 and s.run(qn.size()) == 0


def test_shared_queue_must_match_and_names_are_checked():
    a = tf.FIFOQueue(3, tf.float32, shared_name="sq2")
    b = tf.FIFOQueue(4, tf.float32, shared_name="sq2")
    bad = tf.FIFOQueue(3, tf.float32, shared_name="_bad")
    with tf.container("my_problem_1"):  # the book's name: TF 1.15 rejects underscores
        contained = tf.FIFOQueue(3, tf.float32)
    with tf.Session() as s:
        s.run(a.size())
        cases = [
            (b, "Shared queue 'sq2' has capacity 3 but requested capacity was 4"),
            (bad, "shared_name cannot start with '_':_bad"),
            (contained, "container contains invalid characters: my_problem_1"),
        ]
        for q, text in cases:
            with pytest.raises(tf.errors.InvalidArgumentError) as e:
                s.run(q.size())
            assert first_line(e.value) == text
    tf.Session.reset("")


# -- waiting across threads ----------------------------------------------------------------------


def test_close_waits_for_the_enqueues_before_it(no_thread_left):
    q = tf.FIFOQueue(1, tf.float32, shapes=[[]], name="q")
    x = tf.placeholder(tf.float32, [])
    enq, deq, close, closed = q.enqueue(x), q.dequeue(), q.close(), q.is_closed()
    with tf.Session() as s:
        s.run(enq, {x: 1.0})
        ta, a = run_in_thread(s, enq, feed_dict={x: 2.0})
        assert waiting(s, q, enqueues=1)
        tb, b = run_in_thread(s, close)
        assert waiting(s, q, enqueues=2)
        assert not s.run(closed)
        assert s.run(deq) == 1.0
        ta.join(5)
        tb.join(5)
        assert a == {"value": None} and b == {"value": None}
        assert s.run(closed)
        assert s.run(deq) == 2.0
        with pytest.raises(tf.errors.OutOfRangeError) as e:
            s.run(deq)
        assert "(requested 1, current size 0)" in first_line(e.value)


def test_close_cancelling_pending_enqueues(no_thread_left):
    q = tf.FIFOQueue(1, tf.float32, shapes=[[]], name="q")
    x = tf.placeholder(tf.float32, [])
    enq, close = q.enqueue(x), q.close(cancel_pending_enqueues=True)
    with tf.Session() as s:
        s.run(enq, {x: 1.0})
        ta, a = run_in_thread(s, enq, feed_dict={x: 2.0})
        assert waiting(s, q, enqueues=1)
        s.run(close)
        ta.join(5)
        assert isinstance(a["error"], tf.errors.CancelledError)
        assert first_line(a["error"]) == "Enqueue operation was cancelled"
        assert s.run(q.size()) == 1
        with pytest.raises(tf.errors.CancelledError) as e:
            s.run(close)
        assert re.fullmatch("Queue %s is already closed." % PRIVATE, first_line(e.value))


def test_blocked_dequeue_many_holds_elements_and_gives_them_back_at_close(no_thread_left):
    q = tf.FIFOQueue(10, tf.float32, shapes=[[]], name="q")
    with tf.Session() as s:
        s.run(q.enqueue(7.0))
        t, out = run_in_thread(s, q.dequeue_many(2))
        assert waiting(s, q, dequeues=1)
        assert s.run(q.size()) == 0  # the waiting dequeue_many holds the element
        s.run(q.close())
        t.join(5)
        assert isinstance(out["error"], tf.errors.OutOfRangeError)
        assert "(requested 1, current size 0)" in first_line(out["error"])
        assert s.run(q.size()) == 1
        up_to = q.dequeue_up_to(2)
        np.testing.assert_array_equal(s.run(up_to), [7.0])
        with pytest.raises(tf.errors.OutOfRangeError) as e:
            s.run(up_to)
        assert "(requested 2, current size 0)" in first_line(e.value)


def test_a_waiting_dequeue_holds_no_inter_op_thread(no_thread_left):
    """One inter-op thread: a step waiting in a dequeue (followed by an expensive MatMul) leaves
    it free for another thread's step, whose enqueue (after a MatMul too) ends the wait."""
    config = tf.ConfigProto(inter_op_parallelism_threads=1, use_per_session_threads=True)
    q = tf.FIFOQueue(2, tf.float32, shapes=[[1, 1]], name="q")
    out = tf.matmul(q.dequeue(), [[2.0]])
    enq = q.enqueue(tf.matmul([[3.0]], [[1.0]]))
    with tf.Session(config=config) as s:
        t, result = run_in_thread(s, out)
        assert waiting(s, q, dequeues=1)
        s.run(enq)
        t.join(5)
        assert not t.is_alive()
        np.testing.assert_array_equal(result["value"], [[6.0]])


def test_operation_timeout_ends_a_wait_and_leaves_the_queue_usable(no_thread_left):
    config = tf.ConfigProto(operation_timeout_in_ms=200)
    q = tf.FIFOQueue(1, tf.float32, shapes=[[]], name="q")
    deq = q.dequeue()
    with tf.Session(config=config) as s:
        start = time.monotonic()
        with pytest.raises(tf.errors.DeadlineExceededError) as e:
            s.run(deq)
        assert time.monotonic() - start < 3.0
        assert e.value.message == "Timed out waiting for notification"
        assert s.run(q.size()) == 0
        s.run(q.enqueue(5.0))
        with pytest.raises(tf.errors.DeadlineExceededError):
            s.run(q.enqueue(6.0))  # full: the timed-out enqueue left nothing behind
        assert s.run(q.size()) == 1
        assert s.run(deq) == 5.0
        assert s.run(q.size()) == 0


def test_closing_the_session_ends_a_waiting_dequeue(no_thread_left):
    q = tf.FIFOQueue(1, tf.float32, shapes=[[]], name="q")
    deq = q.dequeue()
    s = tf.Session()
    t, out = run_in_thread(s, deq)
    assert waiting(s, q, dequeues=1)
    s.close()
    t.join(5)
    assert isinstance(out["error"], tf.errors.CancelledError)
    assert first_line(out["error"]) == "Dequeue operation was cancelled"
    assert "[[{{node q_Dequeue}}]]" in out["error"].message


# -- the step's cancellation hook ----------------------------------------------------------------


def test_step_cancellation_callbacks_run_once():
    ctx = StepContext()
    calls = []
    ctx.on_cancel(lambda e: calls.append(("a", e)))
    token = ctx.on_cancel(lambda e: calls.append(("b", e)))
    ctx.remove_on_cancel(token)
    error = tf.errors.CancelledError(None, None, "stop")
    assert ctx.start_cancel(error) is True
    assert ctx.start_cancel(tf.errors.CancelledError(None, None, "again")) is False
    assert calls == [("a", error)]
    assert ctx.on_cancel(lambda e: calls.append(("late", e))) is None  # runs at once
    assert calls == [("a", error), ("late", error)]


def test_a_shared_queue_must_have_the_requested_types_and_shapes():
    a = tf.FIFOQueue(3, tf.float32, shapes=[[]], shared_name="sq3")
    b = tf.FIFOQueue(3, tf.int32, shapes=[[]], shared_name="sq3")
    c = tf.FIFOQueue(3, tf.float32, shapes=[[2]], shared_name="sq3")
    with tf.Session() as s:
        s.run(a.size())
        for q, text in (
            (b, "component types float but requested component types were int32"),
            (c, "component shapes [[]] but requested component shapes were [[2]]"),
        ):
            with pytest.raises(tf.errors.InvalidArgumentError) as e:
                s.run(q.size())
            assert first_line(e.value) == "Shared queue 'sq3' has " + text


def test_first_come_first_served(no_thread_left):
    """A waiting dequeue_many(2) at the head takes the elements that come; a dequeue behind it
    waits; an enqueue_many that does not fit puts in what fits and waits for room."""
    q = tf.FIFOQueue(2, tf.float32, shapes=[[]], name="q")
    x = tf.placeholder(tf.float32, [None])
    with tf.Session() as s:
        tm, many = run_in_thread(s, q.dequeue_many(2))
        assert waiting(s, q, dequeues=1)
        td, one = run_in_thread(s, q.dequeue())
        assert waiting(s, q, dequeues=2)
        te, enq = run_in_thread(s, q.enqueue_many(x), feed_dict={x: [1.0, 2.0, 3.0, 4.0, 5.0]})
        for t in (tm, td, te):
            t.join(5)
        np.testing.assert_array_equal(many["value"], [1.0, 2.0])
        assert one["value"] == 3.0 and enq == {"value": None}
        np.testing.assert_array_equal(s.run(q.dequeue_many(2)), [4.0, 5.0])


def test_elements_a_timed_out_dequeue_many_held_are_lost():
    q = tf.FIFOQueue(5, tf.float32, shapes=[[]], name="q")
    with tf.Session() as s:
        s.run(q.enqueue(1.0))
        with pytest.raises(tf.errors.DeadlineExceededError):
            s.run(q.dequeue_many(2), options=tf.RunOptions(timeout_in_ms=100))
        assert s.run(q.size()) == 0  # as in TF: a cancelled attempt does not give them back


def test_timeout_of_a_step_running_on_the_pools(no_thread_left):
    """A step with an expensive op after its dequeue runs on the inter-op pool; its deadline
    ends the wait too, and the pool's one thread is free for the next step."""
    config = tf.ConfigProto(inter_op_parallelism_threads=1, use_per_session_threads=True)
    q = tf.FIFOQueue(2, tf.float32, shapes=[[1, 1]], name="q")
    out = tf.matmul(q.dequeue(), [[2.0]])
    with tf.Session(config=config) as s:
        with pytest.raises(tf.errors.DeadlineExceededError):
            s.run(out, options=tf.RunOptions(timeout_in_ms=100))
        s.run(q.enqueue(tf.matmul([[1.0]], [[4.0]])))
        np.testing.assert_array_equal(s.run(out), [[8.0]])


def test_the_queue_classes_are_also_under_tf_queue():
    """TF 1.15 names them twice: ``tf.FIFOQueue`` and ``tf.queue.FIFOQueue``."""
    assert tf.queue.FIFOQueue is tf.FIFOQueue and tf.queue.QueueBase is tf.QueueBase
    assert tf.queue.RandomShuffleQueue is tf.RandomShuffleQueue
    assert tf.queue.PaddingFIFOQueue is tf.PaddingFIFOQueue
    assert tf.queue.PriorityQueue is tf.PriorityQueue
    q = tf.queue.FIFOQueue(2, tf.float32)
    assert isinstance(q, tf.QueueBase) and q.queue_ref.op.type == "FIFOQueueV2"


# -- RandomShuffleQueue, PaddingFIFOQueue, PriorityQueue (§13.1, §13.5-13.7, §13.9) ------------


def test_the_other_queues_ops_names_and_attrs():
    r = tf.RandomShuffleQueue(50, 10, [tf.float32], shapes=[[]])
    p = tf.PaddingFIFOQueue(5, [tf.float32], shapes=[[None, 2]])
    pq = tf.PriorityQueue(10, [tf.string], shapes=[[]])
    r.dequeue_many(5)
    p.dequeue_up_to(2)
    pq.enqueue([1, "a"])
    ops = [(o.name, o.type) for o in tf.get_default_graph().get_operations()]
    assert ops == [
        ("random_shuffle_queue", "RandomShuffleQueueV2"),
        ("padding_fifo_queue", "PaddingFIFOQueueV2"),
        ("priority_queue", "PriorityQueueV2"),
        ("random_shuffle_queue_DequeueMany/n", "Const"),
        ("random_shuffle_queue_DequeueMany", "QueueDequeueManyV2"),
        ("padding_fifo_queue_DequeueUpTo/n", "Const"),
        ("padding_fifo_queue_DequeueUpTo", "QueueDequeueUpToV2"),
        ("priority_queue_enqueue/component_0", "Const"),
        ("priority_queue_enqueue/component_1", "Const"),
        ("priority_queue_enqueue", "QueueEnqueueV2"),
    ]
    op = r.queue_ref.op
    assert op.get_attr("min_after_dequeue") == 10 and op.get_attr("capacity") == 50
    assert (op.get_attr("seed"), op.get_attr("seed2")) == (0, 0)
    assert pq.dtypes == [tf.int64, tf.string]
    assert pq.shapes == [tf.TensorShape([]), tf.TensorShape([])]
    assert pq.queue_ref.op.get_attr("component_types") == [tf.string]
    assert [s.as_list() for s in p.shapes] == [[None, 2]]
    assert p.dequeue_many(3).shape.as_list() == [3, None, 2]


def test_the_other_queues_graph_time_errors():
    cases = [
        (lambda: tf.RandomShuffleQueue(5, 1, tf.float32, shapes=[[None]]),
         "All shapes must be fully defined: [TensorShape([Dimension(None)])]"),
        (lambda: tf.PaddingFIFOQueue(5, tf.float32, shapes=None),
         "When providing partial shapes, a list of shapes must be provided."),
        (lambda: tf.PaddingFIFOQueue(5, tf.float32, shapes=[None]),
         "When providing partial shapes, a list of shapes must be provided."),
        (lambda: tf.PaddingFIFOQueue(5, tf.float32, shapes=[[1], [2]]),
         "Shapes must be provided for all components, but received 1 dtypes and 2 shapes."),
        (lambda: tf.PriorityQueue(5, tf.float32, shapes=[[2]]).enqueue([[1, 2], [1.0, 2.0]]),
         "Shapes (2,) and () are incompatible"),
        (lambda: tf.PaddingFIFOQueue(5, tf.float32, shapes=[[None, None]]).enqueue([[1.0]]),
         "Shapes (1,) and (?, ?) are incompatible"),
    ]  # fmt: skip
    for build, text in cases:
        with pytest.raises(ValueError) as e:
            build()
        assert str(e.value) == text


def test_random_shuffle_queue_book_example(no_thread_left):
    """The book's queue: capacity 50, min_after_dequeue 10, 22 items; dequeue_many(5) twice
    leaves 17 then 12; a third would go under the floor and blocks (a deadline ends it); a
    single dequeue still works."""
    q = tf.RandomShuffleQueue(50, 10, [tf.float32], shapes=[[]], seed=7)
    x = tf.placeholder(tf.float32, [None])
    enq, deq5, size = q.enqueue_many([x]), q.dequeue_many(5), q.size()
    with tf.Session() as s:
        s.run(enq, {x: np.arange(1.0, 23.0)})
        seen = list(s.run(deq5))
        assert s.run(size) == 17
        seen += list(s.run(deq5))
        assert s.run(size) == 12
        with pytest.raises(tf.errors.DeadlineExceededError):
            s.run(deq5, options=tf.RunOptions(timeout_in_ms=200))
        assert s.run(size) == 10  # it held 2 when the deadline came: those are lost
        s.run(enq, {x: [30.0, 31.0]})  # 12 again: one more may leave
        seen.append(s.run(q.dequeue()))
        assert s.run(size) == 11
        assert len(set(seen)) == 11 and seen != sorted(seen)


def test_random_shuffle_order_follows_the_seeds():
    """§13.9: TF's Philox samples pick the same elements (recorded orders)."""
    cases = [
        (dict(seed=1), None, (87654321, 1), [7, 8, 1, 3, 9, 4, 2, 6, 5, 0]),
        (dict(), 42, (42, 0), [3, 7, 5, 2, 9, 0, 6, 1, 8, 4]),
        (dict(shared_name="shq"), 42, (42, 1261395151), [3, 2, 9, 8, 0, 4, 1, 6, 5, 7]),
    ]
    for kw, graph_seed, seeds, order in cases:
        with tf.Graph().as_default():
            tf.set_random_seed(graph_seed)
            q = tf.RandomShuffleQueue(20, 0, tf.int32, shapes=[[]], **kw)
            op = q.queue_ref.op
            assert (op.get_attr("seed"), op.get_attr("seed2")) == seeds
            enq, deq = q.enqueue_many([list(range(10))]), q.dequeue_many(10)
            for _ in range(2):  # the same on every session
                with tf.Session() as s:
                    s.run(enq)
                    assert list(s.run(deq)) == order
        tf.Session.reset("")


def test_random_shuffle_seed_zero_pair_is_avoided():
    tf.set_random_seed(0)
    q = tf.RandomShuffleQueue(20, 0, tf.int32, shapes=[[]])
    assert (q.queue_ref.op.get_attr("seed"), q.queue_ref.op.get_attr("seed2")) == (0, 2**31 - 1)


def test_random_shuffle_after_close_drains_below_the_floor():
    q = tf.RandomShuffleQueue(10, 5, tf.int32, shapes=[[]], name="q")
    with tf.Session() as s:
        s.run(q.enqueue_many([[1, 2, 3]]))
        s.run(q.close())
        with pytest.raises(tf.errors.OutOfRangeError) as e:
            s.run(q.dequeue_many(4))
        assert re.fullmatch(
            "RandomShuffleQueue %s is closed and has insufficient elements "
            r"\(requested 4, current size 3\)" % PRIVATE,
            first_line(e.value),
        )
        assert sorted(s.run(q.dequeue_up_to(5))) == [1, 2, 3]
        with pytest.raises(tf.errors.CancelledError) as e:
            s.run(q.enqueue(4))
        assert re.fullmatch("RandomShuffleQueue %s is closed." % PRIVATE, first_line(e.value))


def test_random_shuffle_kernel_checks():
    a = tf.RandomShuffleQueue(3, 3, tf.float32, name="q")
    b = tf.RandomShuffleQueue(3, -1, tf.float32, name="q")
    c = tf.RandomShuffleQueue(5, 2, tf.float32, seed=3, shared_name="x")
    d = tf.RandomShuffleQueue(5, 3, tf.float32, seed=3, shared_name="x")
    e = tf.RandomShuffleQueue(5, 2, tf.float32, seed=4, shared_name="x")
    f = tf.FIFOQueue(5, tf.float32, shared_name="x")
    with tf.Session() as s:
        s.run(c.size())
        for q, text in (
            (a, "min_after_dequeue 3 must be < capacity 3"),
            (b, "min_after_dequeue -1 must be >= 0"),
            (d, "Shared queue 'x' has min_after_dequeue 2 but requested min_after_dequeue was 3."),
            (e, "Shared queue 'x' has random seeds (87654321, 3) but requested seeds are "
                "(87654321, 4)."),
            (f, "Expected RandomShuffleQueue, found FIFOQueueV2"),
        ):  # fmt: skip
            with pytest.raises(tf.errors.InvalidArgumentError) as err:
                s.run(q.size())
            assert first_line(err.value) == text
    tf.Session.reset("")


def test_padding_fifo_queue_book_example():
    """§13.9 and the book: 3x2, 1x1 and 2x4 elements come out of dequeue_many(3) as one
    3x3x4 batch, zero padded; strings pad with b'' and each dequeue keeps its own shape."""
    q = tf.PaddingFIFOQueue(50, tf.float32, shapes=[(None, None)], name="q")
    v = tf.placeholder(tf.float32, [None, None])
    enq = q.enqueue([v])
    with tf.Session() as s:
        for shape in [(3, 2), (1, 1), (2, 4)]:
            s.run(enq, {v: np.ones(shape)})
        batch = s.run(q.dequeue_many(3))
        assert batch.shape == (3, 3, 4)
        np.testing.assert_array_equal(batch[1], [[1, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]])
        assert batch.sum() == 6 + 1 + 8
        s.run(enq, {v: np.ones((2, 5))})
        assert s.run(q.dequeue()).shape == (2, 5)
        anything = tf.placeholder(tf.float32)
        with pytest.raises(tf.errors.InvalidArgumentError) as e:
            s.run(q.enqueue(anything), {anything: [1.0, 2.0, 3.0]})
        assert first_line(e.value) == "Shape mismatch in tuple component 0. Expected [?,?], got [3]"
        s.run(q.close())
        with pytest.raises(tf.errors.CancelledError) as e:
            s.run(enq, {v: [[1.0]]})
        assert re.fullmatch("FIFOQueue %s is closed." % PRIVATE, first_line(e.value))
        with pytest.raises(tf.errors.OutOfRangeError) as e:
            s.run(q.dequeue_many(1))
        assert re.fullmatch(
            "PaddingFIFOQueue %s is closed and has insufficient elements "
            r"\(requested 1, current size 0\)" % PRIVATE,
            first_line(e.value),
        )
        with pytest.raises(tf.errors.OutOfRangeError) as e:
            s.run(q.dequeue())
        assert first_line(e.value).startswith("FIFOQueue ")
    tf.reset_default_graph()
    q = tf.PaddingFIFOQueue(5, [tf.string, tf.int32], shapes=[[None], [None]])
    a, b = tf.placeholder(tf.string, [None]), tf.placeholder(tf.int32, [None])
    enq = q.enqueue([a, b])
    with tf.Session() as s:
        s.run(enq, {a: [b"a", b"bb"], b: [1]})
        s.run(enq, {a: [b"c"], b: [2, 3, 4]})
        strings, ints = s.run(q.dequeue_up_to(2))
        assert strings.tolist() == [[b"a", b"bb"], [b"c", b""]]
        assert ints.tolist() == [[1, 0, 0], [2, 3, 4]]


def test_priority_queue_order_and_batches():
    """§13.9: the smallest priority first; dequeue gives a list even with one value."""
    q = tf.PriorityQueue(10, [tf.string], shapes=[[]], name="q")
    p, v = tf.placeholder(tf.int64, []), tf.placeholder(tf.string, [])
    enq = q.enqueue([p, v])
    deq = q.dequeue()
    assert isinstance(deq, list) and [t.dtype for t in deq] == [tf.int64, tf.string]
    with tf.Session() as s:
        for item in [(5, b"e"), (1, b"a"), (3, b"c"), (-2, b"z"), (3, b"c2")]:
            s.run(enq, {p: item[0], v: item[1]})
        assert s.run(deq) == [-2, b"z"]
        priorities, values = s.run(q.dequeue_many(2))
        assert priorities.tolist() == [1, 3] and values[0] == b"a" and values[1] in (b"c", b"c2")
        assert s.run(q.size()) == 2
        bad = tf.placeholder(tf.int64)
        with pytest.raises(tf.errors.InvalidArgumentError) as e:
            s.run(q.enqueue([bad, b"x"]), {bad: [1, 2]})
        assert first_line(e.value) == (
            "Expected the priority element to be a scalar, but received shape: [2]"
        )


def test_priority_queue_waits_for_a_whole_batch(no_thread_left):
    q = tf.PriorityQueue(10, [tf.int32], shapes=[[]], name="q")
    p, v = tf.placeholder(tf.int64, []), tf.placeholder(tf.int32, [])
    enq = q.enqueue([p, v])
    with tf.Session() as s:
        s.run(enq, {p: 9, v: 90})
        t, out = run_in_thread(s, q.dequeue_many(3))
        assert waiting(s, q, dequeues=1)
        assert s.run(q.size()) == 1  # it holds nothing while it waits
        s.run(enq, {p: 1, v: 10})
        s.run(enq, {p: 4, v: 40})
        t.join(5)
        assert [a.tolist() for a in out["value"]] == [[1, 4, 9], [10, 40, 90]]


def test_priority_queue_dequeue_up_to_after_close_loses_a_short_batch():
    """TF's quirk (§13.7), kept: 2 left, dequeue_up_to(5) takes them and then fails with
    (requested 3, current size 0); dequeue_many fails without taking any."""
    q = tf.PriorityQueue(10, [tf.int32], shapes=[[]], name="q")
    p, v = tf.placeholder(tf.int64, [None]), tf.placeholder(tf.int32, [None])
    with tf.Session() as s:
        s.run(q.enqueue_many([p, v]), {p: [2, 1], v: [20, 10]})
        s.run(q.close())
        with pytest.raises(tf.errors.OutOfRangeError) as e:
            s.run(q.dequeue_many(5))
        text = "PriorityQueue %s is closed and has insufficient elements " % PRIVATE
        assert re.fullmatch(text + r"\(requested 5, current size 2\)", first_line(e.value))
        with pytest.raises(tf.errors.OutOfRangeError) as e:
            s.run(q.dequeue_up_to(5))
        assert re.fullmatch(text + r"\(requested 3, current size 0\)", first_line(e.value))
        assert s.run(q.size()) == 0


def test_priority_queue_without_shapes_has_no_dequeue_many():
    q = tf.PriorityQueue(3, tf.float32)
    with tf.Session() as s:
        with pytest.raises(tf.errors.InvalidArgumentError) as e:
            s.run(q.dequeue_many(1))
        assert first_line(e.value) == (
            "PriorityQueue's DequeueMany requires the components to have specified shapes."
        )


def test_shared_queues_of_each_kind():
    """shared_name works the same for every kind: two queue ops, one queue."""
    pairs = [
        [tf.RandomShuffleQueue(5, 0, tf.int32, shapes=[[]], shared_name="s-r") for _ in "ab"],
        [tf.PaddingFIFOQueue(5, tf.int32, shapes=[[None]], shared_name="s-p") for _ in "ab"],
        [tf.PriorityQueue(5, tf.int32, shapes=[[]], shared_name="s-q") for _ in "ab"],
    ]
    values = [[[7]], [[[7, 8]]], [[3], [7]]]
    with tf.Session() as s:
        for (q1, q2), vals in zip(pairs, values):
            s.run(q1.enqueue_many(vals))
            got = s.run(q2.dequeue())
            assert np.asarray(got[-1] if isinstance(got, list) else got).ravel()[0] == 7
    tf.Session.reset("")


def test_container_names_are_checked_for_every_queue_and_ref_variable():
    """§22.1: the book's tf.container("my_problem_1") fails at the first run; dashes work."""
    with tf.container("my_problem_1"):
        made = [
            tf.Variable(1.0, name="v"),
            tf.RandomShuffleQueue(5, 0, tf.float32),
            tf.PaddingFIFOQueue(5, tf.float32, shapes=[[None]]),
            tf.PriorityQueue(5, tf.float32),
        ]
    with tf.container("my-problem-1.a/b"):
        good = tf.Variable(2.0, name="w")
        good_q = tf.PriorityQueue(5, tf.float32)
    with tf.Session() as s:
        for thing in made:
            fetch = thing.initializer if isinstance(thing, tf.Variable) else thing.size()
            with pytest.raises(tf.errors.InvalidArgumentError) as e:
                s.run(fetch)
            assert first_line(e.value) == "container contains invalid characters: my_problem_1"
        s.run(good.initializer)
        assert s.run(good) == 2.0 and s.run(good_q.size()) == 0
    for name in ("", "a", "A.b-c/d", ".x"):
        check_container_name(name)
    for name in ("_a", "a_b", "-a", "/a", "a b"):
        with pytest.raises(tf.errors.InvalidArgumentError):
            check_container_name(name)


def test_random_shuffle_dequeue_many_held_at_close_gives_them_back(no_thread_left):
    """§13.3 for a RandomShuffleQueue: a waiting dequeue_many(3) holding one element fails at
    close with (requested 2, current size 0) and the element goes back."""
    q = tf.RandomShuffleQueue(10, 0, tf.int32, shapes=[[]], name="q", seed=1)
    with tf.Session() as s:
        s.run(q.enqueue(5))
        t, out = run_in_thread(s, q.dequeue_many(3))
        assert waiting(s, q, dequeues=1)
        assert s.run(q.size()) == 0
        s.run(q.close())
        t.join(5)
        assert re.fullmatch(
            "RandomShuffleQueue %s is closed and has insufficient elements "
            r"\(requested 2, current size 0\)" % PRIVATE,
            first_line(out["error"]),
        )
        assert s.run(q.size()) == 1 and s.run(q.dequeue()) == 5


def test_padding_fifo_queue_empty_batch():
    q = tf.PaddingFIFOQueue(5, [tf.float32, tf.string], shapes=[[None, 2], [None]])
    with tf.Session() as s:
        floats, strings = s.run(q.dequeue_many(0))
        assert floats.shape == (0, 0, 2) and strings.shape == (0, 0)
