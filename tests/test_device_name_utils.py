"""Tests for minitf.runtime.device_name_utils: TF's C++ device-name rules used by the placer
(spec §1.4).  Book sections: "Placing Operations on Devices", "Pinning Operations Across
Tasks"."""

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minitf.framework import errors
from minitf.framework.device_spec import DeviceSpec
from minitf.runtime import device_name_utils as dnu
from minitf.runtime.device_name_utils import ParsedName

CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"
GPU1 = "/job:localhost/replica:0/task:0/device:GPU:1"


def fields(p):
    return (p.job, p.replica, p.task, p.type, p.id)


def parse(s):
    p = dnu.parse_full_name(s)
    return None if p is None else fields(p)


# -- parsing ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ("/job:worker/replica:1/task:2/device:GPU:3", ("worker", 1, 2, "GPU", 3)),
        ("/device:GPU:3/task:2/replica:1/job:worker", ("worker", 1, 2, "GPU", 3)),  # any order
        ("/job:ps", ("ps", None, None, None, None)),
        ("/job:ps_2/task:10", ("ps_2", None, 10, None, None)),
        ("/job:a1", ("a1", None, None, None, None)),
        ("/replica:0", (None, 0, None, None, None)),
        ("/device:XLA_CPU:0", (None, None, None, "XLA_CPU", 0)),
        ("/device:GPU", (None, None, None, "GPU", None)),  # no index: accepted by C++
        ("/device:GPU:*", (None, None, None, "GPU", None)),
        ("/device:*", (None, None, None, None, None)),
        ("/device:*:2", (None, None, None, None, 2)),
        ("/device:gpu:3", (None, None, None, "gpu", 3)),  # case preserved
        ("/job:a/task:1/job:b", ("b", None, 1, None, None)),  # last one wins
        ("/job:a/job:*", (None, None, None, None, None)),  # * unsets again
        ("/cpu:0/device:GPU", (None, None, None, "GPU", None)),  # a later device resets the id
    ],
)
def test_parse(text, expected):
    assert parse(text) == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        ("/cpu:0", ("CPU", 0)),
        ("/CPU:1", ("CPU", 1)),
        ("/gpu:2", ("GPU", 2)),
        ("/GPU:3", ("GPU", 3)),
        ("/gpu:*", ("GPU", None)),
        ("/CPU:*", ("CPU", None)),
    ],
)
def test_legacy_forms(text, expected):
    assert parse(text) == (None, None, None) + expected


@pytest.mark.parametrize("text", ["", "/"])
def test_empty_and_slash_are_all_unset(text):
    assert parse(text) == (None,) * 5
    assert dnu.parse_full_name(text).to_string() == ""


@pytest.mark.parametrize(
    "text", ["/job:*", "/replica:*", "/task:*", "/device:*:*", "/job:*/replica:*/task:*/device:*:*"]
)
def test_star_means_unset(text):
    assert parse(text) == (None,) * 5


@pytest.mark.parametrize(
    "text",
    [
        "/Cpu:0",
        "/cPU:0",
        "/Gpu:1",  # mixed-case legacy: Python only
        "/cpu",
        "/gpu",  # legacy needs ":N" in C++
        "/job:123",
        "/job:_a",
        "/job:",
        "/job:a-b",
        "/job:a.b",
        "/device:0GPU:0",
        "/device:",
        "/device:GPU:",
        "/device:GPU:x",
        "/device:GPU:1:2",
        "/task:-1",
        "/replica:-2",
        "/device:GPU:-1",
        "/cpu:-1",
        "/task:x",
        "/task:",
        "/replica:1.5",
        "/bar:3",
        "/job:a/extra",
        "/job:a/",
        "//",
        "/job:a//task:1",
        "job:a",
        "gpu:0",
        "device:GPU:0",
        " /job:a",
        "/job:a ",
        "/job:*x",
        "/cpu:0x",
        "/job:\u00e9",
    ],
)
def test_malformed_gives_none(text):
    assert dnu.parse_full_name(text) is None


def test_results_are_fresh_objects():
    a = dnu.parse_full_name("/job:w/task:1")
    a.job = "changed"
    a.task = None
    b = dnu.parse_full_name("/job:w/task:1")
    assert fields(b) == ("w", None, 1, None, None)
    assert a is not b


