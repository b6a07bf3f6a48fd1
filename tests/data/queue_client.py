"""A client process of tests/test_queues_cluster.py: one role against a queue on ``/job:ps/task:0``.

Book section: "Asynchronous Communication Using TensorFlow Queues" (Figure 12-8: a loader
client enqueues, a trainer client dequeues, each a process of its own).  Usage::

    python queue_client.py TARGET ROLE [N] [SHARED_NAME]

Roles: ``enqueue N`` (items [i, -i]), ``dequeue N``, ``drain`` (dequeue until the queue is
closed and empty), ``close``, ``fill`` (fill the queue, then one enqueue more, which waits),
``wait`` (a dequeue on an empty queue), ``timeout MS`` (a dequeue with
``RunOptions(timeout_in_ms=MS)``), ``optimeout MS`` (the same through
``ConfigProto(operation_timeout_in_ms=MS)``), ``runner`` (a QueueRunner stopped by its
Coordinator while blocked on the full queue).  Each line it prints is flushed; an error is
printed as ``<class>: <message>``, its lines joined by `` | `` and the process exits 0.
"""

import sys

import minitf as tf

CAPACITY = 4


def build(shared_name="shared_q"):
    with tf.device("/job:ps/task:0"):
        q = tf.FIFOQueue(CAPACITY, tf.float32, shapes=[[2]], name="q", shared_name=shared_name)
    x = tf.placeholder(tf.float32, [2], name="x")
    return q, x, q.enqueue([x]), q.dequeue()


def say(*parts):
    print(*parts, flush=True)


def run_role(sess, role, n, q, x, enqueue, dequeue):
    if role == "enqueue":
        for i in range(n):
            sess.run(enqueue, {x: [float(i), -float(i)]})
        say("enqueued", n)
    elif role in ("dequeue", "drain"):
        for _ in range(n if role == "dequeue" else 10**9):
            say("dequeued", sess.run(dequeue).tolist())
    elif role == "close":
        sess.run(q.close())
        say("closed")
    elif role == "fill":
        while sess.run(q.size()) < CAPACITY:
            sess.run(enqueue, {x: [0.0, 0.0]})
        say("full; one more enqueue waits")
        sess.run(enqueue, {x: [0.0, 0.0]})
    elif role == "wait":
        say("waiting for an element")
        sess.run(dequeue)
    elif role == "timeout":
        say("waiting at most", n, "ms")
        say("dequeued", sess.run(dequeue, options=tf.RunOptions(timeout_in_ms=n)).tolist())


def runner(target):
    q, x, _, _ = build()
    qr = tf.train.QueueRunner(q, [q.enqueue([tf.constant([1.0, 1.0])])])
    coord = tf.train.Coordinator()
    with tf.Session(target) as sess:
        threads = qr.create_threads(sess, coord=coord, start=True)
        # (a runner thread that failed stops the coordinator: join then raises its error)
        while not coord.should_stop() and sess.run(q.size()) < CAPACITY:
            pass
        say("queue full; runner thread blocked")
        coord.request_stop()
        coord.join(threads, stop_grace_period_secs=10)
        say("runner stopped; threads alive:", sum(t.is_alive() for t in threads))
        say("queue closed:", sess.run(q.is_closed()))


def main(argv):
    target, role = argv[1], argv[2]
    n = int(argv[3]) if len(argv) > 3 else 0
    if role == "runner":
        return runner(target)
    q, x, enqueue, dequeue = build(*argv[4:5])
    config = None
    if role == "optimeout":
        config, role = tf.ConfigProto(operation_timeout_in_ms=n), "wait"
    try:
        with tf.Session(target, config=config) as sess:
            run_role(sess, role, n, q, x, enqueue, dequeue)
    except tf.errors.OpError as e:
        say("%s: %s" % (type(e).__name__, e.message.replace("\n", " | ")))


if __name__ == "__main__":
    main(sys.argv)
