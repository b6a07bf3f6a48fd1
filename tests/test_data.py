"""``tf.data`` in graph mode, as TF 1.15 builds and runs it: the graphs (recorded from
tensorflow-cpu 1.15.0, tests/data/tf_data_graphs.txt), the values TF printed for the companion
notebook's Data API cells and for each transformation, shuffle orders seed for seed, iterators
and their errors."""

import importlib.util
import logging
import re
import threading
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import minitf as tf
from helpers import wait_until
from minitf.distributed import LocalCluster, wire
from minitf.distributed import protocol_pb2 as pb

DATA = Path(__file__).parent / "data"


def _values(next_element, sess=None, limit=100):
    """Every element an iterator gives until its end (at most ``limit``)."""
    sess = sess or tf.Session()
    out = []
    with pytest.raises(tf.errors.OutOfRangeError, match="End of sequence"):
        for _ in range(limit):
            out.append(sess.run(next_element))
    return out


def _flat(dataset, **kw):
    return [
        np.asarray(v).tolist() for v in _values(dataset.make_one_shot_iterator().get_next(), **kw)
    ]


def test_pipelines_build_tfs_graphs():
    spec = importlib.util.spec_from_file_location("tf_data_graphs", DATA / "make_tf_data_graphs.py")
    pipelines = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pipelines)
    recorded = (DATA / "tf_data_graphs.txt").read_text().splitlines()
    assert pipelines.listing(tf) == recorded


def test_the_companion_notebooks_cells_print_what_tf_printed(tmp_path):
    dataset = tf.data.Dataset.from_tensor_slices(np.arange(10)).repeat(3).batch(7)
    assert repr(dataset) == "<DatasetV1Adapter shapes: (?,), types: tf.int64>"
    next_element = dataset.make_one_shot_iterator().get_next()
    assert str(next_element) == 'Tensor("IteratorGetNext:0", shape=(?,), dtype=int64)'
    batches = [[0, 1, 2, 3, 4, 5, 6], [7, 8, 9, 0, 1, 2, 3], [4, 5, 6, 7, 8, 9, 0]]
    batches += [[1, 2, 3, 4, 5, 6, 7], [8, 9]]
    sess = tf.Session()
    assert [v.tolist() for v in _values(next_element, sess)] == batches
    with pytest.raises(tf.errors.OutOfRangeError) as e:  # and again after the end
        sess.run(next_element)
    assert e.value.message == "End of sequence\n\t [[{{node IteratorGetNext}}]]"
    assert e.value.op.name == "IteratorGetNext" and e.value.error_code == 11
    # a new session starts the one-shot iterator over; two fetches of it advance it once
    twice = _values([next_element, next_element], tf.Session())
    assert [[a.tolist(), b.tolist()] for a, b in twice] == [[b, b] for b in batches]

    mixed = dataset.interleave(
        lambda v: tf.data.Dataset.from_tensor_slices(v), cycle_length=3, block_length=2
    )
    order = "0,1,7,8,4,5,2,3,9,0,6,7,4,5,1,2,8,9,6,3,0,1,2,8,9,3,4,5,6,7"
    assert ",".join(str(v) for v in _flat(mixed)) == order

    csv = tmp_path / "my_test.csv"
    csv.write_text("x1, x2 , target\n1.,, 0\n4., 5. , 1\n7., 8. , 0\n")

    def decode_csv_line(line):
        x1, x2, y = tf.decode_csv(line, record_defaults=[[-1.0], [-1.0], [-1.0]])
        return tf.stack([x1, x2]), y

    lines = tf.data.TextLineDataset([str(csv)])
    assert repr(lines) == "<TextLineDatasetV1 shapes: (), types: tf.string>"
    rows = lines.skip(1).map(decode_csv_line)
    printed = [
        " ".join([str(x), str(y)]) for x, y in _values(rows.make_one_shot_iterator().get_next())
    ]
    assert printed == ["[ 1. -1.] 0.0", "[4. 5.] 1.0", "[7. 8.] 0.0"]


# -- shuffle: TF 1.15's orders, seed for seed ------------------------------------------------------


def _shuffled(graph_seed, *args, repeat=None, **kw):
    with tf.Graph().as_default():
        if graph_seed is not None:
            tf.set_random_seed(graph_seed)
        d = tf.data.Dataset.range(10).shuffle(4, *args, **kw)
        return _flat(d.repeat(repeat) if repeat else d)


def test_shuffle_gives_tfs_orders():
    assert _shuffled(None, 42) == [1, 4, 2, 3, 5, 0, 6, 8, 7, 9]
    assert _shuffled(1, 42) == [1, 3, 5, 2, 0, 6, 7, 8, 9, 4]
    assert _shuffled(1) == [1, 0, 3, 6, 5, 4, 8, 7, 2, 9]  # op seed: the graph's op count
    # a repeat right after the shuffle fuses with it (TF's default optimization)
    fused = [0, 1, 3, 4, 5, 2, 6, 9, 7, 8, 0, 2, 3, 1, 5, 8, 7, 9, 4, 6]
    assert _shuffled(None, 42, repeat=2) == fused
    assert _shuffled(1, 42, repeat=2) == [
        1,
        3,
        0,
        4,
        2,
        8,
        7,
        6,
        9,
        5,
        0,
        4,
        3,
        6,
        1,
        7,
        8,
        5,
        9,
        2,
    ]
    same = _shuffled(None, 42, repeat=2, reshuffle_each_iteration=False)
    assert same == fused[:10] * 2
    # without a seed each run differs, each epoch holds every element once
    a, b = _shuffled(None, repeat=2), _shuffled(None, repeat=2)
    assert sorted(a[:10]) == sorted(a[10:]) == list(range(10)) and a != b


def test_shuffle_reshuffles_each_epoch_of_a_later_repeat_and_restarts_with_its_initializer():
    tf.set_random_seed(1)
    d = tf.data.Dataset.range(6).shuffle(6, seed=3).map(lambda x: x + 0).repeat(3)
    epochs = np.reshape(_flat(d), (3, 6)).tolist()
    assert all(sorted(e) == list(range(6)) for e in epochs) and len({tuple(e) for e in epochs}) == 3
    it = tf.data.Dataset.range(10).shuffle(4, seed=42).make_initializable_iterator()
    sess = tf.Session()
    orders = []
    for _ in range(2):
        sess.run(it.initializer)
        orders.append([int(v) for v in _values(it.get_next(), sess)])
    assert orders[0] == orders[1] == [1, 3, 5, 2, 0, 6, 7, 8, 9, 4]


