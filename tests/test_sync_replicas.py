"""``tf.train.SyncReplicasOptimizer``: the graph it builds (names, devices, the token and dummy
queues), its errors, the chief's start-up by hand and through its hook, and synchronous
training on a cluster (a ps and two workers).

Book section: "Data parallelism" → "Synchronous updates".  Expected names, devices, texts and
values are the reference semantics' §18.5 conformance cases (TF 1.15; observed on 2.21 where
the graphs agree).
"""

import logging
import threading

import numpy as np
import pytest

import minitf as tf
from helpers import wait_until

WORKER = "/job:worker/task:0"
PS = "/job:ps/task:0"
# every run that may wait for a token or a gradient fails instead of hanging if none comes
WITHIN = tf.RunOptions(timeout_in_ms=30000)


def _model():
    gs = tf.train.get_or_create_global_step()
    w = tf.Variable(1.0, name="w")
    return gs, w, tf.square(w)


def _setter(task=0):
    """One ps, the rest on worker ``task``."""
    return tf.train.replica_device_setter(ps_tasks=1, worker_device="/job:worker/task:%d" % task)


def _sync_graph(replicas=2, total=3, setter=True, task=0):
    """§18.5's graph: w = 1.0, loss = w², GD(0.1) wrapped; under replica_device_setter (the
    worker: ``task``)."""
    with tf.device(_setter(task) if setter else None):
        gs, w, loss = _model()
        sync = tf.train.SyncReplicasOptimizer(
            tf.train.GradientDescentOptimizer(0.1), replicas, total
        )
        train = sync.minimize(loss, global_step=gs)
    return sync, train, gs, w


def test_the_graph_under_replica_device_setter(caplog):
    with caplog.at_level(logging.INFO, logger="minitf"):
        sync, train, gs, w = _sync_graph()
    assert "SyncReplicasV2: replicas_to_aggregate=2; total_num_replicas=3" in caplog.text
    g = tf.get_default_graph()
    op = g.get_operation_by_name
    assert isinstance(train, tf.Tensor) and train.name == "Assign_1:0"
    assert (train.op.type, train.op.device) == ("Assign", WORKER)
    local = [v for v in tf.local_variables() if v.op.name == "sync_rep_local_step"]
    assert len(local) == 1 and local[0].op.device == WORKER
    assert local[0].dtype.base_dtype == tf.int64
    assert local[0] not in tf.global_variables() and local[0] not in tf.trainable_variables()
    acc = op("sync_replicas/conditional_accumulator")
    assert (acc.type, acc.device) == ("ResourceConditionalAccumulator", PS)
    assert acc.get_attr("shared_name") == "w:0/grad_accum"
    assert acc.get_attr("reduction_type") == "MEAN" and acc.get_attr("shape").as_list() == []
    apply = op("sync_replicas/ResourceAccumulatorApplyGradient")
    assert apply.device == PS and apply.inputs[1].name == "sync_rep_local_step/read:0"
    take = op("sync_replicas/ResourceAccumulatorTakeGradient")
    assert take.device == PS and take.inputs[1].op.get_attr("value") == 2
    assert apply in op("sync_token_q_Dequeue").control_inputs
    assert op("sync_token_q_Dequeue").device == PS
    assert sync.chief_init_op.name == "sync_replicas/group_deps"
    np.testing.assert_array_equal(op("Fill/dims").get_attr("value"), [3])
    assert op("GradientDescent/update_w/ApplyGradientDescent").inputs[2] is take.outputs[0]
    for name in (
        "GradientDescent",
        "Fill",
        "sync_token_q_EnqueueMany",
        "sync_replicas/SetGlobalStep",
    ):
        assert op(name).device == PS, name
    assert op("sync_replicas/SetGlobalStep").type == "ResourceAccumulatorSetGlobalStep"
    assert sync.local_step_init_op.name == "Assign:0" and sync.local_step_init_op.device == WORKER
    assert sync.ready_for_local_init_op.op.name.startswith("report_uninitialized_variables")


