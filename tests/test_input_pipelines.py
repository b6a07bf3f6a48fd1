"""Input producers and batching (``tf.train.string_input_producer``, ``batch``, ...) with the
Coordinator and QueueRunner loop that runs them.

Book sections: "Reading the Training Data Directly from the Graph" and "Asynchronous
Communication Using TensorFlow Queues".  Expected names, texts and behaviours are TF 1.15's
(reference semantics part 2, §15.3-15.7).
"""

import re

import numpy as np
import pytest

import minitf as tf


def ops_of_graph():
    return [(o.name, o.type) for o in tf.get_default_graph().get_operations()]


def run_loop(sess, fetch):
    """The standard loop (§15.5): runners under a coordinator, fetch until OutOfRangeError;
    returns (values, the OutOfRangeError); joins the threads."""
    coord = tf.train.Coordinator()
    threads = tf.train.start_queue_runners(sess, coord)
    values = []
    try:
        while not coord.should_stop():
            values.append(sess.run(fetch))
    except tf.errors.OutOfRangeError as e:
        error = e
    finally:
        coord.request_stop()
    coord.join(threads)
    return values, error


# -- ops the pipelines use ---------------------------------------------------------------------


def test_count_up_to_range_and_random_shuffle():
    v = tf.Variable(tf.constant(0, dtype=tf.int64), name="v")
    c = v.count_up_to(2)
    c2 = tf.count_up_to(v, 3)
    r = tf.range(5)
    r2 = tf.range(1, 10, 3)
    sh = tf.random_shuffle(r, seed=5)
    assert c.op.type == "CountUpTo" and c.op.get_attr("limit") == 2 and c.dtype == tf.int64
    assert r.op.name == "range" and r.op.type == "Range" and r.shape.as_list() == [5]
    assert r2.shape.as_list() == [3] and sh.op.type == "RandomShuffle"
    with tf.Session() as s:
        s.run(v.initializer)
        assert [s.run(c), s.run(c)] == [0, 1]
        with pytest.raises(tf.errors.OutOfRangeError) as e:
            s.run(c)
        assert e.value.message.splitlines()[0] == "Reached limit of 2"
        assert s.run(c2) == 2 and s.run(v) == 3
        assert s.run(r).tolist() == [0, 1, 2, 3, 4] and s.run(r2).tolist() == [1, 4, 7]
        perms = [s.run(sh).tolist() for _ in range(3)]
        assert all(sorted(p) == [0, 1, 2, 3, 4] for p in perms)
    with tf.Session() as s:  # same seeds, same permutations
        assert [s.run(sh).tolist() for _ in range(3)] == perms


# -- producers ---------------------------------------------------------------------------------