# -- what each transformation gives (TF 1.15's values) ------------------------------------------


def test_transformations_give_tfs_values():
    r = tf.data.Dataset.range
    assert _flat(r(5).take(3)) == [0, 1, 2] and _flat(r(5).take(-1)) == [0, 1, 2, 3, 4]
    assert _flat(r(5).take(0)) == [] and _flat(r(5).take(10)) == [0, 1, 2, 3, 4]
    assert _flat(r(5).skip(-1)) == [] and _flat(r(5).skip(2)) == [2, 3, 4]
    assert _flat(r(5).repeat().take(7)) == [0, 1, 2, 3, 4, 0, 1] and _flat(r(5).repeat(0)) == []
    assert _flat(r(2, 10, 3)) == [2, 5, 8] and _flat(r(10, 2, -3)) == [10, 7, 4]
    assert _flat(r(0)) == [] and _flat(r(3).prefetch(1)) == [0, 1, 2]
    assert _flat(r(3).flat_map(lambda x: tf.data.Dataset.from_tensors(x).repeat(x))) == [1, 2, 2]
    assert _flat(r(10).batch(4, drop_remainder=True)) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert _flat(r(5).map(lambda x: x * 2)) == [0, 2, 4, 6, 8]
    assert _flat(r(2).concatenate(r(3))) == [0, 1, 0, 1, 2]
    assert _flat(tf.data.Dataset.from_tensors([1, 2, 3])) == [[1, 2, 3]]
    assert _flat(tf.data.Dataset.from_tensor_slices(["a", "bc"])) == [b"a", b"bc"]
    # TF 1's Tensor == is identity: the predicate is Python's False, so nothing passes
    assert _flat(r(10).filter(lambda x: x % 2 == 0)) == []
    assert _flat(r(10).filter(lambda x: tf.equal(x % 2, 0))) == [0, 2, 4, 6, 8]


def test_elements_may_be_tuples_and_dicts():
    r = tf.data.Dataset.range
    pairs = r(5).map(lambda x: (x, x * 2)).make_one_shot_iterator().get_next()
    assert [tuple(int(v) for v in p) for p in _values(pairs)] == [(i, 2 * i) for i in range(5)]
    dicts = r(3).map(lambda x: {"a": x, "b": tf.cast(x, tf.float64) / 2})
    got = _values(dicts.make_one_shot_iterator().get_next())
    assert [(int(d["a"]), float(d["b"])) for d in got] == [(0, 0.0), (1, 0.5), (2, 1.0)]
    batched = tf.data.Dataset.from_tensor_slices((np.arange(5), np.arange(5) * 10.0)).batch(2)
    got = _values(batched.make_one_shot_iterator().get_next())
    assert [(a.tolist(), b.tolist()) for a, b in got] == [
        ([0, 1], [0.0, 10.0]),
        ([2, 3], [20.0, 30.0]),
        ([4], [40.0]),
    ]
    zipped = tf.data.Dataset.zip((r(3), r(10, 15))).map(lambda a, b: a + b)
    assert _flat(zipped) == [10, 12, 14]


def test_padded_batch_pads_as_tf_pads():
    d = tf.data.Dataset.range(5).map(lambda x: tf.fill([x], x)).padded_batch(2, [None])
    assert _flat(d) == [[[0], [1]], [[2, 2, 0], [3, 3, 3]], [[4, 4, 4, 4]]]
    pairs = tf.data.Dataset.range(3).map(lambda x: (tf.fill([x, 2], tf.cast(x, tf.float32)), x))
    pairs = pairs.padded_batch(
        2, ([4, None], []), padding_values=(-1.0, np.int64(7)), drop_remainder=True
    )
    assert (
        repr(pairs) == "<DatasetV1Adapter shapes: ((2, 4, ?), (2,)), types: (tf.float32, tf.int64)>"
    )
    ((x, y),) = _values(pairs.make_one_shot_iterator().get_next())
    want = np.full((2, 4, 2), -1.0, np.float32)
    want[1, 0] = 1.0
    np.testing.assert_array_equal(x, want)
    assert y.tolist() == [0, 1]
    with pytest.raises(ValueError, match=r"padded shape \(2, 3\) is not compatible .* \(\?,\)"):
        tf.data.Dataset.range(5).map(lambda x: tf.fill([x], x)).padded_batch(2, [2, 3])
    short = tf.data.Dataset.range(5).map(lambda x: tf.fill([x], x)).padded_batch(2, [2])
    nxt = short.make_one_shot_iterator().get_next()
    sess = tf.Session()
    assert sess.run(nxt).tolist() == [[0, 0], [1, 0]]
    with pytest.raises(tf.errors.InvalidArgumentError, match="pad to a smaller size"):
        sess.run(nxt)


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(0, 12),
    batch=st.integers(1, 5),
    drop=st.booleans(),
    count=st.integers(0, 3),
    skip=st.integers(-1, 6),
    take=st.integers(-1, 20),
)
def test_repeat_skip_take_batch_match_a_python_model(n, batch, drop, count, skip, take):
    with tf.Graph().as_default():
        d = tf.data.Dataset.range(n).repeat(count).skip(skip).take(take)
        got = _flat(d.batch(batch, drop_remainder=drop))
    items = list(range(n)) * count
    items = [] if skip < 0 else items[skip:]
    items = items if take < 0 else items[:take]
    want = [items[i : i + batch] for i in range(0, len(items), batch)]
    assert got == [w for w in want if len(w) == batch or not drop]


# -- element structures and printing --------------------------------------------------------------


