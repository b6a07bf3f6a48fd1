"""Tests for minitf.framework.tensor_shape (TF 1.15 static-shape behaviour)."""

import pickle

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from minitf.framework import dtypes, tensor_shape
from minitf.framework.tensor_shape import Dimension, TensorShape

# ---------------------------------------------------------------------------------------
# Dimension
# ---------------------------------------------------------------------------------------


def test_dimension_value_int_index():
    d = Dimension(3)
    assert d.value == 3
    assert int(d) == 3
    assert list(range(d)) == [0, 1, 2]
    assert ["a", "b", "c", "d"][Dimension(1)] == "b"
    assert Dimension(None).value is None
    assert Dimension(Dimension(4)).value == 4
    assert Dimension(np.int64(5)).value == 5
    assert Dimension(2.0).value == 2
    assert Dimension("7").value == 7


def test_dimension_int_of_unknown_fails():
    with pytest.raises(TypeError):
        int(Dimension(None))


def test_dimension_repr_str():
    assert repr(Dimension(3)) == "Dimension(3)"
    assert repr(Dimension(None)) == "Dimension(None)"
    assert str(Dimension(3)) == "3"
    assert str(Dimension(None)) == "?"


def test_dimension_rejects_bad_values():
    with pytest.raises(ValueError, match=r"^Dimension -1 must be >= 0$"):
        Dimension(-1)
    with pytest.raises(ValueError, match=r"^Ambiguous dimension: 2.5$"):
        Dimension(2.5)
    with pytest.raises(TypeError, match=r"^Cannot convert <dtype: 'int32'> to Dimension$"):
        Dimension(dtypes.int32)
    with pytest.raises(TypeError):
        Dimension(object())
    with pytest.raises(ValueError):
        Dimension("abc")


def test_dimension_eq_is_none_aware():
    assert (Dimension(3) == Dimension(3)) is True
    assert (Dimension(3) == 3) is True
    assert (Dimension(3) == 4) is False
    assert (Dimension(3) != 4) is True
    assert (Dimension(None) == 3) is None
    assert (Dimension(3) == Dimension(None)) is None
    assert (Dimension(None) == Dimension(None)) is None
    assert (Dimension(None) != 3) is None
    assert (Dimension(3) == "not a number") is False  # NotImplemented -> identity fallback


def test_dimension_unhashable():
    with pytest.raises(TypeError):
        hash(Dimension(3))


def test_dimension_bool():
    assert bool(Dimension(2))
    assert not Dimension(0)
    assert not Dimension(None)


def test_dimension_compatible_and_merge():
    assert Dimension(3).is_compatible_with(3)
    assert Dimension(3).is_compatible_with(None)
    assert Dimension(None).is_compatible_with(Dimension(5))
    assert not Dimension(3).is_compatible_with(4)
    assert Dimension(None).merge_with(4).value == 4
    assert Dimension(4).merge_with(None).value == 4
    assert Dimension(4).merge_with(4).value == 4
    assert Dimension(None).merge_with(None).value is None
    with pytest.raises(ValueError, match=r"^Dimensions 3 and 4 are not compatible$"):
        Dimension(3).merge_with(4)
    with pytest.raises(ValueError, match=r"^Dimensions 3 and 4 are not compatible$"):
        Dimension(3).assert_is_compatible_with(Dimension(4))


