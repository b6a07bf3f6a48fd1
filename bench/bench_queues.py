"""Queues and readers: items per second through a FIFOQueue, CSV lines per second.

Book sections: "Asynchronous Communication Using TensorFlow Queues" and "Loading Data Directly
from the Graph".  Run::

    python bench/bench_queues.py            # 3 rounds
    python bench/bench_queues.py --quick    # smoke run

1. A FIFOQueue of 128x784 float32 batches (a batch of MNIST-sized inputs): ``enqueue_many``
   then ``dequeue_many`` of 128 items, in one process (a local session), and across a
   LocalCluster (the queue on the ps task, a client session on the worker; the batches cross
   the wire twice).  Items per second, and the same in MB/s.
2. A CSV file read by ``TextLineReader`` + ``decode_csv`` (``read_up_to`` of 1000 lines, four
   float columns) against Python's own ``csv`` module parsing the same file in the same process:
   lines per second and the ratio.
3. The same file through the Data API: ``TextLineDataset`` batched by 1000 lines and mapped
   with ``decode_csv``, read by a one-shot iterator (no queue, no runner threads).
4. A ``map`` of a small function (``x * 2``) over 50,000 int64 scalars, batched by 1000:
   elements per second, what one call of a dataset's function costs.
5. ``prefetch``: the pipeline of 3. feeding a step that has work of its own (two 512x512
   products, in a session of one inter-op and one intra-op thread), with and without
   ``prefetch(1)``: batches per second and the ratio.  Behind a prefetch its own thread decodes
   the next batch while the step multiplies; without, the two take turns.
6. ``map(..., num_parallel_calls=n)``: the pipeline of 3. read alone with its ``decode_csv``
   mapped by one call per core at once, against 3.: lines per second and the ratio.  The gain
   is the part of the decoding that runs without Python's GIL.

Rounds alternate the sides; medians are printed.
"""

import argparse
import csv
import os
import statistics
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
os.environ.setdefault("MINITF_EMULATED_GPUS", "0")

import minitf as tf  # noqa: E402
from minitf.distributed import LocalCluster  # noqa: E402
from minitf.lib.cores import schedulable_cores  # noqa: E402

BATCH, WIDTH = 128, 784


def fifo_items_per_s(target, batches, pin=None):
    """Items/s of ``batches`` enqueue_many + dequeue_many pairs on a session at ``target``."""
    graph = tf.Graph()
    with graph.as_default(), tf.device(pin):
        x = tf.placeholder(tf.float32, [BATCH, WIDTH], name="x")
        q = tf.FIFOQueue(4 * BATCH, tf.float32, shapes=[WIDTH], name="q")
        enqueue = q.enqueue_many([x])
        dequeue = q.dequeue_many(BATCH)
    data = np.random.default_rng(0).random((BATCH, WIDTH), dtype=np.float32)
    with tf.Session(target, graph=graph) as sess:
        sess.run(enqueue, {x: data})
        sess.run(dequeue)  # plans made outside the timing
        start = time.perf_counter()
        for _ in range(batches):
            sess.run(enqueue, {x: data})
            out = sess.run(dequeue)
        elapsed = time.perf_counter() - start
    assert out.shape == (BATCH, WIDTH)
    return batches * BATCH / elapsed


def write_csv(path, lines):
    rng = np.random.default_rng(1)
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        for row in rng.random((lines, 4)).round(6):
            writer.writerow(row.tolist())


def minitf_csv_lines_per_s(path, lines):
    graph = tf.Graph()
    with graph.as_default():
        files = tf.train.string_input_producer([path], num_epochs=1, shuffle=False)
        reader = tf.TextLineReader()
        _, rows = reader.read_up_to(files, 1000)
        columns = tf.decode_csv(rows, record_defaults=[[0.0]] * 4)
        init = tf.local_variables_initializer()
    coord = tf.train.Coordinator()
    count = 0
    with tf.Session(graph=graph) as sess:
        sess.run(init)
        threads = tf.train.start_queue_runners(sess, coord)
        start = time.perf_counter()
        try:
            while True:
                count += len(sess.run(columns)[0])
        except tf.errors.OutOfRangeError:
            elapsed = time.perf_counter() - start
        coord.request_stop()
        coord.join(threads, stop_grace_period_secs=10)
    assert count == lines, (count, lines)
    return lines / elapsed


def _csv_batches(path, calls=None):
    """Figure 3's pipeline: the file's lines, 1000 a batch, decoded into four float columns
    (``calls`` batches at once with ``num_parallel_calls``: figure 6)."""
    rows = tf.data.TextLineDataset([path]).batch(1000)
    return rows.map(lambda r: tf.decode_csv(r, record_defaults=[[0.0]] * 4), calls)


def dataset_csv_lines_per_s(path, lines, calls=None):
    return _elements_per_s(
        lambda: _csv_batches(path, calls), lines, lambda columns: len(columns[0])
    )


def map_elements_per_s(n):
    def pipeline():
        return tf.data.Dataset.range(n).map(lambda x: x * 2).batch(1000)

    return _elements_per_s(pipeline, n, len)


def _elements_per_s(pipeline, n, size):
    """Elements per second read through a one-shot iterator over ``pipeline()`` (built in a
    graph of its own) to its end; ``size(batch)`` counts a batch's elements (``n`` in all)."""
    graph = tf.Graph()
    with graph.as_default():
        nxt = pipeline().make_one_shot_iterator().get_next()
    count = 0
    with tf.Session(graph=graph) as sess:
        start = time.perf_counter()
        try:
            while True:
                count += size(sess.run(nxt))
        except tf.errors.OutOfRangeError:
            elapsed = time.perf_counter() - start
    assert count == n, (count, n)
    return n / elapsed