def test_structures_types_shapes_and_classes():
    d = tf.data.Dataset.from_tensor_slices((np.zeros((4, 3), np.float32), np.arange(4)))
    assert repr(d) == "<DatasetV1Adapter shapes: ((3,), ()), types: (tf.float32, tf.int64)>"
    assert d.output_types == (tf.float32, tf.int64)
    assert [s.as_list() for s in d.output_shapes] == [[3], []]
    assert d.output_classes == (tf.Tensor, tf.Tensor)
    assert repr(d.batch(2)) == (
        "<DatasetV1Adapter shapes: ((?, 3), (?,)), types: (tf.float32, tf.int64)>"
    )
    assert repr(d.batch(7, drop_remainder=True).output_shapes[1]) == "TensorShape([Dimension(7)])"
    dd = tf.data.Dataset.from_tensor_slices({"a": [1, 2], "b": [[1.0, 2.0], [3.0, 4.0]]})
    assert repr(dd) == (
        "<DatasetV1Adapter shapes: {a: (), b: (2,)}, types: {a: tf.int32, b: tf.float32}>"
    )
    nxt = dd.make_one_shot_iterator().get_next()
    assert sorted(nxt) == ["a", "b"] and nxt["b"].name == "IteratorGetNext:1"
    with pytest.raises(RuntimeError, match="only supported inside of tf.function or when eager"):
        iter(d)


def test_get_next_names_and_the_warning_for_a_call_in_a_loop(caplog):
    it = tf.data.Dataset.range(10).make_one_shot_iterator()
    a, b = it.get_next(), it.get_next()
    assert (a.name, b.name) == ("IteratorGetNext:0", "IteratorGetNext_1:0")
    sess = tf.Session()
    assert [sess.run(a), sess.run(b), sess.run(a), sess.run(b)] == [0, 1, 2, 3]
    assert it.get_next(name="my_next").name == "my_next:0"
    assert it.string_handle().name == "IteratorToStringHandle:0"
    assert tf.get_collection("iterators") == [it._iterator_resource]
    with tf.name_scope("scope"):
        scoped = tf.data.Dataset.range(2).make_one_shot_iterator()
        assert scoped.get_next().name == "scope/IteratorGetNext:0"
    assert scoped._iterator_resource.op.name == "scope/OneShotIterator"
    with caplog.at_level(logging.WARNING, logger="minitf"):
        for _ in range(30):
            it.get_next()
    assert "An unusually high number of `Iterator.get_next()` calls" in caplog.text


# -- iterators ------------------------------------------------------------------------------------


def test_an_initializable_iterator_takes_fed_values_and_starts_over():
    x = tf.placeholder(tf.int64, [None])
    it = tf.data.Dataset.from_tensor_slices(x).map(lambda v: v * 10).make_initializable_iterator()
    nxt = it.get_next()
    sess = tf.Session()
    with pytest.raises(tf.errors.FailedPreconditionError) as e:
        sess.run(nxt)
    assert e.value.message.startswith(
        "GetNext() failed because the iterator has not been initialized. Ensure that you have "
        "run the initializer operation for this iterator before getting the next element."
    )
    sess.run(it.initializer, {x: [1, 2, 3]})
    assert sess.run(nxt) == 10
    sess.run(it.initializer, {x: [7, 8]})
    assert [int(v) for v in _values(nxt, sess)] == [70, 80]
    assert it.initializer.name == "MakeIterator"
    assert it.initializer.get_attr("_class") == [b"loc:@IteratorV2"]


def test_a_reinitializable_iterator_switches_datasets():
    train = tf.data.Dataset.range(10).filter(lambda v: tf.equal(v % 2, 0))
    valid = tf.data.Dataset.range(100, 103)
    it = tf.data.Iterator.from_structure(train.output_types, train.output_shapes)
    nxt = it.get_next()
    to_train, to_valid = it.make_initializer(train), it.make_initializer(valid)
    sess = tf.Session()
    sess.run(to_train)
    assert [sess.run(nxt) for _ in range(2)] == [0, 2]
    sess.run(to_valid)
    assert [int(v) for v in _values(nxt, sess)] == [100, 101, 102]
    with pytest.raises(TypeError, match="Expected output types"):
        it.make_initializer(tf.data.Dataset.from_tensors(1.0))
    with pytest.raises(ValueError, match="Iterator does not have an initializer."):
        train.make_one_shot_iterator().initializer


def test_a_one_shot_iterator_cannot_copy_a_placeholder_or_a_variable():
    p = tf.placeholder(tf.float32, [None])
    with pytest.raises(ValueError) as e:
        tf.data.Dataset.from_tensor_slices(p).make_one_shot_iterator()
    assert str(e.value).endswith(
        "(Original error: Cannot capture a placeholder (name:Placeholder, type:Placeholder) by "
        "value.)"
    )
    v = tf.Variable(3, name="v", dtype=tf.int64)
    with pytest.raises(ValueError) as e:
        tf.data.Dataset.range(3).map(lambda x: x + v).make_one_shot_iterator()
    assert str(e.value) == (
        "Failed to create a one-shot iterator for a dataset. `Dataset.make_one_shot_iterator()` "
        "does not support datasets that capture stateful objects, such as a `Variable` or "
        "`LookupTable`. In these cases, use `Dataset.make_initializable_iterator()`. (Original "
        "error: Cannot capture a stateful node (name:v, type:VariableV2) by value.)"
    )
    # an initializable iterator reads the variable when it starts
    it = tf.data.Dataset.range(3).map(lambda x: x + v).make_initializable_iterator()
    sess = tf.Session()
    sess.run([v.initializer])
    sess.run(it.initializer)
    assert [int(x) for x in _values(it.get_next(), sess)] == [3, 4, 5]


def test_a_map_function_captures_an_outside_tensor():
    c = tf.constant(10, tf.int64)
    d = tf.data.Dataset.range(5).map(lambda x: x + c)
    assert [t.name for t in d._variant_tensor.op.inputs] == ["RangeDataset:0", "Const:0"]
    assert d._variant_tensor.op.get_attr("Targuments") == [tf.int64]
    assert _flat(d) == [10, 11, 12, 13, 14]


# -- errors ---------------------------------------------------------------------------------------


