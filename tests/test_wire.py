"""Tests of minitf.distributed.wire: what crosses the network between master and workers.

Book section: "The Master and Worker Services".  Tensors and graphs must survive the trip
exactly, and whatever arrives malformed must be refused with InvalidArgumentError (never a
crash, never a huge allocation, never a pickle).
"""

import random
import time
import tracemalloc

import numpy as np
import pytest
from google.protobuf.message import DecodeError
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import minitf as tf
from minitf.distributed import protocol_pb2 as pb
from minitf.distributed import services, streams, wire
from minitf.framework import errors

IAE = errors.InvalidArgumentError

NUMERIC = [
    "float16",
    "float32",
    "float64",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "complex64",
    "complex128",
    "bool",
]


# -- helpers ----------------------------------------------------------------------------------


def same_tensor(a, b):
    """Exact equality: dtype, shape and every bit (NaN payloads included); strings by value."""
    assert isinstance(b, np.ndarray)
    assert b.dtype == a.dtype, (a.dtype, b.dtype)
    assert b.shape == a.shape
    if a.dtype == object:
        assert b.tolist() == a.tolist()
    else:
        assert np.ascontiguousarray(b).tobytes() == np.ascontiguousarray(a).tobytes()
    return True


def small_max_alloc(fn, limit=4 << 20):
    """Runs fn() (expected to raise InvalidArgumentError) and checks its peak allocation."""
    tracemalloc.start()
    try:
        with pytest.raises(IAE):
            fn()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < limit, "peak allocation %d bytes" % peak
    return peak


def tensor_msg(dtype, dims, content=b"", strings=None):
    msg = pb.TensorProto(dtype=dtype, content=content)
    msg.shape.SetInParent()
    msg.shape.dims.extend(dims)
    if strings is not None:
        msg.string_val.extend(strings)
    return msg


def header_chunk(dtype, dims, total, data=b"", offset=0):
    c = pb.TensorChunk(dtype=dtype, total_bytes=total, offset=offset, data=data)
    c.shape.SetInParent()
    c.shape.dims.extend(dims)
    return c


shapes = hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=5)


@st.composite
def numeric_arrays(draw):
    name = draw(st.sampled_from(NUMERIC))
    dtype = tf.as_dtype(name).as_numpy_dtype
    return draw(hnp.arrays(dtype, draw(shapes)))


@st.composite
def string_arrays(draw):
    return draw(hnp.arrays(object, draw(shapes), elements=st.binary(max_size=12)))


any_arrays = st.one_of(numeric_arrays(), string_arrays())


# -- the generated modules --------------------------------------------------------------------


def test_generated_modules_define_the_services_and_messages():
    assert pb.DESCRIPTOR.package == "minitf"
    master = pb.DESCRIPTOR.services_by_name["MasterService"]
    worker = pb.DESCRIPTOR.services_by_name["WorkerService"]
    assert sorted(m.name for m in master.methods) == sorted(
        [
            "CreateSession",
            "ExtendSession",
            "RunStep",
            "RunSteps",
            "CloseSession",
            "ListDevices",
            "Reset",
        ]
    )
    assert sorted(m.name for m in worker.methods) == sorted(
        [
            "GetStatus",
            "RegisterGraph",
            "DeregisterGraph",
            "RunGraph",
            "RunGraphs",
            "RecvTensor",
            "RecvTensors",
            "RecvTensorsSteps",
            "CleanupAll",
        ]
    )
    recv = worker.methods_by_name["RecvTensor"]
    assert recv.server_streaming and not recv.client_streaming
    assert recv.output_type.name == "TensorChunk"
    # services.py serves and calls every method from the descriptors: the servicers have them
    from minitf.distributed.master import Master
    from minitf.distributed.worker import Worker

    for service, cls in (("MasterService", Master), ("WorkerService", Worker)):
        kinds = {name: kind for name, kind, _, _ in services.methods(service)}
        assert all(callable(getattr(cls, name)) for name in kinds)
    assert kinds["RunGraphs"] == "stream_stream" and kinds["RunGraph"] == "stream_stream"
    # the raw methods' messages travel as bytes (parsers None), the others are parsed
    parsers = {m[0]: m[2:] for m in services.methods("WorkerService")}
    assert parsers["RunGraph"] == parsers["RunGraphs"] == (None, None)
    assert parsers["RecvTensor"][1] is None
    assert parsers["RecvTensor"][0] == pb.RecvTensorRequest.FromString
    assert parsers["RecvTensors"] == (pb.RecvTensorsRequest.FromString, None)
    assert kinds["RecvTensors"] == "unary_stream"
    # the open calls a step's RecvTensors go on: raw both ways, each step's answer ends as on
    # RunGraphs (streams.split_end reads field END_FIELD)
    assert kinds["RecvTensorsSteps"] == "stream_stream"
    assert parsers["RecvTensorsSteps"] == (None, None)
    assert pb.RecvTensorsResponse.DESCRIPTOR.fields_by_name["end"].number == streams.END_FIELD
    # a RunGraphResponse's bytes are a RunStepResponse (a master forwards them unparsed)
    for field in ("recv", "recv_part", "step_stats"):
        mine = pb.RunGraphResponse.DESCRIPTOR.fields_by_name[field]
        theirs = pb.RunStepResponse.DESCRIPTOR.fields_by_name[
            {"recv": "tensor", "recv_part": "tensor_part"}.get(field, field)
        ]
        assert (mine.number, mine.message_type) == (theirs.number, theirs.message_type)
    cfg = pb.SessionConfig(allow_soft_placement=True, device_filters=["/job:ps"])
    assert pb.SessionConfig.FromString(cfg.SerializeToString()) == cfg


# -- tensors ----------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(any_arrays)
def test_tensor_round_trip_every_dtype(arr):
    msg = wire.tensor_to_proto(arr)
    again = pb.TensorProto.FromString(msg.SerializeToString())
    out = wire.proto_to_tensor(again)
    assert same_tensor(arr, out)
    assert out.flags.writeable
    if arr.size:  # a fresh copy: writing to it leaves the message (and later decodes) alone
        out[...] = out.reshape(-1)[0]
        assert same_tensor(arr, wire.proto_to_tensor(again))


