"""Tests for minitf.framework.dtypes (TF 1.15 dtype behaviour)."""

import copy
import pickle

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from minitf.framework import dtypes

# (constant, name, enum, enum_name, type_string, numpy type, size)
TABLE = [
    (dtypes.float16, "float16", 19, "DT_HALF", "half", np.float16, 2),
    (dtypes.float32, "float32", 1, "DT_FLOAT", "float", np.float32, 4),
    (dtypes.float64, "float64", 2, "DT_DOUBLE", "double", np.float64, 8),
    (dtypes.int8, "int8", 6, "DT_INT8", "int8", np.int8, 1),
    (dtypes.int16, "int16", 5, "DT_INT16", "int16", np.int16, 2),
    (dtypes.int32, "int32", 3, "DT_INT32", "int32", np.int32, 4),
    (dtypes.int64, "int64", 9, "DT_INT64", "int64", np.int64, 8),
    (dtypes.uint8, "uint8", 4, "DT_UINT8", "uint8", np.uint8, 1),
    (dtypes.uint16, "uint16", 17, "DT_UINT16", "uint16", np.uint16, 2),
    (dtypes.uint32, "uint32", 22, "DT_UINT32", "uint32", np.uint32, 4),
    (dtypes.uint64, "uint64", 23, "DT_UINT64", "uint64", np.uint64, 8),
    (dtypes.bool, "bool", 10, "DT_BOOL", "bool", np.bool_, 1),
    (dtypes.string, "string", 7, "DT_STRING", "string", np.object_, 8),
    (dtypes.complex64, "complex64", 8, "DT_COMPLEX64", "complex64", np.complex64, 8),
    (dtypes.complex128, "complex128", 18, "DT_COMPLEX128", "complex128", np.complex128, 16),
]
BASE = [row[0] for row in TABLE]
ALL = BASE + [d.as_ref for d in BASE]


# ---------------------------------------------------------------------------------------
# DType attributes
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("dt,name,enum,enum_name,type_string,np_type,size", TABLE)
def test_base_attributes(dt, name, enum, enum_name, type_string, np_type, size):
    assert dt.name == name
    assert dt.as_datatype_enum == enum
    assert dt.enum_name == enum_name
    assert dt.type_string == type_string
    assert dt.as_numpy_dtype is np_type
    assert dt.size == size
    assert dt.base_dtype is dt
    assert not dt.is_ref_dtype and not dt._is_ref_dtype
    assert dt.is_numpy_compatible


@pytest.mark.parametrize("dt,name,enum,enum_name,type_string,np_type,size", TABLE)
def test_ref_attributes(dt, name, enum, enum_name, type_string, np_type, size):
    ref = dt.as_ref
    assert ref is dt._as_ref
    assert ref is getattr(dtypes, name + "_ref")
    assert ref.name == name + "_ref"
    assert ref.as_datatype_enum == enum + 100
    assert ref.enum_name == enum_name + "_REF"
    assert ref.type_string == type_string + "_ref"
    assert ref.is_ref_dtype
    assert ref.base_dtype is dt
    assert ref.as_ref is ref
    assert ref.as_numpy_dtype is np_type
    assert ref.size == size
    assert ref != dt


def test_aliases_are_the_same_objects():
    assert dtypes.half is dtypes.float16
    assert dtypes.double is dtypes.float64
    assert dtypes.half_ref is dtypes.float16_ref
    assert dtypes.double_ref is dtypes.float64_ref


def test_repr_and_str():
    assert repr(dtypes.float32) == "tf.float32"
    assert str(dtypes.float32) == "<dtype: 'float32'>"
    assert repr(dtypes.int32_ref) == "tf.int32_ref"
    assert str(dtypes.string_ref) == "<dtype: 'string_ref'>"
    assert "%s" % dtypes.bool == "<dtype: 'bool'>"


def test_classification_flags():
    floats = {dtypes.float16, dtypes.float32, dtypes.float64}
    ints = {
        dtypes.int8,
        dtypes.int16,
        dtypes.int32,
        dtypes.int64,
        dtypes.uint8,
        dtypes.uint16,
        dtypes.uint32,
        dtypes.uint64,
    }
    complexes = {dtypes.complex64, dtypes.complex128}
    for dt in ALL:
        base = dt.base_dtype
        assert dt.is_floating == (base in floats), dt
        assert dt.is_integer == (base in ints), dt
        assert dt.is_complex == (base in complexes), dt
        assert dt.is_bool == (base is dtypes.bool), dt
        assert not dt.is_quantized
    assert dtypes.uint8.is_unsigned and not dtypes.int8.is_unsigned
    assert not dtypes.float32.is_unsigned