def test_dimension_arithmetic_and_ordering():
    assert (Dimension(3) + 4).value == 7
    assert (4 + Dimension(3)).value == 7
    assert (Dimension(5) - 2).value == 3
    assert (9 - Dimension(5)).value == 4
    assert (Dimension(3) * Dimension(4)).value == 12
    assert (2 * Dimension(4)).value == 8
    assert (Dimension(7) // 2).value == 3
    assert (7 // Dimension(2)).value == 3
    assert (Dimension(7) % 4).value == 3
    assert (Dimension(None) + 1).value is None
    assert (3 * Dimension(None)).value is None
    assert (Dimension(2) < 3) is True
    assert (Dimension(2) >= 3) is False
    assert (Dimension(2) <= 2) is True
    assert (Dimension(None) > 3) is None
    with pytest.raises(ValueError, match="must be >= 0"):
        Dimension(2) - 5


def test_dimension_pickles():
    assert pickle.loads(pickle.dumps(Dimension(6))).value == 6
    assert pickle.loads(pickle.dumps(Dimension(None))).value is None


def test_as_dimension_and_dimension_value():
    d = Dimension(2)
    assert tensor_shape.as_dimension(d) is d
    assert tensor_shape.as_dimension(2).value == 2
    assert tensor_shape.dimension_value(d) == 2
    assert tensor_shape.dimension_value(None) is None
    assert tensor_shape.dimension_value(5) == 5


# ---------------------------------------------------------------------------------------
# TensorShape: construction and reading
# ---------------------------------------------------------------------------------------


def test_construction_forms():
    assert TensorShape([2, 3]).as_list() == [2, 3]
    assert TensorShape((2, None)).as_list() == [2, None]
    assert TensorShape([Dimension(2), Dimension(None)]).as_list() == [2, None]
    assert TensorShape(TensorShape([4])).as_list() == [4]
    assert TensorShape(5).as_list() == [5]  # a lone int is a rank-1 shape (as TF)
    assert TensorShape([]).as_list() == []
    assert TensorShape(None).dims is None
    assert TensorShape(np.array([2, 3])).as_list() == [2, 3]
    with pytest.raises(TypeError, match="A string has ambiguous TensorShape"):
        TensorShape("23")
    with pytest.raises(ValueError, match="must be >= 0"):
        TensorShape([2, -1])


def test_rank_dims_len():
    s = TensorShape([2, None, 4])
    assert s.ndims == 3 and s.rank == 3
    assert len(s) == 3
    assert all(isinstance(d, Dimension) for d in s.dims)
    assert [d.value for d in s.dims] == [2, None, 4]
    assert TensorShape(None).ndims is None and TensorShape(None).rank is None
    with pytest.raises(ValueError, match="Cannot take the length of Shape with unknown rank."):
        len(TensorShape(None))


def test_dims_list_is_a_copy():
    s = TensorShape([1, 2])
    s.dims.append(Dimension(3))
    assert s.as_list() == [1, 2]


def test_as_list_unknown_rank():
    with pytest.raises(ValueError) as info:
        TensorShape(None).as_list()
    assert str(info.value) == "as_list() is not defined on an unknown TensorShape."


def test_fully_defined_and_num_elements():
    assert TensorShape([2, 3]).is_fully_defined()
    assert TensorShape([]).is_fully_defined()
    assert not TensorShape([2, None]).is_fully_defined()
    assert not TensorShape(None).is_fully_defined()
    assert TensorShape([2, 3, 4]).num_elements() == 24
    assert TensorShape([]).num_elements() == 1
    assert TensorShape([2, 0]).num_elements() == 0
    assert TensorShape([2, None]).num_elements() is None
    assert TensorShape(None).num_elements() is None
    TensorShape([1]).assert_is_fully_defined()
    with pytest.raises(ValueError, match=r"^Shape \(\?, 2\) is not fully defined$"):
        TensorShape([None, 2]).assert_is_fully_defined()


def test_iter():
    dims = list(TensorShape([2, None]))
    assert all(isinstance(d, Dimension) for d in dims)
    assert [d.value for d in dims] == [2, None]
    with pytest.raises(ValueError, match="Cannot iterate over a shape with unknown rank."):
        iter(TensorShape(None))


def test_getitem_known_rank():
    s = TensorShape([2, 3, None])
    assert isinstance(s[0], Dimension) and s[0].value == 2
    assert s[-1].value is None
    assert isinstance(s[1:], TensorShape)
    assert s[1:].as_list() == [3, None]
    assert s[::2].as_list() == [2, None]
    with pytest.raises(IndexError):
        s[3]


def test_getitem_unknown_rank():
    u = TensorShape(None)
    assert u[0].value is None
    assert u[5].value is None
    assert u[1:3].as_list() == [None, None]
    assert u[1:].dims is None
    assert u[-2:].dims is None
    with pytest.raises(ValueError, match="Steps are not yet handled"):
        u[::2]


def test_bool():
    assert bool(TensorShape([2]))
    assert bool(TensorShape([]))  # rank known, even if scalar
    assert not TensorShape(None)


def test_str_and_repr():
    assert str(TensorShape([2, 3])) == "(2, 3)"
    assert str(TensorShape([None, 3])) == "(?, 3)"
    assert str(TensorShape([3])) == "(3,)"
    assert str(TensorShape([None])) == "(?,)"
    assert str(TensorShape([])) == "()"
    assert str(TensorShape(None)) == "<unknown>"
    assert repr(TensorShape([2, 3])) == "TensorShape([Dimension(2), Dimension(3)])"
    assert repr(TensorShape([None])) == "TensorShape([Dimension(None)])"
    assert repr(TensorShape([])) == "TensorShape([])"
    assert repr(TensorShape(None)) == "TensorShape(None)"


def test_unhashable():
    with pytest.raises(TypeError):
        hash(TensorShape([1, 2]))
    with pytest.raises(TypeError):
        {TensorShape([1]): 1}


def test_pickle():
    for s in (TensorShape([2, None]), TensorShape([]), TensorShape(None)):
        back = pickle.loads(pickle.dumps(s))
        assert back.dims is None if s.dims is None else back.as_list() == s.as_list()
        assert str(back) == str(s)


# ---------------------------------------------------------------------------------------
# TensorShape: equality
# ---------------------------------------------------------------------------------------


def test_eq_fully_defined():
    assert TensorShape([2, 3]) == TensorShape([2, 3])
    assert TensorShape([2, 3]) == [2, 3]
    assert TensorShape([2, 3]) == (2, 3)
    assert not TensorShape([2, 3]) == TensorShape([3, 2])
    assert not TensorShape([2, 3]) == TensorShape([2])
    assert TensorShape([]) == TensorShape([])


def test_eq_partial_and_unknown_follow_tf1():
    # Two separately built partial shapes are not equal (Dimension(None) == ... is None).
    assert not TensorShape([None, 3]) == TensorShape([None, 3])
    s = TensorShape([None, 3])
    assert s == s  # the very same Dimension objects
    assert TensorShape(None) == TensorShape(None)
    assert not TensorShape(None) == TensorShape([])
    assert not TensorShape([1]) == TensorShape(None)
    assert (TensorShape([1]) == "abc") is False


def test_ne():
    assert TensorShape([2, 3]) != TensorShape([2, 4])
    assert TensorShape([2, 3]) != TensorShape([2])
    assert not TensorShape([2, 3]) != TensorShape([2, 3])
    for a, b in (
        (TensorShape(None), TensorShape(None)),
        (TensorShape(None), TensorShape([1])),
        (TensorShape([1]), TensorShape(None)),
    ):
        with pytest.raises(
            ValueError, match="The inequality of unknown TensorShapes is undefined."
        ):
            a != b


# ---------------------------------------------------------------------------------------
# TensorShape: compatibility, merging, concatenation, ranks
# ---------------------------------------------------------------------------------------


def test_is_compatible_with():
    assert TensorShape(None).is_compatible_with([2, 3])
    assert TensorShape([2, 3]).is_compatible_with(None)
    assert TensorShape([None, None]).is_compatible_with([32, 784])
    assert TensorShape([32, None]).is_compatible_with([32, 784])
    assert not TensorShape([32, None]).is_compatible_with([64, 784])
    assert not TensorShape([None, None]).is_compatible_with([None])
    assert not TensorShape([2]).is_compatible_with([2, 1])
    assert TensorShape([]).is_compatible_with([])


def test_assert_is_compatible_with():
    TensorShape([None]).assert_is_compatible_with([3])
    with pytest.raises(ValueError) as info:
        TensorShape([2]).assert_is_compatible_with(TensorShape([3]))
    assert str(info.value) == "Shapes (2,) and (3,) are incompatible"
    with pytest.raises(ValueError, match=r"^Shapes \(2, \?\) and \(2,\) are incompatible$"):
        TensorShape([2, None]).assert_is_compatible_with([2])


def test_merge_with():
    assert TensorShape([None, 3]).merge_with([2, None]).as_list() == [2, 3]
    assert TensorShape(None).merge_with([2]).as_list() == [2]
    assert TensorShape([2]).merge_with(None).as_list() == [2]
    assert TensorShape(None).merge_with(None).dims is None
    with pytest.raises(ValueError) as info:
        TensorShape([2]).merge_with(TensorShape([3]))
    assert str(info.value) == "Shapes (2,) and (3,) are not compatible"
    with pytest.raises(ValueError, match=r"^Shapes \(2,\) and \(2, 2\) are not compatible$"):
        TensorShape([2]).merge_with([2, 2])


def test_most_specific_compatible_shape():
    a = TensorShape([2, 3, None])
    assert a.most_specific_compatible_shape([2, 4, 5]).as_list() == [2, None, None]
    assert a.most_specific_compatible_shape([2]).dims is None
    assert a.most_specific_compatible_shape(None).dims is None


def test_concatenate_and_add():
    assert TensorShape([1, 2]).concatenate([3]).as_list() == [1, 2, 3]
    assert TensorShape([1]).concatenate(TensorShape(None)).dims is None
    assert TensorShape(None).concatenate([1]).dims is None
    assert (TensorShape([1]) + [2, None]).as_list() == [1, 2, None]
    assert ([0] + TensorShape([1])).as_list() == [0, 1]


def test_rank_helpers():
    assert TensorShape(None).with_rank(2).as_list() == [None, None]
    assert TensorShape([1, None]).with_rank(2).as_list() == [1, None]
    with pytest.raises(ValueError, match=r"^Shape \(1, 2\) must have rank 3$"):
        TensorShape([1, 2]).with_rank(3)
    assert TensorShape([1, 2]).with_rank_at_least(2).as_list() == [1, 2]
    assert TensorShape(None).with_rank_at_least(5).dims is None
    with pytest.raises(ValueError, match=r"^Shape \(1,\) must have rank at least 2$"):
        TensorShape([1]).with_rank_at_least(2)
    assert TensorShape([1]).with_rank_at_most(1).as_list() == [1]
    with pytest.raises(ValueError, match=r"^Shape \(1, 2\) must have rank at most 1$"):
        TensorShape([1, 2]).with_rank_at_most(1)
    TensorShape(None).assert_has_rank(4)
    with pytest.raises(ValueError, match=r"^Shape \(\) must have rank 1$"):
        TensorShape([]).assert_has_rank(1)
    TensorShape([1]).assert_same_rank(None)
    with pytest.raises(ValueError, match=r"^Shapes \(1,\) and \(1, 2\) must have the same rank"):
        TensorShape([1]).assert_same_rank([1, 2])


# ---------------------------------------------------------------------------------------
# Module functions
# ---------------------------------------------------------------------------------------


def test_constructor_functions():
    s = TensorShape([1])
    assert tensor_shape.as_shape(s) is s
    assert tensor_shape.as_shape([1, None]).as_list() == [1, None]
    assert tensor_shape.unknown_shape().dims is None
    assert tensor_shape.unknown_shape(3).as_list() == [None] * 3
    assert tensor_shape.unknown_shape(rank=2).as_list() == [None, None]
    assert tensor_shape.unknown_shape(ndims=1).as_list() == [None]
    with pytest.raises(TypeError, match="Unknown argument"):
        tensor_shape.unknown_shape(bogus=1)
    assert tensor_shape.scalar().as_list() == []
    assert tensor_shape.vector(4).as_list() == [4]
    assert tensor_shape.vector(None).as_list() == [None]
    assert tensor_shape.matrix(2, None).as_list() == [2, None]


@pytest.mark.parametrize(
    "x,y,expected",
    [
        ([2, 3], [3], [2, 3]),
        ([2, 1], [1, 4], [2, 4]),
        ([], [5], [5]),
        ([5, 1, 3], [4, 1], [5, 4, 3]),
        ([None, 3], [3], [None, 3]),
        ([None], [4], [4]),
        ([None], [1], [None]),
        ([1], [None], [None]),
        ([None], [None], [None]),
        ([None], [0], [None]),
        ([0], [1], [0]),
        ([0], [0], [0]),
        ([2, None], [None, 1, 5], [None, 2, 5]),
    ],
)
def test_broadcast_static_shape(x, y, expected):
    result = tensor_shape.broadcast_static_shape(TensorShape(x), TensorShape(y))
    assert isinstance(result, TensorShape)
    assert result.as_list() == expected
    assert tensor_shape.broadcast_static_shape(y, x).as_list() == expected


def test_broadcast_static_shape_unknown_rank():
    assert tensor_shape.broadcast_static_shape(TensorShape(None), [2, 3]).dims is None
    assert tensor_shape.broadcast_static_shape([2], TensorShape(None)).dims is None


def test_broadcast_static_shape_incompatible():
    with pytest.raises(ValueError) as info:
        tensor_shape.broadcast_static_shape(TensorShape([2]), TensorShape([3]))
    assert str(info.value) == "Incompatible shapes for broadcasting: (2,) and (3,)"
    with pytest.raises(
        ValueError,
        match=r"^Incompatible shapes for broadcasting: "
        r"\(\?, 2\) and \(4, 3\)$",
    ):
        tensor_shape.broadcast_static_shape([None, 2], [4, 3])


# ---------------------------------------------------------------------------------------
# Properties
# ---------------------------------------------------------------------------------------

known_dims = st.lists(st.integers(0, 4), max_size=4)
maybe_dim = st.one_of(st.none(), st.integers(0, 3))
shapes = st.one_of(st.none(), st.lists(maybe_dim, max_size=3)).map(TensorShape)


@given(known_dims, known_dims)
def test_broadcast_agrees_with_numpy(x, y):
    try:
        expected = list(np.broadcast_shapes(tuple(x), tuple(y)))
    except ValueError:
        with pytest.raises(ValueError, match="Incompatible shapes for broadcasting"):
            tensor_shape.broadcast_static_shape(TensorShape(x), TensorShape(y))
    else:
        assert tensor_shape.broadcast_static_shape(x, y).as_list() == expected


@given(known_dims, known_dims, st.data())
def test_broadcast_with_unknowns_is_compatible_with_the_truth(x, y, data):
    try:
        truth = TensorShape(list(np.broadcast_shapes(tuple(x), tuple(y))))
    except ValueError:
        assume(False)
    hide_x = data.draw(st.lists(st.booleans(), min_size=len(x), max_size=len(x)))
    hide_y = data.draw(st.lists(st.booleans(), min_size=len(y), max_size=len(y)))
    px = [None if h else d for d, h in zip(x, hide_x)]
    py = [None if h else d for d, h in zip(y, hide_y)]
    partial = tensor_shape.broadcast_static_shape(px, py)
    assert partial.ndims == truth.ndims
    assert partial.is_compatible_with(truth)


@given(shapes, shapes)
def test_merge_with_is_commutative_when_it_succeeds(a, b):
    try:
        ab = a.merge_with(b)
    except ValueError:
        assert not a.is_compatible_with(b)
        with pytest.raises(ValueError, match="are not compatible"):
            b.merge_with(a)
        return
    ba = b.merge_with(a)
    assert a.is_compatible_with(b) and b.is_compatible_with(a)
    assert (ab.dims is None) == (ba.dims is None)
    if ab.dims is not None:
        assert ab.as_list() == ba.as_list()
    assert ab.is_compatible_with(a) and ab.is_compatible_with(b)


@given(shapes, shapes)
def test_compatibility_is_symmetric(a, b):
    assert a.is_compatible_with(b) == b.is_compatible_with(a)


@given(shapes, shapes)
def test_concatenate_adds_ranks(a, b):
    c = a.concatenate(b)
    if a.ndims is None or b.ndims is None:
        assert c.ndims is None
    else:
        assert c.ndims == a.ndims + b.ndims
        assert c.as_list() == a.as_list() + b.as_list()


@given(known_dims)
def test_fully_defined_shape_matches_numpy(dims):
    s = TensorShape(dims)
    assert s.num_elements() == int(np.prod(dims, dtype=np.int64))
    assert s == TensorShape(tuple(dims))
    assert str(s) == (str(tuple(dims)) if len(dims) != 1 else "(%d,)" % dims[0])
    assert TensorShape(np.zeros(dims).shape).as_list() == dims


@given(shapes)
def test_str_shows_question_marks(s):
    if s.ndims is None:
        assert str(s) == "<unknown>"
    else:
        inner = [("?" if d is None else str(d)) for d in s.as_list()]
        assert str(s) == ("(%s,)" % inner[0] if len(inner) == 1 else "(%s)" % ", ".join(inner))
