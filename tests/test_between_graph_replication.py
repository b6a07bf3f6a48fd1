"""Between-graph replication as notebook 12 builds it (Figure 12-13): clients with their own
graphs and sessions meet in queues found by ``shared_name`` on a task of a LocalCluster; an
aggregator's dequeue bounded by ``RunOptions(timeout_in_ms)`` gives DeadlineExceededError when
a member is dead, takes nothing on the way (its dequeue is cancelled), and goes on."""

import numpy as np
import pytest

import minitf as tf
from helpers import child_pids, wait_until
from minitf.distributed import LocalCluster

pytestmark = pytest.mark.cluster


def shared_queues(n):
    with tf.device("/job:queues/task:0"):
        inputs = [tf.FIFOQueue(4, [tf.float32], shared_name="in_%d" % i) for i in range(n)]
        outputs = [tf.FIFOQueue(4, [tf.float32], shared_name="out_%d" % i) for i in range(n)]
    return inputs, outputs


def distribute(target, batches, n):
    with tf.Graph().as_default() as graph:
        inputs, _ = shared_queues(n)
        batch = tf.placeholder(tf.float32, [None])
        enqueue = [q.enqueue([batch]) for q in inputs]
        close = [q.close() for q in inputs]
    with tf.Session(target, graph=graph) as sess:
        for b in batches:
            sess.run(enqueue, {batch: b})
        sess.run(close)


def member(target, i, n, scale, steps):
    """Answers ``steps`` batches (then "dies"), or every batch until the input is closed."""
    with tf.Graph().as_default() as graph:
        inputs, outputs = shared_queues(n)
        with tf.device("/job:worker/task:%d" % i):
            answer = inputs[i].dequeue() * scale
        predict = outputs[i].enqueue([answer])
    done = 0
    with tf.Session(target, graph=graph) as sess:
        while done != steps:
            try:
                sess.run(predict)
            except tf.errors.OutOfRangeError:
                break
            done += 1
    return done


def test_aggregator_times_out_on_a_dead_member_and_goes_on():
    before = child_pids()
    batches = [np.full(3, k, np.float32) for k in range(3)]
    with LocalCluster({"queues": 1, "worker": 2}) as cluster:
        queues = cluster.target("queues", 0)
        distribute(queues, batches, 2)
        assert member(cluster.target("worker", 0), 0, 2, 1.0, None) == 3  # input closed
        assert member(cluster.target("worker", 1), 1, 2, 10.0, 1) == 1  # dies after one
        with tf.Graph().as_default() as graph:
            _, outputs = shared_queues(2)
            take = [q.dequeue() for q in outputs]
        options = tf.RunOptions(timeout_in_ms=300)
        got = []
        with tf.Session(queues, graph=graph) as sess:
            for _ in batches:
                row = []
                for t in take:
                    try:
                        row.append(float(sess.run(t, options=options)[0]))
                    except tf.errors.DeadlineExceededError:
                        row.append(None)
                got.append(row)
            # the timed-out dequeues were cancelled: a late answer is still there to take
            with tf.Graph().as_default() as late_graph:
                _, late_outputs = shared_queues(2)
                late = late_outputs[1].enqueue([tf.constant([7.0])])
            with tf.Session(queues, graph=late_graph) as late_sess:
                late_sess.run(late)
            assert float(sess.run(take[1], options=options)[0]) == 7.0
    assert got == [[0.0, 0.0], [1.0, None], [2.0, None]]
    assert wait_until(lambda: not (child_pids() - before), 10)
