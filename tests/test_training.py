"""Training end to end: seed 003's multi-GPU towers on scikit-learn's digits, managed sessions
(MonitoredTrainingSession, Supervisor, hooks) as reference/tf1_semantics_part2.md §20.6 shows
them, and seed 003's Supervisor code against a ps in another process."""

import logging
import os
import re
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from sklearn.datasets import load_digits
from test_blog_examples import average_gradients

import minitf as tf
from helpers import wait_until
from minitf.distributed import LocalCluster
from minitf.distributed.local_cluster import free_port


@pytest.fixture(autouse=True)
def fresh_graph():
    with tf.Graph().as_default():
        yield


def digits():
    data = load_digits()
    x = (data.data / 16.0).astype(np.float32)
    y = data.target.astype(np.int64)
    rng = np.random.default_rng(0)
    order = rng.permutation(len(x))
    x, y = x[order], y[order]
    return (x[:1400], y[:1400]), (x[1400:], y[1400:])


def mlp(x):
    h = tf.layers.dense(x, 64, activation=tf.nn.relu, name="hidden")
    return tf.layers.dense(h, 10, name="logits")


# -- seed 003: one tower per GPU, gradients averaged -----------------------------------------


def test_seed_003_towers_train_the_digits_mlp(two_gpus):
    (x_train, y_train), (x_test, y_test) = digits()
    optimizer = tf.train.AdamOptimizer(0.01)
    global_step = tf.train.get_or_create_global_step()
    tower_grads, inputs = [], []
    for i in range(2):
        with tf.device("/gpu:{}".format(i)):
            with tf.name_scope("tower_{}".format(i)):
                x = tf.placeholder(tf.float32, [None, 64], name="x")
                y = tf.placeholder(tf.int64, [None], name="y")
                with tf.variable_scope("model", reuse=tf.AUTO_REUSE):
                    logits = mlp(x)
                loss = tf.reduce_mean(
                    tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits)
                )
                grads = optimizer.compute_gradients(loss)
                tower_grads.append(grads)
                inputs.append((x, y))
    grads = average_gradients(tower_grads)
    train_op = optimizer.apply_gradients(grads, global_step=global_step)
    with tf.variable_scope("model", reuse=True):
        x_eval = tf.placeholder(tf.float32, [None, 64])
        accuracy = tf.reduce_mean(
            tf.cast(tf.equal(tf.argmax(mlp(x_eval), 1), tf.constant(y_test)), tf.float32)
        )
    assert grads[0][0].op.type == "Mean" and grads[0][1].op.name == "model/hidden/kernel"
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        rng = np.random.default_rng(1)
        for _ in range(200):
            feed = {}
            for x, y in inputs:
                idx = rng.integers(0, len(x_train), 64)
                feed[x], feed[y] = x_train[idx], y_train[idx]
            sess.run(train_op, feed)
        acc = sess.run(accuracy, {x_eval: x_test})
        assert sess.run(global_step) == 200
    assert acc > 0.9


# -- MonitoredTrainingSession (§20.6) ------------------------------------------------------


def build_quadratic():
    gs = tf.train.get_or_create_global_step()
    w = tf.Variable(5.0, name="w")
    loss = tf.square(w)
    tf.summary.scalar("loss", loss)
    train = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=gs)
    return gs, w, train


def checkpoint_files(d):
    return sorted(f for f in os.listdir(d) if f.startswith("model.ckpt"))


