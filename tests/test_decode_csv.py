"""``tf.decode_csv``, ``tf.decode_raw`` and ``tf.string_split``: graph-time checks, TF 1.15's
field splitting and number parsing, the defaults, and round trips against Python's ``csv``.

Book section: "Loading Data Directly from the Graph".  Expected values and texts are the
reference semantics' part 2 §14.3 and §14.5 (TF 1.15; the cases TF 2.21 shares were compared
with it by hand) and the chapter notebook's cell 17.
"""

import csv
import io
import math
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import minitf as tf

BOOK_DEFAULTS = [[-1.0], [-1.0], [-1]]


def decode(record, defaults, **kw):
    """``decode_csv`` of ``record`` (fed to a string placeholder) run in a session."""
    r = tf.placeholder(tf.string)
    outs = tf.decode_csv(r, defaults, **kw)
    with tf.Session() as s:
        return s.run(outs, {r: record})


def decode_error(record, defaults, **kw):
    with pytest.raises(tf.errors.InvalidArgumentError) as e:
        decode(record, defaults, **kw)
    return e.value.message.splitlines()[0]


# -- graph construction ------------------------------------------------------------------------


def test_one_op_with_dtypes_from_the_defaults():
    r = tf.placeholder(tf.string, shape=[None])
    outs = tf.decode_csv(r, [[1.0], [1], [""], tf.constant([], tf.int64), np.array([2.0])])
    assert isinstance(outs, list) and len(outs) == 5
    assert [t.name for t in outs] == ["DecodeCSV:%d" % i for i in range(5)]
    assert [t.dtype for t in outs] == [tf.float32, tf.int32, tf.string, tf.int64, tf.float64]
    assert all(t.shape.as_list() == [None] for t in outs)
    op = outs[0].op
    assert op.type == "DecodeCSV" and op.get_attr("field_delim") == ","
    assert op.get_attr("use_quote_delim") is True and op.get_attr("na_value") == ""
    assert op.get_attr("select_cols") == []
    assert [t.op.name for t in op.inputs[1:3]] == [
        "DecodeCSV/record_defaults_0",
        "DecodeCSV/record_defaults_1",
    ]
    assert tf.decode_csv("1", [[1]], name="parse")[0].name == "parse:0"


def test_graph_time_errors():
    r = tf.placeholder(tf.string)
    with pytest.raises(TypeError) as e:
        tf.decode_csv(r, [[True]])
    assert str(e.value) == (
        "Value passed to parameter 'record_defaults' has DataType bool not in list of allowed "
        "values: float32, float64, int32, int64, string"
    )
    with pytest.raises(ValueError) as e:
        tf.decode_csv(r, [[1.0], [2.0, 3.0]])
    assert str(e.value) == (
        "Shape of a default must be a length-0 or length-1 vector, or a scalar. for "
        "'DecodeCSV_1' (op: 'DecodeCSV') with input shapes: ?, [1], [2]."
    )
    with pytest.raises(ValueError, match="Shape must be at most rank 1 but is rank 2"):
        tf.decode_csv(r, [[[1.0]]])
    for cols, text in (
        ([1, 0], "select_cols is not strictly increasing."),
        ([-1, 0], "select_cols contains negative values."),
        ([0, 1, 2], "Length of select_cols and record_defaults do not match."),
    ):
        with pytest.raises(ValueError) as e:
            tf.decode_csv(r, [[1], [2]], select_cols=cols)
        assert str(e.value) == text


# -- §14.5 conformance cases -------------------------------------------------------------------


def test_notebook_cell_17():
    outs = tf.decode_csv(tf.constant("1.,,44"), [tf.constant([5.0]), tf.constant([6]), [7]])
    with tf.Session() as s:
        assert s.run(outs) == [1.0, 6, 44]


@pytest.mark.parametrize(
    "record,expected",
    [
        ("1.,, 0", [1.0, -1.0, 0]),
        ("1,2, 3 ", [1.0, 2.0, 3]),
        ("1.,2.,", [1.0, 2.0, -1]),
        ("7.,    ,0", [7.0, 0.0, 0]),  # 1.15: a whitespace-only float field is 0.0
    ],
)
def test_book_defaults(record, expected):
    got = decode(record, BOOK_DEFAULTS)
    assert got == expected
    assert [type(v) for v in got] == [np.float32, np.float32, np.int32]