def test_parse_accepts_bytes_rejects_other_types():
    assert parse(b"/job:w") == ("w", None, None, None, None)
    with pytest.raises(TypeError):
        dnu.parse_full_name(None)


# -- ParsedName -------------------------------------------------------------------------------


def test_parsed_name_to_string():
    assert ParsedName("w", 0, 1, "GPU", 2).to_string() == "/job:w/replica:0/task:1/device:GPU:2"
    assert ParsedName(type="GPU").to_string() == "/device:GPU:*"
    assert ParsedName(id=3).to_string() == ""  # an id alone is not printed
    assert ParsedName(job="ps", task=0).to_string() == "/job:ps/task:0"
    assert ParsedName().to_string() == ""
    assert dnu.parse_full_name("/gpu:1/job:w").to_string() == "/job:w/device:GPU:1"
    assert str(ParsedName(job="w")) == "/job:w"


def test_parsed_name_copy_eq_repr():
    a = ParsedName("w", 0, 1, "GPU", 2)
    b = a.copy()
    assert a == b and a is not b
    b.id = 3
    assert a != b and a.id == 2
    assert ParsedName(id=1) != ParsedName()  # compared by fields, not by printed form
    assert (a == "/job:w/replica:0/task:1/device:GPU:2") is False
    assert repr(ParsedName(job="w", id=0)) == "ParsedName(job='w', id=0)"
    assert set(ParsedName.__slots__) == {"job", "replica", "task", "type", "id"}
    with pytest.raises(AttributeError):
        a.host = "x"


def test_is_fully_specified():
    assert dnu.parse_full_name(CPU0).is_fully_specified()
    assert not dnu.parse_full_name(
        "/job:localhost/replica:0/task:0/device:CPU:*"
    ).is_fully_specified()


# -- names of real devices --------------------------------------------------------------------


def test_full_name():
    assert dnu.full_name("localhost", 0, 0, "CPU", 0) == CPU0
    assert dnu.full_name("worker", 0, 2, "GPU", 1) == "/job:worker/replica:0/task:2/device:GPU:1"


def test_legacy_name():
    assert dnu.legacy_name(CPU0) == "/job:localhost/replica:0/task:0/cpu:0"
    assert dnu.legacy_name(GPU1) == "/job:localhost/replica:0/task:0/gpu:1"
    assert (
        dnu.legacy_name("/job:w/replica:0/task:3/device:XLA_GPU:0")
        == "/job:w/replica:0/task:3/xla_gpu:0"
    )
    # The legacy alias itself parses back to the same device.
    assert dnu.parse_full_name(dnu.legacy_name(GPU1)) == dnu.parse_full_name(GPU1)
    with pytest.raises(ValueError):
        dnu.legacy_name("/job:w/device:CPU:0")
    with pytest.raises(ValueError):
        dnu.legacy_name("/Cpu:0")


# -- merging (the placer's colocation groups) -------------------------------------------------


def merged(a, b, soft=False):
    target = dnu.parse_full_name(a)
    dnu.merge_dev_names(target, dnu.parse_full_name(b), allow_soft_placement=soft)
    return target.to_string()


def test_merge_copies_fields_set_in_other():
    assert merged("/job:a", "/task:1/device:GPU:0") == "/job:a/task:1/device:GPU:0"
    assert merged("", CPU0) == CPU0
    assert merged(CPU0, "") == CPU0
    assert merged(CPU0, CPU0) == CPU0
    assert merged("/device:GPU:*", "/device:GPU:1") == "/device:GPU:1"
    assert merged("/device:GPU:1", "/device:GPU:*") == "/device:GPU:1"


