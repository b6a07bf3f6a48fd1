"""Queues: ``tf.FIFOQueue``, ``tf.RandomShuffleQueue``, ``tf.PaddingFIFOQueue``,
``tf.PriorityQueue`` and the ops that use them (TF's python/ops/data_flow_ops.py).

Book section: "Asynchronous Communication Using TensorFlow Queues".  A queue object holds the
handle tensor of its ``FIFOQueueV2`` op (``queue_ref``); each method adds one access op that
takes that handle (``QueueEnqueueV2``, ``QueueDequeueManyV2`` ...) with TF's default names
(``q_enqueue``, ``q_Dequeue``, ``q_DequeueMany``, ``q_Close``, ``q_Size``, ``q_Is_Closed``).
What can be checked before a run is checked here, as TF's Python does: dtypes, static shapes,
the keys of a named queue.  The waiting itself is the kernels' (``kernels/queue_kernels.py``).
"""

from __future__ import annotations

import hashlib
from typing import Any

from minitf.framework import dtypes as dtypes_mod
from minitf.framework import tensor_shape
from minitf.framework.graph import Tensor, convert_to_tensor, get_default_graph, name_scope
from minitf.ops.op_def import apply_op, register_op
from minitf.ops.random_ops import get_seed

for _op_type in ("FIFOQueueV2", "RandomShuffleQueueV2", "PaddingFIFOQueueV2", "PriorityQueueV2"):
    register_op(_op_type, is_stateful=True, has_container=True)
for _op_type in (
    "QueueEnqueueV2",
    "QueueEnqueueManyV2",
    "QueueDequeueV2",
    "QueueDequeueManyV2",
    "QueueDequeueUpToV2",
    "QueueCloseV2",
    "QueueSizeV2",
    "QueueIsClosedV2",
):
    register_op(_op_type, is_stateful=True)

_SCALAR = tensor_shape.TensorShape([])


def _as_type_list(dtypes):
    if isinstance(dtypes, (list, tuple)):
        return [dtypes_mod.as_dtype(d) for d in dtypes]
    return [dtypes_mod.as_dtype(dtypes)]


def _as_shape_list(shapes):
    """None, one shape (a list of ints is one shape) or one shape per component; each fully
    defined (a FIFOQueue's rule)."""
    if shapes is None:
        return None
    if isinstance(shapes, tensor_shape.TensorShape):
        shapes = [shapes]
    if not isinstance(shapes, (tuple, list)):
        raise TypeError("shapes must be a TensorShape or a list or tuple of TensorShapes.")
    if all(s is None or isinstance(s, int) for s in shapes):
        shapes = [shapes]
    shapes = [tensor_shape.as_shape(s) for s in shapes]
    if any(not s.is_fully_defined() for s in shapes):
        raise ValueError("All shapes must be fully defined: %s" % shapes)
    return shapes


def _as_partial_shape_list(shapes, dtypes):
    """A PaddingFIFOQueue's shapes: mandatory, one per component, ranks known, dims may be
    None (TF's ``_as_shape_list(..., unknown_dim_allowed=True)``)."""
    if (
        shapes is None
        or isinstance(shapes, tensor_shape.TensorShape)
        or not isinstance(shapes, (list, tuple))
        or not shapes
        or any(s is None or isinstance(s, int) for s in shapes)
    ):
        raise ValueError("When providing partial shapes, a list of shapes must be provided.")
    shapes = [tensor_shape.as_shape(s) for s in shapes]
    if any(s.ndims is None for s in shapes):
        raise ValueError("All shapes must have a defined rank: %s" % shapes)
    if len(shapes) != len(dtypes):
        raise ValueError(
            "Shapes must be provided for all components, but received %d dtypes and %d shapes."
            % (len(dtypes), len(shapes))
        )
    return shapes


