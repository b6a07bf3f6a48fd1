"""Summaries and event files: ``tf.summary`` ops and kernels, ``FileWriter``, reading events back
(reference §21; §20.2 for the pre-1.0 names).  Event files are read with TensorBoard's own
reader and accumulator."""

import os
import re
import socket
import warnings

import pytest
from tensorboard.backend.event_processing import event_accumulator
from tensorboard.backend.event_processing.event_file_loader import (
    EventFileLoader,
    LegacyEventFileLoader,
)
from tensorboard.compat.proto import summary_pb2 as tb_summary_pb2

import minitf as tf
from minitf.summary import writer as writer_mod

# -- ops: names, tags, collections ------------------------------------------------------------


def _conformance_graph():
    tf.summary.scalar("loss", 1.5)
    tf.summary.scalar("loss", 3.0)
    with tf.name_scope("scope"):
        tf.summary.scalar("acc", 1.5)
    return tf.summary.merge_all()


def test_scalar_names_tags_and_collection():
    merged = _conformance_graph()
    summaries = tf.get_collection(tf.GraphKeys.SUMMARIES)
    assert tf.GraphKeys.SUMMARIES == "summaries"
    assert [t.name for t in summaries] == ["loss:0", "loss_1:0", "scope/acc:0"]
    assert {t.op.type for t in summaries} == {"ScalarSummary"}
    assert [i.name for i in summaries[0].op.inputs] == ["loss/tags:0", "loss/values:0"]
    assert summaries[0].dtype == tf.string and summaries[0].shape.ndims == 0
    assert merged.name == "Merge/MergeSummary:0"
    assert merged.op.type == "MergeSummary"
    assert merged.op.get_attr("N") == 3
    values = tf.Summary.FromString(tf.Session().run(merged)).value
    assert [(v.tag, v.simple_value) for v in values] == [
        ("loss", 1.5),
        ("loss_1", 3.0),
        ("scope/acc", 1.5),
    ]


def test_merge_all_with_no_summaries_is_none():
    assert tf.summary.merge_all() is None
    assert tf.merge_all_summaries() is None  # the legacy alias seed 003 calls


def test_merge_names_collections_and_scope_filter():
    a = tf.summary.scalar("a", 1.0, collections=["mine"])
    b = tf.summary.scalar("b", 2.0, collections=[])
    assert tf.get_collection(tf.GraphKeys.SUMMARIES) == []
    assert tf.get_collection("mine") == [a]
    named = tf.summary.merge([a, b], collections=["merged"], name="foo")
    assert named.name == "foo/foo:0"
    assert tf.get_collection("merged") == [named]
    with tf.name_scope("s"):
        c = tf.summary.scalar("c", 3.0)
    tf.summary.scalar("d", 4.0)
    only_s = tf.summary.merge_all(scope="s")
    assert [t.name for t in only_s.op.inputs] == [c.name]
    with pytest.raises(ValueError, match="length 0 shorter than minimum length 1"):
        tf.summary.merge([])


def test_family_and_cleaned_names():
    assert tf.summary.scalar("my loss:", 1.0).name == "my_loss_:0"
    t = tf.summary.scalar("/lead", 1.0, family="fam")
    assert t.name == "fam/lead:0"
    assert tf.Summary.FromString(tf.Session().run(t)).value[0].tag == "fam/fam/lead"


def test_values_must_be_real_numbers():
    with pytest.raises(TypeError, match="has DataType string not in list of allowed values"):
        tf.summary.scalar("x", tf.constant("s"))


def test_legacy_names():
    s = tf.scalar_summary("my/tag", 2.0)
    h = tf.histogram_summary("hist", [1.0])
    assert (s.name, s.op.type) == ("ScalarSummary:0", "ScalarSummary")
    assert (h.name, h.op.type) == ("HistogramSummary:0", "HistogramSummary")
    merged = tf.merge_all_summaries()
    assert merged.name == "MergeSummary/MergeSummary:0"
    assert tf.merge_summary([s], name="m").name == "m/m:0"
    tags = [v.tag for v in tf.Summary.FromString(tf.Session().run(merged)).value]
    assert tags == ["my/tag", "hist"]  # given tags, not op names
    assert tf.train.SummaryWriter is tf.summary.FileWriter


# -- kernels ----------------------------------------------------------------------------------