def test_string_input_producer_graph():
    """§15.3's graph for string_input_producer([a, b], num_epochs=1, shuffle=False), its
    fullness summary last."""
    q = tf.train.string_input_producer(["a.csv", "b.csv"], num_epochs=1, shuffle=False)
    assert ops_of_graph() == [
        ("input_producer/Const", "Const"),
        ("input_producer/Size", "Const"),  # TF 1.15 folds a known size
        ("input_producer/Greater/y", "Const"),
        ("input_producer/Greater", "Greater"),
        ("input_producer/Assert/Const", "Const"),
        ("input_producer/Assert/Assert/data_0", "Const"),
        ("input_producer/Assert/Assert", "Assert"),
        ("input_producer/Identity", "Identity"),
        ("input_producer/limit_epochs/Const", "Const"),
        ("input_producer/limit_epochs/epochs", "VariableV2"),
        ("input_producer/limit_epochs/epochs/Assign", "Assign"),
        ("input_producer/limit_epochs/epochs/read", "Identity"),
        ("input_producer/limit_epochs/CountUpTo", "CountUpTo"),
        ("input_producer/limit_epochs", "Identity"),
        ("input_producer", "FIFOQueueV2"),
        ("input_producer/input_producer_EnqueueMany", "QueueEnqueueManyV2"),
        ("input_producer/input_producer_Close", "QueueCloseV2"),
        ("input_producer/input_producer_Close_1", "QueueCloseV2"),
        ("input_producer/input_producer_Size", "QueueSizeV2"),
        ("input_producer/Cast", "Cast"),
        ("input_producer/mul/y", "Const"),
        ("input_producer/mul", "Mul"),
        ("input_producer/fraction_of_32_full/tags", "Const"),
        ("input_producer/fraction_of_32_full", "ScalarSummary"),
    ]
    assert [t.name for t in tf.get_collection(tf.GraphKeys.SUMMARIES)] == [
        "input_producer/fraction_of_32_full:0"
    ]
    assert q.name == "input_producer" and q.dtypes == [tf.string]
    assert [v.op.name for v in tf.local_variables()] == ["input_producer/limit_epochs/epochs"]
    assert tf.global_variables() == []
    (runner,) = tf.get_default_graph().get_collection(tf.GraphKeys.QUEUE_RUNNERS)
    assert runner.queue is q and [op.name for op in runner.enqueue_ops] == [
        "input_producer/input_producer_EnqueueMany"
    ]


def test_the_standard_loop_ends_after_num_epochs(no_thread_left):
    q = tf.train.string_input_producer(["a", "b", "c"], num_epochs=2, shuffle=False)
    name = q.dequeue()
    with tf.Session() as s:
        assert s.run(q.size()) == 0  # nothing before the runners start
        s.run(tf.local_variables_initializer())
        values, error = run_loop(s, name)
    assert values == [b"a", b"b", b"c"] * 2
    assert re.fullmatch(
        r"FIFOQueue '_\d+_input_producer' is closed and has insufficient elements "
        r"\(requested 1, current size 0\)",
        error.message.splitlines()[0],
    )


def test_without_local_variables_initializer_join_reraises(no_thread_left):
    """§15.3/§24.13: the runner fails on the uninitialised counter, the main thread sees an
    OutOfRangeError (the queue was cancelled), and join re-raises the real error."""
    q = tf.train.string_input_producer(["a", "b"], num_epochs=1, shuffle=False)
    name = q.dequeue()
    with tf.Session() as s:
        coord = tf.train.Coordinator()
        threads = tf.train.start_queue_runners(s, coord)
        with pytest.raises(tf.errors.OutOfRangeError):
            s.run(name)
        with pytest.raises(tf.errors.FailedPreconditionError) as e:
            coord.join(threads)
    assert e.value.message.splitlines()[0] == (
        "Attempting to use uninitialized value input_producer/limit_epochs/epochs"
    )


def test_string_input_producer_asserts_it_has_filenames():
    names = tf.placeholder(tf.string, [None])
    q = tf.train.string_input_producer(names)
    (runner,) = tf.get_default_graph().get_collection(tf.GraphKeys.QUEUE_RUNNERS)
    with tf.Session() as s:
        with pytest.raises(tf.errors.InvalidArgumentError) as e:
            s.run(runner.enqueue_ops[0], {names: []})
        assert e.value.message.splitlines()[0] == (
            "assertion failed: [string_input_producer requires a non-null input tensor]"
        )
        s.run(runner.enqueue_ops[0], {names: [b"x.csv"]})
        assert s.run(q.dequeue()) == b"x.csv"


def test_assert_and_greater():
    x = tf.placeholder(tf.int32, [])
    check = tf.Assert(tf.greater(x, 2), ["x is", x])
    assert check.type == "Assert" and check.name == "Assert/Assert"
    assert tf.greater(1.5, 1.0).dtype == tf.bool
    a = tf.constant(2.0)
    assert tf.gradients(tf.cast(tf.greater(a, 1.0), tf.float32), a) == [None]
    assert tf.gradients(tf.cast(tf.range(a), tf.float32), a) == [None]
    with tf.Session() as s:
        s.run(check, {x: 3})
        with pytest.raises(tf.errors.InvalidArgumentError) as e:
            s.run(check, {x: 1})
        assert e.value.message.splitlines()[0] == "assertion failed: [x is] [1]"


