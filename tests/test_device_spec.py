"""Tests for minitf.framework.device_spec: TF's Python device-string rules (spec §1.2-1.6,
§11.3, §11.7).  Book sections: "Placing Operations on Devices", "Pinning Operations Across
Tasks"."""

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minitf.framework import device_spec as pydev
from minitf.framework.device_spec import DeviceSpec
from minitf.runtime import device_name_utils as cdev


def fields(spec):
    return (spec.job, spec.replica, spec.task, spec.device_type, spec.device_index)


def parse(s):
    return fields(DeviceSpec.from_string(s))


# -- §1.2 the parser --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ("/job:foo/replica:0/task:1/device:GPU:2", ("foo", 0, 1, "GPU", 2)),
        ("/job:worker", ("worker", None, None, None, None)),
        ("/replica:3", (None, 3, None, None, None)),
        ("/task:7", (None, None, 7, None, None)),
        ("/device:GPU:1", (None, None, None, "GPU", 1)),
        ("/device:GPU:*", (None, None, None, "GPU", None)),
        ("/device:XLA_CPU:0", (None, None, None, "XLA_CPU", 0)),
        ("/device:MyCustom:4", (None, None, None, "MyCustom", 4)),
    ],
)
def test_full_forms(text, expected):
    assert parse(text) == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        ("/cpu:0", ("CPU", 0)),
        ("/CPU:0", ("CPU", 0)),
        ("/Cpu:1", ("CPU", 1)),
        ("/cPU:2", ("CPU", 2)),
        ("/gpu:1", ("GPU", 1)),
        ("/GPU:3", ("GPU", 3)),
        ("/gPu:0", ("GPU", 0)),
        ("/cpu", ("CPU", None)),
        ("/gpu", ("GPU", None)),
        ("/GPU:*", ("GPU", None)),
        ("/cpu:*", ("CPU", None)),
    ],
)
def test_legacy_forms_any_case(text, expected):
    assert parse(text)[3:] == expected
    assert parse(text)[:3] == (None, None, None)


def test_device_form_lowercase_cpu_gpu_upper_cased_other_spellings_kept():
    # TF 1.15: exact "cpu"/"gpu" are upper-cased by the setter; anything else is verbatim.
    assert parse("/device:gpu:0")[3] == "GPU"
    assert parse("/device:cpu:*")[3] == "CPU"
    assert parse("/device:Gpu:0")[3] == "Gpu"
    assert parse("/device:xla_gpu:0")[3] == "xla_gpu"


def test_last_job_replica_task_wins():
    assert parse("/job:a/task:1/task:2") == ("a", None, 2, None, None)
    assert parse("/job:a/job:b") == ("b", None, None, None, None)
    assert parse("/replica:1/replica:0") == (None, 0, None, None, None)


def test_order_is_free_and_leading_slash_optional():
    assert DeviceSpec.from_string("/replica:0/job:foo").to_string() == "/job:foo/replica:0"
    assert parse("gpu:0") == (None, None, None, "GPU", 0)
    assert parse("cpu:0/job:x") == ("x", None, None, "CPU", 0)
    assert parse("device:GPU:1/task:2/job:w") == ("w", None, 2, "GPU", 1)


@pytest.mark.parametrize("text", ["", "/", "//", "///"])
def test_empty_gives_all_unset(text):
    assert parse(text) == (None,) * 5
    assert DeviceSpec.from_string(text).to_string() == ""


def test_empty_pieces_ignored():
    assert parse("//job:a//task:1/") == ("a", None, 1, None, None)
    # A piece whose first part is empty (":x") is skipped too, as in TF's parser.
    assert parse("/:x/job:a") == ("a", None, None, None, None)


def test_job_is_not_validated():
    assert parse("/job:*")[0] == "*"
    assert parse("/job:123")[0] == "123"
    assert parse("/job:")[0] == ""


@pytest.mark.parametrize(
    "text, head",
    [
        ("/foo:1", "foo"),
        ("/bar", "bar"),
        ("/device:GPU", "device"),  # accepted by C++, rejected by Python
        ("/device:GPU:0:1", "device"),
        ("/job", "job"),
        ("/job:a:b", "job"),
        ("/task", "task"),
        ("/replica:1:2", "replica"),
        ("/cpu:0:1", "cpu"),
        ("/job:a/xpu:0", "xpu"),
    ],
)
def test_unknown_attribute_message(text, head):
    msg = "Unknown attribute '%s' is encountered while parsing the device spec: '%s'." % (
        head,
        text,
    )
    with pytest.raises(ValueError, match="^" + re.escape(msg) + "$"):
        DeviceSpec.from_string(text)