@pytest.mark.parametrize("name", NUMERIC + ["string"])
def test_every_dtype_has_a_wire_name(name):
    arr = np.zeros((2, 0, 3), dtype=tf.as_dtype(name).as_numpy_dtype)
    msg = wire.tensor_to_proto(arr)
    assert msg.dtype == name
    assert list(msg.shape.dims) == [2, 0, 3]
    assert same_tensor(arr, wire.proto_to_tensor(msg))


def test_scalars_strings_and_byte_order():
    assert wire.proto_to_tensor(wire.tensor_to_proto(np.float32(2.5))).shape == ()
    assert wire.proto_to_tensor(wire.tensor_to_proto(7)).item() == 7
    s = wire.proto_to_tensor(wire.tensor_to_proto("héllo"))
    assert s.dtype == object and s.item() == "héllo".encode("utf-8")
    u = wire.proto_to_tensor(wire.tensor_to_proto(np.array([["a", "bc"]])))
    assert u.tolist() == [[b"a", b"bc"]]
    # a bare bytes scalar keeps its trailing NUL bytes (a serialized Summary can end in them)
    assert wire.proto_to_tensor(wire.tensor_to_proto(b"ab\x00\x00")).item() == b"ab\x00\x00"
    # little-endian raw bytes, whatever the sender's byte order
    big = np.array([1, 2], dtype=">i4")
    msg = wire.tensor_to_proto(big)
    assert msg.content == b"\x01\x00\x00\x00\x02\x00\x00\x00"
    assert wire.proto_to_tensor(msg).tolist() == [1, 2]
    # non-contiguous input
    m = np.arange(12, dtype=np.int16).reshape(3, 4)[:, ::2]
    assert same_tensor(np.ascontiguousarray(m), wire.proto_to_tensor(wire.tensor_to_proto(m)))
    # bools: one byte each, any non-zero byte reads as True
    assert wire.tensor_to_proto(np.array([True, False])).content == b"\x01\x00"
    assert wire.proto_to_tensor(tensor_msg("bool", [2], b"\x07\x00")).tolist() == [True, False]


def test_values_without_a_minitf_dtype_are_refused():
    for bad in (
        np.array([object()], dtype=object),
        np.array([1, 2], dtype=object),
        np.array(["2020-01-01"], dtype="datetime64[D]"),
        np.longdouble(1.0),
    ):
        with pytest.raises(IAE):
            wire.tensor_to_proto(bad)


def test_wrong_content_length():
    good = wire.tensor_to_proto(np.arange(6, dtype=np.float32).reshape(2, 3))
    for content in (good.content[:-1], good.content + b"\x00", b""):
        msg = pb.TensorProto()
        msg.CopyFrom(good)
        msg.content = content
        with pytest.raises(IAE, match="needs 24 bytes"):
            wire.proto_to_tensor(msg)
    with pytest.raises(IAE, match="needs 3 elements"):
        wire.proto_to_tensor(tensor_msg("string", [3], strings=[b"a", b"b"]))
    with pytest.raises(IAE):
        wire.proto_to_tensor(tensor_msg("string", [1], content=b"x", strings=[b"a"]))
    with pytest.raises(IAE):
        wire.proto_to_tensor(tensor_msg("int8", [1], content=b"x", strings=[b"a"]))


def test_bad_shapes():
    with pytest.raises(IAE, match="negative"):
        wire.proto_to_tensor(tensor_msg("float32", [-2, 3]))
    with pytest.raises(IAE, match="fully known"):
        wire.proto_to_tensor(tensor_msg("float32", [-1]))
    with pytest.raises(IAE, match="rank 33"):
        wire.proto_to_tensor(tensor_msg("float32", [1] * 33))
    unknown = pb.TensorProto(dtype="float32")
    unknown.shape.unknown_rank = True
    with pytest.raises(IAE, match="known rank"):
        wire.proto_to_tensor(unknown)
    with pytest.raises(IAE, match="no shape"):
        wire.proto_to_tensor(pb.TensorProto(dtype="float32", content=b"\0\0\0\0"))


def test_huge_declared_shapes_allocate_nothing():
    for dims in ([1 << 40, 1 << 40], [1 << 62], [0, 1 << 62], [2] * 32, [(1 << 63) - 1, 0]):
        small_max_alloc(lambda dims=dims: wire.proto_to_tensor(tensor_msg("float64", dims)))
        small_max_alloc(lambda dims=dims: wire.proto_to_tensor(tensor_msg("string", dims)))
    # within the default cap but above a caller's
    with pytest.raises(IAE, match="limit of 1000"):
        wire.proto_to_tensor(wire.tensor_to_proto(np.zeros(1000, np.int16)), max_bytes=1000)
    with pytest.raises(IAE, match="limit"):
        wire.proto_to_tensor(wire.tensor_to_proto([b"x" * 600, b"y" * 600]), max_bytes=1000)
    assert wire.proto_to_tensor(
        wire.tensor_to_proto(np.zeros(250, np.int32)), max_bytes=1000
    ).shape == (250,)


@pytest.mark.parametrize(
    "name",
    [
        "float128",
        "object",
        "<f4",
        "O",
        "",
        "float32_ref",
        "int32 ",
        "Float32",
        "str",
        "np.float32",
        "DT_FLOAT",
        "1",
        "é",
        "x" * 10000,
    ],
)
def test_unknown_dtype_names(name):
    with pytest.raises(IAE) as info:
        wire.proto_to_tensor(tensor_msg(name, [1], b"\0" * 4))
    assert len(str(info.value)) < 300  # a huge received name is not echoed back whole
    with pytest.raises(IAE):
        wire.assemble_chunks([header_chunk(name, [1], 4, b"\0" * 4)])


# -- chunked tensors --------------------------------------------------------------------------