def prefetch_batches_per_s(path, lines, prefetch):
    """Batches/s of figure 3's pipeline (``prefetch(1)`` at its end or not) feeding a step that
    also makes two 512x512 products, in a one-thread session, to the pipeline's end."""
    graph = tf.Graph()
    with graph.as_default():
        d = _csv_batches(path)
        columns = (d.prefetch(1) if prefetch else d).make_one_shot_iterator().get_next()
        # a variable, not a constant: a plan computes a product of constants once
        w = tf.Variable(np.random.default_rng(0).random((512, 512), dtype=np.float32) / 512)
        step = tf.reduce_sum(columns[0]) + tf.reduce_sum(tf.matmul(tf.matmul(w, w), w))
    # pools of its own: the process-wide ones are sized by the process's first session
    config = tf.ConfigProto(
        inter_op_parallelism_threads=1,
        intra_op_parallelism_threads=1,
        use_per_session_threads=True,
    )
    count = 0
    with tf.Session(graph=graph, config=config) as sess:
        sess.run(w.initializer)
        start = time.perf_counter()
        try:
            while True:
                sess.run(step)
                count += 1
        except tf.errors.OutOfRangeError:
            elapsed = time.perf_counter() - start
    assert count == -(-lines // 1000), count
    return count / elapsed


def python_csv_lines_per_s(path, lines):
    start = time.perf_counter()
    with open(path, newline="") as f:
        rows = [[float(v) for v in row] for row in csv.reader(f)]
    elapsed = time.perf_counter() - start
    assert len(rows) == lines
    return lines / elapsed


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="1 round, fewer batches and lines")
    args = parser.parse_args(argv)
    rounds = 1 if args.quick else args.rounds
    batches, lines = (20, 20_000) if args.quick else (200, 200_000)
    mb = BATCH * WIDTH * 4 / 1e6
    results = {"local": [], "cluster": [], "minitf csv": [], "dataset csv": [], "python csv": []}
    results["map"], results["plain"], results["prefetch"], results["parallel"] = [], [], [], []
    calls = schedulable_cores()
    with tempfile.TemporaryDirectory() as tmp, LocalCluster({"ps": 1, "worker": 1}) as cluster:
        path = os.path.join(tmp, "data.csv")
        write_csv(path, lines)
        for _ in range(rounds):
            results["local"].append(fifo_items_per_s("", batches))
            results["cluster"].append(
                fifo_items_per_s(cluster.target("worker", 0), batches, pin="/job:ps/task:0")
            )
            results["minitf csv"].append(minitf_csv_lines_per_s(path, lines))
            results["dataset csv"].append(dataset_csv_lines_per_s(path, lines))
            results["parallel"].append(dataset_csv_lines_per_s(path, lines, calls))
            results["map"].append(map_elements_per_s(lines // 4))
            results["python csv"].append(python_csv_lines_per_s(path, lines))
            for side in ("plain", "prefetch"):
                results[side].append(prefetch_batches_per_s(path, lines, side == "prefetch"))
    med = {k: statistics.median(v) for k, v in results.items()}
    print(
        "FIFOQueue, enqueue_many + dequeue_many of %dx%d float32, %d batches x %d rounds"
        % (BATCH, WIDTH, batches, rounds)
    )
    for side in ("local", "cluster"):
        label = "one process" if side == "local" else "queue on the ps, client on the worker"
        print("  %-40s %10.0f items/s  %8.1f MB/s" % (label, med[side], med[side] / BATCH * mb))
    print("CSV, %d lines of 4 floats" % lines)
    print("  TextLineReader + decode_csv (read_up_to 1000) %10.0f lines/s" % med["minitf csv"])
    print("  TextLineDataset.batch(1000).map(decode_csv)   %10.0f lines/s" % med["dataset csv"])
    print("  Python's csv module                           %10.0f lines/s" % med["python csv"])
    print(
        "  ratio to Python: reader %.2f, dataset %.2f"
        % (med["minitf csv"] / med["python csv"], med["dataset csv"] / med["python csv"])
    )
    print("Dataset.range(%d).map(lambda x: x * 2).batch(1000)" % (lines // 4))
    print("  %-46s %10.0f elements/s" % ("one-shot iterator", med["map"]))
    print("the CSV pipeline feeding a step of two 512x512 products (one-thread session)")
    for side in ("plain", "prefetch"):
        label = "with prefetch(1)" if side == "prefetch" else "without prefetch"
        print("  %-46s %10.1f batches/s" % (label, med[side]))
    _print_ratio(results["prefetch"], results["plain"])
    print("the CSV pipeline of 3., its decode_csv mapped with num_parallel_calls=%d" % calls)
    print("  %-46s %10.0f lines/s" % ("num_parallel_calls=%d" % calls, med["parallel"]))
    _print_ratio(results["parallel"], results["dataset csv"])
    return 0


def _print_ratio(ours, base):
    ratios = [a / b for a, b in zip(ours, base, strict=True)]
    print(
        "  ratio %.2f (per round %s)"
        % (statistics.median(ratios), ", ".join("%.2f" % r for r in ratios))
    )


if __name__ == "__main__":
    sys.exit(main())
