"""The bandwidth lesson's 16-bit transfers: parameters cast to ``tf.float16`` on their ps task
before they cross to the worker, and (with ``colocate_gradients_with_ops=True``) their gradients
cast back to float32 on the ps task after they crossed, halve the bytes of a step in the step
stats (``step_summary.transfer_bytes``).  TF 1.15 would also offer ``tf.bfloat16``
(``tf.to_bfloat16``), which minitf does not have: the bytes are the same.

Book section: "Bandwidth saturation".
"""

import numpy as np
import pytest

import minitf as tf
from minitf.distributed.local_cluster import free_port
from minitf.runtime.step_summary import transfer_bytes

PS = "/job:ps/replica:0/task:0"
WORKER = "/job:worker/replica:0/task:0"


def _on_ps_as(var, dtype):
    """The variable as ``dtype``, cast where it lives."""
    if dtype == var.dtype.base_dtype:
        return var
    with tf.device(var.device):
        return tf.cast(var, dtype)


def _traced_step_bytes(target, dtype):
    """{(src, dst): bytes} of one traced step of a 64-48-10 MLP computed in ``dtype``."""
    with tf.Graph().as_default():
        setter = tf.train.replica_device_setter(ps_tasks=1, worker_device="/job:worker/task:0")
        with tf.device(setter):
            gs = tf.train.get_or_create_global_step()
            X = tf.placeholder(tf.float32, [None, 64])
            y = tf.placeholder(tf.int64, [None])
            h = tf.cast(X, dtype)
            for k, units in enumerate([48, 10]):
                W = tf.get_variable("kernel%d" % k, [h.shape[1].value, units])
                b = tf.get_variable("bias%d" % k, [units], initializer=tf.zeros_initializer())
                h = tf.matmul(h, _on_ps_as(W, dtype)) + _on_ps_as(b, dtype)
            loss = tf.reduce_mean(
                tf.nn.sparse_softmax_cross_entropy_with_logits(
                    labels=y, logits=tf.cast(h, tf.float32)
                )
            )
            train = tf.train.GradientDescentOptimizer(0.1).minimize(
                loss, global_step=gs, colocate_gradients_with_ops=True
            )
        traced = tf.RunMetadata()
        with tf.Session(target) as sess:
            sess.run(tf.global_variables_initializer())
            sess.run(
                train,
                {X: np.ones((8, 64)), y: np.zeros(8)},
                options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE),
                run_metadata=traced,
            )
            params = sess.run(tf.trainable_variables())
    assert all(p.dtype == np.float32 for p in params)  # stored and updated in float32
    by_task = {}
    for (src, dst), n in transfer_bytes(traced).items():  # the devices: CPUs or emulated cards
        key = (src.split("/device:")[0], dst.split("/device:")[0])
        by_task[key] = by_task.get(key, 0) + n
    return by_task, sum(p.nbytes for p in params)


@pytest.mark.cluster
def test_float16_halves_the_bytes_each_way():
    spec = {"ps": ["127.0.0.1:%d" % free_port()], "worker": ["127.0.0.1:%d" % free_port()]}
    servers = [tf.train.Server(spec, job_name=j, task_index=0) for j in spec]
    try:
        full, param_bytes = _traced_step_bytes(servers[1].target, tf.float32)
        half, _ = _traced_step_bytes(servers[1].target, tf.float16)
    finally:
        for s in servers:
            s.stop()
    # down: the parameters; up: their gradients and the 4-byte float32 learning rate
    assert full == {(PS, WORKER): param_bytes, (WORKER, PS): param_bytes + 4}
    assert half == {(PS, WORKER): param_bytes // 2, (WORKER, PS): param_bytes // 2 + 4}