def test_one_accumulator_per_variable_on_its_ps_task():
    """Two ps tasks: gs on ps0, w on ps1, b on ps0; each accumulator, apply, take and
    SetGlobalStep is where its variable is; the chief init groups one NoOp per device."""
    with tf.device(tf.train.replica_device_setter(ps_tasks=2, worker_device=WORKER)):
        gs = tf.train.get_or_create_global_step()
        w = tf.Variable([1.0, 2.0], name="w")
        b = tf.Variable(0.5, name="b")
        loss = tf.reduce_sum(tf.square(w)) + b
        sync = tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(0.1), 2)
        sync.minimize(loss, global_step=gs)
    op = tf.get_default_graph().get_operation_by_name
    for suffix, var, device in (("", "w", "/job:ps/task:1"), ("_1", "b", PS)):
        acc = op("sync_replicas/conditional_accumulator" + suffix)
        assert acc.get_attr("shared_name") == var + ":0/grad_accum" and acc.device == device
        for name in ("ResourceAccumulatorApplyGradient", "ResourceAccumulatorTakeGradient"):
            assert op("sync_replicas/%s%s" % (name, suffix)).device == device
        assert op("sync_replicas/SetGlobalStep" + suffix).device == device
    assert acc.get_attr("shape").as_list() == [] and op(
        "sync_replicas/conditional_accumulator"
    ).get_attr("shape").as_list() == [2]
    deps = [c.name for c in sync.chief_init_op.control_inputs]
    assert deps == [
        "sync_replicas/group_deps/NoOp",
        "sync_replicas/group_deps/NoOp_1",
        "sync_replicas/group_deps/NoOp_2",
    ]
    assert [op(d).device for d in deps] == [PS, "/job:ps/task:1", WORKER]


def test_the_token_queue_and_the_dummy_queue_of_1_15():
    sync, train, gs, w = _sync_graph()
    op = tf.get_default_graph().get_operation_by_name
    token_q, dummy = op("sync_token_q"), op("dummy_queue")
    assert (token_q.type, token_q.get_attr("capacity")) == ("FIFOQueueV2", -1)
    assert token_q.get_attr("shared_name") == "sync_token_q"
    assert token_q.get_attr("component_types") == [tf.int64]
    assert (dummy.type, dummy.get_attr("capacity")) == ("FIFOQueueV2", 1)
    assert dummy.get_attr("component_types") == [tf.int32] and dummy.device == PS
    assert dummy.get_attr("shared_name") == "dummy_queue"
    runner = sync.get_chief_queue_runner()
    assert runner.name == "dummy_queue"
    assert [o.name for o in runner.enqueue_ops] == ["sync_token_q_EnqueueMany"]
    assert (runner.close_op.name, runner.cancel_op.name) == (
        "dummy_queue_Close",
        "dummy_queue_Close_1",
    )
    assert runner not in tf.get_collection(tf.GraphKeys.QUEUE_RUNNERS)


def test_init_tokens():
    sync, train, gs, w = _sync_graph()
    assert sync.get_init_tokens_op(num_tokens=0).name == "no_init_tokens"
    with pytest.raises(ValueError) as e:
        sync.get_init_tokens_op(-5)
    assert str(e.value) == "Too few tokens to finish the first step: -5 (given) vs -1 (needed)"
    tokens = sync.get_init_tokens_op()
    assert tokens.type == "QueueEnqueueManyV2" and tokens.name == "sync_token_q_EnqueueMany_1"
    assert tokens.device == PS
    fill = tokens.inputs[1].op
    assert fill.inputs[1].name == "global_step/read:0"
    np.testing.assert_array_equal(fill.inputs[0].op.get_attr("value"), [2])
    four = sync.get_init_tokens_op(4).inputs[1].op
    np.testing.assert_array_equal(four.inputs[0].op.get_attr("value"), [4])


def test_errors_before_and_during_apply_gradients():
    gs, w, loss = _model()
    gd = tf.train.GradientDescentOptimizer(0.1)
    sync = tf.train.SyncReplicasOptimizer(gd, 2)
    cases = [
        (sync.get_chief_queue_runner, "Should be called after apply_gradients()."),
        (sync.get_init_tokens_op, "get_init_tokens_op() should be called after apply_gradients()."),
        (sync.make_session_run_hook(True).begin, "SyncReplicasOptimizer.apply_gradient should be "
         "called before using the hook."),
        (lambda: sync.minimize(loss), "Global step is required to check staleness"),
        (lambda: sync.apply_gradients([], global_step=gs), "Must supply at least one variable"),
        (lambda: sync.apply_gradients([(object(), w)], gs), "Unknown grad type!"),
    ]  # fmt: skip
    for call, text in cases:
        with pytest.raises(ValueError) as e:
            call()
        assert str(e.value) == text


