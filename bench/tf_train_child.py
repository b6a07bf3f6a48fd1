"""bench_train.py's model in TensorFlow's TF1 graph mode: run by ``bench_train.py --tf PATH``
under that interpreter (a throw-away venv with tensorflow-cpu; never a minitf dependency).

Book section: "Training".  Builds the MLP of ``train_model.py`` from the same weights with
``tf.compat.v1`` (``train_model.build``, as minitf's side does), trains it with
``GradientDescentOptimizer(LR).minimize`` in a session of ``inter_op_parallelism_threads =
intra_op_parallelism_threads = THREADS`` (0: TF's defaults) and Grappler as TF runs it by
default, and times it with minitf's loop (``train_model.time_steps``: warm-up, the weights
reset, STEPS timed steps); prints one JSON line: TF's version, steps/s and the last loss.
Usage: ``python tf_train_child.py THREADS STEPS WARMUP``.
"""

import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import tensorflow.compat.v1 as tf  # noqa: E402
from train_model import build, make_data, make_weights, time_steps  # noqa: E402


def main(threads, steps, warmup):
    tf.disable_eager_execution()
    graph = tf.Graph()
    with graph.as_default():
        model = build(tf, make_weights())
    config = tf.ConfigProto(
        inter_op_parallelism_threads=threads, intra_op_parallelism_threads=threads
    )
    with tf.Session(graph=graph, config=config) as sess:
        sess.run(model[-1])
        rate, loss = time_steps(sess, model, make_data(), steps, warmup)
    print(json.dumps({"version": tf.__version__, "rate": rate, "loss": loss}))


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:4]))
