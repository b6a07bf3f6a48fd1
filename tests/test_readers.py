"""Readers in local sessions: op types and names, keys and values of each reader, the work
units taken from a filename queue, the counters, reset, TF's errors and where a read runs.

Book section: "Loading Data Directly from the Graph" (Figures 12-9 and 12-10).  Expected keys,
values and texts are the reference semantics' part 2 §14.1, §14.2 and §14.5 (TF 1.15; observed
on 2.21's compat.v1 where they agree) and §13.4/§22.2 for placement.
"""

import os
import re
import struct
import threading
from pathlib import Path

import numpy as np
import pytest

import minitf as tf
from helpers import first_line, run_in_thread, wait_until
from minitf.lib import crc

DATA = Path(__file__).parent / "data" / "readers"
MY_TEST_CSV = b"x1, x2 , target\n1.,, 0\r\n4., 5. , 1\n\n7., 8. , 0"
FIXED = b"HH" + b"abcdefghij" + b"FF"
# part 2 §14.2's test vector: b"abc", b"", b"hello" framed (56 bytes)
TFRECORD_HEX = (
    "0300000000000000b099490e6162636e57f121"
    "000000000000000029039807d8ea82a2"
    "0500000000000000eab2043e68656c6c6fbb1f1c19"
)


def open_files_under(folder):
    """The files under ``folder`` this process has open (its /proc/self/fd links)."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink("/proc/self/fd/" + fd)
        except OSError:
            continue
        if target.startswith(str(folder)):
            found.append(target)
    return found


@pytest.fixture(autouse=True)
def no_leaks(tmp_path):
    """After every test no thread it started is left and no file of its folder is open."""
    before = set(threading.enumerate())
    yield
    assert wait_until(lambda: set(threading.enumerate()) <= before), [
        t.name for t in set(threading.enumerate()) - before
    ]
    assert open_files_under(tmp_path) == []


@pytest.fixture
def files(tmp_path):
    """Writes files into the test's folder; returns their paths."""

    def write(name, data):
        path = tmp_path / name
        path.write_bytes(data)
        return str(path)

    return write


def filename_queue(names, close=True, name="filename_queue"):
    """A string FIFOQueue holding ``names`` (closed after them); returns (queue, init op)."""
    q = tf.FIFOQueue(len(names) + 5, [tf.string], shapes=[[]], name=name)
    ops = [q.enqueue_many([names])] if names else []
    if close:
        ops.append(q.close())
    return q, ops


def read_all(sess, fetches, init):
    """Runs ``init`` then ``fetches`` until OutOfRangeError; returns (records, the error)."""
    for op in init:
        sess.run(op)
    got = []
    while True:
        try:
            got.append(tuple(sess.run(fetches)))
        except tf.errors.OutOfRangeError as e:
            return got, e


def tf_record(payload):
    """One record framed by hand (part 2 §14.2): length, its masked CRC, data, data's CRC."""
    length = struct.pack("<Q", len(payload))
    return (
        length
        + struct.pack("<I", crc.masked_value(length))
        + payload
        + struct.pack("<I", crc.masked_value(payload))
    )


# -- graph construction ------------------------------------------------------------------------


def test_reader_op_types_names_and_attrs():
    readers = [
        (tf.TextLineReader(), "TextLineReaderV2", {"skip_header_lines": 0}),
        (tf.TextLineReader(skip_header_lines=2, name="r"), "r", {"skip_header_lines": 2}),
        (
            tf.FixedLengthRecordReader(3, header_bytes=2),
            "FixedLengthRecordReaderV2",
            {"record_bytes": 3, "header_bytes": 2, "footer_bytes": 0, "hop_bytes": 0},
        ),
        (tf.TFRecordReader(), "TFRecordReaderV2", {"compression_type": ""}),
        (tf.WholeFileReader(), "WholeFileReaderV2", {}),
        (tf.IdentityReader(), "IdentityReaderV2", {}),
        (tf.TextLineReader(), "TextLineReaderV2_1", {}),
    ]
    for reader, name, attrs in readers:
        assert isinstance(reader, tf.ReaderBase)
        op = reader.reader_ref.op
        assert op.name == name and reader.reader_ref.dtype == tf.resource
        assert op.get_attr("container") == "" and op.get_attr("shared_name") == ""
        for k, v in attrs.items():
            assert op.get_attr(k) == v
        serializable = name.startswith(("WholeFile", "Identity"))
        assert reader.supports_serialize is serializable