@pytest.mark.parametrize(
    "a, b, what",
    [
        ("/job:a", "/job:b", "jobs"),
        ("/replica:0", "/replica:1", "replicas"),
        ("/task:0", "/task:1", "tasks"),
        ("/device:CPU:0", "/device:GPU:0", "types"),
        ("/device:GPU:0", "/device:GPU:1", "ids"),
        ("/device:GPU:0", "/device:gpu:0", "types"),  # case-sensitive
    ],
)
def test_merge_conflicts_raise_invalid_argument(a, b, what):
    msg = "Cannot merge devices with incompatible %s: '%s' and '%s'" % (
        what,
        dnu.parse_full_name(a).to_string(),
        dnu.parse_full_name(b).to_string(),
    )
    with pytest.raises(errors.InvalidArgumentError, match="^" + re.escape(msg) + "$") as info:
        dnu.merge_dev_names(dnu.parse_full_name(a), dnu.parse_full_name(b))
    assert info.value.error_code == errors.INVALID_ARGUMENT
    assert info.value.node_def is None and info.value.op is None


@pytest.mark.parametrize(
    "what, a, b",
    [
        ("jobs", "/job:a", "/job:b"),
        ("replicas", "/replica:0", "/replica:1"),
        ("tasks", "/task:0", "/task:1"),
    ],
)
def test_soft_placement_does_not_forgive_job_replica_task(what, a, b):
    with pytest.raises(errors.InvalidArgumentError, match="incompatible " + what):
        dnu.merge_dev_names(
            dnu.parse_full_name(a), dnu.parse_full_name(b), allow_soft_placement=True
        )


def test_soft_placement_type_conflict_clears_type_and_id():
    assert merged("/job:w/device:CPU:0", "/device:GPU:1", soft=True) == "/job:w"
    target = dnu.parse_full_name("/job:w/device:CPU:0")
    dnu.merge_dev_names(target, dnu.parse_full_name("/device:GPU:1"), True)
    assert (target.type, target.id) == (None, None)


def test_soft_placement_id_conflict_clears_id():
    target = dnu.parse_full_name("/job:w/device:GPU:0")
    dnu.merge_dev_names(target, dnu.parse_full_name("/task:2/device:GPU:1"), True)
    assert fields(target) == ("w", None, 2, "GPU", None)
    assert target.to_string() == "/job:w/task:2/device:GPU:*"


def test_merge_error_shows_target_as_it_was_at_the_conflict():
    # job is merged before the task conflict is found, as in TF.
    target = dnu.parse_full_name("/task:0")
    other = dnu.parse_full_name("/job:w/task:1")
    with pytest.raises(errors.InvalidArgumentError) as info:
        dnu.merge_dev_names(target, other)
    assert str(info.value) == (
        "Cannot merge devices with incompatible tasks: '/job:w/task:0' and '/job:w/task:1'"
    )
    assert target.job == "w"


# -- specification tests ----------------------------------------------------------------------


def test_is_specification():
    p = dnu.parse_full_name
    assert dnu.is_specification(p("/job:localhost/device:CPU:*"), p(CPU0))
    assert dnu.is_specification(p(""), p(CPU0))
    assert dnu.is_specification(p(""), p(""))
    assert dnu.is_specification(p("/device:CPU:0"), p("/device:CPU:0"))
    assert not dnu.is_specification(p("/device:CPU:0"), p("/device:CPU:*"))  # unset in more
    assert not dnu.is_specification(p("/job:ps"), p(CPU0))
    assert not dnu.is_specification(p("/task:1"), p(CPU0))
    assert not dnu.is_specification(p("/device:gpu:1"), p(GPU1))
    assert dnu.is_specification(p("/gpu:1"), p(GPU1))
    assert not dnu.is_specification(p(CPU0), p("/device:CPU:0"))


def test_is_complete_specification():
    p = dnu.parse_full_name
    assert dnu.is_complete_specification(p("/device:GPU:*"), p(GPU1))
    assert dnu.is_complete_specification(p("/job:localhost/task:0"), p(GPU1))
    assert not dnu.is_complete_specification(p("/replica:1"), p(GPU1))
    assert not dnu.is_complete_specification(p("/device:CPU:*"), p(GPU1))
    with pytest.raises(ValueError):
        dnu.is_complete_specification(p("/gpu:1"), p("/device:GPU:1"))