def test_bad_pipelines_fail_with_tfs_errors():
    r = tf.data.Dataset.range
    with pytest.raises(ValueError, match="^Dimensions 3 and 4 are not compatible$"):
        tf.data.Dataset.from_tensor_slices((np.arange(3), np.arange(4)))
    with pytest.raises(ValueError, match=r"^Value Tensor\(.*\) has insufficient rank for batching"):
        tf.data.Dataset.from_tensor_slices(np.float32(3.0))
    with pytest.raises(TypeError, match=r"^Unsupported return value .* Dataset.map\(\): None\.$"):
        r(3).map(lambda x: None)
    with pytest.raises(TypeError, match="^`map_func` must return a `Dataset` object. Got <class"):
        r(3).interleave(lambda x: x * 2, cycle_length=2)
    with pytest.raises(ValueError) as e:
        r(3).filter(lambda x: x)
    assert str(e.value) == (
        "`predicate` return type must be convertible to a scalar boolean tensor. Was "
        "TensorSpec(shape=(), dtype=tf.int64, name=None)."
    )
    with pytest.raises(TypeError, match="Nested structures do not support Python lists"):
        tf.data.Dataset.zip([r(3), r(3)])
    with pytest.raises(TypeError, match="^Expected int64, got 'a' of type 'str' instead.$"):
        r(3).take("a")
    for bad, node in ((r(5).batch(0), "BatchDatasetV2"), (r(3).shuffle(0), "ShuffleDataset")):
        nxt = bad.make_one_shot_iterator().get_next()
        with pytest.raises(tf.errors.InvalidArgumentError) as e:
            tf.Session().run(nxt)
        assert e.value.message.endswith(
            " must be greater than zero.\n\t [[{{node %s}}]]\n\t [[%s]]"
            % (node, nxt.op.inputs[0].op.name)
        )
    x, y = tf.placeholder(tf.int32), tf.placeholder(tf.int32)
    it = tf.data.Dataset.from_tensor_slices((x, y)).make_initializable_iterator()
    with pytest.raises(tf.errors.InvalidArgumentError, match="same size in the 0th dimension"):
        tf.Session().run(it.initializer, {x: [1, 2], y: [1, 2, 3]})
    assert _flat(r(0).repeat()) == []  # an empty dataset repeated forever ends


def test_a_batch_that_cannot_be_made_fails_and_the_pass_goes_on():
    d = tf.data.Dataset.range(5).map(lambda x: tf.fill([x], x)).batch(2)
    nxt = d.make_one_shot_iterator().get_next()
    sess = tf.Session()
    for tensor, batch in (([1], [0]), ([3], [2])):
        with pytest.raises(tf.errors.InvalidArgumentError) as e:
            sess.run(nxt)
        assert e.value.message.startswith(
            "Cannot add tensor to the batch: number of elements does not match. Shapes are: "
            "[tensor]: %s, [batch]: %s" % (tensor, batch)
        )
    assert sess.run(nxt).tolist() == [[4, 4, 4, 4]]
    with pytest.raises(tf.errors.OutOfRangeError):
        sess.run(nxt)


def test_a_map_error_fails_one_element_and_the_pass_goes_on():
    def parse(line):
        return tf.decode_csv(line, [[0.0]])[0]

    d = tf.data.Dataset.from_tensor_slices(["1", "a", "3"]).map(parse)
    nxt = d.make_one_shot_iterator().get_next()
    sess = tf.Session()
    assert sess.run(nxt) == 1.0
    with pytest.raises(tf.errors.InvalidArgumentError) as e:
        sess.run(nxt)
    assert e.value.message.startswith("{{function_node __inference_Dataset_map_parse_")
    assert "Field 0 in record 0 is not a valid float: a" in e.value.message
    assert e.value.message.endswith("\n\t [[{{node DecodeCSV}}]]\n\t [[IteratorGetNext]]")
    assert sess.run(nxt) == 3.0
    with pytest.raises(tf.errors.OutOfRangeError):
        sess.run(nxt)


# -- prefetch: a thread of its own ---------------------------------------------------------------


def _outcomes(dataset, limit=20):
    """What each ``get_next`` gives up to the end: a value, or an error's class and message
    (function names' trace counters left out)."""
    nxt = dataset.make_one_shot_iterator().get_next()
    sess = tf.Session()
    out = []
    for _ in range(limit):
        try:
            out.append(np.asarray(sess.run(nxt)).tolist())
        except tf.errors.OutOfRangeError:
            return out
        except tf.errors.OpError as e:
            out.append("%s: %s" % (type(e).__name__, re.sub(r"_\d+", "_N", e.message)))
    raise AssertionError("no end after %d elements" % limit)


def _parse(line):
    return tf.decode_csv(line, [[0.0]])[0]


@pytest.mark.parametrize("size", [0, 1, 3, tf.data.experimental.AUTOTUNE])
def test_prefetch_gives_its_inputs_elements_and_errors_in_order(size):
    """Behind a prefetch the elements, the failed ones and the end come as its input gives
    them: a map that fails two lines of five, a generator that yields a wrong value."""
    pipelines = (
        lambda: tf.data.Dataset.from_tensor_slices(["1", "a", "3", "b", "5"]).map(_parse),
        lambda: tf.data.Dataset.from_generator(lambda: iter([1, "x", 3]), tf.int64),
    )
    for make in pipelines:
        with tf.Graph().as_default():  # each in its own graph: the same node names
            plain = _outcomes(make())
        with tf.Graph().as_default():
            assert _outcomes(make().prefetch(size)) == plain
        assert len(plain) in (3, 5) and all(isinstance(v, str) for v in plain[1::2])


def test_prefetch_runs_its_input_ahead_on_a_thread_of_its_own():
    """TF's prefetch: a thread of its own runs the input ahead of the consumer, from the first
    element asked for, until ``buffer_size`` elements wait (and one more is made, waiting for
    room); the consumer then takes them in order."""
    seen = []

    def record(x):
        seen.append(threading.current_thread().name)
        return x

    d = tf.data.Dataset.range(10).map(lambda x: tf.py_func(record, [x], tf.int64)).prefetch(2)
    nxt = d.make_one_shot_iterator().get_next()
    sess = tf.Session()
    assert sess.run(nxt) == 0
    # element 0 taken, 1 and 2 in the buffer, 3 made and waiting for room
    assert wait_until(lambda: len(seen) == 4, 10)
    assert set(seen) == {"prefetch"}
    assert [sess.run(nxt) for _ in range(9)] == list(range(1, 10))
    with pytest.raises(tf.errors.OutOfRangeError):
        sess.run(nxt)


def _prefetch_threads():
    return {t for t in threading.enumerate() if t.name == "prefetch"}


