"""Element types of tensors (``tf.float32``, ``tf.int32_ref`` ...), as in TensorFlow 1.x.

Book chapter: "Distributing TensorFlow Across Devices and Servers". Every example of the
chapter builds tensors, variables and placeholders, and each of those carries a :class:`DType`;
this module underpins all of them.

What lives here
---------------
* :class:`DType` -- an immutable, interned, hashable element type.  ``DType(1) is float32``.
  ``repr`` is ``tf.float32`` and ``str`` is ``<dtype: 'float32'>``, exactly as TF 1.x prints them.
* Module constants ``float16`` (= ``half``), ``float32``, ``float64`` (= ``double``), ``int8``,
  ``int16``, ``int32``, ``int64``, ``uint8``, ``uint16``, ``uint32``, ``uint64``, ``bool``,
  ``string``, ``complex64``, ``complex128`` and every ``*_ref`` variant (``float32_ref`` ...).
  A *ref* dtype is the type of a mutable variable's output; its enum is the base enum + 100.
* :func:`as_dtype` -- TF's conversion table (DType, numpy dtype or scalar type, a few Python
  types, type names, DataType enum ints).
* :func:`infer_dtype` -- the dtype ``tf.constant``/``convert_to_tensor`` picks for a Python or
  numpy value when no dtype is given.

Choices worth knowing (each follows TF 1.15 unless it says otherwise)
---------------------------------------------------------------------
* ``as_dtype`` of a Python *type*: TF's table has only ``float -> float32``, ``bool -> bool``
  and ``object -> string``; ``int``, ``str``, ``bytes`` and ``complex`` are *not* in it and raise
  ``TypeError`` (as in TF).  Use ``np.int64``, ``"int64"`` or ``tf.int64`` instead.
* ``as_dtype(True)``: TF's dict lookup silently treats ``True`` as the enum 1 (float32); minitf
  refuses bools as enums and raises ``TypeError``.
* ``DType.size`` of ``string`` is 8: the byte size of one numpy ``object`` element (a pointer),
  which is what TF reports too.
* ``infer_dtype(None)`` raises ``ValueError("None values not supported.")`` -- TF's own text for
  ``tf.constant(None)``.  ``None`` *inside* a list, dicts, sets and other objects raise TF's
  ``TypeError("Failed to convert object of type <class 'dict'> to Tensor. Contents: {}.
  Consider casting elements to a supported type.")``.
"""

import builtins
import numbers

import numpy as np

# The module defines a constant named ``bool``; keep handles on the Python builtins.
_py_bool = builtins.bool
_py_int = builtins.int
_py_float = builtins.float
_py_complex = builtins.complex

# (DataType enum, name, numpy scalar type, C++ DataTypeString, proto enum name)
_TYPE_TABLE = [
    (1, "float32", np.float32, "float", "DT_FLOAT"),
    (2, "float64", np.float64, "double", "DT_DOUBLE"),
    (3, "int32", np.int32, "int32", "DT_INT32"),
    (4, "uint8", np.uint8, "uint8", "DT_UINT8"),
    (5, "int16", np.int16, "int16", "DT_INT16"),
    (6, "int8", np.int8, "int8", "DT_INT8"),
    (7, "string", np.object_, "string", "DT_STRING"),
    (8, "complex64", np.complex64, "complex64", "DT_COMPLEX64"),
    (9, "int64", np.int64, "int64", "DT_INT64"),
    (10, "bool", np.bool_, "bool", "DT_BOOL"),
    (17, "uint16", np.uint16, "uint16", "DT_UINT16"),
    (18, "complex128", np.complex128, "complex128", "DT_COMPLEX128"),
    (19, "float16", np.float16, "half", "DT_HALF"),
    (22, "uint32", np.uint32, "uint32", "DT_UINT32"),
    (23, "uint64", np.uint64, "uint64", "DT_UINT64"),
    # a handle to a resource of a device (a queue): what a queue op outputs
    (20, "resource", np.object_, "resource", "DT_RESOURCE"),
    # what a dataset op outputs (tf.data): a value the runtime keeps as a Python object
    (21, "variant", np.object_, "variant", "DT_VARIANT"),
]
_REF_OFFSET = 100

# enum -> (name, numpy type, type string, enum name); filled for base and ref enums below.
_INFO = {}
for _enum, _name, _np_type, _type_string, _enum_name in _TYPE_TABLE:
    _INFO[_enum] = (_name, _np_type, _type_string, _enum_name)
    _INFO[_enum + _REF_OFFSET] = (
        _name + "_ref",
        _np_type,
        _type_string + "_ref",
        _enum_name + "_REF",
    )