def test_64_mib_tensor_moves_in_chunks_quickly():
    arr = np.random.default_rng(0).standard_normal(16 << 20, dtype=np.float32).reshape(4096, -1)
    assert arr.nbytes == 64 << 20
    start = time.perf_counter()
    raw = list(wire.iter_tensor_chunks(arr))
    out = wire.assemble_chunks(raw)
    elapsed = time.perf_counter() - start
    chunks = [pb.TensorChunk.FromString(c) for c in raw]  # what protobuf reads in them
    assert len(chunks) == 64
    assert max(len(c) for c in raw) < wire.MAX_MESSAGE_BYTES
    assert chunks[0].total_bytes == 64 << 20 and list(chunks[0].shape.dims) == [4096, 4096]
    assert all(not c.dtype and not c.HasField("shape") for c in chunks[1:])
    assert b"".join(c.data for c in chunks) == arr.tobytes()
    assert np.array_equal(out, arr) and out.dtype == np.float32 and out.flags.writeable
    assert elapsed < 10, "64 MiB round trip took %.2f s" % elapsed


@settings(max_examples=200, deadline=None)
@given(any_arrays, st.integers(1, 64))
def test_chunked_round_trip_small(arr, chunk_bytes):
    raw = list(wire.iter_tensor_chunks(arr, chunk_bytes=chunk_bytes))
    chunks = [pb.TensorChunk.FromString(c) for c in raw]
    assert all(len(c.data) <= chunk_bytes for c in chunks)
    assert [c.offset for c in chunks] == list(range(0, max(chunks[0].total_bytes, 1), chunk_bytes))
    assert same_tensor(arr, wire.assemble_chunks(iter(raw)))
    # protobuf's own bytes for the same chunks read the same (and message objects are taken)
    assert same_tensor(arr, wire.assemble_chunks([c.SerializeToString() for c in chunks]))
    assert same_tensor(arr, wire.assemble_chunks(chunks))


def _chunks(arr, chunk_bytes):
    return [
        pb.TensorChunk.FromString(c) for c in wire.iter_tensor_chunks(arr, chunk_bytes=chunk_bytes)
    ]


def test_bad_chunk_streams():
    arr = np.arange(10, dtype=np.int32)  # 40 bytes
    good = _chunks(arr, 8)
    assert np.array_equal(wire.assemble_chunks(good), arr)

    def variant(fn):
        cs = [pb.TensorChunk.FromString(c.SerializeToString()) for c in good]
        fn(cs)
        return cs

    def gap(cs):
        cs[2].offset += 1

    def overlap(cs):
        cs[2].offset -= 4

    def header_offset(cs):
        cs[0].offset = 8

    def repeated_header(cs):
        cs[3].dtype = "int32"

    def wrong_total(cs):
        cs[0].total_bytes = 44

    def empty_later(cs):
        cs.insert(2, pb.TensorChunk(offset=16))

    def extra(cs):
        cs.append(pb.TensorChunk(offset=40, data=b"\0"))

    def long_last(cs):
        cs[-1].data += b"\0"

    cases = {
        "empty": lambda cs: cs.clear(),
        "missing header": lambda cs: cs.pop(0),
        "header without dtype": lambda cs: cs[0].ClearField("dtype"),
        "header without shape": lambda cs: cs[0].ClearField("shape"),
        "gap": gap,
        "overlap": overlap,
        "reordered": lambda cs: cs.reverse(),
        "header offset": header_offset,
        "repeated header": repeated_header,
        "total != shape": wrong_total,
        "empty later chunk": empty_later,
        "too many bytes": extra,
        "long last chunk": long_last,
        "truncated": lambda cs: cs.pop(),
        "duplicate chunk": lambda cs: cs.insert(2, cs[1]),
    }
    for label, fn in cases.items():
        with pytest.raises(IAE):
            wire.assemble_chunks(variant(fn))
            pytest.fail("accepted: " + label)


def test_huge_chunk_headers_allocate_nothing():
    small_max_alloc(lambda: wire.assemble_chunks([header_chunk("uint8", [1 << 62], 1 << 62)]))
    small_max_alloc(lambda: wire.assemble_chunks([header_chunk("string", [1], 1 << 62)]))
    small_max_alloc(
        lambda: wire.assemble_chunks(
            [header_chunk("float32", [1 << 28], 1 << 30)], max_bytes=1 << 20
        )
    )
    small_max_alloc(lambda: wire.assemble_chunks([header_chunk("int8", [-4], 4)]))
    small_max_alloc(lambda: wire.assemble_chunks([header_chunk("int8", [4], -4)]))


def test_bad_string_streams():
    good = _chunks(np.array([b"ab", b"c"], dtype=object), 100)[0]
    assert wire.assemble_chunks([good]).tolist() == [b"ab", b"c"]
    # an element length running past the stream, and bytes left over after the elements
    overrun = header_chunk(
        "string", [2], 18, (99).to_bytes(8, "little") + b"ab" + (1).to_bytes(8, "little")
    )
    leftover = header_chunk("string", [1], 11, (1).to_bytes(8, "little") + b"abc")
    too_short = header_chunk("string", [2], 8, (0).to_bytes(8, "little"))
    for bad in (overrun, leftover, too_short):
        with pytest.raises(IAE):
            wire.assemble_chunks([bad])


def _fuzz_one(data):
    """Feeds bytes to the decoders; returns what happened, failing on anything unexpected."""
    try:
        msg = pb.TensorProto.FromString(data)
    except DecodeError:
        return "decode"
    try:
        out = wire.proto_to_tensor(msg, max_bytes=1 << 20)
    except IAE:
        return "invalid"
    assert isinstance(out, np.ndarray)
    return "ok"


def test_random_bytes_never_crash_the_decoder():
    rng = random.Random(1234)
    seen = {"decode": 0, "invalid": 0, "ok": 0}
    for _ in range(1000):
        data = bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 64)))
        seen[_fuzz_one(data)] += 1
    valid = wire.tensor_to_proto(np.arange(12, dtype=np.int32).reshape(3, 4)).SerializeToString()
    for _ in range(1000):  # valid messages with a few bytes changed
        data = bytearray(valid)
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] = rng.getrandbits(8)
        seen[_fuzz_one(bytes(data))] += 1
    assert sum(seen.values()) == 2000
    assert seen["decode"] and seen["invalid"]