@pytest.mark.parametrize(
    "text",
    [
        "/cpu:0/gpu:1",
        "/device:CPU:0/device:GPU:0",
        "/gpu:0/device:GPU:0",
        "/device:GPU:0/cpu",
        "/gpu:0/gpu:0",
    ],
)
def test_multiple_device_types_message(text):
    msg = "Multiple device types are not allowed while parsing the device spec: %s." % text
    with pytest.raises(ValueError, match="^" + re.escape(msg) + "$"):
        DeviceSpec.from_string(text)


@pytest.mark.parametrize(
    "text, bad",
    [
        ("/replica:x", "x"),
        ("/replica:*", "*"),
        ("/task:*", "*"),
        ("/task:1.5", "1.5"),
        ("/job:a/task:", ""),
        ("/device:GPU:x", "x"),
        ("/gpu:x", "x"),
        ("/cpu:", ""),
    ],
)
def test_non_integer_fields_raise_value_error_naming_value_and_spec(text, bad):
    with pytest.raises(ValueError) as info:
        DeviceSpec.from_string(text)
    assert repr(bad) in str(info.value)
    assert text in str(info.value)


def test_python_int_rules_apply_to_numbers():
    # int() is used, so a negative number is accepted (the C++ parser rejects it).
    assert parse("/task:-1")[2] == -1
    assert cdev.parse_full_name("/task:-1") is None


def test_parse_is_cached_and_returns_immutable_tuples():
    first = pydev._parse("/job:cache_me/gpu:0")
    assert first is pydev._parse("/job:cache_me/gpu:0")
    assert isinstance(first, tuple)
    spec = DeviceSpec.from_string("/job:cache_me/gpu:0")
    spec.job = "changed"
    assert pydev._parse("/job:cache_me/gpu:0")[0] == "cache_me"


# -- §1.3 printing ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, printed",
    [
        ("/cpu:0", "/device:CPU:0"),
        ("/gpu:*", "/device:GPU:*"),
        ("gpu", "/device:GPU:*"),
        ("/device:GPU:1/task:2/replica:0/job:w", "/job:w/replica:0/task:2/device:GPU:1"),
        ("/job:ps/task:0", "/job:ps/task:0"),
        ("", ""),
    ],
)
def test_to_string_canonical_layout(text, printed):
    assert DeviceSpec.from_string(text).to_string() == printed
    assert pydev.canonical_name(text) == printed


def test_index_without_type_is_not_printed():
    assert DeviceSpec(device_index=3).to_string() == ""
    assert DeviceSpec(job="a", device_index=3).to_string() == "/job:a"


def test_canonical_name():
    assert pydev.canonical_name(None) == ""
    assert (
        pydev.canonical_name(DeviceSpec(job="w", device_type="gpu", device_index=0))
        == "/job:w/device:GPU:0"
    )
    assert pydev.canonical_name("/Cpu:0/job:x") == "/job:x/device:CPU:0"
    assert pydev.canonical_name(b"/gpu:1") == "/device:GPU:1"
    with pytest.raises(ValueError):
        pydev.canonical_name("/nope:1")


def test_check_valid():
    assert pydev.check_valid("/job:a/gpu:0") is None
    with pytest.raises(ValueError, match="Unknown attribute 'x'"):
        pydev.check_valid("/x:1")
    with pytest.raises(ValueError, match="Multiple device types"):
        pydev.check_valid("/cpu:0/gpu:0")


# -- §1.5 the object API ----------------------------------------------------------------------


def test_constructor_coercions():
    spec = DeviceSpec(job=1, replica="2", task=3.0, device_type="cpu", device_index="4")
    assert fields(spec) == ("1", 2, 3, "CPU", 4)
    assert DeviceSpec(device_type="gpu").device_type == "GPU"
    assert DeviceSpec(device_type="Gpu").device_type == "Gpu"
    assert DeviceSpec(device_type="TPU").device_type == "TPU"
    assert fields(DeviceSpec()) == (None,) * 5
    with pytest.raises(ValueError):
        DeviceSpec(task="x")