def test_matches():
    assert dnu.matches(dnu.parse_full_name("/gpu:1"), GPU1)
    assert dnu.matches("/job:localhost/device:GPU:*", GPU1)
    assert dnu.matches("", CPU0)
    assert not dnu.matches("/device:gpu:1", GPU1)  # case-sensitive type
    assert not dnu.matches("/device:GPU:0", GPU1)
    assert not dnu.matches("/job:ps", CPU0)
    assert dnu.matches("/job:localhost/replica:0/task:0/cpu:0", CPU0)
    assert not dnu.matches("/gpu:1", "/Gpu:1")  # unparsable device name matches nothing
    with pytest.raises(ValueError):
        dnu.matches("/Gpu:1", GPU1)


# -- properties -------------------------------------------------------------------------------

_NAME = st.from_regex(r"\A[A-Za-z][A-Za-z0-9_]{0,6}\Z")
_NAT = st.integers(min_value=0, max_value=10**6)
_names = st.builds(
    ParsedName,
    job=st.none() | _NAME,
    replica=st.none() | _NAT,
    task=st.none() | _NAT,
    type=st.none() | _NAME,
    id=st.none() | _NAT,
)


def _printable(p):
    """What to_string keeps: an id only travels with a type."""
    return ParsedName(p.job, p.replica, p.task, p.type, p.id if p.type is not None else None)


@settings(max_examples=300)
@given(_names)
def test_to_string_parse_round_trip(p):
    text = p.to_string()
    again = dnu.parse_full_name(text)
    assert again == _printable(p)
    assert again.to_string() == text


@settings(max_examples=300)
@given(_names)
def test_python_parser_reads_cpp_output_to_the_same_fields(p):
    spec = DeviceSpec.from_string(p.to_string())
    expected_type = p.type.upper() if p.type in ("cpu", "gpu") else p.type  # TF 1.15 rule
    q = _printable(p)
    assert (spec.job, spec.replica, spec.task, spec.device_type, spec.device_index) == (
        q.job,
        q.replica,
        q.task,
        expected_type,
        q.id,
    )


def _union(x, y):
    return y if y is not None else x


def _clash(x, y):
    return x is not None and y is not None and x != y


@settings(max_examples=300)
@given(_names, _names, st.booleans())
def test_merge_laws(a, b, soft):
    target = a.copy()
    clashes = [_clash(x, y) for x, y in zip(fields(a), fields(b))]
    try:
        dnu.merge_dev_names(target, b, allow_soft_placement=soft)
    except errors.InvalidArgumentError as e:
        assert str(e).startswith("Cannot merge devices with incompatible ")
        # Only a real conflict fails, and soft placement forgives type/id conflicts.
        assert any(clashes[:3]) or (not soft and any(clashes))
        return
    assert not any(clashes[:3])
    assert (target.job, target.replica, target.task) == tuple(
        _union(x, y) for x, y in zip(fields(a)[:3], fields(b)[:3])
    )
    if not any(clashes):
        # Without conflicts the merge is the field-wise union and more specific than both.
        assert fields(target) == tuple(_union(x, y) for x, y in zip(fields(a), fields(b)))
        assert dnu.is_specification(a, target) and dnu.is_specification(b, target)
    elif clashes[3]:
        assert soft and (target.type, target.id) == (None, None)
    else:
        assert soft and (target.type, target.id) == (_union(a.type, b.type), None)


@settings(max_examples=300)
@given(_names)
def test_merge_with_self_and_empty_is_identity(p):
    t = p.copy()
    dnu.merge_dev_names(t, p)
    assert t == p
    dnu.merge_dev_names(t, ParsedName())
    assert t == p
    e = ParsedName()
    dnu.merge_dev_names(e, p)
    assert e == p
    assert dnu.is_specification(p, p) and dnu.is_specification(ParsedName(), p)


_device_ish = st.text(alphabet="/:jobreplicatskdvGPUCu*0123-_ x", max_size=30)


@settings(max_examples=500)
@given(st.one_of(st.text(max_size=30), _device_ish))
def test_malformed_strings_give_none_never_raise(text):
    p = dnu.parse_full_name(text)
    if p is not None:
        assert isinstance(p, ParsedName)
        # Re-parsing the canonical form gives the same fields (minus an id with no type).
        assert dnu.parse_full_name(p.to_string()) == _printable(p)
