"""Tests for ``tf.ConfigProto``, ``tf.GPUOptions``, ``tf.RunOptions`` and friends: they behave
like TF's protocol-buffer messages (spec §5.3).  Book sections: "Managing the GPU RAM",
"Logging placements", "Soft placement", "Parallel Execution".

The expected behaviour is that of the Python protobuf runtime TF ships with: proto3 defaults,
refusal of unknown fields and wrongly typed values, nested messages copied on construction,
text format with fields in field-number order (config.proto: device_count = 1,
intra_op_parallelism_threads = 2, placement_period = 3, device_filters = 4,
inter_op_parallelism_threads = 5, gpu_options = 6, allow_soft_placement = 7,
log_device_placement = 8, use_per_session_threads = 9, graph_options = 10,
operation_timeout_in_ms = 11, session_inter_op_thread_pool = 12; GPUOptions:
per_process_gpu_memory_fraction = 1, allocator_type = 2, deferred_deletion_bytes = 3,
allow_growth = 4, visible_device_list = 5).
"""

import pytest

import minitf as tf

# -- defaults -----------------------------------------------------------------------------------


def test_config_defaults():
    """§5.3: proto3 — every unset field reads as 0 / False / '' / empty."""
    c = tf.ConfigProto()
    assert c.allow_soft_placement is False
    assert c.log_device_placement is False
    assert c.inter_op_parallelism_threads == 0
    assert c.intra_op_parallelism_threads == 0
    assert c.use_per_session_threads is False
    assert c.operation_timeout_in_ms == 0
    assert c.placement_period == 0
    assert c.isolate_session_state is False
    assert len(c.device_count) == 0
    assert len(c.device_filters) == 0
    assert len(c.session_inter_op_thread_pool) == 0


def test_gpu_options_defaults():
    """§5.3: GPUOptions fields default to 0 / False / ''."""
    g = tf.GPUOptions()
    assert g.per_process_gpu_memory_fraction == 0.0
    assert isinstance(g.per_process_gpu_memory_fraction, float)
    assert g.allow_growth is False
    assert g.visible_device_list == ""
    assert g.allocator_type == ""
    assert g.force_gpu_compatible is False
    c = tf.ConfigProto()
    assert c.gpu_options.allow_growth is False
    assert c.gpu_options.visible_device_list == ""


def test_run_options_defaults_and_constants():
    """§5.3: RunOptions trace levels NO_TRACE=0 ... FULL_TRACE=3."""
    assert (
        tf.RunOptions.NO_TRACE,
        tf.RunOptions.SOFTWARE_TRACE,
        tf.RunOptions.HARDWARE_TRACE,
        tf.RunOptions.FULL_TRACE,
    ) == (0, 1, 2, 3)
    r = tf.RunOptions()
    assert r.trace_level == 0
    assert r.timeout_in_ms == 0
    assert r.output_partition_graphs is False
    r2 = tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE, timeout_in_ms=500)
    assert r2.trace_level == 3 and r2.timeout_in_ms == 500


def test_run_metadata_fields():
    """RunMetadata has step_stats and partition_graphs, empty by default."""
    md = tf.RunMetadata()
    assert len(md.partition_graphs) == 0
    assert len(md.step_stats.dev_stats) == 0
    assert str(md) == ""


# -- construction and assignment ---------------------------------------------------------------


def test_kwargs_constructor():
    """Fields can be set by keyword, nested messages included."""
    c = tf.ConfigProto(
        allow_soft_placement=True,
        log_device_placement=True,
        inter_op_parallelism_threads=2,
        intra_op_parallelism_threads=4,
        gpu_options=tf.GPUOptions(per_process_gpu_memory_fraction=0.4, allow_growth=True),
    )
    assert c.allow_soft_placement is True and c.log_device_placement is True
    assert c.inter_op_parallelism_threads == 2 and c.intra_op_parallelism_threads == 4
    assert c.gpu_options.per_process_gpu_memory_fraction == pytest.approx(0.4)
    assert c.gpu_options.allow_growth is True


def test_nested_message_from_dict():
    """A nested message may also be given as a dict of its fields."""
    c = tf.ConfigProto(gpu_options={"allow_growth": True, "visible_device_list": "1"})
    assert c.gpu_options.allow_growth is True
    assert c.gpu_options.visible_device_list == "1"