def test_histogram_as_tf_writes_it():
    # the values and the encoded buckets TF 2.21 gave for the same input
    t = tf.summary.histogram("hh", tf.constant([0.0, 1.0, -2.5, 1e-13, 3.0, 3.0]))
    assert t.op.type == "HistogramSummary" and t.op.inputs[0].name == "hh/tag:0"
    h = tf.Summary.FromString(tf.Session().run(t)).value[0].histo
    assert (h.min, h.max, h.num, h.sum, h.sum_squares) == (-2.5, 3.0, 6, 4.5000000000000995, 25.25)
    assert list(h.bucket_limit) == [
        -2.6170109961884593,
        -2.3791009056258718,
        0.0,
        1e-12,
        0.917246389039776,
        1.0089710279437536,
        2.8787120958073054,
        3.1665833053880363,
        1.7976931348623157e308,
    ]
    assert list(h.bucket) == [0, 1, 0, 2, 0, 1, 0, 2, 0]


def test_empty_histogram():
    h = tf.Summary.FromString(tf.Session().run(tf.summary.histogram("e", tf.zeros([0])))).value[0]
    dbl_max = 1.7976931348623157e308
    assert (h.histo.min, h.histo.max, h.histo.num) == (dbl_max, -dbl_max, 0)
    assert list(h.histo.bucket_limit) == [dbl_max] and list(h.histo.bucket) == [0]


@pytest.mark.parametrize(
    "make, text",
    [
        (lambda: tf.summary.histogram("n", [1.0, float("nan")]), "Nan in summary histogram for: n"),
        (lambda: tf.summary.histogram("i", [float("inf")]), "Infinity in summary histogram for: i"),
        (lambda: tf.histogram_summary(["a", "b"], [1.0]), "tags must be scalar"),
        (
            lambda: tf.scalar_summary(["a", "b"], 1.0, name="bad"),
            re.escape("tags and values not the same shape: [2] != []"),
        ),
        (
            lambda: tf.scalar_summary("a", [1.0, 2.0]),
            re.escape("tags and values not the same shape: [] != [2] (tag 'a')"),
        ),
        (
            lambda: tf.summary.merge([tf.summary.scalar("l", 1.0)] * 2),
            "Duplicate tag l found in summary inputs",
        ),
        (lambda: tf.summary.merge([tf.constant("junk")]), "Could not parse one of the summary"),
    ],
)
def test_kernel_errors(make, text):
    t = make()
    with pytest.raises(tf.errors.InvalidArgumentError, match=text):
        tf.Session().run(t)


def test_scalar_summary_of_a_vector_of_tags():
    t = tf.scalar_summary(["a", "b"], [1, 2])
    values = tf.Summary.FromString(tf.Session().run(t)).value
    assert [(v.tag, v.simple_value) for v in values] == [("a", 1.0), ("b", 2.0)]


# -- FileWriter and event files ----------------------------------------------------------------


def _events(logdir):
    """The events of the one file in ``logdir``, as TensorBoard's reader parses them (the
    legacy loader: the events as written, before TensorBoard's own migrations)."""
    (name,) = os.listdir(logdir)
    return list(LegacyEventFileLoader(os.path.join(logdir, name)).Load())


def test_conformance_events_in_order(tmp_path):
    merged = _conformance_graph()
    logdir = tmp_path / "events_dir"
    w = tf.summary.FileWriter(str(logdir), tf.get_default_graph())
    w.add_summary(tf.Session().run(merged), global_step=3)
    w.close()
    (name,) = os.listdir(logdir)
    assert re.fullmatch(
        r"events\.out\.tfevents\.\d{10}\.%s" % re.escape(socket.gethostname()), name
    )
    events = _events(logdir)
    kinds = [(e.step, e.WhichOneof("what")) for e in events]
    assert kinds == [(0, "file_version"), (0, "graph_def"), (0, "meta_graph_def"), (3, "summary")]
    assert events[0].file_version == "brain.Event:2"
    assert events[0].wall_time == int(name.split(".")[3])
    values = [(v.tag, v.simple_value) for v in events[3].summary.value]
    assert values == [("loss", 1.5), ("loss_1", 3.0), ("scope/acc", 1.5)]
    assert [e.step for e in tf.train.summary_iterator(str(logdir / name))] == [0, 0, 0, 3]
    # TensorBoard's current loader migrates scalars to tensors and the graph to a summary
    migrated = list(EventFileLoader(str(logdir / name)).Load())
    tags = [v.tag for e in migrated if e.step == 3 for v in e.summary.value]
    assert tags == ["loss", "loss_1", "scope/acc"]