def test_producer_argument_errors():
    cases = [
        (lambda: tf.train.string_input_producer([]),
         "string_input_producer requires a non-null input tensor"),
        (lambda: tf.train.string_input_producer(["a"], num_epochs=0),
         "num_epochs must be > 0 not 0."),
        (lambda: tf.train.input_producer(tf.placeholder(tf.float32, [None, None])),
         "Either `input_tensor` must have a fully defined shape or `element_shape` must be "
         "specified"),
        (lambda: tf.train.slice_input_producer([]),
         "Expected at least one tensor in slice_input_producer()."),
    ]  # fmt: skip
    for build, text in cases:
        with pytest.raises(ValueError) as e:
            build()
        assert str(e.value) == text


def test_range_input_producer_shuffles_each_epoch_reproducibly(no_thread_left):
    q = tf.train.range_input_producer(6, num_epochs=3, seed=4)
    i = q.dequeue()
    assert q.name == "input_producer" and q.dtypes == [tf.int32]
    runs = []
    for _ in range(2):
        with tf.Session() as s:
            s.run(tf.local_variables_initializer())
            values, _ = run_loop(s, i)
        runs.append(values)
    epochs = [sorted(runs[0][k : k + 6]) for k in range(0, 18, 6)]
    assert epochs == [list(range(6))] * 3
    assert runs[0] != sorted(runs[0]) and runs[0] == runs[1]