def test_mutable_properties_coerce():
    spec = DeviceSpec()
    spec.job = 7
    spec.replica = "1"
    spec.task = "2"
    spec.device_type = "gpu"
    spec.device_index = "0"
    assert fields(spec) == ("7", 1, 2, "GPU", 0)
    assert spec.to_string() == "/job:7/replica:1/task:2/device:GPU:0"
    spec.device_type = None
    spec.job = None
    assert spec.to_string() == "/replica:1/task:2"


def test_from_string_is_a_classmethod_returning_new_specs():
    a = DeviceSpec.from_string("/job:a")
    b = DeviceSpec.from_string("/job:a")
    assert isinstance(a, DeviceSpec) and a is not b and a == b


def test_parse_from_string_resets_then_parses():
    spec = DeviceSpec(job="old", task=5, device_type="CPU", device_index=1)
    assert spec.parse_from_string("/gpu:0") is spec
    assert fields(spec) == (None, None, None, "GPU", 0)
    # A failed parse raises before touching any field.
    with pytest.raises(ValueError):
        spec.parse_from_string("/job:new/bad:1")
    assert fields(spec) == (None, None, None, "GPU", 0)


def test_merge_from_field_wise():
    spec = DeviceSpec.from_string("/job:a/task:1/device:GPU:0")
    spec.merge_from(DeviceSpec.from_string("/task:3/cpu:*"))
    assert spec.to_string() == "/job:a/task:3/device:CPU:0"
    # Type and index are not coupled: the index survives a change of type.
    spec = DeviceSpec.from_string("/device:CPU:7")
    spec.merge_from(DeviceSpec.from_string("/device:GPU:*"))
    assert spec.to_string() == "/device:GPU:7"
    # Unset fields of the other spec leave ours alone.
    spec = DeviceSpec.from_string("/job:w/replica:0/task:2/device:CPU:1")
    spec.merge_from(DeviceSpec())
    assert spec.to_string() == "/job:w/replica:0/task:2/device:CPU:1"
    # Setting an index alone (no type) still merges the index.
    spec.merge_from(DeviceSpec(device_index=5))
    assert spec.to_string() == "/job:w/replica:0/task:2/device:CPU:5"


def test_make_merged_spec_does_not_mutate():
    base = DeviceSpec.from_string("/job:a/device:CPU:0")
    merged = base.make_merged_spec(DeviceSpec.from_string("/task:2/gpu:1"))
    assert merged.to_string() == "/job:a/task:2/device:GPU:1"
    assert base.to_string() == "/job:a/device:CPU:0"
    assert merged is not base


def test_replace():
    base = DeviceSpec.from_string("/job:a/task:1/device:GPU:0")
    assert base.replace(task=2).to_string() == "/job:a/task:2/device:GPU:0"
    assert (
        base.replace(device_type="cpu", device_index=None).to_string()
        == "/job:a/task:1/device:CPU:*"
    )
    assert base.replace(job=None).to_string() == "/task:1/device:GPU:0"
    assert base.to_string() == "/job:a/task:1/device:GPU:0"
    with pytest.raises(TypeError):
        base.replace(host="x")


def test_equality_and_hash():
    a = DeviceSpec.from_string("/gpu:0/job:w")
    b = DeviceSpec(job="w", device_type="GPU", device_index=0)
    assert a == b and hash(a) == hash(b)
    assert len({a, b}) == 1
    assert a != DeviceSpec.from_string("/job:w/gpu:1")
    assert (a == "/job:w/device:GPU:0") is False
    # Equality is by printed form: an index without a type is invisible.
    assert DeviceSpec(device_index=1) == DeviceSpec()


def test_repr_and_str():
    spec = DeviceSpec(job="w", task=1, device_type="GPU", device_index=0)
    assert repr(spec) == "DeviceSpec(job='w', task=1, device_type='GPU', device_index=0)"
    assert eval(repr(spec)) == spec
    assert repr(DeviceSpec()) == "DeviceSpec()"
    assert str(spec) == "/job:w/task:1/device:GPU:0"