def test_nested_message_is_copied_on_construction():
    """Protobuf copies a nested message given to the constructor."""
    g = tf.GPUOptions(allow_growth=True)
    c = tf.ConfigProto(gpu_options=g)
    g.allow_growth = False
    assert c.gpu_options.allow_growth is True


def test_attribute_setting():
    """Scalar fields are set by attribute; nested messages are changed in place."""
    c = tf.ConfigProto()
    c.allow_soft_placement = True
    c.inter_op_parallelism_threads = 8
    c.operation_timeout_in_ms = 1000
    c.gpu_options.allow_growth = True
    c.gpu_options.per_process_gpu_memory_fraction = 1  # an int is accepted for a double
    assert c.allow_soft_placement is True
    assert c.inter_op_parallelism_threads == 8
    assert c.operation_timeout_in_ms == 1000
    assert c.gpu_options.allow_growth is True
    assert c.gpu_options.per_process_gpu_memory_fraction == 1.0
    assert isinstance(c.gpu_options.per_process_gpu_memory_fraction, float)
    c.allow_soft_placement = False
    assert c.allow_soft_placement is False


def test_unknown_field_in_constructor_is_value_error():
    """Protobuf: 'Protocol message ConfigProto has no "foo" field.' (ValueError)."""
    with pytest.raises(ValueError, match='Protocol message ConfigProto has no "foo" field.'):
        tf.ConfigProto(foo=1)
    with pytest.raises(ValueError, match="GPUOptions"):
        tf.GPUOptions(allow_groth=True)
    with pytest.raises(ValueError):
        tf.RunOptions(trace=3)


def test_unknown_attribute_is_attribute_error():
    """Reading or setting an unknown attribute is an AttributeError."""
    c = tf.ConfigProto()
    with pytest.raises(AttributeError):
        c.log_device_placment = True
    with pytest.raises(AttributeError):
        c.gpu_options.allow_groth = True
    with pytest.raises(AttributeError):
        c.no_such_field


@pytest.mark.parametrize(
    "build",
    [
        lambda: tf.ConfigProto(inter_op_parallelism_threads="2"),
        lambda: tf.ConfigProto(allow_soft_placement="yes"),
        lambda: tf.ConfigProto(gpu_options=5),
        lambda: tf.GPUOptions(per_process_gpu_memory_fraction="0.4"),
        lambda: tf.GPUOptions(visible_device_list=1),
        lambda: tf.RunOptions(trace_level="FULL"),
    ],
)
def test_wrong_type_in_constructor_is_type_error(build):
    """Wrongly typed values are refused with TypeError."""
    with pytest.raises(TypeError):
        build()


def test_wrong_type_assignment_is_type_error():
    """Attribute assignment type-checks like protobuf."""
    c = tf.ConfigProto()
    with pytest.raises(TypeError):
        c.inter_op_parallelism_threads = 1.5
    with pytest.raises(TypeError):
        c.inter_op_parallelism_threads = "2"
    with pytest.raises(TypeError):
        c.allow_soft_placement = "yes"
    with pytest.raises(TypeError):
        c.gpu_options.visible_device_list = 1
    with pytest.raises(TypeError):
        c.gpu_options.per_process_gpu_memory_fraction = "0.4"
    assert c.inter_op_parallelism_threads == 0
    assert c.gpu_options.visible_device_list == ""


def test_message_and_container_fields_cannot_be_assigned():
    """Protobuf forbids assigning to message, map and repeated fields."""
    c = tf.ConfigProto()
    with pytest.raises(AttributeError):
        c.gpu_options = tf.GPUOptions()
    with pytest.raises(AttributeError):
        c.device_filters = ["/job:ps"]
    with pytest.raises(AttributeError):
        c.device_count = {"GPU": 0}


# -- map and repeated fields --------------------------------------------------------------------


def test_device_count_map():
    """§5.3: device_count maps device type to a count."""
    c = tf.ConfigProto(device_count={"GPU": 0, "CPU": 2})
    assert c.device_count["GPU"] == 0
    assert c.device_count["CPU"] == 2
    c.device_count["CPU"] = 4
    assert dict(c.device_count) == {"GPU": 0, "CPU": 4}
    assert "GPU" in c.device_count and "XLA_CPU" not in c.device_count
    assert len(c.device_count) == 2


