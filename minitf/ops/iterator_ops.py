"""``tf.data.Iterator`` as TF 1.15 builds it in a graph (python/data/ops/iterator_ops.py).

Book section: "Loading Data Directly from the Graph" (the Data API).  An iterator is a resource
op (``OneShotIterator`` or ``IteratorV2``, scalar ``resource`` out) and ``get_next()`` an
``IteratorGetNext`` op on it, whose outputs are one element's components: each run of a step
that needs them takes the next element, once per step however many fetches read them.

* ``dataset.make_one_shot_iterator()`` copies the ops that build the dataset into a function
  (``dataset_factory``): the iterator builds its dataset at its first run and needs no
  initializer; a dataset made from a placeholder or a variable cannot be copied (TF's
  ValueError says to use an initializable iterator).
* ``dataset.make_initializable_iterator()`` makes ``IteratorV2``; its ``initializer`` is a
  ``MakeIterator`` op over the dataset's tensor, which a step may feed (a placeholder's
  values), and which starts over each time it runs.
* ``Iterator.from_structure(types, shapes)`` makes an iterator of no dataset yet;
  ``make_initializer(dataset)`` gives the op that points it at one (a reinitializable
  iterator: one ``get_next`` for a training and a validation dataset).
"""

from __future__ import annotations

import logging

from minitf.framework import dtypes, tensor_shape
from minitf.framework.graph import Tensor, convert_to_tensor
from minitf.lib import nest
from minitf.ops import element_spec, func_graph
from minitf.ops.op_def import NotDifferentiable, apply_op, register_op

for _op_type in ("OneShotIterator", "IteratorV2", "IteratorFromStringHandleV2"):
    register_op(_op_type, is_stateful=True, has_container=True)
    NotDifferentiable(_op_type)
for _op_type in ("MakeIterator", "IteratorGetNext", "IteratorToStringHandle"):
    register_op(_op_type, is_stateful=True)
    NotDifferentiable(_op_type)

_SCALAR = tensor_shape.TensorShape([])
#: the collection every iterator's resource tensor joins (TF's ``GLOBAL_ITERATORS``)
ITERATORS = "iterators"
#: get_next calls on one iterator after which TF warns that it is called in a loop
_GET_NEXT_WARNING_THRESHOLD = 32


class Iterator(element_spec.HasElementSpec):
    """An iterator of a graph: its resource tensor, its initializer (None for a one-shot
    iterator) and its element structure."""

    def __init__(self, iterator_resource: Tensor, initializer, structure) -> None:
        self._iterator_resource = iterator_resource
        self._initializer = initializer
        self._structure = structure
        self._get_next_calls = 0
        op = apply_op(
            "IteratorToStringHandle",
            [iterator_resource],
            [(dtypes.string, _SCALAR)],
            "IteratorToStringHandle",
        )
        self._string_handle = op.outputs[0]
        iterator_resource.graph.add_to_collection(ITERATORS, iterator_resource)

    def string_handle(self, name=None) -> Tensor:
        """``IteratorToStringHandle``: a string naming the iterator's resource."""
        if name is None:
            return self._string_handle
        return apply_op(
            "IteratorToStringHandle", [self._iterator_resource], [(dtypes.string, _SCALAR)], name
        ).outputs[0]

    @property
    def initializer(self):
        if self._initializer is None:
            raise ValueError("Iterator does not have an initializer.")
        return self._initializer

    def get_next(self, name=None):
        """``IteratorGetNext``: the next element, in the structure of the dataset's."""
        self._get_next_calls += 1
        if self._get_next_calls > _GET_NEXT_WARNING_THRESHOLD:
            _warn_get_next_in_loop()
        op = apply_op(
            "IteratorGetNext",
            [self._iterator_resource],
            [(s.dtype, s.shape) for s in element_spec.flat(self._structure)],
            name or "IteratorGetNext",
            element_spec.attrs_of(self._structure),
        )
        return nest.pack_sequence_as(self._structure, list(op.outputs), lists=False)

    def make_initializer(self, dataset, name=None):
        """``MakeIterator``: the op that starts this iterator over ``dataset``."""
        if not element_spec.same_types(self._structure, dataset._structure):
            raise TypeError(
                "Expected output types %s but got dataset with output types %s."
                % (self.output_types, dataset.output_types)
            )
        return _make_iterator(dataset, self._iterator_resource, name or "make_initializer")

    @staticmethod
    def from_string_handle(string_handle, output_types, output_shapes=None, output_classes=None):
        """A feedable iterator: ``IteratorFromStringHandleV2`` reads the iterator whose
        ``string_handle()`` value the step gives it (a placeholder fed with the handle of a
        training or of a validation iterator, say)."""
        structure = element_spec.structure_of(output_types, output_shapes)
        handle = convert_to_tensor(string_handle, dtype=dtypes.string)
        op = apply_op(
            "IteratorFromStringHandleV2",
            [handle],
            [(dtypes.resource, _SCALAR)],
            "IteratorFromStringHandleV2",
            element_spec.attrs_of(structure),
        )
        return Iterator(op.outputs[0], None, structure)

    @staticmethod
    def from_structure(output_types, output_shapes=None, shared_name=None, output_classes=None):
        """An iterator of no dataset yet, for elements of these types (and shapes)."""
        structure = element_spec.structure_of(output_types, output_shapes)
        return Iterator(_iterator_v2(structure, shared_name), None, structure)


def _warn_get_next_in_loop():
    logging.getLogger("minitf").warning(
        "An unusually high number of `Iterator.get_next()` calls was detected. This often "
        "indicates that `Iterator.get_next()` is being called inside a training loop, which will "
        "cause gradual slowdown and eventual resource exhaustion. If this is the case, "
        "restructure your code to call `next_element = iterator.get_next()` once outside the "
        "loop, and use `next_element` as the input to some computation that is invoked inside "
        "the loop."
    )


def _make_iterator(dataset, resource, name):
    with resource.graph.colocate_with(resource.op):
        return apply_op(
            "MakeIterator", [dataset._variant_tensor, resource], [], name or "MakeIterator"
        )


def _iterator_v2(structure, shared_name):
    attrs = dict(element_spec.attrs_of(structure), container="", shared_name=shared_name or "")
    op = apply_op("IteratorV2", [], [(dtypes.resource, _SCALAR)], "IteratorV2", attrs)
    return op.outputs[0]


def make_one_shot_iterator(dataset) -> Iterator:
    """``OneShotIterator``: builds its dataset itself (a copy of its ops) at its first run."""
    try:
        factory = func_graph.copy_by_value([dataset._variant_tensor], "_make_dataset")
    except ValueError as e:
        raise ValueError(
            "Failed to create a one-shot iterator for a dataset. "
            "`Dataset.make_one_shot_iterator()` does not support datasets that capture stateful "
            "objects, such as a `Variable` or `LookupTable`. In these cases, use "
            "`Dataset.make_initializable_iterator()`. (Original error: %s)" % e
        ) from None
    attrs = dict(element_spec.attrs_of(dataset._structure), dataset_factory=factory)
    attrs.update(container="", shared_name="")
    op = apply_op("OneShotIterator", [], [(dtypes.resource, _SCALAR)], "OneShotIterator", attrs)
    return Iterator(op.outputs[0], None, dataset._structure)


def make_initializable_iterator(dataset, shared_name=None) -> Iterator:
    """``IteratorV2`` and its initializer ``MakeIterator`` over ``dataset``."""
    resource = _iterator_v2(dataset._structure, shared_name)
    initializer = _make_iterator(dataset, resource, None)
    return Iterator(resource, initializer, dataset._structure)