def test_a_vector_of_records_gives_vectors():
    x1, x2, y = decode(["1,2,3", "4,,6"], BOOK_DEFAULTS)
    np.testing.assert_array_equal(x1, [1.0, 4.0])
    np.testing.assert_array_equal(x2, [2.0, -1.0])
    np.testing.assert_array_equal(y, [3, 6])
    assert y.dtype == np.int32
    (m,) = decode([["1", "2"], ["3", " 4"]], [[0]])
    np.testing.assert_array_equal(m, [[1, 2], [3, 4]])
    assert decode_error(["1", ""], [[0]]) == "Expect 1 fields but have 0 in record 1"


@pytest.mark.parametrize(
    "record,text",
    [
        ("", "Expect 3 fields but have 0 in record 0"),
        ("1,2", "Expect 3 fields but have 2 in record 0"),
        ("1,2,3.5", "Field 2 in record 0 is not a valid int32: 3.5"),
        ("a,2,3", "Field 0 in record 0 is not a valid float: a"),
        ("1, ,  ", "Field 2 in record 0 is not a valid int32:   "),
        (["1,2,3", "1,2,+5"], "Field 2 in record 1 is not a valid int32: +5"),
    ],
)
def test_book_defaults_errors(record, text):
    assert decode_error(record, BOOK_DEFAULTS) == text


def test_quoting():
    assert decode('"a,b","c""d"', [[""], ["x"]]) == [b"a,b", b'c"d']
    assert decode(",", [[""], ["x"]]) == [b"", b"x"]
    assert decode('a,"b"', [[""], [""]]) == [b"a", b"b"]
    assert decode_error('a"b,c', [[""], [""]]) == "Unquoted fields cannot have quotes/CRLFs inside"
    assert decode_error('"a"b,c', [[""], [""]]) == (
        "Quote inside a string has to be escaped by another quote"
    )
    for record in ('"abc', '",'):
        assert decode_error(record, [[""], [""]]) == (
            "Quoted field has to end with quote followed by delim or end"
        )
    # use_quote_delim=False: quotes are ordinary characters
    assert decode('"a,b', [[""], [""]], use_quote_delim=False) == [b'"a', b"b"]
    assert decode('a"b,"c"', [[""], [""]], use_quote_delim=False) == [b'a"b', b'"c"']


def test_cr_and_lf():
    assert decode("a,\rb", [[""], [""]]) == [b"a", b"b"]  # skipped at a field's start
    assert decode("\na,b", [[""], [""]]) == [b"a", b"b"]
    assert decode_error("a,b,\r", [[""], [""], [""]]) == "Expect 3 fields but have 2 in record 0"
    assert decode_error("a,b\r", [[""], [""]]) == "Unquoted fields cannot have quotes/CRLFs inside"
    assert decode('"a\r\nb",c', [[""], [""]]) == [b"a\r\nb", b"c"]


def test_required_columns_and_na_value():
    required = [[1.0], tf.constant([], tf.int32)]
    assert decode_error("1.5,", required) == "Field 1 is required but missing in record 0!"
    assert decode("1.5,2", required) == [1.5, 2]
    assert decode("NA,NA", [[7.0], [""]], na_value="NA") == [7.0, b""]
    assert decode_error("na,x", [[7.0], [""]], na_value="NA") == (
        "Field 0 in record 0 is not a valid float: na"
    )
    assert decode_error(",", [tf.constant([], tf.string), [""]]) == (
        "Field 0 is required but missing in record 0!"
    )


def test_scalar_defaults():
    assert decode("1,", [1.0, 2]) == [1.0, 2]
    assert decode(",x", ["d", ""]) == [b"d", b"x"]


def test_strings_are_kept_verbatim():
    assert decode("  a , b\t", [[""], [""]]) == [b"  a ", b" b\t"]


