"""A program of tests/test_failed_step_memory.py: steps failing on the ps while the worker
waits for their tensor, in a process of their own so that only their gRPC calls are counted.

Usage: ``python failed_steps_calls.py``.  Prints ``BEFORE AFTER``: the ``_CallState``
objects (gRPC Python's state of a call) alive after 20 failed steps and after 200 more; a
call cancelled in the last steps may still wait for its last events, so AFTER is the first
count within 9 of BEFORE, or the count when 10 s have passed.
"""

import gc
import time

import numpy as np

import minitf as tf
from minitf.distributed.local_cluster import free_port


def call_states():
    gc.collect()
    return sum(type(o).__name__ == "_CallState" for o in gc.get_objects())


def fail(sess, fetch, x, n):
    for _ in range(n):
        try:
            sess.run(fetch, {x: np.ones(3, np.float32)})
        except tf.errors.InvalidArgumentError:
            continue
        raise AssertionError("a step fed 3 values for 8 ran")


def settled(before, seconds=10.0):
    deadline = time.monotonic() + seconds
    count = call_states()
    while count - before >= 10 and time.monotonic() < deadline:
        time.sleep(0.05)
        count = call_states()
    return count


def main():
    spec = {"ps": ["127.0.0.1:%d" % free_port()], "worker": ["127.0.0.1:%d" % free_port()]}
    servers = [tf.train.Server(spec, job_name=j, task_index=0) for j in ("ps", "worker")]
    try:
        with tf.Graph().as_default():
            with tf.device("/job:ps/task:0"):
                x = tf.placeholder(tf.float32, [None], name="x")
                s = tf.reduce_sum(tf.reshape(x, [8]), name="s")  # fails unless 8 are fed
            with tf.device("/job:worker/task:0"):
                y = tf.identity(tf.reshape(s, [1, 1]) + 1.0, name="y")
            with tf.Session(servers[1].target) as sess:
                fail(sess, y, x, 20)
                before = call_states()
                fail(sess, y, x, 200)
                after = settled(before)
                assert sess.run(s, {x: np.ones(8, np.float32)}) == 8.0
    finally:
        for server in servers:
            server.stop()
    print(before, after, flush=True)


if __name__ == "__main__":
    main()