_INTERN = {}  # enum -> the one DType instance for it


class DType:
    """The element type of a tensor.  Instances are interned: compare with ``==`` or ``is``."""

    __slots__ = ("_type_enum",)

    def __new__(cls, type_enum):
        try:
            return _INTERN[_py_int(type_enum)]
        except (KeyError, TypeError, ValueError):
            raise TypeError(
                "type_enum is not a valid types_pb2.DataType: %s" % (type_enum,)
            ) from None

    def __setattr__(self, name, value):
        raise AttributeError("DType objects are immutable")

    def __delattr__(self, name):
        raise AttributeError("DType objects are immutable")

    # -- identity -------------------------------------------------------------------------
    @property
    def name(self):
        """``"float32"``, ``"float32_ref"`` ..."""
        return _INFO[self._type_enum][0]

    @property
    def as_datatype_enum(self):
        """TF's ``DataType`` enum value (``DT_FLOAT`` = 1; ref types add 100)."""
        return self._type_enum

    @property
    def enum_name(self):
        """The proto enum's name: ``"DT_FLOAT"``, ``"DT_INT32_REF"`` ..."""
        return _INFO[self._type_enum][3]

    @property
    def type_string(self):
        """TF's C++ ``DataTypeString``: ``"float"``, ``"double"``, ``"half"``,
        ``"float_ref"`` ..."""
        return _INFO[self._type_enum][2]

    @property
    def as_numpy_dtype(self):
        """The numpy scalar type (``np.float32`` ...; ``np.object_`` for ``string``)."""
        return _INFO[self._type_enum][1]

    # -- ref / base -----------------------------------------------------------------------
    @property
    def _is_ref_dtype(self):
        return self._type_enum > _REF_OFFSET

    is_ref_dtype = _is_ref_dtype

    @property
    def _as_ref(self):
        return self if self._is_ref_dtype else _INTERN[self._type_enum + _REF_OFFSET]

    as_ref = _as_ref

    @property
    def base_dtype(self):
        return _INTERN[self._type_enum - _REF_OFFSET] if self._is_ref_dtype else self

    @property
    def real_dtype(self):
        """``float32`` for ``complex64``, ``float64`` for ``complex128``, else ``self``."""
        return {8: float32, 18: float64}.get(self.base_dtype._type_enum, self)

    # -- classification -------------------------------------------------------------------
    @property
    def is_numpy_compatible(self):
        return True  # every type minitf knows has a numpy counterpart

    @property
    def is_quantized(self):
        return False  # minitf has no quantized types

    @property
    def is_bool(self):
        return self.base_dtype is bool

    @property
    def is_integer(self):
        return np.issubdtype(self.as_numpy_dtype, np.integer)

    @property
    def is_floating(self):
        return np.issubdtype(self.as_numpy_dtype, np.floating)

    @property
    def is_complex(self):
        return np.issubdtype(self.as_numpy_dtype, np.complexfloating)

    @property
    def is_unsigned(self):
        return np.issubdtype(self.as_numpy_dtype, np.unsignedinteger)

    @property
    def size(self):
        """Bytes per element (8 for ``string``: one numpy object pointer)."""
        return np.dtype(self.as_numpy_dtype).itemsize

    def _limits(self, which):
        base = self.base_dtype
        if base in (bool, string, complex64, complex128, resource, variant):
            raise TypeError("Cannot find %s value of %s." % (which, self))
        info = np.finfo(base.as_numpy_dtype) if base.is_floating else np.iinfo(base.as_numpy_dtype)
        return info.min if which == "minimum" else info.max

    @property
    def min(self):
        """Smallest representable value (numpy scalar for floats, ``int`` for integers)."""
        return self._limits("minimum")

    @property
    def max(self):
        """Largest representable value (numpy scalar for floats, ``int`` for integers)."""
        return self._limits("maximum")

    def is_compatible_with(self, other):
        """True if a tensor of ``other``'s type may be used where ``self`` is expected.

        ``T`` accepts ``T`` and ``T_ref``; ``T_ref`` accepts only ``T_ref``.
        """
        other = as_dtype(other)
        return self._type_enum in (other._type_enum, other.base_dtype._type_enum)

    # -- Python protocol ------------------------------------------------------------------
    def __eq__(self, other):
        if other is None:
            return False
        if not isinstance(other, DType):
            try:
                other = as_dtype(other)
            except TypeError:
                return False
        return self._type_enum == other._type_enum

    def __ne__(self, other):
        return not self.__eq__(other)

    def __hash__(self):
        return self._type_enum

    def __repr__(self):
        return "tf." + self.name

    def __str__(self):
        return "<dtype: %r>" % self.name

    def __reduce__(self):
        return as_dtype, (self.name,)

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self