def test_read_ops_outputs_and_default_names():
    q = tf.FIFOQueue(3, tf.string, name="fq")
    reader = tf.TextLineReader()
    key, value = reader.read(q)
    assert key.op.type == "ReaderReadV2" and key.name == "ReaderReadV2:0"
    assert value.name == "ReaderReadV2:1" and key.dtype == value.dtype == tf.string
    assert key.shape.as_list() == [] and value.shape.as_list() == []
    assert [t.op.name for t in key.op.inputs] == ["TextLineReaderV2", "fq"]
    keys, values = reader.read_up_to(q.queue_ref, 4, name="many")
    assert keys.op.type == "ReaderReadUpToV2" and keys.name == "many:0"
    assert keys.shape.as_list() == [None] and values.shape.as_list() == [None]
    assert keys.op.inputs[2].dtype == tf.int64
    produced, done = reader.num_records_produced(), reader.num_work_units_completed()
    assert (produced.name, produced.dtype) == ("ReaderNumRecordsProducedV2:0", tf.int64)
    assert (done.name, done.dtype) == ("ReaderNumWorkUnitsCompletedV2:0", tf.int64)
    assert reader.reset().name == "ReaderResetV2" and reader.read(q)[0].name == "ReaderReadV2_1:0"


def test_readers_are_not_differentiable():
    q = tf.FIFOQueue(3, tf.string)
    key, value = tf.TextLineReader().read(q)
    assert tf.gradients(tf.decode_csv(value, [[1.0]])[0], [value]) == [None]


def test_constructors_log_tf_deprecation_once(caplog):
    from minitf.lib import deprecation

    deprecation.warned.discard("tensorflow.python.ops.io_ops:WholeFileReader.__init__")
    with caplog.at_level("WARNING", logger="minitf"):
        tf.WholeFileReader()
        tf.WholeFileReader()
    texts = [r.getMessage() for r in caplog.records if "WholeFileReader" in r.getMessage()]
    assert len(texts) == 1
    assert texts[0].startswith("From %s:" % __file__)
    assert (
        ": WholeFileReader.__init__ (from tensorflow.python.ops.io_ops) is deprecated" in (texts[0])
    )
    assert texts[0].endswith("Use `tf.data.Dataset.map(tf.read_file)`.")


# -- TextLineReader ----------------------------------------------------------------------------


def test_text_lines_over_several_files_with_a_header(files):
    """§14.5: keys count the skipped header; a header-only file gives nothing; the closed
    queue's error surfaces on the read; the counters."""
    csv = files("my_test.csv", MY_TEST_CSV)
    header_only = files("header.csv", b"header\n")
    q, init = filename_queue([csv, header_only, csv])
    reader = tf.TextLineReader(skip_header_lines=1)
    key, value = reader.read(q)
    with tf.Session() as s:
        got, error = read_all(s, [key, value], init)
        once = [
            (csv + ":2", b"1.,, 0"),
            (csv + ":3", b"4., 5. , 1"),
            (csv + ":4", b""),
            (csv + ":5", b"7., 8. , 0"),
        ]
        assert got == [(k.encode(), v) for k, v in once * 2]
        assert re.fullmatch(
            r"FIFOQueue '_\d+_filename_queue' is closed and has insufficient elements "
            r"\(requested 1, current size 0\)",
            first_line(error),
        )
        assert "[[{{node ReaderReadV2}}]]" in error.message
        assert s.run(reader.num_records_produced()) == 8
        assert s.run(reader.num_work_units_completed()) == 3