def test_slice_input_producer_keeps_the_slices_together(no_thread_left):
    images = np.arange(10.0).reshape(5, 2)
    labels = np.arange(5) * 10
    image, label = tf.train.slice_input_producer([images, labels], num_epochs=1, seed=1)
    assert image.shape.as_list() == [2] and label.shape.as_list() == []
    # the range's size is the first tensor's first dimension, tf.shape(t)[0] as in TF
    size = tf.get_default_graph().get_operation_by_name("input_producer/strided_slice")
    assert size.type == "StridedSlice" and size.inputs[0].op.name == "input_producer/Shape"
    with tf.Session() as s:
        s.run(tf.local_variables_initializer())
        values, _ = run_loop(s, [image, label])
    assert sorted(int(lab) for _, lab in values) == [0, 10, 20, 30, 40]
    for img, lab in values:
        np.testing.assert_array_equal(img, images[lab // 10])


# -- batching ----------------------------------------------------------------------------------


def test_batch_graph_and_return_types():
    """§15.7: a list of one tensor gives a Tensor named like the scope; two give a list."""
    x = tf.constant([1.0, 2.0], name="x")
    y = tf.constant(3, name="y")
    one = tf.train.batch([x], 4)
    two = tf.train.batch([x, y], 4)
    assert isinstance(one, tf.Tensor) and one.name == "batch:0" and one.shape.as_list() == [4, 2]
    assert [t.name for t in two] == ["batch_1:0", "batch_1:1"]
    assert one.op.type == "QueueDequeueManyV2"
    names = [n for n, _ in ops_of_graph()]
    for name in ("batch/fifo_queue", "batch/fifo_queue_enqueue", "batch/fifo_queue_Close",
                 "batch/fifo_queue_Close_1", "batch/n", "batch"):  # fmt: skip
        assert name in names
    smaller = tf.train.batch({"b": y, "a": x}, 2, allow_smaller_final_batch=True)
    assert sorted(smaller) == ["a", "b"] and smaller["a"].shape.as_list() == [None, 2]
    assert smaller["a"].op.type == "QueueDequeueUpToV2" and smaller["a"].name == "batch_2:0"
    single = tf.train.batch({"a": x}, 2)
    assert list(single) == ["a"] and single["a"].name == "batch_3:0"
    padded = tf.train.batch([tf.placeholder(tf.float32, [None])], 2, dynamic_pad=True)
    assert padded.shape.as_list() == [2, None]
    assert tf.get_default_graph().get_operation_by_name("batch_4/padding_fifo_queue")


def test_every_batching_function_lists_its_ops_in_tfs_order():
    """The whole graph of ``batch`` and ``shuffle_batch``, recorded from TF 2.21 compat.v1
    (the same functions as 1.15's): the bool ``Const`` TF makes of ``keep_input`` comes
    first, then the queue, its enqueue, runner ops, fullness summary, and the dequeue."""
    x = tf.constant([1.0, 2.0], name="x")
    tf.train.batch([x], 2)
    tf.train.shuffle_batch([x], 2, capacity=10, min_after_dequeue=4)
    assert ops_of_graph() == [
        ("x", "Const"),
        ("batch/Const", "Const"),
        ("batch/fifo_queue", "FIFOQueueV2"),
        ("batch/fifo_queue_enqueue", "QueueEnqueueV2"),
        ("batch/fifo_queue_Close", "QueueCloseV2"),
        ("batch/fifo_queue_Close_1", "QueueCloseV2"),
        ("batch/fifo_queue_Size", "QueueSizeV2"),
        ("batch/Cast", "Cast"),
        ("batch/mul/y", "Const"),
        ("batch/mul", "Mul"),
        ("batch/fraction_of_32_full/tags", "Const"),
        ("batch/fraction_of_32_full", "ScalarSummary"),
        ("batch/n", "Const"),
        ("batch", "QueueDequeueManyV2"),
        ("shuffle_batch/Const", "Const"),
        ("shuffle_batch/random_shuffle_queue", "RandomShuffleQueueV2"),
        ("shuffle_batch/random_shuffle_queue_enqueue", "QueueEnqueueV2"),
        ("shuffle_batch/random_shuffle_queue_Close", "QueueCloseV2"),
        ("shuffle_batch/random_shuffle_queue_Close_1", "QueueCloseV2"),
        ("shuffle_batch/random_shuffle_queue_Size", "QueueSizeV2"),
        ("shuffle_batch/sub/y", "Const"),
        ("shuffle_batch/sub", "Sub"),
        ("shuffle_batch/Maximum/x", "Const"),
        ("shuffle_batch/Maximum", "Maximum"),
        ("shuffle_batch/Cast", "Cast"),
        ("shuffle_batch/mul/y", "Const"),
        ("shuffle_batch/mul", "Mul"),
        ("shuffle_batch/fraction_over_4_of_6_full/tags", "Const"),
        ("shuffle_batch/fraction_over_4_of_6_full", "ScalarSummary"),
        ("shuffle_batch/n", "Const"),
        ("shuffle_batch", "QueueDequeueManyV2"),
    ]
    keep = tf.get_default_graph().get_operation_by_name("batch/Const")
    assert keep.outputs[0].dtype == tf.bool and keep.outputs[0].consumers() == []


def test_shuffle_batch_graph_and_checks():
    x = tf.constant([1.0, 2.0])
    y = tf.constant(3)
    out = tf.train.shuffle_batch([x, y], 3, capacity=10, min_after_dequeue=5, num_threads=2)
    assert [t.name for t in out] == ["shuffle_batch:0", "shuffle_batch:1"]
    (runner,) = tf.get_default_graph().get_collection(tf.GraphKeys.QUEUE_RUNNERS)
    assert runner.name == "shuffle_batch/random_shuffle_queue"
    assert runner.queue.queue_ref.op.type == "RandomShuffleQueueV2"
    assert len(runner.enqueue_ops) == 2 and runner.enqueue_ops[0] is runner.enqueue_ops[1]
    assert runner.enqueue_ops[0].name == "shuffle_batch/random_shuffle_queue_enqueue"
    with pytest.raises(ValueError) as e:
        tf.train.shuffle_batch([x], 2, capacity=5, min_after_dequeue=5)
    assert str(e.value) == "capacity 5 must be bigger than min_after_dequeue 5."
    with pytest.raises(ValueError) as e:
        tf.train.batch([tf.placeholder(tf.float32)], 2)
    assert str(e.value).startswith("Cannot infer Tensor's rank: ")
    with pytest.raises(ValueError) as e:
        tf.train.batch([tf.placeholder(tf.float32, [None])], 2)
    assert str(e.value) == "All shapes must be fully defined: [TensorShape([Dimension(None)])]"


def test_join_forms_make_one_enqueue_op_per_list():
    a, b = tf.constant([1.0]), tf.constant([2.0])
    out = tf.train.batch_join([[a], [b]], 2)
    sout = tf.train.shuffle_batch_join([[a], [b]], 2, capacity=4, min_after_dequeue=1)
    assert out.name == "batch_join:0" and sout.name == "shuffle_batch_join:0"
    runners = tf.get_default_graph().get_collection(tf.GraphKeys.QUEUE_RUNNERS)
    assert [op.name for op in runners[0].enqueue_ops] == [
        "batch_join/fifo_queue_enqueue",
        "batch_join/fifo_queue_enqueue_1",
    ]
    assert len(runners[1].enqueue_ops) == 2
    with pytest.raises(TypeError) as e:
        tf.train.batch_join([[a], [tf.constant([1])]], 2)
    assert str(e.value) == "Expected types to be consistent: float32 vs. int32."


def _numbers(num_epochs, **kw):
    """A producer of 0..4 (in order) for the batching functions."""
    q = tf.train.range_input_producer(5, num_epochs=num_epochs, shuffle=False, **kw)
    return q.dequeue()


def test_batch_drops_or_keeps_the_short_final_batch(no_thread_left):
    dropped = tf.train.batch([_numbers(1)], 2)
    kept = tf.train.batch([_numbers(1)], 2, allow_smaller_final_batch=True)
    results = []
    for fetch in (dropped, kept):
        with tf.Session() as s:
            s.run(tf.local_variables_initializer())
            values, error = run_loop(s, fetch)
        results.append([v.tolist() for v in values])
    assert results == [[[0, 1], [2, 3]], [[0, 1], [2, 3], [4]]]
    assert re.fullmatch(
        r"FIFOQueue '_\d+_batch_1/fifo_queue' is closed and has insufficient elements "
        r"\(requested 2, current size 0\)",
        error.message.splitlines()[0],
    )


def test_shuffle_batch_and_join_deliver_every_example_once(no_thread_left):
    batches = tf.train.shuffle_batch(
        [_numbers(2)], 3, capacity=6, min_after_dequeue=2, num_threads=2, seed=3,
        allow_smaller_final_batch=True,
    )  # fmt: skip
    joined = tf.train.shuffle_batch_join(
        [[_numbers(1)], [_numbers(1) + 10]], 4, capacity=8, min_after_dequeue=1,
        allow_smaller_final_batch=True,
    )  # fmt: skip
    with tf.Session() as s:
        s.run(tf.local_variables_initializer())
        values, _ = run_loop(s, batches)
    got = sorted(int(v) for b in values for v in b)
    assert got == sorted(list(range(5)) * 2)
    with tf.Session() as s:
        s.run(tf.local_variables_initializer())
        values, _ = run_loop(s, joined)
    assert sorted(int(v) for b in values for v in b) == [0, 1, 2, 3, 4, 10, 11, 12, 13, 14]


def test_dynamic_pad_and_enqueue_many(no_thread_left):
    rows = tf.placeholder(tf.int32, [None])
    padded = tf.train.batch([rows], 2, dynamic_pad=True, allow_smaller_final_batch=True)
    many = tf.train.batch([tf.constant([[1, 2], [3, 4], [5, 6]])], 2, enqueue_many=True)
    runners = tf.get_default_graph().get_collection(tf.GraphKeys.QUEUE_RUNNERS)
    assert runners[1].enqueue_ops[0].type == "QueueEnqueueManyV2"
    assert many.shape.as_list() == [2, 2]
    with tf.Session() as s:
        enqueue = runners[0].enqueue_ops[0]
        s.run(enqueue, {rows: [1, 2, 3]})
        s.run(enqueue, {rows: [4]})
        assert s.run(padded).tolist() == [[1, 2, 3], [4, 0, 0]]
        s.run(runners[1].enqueue_ops[0])
        assert s.run(many).tolist() == [[1, 2], [3, 4]]


# -- the queues' fullness summaries (§15.3, §15.4) ----------------------------------------------


def summary_values(sess):
    """{tag: value} of ``merge_all()`` run now."""
    merged = tf.summary.merge_all()
    return {v.tag: v.simple_value for v in tf.Summary.FromString(sess.run(merged)).value}


def fill(sess, n):
    """Runs the (only) queue runner's first enqueue op ``n`` times, without its threads."""
    (runner,) = tf.get_default_graph().get_collection(tf.GraphKeys.QUEUE_RUNNERS)
    for _ in range(n):
        sess.run(runner.enqueue_ops[0])


def test_batch_summary_is_size_over_capacity():
    tf.train.batch([tf.constant([1.0, 2.0])], 2, capacity=8)
    with tf.Session() as s:
        assert summary_values(s) == {"batch/fraction_of_8_full": 0.0}
        fill(s, 2)
        assert summary_values(s) == {"batch/fraction_of_8_full": 0.25}


def test_batch_join_summary_has_the_same_name():
    x = tf.constant(1.0)
    tf.train.batch_join([[x], [x]], 2, capacity=4, dynamic_pad=True)
    with tf.Session() as s:
        assert summary_values(s) == {"batch_join/fraction_of_4_full": 0.0}


def test_shuffle_batch_summary_counts_above_the_floor():
    """max(0, size - min_after_dequeue) / (capacity - min_after_dequeue): 0 below the floor."""
    x = tf.constant([1.0, 2.0])
    tf.train.shuffle_batch([x], 2, capacity=10, min_after_dequeue=4)
    tag = "shuffle_batch/fraction_over_4_of_6_full"
    with tf.Session() as s:
        fill(s, 3)
        assert summary_values(s) == {tag: 0.0}
        fill(s, 4)
        assert summary_values(s) == {tag: 0.5}


def test_shuffle_batch_join_summary_name():
    x = tf.constant(1.0)
    tf.train.shuffle_batch_join([[x], [x]], 2, capacity=12, min_after_dequeue=2, name="sj")
    assert [t.name for t in tf.get_collection(tf.GraphKeys.SUMMARIES)] == [
        "sj/fraction_over_2_of_10_full:0"
    ]


def test_producer_summaries():
    tf.train.string_input_producer(["a", "b", "c"], capacity=12, shuffle=False)
    tf.train.range_input_producer(5, capacity=10, shuffle=False)
    tf.train.input_producer(tf.constant([1, 2]), summary_name="mine")
    tf.train.input_producer(tf.constant([1, 2]))  # no summary_name, no summary
    names = [t.name for t in tf.get_collection(tf.GraphKeys.SUMMARIES)]
    assert names == [
        "input_producer/fraction_of_12_full:0",
        "input_producer_1/fraction_of_10_full:0",
        "input_producer_2/mine:0",
    ]
    (runner, *_) = tf.get_default_graph().get_collection(tf.GraphKeys.QUEUE_RUNNERS)
    with tf.Session() as s:
        s.run(runner.enqueue_ops[0])
        assert summary_values(s)["input_producer/fraction_of_12_full"] == 0.25