def test_monitored_training_session_as_tf(tmp_path):
    ckpt = str(tmp_path / "mts")
    gs, w, train = build_quadratic()
    runs = 0
    with tf.train.MonitoredTrainingSession(
        checkpoint_dir=ckpt,
        hooks=[tf.train.StopAtStepHook(last_step=5)],
        save_summaries_steps=2,
        log_step_count_steps=2,
    ) as sess:
        assert tf.get_default_graph().finalized
        with pytest.raises(RuntimeError, match="Graph is finalized and cannot be modified."):
            tf.constant(1.0)
        while not sess.should_stop():
            sess.run(train)
            runs += 1
        with pytest.raises(RuntimeError, match="Run called even after should_stop requested."):
            sess.run(train)
    assert runs == 5 and not tf.get_default_graph().finalized
    names = os.listdir(ckpt)
    assert "checkpoint" in names and "graph.pbtxt" in names
    assert any(n.startswith("events.out.tfevents.") for n in names)
    assert checkpoint_files(ckpt) == [
        "model.ckpt-%d.%s" % (s, ext)
        for s in (0, 5)
        for ext in ("data-00000-of-00001", "index", "meta")
    ]
    state = open(os.path.join(ckpt, "checkpoint")).read()
    assert (
        "model.ckpt-0" in state and 'model_checkpoint_path: "' in state and "model.ckpt-5" in state
    )
    with tf.train.MonitoredTrainingSession(
        checkpoint_dir=ckpt, hooks=[tf.train.StopAtStepHook(num_steps=3)]
    ) as sess:
        assert sess.run(gs) == 5
        while not sess.should_stop():
            sess.run(train)
    assert "model.ckpt-8.index" in os.listdir(ckpt)
    with tf.train.SingularMonitoredSession(checkpoint_dir=ckpt) as sess:
        assert sess.run(gs) == 8
        assert isinstance(sess.raw_session(), tf.Session)
        np.testing.assert_allclose(sess.run(w), 5.0 * 0.8**8, rtol=1e-5)


def test_monitored_session_swallows_out_of_range():
    build_quadratic()
    with tf.train.MonitoredTrainingSession() as sess:
        raise tf.errors.OutOfRangeError(None, None, "input ran out")
    assert sess._sess is None
    with pytest.raises(RuntimeError, match="Session is already closed."):
        sess.close()


def test_stop_at_step_hook_needs_a_global_step():
    tf.Variable(1.0)
    with pytest.raises(RuntimeError, match="Global step should be created to use StopAtStepHook."):
        tf.train.MonitoredTrainingSession(hooks=[tf.train.StopAtStepHook(last_step=2)])
    with pytest.raises(ValueError, match="One of num_steps or last_step must be specified."):
        tf.train.StopAtStepHook()
    with pytest.raises(ValueError, match="Only one of num_steps or last_step can be specified."):
        tf.train.StopAtStepHook(1, 2)


def test_hooks_see_every_run_and_their_feeds_merge(caplog):
    gs, w, train = build_quadratic()
    delta = tf.placeholder(tf.float32, [], name="delta")
    shifted = w + delta

    class FeedHook(tf.train.SessionRunHook):
        def __init__(self, feeds):
            self.feeds, self.seen = feeds, []

        def before_run(self, run_context):
            return tf.train.SessionRunArgs(shifted, feed_dict=self.feeds)

        def after_run(self, run_context, run_values):
            self.seen.append(float(run_values.results))

    hook = FeedHook({delta: 100.0})
    logging_hook = tf.train.LoggingTensorHook({"w": w}, every_n_iter=1)
    with caplog.at_level(logging.INFO, logger="minitf"):
        with tf.train.MonitoredTrainingSession(hooks=[hook, logging_hook]) as sess:
            for _ in range(2):
                sess.run(train)
            with pytest.raises(
                RuntimeError, match="Same tensor is fed by a SessionRunHook and user"
            ):
                sess.run(train, feed_dict={delta: 1.0})
    assert hook.seen == [pytest.approx(105.0), pytest.approx(104.0)]
    assert any(r.getMessage().startswith("w = ") for r in caplog.records)
    with tf.Graph().as_default():
        gs, w, train = build_quadratic()
        d = tf.placeholder(tf.float32, [])
        two = [FeedHook({d: 1.0}), FeedHook({d: 2.0})]
        two[0].before_run = lambda ctx: tf.train.SessionRunArgs(w, feed_dict={d: 1.0})
        two[1].before_run = lambda ctx: tf.train.SessionRunArgs(w, feed_dict={d: 2.0})
        with tf.train.MonitoredTrainingSession(hooks=two) as sess:
            with pytest.raises(RuntimeError, match="Same tensor is fed by two hooks."):
                sess.run(train)


