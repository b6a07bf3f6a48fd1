"""Iterator kernels: ``OneShotIterator``, ``IteratorV2``, ``MakeIterator``, ``IteratorGetNext``.

Book section: "Loading Data Directly from the Graph" (the Data API; TF's
core/kernels/data/iterator_ops.cc).  An iterator is a resource of its device, found or made at
its op's first run like a queue: private to the session unless it has a ``shared_name``.  It
holds one pass over a dataset (``kernels/dataset_kernels.py``).  ``MakeIterator`` (an
initializable iterator's ``initializer``) starts a new pass, so running it again starts over;
a one-shot iterator starts its pass itself, at its first run, over the dataset its factory
function builds.  ``IteratorGetNext`` takes the next element; after the last one it raises
``OutOfRangeError("End of sequence")``, and keeps raising it.
"""

from __future__ import annotations

import itertools
import threading
import weakref

import numpy as np

from minitf.framework import errors
from minitf.kernels.dataset_kernels import ErrorElement
from minitf.kernels.registry import register
from minitf.kernels.resource_kernels import find_or_make, resource_op

#: string handle -> iterator, for ``Iterator.from_string_handle`` (a handle names an iterator
#: of this process; it goes when its iterator does)
_by_handle: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
_handle_ids = itertools.count(1)


class IteratorResource:
    """One iterator's state: the pass in progress (None before the first initialization), and
    the string handle that names it (``IteratorToStringHandle``)."""

    def __init__(self, name: str, device_name: str) -> None:
        self.name = name
        self.handle = ("%s;%d;%s" % (device_name, next(_handle_ids), name)).encode()
        _by_handle[self.handle] = self
        self._lock = threading.Lock()
        self._elements = None

    def __repr__(self) -> str:
        return "<Iterator '%s'>" % self.name

    def start(self, dataset) -> None:
        """A new pass over ``dataset`` (a ``DatasetValue``)."""
        elements = dataset.elements()
        with self._lock:
            self._elements = elements

    def get_next(self) -> tuple:
        with self._lock:
            if self._elements is None:
                raise errors.FailedPreconditionError(
                    None,
                    None,
                    "GetNext() failed because the iterator has not been initialized. Ensure that "
                    "you have run the initializer operation for this iterator before getting the "
                    "next element.",
                )
            element = next(self._elements, None)
            if element is None:
                self._elements = iter(())
                raise errors.OutOfRangeError(None, None, "End of sequence")
        if type(element) is ErrorElement:
            raise element.error
        return element


def _iterator_op(op, device):
    """``IteratorV2`` / ``OneShotIterator``: the iterator, found or made at the first run (a
    resource op like a queue's); a one-shot iterator also starts its pass then, over what its
    ``dataset_factory`` builds."""

    def make(name):
        it = IteratorResource(name, device.name)
        if op.type == "OneShotIterator":
            factory = device.function_runner(op.get_attr("dataset_factory"))
            try:
                it.start(factory([])[0])
            except errors.OpError as e:
                raise _in_function_of(e, op) from None
        return it

    return resource_op(lambda: find_or_make(op, device, make))


def _make_iterator(op, device):
    def compute(ctx, ins):
        dataset, iterator = ins
        iterator.start(dataset)
        return ()

    return compute


def _in_function_of(error, op):
    """An error of a function the kernel of ``op`` ran, with ``op`` named after the function's
    node (TF's ``[[{{node BatchDatasetV2}}]]`` then ``[[OneShotIterator]]``)."""
    return type(error)(None, None, "%s\n\t [[%s]]" % (error.message, op.name))


def _get_next(op, device):
    def compute(ctx, ins):
        try:
            return ins[0].get_next()
        except errors.OpError as e:
            if "[[{{node " not in e.message:
                raise
            raise _in_function_of(e, op) from None

    return compute


def _string_handle(op, device):
    """TF's handle is a serialized ``ResourceHandle``; minitf's names the device, a number and
    the iterator."""

    def compute(ctx, ins):
        return (ins[0].handle,)

    return compute


def _from_string_handle(op, device):
    """``IteratorFromStringHandleV2``: the iterator a string handle names (a feedable
    iterator: one ``get_next`` reads whichever iterator the step's handle names)."""

    def compute(ctx, ins):
        handle = ins[0]
        handle = handle.item() if isinstance(handle, np.ndarray) else handle
        found = _by_handle.get(handle if isinstance(handle, bytes) else str(handle).encode())
        if found is None:
            raise errors.InvalidArgumentError(
                None, None, "Could not parse string_handle as a valid ResourceHandle"
            )
        return (found,)

    return compute


register("IteratorV2", _iterator_op, cpu="any")
register("IteratorToStringHandle", _string_handle, cpu="any")
register("IteratorFromStringHandleV2", _from_string_handle, cpu="any")
register("OneShotIterator", _iterator_op, cpu="any")
register("MakeIterator", _make_iterator, cpu="any")
register("IteratorGetNext", _get_next, cpu="any", cost="expensive")