def test_floats_as_double_conversion_parses_them():
    got = decode("0x10, inf,NAN,-Inf,1e3", [[0.0]] * 5)
    assert got[0] == 16.0 and got[1] == math.inf and math.isnan(got[2]) and got[3] == -math.inf
    assert got[4] == 1000.0
    assert decode("1.,.5,-0,1E-2,+2", [[0.0]] * 5) == [1.0, 0.5, 0.0, 0.01, 2.0]
    assert decode("0X1f,1.e2, 010 ,\t2\t,1e400", [[0.0]] * 5) == [31.0, 100.0, 10.0, 2.0, math.inf]
    assert decode("0" * 31, [[0.0]]) == [0.0]
    for field in ("1e", "0x1.8p1", "infinity", "1_0", "+ 1", "abc", "0" * 32, "1.5x"):
        assert decode_error(field, [[0.0]]) == "Field 0 in record 0 is not a valid float: " + field
    (d,) = decode("0.1", [np.array([0.0])])
    assert d == 0.1 and type(d) is np.float64
    assert decode_error("x", [np.array([0.0])]) == "Field 0 in record 0 is not a valid double: x"


def test_integers_as_safe_strto32_parses_them():
    assert decode(" 7 ,007,2147483647,-2147483648", [[0]] * 4) == [7, 7, 2**31 - 1, -(2**31)]
    for field in ("+5", "2147483648", "0x10", "1e2", "1.0", "- 1"):
        assert decode_error(field, [[0]]) == "Field 0 in record 0 is not a valid int32: " + field
    big = tf.constant([0], tf.int64)
    assert decode("9223372036854775807", [big]) == [2**63 - 1]
    assert decode_error("9223372036854775808", [big]) == (
        "Field 0 in record 0 is not a valid int64: 9223372036854775808"
    )


def test_select_cols_and_field_delim():
    assert decode("a,1,b,c,d", [[0.0], [""]], select_cols=[1, 3]) == [1.0, b"c"]
    assert decode("x,2,y,", [[0.0], [""]], select_cols=[1, 3]) == [2.0, b""]
    assert decode_error("1,2", [[0.0], [""]], select_cols=[1, 3]) == (
        "Expect 2 fields but have 1 in record 0"
    )
    assert decode("a\tb", [[""], [""]], field_delim="\t") == [b"a", b"b"]
    assert decode_error("a", [[""]], field_delim="ab") == "field_delim should be only 1 char"


def test_the_books_csv_through_a_reader(tmp_path):
    """The chapter map's 3-line file with its header and missing value (§14.3)."""
    path = tmp_path / "my_test.csv"
    path.write_bytes(b"x1, x2 , target\n1.,, 0\n4., 5. , 1\n7., 8. , 0\n")
    fq = tf.FIFOQueue(2, tf.string, shapes=[[]])
    init = [fq.enqueue(str(path)), fq.close()]
    _, line = tf.TextLineReader(skip_header_lines=1).read(fq)
    x1, x2, target = tf.decode_csv(line, record_defaults=BOOK_DEFAULTS)
    features = tf.stack([x1, x2])
    with tf.Session() as s:
        for op in init:
            s.run(op)
        got = [s.run([features, target]) for _ in range(3)]
        with pytest.raises(tf.errors.OutOfRangeError):
            s.run(target)
    assert [(list(x), y) for x, y in got] == [([1.0, -1.0], 0), ([4.0, 5.0], 1), ([7.0, 8.0], 0)]
    assert str(path) not in open_files()  # the reader closed the file