def test_real_dtype():
    assert dtypes.complex64.real_dtype is dtypes.float32
    assert dtypes.complex128_ref.real_dtype is dtypes.float64
    assert dtypes.int32.real_dtype is dtypes.int32


def test_min_max():
    assert dtypes.int8.min == -128 and dtypes.int8.max == 127
    assert dtypes.uint8.min == 0 and dtypes.uint8.max == 255
    assert dtypes.int32.min == -(2**31) and dtypes.int32.max == 2**31 - 1
    assert dtypes.int64_ref.max == 2**63 - 1
    assert dtypes.uint64.max == 2**64 - 1
    assert dtypes.float32.max == np.finfo(np.float32).max
    assert dtypes.float64.min == np.finfo(np.float64).min
    assert dtypes.float16.max == 65504


@pytest.mark.parametrize(
    "dt", [dtypes.bool, dtypes.string, dtypes.complex64, dtypes.complex128, dtypes.bool_ref]
)
def test_min_max_undefined(dt):
    with pytest.raises(TypeError, match=r"Cannot find minimum value of <dtype: '%s'>\." % dt.name):
        dt.min
    with pytest.raises(TypeError, match=r"Cannot find maximum value of <dtype: '%s'>\." % dt.name):
        dt.max


def test_interned_constructor():
    assert dtypes.DType(1) is dtypes.float32
    assert dtypes.DType(101) is dtypes.float32_ref
    assert isinstance(dtypes.float32, dtypes.DType)
    for bad in (0, 11, 99, 1000, "float32", None):
        with pytest.raises(TypeError, match="type_enum is not a valid types_pb2.DataType"):
            dtypes.DType(bad)


def test_immutable():
    with pytest.raises(AttributeError):
        dtypes.float32._type_enum = 3
    with pytest.raises(AttributeError):
        dtypes.float32.name = "x"
    with pytest.raises(AttributeError):
        del dtypes.float32._type_enum
    assert dtypes.float32.as_datatype_enum == 1


def test_hashable_and_usable_as_keys():
    table = {dt: dt.name for dt in ALL}
    assert len(table) == len(ALL) == 30
    assert table[dtypes.as_dtype("float")] == "float32"
    assert hash(dtypes.float32) == 1 and hash(dtypes.float32_ref) == 101


def test_pickle_and_copy_keep_identity():
    for dt in ALL:
        assert pickle.loads(pickle.dumps(dt)) is dt
        assert copy.copy(dt) is dt
        assert copy.deepcopy([dt])[0] is dt


# ---------------------------------------------------------------------------------------
# Equality and compatibility
# ---------------------------------------------------------------------------------------


def test_eq_accepts_anything_as_dtype_accepts():
    assert dtypes.float32 == "float32"
    assert dtypes.float32 == "float"
    assert dtypes.float32 == np.float32
    assert dtypes.float32 == np.dtype("float32")
    assert dtypes.float32 == 1
    assert dtypes.float32 == float
    assert dtypes.string == object
    assert dtypes.int32_ref == "int32_ref"
    assert dtypes.float64 != dtypes.float32
    assert dtypes.float32 != "float64"


@pytest.mark.parametrize("other", [None, "nonsense", object(), [], {}, 3.5, int, True, 55])
def test_eq_returns_false_for_unconvertible(other):
    assert (dtypes.float32 == other) is False
    assert (dtypes.float32 != other) is True


def test_is_compatible_with():
    f, fr = dtypes.float32, dtypes.float32_ref
    assert f.is_compatible_with(f)
    assert f.is_compatible_with(fr)
    assert not fr.is_compatible_with(f)
    assert fr.is_compatible_with(fr)
    assert not f.is_compatible_with(dtypes.float64)
    assert not f.is_compatible_with(dtypes.float64_ref)
    assert f.is_compatible_with("float32_ref")
    assert f.is_compatible_with(np.float32)
    with pytest.raises(TypeError, match="Cannot convert value 'bogus' to a TensorFlow DType."):
        f.is_compatible_with("bogus")


@given(st.sampled_from(ALL), st.sampled_from(ALL))
def test_is_compatible_with_rule(a, b):
    # T accepts T and T_ref; T_ref accepts only T_ref.
    assert a.is_compatible_with(b) == (a is b or (not a.is_ref_dtype and b.base_dtype is a))