def test_random_bytes_never_crash_graph_import():
    rng = random.Random(99)
    g = tf.Graph()
    with g.as_default():
        a = tf.constant([1.0, 2.0], name="a")
        tf.identity(a * 2.0, name="b")
    valid = wire.graph_to_proto(g).SerializeToString()
    outcomes = set()
    for _ in range(300):
        data = bytearray(valid)
        for _ in range(rng.randint(1, 3)):
            data[rng.randrange(len(data))] = rng.getrandbits(8)
        target = tf.Graph()
        try:
            gd = wire.assemble_graph_def([bytes(data)])
            wire.import_graph_def(gd, target)
            outcomes.add("ok")
        except IAE:
            outcomes.add("invalid")
            assert target.get_operations() == []  # a rejected import adds nothing
    assert "invalid" in outcomes


# -- named tensors of a step -------------------------------------------------------------------


def _receive(messages, cls, tensors_field, parts_field, **kw):
    rx = wire.NamedTensorReceiver(**kw)
    rest = [rx.add_message(wire.serialize(m), cls, tensors_field, parts_field) for m in messages]
    return rest, rx.finish()


def test_split_and_receive_named_tensors():
    big = np.arange(300_000, dtype=np.float64)  # 2.4 MB: streamed
    items = [
        ("x:0", np.float32(1)),
        ("big:0", big),
        ("s:0", [b"a", b"bb"]),
        ("m:0", np.ones((3, 3), np.int64)),
    ]
    inline, parts = wire.split_named_tensors(
        items, inline_bytes=1 << 20, chunk_bytes=1 << 19, wrap=(pb.RunStepRequest, "feed_part")
    )
    parts = list(parts)
    assert [n.name for n in inline] == ["x:0", "s:0", "m:0"]
    # each part is the bytes of a RunStepRequest holding one TensorPart
    parsed = [pb.RunStepRequest.FromString(p) for p in parts]
    assert all(len(m.feed_part) == 1 and not m.feed for m in parsed) and len(parts) == 5
    assert {m.feed_part[0].name for m in parsed} == {"big:0"}
    assert b"".join(m.feed_part[0].chunk.data for m in parsed) == big.tobytes()
    # as a server sees them: the first message with the inline ones, then the parts
    msgs = [pb.RunStepRequest(session_handle="h", fetch=["y:0"], feed=inline)] + parts
    assert all(len(wire.serialize(m)) < wire.MAX_MESSAGE_BYTES for m in msgs)
    rest, got = _receive(msgs, pb.RunStepRequest, "feed", "feed_part")
    assert rest[0].session_handle == "h" and list(rest[0].fetch) == ["y:0"]
    assert list(got) == ["x:0", "s:0", "m:0", "big:0"]
    assert np.array_equal(got["big:0"], big) and got["s:0"].tolist() == [b"a", b"bb"]
    # protobuf's own serialization of the same messages is read the same way
    _, again = _receive(
        [m if isinstance(m, pb.RunStepRequest) else pb.RunStepRequest.FromString(m) for m in msgs],
        pb.RunStepRequest,
        "feed",
        "feed_part",
    )
    assert np.array_equal(again["big:0"], big)


@pytest.mark.parametrize(
    "cls,field",
    [
        (pb.RunStepRequest, "feed_part"),
        (pb.RunGraphRequest, "send_part"),
        (pb.RunStepResponse, "tensor_part"),
        (pb.RunGraphResponse, "recv_part"),
    ],
)
def test_hand_written_parts_are_the_messages_protobuf_reads(cls, field):
    big = np.arange(300_000, dtype=np.float64)
    strs = np.array([b"x" * 1000] * 700, dtype=object)  # ~700 KB string tensor: streamed too
    _, parts = wire.split_named_tensors(
        [("big:0", big), ("s:0", strs)], inline_bytes=0, chunk_bytes=1 << 19, wrap=(cls, field)
    )
    parts = list(parts)
    assert all(isinstance(p, bytes) and len(p) < wire.MAX_MESSAGE_BYTES for p in parts)
    parsed = [cls.FromString(p) for p in parts]
    assert all(len(getattr(m, field)) == 1 for m in parsed)
    assert [m.SerializeToString() for m in parsed] == parts  # byte for byte what protobuf makes
    tensors = {"send_part": "send", "feed_part": "feed"}.get(field, field.replace("_part", ""))
    tensors = tensors if tensors in cls.DESCRIPTOR.fields_by_name else "tensor"
    _, got = _receive(parts, cls, tensors, field)
    assert np.array_equal(got["big:0"], big) and got["big:0"].flags.writeable
    assert got["s:0"].tolist() == strs.tolist()
    # a received numeric tensor owns its memory: it shares nothing with the messages
    got["big:0"][0] = 7.0
    assert parsed[0].ListFields()[0][1][0].chunk.data[:8] == np.float64(0).tobytes()
    with pytest.raises(ValueError):
        list(wire.split_named_tensors([("big:0", big)], inline_bytes=0, chunk_bytes=0)[1])


def test_coalesce_joins_small_messages_into_their_merge():
    small = [
        pb.RunStepResponse(
            step_id=7, tensor=[pb.NamedTensor(name="x:0", tensor=wire.tensor_to_proto(1.5))]
        ),
        pb.RunStepResponse(
            step_stats=pb.StepStatsProto(
                dev_stats=[pb.DeviceStepStatsProto(device="/job:ps/task:0")]
            )
        ),
        pb.RunStepResponse(
            step_stats=pb.StepStatsProto(
                dev_stats=[pb.DeviceStepStatsProto(device="/job:ps/task:1")]
            )
        ),
    ]
    _, parts = wire.split_named_tensors(
        [("big:0", np.zeros(1 << 19, np.float32))], inline_bytes=0, chunk_bytes=1 << 20
    )
    parts = list(parts)  # two messages of ~1 MiB: each goes alone
    out = list(wire.coalesce(small[:1] + parts + small[1:], limit=1 << 20))
    assert len(out) == 4 and out[1:3] == parts
    assert pb.RunStepResponse.FromString(out[0]) == small[0]
    merged = pb.RunStepResponse.FromString(out[3])  # two tasks' stats: one message, merged
    assert [d.device for d in merged.step_stats.dev_stats] == ["/job:ps/task:0", "/job:ps/task:1"]
    # a run of small messages is cut before it would pass the limit
    many = list(wire.coalesce([pb.RunStepResponse(step_id=i) for i in range(1, 1000)], limit=100))
    assert all(len(m) <= 100 for m in many) and len(many) > 10
    steps = [pb.RunStepResponse.FromString(m).step_id for m in many]
    assert steps[-1] == 999 and steps == sorted(steps)  # order kept: the last one wins
    assert list(wire.coalesce([])) == []


