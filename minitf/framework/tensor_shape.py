"""Static (graph-construction-time) shapes: ``Dimension`` and ``TensorShape``, as in TF 1.x.

Book chapter: "Distributing TensorFlow Across Devices and Servers". Every tensor, variable and
placeholder in the chapter's examples carries a possibly partial static shape such as
``(?, 28, 28)``; this module underpins all of them.

A shape is one of

* fully known:     ``TensorShape([16, 256])``  -> ``(16, 256)``
* partially known: ``TensorShape([None, 256])`` -> ``(?, 256)``
* unknown rank:    ``TensorShape(None)``        -> ``<unknown>``

TF 1.x behaviour kept on purpose (it surprises people):

* ``Dimension(None) == 3`` is ``None`` (neither True nor False); ``TensorShape`` iteration and
  integer indexing give ``Dimension`` objects, not ints (use ``.value`` or ``as_list()``).
* ``TensorShape.__eq__`` compares the lists of Dimensions, so two separately built partial
  shapes such as ``[None, 3]`` are *not* equal; two unknown-rank shapes are equal; a shape is
  always equal to itself.  ``!=`` raises ``ValueError`` when either rank is unknown.
* ``bool(shape)`` is True whenever the rank is known, even for the scalar shape ``()``.
* ``Dimension`` and ``TensorShape`` define ``__eq__`` without ``__hash__``, so neither is
  hashable (TF 1.x likewise); use ``tuple(shape.as_list())`` as a dict key.
"""

from minitf.framework import dtypes