def test_event_accumulator_reads_scalars_histograms_and_graph(tmp_path):
    x = tf.placeholder(tf.float32, [], name="x")
    tf.summary.scalar("loss", x)
    tf.summary.histogram("w", tf.constant([0.0, 1.0, 3.0]))
    merged = tf.summary.merge_all()
    sess = tf.Session()
    with tf.summary.FileWriter(str(tmp_path), sess.graph, filename_suffix=".chief") as w:
        for step in range(3):
            w.add_summary(sess.run(merged, {x: step * 0.5}), step)
    assert os.listdir(tmp_path)[0].endswith(".chief")
    acc = event_accumulator.EventAccumulator(
        str(tmp_path), size_guidance={event_accumulator.SCALARS: 0}
    )
    acc.Reload()
    assert acc.Tags()["scalars"] == ["loss"] and acc.Tags()["histograms"] == ["w"]
    assert [(s.step, s.value) for s in acc.Scalars("loss")] == [(0, 0.0), (1, 0.5), (2, 1.0)]
    histo = acc.Histograms("w")[-1].histogram_value
    assert (histo.min, histo.max, histo.num, histo.sum) == (0.0, 3.0, 3.0, 4.0)
    assert {n.name for n in acc.Graph().node} >= {"x", "loss", "w", "Merge/MergeSummary"}
    assert acc.MetaGraph().meta_info_def.tensorflow_version == "1.15.5"


def test_add_graph_session_log_event_and_summary_forms(tmp_path):
    g = tf.Graph()
    with g.as_default():
        tf.constant(1.0, name="c")
    w = tf.summary.FileWriter(str(tmp_path / "nested" / "dir"))  # made with its parents
    w.add_graph(g, global_step=7)
    w.add_session_log(tf.SessionLog(status=tf.SessionLog.START), 2)
    proto = tf.Summary(value=[tf.Summary.Value(tag="p", simple_value=1.0)])
    w.add_summary(proto, 4)  # a proto
    w.add_summary(tb_summary_pb2.Summary(value=[{"tag": "tb", "simple_value": 2.0}]), 5)
    w.add_event(tf.Event(step=9, wall_time=1.0, file_version="custom"))
    w.flush()
    events = _events(tmp_path / "nested" / "dir")
    kinds = [(e.step, e.WhichOneof("what")) for e in events]
    assert kinds == [
        (0, "file_version"),
        (7, "graph_def"),  # add_graph writes no meta graph (only the constructor does)
        (2, "session_log"),
        (4, "summary"),
        (5, "summary"),
        (9, "file_version"),
    ]
    assert events[2].session_log.status == tf.SessionLog.START
    assert events[4].summary.value[0].tag == "tb"
    assert events[5].wall_time == 1.0
    assert w.get_logdir() == str(tmp_path / "nested" / "dir")
    w.close()


def test_graph_argument_errors(tmp_path):
    w = tf.summary.FileWriter(str(tmp_path))
    with pytest.raises(ValueError, match="Please pass only graph, or graph_def"):
        w.add_graph(tf.get_default_graph(), graph_def=tf.get_default_graph())
    with pytest.raises(TypeError, match="must be an instance of `Graph` or the deprecated"):
        w.add_graph(42)
    with pytest.raises(TypeError, match="meta_graph_def must be type MetaGraphDef"):
        w.add_meta_graph(b"bytes")
    with pytest.raises(TypeError, match="Expected a Summary proto or its bytes"):
        w.add_summary(3.0)
    w.close()


def test_graph_def_argument(tmp_path):
    from minitf.framework import graph_io

    gd = graph_io.graph_def_proto(tf.get_default_graph())
    w = tf.summary.FileWriter(str(tmp_path), graph_def=gd)
    w.close()
    assert [e.WhichOneof("what") for e in _events(tmp_path)][1:] == ["graph_def", "meta_graph_def"]


def test_plugin_metadata_is_kept_on_a_tags_first_value_only(tmp_path):
    w = tf.summary.FileWriter(str(tmp_path))
    s = tf.Summary(value=[tf.Summary.Value(tag="t", simple_value=1.0)])
    s.value[0].metadata.plugin_data.plugin_name = "scalars"
    w.add_summary(s, 1)
    w.add_summary(s.SerializeToString(), 2)
    w.close()
    first, second = _events(tmp_path)[1:]
    assert first.summary.value[0].HasField("metadata")
    assert not second.summary.value[0].HasField("metadata")
    assert s.value[0].HasField("metadata")  # the caller's proto is left alone