def test_a_prefetch_thread_starts_with_the_first_element_and_stops_when_its_pass_goes():
    """No thread before the first ``get_next``; running the initializer again (a new pass)
    stops the old pass's thread, and so does closing the session; the new pass reads from the
    start."""
    before = _prefetch_threads()
    it = tf.data.Dataset.range(100).prefetch(1).make_initializable_iterator()
    nxt = it.get_next()
    with tf.Session() as sess:
        sess.run(it.initializer)
        assert _prefetch_threads() == before
        assert sess.run(nxt) == 0
        (first,) = _prefetch_threads() - before
        sess.run(it.initializer)
        assert wait_until(lambda: not first.is_alive(), 10)
        assert [sess.run(nxt) for _ in range(3)] == [0, 1, 2]
        (second,) = _prefetch_threads() - before
    assert wait_until(lambda: not second.is_alive(), 10)


# -- map with num_parallel_calls: threads of its own ----------------------------------------------


@pytest.mark.parametrize("calls", [1, 3, tf.data.experimental.AUTOTUNE])
def test_a_parallel_map_gives_the_elements_and_errors_in_order(calls):
    """``num_parallel_calls`` changes when elements are mapped, not what comes out: the same
    values, failed lines and end as a plain map, from a map that fails and from an input that
    does."""
    pipelines = (
        lambda c: tf.data.Dataset.from_tensor_slices(["1", "a", "3", "b", "5"]).map(_parse, c),
        lambda c: tf.data.Dataset.from_generator(lambda: iter([1, "x", 3]), tf.int64).map(
            lambda x: x * 2, c
        ),
    )
    for make in pipelines:
        with tf.Graph().as_default():
            plain = _outcomes(make(None))
        with tf.Graph().as_default():
            assert _outcomes(make(calls)) == plain
        assert len(plain) in (3, 5) and all(isinstance(v, str) for v in plain[1::2])


def test_a_parallel_map_maps_that_many_elements_at_once_on_threads_of_its_own():
    """Each call waits at a barrier of three: the map only gets through if three calls run at
    the same time, which ``num_parallel_calls=3`` gives and a plain map cannot."""
    barrier, names = threading.Barrier(3, timeout=30), []

    def meet(x):
        names.append(threading.current_thread().name)
        barrier.wait()
        return x

    d = tf.data.Dataset.range(6).map(lambda x: tf.py_func(meet, [x], tf.int64), 3)
    nxt = d.make_one_shot_iterator().get_next()
    sess = tf.Session()
    assert [sess.run(nxt) for _ in range(6)] == list(range(6))
    assert names and set(names) == {"parallel_map"}
    with pytest.raises(tf.errors.OutOfRangeError):
        sess.run(nxt)


def _map_threads():
    return {t for t in threading.enumerate() if t.name == "parallel_map"}


def test_parallel_map_threads_start_with_the_first_element_and_stop_when_the_pass_goes():
    before = _map_threads()
    it = tf.data.Dataset.range(100).map(lambda x: x + 1, 2).make_initializable_iterator()
    nxt = it.get_next()
    with tf.Session() as sess:
        sess.run(it.initializer)
        assert _map_threads() == before
        assert sess.run(nxt) == 1
        first = _map_threads() - before
        assert len(first) == 2
        sess.run(it.initializer)
        assert wait_until(lambda: not any(t.is_alive() for t in first), 10)
        assert [sess.run(nxt) for _ in range(3)] == [1, 2, 3]
        second = _map_threads() - before
    assert wait_until(lambda: not any(t.is_alive() for t in second), 10)


def test_num_parallel_calls_must_be_positive_or_autotune():
    it = tf.data.Dataset.range(3).map(lambda x: x, 0).make_initializable_iterator()
    with tf.Session() as sess:
        with pytest.raises(tf.errors.InvalidArgumentError, match="must be greater than zero"):
            sess.run(it.initializer)


# -- interleave with num_parallel_calls: a reader thread per open dataset -------------------------


def _read_all(dataset):
    nxt = dataset.make_one_shot_iterator().get_next()
    with tf.Session() as sess:
        out = []
        try:
            while True:
                out.append(int(sess.run(nxt)))
        except tf.errors.OutOfRangeError:
            return out


@settings(max_examples=15, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 5), min_size=1, max_size=5),
    cycle=st.integers(1, 4),
    block=st.integers(1, 3),
    calls=st.sampled_from([1, 2, 4, tf.data.experimental.AUTOTUNE]),
)
def test_a_parallel_interleave_gives_the_plain_interleaves_order(sizes, cycle, block, calls):
    def run(num_parallel_calls):
        with tf.Graph().as_default():
            d = tf.data.Dataset.from_tensor_slices(np.array(sizes, np.int64)).interleave(
                lambda n: tf.data.Dataset.range(n * 10, n * 10 + n),
                cycle_length=cycle,
                block_length=block,
                num_parallel_calls=num_parallel_calls,
            )
            return _read_all(d)

    assert run(calls) == run(None)


def test_a_parallel_interleave_gives_failures_in_order():
    def make(calls):
        lines = tf.data.Dataset.from_tensor_slices(["1", "a", "3"])
        return lines.interleave(
            lambda line: tf.data.Dataset.from_tensors(line).repeat(2).map(_parse),
            cycle_length=2,
            num_parallel_calls=calls,
        )

    with tf.Graph().as_default():
        plain = _outcomes(make(None))
    with tf.Graph().as_default():
        assert _outcomes(make(2)) == plain
    assert len(plain) == 6 and all(isinstance(v, str) for v in plain[1:4:2])


def test_a_parallel_interleave_reads_its_open_datasets_at_once():
    """The first element of each of the three open datasets waits at a barrier of three: the
    interleave gets through only if their readers run at the same time."""
    barrier, names = threading.Barrier(3, timeout=30), []

    def meet(x):
        names.append(threading.current_thread().name)
        if x % 10 == 0:
            barrier.wait()
        return x

    d = tf.data.Dataset.range(3).interleave(
        lambda f: tf.data.Dataset.range(2).map(lambda y: tf.py_func(meet, [y + 10 * f], tf.int64)),
        cycle_length=3,
        num_parallel_calls=3,
    )
    assert _read_all(d) == [0, 10, 20, 1, 11, 21]
    assert set(names) == {"parallel_interleave"}