def test_text_line_details(files):
    """Empty lines are records, a last line needs no newline, a trailing newline adds none,
    one trailing \\r goes; fewer lines than the header is no error."""
    a = files("a.txt", b"one\r\r\n\ntwo\n")
    b = files("b.txt", b"")
    c = files("c.txt", b"h1\nh2")
    d = files("d.txt", b"x\nlast")
    q, init = filename_queue([a, b, c, d])
    key, value = tf.TextLineReader().read(q)
    with tf.Session() as s:
        got, _ = read_all(s, [key, value], init)
    assert [(k.decode().rsplit("/", 1)[1], v) for k, v in got] == [
        ("a.txt:1", b"one\r"),
        ("a.txt:2", b""),
        ("a.txt:3", b"two"),
        ("c.txt:1", b"h1"),
        ("c.txt:2", b"h2"),
        ("d.txt:1", b"x"),
        ("d.txt:2", b"last"),
    ]
    tf.reset_default_graph()
    q, init = filename_queue([c, d])
    key, value = tf.TextLineReader(skip_header_lines=3).read(q)
    with tf.Session() as s:
        got, _ = read_all(s, [key, value], init)
    assert got == []


def test_negative_skip_header_lines():
    q, _ = filename_queue([], close=False)
    key, _ = tf.TextLineReader(skip_header_lines=-1).read(q)
    with tf.Session() as s:
        with pytest.raises(tf.errors.InvalidArgumentError) as e:
            s.run(key)
    assert first_line(e.value) == "skip_header_lines must be >= 0 not -1"


def test_a_missing_file_is_not_found_and_is_not_retried(files):
    ok = files("ok.txt", b"fine\n")
    q, init = filename_queue(["/nonexistent/x.csv", ok])
    reader = tf.TextLineReader()
    key, value = reader.read(q)
    with tf.Session() as s:
        for op in init:
            s.run(op)
        with pytest.raises(tf.errors.NotFoundError) as e:
            s.run(key)
        assert first_line(e.value) == "/nonexistent/x.csv; No such file or directory"
        assert s.run([key, value]) == [(ok + ":1").encode(), b"fine"]
        assert s.run(reader.num_work_units_completed()) == 0


def test_a_directory_is_no_file(tmp_path):
    q, init = filename_queue([str(tmp_path)])
    key, _ = tf.WholeFileReader().read(q)
    with tf.Session() as s:
        for op in init:
            s.run(op)
        with pytest.raises(tf.errors.FailedPreconditionError) as e:
            s.run(key)
    assert first_line(e.value) == "%s; Is a directory" % tmp_path


@pytest.mark.parametrize(
    "dtypes,shapes,value,text",
    [
        ([tf.int32], [[]], [1], "Expected queue with single string component"),
        ([tf.string, tf.string], [[], []], ["a", "b"], "Expected single component queue"),
        ([tf.string], [[2]], [["a", "b"]], "Expected to dequeue a one-element string tensor"),
    ],
)
def test_the_queue_must_hold_single_file_names(dtypes, shapes, value, text):
    q = tf.FIFOQueue(3, dtypes, shapes=shapes)
    enq = q.enqueue(value)
    key, _ = tf.TextLineReader().read(q)
    with tf.Session() as s:
        s.run(enq)
        with pytest.raises(tf.errors.InvalidArgumentError) as e:
            s.run(key)
    assert first_line(e.value) == text


# -- the other readers -------------------------------------------------------------------------