# -- §1.6 the merge function behind tf.device ---------------------------------------------------


class FakeOp:
    def __init__(self, device=""):
        self.device = device


@pytest.mark.parametrize(
    "block, current, expected",
    [
        ("/job:worker", "/gpu:1", "/job:worker/device:GPU:1"),
        ("/job:a/task:1/device:GPU:0", "/task:3/cpu:*", "/job:a/task:3/device:CPU:0"),
        ("/device:CPU:7", "/device:GPU:*", "/device:GPU:7"),
        ("/job:worker", "", "/job:worker"),
        ("/cpu:0", "", "/device:CPU:0"),  # strings from tf.device are canonicalised
        (
            "/job:ps/task:0/cpu:0",
            "/job:worker/replica:1/task:2/device:GPU:3",
            "/job:worker/replica:1/task:2/device:GPU:3",
        ),  # inner wins on every field
        ("", "/gpu:0", "/device:GPU:0"),
        ("/job:w", "/Gpu:1", "/job:w/device:GPU:1"),
    ],
)
def test_merge_examples(block, current, expected):
    m = pydev.merge_device(block)
    assert m.merge(current) == expected
    assert m(FakeOp(current)) == expected
    assert m.merge(current) == expected  # second call (cached) agrees


def test_merge_of_none_current_means_nothing_set():
    assert pydev.merge_device("/job:w").merge(None) == "/job:w"


def test_malformed_string_fails_when_the_block_is_created():
    with pytest.raises(
        ValueError,
        match=re.escape(
            "Unknown attribute 'x' is encountered while parsing the device spec: '/x:1'."
        ),
    ):
        pydev.merge_device("/x:1")
    with pytest.raises(ValueError, match="Multiple device types"):
        pydev.merge_device("/cpu:0/gpu:0")


def test_malformed_current_device_raises_value_error():
    with pytest.raises(ValueError):
        pydev.merge_device("/job:w").merge("not a device")


def test_merge_device_rejects_non_strings():
    with pytest.raises(TypeError):
        pydev.merge_device(3)


@pytest.mark.parametrize(
    "block, null",
    [
        ("", True),
        ("/", True),
        ("//", True),
        (DeviceSpec(), True),
        (DeviceSpec(device_index=2), True),  # prints as "": nothing to merge (TF rule)
        ("/job:a", False),
        ("/gpu:*", False),
        (DeviceSpec(task=0), False),
    ],
)
def test_is_null_merge(block, null):
    assert pydev.merge_device(block).is_null_merge is null


def test_empty_block_does_not_clear_anything():
    # with tf.device(""): a null merge, and even if applied it keeps every field.
    m = pydev.merge_device("")
    assert m.is_null_merge
    assert m.merge("/job:w/gpu:0") == "/job:w/device:GPU:0"


def _apply_stack(stack, device=""):
    """The graph's walk: innermost to outermost, None stops it, null merges are skipped."""
    op = FakeOp(device)
    for entry in reversed(stack):
        if entry is None:
            break
        if not entry.is_null_merge:
            op.device = entry(op)
    return op.device


def test_nested_blocks_fill_in_unset_fields_inner_wins():
    outer = pydev.merge_device("/job:worker/task:1/cpu:0")
    inner = pydev.merge_device("/gpu:1")
    assert _apply_stack([outer, inner]) == "/job:worker/task:1/device:GPU:1"
    assert _apply_stack([outer, pydev.merge_device(""), inner]) == "/job:worker/task:1/device:GPU:1"
    assert _apply_stack([outer, None, inner]) == "/device:GPU:1"


def test_device_spec_block_is_read_by_reference():
    # §11.7: mutating the DeviceSpec inside the block changes later ops' devices.
    spec = DeviceSpec(job="worker", task=0)
    m = pydev.merge_device(spec)
    assert m.merge("/gpu:0") == "/job:worker/task:0/device:GPU:0"
    spec.task = 3
    spec.device_type = "cpu"
    assert m.merge("") == "/job:worker/task:3/device:CPU:*"
    assert m.merge("/gpu:0") == "/job:worker/task:3/device:GPU:0"
    empty = DeviceSpec()
    m2 = pydev.merge_device(empty)
    assert m2.is_null_merge
    empty.job = "ps"
    assert not m2.is_null_merge
    assert m2.merge("") == "/job:ps"