def _interleave_threads():
    return {t for t in threading.enumerate() if t.name == "parallel_interleave"}


def test_parallel_interleave_readers_stop_when_the_pass_goes():
    before = _interleave_threads()
    d = tf.data.Dataset.range(2).interleave(
        lambda f: tf.data.Dataset.range(100), cycle_length=2, num_parallel_calls=2
    )
    it = d.make_initializable_iterator()
    nxt = it.get_next()
    with tf.Session() as sess:
        sess.run(it.initializer)
        assert sess.run(nxt) == 0
        first = _interleave_threads() - before
        assert len(first) == 2
        sess.run(it.initializer)
        assert wait_until(lambda: not any(t.is_alive() for t in first), 10)
        assert [sess.run(nxt) for _ in range(4)] == [0, 0, 1, 1]
    bad = tf.data.Dataset.range(2).interleave(
        lambda f: tf.data.Dataset.range(3), cycle_length=2, num_parallel_calls=0
    )
    with tf.Session() as sess:
        with pytest.raises(tf.errors.InvalidArgumentError, match="must be greater than zero"):
            sess.run(bad.make_initializable_iterator().initializer)


# -- a pipeline that trains ------------------------------------------------------------------------


def test_a_model_trains_from_a_shuffled_batched_pipeline():
    rng = np.random.RandomState(0)
    xs = rng.rand(256, 3).astype(np.float32)
    ys = xs @ np.array([[1.0], [-2.0], [0.5]], np.float32) + 0.25
    tf.set_random_seed(4)
    x_in, y_in = tf.placeholder(tf.float32, [None, 3]), tf.placeholder(tf.float32, [None, 1])
    d = tf.data.Dataset.from_tensor_slices((x_in, y_in)).shuffle(64).batch(32).repeat()
    it = d.make_initializable_iterator()
    x, y = it.get_next()
    pred = tf.layers.dense(x, 1)
    loss = tf.reduce_mean(tf.square(pred - y))
    train = tf.train.GradientDescentOptimizer(0.5).minimize(loss)
    sess = tf.Session()
    sess.run([tf.global_variables_initializer(), it.initializer], {x_in: xs, y_in: ys})
    first = sess.run(loss)
    for _ in range(300):
        sess.run(train)
    assert sess.run(loss) < first / 100


# -- in a cluster: functions travel inside the attrs that name them ------------------------------


def test_a_function_crosses_the_wire_and_comes_back_runnable():
    c = tf.constant(10, tf.int64)
    d = (
        tf.data.Dataset.range(4)
        .map(lambda x: x * c)
        .interleave(lambda v: tf.data.Dataset.from_tensors(v).repeat(2), cycle_length=2)
    )
    it = d.make_one_shot_iterator()
    it.get_next()
    gdef = wire.graph_to_proto(tf.get_default_graph())
    received = tf.Graph()
    wire.import_graph_def(pb.GraphDef.FromString(gdef.SerializeToString()), received)
    factory = received.get_operation_by_name("OneShotIterator").get_attr("dataset_factory")
    mapped = received.get_operation_by_name("MapDataset").get_attr("f")
    assert mapped.name == d._variant_tensor.op.inputs[0].op.get_attr("f").name
    assert [t.name for t in mapped.inputs] == ["args_0:0"] and len(mapped.captures) == 1
    assert factory.outputs[0].dtype == tf.variant
    nxt = received.get_operation_by_name("IteratorGetNext").outputs[0]
    with tf.Session(graph=received) as sess:
        assert [int(v) for v in _values(nxt, sess)] == [0, 10, 0, 10, 20, 30, 20, 30]
    assert it._iterator_resource.op.get_attr("dataset_factory") is not factory


@pytest.mark.cluster
def test_a_worker_trains_from_its_pipeline_with_variables_on_the_ps():
    xs = np.random.RandomState(1).rand(64, 2).astype(np.float32)
    ys = xs @ np.array([[2.0], [-1.0]], np.float32)
    with LocalCluster({"ps": 1, "worker": 1}) as lc:
        with tf.device("/job:ps/task:0"):
            w = tf.Variable(tf.zeros([2, 1]), name="w")
            scale = tf.constant(1.0) * 1.0  # computed on the ps, captured by the map function
        with tf.device("/job:worker/task:0"):
            x_in = tf.placeholder(tf.float32, [None, 2])
            y_in = tf.placeholder(tf.float32, [None, 1])
            d = tf.data.Dataset.from_tensor_slices((x_in, y_in))
            d = d.map(lambda a, b: (a * scale, b)).shuffle(16, seed=1).batch(16).repeat()
            it = d.make_initializable_iterator()
            x, y = it.get_next()
            loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - y))
            train = tf.train.GradientDescentOptimizer(0.5).minimize(loss)
        with tf.Session(lc.target("worker", 0)) as sess:
            sess.run([w.initializer, it.initializer], {x_in: xs, y_in: ys})
            for _ in range(200):
                sess.run(train)
            np.testing.assert_allclose(sess.run(w), [[2.0], [-1.0]], atol=1e-2)
            one_shot = tf.data.Dataset.range(3).map(lambda v: v + 1).make_one_shot_iterator()
            with tf.device("/job:worker/task:0"):
                nxt = one_shot.get_next()
            assert [int(v) for v in _values(nxt, sess)] == [1, 2, 3]


@pytest.mark.cluster
def test_a_dataset_built_on_another_task_than_its_iterator_is_refused_clearly():
    with LocalCluster({"ps": 1, "worker": 1}) as lc:
        with tf.device("/job:ps/task:0"):
            d = tf.data.Dataset.range(3)
        with tf.device("/job:worker/task:0"):
            it = d.make_initializable_iterator()
        with tf.Session(lc.target("worker", 0)) as sess:
            with pytest.raises(tf.errors.InvalidArgumentError, match="A dataset cannot be sent"):
                sess.run(it.initializer)


def test_dataset_ops_have_cpu_kernels_only():
    with tf.device("/gpu:0"):
        nxt = tf.data.Dataset.range(3).make_one_shot_iterator().get_next()
    with pytest.raises(tf.errors.InvalidArgumentError, match="no supported kernel for GPU"):
        tf.Session().run(nxt)
    config = tf.ConfigProto(allow_soft_placement=True)
    assert [int(v) for v in _values(nxt, tf.Session(config=config))] == [0, 1, 2]


