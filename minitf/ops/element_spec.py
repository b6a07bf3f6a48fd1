"""A ``tf.data`` element's structure: a nest of tuples and dicts whose leaves are
:class:`TensorSpec` (TF's ``data/util/structure.py``; a list is one tensor, not a nest).

Book section: "Loading Data Directly from the Graph" (the Data API).  Datasets and iterators
both carry one: their ``output_types``, ``output_shapes`` and ``output_classes`` are its nests
of dtypes, shapes and classes, and their ops' ``output_types`` / ``output_shapes`` attrs its
flat lists.
"""

from __future__ import annotations

from typing import Any

from minitf.framework import tensor_shape
from minitf.framework.graph import Tensor
from minitf.framework.tensor_spec import TensorSpec
from minitf.lib import nest


def flat(structure: Any) -> list:
    return nest.flatten(structure, lists=False)


def map_specs(fn, structure: Any) -> Any:
    return nest.map_structure(fn, structure, lists=False)


class HasElementSpec:
    """``output_types``, ``output_shapes``, ``output_classes`` of ``self._structure``."""

    _structure: Any

    @property
    def output_types(self):
        return map_specs(lambda s: s.dtype, self._structure)

    @property
    def output_shapes(self):
        return map_specs(lambda s: s.shape, self._structure)

    @property
    def output_classes(self):
        return map_specs(lambda s: Tensor, self._structure)


def structure_of(output_types, output_shapes) -> Any:
    """The structure of these types (a nest) and shapes (unknown when None; a TensorShape or
    a list of dims is the one shape of a single component)."""
    flat_types = flat(output_types)
    if output_shapes is None:
        flat_shapes = [tensor_shape.unknown_shape()] * len(flat_types)
    elif len(flat_types) == 1 and isinstance(output_shapes, (tensor_shape.TensorShape, list)):
        flat_shapes = [tensor_shape.as_shape(output_shapes)]
    else:
        flat_shapes = [tensor_shape.as_shape(s) for s in flat(output_shapes)]
    specs = [TensorSpec(s, t) for t, s in zip(flat_types, flat_shapes)]
    return nest.pack_sequence_as(output_types, specs, lists=False)


def attrs_of(structure: Any) -> dict:
    """The ``output_types`` and ``output_shapes`` attrs of an op making such elements."""
    specs = flat(structure)
    return {"output_types": [s.dtype for s in specs], "output_shapes": [s.shape for s in specs]}


def same_types(a: Any, b: Any) -> bool:
    """Whether two structures have the same nest and the same dtypes (shapes aside)."""
    return map_specs(lambda s: s.dtype, a) == map_specs(lambda s: s.dtype, b)