def test_fixed_length_records_header_footer_and_hop(files):
    path = files("fixed.bin", FIXED)
    q, init = filename_queue([path])
    key, value = tf.FixedLengthRecordReader(3, header_bytes=2, footer_bytes=2).read(q)
    q2, init2 = filename_queue([path], name="q2")
    _, hopped = tf.FixedLengthRecordReader(record_bytes=4, hop_bytes=3).read(q2)
    with tf.Session() as s:
        got, _ = read_all(s, [key, value], init)
        assert got == [
            ((path + ":%d" % i).encode(), v) for i, v in enumerate([b"abc", b"def", b"ghi"])
        ]
        got, _ = read_all(s, [hopped], init2)
        assert [v for (v,) in got] == [b"HHab", b"bcde", b"efgh", b"hijF"]


def test_fixed_length_file_shorter_than_its_header(files):
    """TF fails the work unit with an OutOfRangeError (observed on 2.21); the next read goes
    on with the next file."""
    short = files("short.bin", b"H")
    path = files("fixed.bin", FIXED)
    q, init = filename_queue([short, path])
    key, value = tf.FixedLengthRecordReader(3, header_bytes=2).read(q)
    with tf.Session() as s:
        for op in init:
            s.run(op)
        with pytest.raises(tf.errors.OutOfRangeError) as e:
            s.run(key)
        assert first_line(e.value) == "reached end of file"
        got, _ = read_all(s, [value], [])
    assert [v for (v,) in got] == [b"abc", b"def", b"ghi", b"jFF"]


@pytest.mark.parametrize("attr", ["record_bytes", "header_bytes", "footer_bytes", "hop_bytes"])
def test_fixed_length_negative_sizes(attr):
    sizes = {"record_bytes": 3, attr: -1}
    q, _ = filename_queue([], close=False)
    key, _ = tf.FixedLengthRecordReader(**sizes).read(q)
    with tf.Session() as s:
        with pytest.raises(tf.errors.InvalidArgumentError) as e:
            s.run(key)
    assert first_line(e.value) == "%s must be >= 0 not -1" % attr


def test_tf_records_framed_by_hand(files):
    data = b"".join(tf_record(p) for p in (b"abc", b"", b"hello"))
    assert data == bytes.fromhex(TFRECORD_HEX) and len(data) == 56
    path = files("r.tfrecord", data)
    q, init = filename_queue([path])
    key, value = tf.TFRecordReader().read(q)
    with tf.Session() as s:
        got, _ = read_all(s, [key, value], init)
    assert got == [
        ((path + ":%d" % o).encode(), v) for o, v in [(0, b"abc"), (19, b""), (35, b"hello")]
    ]


def test_a_tf_record_file_written_by_tensorflow(files):
    path = str(DATA / "tf_written.tfrecord")
    q, init = filename_queue([path])
    reader = tf.TFRecordReader()
    keys, values = reader.read_up_to(q, 10)
    with tf.Session() as s:
        for op in init:
            s.run(op)
        k, v = s.run([keys, values])
        assert list(v) == [
            b"abc",
            b"",
            b"hello",
            b"Hello distributed TensorFlow!",
            bytes(range(40)),
        ]
        assert [x.decode().rsplit(":", 1)[1] for x in k] == ["0", "19", "35", "56", "101"]
        assert s.run(reader.num_records_produced()) == 5


def test_a_truncated_or_corrupted_tf_record_fails_every_later_read(files):
    data = bytes.fromhex(TFRECORD_HEX)
    cut = files("cut.tfrecord", data[:-3])
    bad = bytearray(data)
    bad[12] ^= 1  # the first payload byte
    corrupted = files("bad.tfrecord", bytes(bad))
    for path, texts in ((cut, ["abc", "", None]), (corrupted, [None])):
        tf.reset_default_graph()
        q, init = filename_queue([path])
        _, value = tf.TFRecordReader().read(q)
        with tf.Session() as s:
            for op in init:
                s.run(op)
            for text in texts:
                if text is not None:
                    assert s.run(value) == text.encode()
            offset = 35 if path == cut else 12  # a bad payload: its own offset (TF 2.21 too)
            what = "truncated" if path == cut else "corrupted"
            for _ in range(2):
                with pytest.raises(tf.errors.DataLossError) as e:
                    s.run(value)
                assert first_line(e.value) == "%s record at %d" % (what, offset)