def _trained_from_a_pipeline(device):
    """Ten SGD steps of a linear model on ``device``, its batches from a pipeline (which runs
    on the CPU: its outputs cross to the card)."""
    xs = np.random.RandomState(2).rand(24, 2).astype(np.float32)
    ys = xs @ np.array([[2.0], [-1.0]], np.float32)
    with tf.Graph().as_default():
        x_in, y_in = tf.placeholder(tf.float32, [None, 2]), tf.placeholder(tf.float32, [None, 1])
        it = (
            tf.data.Dataset.from_tensor_slices((x_in, y_in))
            .batch(8)
            .repeat()
            .make_initializable_iterator()
        )
        x, y = it.get_next()
        with tf.device(device):
            w = tf.Variable(tf.zeros([2, 1]))
            loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - y))
            train = tf.train.GradientDescentOptimizer(0.5).minimize(loss)
        sess = tf.Session(config=tf.ConfigProto(allow_soft_placement=True))
        sess.run([w.initializer, it.initializer], {x_in: xs, y_in: ys})
        for _ in range(10):
            sess.run(train)
        return sess.run(w), sess


@pytest.mark.cudasim
@pytest.mark.usefixtures("cuda_kernels", "fast_thread_switching")
def test_a_pipeline_feeds_a_model_on_a_card():
    on_cpu, _ = _trained_from_a_pipeline("/cpu:0")
    on_gpu, sess = _trained_from_a_pipeline("/gpu:0")
    assert sess._impl.devices[1].backend.name == "cuda"
    np.testing.assert_allclose(on_gpu, on_cpu, rtol=1e-5)


def test_interleave_cycles_over_the_cores_by_default_and_may_name_its_parallel_calls():
    from minitf.lib.cores import schedulable_cores

    cores = schedulable_cores()
    d = tf.data.Dataset.range(4).interleave(lambda x: tf.data.Dataset.from_tensors(x).repeat(2))
    assert d._variant_tensor.op.inputs[1].op.get_attr("value") == -1  # AUTOTUNE, as TF
    want = [
        v
        for start in range(0, 4, cores)
        for _ in range(2)
        for v in range(start, min(4, start + cores))
    ]
    assert _flat(d) == want
    p = tf.data.Dataset.range(4).interleave(
        lambda x: tf.data.Dataset.from_tensors(x).repeat(2), cycle_length=2, num_parallel_calls=2
    )
    op = p._variant_tensor.op
    assert op.type == "ParallelInterleaveDatasetV2" and op.get_attr("sloppy") is False
    assert [t.op.name for t in op.inputs[1:]] == [
        "cycle_length_1",
        "block_length_1",
        "num_parallel_calls",
    ]
    assert _flat(p) == [0, 1, 0, 1, 2, 3, 2, 3]  # TF 1.15's order


def test_string_elements_come_back_as_tf_gives_them(tmp_path):
    path = tmp_path / "f.txt"
    path.write_text("h\nab\n")
    lines = tf.data.TextLineDataset([str(path)])
    assert _flat(lines) == [b"h", b"ab"]
    sess = tf.Session()
    assert sess.run(lines.make_one_shot_iterator().get_next()) == b"h"
    assert sess.run(lines.batch(2).make_one_shot_iterator().get_next()).tolist() == [b"h", b"ab"]
    assert sess.run(tf.data.Dataset.from_tensors("a").make_one_shot_iterator().get_next()) == b"a"
    padded = tf.data.Dataset.from_tensor_slices([["x", "y"], ["z", "w"]]).padded_batch(2, [3])
    assert _flat(padded) == [[[b"x", b"y", b""], [b"z", b"w", b""]]]


def test_making_an_iterator_logs_tfs_deprecation_once(caplog, monkeypatch):
    from minitf.lib import deprecation

    monkeypatch.setattr(deprecation, "warned", set())
    d = tf.data.Dataset.range(2)
    with caplog.at_level(logging.WARNING, logger="minitf"):
        d.make_one_shot_iterator()
        d.make_one_shot_iterator()
        d.make_initializable_iterator()
        tf.data.make_one_shot_iterator(d)  # the function is TF 1.15's way, not deprecated
    texts = [r.getMessage() for r in caplog.records]
    assert len(texts) == 2
    assert (
        "DatasetV1.make_one_shot_iterator (from tensorflow.python.data.ops.dataset_ops) is "
        in texts[0]
    )
    assert texts[1].endswith(
        "As a last resort, you can use `tf.compat.v1.data.make_initializable_iterator(dataset)`."
    )


def test_a_feedable_iterator_reads_the_iterator_its_handle_names():
    train = tf.data.Dataset.range(100).repeat()
    valid = tf.data.Dataset.range(1000, 1003)
    handle = tf.placeholder(tf.string, shape=[])
    it = tf.data.Iterator.from_string_handle(handle, train.output_types, train.output_shapes)
    nxt = it.get_next()
    assert [(op.name, op.type) for op in tf.get_default_graph().get_operations()][-3:] == [
        ("IteratorFromStringHandleV2", "IteratorFromStringHandleV2"),
        ("IteratorToStringHandle", "IteratorToStringHandle"),
        ("IteratorGetNext", "IteratorGetNext"),
    ]
    to_train, to_valid = train.make_one_shot_iterator(), valid.make_initializable_iterator()
    sess = tf.Session()
    th, vh = sess.run([to_train.string_handle(), to_valid.string_handle()])
    assert isinstance(th, bytes) and th != vh
    assert [sess.run(nxt, {handle: th}) for _ in range(3)] == [0, 1, 2]
    sess.run(to_valid.initializer)
    assert [sess.run(nxt, {handle: vh}) for _ in range(2)] == [1000, 1001]
    assert sess.run(nxt, {handle: th}) == 3  # the training iterator went on where it was
    with pytest.raises(tf.errors.InvalidArgumentError, match="Could not parse string_handle"):
        sess.run(nxt, {handle: b"garbage"})
    with pytest.raises(ValueError, match="Iterator does not have an initializer."):
        it.initializer


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from([b"a", b"", b"\r", b"b\r", b"\n", b"\r\n", b"c d"]), max_size=8))
def test_text_line_dataset_reads_the_lines_a_text_line_reader_reads(tmp_path_factory, parts):
    from minitf.kernels.reader_kernels import _TextLines

    path = tmp_path_factory.mktemp("lines") / "f.txt"
    path.write_bytes(b"".join(parts))
    reader, want = _TextLines(str(path), 0), []
    while True:
        record, at_end = reader.next()
        if record is None:
            break
        want.append(record[1])
    with tf.Graph().as_default():
        assert _flat(tf.data.TextLineDataset([str(path)])) == want