def test_string_block_is_a_snapshot():
    text = "/job:a"
    m = pydev.merge_device(text)
    text = "/job:b"  # noqa: F841  (rebinding the name changes nothing)
    assert m.merge("") == "/job:a"


def test_merge_device_repr():
    assert "/job:a/device:GPU:0" in repr(pydev.merge_device("/job:a/gpu:0"))


def test_merge_is_fast():
    import timeit

    m = pydev.merge_device("/job:worker")
    m.merge("/gpu:1")
    per_call = min(timeit.repeat(lambda: m.merge("/gpu:1"), number=20000, repeat=3)) / 20000
    assert per_call < 2e-6


# -- properties -------------------------------------------------------------------------------

_FREE_TEXT = st.text(
    alphabet=st.characters(blacklist_characters="/:", blacklist_categories=("Cs",)), max_size=8
)
_INTS = st.integers(min_value=-3, max_value=10**6)
_specs = st.builds(
    DeviceSpec,
    job=st.none() | _FREE_TEXT,
    replica=st.none() | _INTS,
    task=st.none() | _INTS,
    device_type=st.none() | _FREE_TEXT,
    device_index=st.none() | _INTS,
)


def _printed_fields(spec):
    """The fields to_string can carry: an index only travels with a type."""
    f = fields(spec)
    return f if f[3] is not None else f[:4] + (None,)


@settings(max_examples=300)
@given(_specs)
def test_round_trip_to_string_from_string(spec):
    text = spec.to_string()
    again = DeviceSpec.from_string(text)
    assert again == spec
    assert fields(again) == _printed_fields(spec)
    assert again.to_string() == text
    assert pydev.canonical_name(text) == text


@settings(max_examples=300)
@given(_specs, _specs)
def test_merge_from_field_wise_law(a, b):
    before = fields(a)
    merged = a.make_merged_spec(b)
    assert fields(a) == before
    expected = tuple(y if y is not None else x for x, y in zip(fields(a), fields(b)))
    assert fields(merged) == expected
    a.merge_from(b)
    assert fields(a) == expected
    # Idempotent, and merging an empty spec changes nothing.
    assert fields(merged.make_merged_spec(b)) == expected
    assert fields(merged.make_merged_spec(DeviceSpec())) == expected


_NAME = st.from_regex(r"\A[A-Za-z][A-Za-z0-9_]{0,6}\Z")
_NAT = st.integers(min_value=0, max_value=10**6)
_cpp_valid_specs = st.builds(
    DeviceSpec,
    job=st.none() | _NAME,
    replica=st.none() | _NAT,
    task=st.none() | _NAT,
    device_type=st.none() | _NAME,
    device_index=st.none() | _NAT,
)


@settings(max_examples=300)
@given(_cpp_valid_specs)
def test_cpp_parser_reads_python_output_to_the_same_fields(spec):
    parsed = cdev.parse_full_name(spec.to_string())
    assert parsed is not None
    assert (parsed.job, parsed.replica, parsed.task, parsed.type, parsed.id) == _printed_fields(
        spec
    )
    assert parsed.to_string() == spec.to_string()


@settings(max_examples=300)
@given(_cpp_valid_specs, _cpp_valid_specs)
def test_merge_device_agrees_with_make_merged_spec(block, current):
    block_text, current_text = block.to_string(), current.to_string()
    expected = (
        DeviceSpec.from_string(block_text)
        .make_merged_spec(DeviceSpec.from_string(current_text))
        .to_string()
    )
    assert pydev.merge_device(block_text).merge(current_text) == expected
    assert pydev.merge_device(DeviceSpec.from_string(block_text)).merge(current_text) == expected


_device_ish = st.text(alphabet="/:jobreplicatskdvGPUCu*0123-_ x", max_size=30)


@settings(max_examples=500)
@given(st.one_of(st.text(max_size=30), _device_ish))
def test_malformed_strings_only_raise_value_error(text):
    try:
        spec = DeviceSpec.from_string(text)
    except ValueError as e:
        assert str(e)
        with pytest.raises(ValueError):
            pydev.merge_device(text)
    else:
        assert isinstance(spec.to_string(), str)
        assert pydev.canonical_name(spec.to_string()) == spec.to_string()