def test_a_tensors_part_is_sent_as_it_is_and_empty_messages_are_dropped():
    """A part of more than SMALL_TENSOR_BYTES is not copied into a join with its neighbours;
    empty messages (a step with nothing inline) add nothing, unless there is nothing else."""
    _, parts = wire.split_named_tensors(
        [("x:0", np.ones((128, 784), np.float32))], chunk_bytes=wire.STREAM_CHUNK_BYTES
    )
    (part,) = parts  # 400 KB: over SMALL_TENSOR_BYTES, so not inline even with budget left
    head = pb.RunStepResponse(step_id=3)
    out = list(wire.coalesce([pb.RunStepResponse(), head, part, head]))
    assert len(out) == 3 and out[1] is part
    assert list(wire.coalesce([pb.RunStepResponse()])) == [b""]


def test_with_parts_puts_what_fits_into_the_first_message():
    first = pb.RunStepRequest(session_handle="h", fetch=["y:0"])
    items = [("a:0", np.arange(50_000, dtype=np.float32)), ("b:0", np.float32(2))]
    wrap = (pb.RunStepRequest, "feed_part")
    inline, parts = wire.split_named_tensors(items, chunk_bytes=1 << 19, wrap=wrap)
    first.feed.extend(inline)
    one, rest = wire.with_parts(first, parts)
    assert rest is None and isinstance(one, bytes)  # one message: a step on an open call
    _, got = _receive([one], pb.RunStepRequest, "feed", "feed_part")
    assert np.array_equal(got["a:0"], items[0][1]) and got["b:0"] == 2
    big = [("c:0", np.zeros(1 << 19, np.float32))]  # 2 MiB: 4 parts, over the limit: none goes in
    _, parts = wire.split_named_tensors(big, chunk_bytes=1 << 19, wrap=wrap)
    head, rest = wire.with_parts(first, parts)
    rest = list(rest)
    assert len(rest) == 4 and len(head) < 1000  # the parts go as they are, after it
    header, got = _receive([head, *rest], pb.RunStepRequest, "feed", "feed_part")
    assert header[0].session_handle == "h" and np.array_equal(got["c:0"], big[0][1])


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["tensor", "tensor_part", "step_id", "step_stats"]),
            st.binary(max_size=40),
        ),
        max_size=8,
    )
)
def test_split_field_reads_what_protobuf_writes(fields):
    """Any RunStepResponse protobuf serializes: split_field gives the TensorParts as views of
    the bytes and the rest parsed as protobuf parses it."""
    msg = pb.RunStepResponse()
    for kind, blob in fields:
        if kind == "tensor":
            msg.tensor.add(name=blob.hex(), tensor=wire.tensor_to_proto(list(blob)))
        elif kind == "tensor_part":
            msg.tensor_part.add(
                name=blob.hex()[:10], chunk=pb.TensorChunk(offset=len(blob), data=blob)
            )
        elif kind == "step_id":
            msg.step_id = len(blob) * 1_000_003
        else:
            msg.step_stats.dev_stats.add(device=blob.hex())
    raw = msg.SerializeToString()
    rest, views = wire.split_field(pb.RunStepResponse, raw, 3)
    assert [pb.TensorPart.FromString(v) for v in views] == list(msg.tensor_part)
    msg.ClearField("tensor_part")
    assert rest == msg