def test_deprecation_is_logged_once(caplog, monkeypatch):
    from minitf.lib import deprecation

    monkeypatch.setattr(deprecation, "warned", set())
    gd = tf.train.GradientDescentOptimizer(0.1)
    with caplog.at_level(logging.WARNING, logger="minitf"):
        tf.train.SyncReplicasOptimizer(gd, 2)
        tf.train.SyncReplicasOptimizer(gd, 2)
    assert caplog.text.count("is deprecated and will be removed in a future version") == 1
    assert "test_sync_replicas.py" in caplog.text and "Distribution Strategies" in caplog.text


def test_delegates_to_the_wrapped_optimizer():
    gs, w, loss = _model()
    momentum = tf.train.MomentumOptimizer(0.1, 0.9)
    sync = tf.train.SyncReplicasOptimizer(momentum, 2)
    grads = sync.compute_gradients(loss)
    assert [v for _, v in grads] == [w] and grads[0][0].op.name.startswith("gradients/")
    sync.apply_gradients(grads, global_step=gs)
    assert sync.get_slot_names() == ["momentum"] == momentum.get_slot_names()
    assert sync.get_slot(w, "momentum") is momentum.get_slot(w, "momentum")
    assert sync.variables() == momentum.variables()
    assert all(v.op.name != "sync_rep_local_step" for v in sync.variables())


def test_a_variable_without_gradient_passes_through():
    gs, w, loss = _model()
    other = tf.Variable(2.0, name="other")
    sync = tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(0.1), 1)
    sync.apply_gradients(sync.compute_gradients(loss, var_list=[w, other]), global_step=gs)
    accumulators = [
        o for o in tf.get_default_graph().get_operations() if o.type.endswith("Accumulator")
    ]
    assert [a.get_attr("shared_name") for a in accumulators] == ["w:0/grad_accum"]


def test_variable_averages_run_after_the_tokens():
    gs, w, loss = _model()
    applied = []

    class Averages:  # what SyncReplicasOptimizer asks of an ExponentialMovingAverage
        def apply(self, var_list):
            applied.append(var_list)
            return tf.no_op(name="averages")

    sync = tf.train.SyncReplicasOptimizer(
        tf.train.GradientDescentOptimizer(0.1),
        2,
        variable_averages=Averages(),
        variables_to_average=[w],
    )
    sync.minimize(loss, global_step=gs)
    averages = sync.get_chief_queue_runner().enqueue_ops[0]
    assert applied == [[w]] and averages.name == "averages"
    assert [c.name for c in averages.control_inputs] == ["sync_token_q_EnqueueMany"]


# -- running in one process ----------------------------------------------------------------------


def _gd_step(w):
    """One update by hand, in float32: the mean of two gradients 2w is 2w."""
    w = np.float32(w)
    return w - np.float32(0.1) * (np.float32(2) * w)