def _queue_op(op_type, name, dtypes, shapes, shared_name, extra=None):
    """The queue-making op in scope ``name`` (``None``: the op type, as TF's generated
    wrappers name an op): its handle tensor (TF's gen_data_flow_ops)."""
    attrs = {
        "component_types": dtypes,
        "shapes": shapes or [],
        "container": "",
        "shared_name": shared_name or "",
    }
    attrs.update(extra)
    g = get_default_graph()
    with g.name_scope(name or op_type) as scope:
        op = apply_op(op_type, [], [(dtypes_mod.resource, _SCALAR)], scope, attrs)
    return op.outputs[0]


def _as_name_list(names, dtypes):
    if names is None:
        return None
    if not isinstance(names, (list, tuple)):
        names = [names]
    if len(names) != len(dtypes):
        raise ValueError("List of names must have the same length as the list of dtypes")
    return list(names)


def _static_int(t):
    """The value of a constant int tensor, else None."""
    if t.op.type == "Const":
        return int(t.op.get_attr("value"))
    return None


class QueueBase:
    """What every TF queue offers over its handle: enqueue, dequeue, close, size."""

    def __init__(self, dtypes, shapes, names, queue_ref: Tensor):
        self._dtypes = dtypes
        if shapes is not None:
            if len(shapes) != len(dtypes):
                raise ValueError("Queue shapes must have the same length as dtypes")
            self._shapes = [tensor_shape.TensorShape(s) for s in shapes]
        else:
            self._shapes = [tensor_shape.unknown_shape() for _ in dtypes]
        if names is not None and len(names) != len(dtypes):
            raise ValueError("List of names must have the same length as the list of dtypes")
        self._names = names
        self._queue_ref = queue_ref
        self._name = queue_ref.op.name.split("/")[-1]

    @property
    def queue_ref(self) -> Tensor:
        return self._queue_ref

    @property
    def name(self) -> str:
        return self._queue_ref.op.name

    @property
    def dtypes(self) -> list:
        return self._dtypes

    @property
    def shapes(self) -> list:
        return self._shapes

    @property
    def names(self) -> list | None:
        return self._names

    # -- enqueueing ----------------------------------------------------------------------------
    def _check_enqueue_dtypes(self, vals):
        """The values as tensors of the component dtypes, in component order."""
        if isinstance(vals, dict):
            if not self._names:
                raise ValueError("Queue must have names to enqueue a dictionary")
            if sorted(self._names, key=str) != sorted(vals.keys(), key=str):
                raise ValueError(
                    "Keys in dictionary to enqueue do not match names of Queue.  Dictionary: "
                    "(%s), Queue: (%s)" % (sorted(vals.keys()), sorted(self._names))
                )
            vals = [vals[k] for k in self._names]
        else:
            if self._names:
                raise ValueError("You must enqueue a dictionary in a Queue with names")
            if not isinstance(vals, (list, tuple)):
                vals = [vals]
        return [
            convert_to_tensor(v, dtype=dt, name="component_%d" % i)
            for i, (v, dt) in enumerate(zip(vals, self._dtypes))
        ]

    def _scope_graph_values(self, vals):
        listed = list(vals.values()) if isinstance(vals, dict) else vals
        if not isinstance(listed, (list, tuple)):
            listed = [listed]
        return [self._queue_ref] + list(listed)

    def enqueue(self, vals: Any, name: str | None = None):
        """``QueueEnqueueV2``: one element; waits while the queue is full."""
        default = "%s_enqueue" % self._name
        with name_scope(name, default, self._scope_graph_values(vals)) as scope:
            vals = self._check_enqueue_dtypes(vals)
            for val, shape in zip(vals, self._shapes):
                val.shape.assert_is_compatible_with(shape)
            return self._access("QueueEnqueueV2", [self._queue_ref] + vals, [], scope, vals)

    def enqueue_many(self, vals: Any, name: str | None = None):
        """``QueueEnqueueManyV2``: dimension 0 of every component enumerates the elements."""
        default = "%s_EnqueueMany" % self._name
        with name_scope(name, default, self._scope_graph_values(vals)) as scope:
            vals = self._check_enqueue_dtypes(vals)
            batch = tensor_shape.Dimension(vals[0].shape.with_rank_at_least(1)[0].value)
            for val, shape in zip(vals, self._shapes):
                val_batch = tensor_shape.Dimension(val.shape.with_rank_at_least(1)[0].value)
                batch = batch.merge_with(val_batch)
                val.shape[1:].assert_is_compatible_with(shape)
            return self._access("QueueEnqueueManyV2", [self._queue_ref] + vals, [], scope, vals)

    def _access(self, op_type, inputs, output_shapes, name, components=None, attrs=None):
        attrs = dict(attrs or {})
        if components is not None:
            attrs["Tcomponents"] = [t.dtype.base_dtype for t in components]
        if op_type not in ("QueueCloseV2", "QueueSizeV2", "QueueIsClosedV2"):
            attrs["timeout_ms"] = -1
        return apply_op(op_type, inputs, output_shapes, name, attrs)

    # -- dequeueing ----------------------------------------------------------------------------
    def _dequeue_return_value(self, tensors):
        if self._names:
            return {n: t for n, t in zip(self._names, tensors)}
        if len(tensors) == 1:
            return tensors[0]
        return list(tensors)

    def _dequeue_op(self, op_type, name, n, dim0):
        with name_scope(name, None, [self._queue_ref]) as scope:
            inputs = [self._queue_ref]
            if n is not None:
                n = convert_to_tensor(n, dtype=dtypes_mod.int32, name="n")
                inputs.append(n)
                value = _static_int(n)
                if value is not None and value < 0:
                    raise ValueError(
                        "Input 'n' must be >= 0, but is %d for '%s' (op: '%s') with input "
                        "shapes: [], [] and with computed input tensors: input[1] = <%d>."
                        % (value, scope[:-1], op_type, value)
                    )
                if dim0 == "n":
                    dim0 = value
            outs = [
                (dt, shape if n is None else tensor_shape.TensorShape([dim0]).concatenate(shape))
                for dt, shape in zip(self._dtypes, self._shapes)
            ]
            attrs = {"component_types": list(self._dtypes), "timeout_ms": -1}
            op = apply_op(op_type, inputs, outs, scope, attrs)
        return self._dequeue_return_value(op.outputs)

    def dequeue(self, name: str | None = None):
        """``QueueDequeueV2``: one element; waits while the queue is empty."""
        return self._dequeue_op("QueueDequeueV2", name or "%s_Dequeue" % self._name, None, None)

    def dequeue_many(self, n, name: str | None = None):
        """``QueueDequeueManyV2``: ``n`` elements stacked; after close, fewer is an error."""
        name = name or "%s_DequeueMany" % self._name
        return self._dequeue_op("QueueDequeueManyV2", name, n, "n")

    def dequeue_up_to(self, n, name: str | None = None):
        """``QueueDequeueUpToV2``: like ``dequeue_many``, but after close what is left will do."""
        name = name or "%s_DequeueUpTo" % self._name
        return self._dequeue_op("QueueDequeueUpToV2", name, n, None)

    # -- state ---------------------------------------------------------------------------------
    def close(self, cancel_pending_enqueues: bool = False, name: str | None = None):
        """``QueueCloseV2``: no more enqueues; dequeues drain what is left."""
        with name_scope(name or "%s_Close" % self._name, None, [self._queue_ref]) as scope:
            attrs = {"cancel_pending_enqueues": bool(cancel_pending_enqueues)}
            return self._access("QueueCloseV2", [self._queue_ref], [], scope, attrs=attrs)

    def is_closed(self, name: str | None = None) -> Tensor:
        """``QueueIsClosedV2``: a bool scalar."""
        with name_scope(name or "%s_Is_Closed" % self._name, None, [self._queue_ref]) as scope:
            outs = [(dtypes_mod.bool, _SCALAR)]
            return self._access("QueueIsClosedV2", [self._queue_ref], outs, scope).outputs[0]

    def size(self, name: str | None = None) -> Tensor:
        """``QueueSizeV2``: the number of elements in the queue, an int32 scalar."""
        with name_scope(name or "%s_Size" % self._name, None, [self._queue_ref]) as scope:
            outs = [(dtypes_mod.int32, _SCALAR)]
            return self._access("QueueSizeV2", [self._queue_ref], outs, scope).outputs[0]


