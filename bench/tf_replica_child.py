"""TensorFlow's side of ``bench_parallel_training.py --tf``: one task's server or one replica.

Run by the interpreter of a throw-away venv with tensorflow-cpu (never a minitf dependency)::

    python tf_replica_child.py server CLUSTER_JSON JOB TASK
    python tf_replica_child.py client TARGET TASK WORKERS MODE MODEL STEPS BATCH LR

The server is a ``tf.train.Server`` with one intra-op thread (as the bench's minitf servers):
it prints ``ready`` and serves until its stdin closes.  The client is the replica that
``tests/data/dp_worker.py`` is for minitf, in TF1 graph mode: the same layers (dense
``hidden<k>`` and ``logits``, ReLU, softmax cross entropy) on the same rows of the same data
(``dp_data``), under ``replica_device_setter`` with 1 ps, in a ``MonitoredTrainingSession`` with
the same thread settings; ``sync`` wraps the optimizer in ``SyncReplicasOptimizer`` with no
initial tokens.  It prints ``ready`` once its session exists, waits for a line on stdin, runs
STEPS runs and prints one JSON line: the seconds of its runs after the first and how many
those were.
"""

import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "data"))

import tensorflow.compat.v1 as tf  # noqa: E402
from dp_data import HIDDEN, dataset, rows  # noqa: E402

tf.disable_eager_execution()


def serve(spec, job, task):
    config = tf.ConfigProto(intra_op_parallelism_threads=1)
    server = tf.train.Server(
        tf.train.ClusterSpec(json.loads(spec)), job_name=job, task_index=int(task), config=config
    )
    print("ready", server.target, flush=True)
    sys.stdin.read()  # the bench closes the pipe (or dies): the process ends with it


def _dense(h, n_out, name, seed):
    with tf.variable_scope(name):
        init = tf.glorot_uniform_initializer(seed=seed)
        w = tf.get_variable("kernel", [int(h.shape[1]), n_out], initializer=init)
        b = tf.get_variable("bias", [n_out], initializer=tf.zeros_initializer())
    return tf.nn.bias_add(tf.matmul(h, w), b)


def build(task, workers, mode, model, lr, n_in):
    setter = tf.train.replica_device_setter(ps_tasks=1, worker_device="/job:worker/task:%d" % task)
    with tf.device(setter):
        gs = tf.train.get_or_create_global_step()
        x = tf.placeholder(tf.float32, [None, n_in], name="x")
        y = tf.placeholder(tf.int64, [None], name="y")
        h = x
        for k, n in enumerate(HIDDEN[model]):
            h = tf.nn.relu(_dense(h, n, "hidden%d" % k, k + 1))
        logits = _dense(h, 10, "logits", 9)
        loss = tf.reduce_mean(
            tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits)
        )
        opt = tf.train.GradientDescentOptimizer(lr)
        if mode == "sync":
            opt = tf.train.SyncReplicasOptimizer(opt, workers, total_num_replicas=workers)
        train = opt.minimize(loss, global_step=gs)
    hooks = [opt.make_session_run_hook(task == 0, num_tokens=0)] if mode == "sync" else []
    return x, y, train, hooks


def replica(target, task, workers, mode, model, steps, batch, lr):
    task, workers, steps, batch, lr = int(task), int(workers), int(steps), int(batch), float(lr)
    (xs, ys), _ = dataset(model)
    x, y, train, hooks = build(task, workers, mode, model, lr, xs.shape[1])
    config = tf.ConfigProto(
        device_filters=["/job:ps", "/job:worker/task:%d" % task],
        intra_op_parallelism_threads=1,
        inter_op_parallelism_threads=1,
    )
    with tf.train.MonitoredTrainingSession(
        master=target,
        is_chief=task == 0,
        hooks=hooks,
        config=config,
        save_checkpoint_secs=None,
        save_summaries_steps=None,
        save_summaries_secs=None,
        log_step_count_steps=0,
    ) as sess:
        print("ready", flush=True)
        sys.stdin.readline()  # "go": every replica is ready
        options = tf.RunOptions(timeout_in_ms=60000)
        for k in range(steps):
            if k == 1:  # the first run sets things up
                start = time.perf_counter()
            picked = rows(k, task, workers, batch, len(xs))
            sess.run(train, {x: xs[picked], y: ys[picked]}, options=options)
        seconds = time.perf_counter() - start
    print(json.dumps({"seconds": seconds, "timed_runs": steps - 1}), flush=True)
    # a sync chief's queue runners may still wait on the other replica: no lingering at exit
    os._exit(0)


if __name__ == "__main__":
    role, rest = sys.argv[1], sys.argv[2:]
    serve(*rest) if role == "server" else replica(*rest)
