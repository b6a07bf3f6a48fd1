"""kill -9 of each task role of a cluster (the ps, a worker, the chief's master task) during a
step and during training: the client gets UnavailableError naming the task, the other tasks
keep serving, and a MonitoredTrainingSession recovers once the task is back."""

import threading
import time

import pytest

import minitf as tf
from minitf.distributed import LocalCluster

pytestmark = pytest.mark.stress

ROLES = {"ps": ("ps", 0), "worker": ("worker", 1), "chief": ("worker", 0)}


def blocked_three_task_step():
    """A step that spans the three tasks and blocks on the ps (an empty queue)."""
    with tf.device("/job:ps/task:0"):
        q = tf.FIFOQueue(1, [tf.float32], shapes=[[]], name="q")
        x = q.dequeue()
    with tf.device("/job:worker/task:1"):
        y = x * 2.0
    with tf.device("/job:worker/task:0"):
        return y + 1.0


@pytest.mark.parametrize("role", sorted(ROLES))
def test_a_task_killed_during_a_step(role):
    job, task = ROLES[role]
    with LocalCluster({"ps": 1, "worker": 2}) as lc:
        z = blocked_three_task_step()
        errs, ended = [], []

        def run():
            try:
                with tf.Session(lc.target("worker", 0)) as sess:
                    sess.run(z)
            except tf.errors.OpError as e:
                errs.append(e)
            ended.append(time.monotonic())

        t = threading.Thread(target=run)
        t.start()
        time.sleep(1.0)  # the step is under way: blocked on the ps's queue
        assert t.is_alive()
        killed = time.monotonic()
        lc.kill(job, task)
        t.join(30)
        assert not t.is_alive()
        print("\n%s killed: %s after %.2f s" % (role, type(errs[0]).__name__, ended[0] - killed))
        assert len(errs) == 1 and isinstance(errs[0], tf.errors.UnavailableError), errs
        assert ended[0] - killed < 15
        lc.restart(job, task)
        with tf.Graph().as_default():
            with tf.device("/job:worker/task:1"):
                k = tf.constant(2.0) * 5.0
            with tf.Session(lc.target("worker", 0)) as sess:
                assert sess.run(k) == 10.0


@pytest.mark.parametrize("role", ["ps", "worker"])
def test_training_goes_on_after_a_task_is_killed(tmp_path, role):
    """The worker holding the compute, or the ps holding the variables, dies mid-training and
    comes back: the MonitoredTrainingSession makes its session again, restores the last
    checkpoint, trains on to the last step and saves its final checkpoint when it closes."""
    job, task = ROLES[role]
    with LocalCluster({"ps": 1, "worker": 2}) as lc:
        with tf.device(
            tf.train.replica_device_setter(ps_tasks=1, worker_device="/job:worker/task:1")
        ):
            gs = tf.train.get_or_create_global_step()
            w = tf.Variable(5.0, name="w")
            train = tf.train.GradientDescentOptimizer(0.01).minimize(tf.square(w), global_step=gs)
        under_way, killed, done = threading.Event(), threading.Event(), threading.Event()

        def kill_and_restart():  # one thread that outlives the restarted task (see LocalCluster)
            under_way.wait(60)
            lc.kill(job, task)  # while steps are running
            killed.set()
            lc.restart(job, task)
            done.wait(120)

        killer = threading.Thread(target=kill_and_restart)
        with tf.train.MonitoredTrainingSession(
            master=lc.target("worker", 0),
            checkpoint_dir=str(tmp_path),
            save_checkpoint_steps=30,  # the last step (400) is saved by close alone
            save_summaries_steps=None,
            save_summaries_secs=None,
            log_step_count_steps=0,
            hooks=[tf.train.StopAtStepHook(last_step=400)],
        ) as sess:
            killer.start()
            try:
                while not sess.should_stop():
                    step = sess.run([train, gs])[1]
                    if step >= 50:
                        under_way.set()
                    if step >= 60:  # the kill came between steps 50 and 60 at the latest
                        assert killed.wait(60)
            finally:
                done.set()
                killer.join(30)
        assert step >= 400
        assert not killer.is_alive()
    # the checkpoint the session's close saved: the last step's (TF's CheckpointSaverHook.end)
    assert tf.train.latest_checkpoint(str(tmp_path)).endswith("-%d" % step)