def test_device_count_map_type_checks():
    """Map keys must be strings and values ints."""
    c = tf.ConfigProto()
    with pytest.raises(TypeError):
        c.device_count[1] = 2
    with pytest.raises(TypeError):
        c.device_count["CPU"] = "x"
    with pytest.raises(TypeError):
        tf.ConfigProto(device_count={"CPU": 1.5})
    assert len(c.device_count) == 0


def test_repeated_string_field():
    """device_filters is a repeated string: append, extend, constructor list, type checks."""
    c = tf.ConfigProto(device_filters=["/job:ps"])
    c.device_filters.append("/job:worker/task:0")
    c.device_filters.extend(["/job:worker/task:1"])
    assert list(c.device_filters) == ["/job:ps", "/job:worker/task:0", "/job:worker/task:1"]
    assert len(c.device_filters) == 3
    assert c.device_filters[0] == "/job:ps"
    with pytest.raises(TypeError):
        c.device_filters.append(3)
    assert len(c.device_filters) == 3


def test_repeated_message_field():
    """session_inter_op_thread_pool is a repeated ThreadPoolOptionProto (add / append)."""
    c = tf.ConfigProto()
    p = c.session_inter_op_thread_pool.add(num_threads=2, global_name="shared")
    assert p.num_threads == 2 and p.global_name == "shared"
    c.session_inter_op_thread_pool.add().num_threads = 3
    assert [x.num_threads for x in c.session_inter_op_thread_pool] == [2, 3]
    c2 = tf.ConfigProto(session_inter_op_thread_pool=[tf.ThreadPoolOptionProto(num_threads=1)])
    assert c2.session_inter_op_thread_pool[0].num_threads == 1


# -- text format ---------------------------------------------------------------------------------


def test_str_empty():
    """An all-default message prints as an empty string."""
    assert str(tf.ConfigProto()) == ""
    assert str(tf.GPUOptions()) == ""
    assert str(tf.ConfigProto(allow_soft_placement=False)) == ""  # proto3: defaults not printed


def test_str_scalars():
    """Booleans print as true/false, one field per line."""
    c = tf.ConfigProto(allow_soft_placement=True, log_device_placement=True)
    assert str(c) == "allow_soft_placement: true\nlog_device_placement: true\n"
    assert (
        str(tf.ConfigProto(inter_op_parallelism_threads=2)) == "inter_op_parallelism_threads: 2\n"
    )


def test_str_nested_message():
    """Nested messages print as a block indented by two spaces."""
    c = tf.ConfigProto(gpu_options=tf.GPUOptions(per_process_gpu_memory_fraction=0.4))
    assert str(c) == "gpu_options {\n  per_process_gpu_memory_fraction: 0.4\n}\n"
    c2 = tf.ConfigProto(gpu_options=tf.GPUOptions(allow_growth=True))
    assert str(c2) == "gpu_options {\n  allow_growth: true\n}\n"


def test_str_map_and_repeated():
    """Map entries print as key/value blocks; repeated strings once per element, quoted."""
    assert (
        str(tf.ConfigProto(device_count={"GPU": 0}))
        == 'device_count {\n  key: "GPU"\n  value: 0\n}\n'
    )
    assert (
        str(tf.ConfigProto(device_filters=["/job:ps", "/job:worker/task:1"]))
        == 'device_filters: "/job:ps"\ndevice_filters: "/job:worker/task:1"\n'
    )
    c = tf.ConfigProto()
    c.session_inter_op_thread_pool.add(num_threads=2)
    assert str(c) == "session_inter_op_thread_pool {\n  num_threads: 2\n}\n"


def test_str_fields_in_field_number_order():
    """Text format lists fields by field number, not by declaration or assignment order."""
    c = tf.ConfigProto(
        inter_op_parallelism_threads=2, intra_op_parallelism_threads=4, device_filters=["/job:ps"]
    )
    assert str(c) == (
        "intra_op_parallelism_threads: 4\n"
        'device_filters: "/job:ps"\n'
        "inter_op_parallelism_threads: 2\n"
    )
    g = tf.GPUOptions(allow_growth=True, allocator_type="BFC", per_process_gpu_memory_fraction=0.4)
    assert str(g) == (
        'per_process_gpu_memory_fraction: 0.4\nallocator_type: "BFC"\nallow_growth: true\n'
    )