def test_compressed_files_are_refused_clearly():
    q, _ = filename_queue([], close=False)
    key, _ = tf.TFRecordReader(options="GZIP").read(q)
    key2, _ = tf.FixedLengthRecordReader(4, encoding="ZLIB").read(q)
    with tf.Session() as s:
        for k, text in ((key, "compression_type 'GZIP'"), (key2, "encoding 'ZLIB'")):
            with pytest.raises(tf.errors.UnimplementedError) as e:
                s.run(k)
            assert text in first_line(e.value) and "uncompressed files only" in e.value.message


def test_whole_file_and_identity_readers(files):
    path = files("fixed.bin", FIXED)
    q, init = filename_queue([path, path])
    reader = tf.WholeFileReader()
    key, value = reader.read(q)
    q2, init2 = filename_queue(["work-a", "work-b"], name="q2")
    ident = tf.IdentityReader()
    ikey, ivalue = ident.read(q2)
    with tf.Session() as s:
        for op in init:
            s.run(op)
        assert s.run([key, value]) == [path.encode(), b"HHabcdefghijFF"]
        assert s.run(reader.num_work_units_completed()) == 1  # finished with its record
        got, _ = read_all(s, [ikey, ivalue], init2)
        assert got == [(b"work-a", b"work-a"), (b"work-b", b"work-b")]


# -- read_up_to, counters, reset ---------------------------------------------------------------


def test_read_up_to_stays_within_one_file(files):
    a = files("a.txt", b"1\n2\n3\n")
    b = files("b.txt", b"4\n5\n")
    q, init = filename_queue([a, b])
    keys, values = tf.TextLineReader().read_up_to(q, 2)
    with tf.Session() as s:
        got, error = read_all(s, [values], init)
    assert [list(v) for (v,) in got] == [[b"1", b"2"], [b"3"], [b"4", b"5"]]
    assert "insufficient elements (requested 1, current size 0)" in first_line(error)


def test_read_up_to_zero_reads_nothing_and_a_negative_count_is_refused():
    q, _ = filename_queue([], close=False)
    reader = tf.TextLineReader()
    keys, values = reader.read_up_to(q, 0)
    negative, _ = reader.read_up_to(q, -1)
    with tf.Session() as s:
        k, v = s.run([keys, values])
        assert k.shape == v.shape == (0,) and k.dtype == object
        assert s.run(q.queue_ref).pending() == (0, 0)  # no file name was asked for
        with pytest.raises(tf.errors.InvalidArgumentError) as e:
            s.run(negative)
        assert first_line(e.value) == "num_records must be >= 0, not -1"


def test_reset_forgets_the_file_and_the_counters(files):
    a = files("a.txt", b"1\n2\n3\n")
    b = files("b.txt", b"4\n")
    q, init = filename_queue([a, b])
    reader = tf.TextLineReader()
    _, value = reader.read(q)
    counters = [reader.num_records_produced(), reader.num_work_units_completed()]
    with tf.Session() as s:
        for op in init:
            s.run(op)
        assert s.run(value) == b"1"
        s.run(reader.reset())
        assert s.run(counters) == [0, 0]
        assert s.run(value) == b"4"  # a.txt was forgotten: the next file name was dequeued
        assert s.run(counters) == [1, 0]


def test_each_session_has_its_own_private_reader(files):
    a = files("a.txt", b"1\n2\n")
    q, init = filename_queue([a], close=False)
    _, value = tf.TextLineReader().read(q)
    with tf.Session() as s:
        for op in init:
            s.run(op)
        assert s.run(value) == b"1"
    with tf.Session() as s:  # a new queue and a new reader
        for op in init:
            s.run(op)
        assert s.run(value) == b"1"