def test_queue_is_written_when_full_or_due(tmp_path, monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr(writer_mod.time, "monotonic", lambda: clock[0])
    w = tf.summary.FileWriter(str(tmp_path), max_queue=2, flush_secs=60)
    path = w.event_writer.get_filename()
    count = lambda: len(list(tf.train.summary_iterator(path)))  # noqa: E731
    event = tf.Event(step=1)
    w.add_event(event)
    assert count() == 1  # only file_version: the event waits in the queue
    w.add_event(event)
    assert count() == 3  # the queue was full
    w.add_event(event)
    assert count() == 3
    clock[0] += 60
    w.add_event(event)
    assert count() == 5  # flush_secs had passed
    w.add_event(event)
    writer_mod._flush_open_writers()  # what runs at interpreter exit
    assert count() == 6
    w.close()


def test_close_is_idempotent_and_closed_writer_is_a_noop(tmp_path):
    w = tf.summary.FileWriter(str(tmp_path))
    w.close()
    w.close()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        w.add_summary(tf.Summary(), 1)
        w.flush()
    assert "Attempting to use a closed FileWriter" in str(caught[0].message)
    assert len(_events(tmp_path)) == 1


def test_reopen_starts_a_new_file(tmp_path, monkeypatch):
    now = [1_700_000_000.25]
    monkeypatch.setattr(writer_mod.time, "time", lambda: now[0])
    w = tf.summary.FileWriter(str(tmp_path))
    w.reopen()  # open: nothing happens
    w.add_event(tf.Event(step=1))
    w.close()
    now[0] += 1
    w.reopen()
    w.add_event(tf.Event(step=2))
    w.close()
    host = socket.gethostname()
    names = sorted(os.listdir(tmp_path))
    assert names == [
        "events.out.tfevents.1700000000." + host,
        "events.out.tfevents.1700000001." + host,
    ]
    steps = [[e.step for e in tf.train.summary_iterator(str(tmp_path / n))] for n in names]
    assert steps == [[0, 1], [0, 2]]
    w.reopen()  # the same second: as TF, the file of that name is started again
    w.close()
    assert [e.step for e in tf.train.summary_iterator(str(tmp_path / names[1]))] == [0]


def test_file_writer_cache(tmp_path):
    a = tf.summary.FileWriterCache.get(str(tmp_path))
    assert tf.summary.FileWriterCache.get(str(tmp_path)) is a
    tf.summary.FileWriterCache.clear()
    assert tf.summary.FileWriterCache.get(str(tmp_path)) is not a
    tf.summary.FileWriterCache.clear()
    assert len(os.listdir(tmp_path)) >= 1


@pytest.mark.cluster
def test_summaries_fetched_over_grpc_are_bytes(tmp_path):
    # a chief's summary op run through a grpc:// session: the serialized Summary comes back as
    # bytes (with its trailing NUL bytes: a histogram's last bucket count 0.0 ends in them)
    server = tf.train.Server.create_local_server()
    x = tf.placeholder(tf.float32, [3])
    tf.summary.scalar("loss", tf.reduce_mean(x))
    tf.summary.histogram("h", x)
    merged = tf.summary.merge_all()
    with tf.Session(server.target) as sess:
        value = sess.run(merged, {x: [1.0, 2.0, 3.0]})
        assert value == tf.Session().run(merged, {x: [1.0, 2.0, 3.0]})
    assert isinstance(value, bytes) and value.endswith(b"\x00")
    with tf.summary.FileWriter(str(tmp_path)) as w:
        w.add_summary(value, 1)
    assert [v.tag for v in _events(tmp_path)[1].summary.value] == ["loss", "h"]


def test_namespaces():
    for name in ("scalar", "histogram", "merge", "merge_all", "FileWriter", "FileWriterCache"):
        assert callable(getattr(tf.summary, name))
    assert tf.summary.Summary is tf.Summary and tf.summary.Event is tf.Event
    assert tf.summary.SessionLog is tf.SessionLog
    assert tf.HistogramProto().DESCRIPTOR.fields_by_name["bucket_limit"].number == 6
    assert not hasattr(tf.summary, "summary_iterator")  # TF has it under tf.train only
    assert callable(tf.train.summary_iterator)
    for name in ("TFRecordWriter", "tf_record_iterator", "TFRecordOptions"):
        assert hasattr(tf.python_io, name)