for _enum in _INFO:
    _inst = object.__new__(DType)
    object.__setattr__(_inst, "_type_enum", _enum)
    _INTERN[_enum] = _inst

float16, float32, float64 = _INTERN[19], _INTERN[1], _INTERN[2]
int8, int16, int32, int64 = _INTERN[6], _INTERN[5], _INTERN[3], _INTERN[9]
uint8, uint16, uint32, uint64 = _INTERN[4], _INTERN[17], _INTERN[22], _INTERN[23]
bool, string = _INTERN[10], _INTERN[7]  # noqa: A001 - tf.bool is TF's own dtype name
complex64, complex128 = _INTERN[8], _INTERN[18]
float16_ref, float32_ref, float64_ref = _INTERN[119], _INTERN[101], _INTERN[102]
int8_ref, int16_ref, int32_ref, int64_ref = _INTERN[106], _INTERN[105], _INTERN[103], _INTERN[109]
uint8_ref, uint16_ref, uint32_ref, uint64_ref = (
    _INTERN[104],
    _INTERN[117],
    _INTERN[122],
    _INTERN[123],
)
bool_ref, string_ref = _INTERN[110], _INTERN[107]
complex64_ref, complex128_ref = _INTERN[108], _INTERN[118]
resource, resource_ref = _INTERN[20], _INTERN[120]
variant, variant_ref = _INTERN[21], _INTERN[121]
half, half_ref = float16, float16_ref
double, double_ref = float64, float64_ref

# Names accepted by as_dtype: canonical names plus TF's C++-style aliases.
_NAME_TO_DTYPE = {d.name: d for d in _INTERN.values()}
for _alias, _target in (("half", float16), ("float", float32), ("double", float64)):
    _NAME_TO_DTYPE[_alias] = _target
    _NAME_TO_DTYPE[_alias + "_ref"] = _target.as_ref

_NP_TYPE_TO_DTYPE = {
    np_type: _INTERN[enum] for enum, _, np_type, _, _ in _TYPE_TABLE if enum not in (20, 21)
}
_NP_TYPE_TO_DTYPE[np.str_] = string
_NP_TYPE_TO_DTYPE[np.bytes_] = string

# Python types in TF's table.  int/str/bytes/complex are deliberately absent (as in TF).
_PY_TYPE_TO_DTYPE = {_py_float: float32, _py_bool: bool, object: string}


def _from_numpy_dtype(np_dtype):
    found = _NP_TYPE_TO_DTYPE.get(np_dtype.type)
    if found is None and np_dtype.kind in "iu":
        # Platform aliases such as np.longlong are distinct types of the same width.
        for np_type, dtype in _NP_TYPE_TO_DTYPE.items():
            if np.dtype(np_type) == np_dtype:
                return dtype
    return found


def as_dtype(type_value):
    """Converts ``type_value`` to a :class:`DType`.

    Accepts a DType, a numpy dtype or numpy scalar type (``np.float32``), the Python types
    ``float`` (float32), ``bool`` and ``object`` (string), a name (``"float32"``, ``"float"``,
    ``"double"``, ``"half"``, ``"int32_ref"`` ...) or a DataType enum int (1, 101 ...).

    Raises:
      TypeError: ``Cannot convert value <repr> to a TensorFlow DType.``
    """
    if isinstance(type_value, DType):
        return type_value
    found = None
    if isinstance(type_value, np.dtype):
        found = _from_numpy_dtype(type_value)
    elif isinstance(type_value, type):
        found = _PY_TYPE_TO_DTYPE.get(type_value)
        if found is None and issubclass(type_value, np.generic):
            found = _from_numpy_dtype(np.dtype(type_value))
    elif isinstance(type_value, str):
        found = _NAME_TO_DTYPE.get(type_value)
    elif isinstance(type_value, numbers.Integral) and not isinstance(
        type_value, (_py_bool, np.bool_)
    ):
        found = _INTERN.get(_py_int(type_value))
    if found is None:
        raise TypeError("Cannot convert value %r to a TensorFlow DType." % (type_value,))
    return found


# ---------------------------------------------------------------------------------------
# Inferring the dtype of a constant
# ---------------------------------------------------------------------------------------

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_STRING_LEAVES = (str, bytes, np.str_, np.bytes_)
_NUMBER_LEAVES = (_py_bool, _py_int, _py_float, _py_complex, np.bool_, np.number)


def _failed_to_convert(value):
    return TypeError(
        "Failed to convert object of type %s to Tensor. Contents: %s. Consider "
        "casting elements to a supported type." % (type(value), value)
    )


def _is_seq(x):
    return isinstance(x, (list, tuple, np.ndarray))