# ---------------------------------------------------------------------------------------
# as_dtype
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value,expected",
    [
        (dtypes.int32, dtypes.int32),
        (np.float32, dtypes.float32),
        (np.float64, dtypes.float64),
        (np.int64, dtypes.int64),
        (np.bool_, dtypes.bool),
        (np.object_, dtypes.string),
        (np.str_, dtypes.string),
        (np.bytes_, dtypes.string),
        (np.longlong, dtypes.int64),
        (np.intc, dtypes.int32),
        (np.dtype("float16"), dtypes.float16),
        (np.dtype("<U7"), dtypes.string),
        (np.dtype("S3"), dtypes.string),
        (np.dtype(object), dtypes.string),
        (np.dtype(">i4"), dtypes.int32),
        (float, dtypes.float32),
        (bool, dtypes.bool),
        (object, dtypes.string),
        ("float32", dtypes.float32),
        ("float", dtypes.float32),
        ("half", dtypes.float16),
        ("double", dtypes.float64),
        ("float64", dtypes.float64),
        ("string", dtypes.string),
        ("float32_ref", dtypes.float32_ref),
        ("float_ref", dtypes.float32_ref),
        ("double_ref", dtypes.float64_ref),
        ("half_ref", dtypes.float16_ref),
        ("int32", dtypes.int32),
        (1, dtypes.float32),
        (7, dtypes.string),
        (103, dtypes.int32_ref),
        (np.int32(9), dtypes.int64),
    ],
)
def test_as_dtype_accepts(value, expected):
    assert dtypes.as_dtype(value) is expected


@pytest.mark.parametrize(
    "value",
    [
        int,
        str,
        bytes,
        complex,
        list,
        None,
        "DT_FLOAT",
        "Float32",
        "",
        0,
        11,
        200,
        -1,
        True,
        1.0,
        [1],
        {"a": 1},
        np.dtype("datetime64[s]"),
        np.datetime64,
        np.float32(1),
    ],
)
def test_as_dtype_rejects(value):
    with pytest.raises(TypeError) as info:
        dtypes.as_dtype(value)
    assert str(info.value) == "Cannot convert value %r to a TensorFlow DType." % (value,)


@given(st.sampled_from(ALL))
def test_as_dtype_round_trips(dt):
    assert dtypes.as_dtype(dt) is dt
    assert dtypes.as_dtype(dt.name) is dt
    assert dtypes.as_dtype(dt.as_datatype_enum) is dt
    assert dtypes.DType(dt.as_datatype_enum) is dt
    assert dtypes.as_dtype(dt.type_string) is dt  # "float", "double", "half" are aliases
    assert dtypes.as_dtype(dt.as_numpy_dtype) is dt.base_dtype
    assert dtypes.as_dtype(np.dtype(dt.as_numpy_dtype)) is dt.base_dtype
    assert dtypes.as_dtype(dt.base_dtype.name + "_ref") is dt.as_ref


# ---------------------------------------------------------------------------------------
# infer_dtype
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value,expected",
    [
        (1.0, dtypes.float32),
        (float("nan"), dtypes.float32),
        (1, dtypes.int32),
        (-(2**31), dtypes.int32),
        (2**31 - 1, dtypes.int32),
        (2**31, dtypes.int64),
        (-(2**31) - 1, dtypes.int64),
        (2**63, dtypes.uint64),
        (True, dtypes.bool),
        ("hi", dtypes.string),
        (b"hi", dtypes.string),
        (1j, dtypes.complex128),
        ([1, 2, 3], dtypes.int32),
        ([1, 2**40], dtypes.int64),
        ([1, 2.0], dtypes.float32),
        ([[1, 2], [3, 4.5]], dtypes.float32),
        ((1, (2, 3)[0]), dtypes.int32),
        ([True, False], dtypes.bool),
        ([True, 2], dtypes.int32),
        ([1, 1j], dtypes.complex128),
        (["a", b"b"], dtypes.string),
        ([["a"], ["b"]], dtypes.string),
        ([], dtypes.float32),
        ([[], []], dtypes.float32),
        ([np.int64(5)], dtypes.int32),  # list contents follow TF's Python-value rules
        ([np.float64(0.5)], dtypes.float32),
        ([np.float16(1), np.float16(2)], dtypes.float16),
        ([np.array([1, 2]), np.array([3, 4])], dtypes.int32),
        (np.float64(1.0), dtypes.float64),  # numpy values keep their dtype
        (np.int64(1), dtypes.int64),
        (np.array([1.0, 2.0]), dtypes.float64),
        (np.array([1, 2], dtype=np.int64), dtypes.int64),
        (np.array([1, 2], dtype=np.uint8), dtypes.uint8),
        (np.array(["a"]), dtypes.string),
        (np.array([b"a"]), dtypes.string),
        (np.bool_(True), dtypes.bool),
    ],
)
def test_infer_dtype(value, expected):
    assert dtypes.infer_dtype(value) is expected