class FIFOQueue(QueueBase):
    """``tf.FIFOQueue``: elements leave in the order they came (a ``FIFOQueueV2`` op)."""

    def __init__(
        self,
        capacity: int,
        dtypes,
        shapes=None,
        names=None,
        shared_name: str | None = None,
        name: str = "fifo_queue",
    ):
        dtypes = _as_type_list(dtypes)
        shapes = _as_shape_list(shapes)
        names = _as_name_list(names, dtypes)
        attrs = {"capacity": int(capacity)}
        ref = _queue_op("FIFOQueueV2", name, dtypes, shapes, shared_name, attrs)
        super().__init__(dtypes, shapes, names, ref)


class RandomShuffleQueue(QueueBase):
    """``tf.RandomShuffleQueue`` (a ``RandomShuffleQueueV2`` op): dequeues take random
    elements, and while the queue is open at least ``min_after_dequeue`` stay in it.  Seeds
    follow ``get_seed``; a graph seed without an op seed but with ``shared_name`` gives a seed2
    from the graph seed and the name, so every graph building the shared queue agrees (book:
    "RandomShuffleQueue")."""

    def __init__(
        self,
        capacity: int,
        min_after_dequeue: int,
        dtypes,
        shapes=None,
        names=None,
        seed: int | None = None,
        shared_name: str | None = None,
        name: str = "random_shuffle_queue",
    ):
        dtypes = _as_type_list(dtypes)
        shapes = _as_shape_list(shapes)
        names = _as_name_list(names, dtypes)
        seed1, seed2 = get_seed(seed)
        if seed1 is None and seed2 is None:
            seed1, seed2 = 0, 0
        elif seed is None and shared_name is not None:
            digest = hashlib.md5((str(seed1) + shared_name).encode("utf-8")).hexdigest()
            seed2 = int(digest[:8], 16) & 0x7FFFFFFF
        attrs = {
            "capacity": int(capacity),
            "min_after_dequeue": int(min_after_dequeue),
            "seed": seed1,
            "seed2": seed2,
        }
        ref = _queue_op("RandomShuffleQueueV2", name, dtypes, shapes, shared_name, attrs)
        super().__init__(dtypes, shapes, names, ref)