def test_split_field_gives_the_same_for_small_and_large_messages():
    """A message of at most SMALL_TENSOR_BYTES without parts is parsed by protobuf in one call,
    a larger one (or one with parts) walked field by field: both give what protobuf reads, and
    a field that is not repeated (a TensorPart's chunk) is always walked."""
    for size in (10, wire.SMALL_TENSOR_BYTES + 1):
        msg = pb.RunStepResponse(step_id=7)
        msg.tensor.add(name="x", tensor=wire.tensor_to_proto(np.zeros(size // 4, np.uint8)))
        rest, views = wire.split_field(pb.RunStepResponse, msg.SerializeToString(), 3)
        assert rest == msg and views == []
        msg.tensor_part.add(name="p", chunk=pb.TensorChunk(offset=0, data=b"abc"))
        rest, views = wire.split_field(pb.RunStepResponse, msg.SerializeToString(), 3)
        assert [pb.TensorPart.FromString(v) for v in views] == list(msg.tensor_part)
        assert not rest.tensor_part and rest.tensor[0].name == "x"
    part = pb.TensorPart(name="p", chunk=pb.TensorChunk(offset=3, data=b"xyz"))
    rest, views = wire.split_field(pb.TensorPart, part.SerializeToString(), 2)
    assert rest.name == "p" and not rest.HasField("chunk")
    assert pb.TensorChunk.FromString(views[0]) == part.chunk
    with pytest.raises(IAE, match="Malformed"):
        wire.split_field(pb.RunStepResponse, b"\x12\x05ab", 3)  # a field cut short


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64))
def test_split_field_refuses_malformed_bytes_cleanly(blob):
    for cls, number in ((pb.RunStepResponse, 3), (pb.TensorChunk, 5), (pb.TensorPart, 2)):
        try:
            wire.split_field(cls, blob, number)
        except IAE as e:
            assert "Malformed" in e.message
    rx = wire.NamedTensorReceiver(max_total_bytes=1 << 16)
    try:
        rx.add_message(blob, pb.RunStepResponse, "tensor", "tensor_part")
        rx.finish()
    except IAE:
        pass


def test_named_tensor_receiver_refuses_bad_streams():
    arr = np.arange(1000, dtype=np.int32)
    parts = [
        pb.TensorPart(name="a", chunk=pb.TensorChunk.FromString(c))
        for c in wire.iter_tensor_chunks(arr, 1000)
    ]
    other = [
        pb.TensorPart(name="b", chunk=pb.TensorChunk.FromString(c))
        for c in wire.iter_tensor_chunks(arr, 1000)
    ]

    def feed(seq, **kw):
        rx = wire.NamedTensorReceiver(**kw)
        for p in seq:
            if isinstance(p, pb.NamedTensor):
                rx.add_tensor(p)
            else:
                rx.add_part(p.name, p.chunk)
        return rx.finish()

    assert np.array_equal(feed(parts)["a"], arr)
    # parts of two tensors may interleave (a master forwards several tasks' streams) ...
    got = feed([parts[0], other[0]] + parts[1:] + other[1:])
    assert np.array_equal(got["a"], arr) and np.array_equal(got["b"], arr)
    # ... but the parts of one tensor come in order
    with pytest.raises(IAE, match="in order"):
        feed([parts[0], parts[2], parts[1]] + parts[3:])
    with pytest.raises(IAE, match="twice"):
        feed(parts + parts)
    with pytest.raises(IAE, match="twice"):
        feed([pb.NamedTensor(name="a", tensor=wire.tensor_to_proto(1))] + parts)
    with pytest.raises(IAE, match="ended after"):
        feed(parts[:-1])
    with pytest.raises(IAE, match="limit"):
        feed(parts + other, max_total_bytes=6000)
    small_max_alloc(
        lambda: feed([pb.TensorPart(name="h", chunk=header_chunk("float32", [1 << 30], 1 << 32))])
    )


# -- graphs -----------------------------------------------------------------------------------


def same_attr(a, b):
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and same_tensor(a, b)
    if isinstance(a, tf.TensorShape):
        return (
            isinstance(b, tf.TensorShape)
            and a.ndims == b.ndims
            and (a.ndims is None or a.as_list() == b.as_list())
        )
    if isinstance(a, (list, tuple)):
        return isinstance(b, list) and len(a) == len(b) and all(map(same_attr, a, b))
    if isinstance(a, tf.DType):
        return isinstance(b, tf.DType) and a == b
    if isinstance(a, (bool, np.bool_)):
        return type(b) is bool and bool(a) == b
    if isinstance(a, (int, np.integer)):
        return type(b) is int and int(a) == b
    if isinstance(a, (float, np.floating)):
        return type(b) is float and float(a) == b
    return type(a) is type(b) and a == b


def assert_same_graph(g1, g2):
    ops1, ops2 = g1.get_operations(), g2.get_operations()
    assert [o.name for o in ops1] == [o.name for o in ops2]
    for o1, o2 in zip(ops1, ops2):
        n1, n2 = o1.node_def, o2.node_def
        assert (n1.name, n1.op, n1.input, n1.device) == (n2.name, n2.op, n2.input, n2.device)
        assert sorted(n1.attr) == sorted(n2.attr), n1.name
        for k in n1.attr:
            assert same_attr(n1.attr[k], n2.attr[k]), (n1.name, k, n1.attr[k], n2.attr[k])
        assert [c.name for c in o1.control_inputs] == [c.name for c in o2.control_inputs]
        assert len(o1.outputs) == len(o2.outputs)
        for t1, t2 in zip(o1.outputs, o2.outputs):
            assert t1.dtype == t2.dtype, t1
            assert same_attr(t1.shape, t2.shape), t1
        assert [t.graph for t in o2.inputs] == [g2] * len(o2.inputs)


def round_trip(g):
    gd = pb.GraphDef.FromString(wire.graph_to_proto(g).SerializeToString())
    g2 = tf.Graph()
    created = wire.import_graph_def(gd, g2)
    assert len(created) == len(g.get_operations())
    assert_same_graph(g, g2)
    return g2


def build_model():
    g = tf.Graph()
    with g.as_default():
        tf.set_random_seed(42)
        with tf.device("/cpu:0"):
            w = tf.Variable(tf.random_normal([3, 2], seed=1), name="w")
            b = tf.Variable(tf.zeros([2]), name="b")
        with tf.variable_scope("layer"):
            k = tf.get_variable("k", (2, 2), initializer=tf.constant_initializer(2.0))
        x = tf.placeholder(tf.float32, [None, 3], name="x")
        with tf.name_scope("model"):
            h = tf.matmul(x, w) + b
            out = tf.matmul(h, k, name="out")
            total = tf.reduce_sum(out, name="total")
            mean = tf.reduce_mean(out, axis=0, keepdims=True)
        with tf.control_dependencies([total]):
            tf.identity(mean, name="after")
        with tf.device("/gpu:0"):
            counter = tf.Variable(0, dtype=tf.int64, name="counter", trainable=False)
        tf.assign_add(counter, tf.constant(1, tf.int64), name="step")
        tf.constant([[b"a", b"bc"], [b"", b"def"]], name="words")
        tf.constant(True, name="flag")
        tf.cast(tf.constant([1, 2], tf.int32), tf.float64, name="cast")
        with tf.container("experiment"):
            tf.Variable(1.5, name="kept")
        tf.global_variables_initializer()
    return g


def test_graph_round_trip_is_faithful_and_runs_the_same():
    g = build_model()
    g2 = round_trip(g)
    # a few things worth seeing explicitly
    assert g2.get_operation_by_name("w/read").get_attr("_class") == [b"loc:@w"]
    assert g2.get_operation_by_name("w").outputs[0].dtype == tf.dtypes.float32_ref
    assert g2.get_operation_by_name("counter").device == "/device:GPU:0"
    assert g2.get_operation_by_name("kept").get_attr("container") == "experiment"
    assert [c.name for c in g2.get_operation_by_name("after").control_inputs] == ["model/total"]
    assert g2.get_tensor_by_name("x:0").shape.as_list() == [None, 3]
    feed = np.arange(12, dtype=np.float32).reshape(4, 3)
    fetch = ["model/out:0", "model/total:0", "after:0", "words:0", "flag:0", "cast:0"]
    results = []
    for graph in (g, g2):
        with tf.Session(graph=graph) as sess:
            sess.run("init")
            values = sess.run(fetch, {"x:0": feed})
            values.append(sess.run("step:0"))
            values.append(sess.run("step:0"))
            results.append(values)
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)
    assert results[1][-1] == 2