def test_nan_tensor_hook_fails_on_a_nan_loss():
    v = tf.Variable(1.0)
    gs = tf.train.get_or_create_global_step()
    nan = v * float("nan")
    step = tf.assign_add(gs, 1)
    with pytest.raises(tf.train.NanLossDuringTrainingError, match="NaN loss during training."):
        with tf.train.MonitoredTrainingSession(hooks=[tf.train.NanTensorHook(nan)]) as sess:
            sess.run(step)
    stopping = tf.train.NanTensorHook(nan, fail_on_nan_loss=False)
    with tf.train.MonitoredTrainingSession(hooks=[stopping]) as sess:
        sess.run(step)
        assert sess.should_stop()


def test_summaries_and_step_rate_reach_tensorboard(tmp_path):
    from tensorboard.backend.event_processing import event_accumulator

    gs, w, train = build_quadratic()
    out = str(tmp_path / "logs")
    with tf.train.MonitoredTrainingSession(
        checkpoint_dir=out,
        save_summaries_steps=1,
        log_step_count_steps=1,
        save_checkpoint_secs=None,
        hooks=[tf.train.StopAtStepHook(last_step=4)],
    ) as sess:
        while not sess.should_stop():
            sess.run(train)
    acc = event_accumulator.EventAccumulator(out)
    acc.Reload()
    tags = acc.Tags()["scalars"]
    assert "loss" in tags and "global_step/sec" in tags
    losses = [e.value for e in acc.Scalars("loss")]
    np.testing.assert_allclose(losses[0], 25.0)
    assert [e.step for e in acc.Scalars("loss")] == [1, 2, 3, 4]


# -- Supervisor (§20.6) --------------------------------------------------------------------


def build_wb():
    w = tf.get_variable("w", (2, 2), tf.float32, initializer=tf.constant_initializer(2))
    b = tf.get_variable("b", (2, 2), tf.float32, initializer=tf.constant_initializer(5))
    return w, b


def test_supervisor_without_logdir():
    w, b = build_wb()
    addwb = w + b
    init = tf.initialize_all_variables()
    summary_op = tf.summary.merge_all()
    assert summary_op is None
    sv = tf.train.Supervisor(init_op=init, summary_op=summary_op, saver=tf.train.Saver())
    assert sv.is_chief and sv.global_step is None and sv.save_path is None
    assert sv.summary_writer is None and tf.get_default_graph().finalized
    with sv.managed_session("") as sess:
        np.testing.assert_allclose(sess.run(addwb), [[7, 7], [7, 7]])
    with sv.managed_session("") as sess:
        raise tf.errors.OutOfRangeError(None, None, "done")
    with pytest.raises(RuntimeError, match="user error"):
        with sv.managed_session("") as sess:
            raise RuntimeError("user error")


def test_supervisor_with_logdir_writes_graph_and_events(tmp_path):
    gs = tf.train.get_or_create_global_step()
    w, b = build_wb()
    tf.summary.scalar("total", tf.reduce_sum(w))
    logdir = str(tmp_path / "svlog")
    sv = tf.train.Supervisor(logdir=logdir, save_model_secs=0, save_summaries_secs=0)
    assert sv.global_step.name == "global_step:0"
    assert sv.summary_op.name == "Merge/MergeSummary:0"
    assert sv.save_path == os.path.join(logdir, "model.ckpt")
    assert isinstance(sv.saver, tf.train.Saver) and sv.init_op.name == "init"
    with sv.managed_session("") as sess:
        assert sess.run(gs) == 0
        sv.summary_computed(sess, sess.run(sv.summary_op))
    names = os.listdir(logdir)
    assert "graph.pbtxt" in names and any(n.startswith("events.out.tfevents.") for n in names)
    assert not any(n.startswith("model.ckpt") for n in names)


def wait_for_file(path, timeout=30.0):
    """Polls for a file a service thread writes (it runs on its own clock), up to ``timeout``."""
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        assert time.monotonic() < deadline, "%s was not written" % path
        time.sleep(0.01)