def test_from_generator_builds_tfs_graph_and_converts_what_the_generator_yields():
    def gen():
        for i in range(3):
            yield i, [1.0] * i

    d = tf.data.Dataset.from_generator(
        gen, (tf.int64, tf.float32), (tf.TensorShape([]), tf.TensorShape([None]))
    )
    assert repr(d) == "<DatasetV1Adapter shapes: ((), (?,)), types: (tf.int64, tf.float32)>"
    assert [(op.name, op.type) for op in tf.get_default_graph().get_operations()] == [
        ("normalize_element/component_0", "Const"),
        ("TensorDataset", "TensorDataset"),
        ("FlatMapDataset", "FlatMapDataset"),
    ]
    nxt = d.make_one_shot_iterator().get_next()
    got = _values(nxt)
    assert [(int(i), v.tolist()) for i, v in got] == [(0, []), (1, [1.0]), (2, [1.0, 1.0])]
    assert got[2][1].dtype == np.float32
    # each pass calls the generator afresh; args are handed to it
    twice = tf.data.Dataset.from_generator(lambda k: iter(range(k)), tf.int64, args=(2,))
    assert _flat(twice.repeat(2)) == [0, 1, 0, 1]
    assert _flat(tf.data.Dataset.from_generator(lambda: iter([(1, 2)]), tf.int64)) == [[1, 2]]


def test_from_generator_fails_an_element_that_does_not_fit_and_goes_on():
    cases = [
        (
            lambda: iter(["a", 5]),
            tf.int64,
            None,
            "TypeError: `generator` yielded an element that "
            "could not be converted to the expected type. The expected type was int64, but the "
            "yielded element was a.",
            5,
        ),
        (
            lambda: iter([[1, 2, 3], [4, 5]]),
            tf.int64,
            tf.TensorShape([2]),
            "ValueError: "
            "`generator` yielded an element of shape (3,) where an element of shape (2,) was "
            "expected.",
            [4, 5],
        ),
        (
            lambda: iter([5, (6, 7)]),
            (tf.int64, tf.int64),
            None,
            "TypeError: `generator` yielded "
            "an element that did not match the expected structure. The expected structure was "
            "(tf.int64, tf.int64), but the yielded element was 5.",
            [6, 7],
        ),
    ]
    for gen, types, shapes, text, then in cases:
        nxt = tf.data.Dataset.from_generator(gen, types, shapes).make_one_shot_iterator().get_next()
        sess = tf.Session()
        with pytest.raises(tf.errors.InvalidArgumentError) as e:
            sess.run(nxt)
        assert e.value.message.startswith(text)
        assert np.asarray(sess.run(nxt)).tolist() == then
    with pytest.raises(TypeError, match="`generator` must be callable."):
        tf.data.Dataset.from_generator(3, tf.int64)


def test_shard_cache_and_unbatch_build_and_give_what_tf_does():
    r = tf.data.Dataset.range
    sharded = r(10).shard(3, 1)
    assert [t.op.name for t in sharded._variant_tensor.op.inputs[1:]] == ["num_shards", "index"]
    assert _flat(sharded) == [1, 4, 7]
    for args, text in (
        ((0, 0), "Number of shards must be greater than zero (currently num_shards = 0)."),
        ((3, 3), "Index must be between 0 and 2 (currently index = 3)."),
        ((3, -1), "Index must be between 0 and 2 (currently index = -1)."),
    ):
        nxt = r(3).shard(*args).make_one_shot_iterator().get_next()
        with pytest.raises(tf.errors.InvalidArgumentError) as e:
            tf.Session().run(nxt)
        assert e.value.message.startswith(text)
    # the second epoch replays the first instead of drawing new numbers
    drawn = _flat(r(3).map(lambda x: tf.random_uniform([])).cache().repeat(2))
    assert drawn[:3] == drawn[3:] and len(set(drawn[:3])) == 3
    pairs = tf.data.Dataset.from_tensor_slices(([[1, 2], [3, 4]], [[5, 6], [7, 8]])).unbatch()
    assert repr(pairs) == "<_UnbatchDataset shapes: ((), ()), types: (tf.int32, tf.int32)>"
    assert [op.type for op in tf.get_default_graph().get_operations()][-2:] == [
        "MapDataset",
        "UnbatchDataset",
    ]
    assert _flat(pairs) == [[1, 5], [2, 6], [3, 7], [4, 8]]
    flat = tf.data.Dataset.from_tensor_slices([[1, 2], [3, 4]]).apply(
        tf.data.experimental.unbatch()
    )
    assert _flat(flat) == [1, 2, 3, 4]
    with pytest.raises(ValueError) as e:
        tf.data.Dataset.from_tensors(5).unbatch()
    assert str(e.value) == (
        'Value Tensor("args_0:0", shape=(), dtype=int32) has insufficient rank for batching.'
    )


def test_a_monitored_session_stops_when_its_pipeline_ends(tmp_path):
    xs = np.random.RandomState(0).rand(40, 2).astype(np.float32)
    ys = xs @ np.array([[1.0], [2.0]], np.float32)
    d = tf.data.Dataset.from_tensor_slices((xs, ys)).batch(10).repeat(3)
    x, y = d.make_one_shot_iterator().get_next()
    w = tf.Variable(tf.zeros([2, 1]))
    loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - y))
    step = tf.train.get_or_create_global_step()
    train = tf.train.GradientDescentOptimizer(0.5).minimize(loss, global_step=step)
    runs = 0
    with tf.train.MonitoredTrainingSession(checkpoint_dir=str(tmp_path)) as sess:
        while not sess.should_stop():
            sess.run(train)
            runs += 1
    assert runs == 12  # 4 batches a pass, 3 passes, then OutOfRangeError ends it
    assert tf.train.latest_checkpoint(str(tmp_path)).endswith("model.ckpt-12")
