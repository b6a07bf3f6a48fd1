"""Nested structures of values (TF's ``nest``): lists, tuples, namedtuples and dicts.

Book section: "Loading Data Directly from the Graph" and the ``tf.cond`` of chapter 11's layers.
A ``tf.cond`` branch may return a nest of tensors, and a ``tf.data`` element is a nest of
components; both flatten a nest to a list (dict keys in sorted order) and pack a flat list back
into the same shape.  ``tf.data`` treats a list as one value (it becomes a tensor), not as a
nest: ``lists=False`` says so (TF's ``tf.data.util.nest``).
"""

from __future__ import annotations

from typing import Any


def is_sequence(x: Any, lists: bool = True) -> bool:
    """Whether ``x`` is a nest rather than a leaf."""
    if isinstance(x, list):
        return lists
    return isinstance(x, (tuple, dict))


def flatten(x: Any, lists: bool = True) -> list:
    """The leaves of ``x``, depth first (a dict's in the order of its sorted keys)."""
    if isinstance(x, dict):
        return [leaf for k in sorted(x) for leaf in flatten(x[k], lists)]
    if isinstance(x, tuple) or (lists and isinstance(x, list)):
        return [leaf for item in x for leaf in flatten(item, lists)]
    return [x]


def pack_sequence_as(structure: Any, flat: list, lists: bool = True) -> Any:
    """``flat``'s leaves in the shape of ``structure`` (whose own leaves are ignored)."""
    it = iter(flat)

    def build(s):
        if isinstance(s, dict):
            return type(s)((k, build(s[k])) for k in sorted(s))
        if isinstance(s, tuple) and hasattr(s, "_fields"):
            return type(s)(*[build(v) for v in s])
        if isinstance(s, tuple) or (lists and isinstance(s, list)):
            return type(s)(build(v) for v in s)
        return next(it)

    return build(structure)


def map_structure(fn, structure: Any, lists: bool = True) -> Any:
    """``structure`` with ``fn`` applied to each leaf."""
    return pack_sequence_as(structure, [fn(x) for x in flatten(structure, lists)], lists)


def flatten_up_to(shallow: Any, value: Any, lists: bool = True) -> list:
    """``value`` flattened as deep as ``shallow`` goes (a leaf of ``shallow`` takes the whole
    of ``value`` there); ValueError when ``value`` does not have ``shallow``'s nest."""
    if not is_sequence(shallow, lists):
        return [value]
    if not is_sequence(value, lists) or isinstance(value, dict) != isinstance(shallow, dict):
        raise ValueError("%r does not have the structure of %r" % (value, shallow))
    if isinstance(shallow, dict):
        if sorted(shallow) != sorted(value):
            raise ValueError("%r does not have the keys of %r" % (value, shallow))
        pairs = [(shallow[k], value[k]) for k in sorted(shallow)]
    else:
        if len(shallow) != len(value):
            raise ValueError("%r does not have the length of %r" % (value, shallow))
        pairs = list(zip(shallow, value))
    return [leaf for s, v in pairs for leaf in flatten_up_to(s, v, lists)]