def test_supervisor_checkpoints_at_once_and_restores(tmp_path):
    gs, w, train = build_quadratic()
    logdir = str(tmp_path / "sv")
    sv = tf.train.Supervisor(logdir=logdir, save_model_secs=3600, save_summaries_secs=0)
    with sv.managed_session("") as sess:
        wait_for_file(os.path.join(logdir, "model.ckpt-0.index"))  # the first save: at once
        sess.run(train)
        sess.run(train)
        assert sess.run(gs) == 2
    with tf.Graph().as_default():
        gs, w, train = build_quadratic()
        sv = tf.train.Supervisor(logdir=logdir, save_model_secs=0, save_summaries_secs=0)
        with sv.managed_session("") as sess:  # restored from model.ckpt-0, not initialised
            assert sess.run(gs) == 0 and sess.run(w) == pytest.approx(5.0)
            sess.run(train)
            sv.saver.save(sess, sv.save_path, global_step=gs)
    with tf.Graph().as_default():
        gs, w, train = build_quadratic()
        sv = tf.train.Supervisor(logdir=logdir, save_model_secs=0, save_summaries_secs=0)
        with sv.managed_session("") as sess:
            assert sess.run(gs) == 1 and sess.run(w) == pytest.approx(4.0)


def test_supervisor_replica_needs_pinned_variables():
    tf.Variable(1.0, name="w")
    text = 'When using replicas, all Variables must have their device set: name: "w"'
    with pytest.raises(ValueError, match=text):
        tf.train.Supervisor(is_chief=False)


# -- seed 003's Supervisor code, a ps in another process ------------------------------------

SEED_003 = (Path(__file__).parent / "data" / "seed_003_supervisor.py.txt").read_text()


def _listening(host, port):
    with socket.socket() as probe:
        probe.settimeout(1.0)
        return probe.connect_ex((host, port)) == 0


def _env(tmp_path):
    shim = tmp_path / "shim"
    shim.mkdir(exist_ok=True)
    (shim / "tensorflow.py").write_text(
        "from minitf import *\nimport minitf as _m\nimport sys\nsys.modules[__name__] = _m\n"
    )
    env = dict(os.environ, MINITF_EMULATED_GPUS="0")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = os.pathsep.join([str(shim), root])
    return env