def test_serialize_and_restore_state(files):
    """Only WholeFileReader and IdentityReader save their state: TF's ``ReaderBaseState``
    proto, byte for byte as TF 2.21 writes it; a failed restore resets the reader."""
    path = files("fixed.bin", FIXED)
    q, init = filename_queue([path, path], close=False)
    reader = tf.WholeFileReader(name="wr")
    key, _ = reader.read(q)
    state = reader.serialize_state()
    assert state.op.type == "ReaderSerializeStateV2" and state.dtype == tf.string
    fed = tf.placeholder(tf.string)
    restore = reader.restore_state(fed)
    assert restore.type == "ReaderRestoreStateV2"
    counters = [reader.num_records_produced(), reader.num_work_units_completed()]
    text = tf.TextLineReader()
    with tf.Session() as s:
        for op in init:
            s.run(op)
        assert s.run(state) == b""
        s.run(key)
        saved = s.run(state)
        p = path.encode()
        assert saved == b"\x08\x01\x10\x01\x18\x01\x22" + bytes([len(p)]) + p
        s.run(key)
        assert s.run(counters) == [2, 2]
        s.run(restore, {fed: saved})
        assert s.run(counters) == [1, 1] and s.run(state) == saved
        for bad, message in (
            (
                b"\x08\x05\x10\x03",
                "Inconsistent work started vs. finished when restoring in WholeFileReader 'wr': "
                "work_started: 5",
            ),
            (
                b"\x08\x7f\x10\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01",
                "Unexpected negative value when restoring in WholeFileReader 'wr': "
                "work_started: 127",
            ),
            (b"\xff\xff", "Could not parse state for WholeFileReader 'wr': \\377\\377"),
        ):
            s.run(restore, {fed: saved})
            with pytest.raises(tf.errors.InvalidArgumentError) as e:
                s.run(restore, {fed: bad})
            assert first_line(e.value) == message
            assert s.run(counters) == [0, 0]
        for op, message in (
            (text.serialize_state(), "Reader SerializeState"),
            (text.restore_state(b""), "Reader RestoreState"),
        ):
            with pytest.raises(tf.errors.UnimplementedError) as e:
                s.run(op)
            assert first_line(e.value) == message


def test_reader_ops_with_one_shared_name_share_their_reader(files):
    """The Python classes give no ``shared_name``, but reader ops with one (an imported
    graph's) find one reader by name in their device's resource manager, like shared queues."""
    from minitf.framework import tensor_shape
    from minitf.ops.op_def import apply_op

    a = files("a.txt", b"1\n2\n3\n")
    q, init = filename_queue([a])
    attrs = {"skip_header_lines": 0, "container": "", "shared_name": "shared_reader"}
    scalar = [(tf.resource, tensor_shape.TensorShape([]))]
    one, two = [
        tf.ReaderBase(apply_op("TextLineReaderV2", [], scalar, name, attrs).outputs[0])
        for name in ("r1", "r2")
    ]
    private = tf.TextLineReader()
    reads = [r.read(q)[1] for r in (one, two, one)]
    with tf.Session() as s:
        for op in init:
            s.run(op)
        assert [s.run(v) for v in reads] == [b"1", b"2", b"3"]  # one reader, one position
        assert s.run(one.reader_ref) is s.run(two.reader_ref)
        assert s.run(one.reader_ref).name == "shared_reader"
        assert re.fullmatch(r"_\d+_TextLineReaderV2", s.run(private.reader_ref).name)


# -- waiting -----------------------------------------------------------------------------------


def test_a_waiting_read_holds_no_inter_op_thread(files):
    """One inter-op thread: a read waiting for a file name leaves it free for the step that
    enqueues one."""
    path = files("a.txt", b"hello\n")
    config = tf.ConfigProto(inter_op_parallelism_threads=1, use_per_session_threads=True)
    q = tf.FIFOQueue(2, tf.string, shapes=[[]], name="fq")
    _, value = tf.TextLineReader().read(q)
    enq = q.enqueue(path)
    with tf.Session(config=config) as s:
        t, out = run_in_thread(s, value)
        queue = s.run(q.queue_ref)
        assert wait_until(lambda: queue.pending() == (0, 1))
        s.run(enq)
        t.join(5)
        assert not t.is_alive() and out["value"] == b"hello"