def _wanted_shape(value):
    """The shape TF expects: lengths along the chain of first elements."""
    dims = []
    while _is_seq(value):
        if isinstance(value, np.ndarray):
            return dims + list(value.shape)
        dims.append(len(value))
        if not value:
            break
        value = value[0]
    return dims


def _common_shape(value):
    """The shape every element agrees on (what numpy would build before giving up)."""
    if isinstance(value, np.ndarray):
        return list(value.shape)
    if not _is_seq(value):
        return []
    if not value:
        return [0]
    inner = [_common_shape(x) for x in value]
    prefix = []
    for column in zip(*inner):
        if any(d != column[0] for d in column):
            break
        prefix.append(column[0])
    return [len(value)] + prefix


def _check_dense(value):
    """Raises ValueError unless ``value`` is a rectangular nest of sequences."""
    wanted = _wanted_shape(value)
    got = _common_shape(value)
    if got != wanted:
        raise ValueError(
            "Argument must be a dense tensor: %s - got shape %s, but wanted %s."
            % (value, got, wanted)
        )

    def depth_ok(x, depth):  # every leaf must sit exactly at depth len(wanted)
        if isinstance(x, np.ndarray):
            return depth + x.ndim == len(wanted)
        if _is_seq(x):
            return all(depth_ok(y, depth + 1) for y in x)
        return depth == len(wanted)

    if not depth_ok(value, 0):
        raise ValueError(
            "Argument must be a dense tensor: %s - it mixes scalars and sequences "
            "at the same depth." % (value,)
        )


def _leaves(value):
    if isinstance(value, np.ndarray):
        yield value
    elif _is_seq(value):
        for x in value:
            yield from _leaves(x)
    else:
        yield value


def infer_dtype(value):
    """The DType TF 1.15's ``convert_to_tensor`` gives ``value`` when no dtype is requested.

    * numpy arrays and numpy scalars keep their own dtype (float64 stays float64);
    * Python ``float`` -> float32; ``int`` -> int32 if every int fits, else int64;
      ``bool`` -> bool; ``str``/``bytes`` -> string; ``complex`` -> complex128;
    * nested lists/tuples are scanned: their numpy-promoted type, then float64 -> float32 and
      int64 -> int32 when no value is lost (TF's rule), so ``[1, 2.0]`` is float32.

    Raises:
      ValueError: ``None values not supported.`` for ``None``; ``Argument must be a dense
        tensor: ...`` for ragged nested lists.
      TypeError: ``Failed to convert object of type ... to Tensor. ...`` for anything else
        (dicts, objects, ``None`` inside a list, strings mixed with numbers), or TF's
        ``Cannot convert value ... to a TensorFlow DType.`` for an unsupported numpy dtype.
    """
    if value is None:
        raise ValueError("None values not supported.")
    if isinstance(value, (np.ndarray, np.generic)):
        return as_dtype(value.dtype)
    if isinstance(value, _py_bool):
        return bool
    if isinstance(value, (_py_int, _py_float, _py_complex)):
        return _python_values_dtype(value)
    if isinstance(value, _STRING_LEAVES):
        return string
    if isinstance(value, (list, tuple)):
        return _infer_sequence_dtype(value)
    if hasattr(value, "__array__"):
        return as_dtype(np.asarray(value).dtype)
    raise _failed_to_convert(value)


def _infer_sequence_dtype(value):
    _check_dense(value)
    leaves = list(_leaves(value))
    scalars = [x for x in leaves if not isinstance(x, np.ndarray)]
    arrays = [x for x in leaves if isinstance(x, np.ndarray)]
    if scalars and not arrays and all(isinstance(x, _STRING_LEAVES) for x in scalars):
        return string
    if not all(isinstance(x, _NUMBER_LEAVES) for x in scalars) or any(
        a.dtype.kind not in "biufc" for a in arrays
    ):
        raise _failed_to_convert(value)  # None, dicts, objects, strings mixed with numbers
    return _python_values_dtype(value)


def _python_values_dtype(value):
    """numpy's promotion of ``value``, then TF's float64 -> float32 and int64 -> int32 rule."""
    try:
        arr = np.array(value)
    except (OverflowError, ValueError):
        raise _failed_to_convert(value) from None
    if arr.dtype == np.object_:  # numpy gave up, e.g. an int beyond uint64
        raise _failed_to_convert(value)
    if arr.dtype == np.float64:
        return float32
    if arr.dtype == np.int64:
        fits = arr.size == 0 or (_INT32_MIN <= arr.min() and arr.max() <= _INT32_MAX)
        return int32 if fits else int64
    return as_dtype(arr.dtype)