@pytest.mark.cluster
@pytest.mark.slow
def test_seed_003_supervisor_code_runs_with_a_ps(tmp_path):
    addresses = {"worker": "127.0.0.1:%d" % free_port(), "ps": "127.0.0.1:%d" % free_port()}
    env = _env(tmp_path)
    ps_script = tmp_path / "ps.py"
    ps_script.write_text(SEED_003 % dict(addresses, isps=True))
    worker_script = tmp_path / "worker.py"
    worker_script.write_text(SEED_003 % dict(addresses, isps=False))
    ps = subprocess.Popen(
        [sys.executable, str(ps_script)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        # minitf's session creation does not wait for a task that is not up yet (TF 1.15's
        # does): the ps must listen before the worker's script opens its session
        host, port = addresses["ps"].split(":")
        assert wait_until(lambda: _listening(host, int(port)), 60), "the ps did not start"
        r = subprocess.run(
            [sys.executable, str(worker_script)],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        ps.kill()
        ps.wait(timeout=30)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.count("[array(") == 3
    numbers = [float(x) for x in re.findall(r"\d+\.\d*", r.stdout.replace("float32", ""))]
    assert numbers == ([7.0] * 4 + [10.0] * 4 + [0.4] * 4) * 3


# -- the chief killed mid-training ---------------------------------------------------------

CHIEF = textwrap.dedent("""
    import sys
    import minitf as tf
    target, ckpt, last = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with tf.device(tf.train.replica_device_setter(ps_tasks=1, worker_device="/job:worker/task:0")):
        gs = tf.train.get_or_create_global_step()
        w = tf.Variable(5.0, name="w")
        train = tf.train.GradientDescentOptimizer(0.01).minimize(tf.square(w), global_step=gs)
    hooks = [tf.train.StopAtStepHook(last_step=last)]
    with tf.train.MonitoredTrainingSession(
        master=target, checkpoint_dir=ckpt, hooks=hooks, save_checkpoint_steps=5,
        save_summaries_steps=None, save_summaries_secs=None, log_step_count_steps=0,
    ) as sess:
        print("start", sess.run(gs), flush=True)
        while not sess.should_stop():
            step = sess.run([train, gs])[1]
            print("step", step, flush=True)
""")


@pytest.mark.cluster
@pytest.mark.slow
def test_a_killed_chief_resumes_from_its_last_checkpoint(tmp_path):
    script = tmp_path / "chief.py"
    script.write_text(CHIEF)
    ckpt = str(tmp_path / "ckpt")
    env = dict(os.environ, MINITF_EMULATED_GPUS="0")
    with LocalCluster({"ps": 1, "worker": 1}) as cluster:
        target = cluster.target("worker", 0)
        chief = subprocess.Popen(
            [sys.executable, str(script), target, ckpt, "100000"],
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            for line in chief.stdout:
                if line.startswith("step") and int(line.split()[1]) >= 12:
                    break
            chief.kill()  # mid-training, between checkpoints 10 and 15
        finally:
            chief.wait(timeout=30)
        saved = tf.train.latest_checkpoint(ckpt)
        saved_step = int(saved.rsplit("-", 1)[1])
        assert saved_step >= 10 and saved_step % 5 == 0
        r = subprocess.run(
            [sys.executable, str(script), target, ckpt, str(saved_step + 3)],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert r.returncode == 0, r.stderr[-3000:]
        out = r.stdout.split()
        assert out[:2] == ["start", str(saved_step)]
        steps = [int(s) for s in out[3::2]]
        assert steps == [saved_step + 1, saved_step + 2, saved_step + 3]


class _LostThenBack(tf.train.SessionCreator):
    """A creator whose task is lost for its first ``failures`` attempts (UnavailableError)."""

    def __init__(self, failures):
        self.failures, self.attempts = failures, []

    def create_session(self):
        self.attempts.append(time.monotonic())
        if len(self.attempts) <= self.failures:
            raise tf.errors.UnavailableError(None, None, "Connection refused")
        return tf.Session()


def test_a_lost_task_is_tried_again_with_growing_waits_not_at_once(monkeypatch):
    """While its task is lost, a recovering MonitoredSession waits between attempts to make
    its session, twice as long each time up to a limit (a refused connection fails in a
    millisecond: trying again at once spun a core and slowed the task's restart down); a
    session that does not recover raises at once."""
    from minitf.train import monitored_session

    monkeypatch.setattr(monitored_session, "RETRY_WAIT_SECS", (0.02, 0.05))
    creator = _LostThenBack(failures=4)
    with tf.train.MonitoredSession(session_creator=creator) as sess:
        assert sess.run(tf.constant(2.0)) == 2.0
    gaps = np.diff(creator.attempts)
    assert len(gaps) == 4
    assert all(gap >= want * 0.9 for gap, want in zip(gaps, (0.02, 0.04, 0.05, 0.05)))
    start = time.monotonic()
    with pytest.raises(tf.errors.UnavailableError):
        tf.train.SingularMonitoredSession(master="grpc://127.0.0.1:%d" % free_port())
    assert time.monotonic() - start < monitored_session.RETRY_WAIT_SECS[0] * 50


@pytest.mark.cluster
@pytest.mark.slow
def test_a_lost_ps_is_recovered_from_the_last_checkpoint(tmp_path):
    """MonitoredSession: the ps dies and comes back empty; the next run fails with
    UnavailableError or AbortedError, the session is made again, restored from the last
    checkpoint, and training goes on from that step."""
    ckpt = str(tmp_path / "ckpt")
    with LocalCluster({"ps": 1, "worker": 1}) as cluster:
        with tf.device(
            tf.train.replica_device_setter(ps_tasks=1, worker_device="/job:worker/task:0")
        ):
            gs = tf.train.get_or_create_global_step()
            w = tf.Variable(5.0, name="w")
            train = tf.train.GradientDescentOptimizer(0.1).minimize(tf.square(w), global_step=gs)
        with tf.train.MonitoredTrainingSession(
            master=cluster.target("worker", 0),
            checkpoint_dir=ckpt,
            save_checkpoint_steps=3,
            save_summaries_steps=None,
            save_summaries_secs=None,
            log_step_count_steps=0,
        ) as sess:
            for _ in range(4):
                sess.run(train)
            assert sess.run(gs) == 4
            cluster.restart("ps", 0)  # its variables are gone
            sess.run(train)  # recovered: restored at step 3, then one step
            assert sess.run(gs) == 4
            np.testing.assert_allclose(sess.run(w), 5.0 * 0.8**4, rtol=1e-5)