def test_graph_with_cluster_pins_and_groups_round_trips():
    g = tf.Graph()
    with g.as_default():
        with tf.device("/job:ps/task:0"):
            v = tf.Variable([1.0, 2.0], name="v")
        with tf.device(lambda op: "/job:worker/task:1/cpu:0"):
            u = tf.Variable([3.0, 4.0], name="u")
        with tf.device("/job:worker/task:0"):
            s = tf.add(v, u, name="s")
        with tf.colocate_with(s.op):
            tf.identity(s, name="next_to_s")
        tf.group(v.initializer, u.initializer, name="init_all")
        tf.stack([v, u], axis=1, name="stacked")
        tf.concat([v, u], 0, name="joined")
        tf.no_op(name="nothing")
    g2 = round_trip(g)
    assert g2.get_operation_by_name("v").device == "/job:ps/task:0"
    assert g2.get_operation_by_name("next_to_s").get_attr("_class") == [b"loc:@s"]
    assert g2.get_operation_by_name("nothing").outputs == []


def test_import_ignores_the_target_graphs_blocks_and_reserves_names():
    g = build_model()
    gd = wire.graph_to_proto(g)
    g2 = tf.Graph()
    with g2.as_default():
        pre = tf.no_op(name="pre")
        with (
            tf.device("/job:ps/task:3"),
            tf.control_dependencies([pre]),
            tf.name_scope("outer"),
            tf.container("other"),
        ):
            wire.import_graph_def(gd)
        add = tf.add(tf.constant(1.0, name="one"), 2.0)
        scoped = tf.matmul(tf.ones([1, 1]), tf.ones([1, 1]), name="model")
    imported = g2.get_operations()[1 : 1 + len(gd.node)]
    for op, ref in zip(imported, g.get_operations()):
        assert op.name == ref.name and op.device == ref.device
        assert [c.name for c in op.control_inputs] == [c.name for c in ref.control_inputs]
        assert op.node_def.attr.get("container") == ref.node_def.attr.get("container")
    assert add.op.name == "Add"
    assert scoped.op.name == "model_1"  # "model" is an imported scope


def test_extending_a_graph_sends_only_new_nodes():
    g = tf.Graph()
    with g.as_default():
        a = tf.constant(2.0, name="a")
        b = tf.multiply(a, 3.0, name="b")
    first = wire.graph_to_proto(g)
    assert first.version == 3  # a, b/y, b
    with g.as_default():
        c = tf.add(b, a, name="c")
    ext = wire.graph_to_proto(g, since_version=first.version)
    assert [n.name for n in ext.node] == ["c"] and ext.version == 4
    g2 = tf.Graph()
    wire.import_graph_def(first, g2)
    wire.import_graph_def(ext, g2)
    assert_same_graph(g, g2)
    with tf.Session(graph=g2) as sess:
        assert sess.run("c:0") == 8.0
    assert wire.graph_to_proto([c.op, b.op]).node[0].name == "b"  # topological, any order in
    with pytest.raises(IAE, match="Duplicate"):
        wire.import_graph_def(ext, g2)


def test_graph_to_proto_orders_forward_control_edges():
    g = tf.Graph()
    with g.as_default():
        a = tf.constant(1.0, name="a")
        b = tf.constant(2.0, name="b")
    a.op._add_control_input(b.op)  # an edge to an op created later
    gd = wire.graph_to_proto(g)
    assert [n.name for n in gd.node] == ["b", "a"]
    g2 = tf.Graph()
    wire.import_graph_def(gd, g2)
    assert [c.name for c in g2.get_operation_by_name("a").control_inputs] == ["b"]


def _valid_def():
    g = tf.Graph()
    with g.as_default():
        a = tf.constant([1.0], name="a")
        tf.identity(a, name="b")
    return wire.graph_to_proto(g)


def _mutated(fn):
    gd = _valid_def()
    fn(gd)
    return pb.GraphDef.FromString(gd.SerializeToString())


def test_import_refuses_bad_graph_defs_and_leaves_the_graph_alone():
    def set_input(value):
        def fn(gd):
            gd.node[1].input[:] = value

        return fn

    def set_attr(key, **kw):
        def fn(gd):
            gd.node[1].attr[key].CopyFrom(pb.AttrValue(**kw))

        return fn

    def unknown_op(gd):
        gd.node[1].op = "LaunchMissiles"

    def bad_name(gd):
        gd.node[1].name = "bad name!"

    def list_mixing_kinds(gd):
        gd.node[1].attr["x"].list.i.append(1)
        gd.node[1].attr["x"].list.s.append(b"a")

    cases = {
        "unknown op": unknown_op,
        "unknown input": set_input(["nowhere"]),
        "forward reference": lambda gd: gd.node.reverse(),
        "duplicate": lambda gd: gd.node.add().CopyFrom(gd.node[0]),
        "output index": set_input(["a:1"]),
        "malformed input": set_input(["a:x"]),
        "negative input index": set_input(["a:-1"]),
        "data after control": set_input(["^a", "a"]),
        "bad name": bad_name,
        "no _output_types": lambda gd: [
            gd.node[1].attr.pop(k) for k in ("_output_types", "_output_shapes")
        ],
        "shapes/types length": lambda gd: gd.node[1].attr["_output_shapes"].list.shape.add(),
        "types not dtypes": set_attr("_output_types", i=3),
        "unknown dtype attr": set_attr("T", type="float128"),
        "bad tensor attr": lambda gd: setattr(gd.node[0].attr["value"].tensor, "content", b"!"),
        "bad shape attr": lambda gd: (
            gd.node[0].attr["_output_shapes"].list.shape[0].dims.append(-7)
        ),
        "list mixing kinds": list_mixing_kinds,
    }
    for label, fn in cases.items():
        target = tf.Graph()
        with pytest.raises(IAE):
            wire.import_graph_def(_mutated(fn), target)
            pytest.fail("accepted: " + label)
        assert target.get_operations() == [], label
    target = tf.Graph()
    assert len(wire.import_graph_def(_valid_def(), target)) == 2