def open_files():
    """What this process's file descriptors point to."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            found.append(os.readlink("/proc/self/fd/" + fd))
        except OSError:  # the descriptor listdir itself used
            pass
    return found


# -- round trips against Python's csv module ---------------------------------------------------

TEXT = st.text(alphabet=st.characters(codec="ascii", exclude_characters="\0"), max_size=8)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(TEXT, min_size=2, max_size=2), min_size=1, max_size=4))
def test_round_trip_of_quoted_strings(rows):
    """What ``csv.writer`` writes (quoting as needed), decode_csv reads back as ``csv.reader``
    does, for rows of two string fields."""
    lines = []
    for row in rows:
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\r\n").writerow(row)  # quotes fields with CR or LF
        lines.append(buf.getvalue()[:-2])
    a, b = decode(lines, [[""], [""]])
    back = [next(csv.reader([line])) for line in lines]
    assert [[x.decode(), y.decode()] for x, y in zip(a, b)] == back


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(-(2**31), 2**31 - 1), st.floats(allow_nan=False, width=64)),
        min_size=1,
        max_size=5,
    )
)
def test_round_trip_of_numbers(rows):
    lines = ["%d,%r" % (i, x) for i, x in rows]
    i_col, x_col = decode(lines, [[0], np.array([0.0])])
    parsed = [(int(r[0]), float(r[1])) for r in csv.reader(lines)]
    assert list(zip(i_col.tolist(), x_col.tolist())) == parsed


# -- decode_raw --------------------------------------------------------------------------------


def test_decode_raw():
    raw = np.array([1, -2], dtype="<i4").tobytes()
    out = tf.decode_raw(tf.constant([raw, raw[::-1]]), tf.int32)
    assert out.op.type == "DecodeRaw" and out.name == "DecodeRaw:0"
    assert out.shape.as_list() == [2, None] and out.dtype == tf.int32
    big = tf.decode_raw(raw, tf.int32, little_endian=False)
    halves = tf.decode_raw(bytes=tf.constant(raw), out_type=tf.uint16)
    floats = tf.decode_raw(np.array([1.5], "<f8").tobytes(), tf.float64)
    with tf.Session() as s:
        got = s.run(out)
        np.testing.assert_array_equal(got[0], [1, -2])
        assert got.shape == (2, 2) and got.dtype == np.int32
        np.testing.assert_array_equal(s.run(big), np.array([1, -2], ">i4").byteswap().view(">i4"))
        np.testing.assert_array_equal(s.run(halves), [1, 0, 65534, 65535])
        np.testing.assert_array_equal(s.run(floats), [1.5])


def test_decode_raw_errors():
    with pytest.raises(TypeError) as e:
        tf.decode_raw(b"ab", tf.string)
    assert str(e.value).startswith(
        "Value passed to parameter 'out_type' has DataType string not in list of allowed "
        "values: float16, float32, float64, int32"
    )
    with pytest.raises(ValueError, match="Cannot specify both 'input_bytes' and 'bytes'"):
        tf.decode_raw(b"ab", tf.uint8, bytes=b"cd")
    with pytest.raises(ValueError, match="missing 1 positional argument: 'out_type'"):
        tf.decode_raw(b"ab")
    uneven = tf.decode_raw(["abcd", "ab"], tf.uint8)
    odd = tf.decode_raw(["abc"], tf.int16)
    with tf.Session() as s:
        with pytest.raises(tf.errors.InvalidArgumentError) as e:
            s.run(uneven)
        assert e.value.message.splitlines()[0] == (
            "DecodeRaw requires input strings to all be the same size, but element 1 has size "
            "2 != 4"
        )
        with pytest.raises(tf.errors.InvalidArgumentError) as e:
            s.run(odd)
        assert e.value.message.splitlines()[0] == (
            "Input to DecodeRaw has length 3 that is not a multiple of 2, the size of int16"
        )


# -- string_split ------------------------------------------------------------------------------


def test_string_split_is_a_sparse_tensor():
    sp = tf.string_split(["hello world", "a  b c", ""])
    assert isinstance(sp, tf.SparseTensor) and sp.dtype == tf.string
    assert sp.indices.name == "StringSplit:0" and sp.values.name == "StringSplit:1"
    assert sp.dense_shape.name == "StringSplit:2" and sp.op.type == "StringSplit"
    assert sp.indices.shape.as_list() == [None, 2] and sp.shape.as_list() == [None, None]
    with tf.Session() as s:
        v = s.run(sp)
    assert isinstance(v, tf.SparseTensorValue)
    assert v.indices.tolist() == [[0, 0], [0, 1], [1, 0], [1, 1], [1, 2]]
    assert v.values.tolist() == [b"hello", b"world", b"a", b"b", b"c"]
    assert v.dense_shape.tolist() == [3, 3] and v.indices.dtype == np.int64


def test_string_split_delimiters():
    cases = [
        (tf.string_split(["a,b;;c"], delimiter=",;"), [b"a", b"b", b"c"], [1, 3]),
        (tf.string_split(["a,,b"], ",", skip_empty=False), [b"a", b"", b"b"], [1, 3]),
        (tf.string_split(["abc"], sep=""), [b"a", b"b", b"c"], [1, 3]),
        (tf.string_split(["", "x"], skip_empty=False), [b"", b"x"], [2, 1]),
    ]
    with tf.Session() as s:
        for sp, values, shape in cases:
            v = s.run(sp)
            assert v.values.tolist() == values and v.dense_shape.tolist() == shape


def test_string_split_errors():
    with pytest.raises(ValueError) as e:
        tf.string_split("a b")
    assert str(e.value) == (
        "Shape must be rank 1 but is rank 0 for 'StringSplit' (op: 'StringSplit') with input "
        "shapes: [], []."
    )
    with pytest.raises(ValueError, match="Cannot specify both 'sep' and 'delimiter'"):
        tf.string_split(["a"], sep=",", delimiter=";")
    with pytest.raises(NotImplementedError):
        tf.string_split(["a"], result_type="RaggedTensor")
    with pytest.raises(ValueError, match="result_type must be 'RaggedTensor' or 'SparseTensor'."):
        tf.string_split(["a"], result_type="dense")
    p = tf.placeholder(tf.string)
    sp = tf.string_split(p)
    with tf.Session() as s:
        with pytest.raises(tf.errors.InvalidArgumentError) as e:
            s.run(sp, {p: "a b"})
    assert e.value.message.splitlines()[0] == "input must be a vector, got shape: []"


def test_sparse_tensor_constructor():
    sp = tf.SparseTensor(indices=[[0, 1], [2, 0]], values=[1.0, 2.0], dense_shape=[3, 4])
    assert sp.shape.as_list() == [3, 4] and sp.get_shape().as_list() == [3, 4]
    assert sp.indices.dtype == tf.int64 and sp.dtype == tf.float32
    assert sp.graph is tf.get_default_graph()
    assert repr(sp).startswith("SparseTensor(indices=Tensor(")
    with tf.Session() as s:
        v = s.run({"sp": sp})["sp"]
    assert v.values.tolist() == [1.0, 2.0] and v.dense_shape.tolist() == [3, 4]
    with pytest.raises(ValueError):
        tf.SparseTensor(indices=[0, 1], values=[1.0], dense_shape=[2])


_FIELDS = st.sampled_from(
    [
        b"1",
        b"-7",
        b" 2.5 ",
        b"1.",
        b".5",
        b"3e2",
        b"-1.5E-3",
        b"+4",
        b"",
        b"NA",
        b"  ",
        b"nan",
        b"inf",
        b"0x1f",
        b"1_0",
        b"\t8",
        b"x",
        b"9" * 40,
        b"1.2.3",
        b"99999999999",
        b'"q"',
        b"a b",
    ]
)


@settings(max_examples=120, deadline=None)
@given(
    rows=st.lists(st.lists(_FIELDS, min_size=3, max_size=3), min_size=1, max_size=6),
    required=st.booleans(),
    separator=st.sampled_from([b",", b",,"]),
)
def test_the_fast_path_gives_what_the_exact_parser_gives(rows, required, separator):
    """Plain records are split and converted by numpy at once; whatever the records, the
    results (or the error) are the exact parser's."""
    from minitf.kernels import parsing_kernels

    records = [separator.join(row) for row in rows]
    defaults = [[0.5], [] if required else [7], ["d"]]

    def run():
        with tf.Graph().as_default():
            try:
                return repr(
                    [np.asarray(v).tolist() for v in decode(records, defaults, na_value="NA")]
                )
            except tf.errors.InvalidArgumentError as e:
                return e.message

    fast = run()
    with pytest.MonkeyPatch.context() as m:
        m.setattr(parsing_kernels, "_fast_columns", lambda *a: None)
        exact = run()
    assert fast == exact


def test_plain_records_take_the_fast_path_and_others_the_exact_one():
    from minitf.kernels import parsing_kernels as pk

    def fast(*records):
        records = np.array(records, dtype=object)
        return pk._fast_columns(records, [tf.float32, tf.int32], ord(","), True, b"", [0.0, None])

    got = fast(b"1.5, 2", b",-3")
    assert [c.tolist() for c in got] == [[1.5, 0.0], [2, -3]]
    assert got[0].dtype == np.float32 and got[1].dtype == np.int32
    for plain_no_more in ([b'"1",2'], [b"0x1f,2"], [b"1,"], [b"1,2,3"], [b"1,99999999999"]):
        assert fast(*plain_no_more) is None