class PaddingFIFOQueue(QueueBase):
    """``tf.PaddingFIFOQueue`` (a ``PaddingFIFOQueueV2`` op): a FIFO whose component shapes may
    have unknown (None) dimensions; batches are padded to the largest element (book: the
    PaddingFIFOQueue example)."""

    def __init__(
        self,
        capacity: int,
        dtypes,
        shapes,
        names=None,
        shared_name: str | None = None,
        name: str = "padding_fifo_queue",
    ):
        dtypes = _as_type_list(dtypes)
        shapes = _as_partial_shape_list(shapes, dtypes)
        names = _as_name_list(names, dtypes)
        attrs = {"capacity": int(capacity)}
        ref = _queue_op("PaddingFIFOQueueV2", name, dtypes, shapes, shared_name, attrs)
        super().__init__(dtypes, shapes, names, ref)


class PriorityQueue(QueueBase):
    """``tf.PriorityQueue`` (a ``PriorityQueueV2`` op): an element is ``(priority, *values)``
    with an int64 scalar priority; the smallest leaves first.  ``types``/``shapes`` describe the
    values only: ``q.dtypes`` is ``[int64] + types``."""

    def __init__(
        self,
        capacity: int,
        types,
        shapes=None,
        names=None,
        shared_name: str | None = None,
        name: str = "priority_queue",
    ):
        types = _as_type_list(types)
        shapes = _as_shape_list(shapes)
        attrs = {"capacity": int(capacity)}
        ref = _queue_op("PriorityQueueV2", name, types, shapes, shared_name, attrs)
        priority_dtypes = [dtypes_mod.int64] + types
        priority_shapes = [tensor_shape.TensorShape([])] + shapes if shapes else shapes
        names = _as_name_list(names, priority_dtypes) if names is not None else None
        super().__init__(priority_dtypes, priority_shapes, names, ref)
