"""What a ``StridedSlice`` selects: TF's ``ValidateStridedSliceOp`` as a numpy index.

Book section: none of its own -- ``x[1:, 0]`` and ``tf.shape(x)[0]`` are everyday TF code the
chapter's examples and exercises use.  One function, shared by the graph-time shape
inference (``ops/slicing.py``) and the kernels (``kernels/array_kernels.py``), as TF shares
``core/util/strided_slice_op.cc`` between the two: from the op's ``begin``, ``end`` and
``strides`` vectors and its five bit masks it builds the index numpy applies.  Each position
of the spec is one of

* a range (``begin:end:stride``; bit i of ``begin_mask`` / ``end_mask``: that bound is
  omitted and the whole side is taken),
* an index (bit i of ``shrink_axis_mask``: ``begin[i]``, the dimension removed),
* a new axis of length 1 (bit i of ``new_axis_mask``),
* the ellipsis (bit i of ``ellipsis_mask``: every dimension no other position names).
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

#: the op's attributes holding the masks, in :class:`Masks`'s order
MASK_ATTRS = ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask")


class Masks(NamedTuple):
    begin: int = 0
    end: int = 0
    ellipsis: int = 0
    new_axis: int = 0
    shrink_axis: int = 0


def masks_of(op) -> Masks:
    """The masks an op (or a step graph's node) holds in its attributes."""
    return Masks(*(op.get_attr(name) for name in MASK_ATTRS))


class SliceError(ValueError):
    """A spec that selects nothing valid; its text is TF's (callers add the op's context)."""


class _RunTimeRange:
    """A range whose bounds are known only when the op runs."""


#: in :func:`index_form`, a range of a length unknown until the op runs
RUN_TIME = _RunTimeRange()


def index_form(n: int, masks: Masks) -> tuple:
    """What each of the spec's ``n`` positions is, from the masks alone: the ellipsis, None (a
    new axis), 0 (an index: the dimension goes) or :data:`RUN_TIME` (a range)."""
    return tuple(
        Ellipsis
        if masks.ellipsis >> i & 1
        else None
        if masks.new_axis >> i & 1
        else 0
        if masks.shrink_axis >> i & 1
        else RUN_TIME
        for i in range(n)
    )


def named_dims(index) -> int:
    """How many input dimensions the positions of ``index`` name (not the ellipsis's)."""
    return sum(1 for x in index if x is not None and x is not Ellipsis)


def numpy_index(
    shape: Sequence[int | None],
    begin: Sequence[int],
    end: Sequence[int],
    strides: Sequence[int],
    masks: Masks,
) -> tuple:
    """The index tuple for an array of ``shape`` (a dimension may be None: then an index into
    it is not bounds-checked).  Raises :class:`SliceError` with TF's text."""
    n = len(begin)
    if not len(end) == len(strides) == n:
        raise SliceError("Expected begin, end, and strides to be 1D equal size tensors")
    if masks.ellipsis & (masks.ellipsis - 1):
        raise SliceError("Multiple ellipses in slice spec not allowed")
    form = index_form(n, masks)
    named = named_dims(form)
    if named > len(shape):
        raise SliceError(
            "Index out of range using input dim %d; input has only %d dims"
            % (len(shape), len(shape))
        )
    index = []
    for i, kind in enumerate(form):
        if kind is Ellipsis or kind is None:  # the ellipsis: every dimension the others leave
            index.append(kind)
        else:
            dim = _dimension_of(i, form, len(shape), named)
            index.append(_one_dimension(shape, dim, i, begin, end, strides, masks))
    return tuple(index)


def _dimension_of(i, form, rank, named):
    """The input dimension position ``i`` indexes, given the positions before it."""
    before = named_dims(form[:i])
    if Ellipsis in form[:i]:
        return before + rank - named
    return before


def _one_dimension(shape, dim, i, begin, end, strides, masks):
    """Position ``i`` of the spec over dimension ``dim``: an int (shrunk) or a slice."""
    stride = int(strides[i])
    if stride == 0:
        raise SliceError("strides[%d] must be non-zero" % i)
    if masks.shrink_axis >> i & 1:
        at, size = int(begin[i]), shape[dim]
        if size is not None and not -size <= at < size:
            raise SliceError("slice index %d of dimension %d out of bounds." % (at, dim))
        return at
    start = None if masks.begin >> i & 1 else int(begin[i])
    stop = None if masks.end >> i & 1 else int(end[i])
    return slice(start, stop, stride)


def result_shape(shape: Sequence[int | None], index: tuple) -> list[int | None]:
    """The shape ``index`` (from :func:`numpy_index`, or :func:`index_form`) gives an array of
    ``shape``; a range over an unknown dimension, or a :data:`RUN_TIME` one, has an unknown
    length."""
    named = named_dims(index)
    out, dim = [], 0
    for x in index:
        if x is Ellipsis:
            out += shape[dim : dim + len(shape) - named]
            dim += len(shape) - named
        elif x is None:
            out.append(1)
        elif x is RUN_TIME:
            out.append(None)
            dim += 1
        elif isinstance(x, slice):
            n = shape[dim]
            out.append(None if n is None else len(range(n)[x]))
            dim += 1
        else:
            dim += 1
    return list(out) + list(shape[dim:])