def test_reads_of_one_reader_wait_their_turn_and_end_with_the_session(files):
    q = tf.FIFOQueue(2, tf.string, shapes=[[]], name="fq")
    reader = tf.TextLineReader()
    _, value = reader.read(q)
    s = tf.Session()
    r = s.run(reader.reader_ref)
    first, out1 = run_in_thread(s, value)
    second, out2 = run_in_thread(s, value)
    queue = s.run(q.queue_ref)
    assert wait_until(lambda: queue.pending() == (0, 1) and r.pending() == 2)
    s.close()
    first.join(5)
    second.join(5)
    for out in (out1, out2):
        assert isinstance(out["error"], tf.errors.CancelledError)
        assert first_line(out["error"]) == "Dequeue operation was cancelled"
    assert r.pending() == 0


def test_threads_sharing_one_reader_get_every_record_once(files):
    """Reads of one reader are served one at a time: four threads running the same read
    share the records of the files between them, none lost or repeated."""
    names = [
        files("f%d.txt" % i, b"".join(b"%d-%d\n" % (i, j) for j in range(20))) for i in range(5)
    ]
    q, init = filename_queue(names)
    reader = tf.TextLineReader()
    key, value = reader.read(q)
    got, lock = [], threading.Lock()

    def body(sess):
        while True:
            try:
                k, v = sess.run([key, value])
            except tf.errors.OutOfRangeError:
                return
            with lock:
                got.append((k.decode().rsplit("/", 1)[1], v))

    with tf.Session() as s:
        for op in init:
            s.run(op)
        threads = [threading.Thread(target=body, args=(s,)) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
        assert not any(t.is_alive() for t in threads)
        assert s.run([reader.num_records_produced(), reader.num_work_units_completed()]) == [
            100,
            5,
        ]
    expected = [("f%d.txt:%d" % (i, j + 1), b"%d-%d" % (i, j)) for i in range(5) for j in range(20)]
    assert sorted(got) == sorted(expected)


def test_operation_timeout_ends_a_waiting_read():
    config = tf.ConfigProto(operation_timeout_in_ms=200)
    q = tf.FIFOQueue(2, tf.string, shapes=[[]], name="fq")
    _, value = tf.TextLineReader().read(q)
    with tf.Session(config=config) as s:
        with pytest.raises(tf.errors.DeadlineExceededError):
            s.run(value)
        assert s.run(q.queue_ref).pending() == (0, 0)


# -- placement ---------------------------------------------------------------------------------


def test_a_read_runs_where_its_queue_is(files):
    """§13.4, §22.2: a read pinned elsewhere runs on the queue's device."""
    path = files("a.txt", b"x\n")
    with tf.device("/cpu:1"):
        q = tf.FIFOQueue(2, tf.string, shapes=[[]], name="fq")
        reader = tf.TextLineReader(name="rd")
    with tf.device("/cpu:0"):
        _, value = reader.read(q, name="read")
        deq = q.dequeue()
    assert value.op.device == "/device:CPU:0"
    with tf.Session(config=tf.ConfigProto(device_count={"CPU": 2})) as s:
        s.run(q.enqueue([path]))
        assert s.run(value) == b"x"
        device_of = {op.name: d.name for op, d in s.placement.device_of.items()}
    assert device_of["read"] == device_of["fq"] == device_of["rd"]
    assert device_of["read"].endswith("/device:CPU:1")
    assert device_of[deq.op.name].endswith("/device:CPU:1")


def test_reader_and_queue_pinned_apart_cannot_be_placed():
    with tf.device("/cpu:1"):
        q = tf.FIFOQueue(2, tf.string, shapes=[[]], name="fq")
    with tf.device("/cpu:0"):
        _, value = tf.TextLineReader().read(q, name="rd")
    with tf.Session(config=tf.ConfigProto(device_count={"CPU": 2})) as s:
        with pytest.raises(tf.errors.InvalidArgumentError) as e:
            s.run(value)
    assert first_line(e.value) == (
        "Cannot place the graph because a reference or resource edge connects colocation "
        "groups with incompatible resource devices: /device:CPU:1 vs /device:CPU:0. The edge "
        "src node is fq , and the dst node is rd"
    )


# -- the book's pipelines ----------------------------------------------------------------------


def book_pipeline(filename_queue_, instance_queue):
    """The book's ``read_and_push_instance``: a reader, decode_csv, an enqueue."""
    reader = tf.TextLineReader(skip_header_lines=1)
    _, record = reader.read(filename_queue_)
    x1, x2, target = tf.decode_csv(record, record_defaults=[[-1.0], [-1.0], [-1]])
    return instance_queue.enqueue([tf.stack([x1, x2]), target])


def test_figure_12_9_one_reader_into_an_instance_queue(files):
    csv = files("my_test.csv", b"x1, x2 , target\n1.,, 0\n4., 5. , 1\n7., 8. , 0\n")
    fq, init = filename_queue([csv])
    iq = tf.FIFOQueue(10, [tf.float32, tf.int32], shapes=[[2], []], name="instance_q")
    push = book_pipeline(fq, iq)
    batch = iq.dequeue_up_to(2)
    with tf.Session() as s:
        for op in init:
            s.run(op)
        with pytest.raises(tf.errors.OutOfRangeError):
            while True:
                s.run(push)
        s.run(iq.close())
        x, y = s.run(batch)
        np.testing.assert_array_equal(x, [[1.0, -1.0], [4.0, 5.0]])
        np.testing.assert_array_equal(y, [0, 1])
        x, y = s.run(batch)
        np.testing.assert_array_equal(x, [[7.0, 8.0]])
        with pytest.raises(tf.errors.OutOfRangeError):
            s.run(batch)


def test_figure_12_10_several_readers_with_a_queue_runner(files):
    """Five reader threads pull file names from one queue and push into one instance queue;
    the runner closes it when the last thread sees the file names run out."""
    names = [
        files("f%d.csv" % i, b"x1,x2,y\n%d.,%d.,%d\n%d.,,%d\n" % (i, i, i, 10 + i, i))
        for i in range(8)
    ]
    fq, init = filename_queue(names)
    iq = tf.FIFOQueue(20, [tf.float32, tf.int32], shapes=[[2], []], name="instance_q")
    pushes = [book_pipeline(fq, iq) for _ in range(5)]
    qr = tf.train.QueueRunner(iq, pushes)
    batch = iq.dequeue_up_to(4)
    coord = tf.train.Coordinator()
    with tf.Session() as s:
        for op in init:
            s.run(op)
        threads = qr.create_threads(s, coord=coord, start=True)
        got = []
        with pytest.raises(tf.errors.OutOfRangeError):
            while True:
                x, y = s.run(batch)
                got.extend(zip(map(tuple, x.tolist()), y.tolist()))
        coord.request_stop()
        coord.join(threads)
    expected = [((i, i), i) for i in range(8)] + [((10 + i, -1), i) for i in range(8)]
    assert sorted(got) == sorted(expected)


def test_a_reader_s_container_name_is_checked_as_tf_does():
    with tf.container("my_problem_1"):
        reader = tf.TextLineReader(name="r")
    q, _ = filename_queue([], close=False)
    key, _ = reader.read(q)
    with tf.Session() as s:
        with pytest.raises(tf.errors.InvalidArgumentError) as e:
            s.run(key)
    assert first_line(e.value) == "container contains invalid characters: my_problem_1"