class Dimension:
    """The size of one dimension: a non-negative int, or ``None`` when unknown."""

    __slots__ = ("_value",)

    def __init__(self, value):
        if value is None:
            self._value = None
        elif isinstance(value, Dimension):
            self._value = value._value
        elif isinstance(value, dtypes.DType):
            raise TypeError("Cannot convert %s to Dimension" % (value,))
        else:
            self._value = int(value)
            if not isinstance(value, (str, bytes)) and self._value != value:
                raise ValueError("Ambiguous dimension: %s" % (value,))
            if self._value < 0:
                raise ValueError("Dimension %d must be >= 0" % self._value)

    @property
    def value(self):
        return self._value

    def __repr__(self):
        return "Dimension(%r)" % (self._value,)

    def __str__(self):
        return "?" if self._value is None else str(self._value)

    def __int__(self):
        return self._value

    def __index__(self):
        return self._value

    def __bool__(self):
        return bool(self._value)

    __hash__ = None  # __eq__ may answer None, so Dimensions are not dict keys (as in TF 1.x)

    def is_compatible_with(self, other):
        other = as_dimension(other)
        return self._value is None or other._value is None or self._value == other._value

    def assert_is_compatible_with(self, other):
        if not self.is_compatible_with(other):
            raise ValueError("Dimensions %s and %s are not compatible" % (self, other))

    def merge_with(self, other):
        """The more informative of ``self`` and ``other``; ValueError if they conflict."""
        other = as_dimension(other)
        self.assert_is_compatible_with(other)
        return Dimension(other._value if self._value is None else self._value)

    # Comparisons answer None when either side is unknown, as TF 1.x does.
    def _compare(self, other, fn):
        try:
            other = as_dimension(other)
        except (TypeError, ValueError):
            return NotImplemented
        if self._value is None or other._value is None:
            return None
        return fn(self._value, other._value)

    def __eq__(self, other):
        return self._compare(other, lambda a, b: a == b)

    def __ne__(self, other):
        return self._compare(other, lambda a, b: a != b)

    def __lt__(self, other):
        return self._compare(other, lambda a, b: a < b)

    def __le__(self, other):
        return self._compare(other, lambda a, b: a <= b)

    def __gt__(self, other):
        return self._compare(other, lambda a, b: a > b)

    def __ge__(self, other):
        return self._compare(other, lambda a, b: a >= b)

    # Arithmetic: unknown in, unknown out.
    def _arith(self, other, fn):
        try:
            other = as_dimension(other)
        except (TypeError, ValueError):
            return NotImplemented
        if self._value is None or other._value is None:
            return Dimension(None)
        return Dimension(fn(self._value, other._value))

    def __add__(self, other):
        return self._arith(other, lambda a, b: a + b)

    def __radd__(self, other):
        return self._arith(other, lambda a, b: b + a)

    def __sub__(self, other):
        return self._arith(other, lambda a, b: a - b)

    def __rsub__(self, other):
        return self._arith(other, lambda a, b: b - a)

    def __mul__(self, other):
        return self._arith(other, lambda a, b: a * b)

    def __rmul__(self, other):
        return self._arith(other, lambda a, b: b * a)

    def __floordiv__(self, other):
        return self._arith(other, lambda a, b: a // b)

    def __rfloordiv__(self, other):
        return self._arith(other, lambda a, b: b // a)

    def __mod__(self, other):
        return self._arith(other, lambda a, b: a % b)

    def __rmod__(self, other):
        return self._arith(other, lambda a, b: b % a)

    def __reduce__(self):
        return Dimension, (self._value,)


def as_dimension(value):
    """``value`` if it already is a Dimension, else ``Dimension(value)``."""
    return value if isinstance(value, Dimension) else Dimension(value)


def dimension_value(dimension):
    """The plain int (or None) inside a Dimension; other values pass through."""
    return dimension.value if isinstance(dimension, Dimension) else dimension


class TensorShape:
    """A possibly partial static shape: a list of :class:`Dimension`, or unknown rank."""

    __slots__ = ("_dims",)

    def __init__(self, dims):
        if dims is None:
            self._dims = None
        elif isinstance(dims, (str, bytes)):
            raise TypeError(
                "A string has ambiguous TensorShape, please wrap in a list or "
                "convert to an int: %s" % (dims,)
            )
        elif isinstance(dims, TensorShape):
            self._dims = None if dims._dims is None else list(dims._dims)
        else:
            try:
                items = iter(dims)
            except TypeError:
                self._dims = [as_dimension(dims)]  # TF accepts a lone int as a rank-1 shape
            else:
                self._dims = [as_dimension(d) for d in items]

    # -- reading --------------------------------------------------------------------------
    @property
    def dims(self):
        """A list of Dimensions, or None for unknown rank."""
        return None if self._dims is None else list(self._dims)

    @property
    def ndims(self):
        return None if self._dims is None else len(self._dims)

    rank = ndims

    def __len__(self):
        if self._dims is None:
            raise ValueError("Cannot take the length of Shape with unknown rank.")
        return len(self._dims)

    def __bool__(self):
        return self._dims is not None

    def __iter__(self):
        if self._dims is None:
            raise ValueError("Cannot iterate over a shape with unknown rank.")
        return iter(self._dims)

    def __getitem__(self, key):
        """An int gives a Dimension, a slice gives a TensorShape."""
        if self._dims is not None:
            if isinstance(key, slice):
                return TensorShape(self._dims[key])
            return self._dims[key]
        if not isinstance(key, slice):
            return Dimension(None)
        # Unknown rank: a slice can know its own length only for [start:stop] with both >= 0.
        if key.step is not None:
            raise ValueError("Steps are not yet handled")
        start = 0 if key.start is None else key.start
        if key.stop is None or start < 0 or key.stop < 0:
            return unknown_shape()
        return unknown_shape(rank=max(key.stop - start, 0))

    def as_list(self):
        """The dimension values, ints or None; ValueError for unknown rank."""
        if self._dims is None:
            raise ValueError("as_list() is not defined on an unknown TensorShape.")
        return [d.value for d in self._dims]

    def is_fully_defined(self):
        return self._dims is not None and all(d.value is not None for d in self._dims)

    def assert_is_fully_defined(self):
        if not self.is_fully_defined():
            raise ValueError("Shape %s is not fully defined" % self)

    def num_elements(self):
        """The product of the dimensions, or None unless fully defined."""
        if self._dims is None:
            return None
        total = 1
        for d in self._dims:
            v = d.value
            if v is None:
                return None
            total *= v
        return total

    # -- combining ------------------------------------------------------------------------
    def is_compatible_with(self, other):
        """True if some fully defined shape could be described by both shapes."""
        other = as_shape(other)
        if self._dims is None or other._dims is None:
            return True
        return len(self._dims) == len(other._dims) and all(
            a.is_compatible_with(b) for a, b in zip(self._dims, other._dims)
        )

    def accepts(self, shape: tuple) -> bool:
        """``is_compatible_with`` for the tuple shape of a value (a fed array), without building
        a TensorShape for it: checked on every fed value of every run."""
        dims = self._dims
        if dims is None:
            return True
        return len(dims) == len(shape) and all(
            d._value is None or d._value == n for d, n in zip(dims, shape)
        )

    def assert_is_compatible_with(self, other):
        if not self.is_compatible_with(other):
            raise ValueError("Shapes %s and %s are incompatible" % (self, as_shape(other)))

    def merge_with(self, other):
        """The shape carrying the information of both; ValueError if they conflict."""
        other = as_shape(other)
        if self._dims is None:
            return other
        if other._dims is None:
            return self
        if len(self._dims) != len(other._dims) or not self.is_compatible_with(other):
            raise ValueError("Shapes %s and %s are not compatible" % (self, other))
        return TensorShape([a.merge_with(b) for a, b in zip(self._dims, other._dims)])

    def most_specific_compatible_shape(self, other):
        """The most specific shape compatible with both (unknown where they differ)."""
        other = as_shape(other)
        if self._dims is None or other._dims is None or len(self._dims) != len(other._dims):
            return unknown_shape()
        return TensorShape(
            [
                a.value if a.value is not None and a.value == b.value else None
                for a, b in zip(self._dims, other._dims)
            ]
        )

    def concatenate(self, other):
        other = as_shape(other)
        if self._dims is None or other._dims is None:
            return unknown_shape()
        return TensorShape(self._dims + other._dims)

    def __add__(self, other):
        return self.concatenate(other)

    def __radd__(self, other):
        return as_shape(other).concatenate(self)

    # -- rank checks ----------------------------------------------------------------------
    def assert_same_rank(self, other):
        other = as_shape(other)
        if self.ndims is not None and other.ndims is not None and self.ndims != other.ndims:
            raise ValueError("Shapes %s and %s must have the same rank" % (self, other))

    def assert_has_rank(self, rank):
        if self.ndims not in (None, rank):
            raise ValueError("Shape %s must have rank %d" % (self, rank))

    def with_rank(self, rank):
        """``self`` merged with an unknown shape of ``rank`` dims; ValueError on mismatch."""
        try:
            return self.merge_with(unknown_shape(rank=rank))
        except ValueError:
            raise ValueError("Shape %s must have rank %d" % (self, rank)) from None

    def with_rank_at_least(self, rank):
        if self.ndims is not None and self.ndims < rank:
            raise ValueError("Shape %s must have rank at least %d" % (self, rank))
        return self

    def with_rank_at_most(self, rank):
        if self.ndims is not None and self.ndims > rank:
            raise ValueError("Shape %s must have rank at most %d" % (self, rank))
        return self

    # -- Python protocol ------------------------------------------------------------------
    def __eq__(self, other):
        try:
            other = as_shape(other)
        except (TypeError, ValueError):
            return NotImplemented
        # List equality: Dimension == Dimension is None (falsy) for unknowns, unless it is
        # the very same Dimension object -- exactly TF 1.x's result.
        return self._dims == other._dims

    def __ne__(self, other):
        try:
            other = as_shape(other)
        except (TypeError, ValueError):
            return NotImplemented
        if self._dims is None or other._dims is None:
            raise ValueError("The inequality of unknown TensorShapes is undefined.")
        return self._dims != other._dims

    __hash__ = None  # TF 1.x TensorShape is unhashable

    def __repr__(self):
        return "TensorShape(%r)" % (self._dims,)

    def __str__(self):
        if self._dims is None:
            return "<unknown>"
        if len(self._dims) == 1:
            return "(%s,)" % self._dims[0]
        return "(%s)" % ", ".join(str(d) for d in self._dims)

    def __reduce__(self):
        return TensorShape, (None if self._dims is None else self.as_list(),)


def as_shape(shape):
    """``shape`` if it already is a TensorShape, else ``TensorShape(shape)``."""
    return shape if isinstance(shape, TensorShape) else TensorShape(shape)


def unknown_shape(rank=None, **kwargs):
    """An unknown shape; with ``rank`` (or the older spelling ``ndims``) a known rank."""
    if rank is None and "ndims" in kwargs:
        rank = kwargs.pop("ndims")
    if kwargs:
        raise TypeError("Unknown argument: %s" % kwargs)
    if rank is None:
        return TensorShape(None)
    return TensorShape([Dimension(None)] * rank)


def scalar():
    return TensorShape([])


def vector(length):
    return TensorShape([length])


def matrix(rows, cols):
    return TensorShape([rows, cols])


def broadcast_static_shape(shape_x, shape_y):
    """The static shape of ``x op y`` under numpy broadcasting.

    Shapes are aligned from the right; a missing or size-1 dimension stretches.  An unknown
    dimension against a known one > 1 takes the known one (a correct program must agree);
    otherwise it stays unknown.  Either rank unknown gives an unknown shape.

    Raises:
      ValueError: ``Incompatible shapes for broadcasting: (2,) and (3,)``.
    """
    shape_x, shape_y = as_shape(shape_x), as_shape(shape_y)
    if shape_x.ndims is None or shape_y.ndims is None:
        return unknown_shape()
    xs, ys = shape_x.as_list()[::-1], shape_y.as_list()[::-1]
    width = max(len(xs), len(ys))
    xs += [1] * (width - len(xs))
    ys += [1] * (width - len(ys))
    result = []
    for x, y in zip(xs, ys):
        if x is None or y is None:
            known = x if y is None else y
            result.append(known if known is not None and known > 1 else None)
        elif x == 1 or x == y:
            result.append(y)
        elif y == 1:
            result.append(x)
        else:
            raise ValueError("Incompatible shapes for broadcasting: %s and %s" % (shape_x, shape_y))
    return TensorShape(result[::-1])