def test_attr_values_round_trip():
    values = {
        "none": None,
        "t": True,
        "i": -(1 << 63),
        "f": 0.1,
        "s": b"\x00\xff",
        "u": "héllo",
        "type": tf.dtypes.int32_ref,
        "shape": tf.TensorShape([None, 3]),
        "unknown": tf.TensorShape(None),
        "scalar_shape": tf.TensorShape([]),
        "tensor": np.array([[1, 2]], np.uint16),
        "empty": [],
        "li": [1, 2, 3],
        "lf": [1.5],
        "lb": [True, False],
        "ls": [b"loc:@v"],
        "lu": ["a", "b"],
        "ltype": [tf.float32, tf.string],
        "ltensor": [np.zeros(2)],
        "lshape": [tf.TensorShape([1]), tf.TensorShape(None)],
    }
    for key, value in values.items():
        msg = pb.AttrValue.FromString(wire.attr_to_proto(value, key).SerializeToString())
        back = wire.attr_from_proto(msg, wire.MAX_TENSOR_BYTES)
        if value is None:
            assert back is None
        else:
            assert same_attr(value, back), (key, value, back)
    for bad in ({"a": 1}, [1, "a"], object(), 1 << 64, [None]):
        with pytest.raises(IAE):
            wire.attr_to_proto(bad, "test")


def test_graph_def_chunks():
    g = tf.Graph()
    with g.as_default():
        tf.constant(np.arange(600_000, dtype=np.float64), name="big")  # 4.8 MB in one node
    gd = wire.graph_to_proto(g)
    assert gd.ByteSize() > wire.MAX_MESSAGE_BYTES
    pieces = list(wire.iter_graph_def_chunks(gd))
    assert max(len(p) for p in pieces) <= wire.DEFAULT_CHUNK_BYTES and len(pieces) == 5
    msgs = [pb.CreateSessionRequest(graph_def_chunk=p) for p in pieces]
    assert all(m.ByteSize() < wire.MAX_MESSAGE_BYTES for m in msgs)
    again = wire.assemble_graph_def(m.graph_def_chunk for m in msgs)
    assert again == gd
    with pytest.raises(IAE, match="limit"):
        wire.assemble_graph_def(pieces, max_bytes=1 << 20)
    with pytest.raises(IAE, match="Malformed"):
        wire.assemble_graph_def([b"\xff\xff\xff"])
    assert list(wire.iter_graph_def_chunks(pb.GraphDef())) == [b""]


# -- sessions, step stats, errors --------------------------------------------------------------


def test_session_config_round_trip():
    cfg = tf.ConfigProto(
        allow_soft_placement=True,
        log_device_placement=True,
        operation_timeout_in_ms=1500,
        device_filters=["/job:ps", "/job:w/task:1"],
        isolate_session_state=True,
    )
    msg = pb.SessionConfig.FromString(wire.session_config_to_proto(cfg).SerializeToString())
    back = wire.proto_to_session_config(msg)
    for f in (
        "allow_soft_placement",
        "log_device_placement",
        "operation_timeout_in_ms",
        "isolate_session_state",
    ):
        assert getattr(back, f) == getattr(cfg, f)
    assert list(back.device_filters) == ["/job:ps", "/job:w/task:1"]
    assert wire.session_config_to_proto(None) == pb.SessionConfig()


def test_step_stats_round_trip():
    g = tf.Graph()
    with g.as_default():
        with tf.device("/cpu:0"):
            a = tf.constant(np.ones((2, 2), np.float32))
        with tf.device("/gpu:0"):
            b = tf.matmul(a, a)
    md = tf.RunMetadata()
    with tf.Session(graph=g) as sess:
        sess.run(b, options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE), run_metadata=md)
    stats = md.step_stats
    assert stats.dev_stats and stats.transfers
    back = wire.proto_to_step_stats(
        pb.StepStatsProto.FromString(wire.step_stats_to_proto(stats).SerializeToString())
    )
    assert [d.device for d in back.dev_stats] == [d.device for d in stats.dev_stats]
    for d1, d2 in zip(stats.dev_stats, back.dev_stats):
        for n1, n2 in zip(d1.node_stats, d2.node_stats):
            for f in NodeFields:
                assert getattr(n1, f) == getattr(n2, f), f
            assert [(o.slot, o.dtype, o.shape, o.requested_bytes) for o in n1.output] == [
                (o.slot, o.dtype, o.shape, o.requested_bytes) for o in n2.output
            ]
            assert len(n1.chunks) == len(n2.chunks)
    for t1, t2 in zip(stats.transfers, back.transfers):
        assert (t1.tensor_name, t1.src_device, t1.dst_device, t1.bytes, t1.start_micros) == (
            t2.tensor_name,
            t2.src_device,
            t2.dst_device,
            t2.bytes,
            t2.start_micros,
        )


NodeFields = (
    "node_name",
    "op_type",
    "all_start_micros",
    "op_start_rel_micros",
    "op_end_rel_micros",
    "all_end_rel_micros",
    "scheduled_micros",
    "thread_id",
    "thread_name",
    "pool",
    "timeline_label",
)


def test_errors_travel_as_grpc_status():
    import grpc

    err = errors.FailedPreconditionError(None, None, "Attempting to use uninitialized value v")
    code, details = wire.status_from_error(err)
    assert code is grpc.StatusCode.FAILED_PRECONDITION and details == err.message
    back = wire.error_from_status(code, details)
    assert type(back) is errors.FailedPreconditionError and back.message == err.message
    assert (
        type(wire.error_from_status(grpc.StatusCode.UNAVAILABLE, "gone")) is errors.UnavailableError
    )
    assert type(wire.error_from_status(4, None)) is errors.DeadlineExceededError
    assert type(wire.error_from_status(0, "?")) is errors.UnknownError
    code, details = wire.status_from_error(ValueError("boom"))
    assert code is grpc.StatusCode.INTERNAL and details == "ValueError: boom"
    code, details = wire.status_from_error(errors.InternalError(None, None, "é" * 10000))
    assert len(details.encode()) <= wire.MAX_ERROR_MESSAGE_BYTES and details.endswith("truncated]")