def _run_replicas(sess, train, n):
    """``n`` replicas' steps at once (threads); each returns its new local step."""
    out = [None] * n

    def step(i):
        out[i] = sess.run(train, options=WITHIN)

    threads = [threading.Thread(target=step, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert not any(t.is_alive() for t in threads)
    return out


def test_two_replicas_by_hand_in_a_local_session():
    """The recipe without the hook: chief init, init tokens, the chief's runner.  Two replicas'
    gradients make one update: w = 1 - 0.1 * mean(2, 2) = 0.8.  The init tokens carry step 0,
    so the next gradient (maybe computed before that update) is stale and dropped; the next
    ones, tagged 1, make the second update: 0.64.  (The replicas here share one graph, hence
    one local step: the stale run is made alone.)"""
    sync, train, gs, w = _sync_graph(replicas=2, total=2, setter=False)
    init_tokens = sync.get_init_tokens_op()
    num = tf.get_default_graph().get_tensor_by_name("sync_replicas/conditional_accumulator:0")
    coord = tf.train.Coordinator()
    before = set(threading.enumerate())
    with tf.Session() as sess:
        sess.run([tf.global_variables_initializer(), tf.local_variables_initializer()])
        sess.run(sync.chief_init_op)
        sess.run(init_tokens)
        threads = sync.get_chief_queue_runner().create_threads(sess, coord, daemon=True, start=True)
        assert _run_replicas(sess, train, 2) == [0, 0]
        assert wait_until(lambda: sess.run(gs) == 1)
        assert sess.run(w) == _gd_step(1.0) == np.float32(0.8)
        assert sess.run(train, options=WITHIN) == 1  # its gradient, tagged 0, was stale
        assert sess.run(num).num_accumulated() == 0 and sess.run(gs) == 1
        assert sorted(_run_replicas(sess, train, 2)) == [1, 2]
        assert wait_until(lambda: sess.run(gs) == 2)
        assert sess.run(w) == _gd_step(_gd_step(1.0)) == np.float32(0.64)
        coord.request_stop()
    coord.join(threads, stop_grace_period_secs=5)  # the closed session cancelled the take
    assert wait_until(lambda: set(threading.enumerate()) <= before)


@pytest.fixture
def thread_errors(monkeypatch):
    """Exceptions that end threads (TF's chief runner ends so when its take is cancelled after
    the coordinator was joined), collected instead of reported."""
    caught = []
    monkeypatch.setattr(threading, "excepthook", caught.append)
    return caught


def _runner_ended_by(thread_errors, *types):
    names = [a.thread.name for a in thread_errors]
    assert names in ([], ["QueueRunnerThread-dummy_queue-sync_token_q_EnqueueMany"]), names
    return all(isinstance(a.exc_value, types) for a in thread_errors)


class _Final(tf.train.SessionRunHook):
    """Reads ``fetches`` when the monitored session ends (``end`` gets the raw session)."""

    def __init__(self, fetches):
        self.fetches = fetches
        self.values = None

    def end(self, session):
        self.values = session.run(self.fetches)


def test_the_hook_in_a_monitored_training_session(thread_errors):
    """One replica aggregating 2 gradients computes both (the chief's 2 init tokens): after two
    global steps w = 0.64."""
    sync, train, gs, w = _sync_graph(replicas=2, total=2, setter=False)
    final = _Final([w, gs])
    hooks = [sync.make_session_run_hook(is_chief=True), tf.train.StopAtStepHook(last_step=2)]
    before = set(threading.enumerate())
    runs = 0
    with tf.train.MonitoredTrainingSession(
        hooks=hooks + [final], stop_grace_period_secs=0.1
    ) as sess:
        while not sess.should_stop():
            sess.run(train, options=WITHIN)
            runs += 1
    assert final.values[0] == pytest.approx(0.64) and final.values[1] == 2
    assert runs >= 4
    assert wait_until(lambda: set(threading.enumerate()) <= before)
    assert _runner_ended_by(thread_errors, tf.errors.CancelledError)


def test_the_hook_of_another_replica_runs_the_local_step_init():
    sync, train, gs, w = _sync_graph(replicas=2, total=2, setter=False)
    chief = sync.make_session_run_hook(is_chief=True, num_tokens=0)
    chief.begin()
    assert chief._init_tokens_op.name == "no_init_tokens"
    hook = sync.make_session_run_hook(is_chief=False)
    hook.begin()
    coord = tf.train.Coordinator()
    with tf.Session() as sess:
        with pytest.raises(RuntimeError) as e:
            hook.after_create_session(sess, coord)
        text = (
            "Init operations did not make model ready for SyncReplicasOptimizer local_init. "
            "Init op: Assign:0, error: Variables not initialized: global_step, w"
        )
        assert str(e.value) == text
        sess.run(tf.global_variables_initializer())
        sess.run(gs.assign(7))
        sess.run(tf.local_variables_initializer())
        hook.after_create_session(sess, coord)
        assert sess.run(sync._local_step) == 7
    assert not coord.should_stop()


# -- a cluster: a ps and two workers --------------------------------------------------------------


def _worker(task, target, last_step, workers=2):
    """What each worker process runs (§18.1 with the sync optimizer): its own graph, the
    hook and StopAtStepHook in a MonitoredTrainingSession on its own server."""
    graph = tf.Graph()
    with graph.as_default():
        sync, train, gs, w = _sync_graph(2, workers, task=task)
        hooks = [
            sync.make_session_run_hook(is_chief=(task == 0)),
            tf.train.StopAtStepHook(last_step=last_step),
        ]
        config = tf.ConfigProto(device_filters=["/job:ps", "/job:worker/task:%d" % task])
        sess = tf.train.MonitoredTrainingSession(
            master=target,
            is_chief=(task == 0),
            hooks=hooks,
            config=config,
            stop_grace_period_secs=0.2,
        )
    return graph, sess, train, w, gs


def _train_replicas(targets, last_step):
    """Every replica's training loop on its own thread (the chief's session is made first, so
    the others find the model ready at once); returns {task: runs} once all stopped."""
    workers = len(targets)
    replicas = [_worker(i, targets[i], last_step, workers) for i in range(workers)]
    runs = {}

    def loop(task, graph, sess, train):
        with graph.as_default(), sess:
            runs[task] = 0
            while not sess.should_stop():
                sess.run(train, options=WITHIN)
                runs[task] += 1

    threads = [
        threading.Thread(target=loop, args=(i, g, s, t))
        for i, (g, s, t, _, _) in enumerate(replicas)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads) and sorted(runs) == list(range(workers))
    # every step takes two fresh gradients (one per run, the rest are stale); every run takes
    # a token: 2 at first, then one per worker and step
    assert 2 * last_step <= sum(runs.values()) <= 2 + workers * last_step
    graph, _, _, w, gs = replicas[-1]
    with graph.as_default(), tf.Session(targets[-1]) as sess:
        assert sess.run(gs) == last_step
        assert sess.run(w) == pytest.approx(0.8**last_step, rel=1e-6)
    return runs


@pytest.mark.cluster
@pytest.mark.parametrize("workers", [2, 3])
def test_synchronous_training_on_a_cluster(thread_errors, workers):
    """ps0 + two workers (or three: one spare), ``replicas_to_aggregate=2``: each global step
    applies the mean of two fresh gradients, computed at the same w, so w = 0.8 ** N exactly;
    every worker stops at step N.  The chief's runner is still waiting in TakeGrad when its
    session closes (as in TF); the servers' stop ends it, and its thread hands that error to
    the stopped coordinator."""
    from minitf.distributed.local_cluster import free_port

    spec = {
        "ps": ["localhost:%d" % free_port()],
        "worker": ["localhost:%d" % free_port() for _ in range(workers)],
    }
    before = set(threading.enumerate())
    servers = [
        tf.train.Server(spec, job_name=j, task_index=i) for j in spec for i in range(len(spec[j]))
    ]
    try:
        _train_replicas([s.target for s in servers[1:]], last_step=6)
    finally:
        for s in servers:
            s.stop()
    assert wait_until(lambda: set(threading.enumerate()) <= before | _daemons(), 10)
    assert _runner_ended_by(thread_errors, tf.errors.UnavailableError, tf.errors.CancelledError)


@pytest.mark.cluster
@pytest.mark.slow
def test_synchronous_training_with_server_processes(thread_errors):
    """The same with a LocalCluster: the ps and both workers are processes; the accumulators
    and the token queue live in the ps process."""
    from minitf.distributed.local_cluster import LocalCluster

    before = set(threading.enumerate())
    with LocalCluster({"ps": 1, "worker": 2}) as cluster:
        runs = _train_replicas([cluster.target("worker", i) for i in range(2)], last_step=4)
    assert sum(runs.values()) >= 8
    assert wait_until(lambda: set(threading.enumerate()) <= before | _daemons(), 10)
    assert _runner_ended_by(thread_errors, tf.errors.UnavailableError, tf.errors.CancelledError)


def _daemons():
    """Process-wide helper threads kept once made: minitf's step watchdog and gRPC's own
    threads of the cached channels to other processes' masters."""
    return {
        t
        for t in threading.enumerate()
        if t.name == "minitf-step-watchdog"
        or getattr(getattr(t, "_target", None), "__module__", "").startswith("grpc")
    }


def _async_worker(task, servers, last_step):
    """§18.1's asynchronous pattern: plain GD, every worker in its own graph and session."""
    graph = tf.Graph()
    with graph.as_default():
        with tf.device(_setter(task)):
            gs, w, loss = _model()
            train = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=gs)
        sess = tf.train.MonitoredTrainingSession(
            master=servers[1 + task].target,
            is_chief=(task == 0),
            hooks=[tf.train.StopAtStepHook(last_step=last_step)],
            config=tf.ConfigProto(device_filters=["/job:ps", "/job:worker/task:%d" % task]),
        )
    return graph, sess, train, w, gs


@pytest.mark.cluster
def test_async_between_graph_training_on_a_cluster():
    """§18.5's async case: the chief runs 30 steps; w, the global step, the update and the
    step's AssignAdd are on the ps; a worker that joins after step 30 still runs one step."""
    from minitf.distributed.local_cluster import free_port

    spec = {
        "ps": ["localhost:%d" % free_port()],
        "worker": ["localhost:%d" % free_port() for _ in range(2)],
    }
    servers = [
        tf.train.Server(spec, job_name=j, task_index=i) for j in spec for i in range(len(spec[j]))
    ]
    try:
        graph, sess, train, w, gs = _async_worker(0, servers, 30)
        md = tf.RunMetadata()
        with graph.as_default(), sess:
            sess.run(train, options=tf.RunOptions(trace_level=3), run_metadata=md)
            runs = 1
            while not sess.should_stop():
                sess.run(train)
                runs += 1
        assert runs == 30 and w.op.device == gs.op.device == PS
        where = {n.node_name: d.device for d in md.step_stats.dev_stats for n in d.node_stats}
        for name in ("GradientDescent/update_w/ApplyGradientDescent", "GradientDescent"):
            assert "/job:ps/replica:0/task:0" in where[name], name
        graph, sess, train, w, gs = _async_worker(1, servers, 30)
        with graph.as_default(), sess:
            late = 0
            while not sess.should_stop():
                sess.run(train)
                late += 1
        assert late == 1
    finally:
        for s in servers:
            s.stop()


# -- a spare replica: 2 of 3 gradients make a step, the third one is stale --------------------


def _spare_replica(task, target):
    """Replica ``task`` of three (``replicas_to_aggregate=2, total_num_replicas=3``) with its
    own graph and session, and a handle on w's accumulator, found by its shared name."""
    graph = tf.Graph()
    with graph.as_default():
        sync, train, gs, w = _sync_graph(2, 3, task=task)
        with tf.device(_setter(task)):
            accum = tf.ConditionalAccumulator(tf.float32, shape=(), shared_name="w:0/grad_accum")
        sess = tf.Session(target, graph=graph)
        sess.run(tf.local_variables_initializer())
        if task == 0:  # the chief first (the others find the model initialised)
            sess.run(tf.global_variables_initializer())
            sess.run(sync.chief_init_op)
        sess.run(sync.local_step_init_op)
    return dict(
        sess=sess,
        train=train,
        gs=gs,
        w=w,
        num=accum.num_accumulated(),
        sync_op=sync.get_chief_queue_runner().enqueue_ops[0],
        local=sync._local_step,
    )


@pytest.mark.cluster
def test_a_spare_replica_s_gradient_is_dropped_as_stale():
    """No initial tokens, no runner thread: replicas 0 and 1 push their gradients (each run
    then waits for a token), the chief's sync op is run by hand, then replica 2 pushes a
    gradient tagged with the step before: the accumulator drops it.  Every round: 2 accepted,
    1 dropped, w = 0.8 ** rounds."""
    from concurrent.futures import ThreadPoolExecutor

    from minitf.distributed.local_cluster import free_port

    spec = {
        "ps": ["127.0.0.1:%d" % free_port()],
        "worker": ["127.0.0.1:%d" % free_port() for _ in range(3)],
    }
    servers = [
        tf.train.Server(spec, job_name=j, task_index=i) for j in spec for i in range(len(spec[j]))
    ]
    replicas = []
    try:
        replicas = [_spare_replica(i, servers[1 + i].target) for i in range(3)]
        chief = replicas[0]
        counts = {"accepted": 0, "dropped": 0}
        with ThreadPoolExecutor(2) as pool:
            for step in range(3):
                waiting = []
                for i, r in enumerate(replicas[:2]):
                    waiting.append(pool.submit(r["sess"].run, r["train"], options=WITHIN))
                    assert wait_until(lambda i=i: chief["sess"].run(chief["num"]) == i + 1)
                    counts["accepted"] += 1
                chief["sess"].run(chief["sync_op"], options=WITHIN)
                assert [f.result(30) for f in waiting] == [step + 1, step + 1]
                late = replicas[2]
                assert late["sess"].run(late["local"]) == step  # tagged with the old step
                assert late["sess"].run(late["train"], options=WITHIN) == step + 1
                assert chief["sess"].run(chief["num"]) == 0
                counts["dropped"] += 1
        assert counts == {"accepted": 6, "dropped": 3}
        assert chief["sess"].run(chief["gs"]) == 3
        assert chief["sess"].run(chief["w"]) == pytest.approx(0.8**3, rel=1e-6)
    finally:
        for r in replicas:
            r["sess"].close()
        for s in servers:
            s.stop()