def test_infer_dtype_none():
    with pytest.raises(ValueError, match=r"^None values not supported\.$"):
        dtypes.infer_dtype(None)


@pytest.mark.parametrize(
    "value",
    [
        {},
        {"a": 1},
        object(),
        {1, 2},
        [1, None],
        [1, "a"],
        [[1], [{}]],
        2**64,
        [2**64],
        -(2**63) - 1,
    ],
)
def test_infer_dtype_unsupported(value):
    with pytest.raises(TypeError) as info:
        dtypes.infer_dtype(value)
    assert str(info.value) == (
        "Failed to convert object of type %s to Tensor. Contents: %s. Consider casting "
        "elements to a supported type." % (type(value), value)
    )


def test_infer_dtype_unsupported_numpy_dtype():
    with pytest.raises(TypeError, match="to a TensorFlow DType"):
        dtypes.infer_dtype(np.array(["2020-01-01"], dtype="datetime64[D]"))


@pytest.mark.parametrize(
    "value,got,wanted",
    [
        ([[1, 2], [3]], [2], [2, 2]),
        ([[1], 2], [2], [2, 1]),
        ([[[1, 2]], [[3]]], [2, 1], [2, 1, 2]),
        ([[1, 2], []], [2], [2, 2]),
    ],
)
def test_infer_dtype_ragged(value, got, wanted):
    with pytest.raises(ValueError) as info:
        dtypes.infer_dtype(value)
    assert str(info.value) == (
        "Argument must be a dense tensor: %s - got shape %s, but wanted %s." % (value, got, wanted)
    )


def test_infer_dtype_mixed_depth():
    with pytest.raises(ValueError, match="Argument must be a dense tensor: .* mixes scalars"):
        dtypes.infer_dtype([1, [2]])


# Rectangular nests of Python scalars of one kind-mix.
_scalars = st.one_of(
    st.booleans(),
    st.integers(-(2**40), 2**40),
    st.floats(allow_nan=False, allow_infinity=False, width=64),
)


def _rectangular(elements):
    @st.composite
    def build(draw):
        shape = draw(st.lists(st.integers(0, 3), max_size=3))
        count = int(np.prod(shape)) if shape else 1
        flat = draw(st.lists(elements, min_size=count, max_size=count))
        return np.array(flat, dtype=object).reshape(shape).tolist() if shape else flat[0]

    return build()


def _tf_rule(np_dtype, arr):
    if np_dtype == np.float64:
        return dtypes.float32
    if np_dtype == np.int64:
        fits = arr.size == 0 or (-(2**31) <= arr.min() and arr.max() < 2**31)
        return dtypes.int32 if fits else dtypes.int64
    return dtypes.as_dtype(np_dtype)


@given(_rectangular(_scalars))
def test_infer_dtype_matches_numpy_then_tf_rule(value):
    arr = np.asarray(value)
    assert dtypes.infer_dtype(value) is _tf_rule(arr.dtype, arr)
    # An ndarray keeps exactly its own dtype.
    assert dtypes.infer_dtype(arr) is dtypes.as_dtype(arr.dtype)


@given(st.lists(st.integers(-(2**63), 2**63 - 1), min_size=1, max_size=6))
def test_infer_dtype_int_width(ints):
    fits = all(-(2**31) <= i < 2**31 for i in ints)
    assert dtypes.infer_dtype(ints) is (dtypes.int32 if fits else dtypes.int64)


@given(st.lists(st.floats(), min_size=1, max_size=6), st.lists(st.integers(-9, 9), max_size=3))
def test_infer_dtype_any_float_makes_float32(floats, ints):
    assert dtypes.infer_dtype(ints + floats) is dtypes.float32


@given(
    st.one_of(
        st.none(),
        st.text(),
        st.binary(),
        st.integers(),
        st.floats(),
        st.booleans(),
        st.lists(st.integers(), max_size=3),
        st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
        st.sampled_from(
            [
                int,
                float,
                str,
                bytes,
                object,
                complex,
                np.float32,
                np.dtype("U3"),
                np.dtype("datetime64[s]"),
                dtypes.int8,
            ]
        ),
    )
)
def test_eq_never_raises(value):
    result = dtypes.float32 == value
    assert result is True or result is False