def test_str_enum_field_prints_name():
    """RunOptions.trace_level is an enum: text format prints its name."""
    assert str(tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE)) == "trace_level: FULL_TRACE\n"


# -- equality, HasField, CopyFrom, MergeFrom ---------------------------------------------------


def test_equality():
    """Messages are equal when their fields are equal."""
    assert tf.ConfigProto() == tf.ConfigProto()
    a = tf.ConfigProto(
        allow_soft_placement=True,
        device_count={"GPU": 1},
        gpu_options=tf.GPUOptions(allow_growth=True),
    )
    b = tf.ConfigProto(
        gpu_options=tf.GPUOptions(allow_growth=True),
        device_count={"GPU": 1},
        allow_soft_placement=True,
    )
    assert a == b
    assert not (a != b)
    b.gpu_options.allow_growth = False
    assert a != b
    assert tf.ConfigProto(allow_soft_placement=True) != tf.ConfigProto()
    assert tf.ConfigProto() != tf.GPUOptions()
    assert tf.ConfigProto() != 1
    read = tf.ConfigProto()
    read.gpu_options.allow_growth  # reading a nested message does not change the value
    assert read == tf.ConfigProto()


def test_has_field_for_nested_message():
    """HasField('gpu_options') is False until a field of it is set; reading does not set it."""
    c = tf.ConfigProto()
    assert not c.HasField("gpu_options")
    assert c.gpu_options.allow_growth is False
    assert not c.HasField("gpu_options")
    c.gpu_options.allow_growth = True
    assert c.HasField("gpu_options")


def test_copy_from_replaces_everything():
    """CopyFrom makes the message equal to the source, dropping fields only it had."""
    src = tf.ConfigProto(
        log_device_placement=True,
        device_filters=["b"],
        gpu_options=tf.GPUOptions(allow_growth=True),
    )
    dst = tf.ConfigProto(allow_soft_placement=True, device_filters=["a"], device_count={"CPU": 2})
    dst.CopyFrom(src)
    assert dst == src
    assert dst.allow_soft_placement is False
    assert list(dst.device_filters) == ["b"]
    assert len(dst.device_count) == 0
    assert dst.gpu_options.allow_growth is True
    # an independent copy
    src.gpu_options.allow_growth = False
    src.device_filters.append("c")
    assert dst.gpu_options.allow_growth is True
    assert list(dst.device_filters) == ["b"]


def test_copy_from_copies_repeated_messages():
    """CopyFrom deep-copies repeated message elements."""
    a = tf.ConfigProto()
    a.session_inter_op_thread_pool.add(num_threads=2)
    b = tf.ConfigProto()
    b.CopyFrom(a)
    a.session_inter_op_thread_pool[0].num_threads = 5
    assert b.session_inter_op_thread_pool[0].num_threads == 2


def test_copy_from_wrong_type():
    """CopyFrom of another message type is a TypeError."""
    with pytest.raises(TypeError):
        tf.ConfigProto().CopyFrom(tf.GPUOptions())


def test_merge_from():
    """MergeFrom overwrites set scalars, appends repeated fields, merges nested messages."""
    m = tf.ConfigProto(
        allow_soft_placement=True,
        device_filters=["a"],
        gpu_options=tf.GPUOptions(allow_growth=True),
    )
    n = tf.ConfigProto(
        log_device_placement=True,
        device_filters=["b"],
        gpu_options=tf.GPUOptions(visible_device_list="1"),
    )
    m.MergeFrom(n)
    assert m.allow_soft_placement is True and m.log_device_placement is True
    assert list(m.device_filters) == ["a", "b"]
    assert m.gpu_options.allow_growth is True
    assert m.gpu_options.visible_device_list == "1"


def test_config_is_used_by_session():
    """A ConfigProto is accepted by tf.Session and its settings take effect."""
    c = tf.constant(1.0)
    cfg = tf.ConfigProto(device_count={"GPU": 0})
    with tf.Session(config=cfg) as sess:
        assert [d.device_type for d in sess.list_devices()] == ["CPU"]
        assert sess.run(c) == 1.0
    with pytest.raises(TypeError):
        tf.Session(config={"allow_soft_placement": True})
