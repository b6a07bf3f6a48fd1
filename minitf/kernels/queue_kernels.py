"""Queue kernels: ``FIFOQueueV2``, ``RandomShuffleQueueV2``, ``PaddingFIFOQueueV2``,
``PriorityQueueV2`` and the asynchronous access kernels.

Book section: "Asynchronous Communication Using TensorFlow Queues".  A queue op finds or
makes its queue (``framework/queue_resource.py``) at its first run: a shared queue in its
device's resource manager by container and ``shared_name`` (every session of the process on that
device finds the same one), a private one (``_<n>_<op name>``) held by the kernel, so each
session has its own.  Enqueue, dequeue and close are asynchronous kernels: a request that must
wait becomes an attempt of the queue and holds no thread; it ends when the queue serves it, or
when the step is cancelled (a timeout, a closed session), through the step's cancellation hook
``ctx.on_cancel``.
"""

import numpy as np

from minitf.framework import dtypes, errors
from minitf.framework.queue_resource import (
    FIFOQueue,
    PaddingFIFOQueue,
    PriorityQueue,
    RandomShuffleQueue,
)
from minitf.kernels.registry import register
from minitf.kernels.resource_kernels import find_or_make, resource_op
from minitf.kernels.tensor_ops import invalid_argument


def _shape_text(shape):
    return "[%s]" % ",".join("?" if d is None else str(d) for d in shape)


def _requested_queue(op):
    """``(component dtypes, shapes, capacity)`` from the op's attrs (a PriorityQueueV2's
    element has its int64 priority in front of the components its attrs name)."""
    types = list(op.get_attr("component_types"))
    shapes = [tuple(s.as_list()) for s in op.get_attr("shapes")]
    capacity = op.get_attr("capacity")
    if op.type == "PriorityQueueV2":
        types = [dtypes.int64] + types
        shapes = [()] + shapes if shapes else shapes
    return types, shapes, capacity if capacity >= 0 else 2**31 - 1


def _seeds(op):
    return op.get_attr("seed"), op.get_attr("seed2")


def _check_match(queue, op, name):
    """A shared queue found by name must be the one this op asks for (TF's MatchesNodeDef:
    type, capacity, a RandomShuffleQueue's floor and seeds, component types, shapes)."""
    if queue.type_name + "V2" != op.type:
        raise invalid_argument("Expected %s, found %s" % (queue.type_name, op.type))
    types, shapes, capacity = _requested_queue(op)
    if queue.capacity != capacity:
        raise invalid_argument(
            "Shared queue '%s' has capacity %d but requested capacity was %d"
            % (name, queue.capacity, capacity)
        )
    if op.type == "RandomShuffleQueueV2":
        _check_shuffle_match(queue, op, name)
    have = [dt.type_string for dt in queue.component_types]
    want = [dt.type_string for dt in types]
    if have != want:
        raise invalid_argument(
            "Shared queue '%s' has component types %s but requested component types were %s"
            % (name, ", ".join(have), ", ".join(want))
        )
    if queue.shapes != shapes:
        raise invalid_argument(
            "Shared queue '%s' has component shapes [%s] but requested component shapes were [%s]"
            % (
                name,
                ", ".join(_shape_text(s) for s in queue.shapes),
                ", ".join(_shape_text(s) for s in shapes),
            )
        )


def _check_shuffle_match(queue, op, name):
    wanted = op.get_attr("min_after_dequeue")
    if queue.min_after_dequeue != wanted:
        raise invalid_argument(
            "Shared queue '%s' has min_after_dequeue %d but requested min_after_dequeue was %d."
            % (name, queue.min_after_dequeue, wanted)
        )
    seeds = _seeds(op)
    if seeds != (0, 0) and seeds != queue.seeds:
        raise invalid_argument(
            "Shared queue '%s' has random seeds (%d, %d) but requested seeds are (%d, %d)."
            % ((name,) + queue.seeds + seeds)
        )


def _make_fifo(op, name):
    return FIFOQueue(name, *_requested_queue(op))


def _make_padding_fifo(op, name):
    return PaddingFIFOQueue(name, *_requested_queue(op))


def _make_priority(op, name):
    return PriorityQueue(name, *_requested_queue(op))


def _make_random_shuffle(op, name):
    types, shapes, capacity = _requested_queue(op)
    floor = op.get_attr("min_after_dequeue")
    return RandomShuffleQueue(name, types, shapes, capacity, floor, _seeds(op))


def _check_random_shuffle(op):
    """RandomShuffleQueueOp's construction checks (the kernel's first run)."""
    floor = op.get_attr("min_after_dequeue")
    capacity = _requested_queue(op)[2]
    if floor < 0:
        raise invalid_argument("min_after_dequeue %d must be >= 0" % floor)
    if floor >= capacity:
        raise invalid_argument("min_after_dequeue %d must be < capacity %d" % (floor, capacity))


def _queue_kernel(make, check=None):
    """The kernel of a queue-making op: finds or makes its queue at its first run (TF checks
    a shared queue found against the op: ``_check_match``)."""

    def factory(op, device):
        def find():
            if check is not None:
                check(op)
            return find_or_make(
                op,
                device,
                lambda name: make(op, name),
                shared_names_public=True,
                check_found=lambda queue, name: _check_match(queue, op, name),
            )

        return resource_op(find)

    return factory


# -- waiting for the queue ---------------------------------------------------------------------


def _wait(ctx, queue, start, done, outputs):
    """Starts an attempt (``start(callback)``) and completes the kernel when it ends: with
    ``outputs(result)``, or with its error.  While it waits, a cancel of the step takes it out
    of the queue."""
    token = []

    def callback(result, error):
        if token:
            ctx.remove_on_cancel(token[0])
        if error is not None:
            done(None, error)
        else:
            done(outputs(result))

    attempt = start(callback)
    if not attempt.finished:
        token.append(ctx.on_cancel(lambda error: queue.cancel(attempt)))


def _value(v):
    """A value the queue keeps (a copy: the step may reuse its buffers)."""
    return np.array(v, copy=True)


def _check_shape(queue, i, expected, got):
    """A component's shape against the queue's (None: any size, a PaddingFIFOQueue's)."""
    if len(expected) != len(got) or any(e is not None and e != g for e, g in zip(expected, got)):
        raise invalid_argument(
            "Shape mismatch in tuple component %d. Expected %s, got %s"
            % (i, _shape_text(expected), _shape_text(got))
        )


def _elements(queue, comps, many):
    """The elements an enqueue brings (tuples of arrays), checked against the queue's shapes."""
    comps = [np.asarray(c) for c in comps]
    if isinstance(queue, PriorityQueue):
        priority = comps[0].shape[1:] if many else comps[0].shape
        if priority:
            raise invalid_argument(
                "Expected the priority element to be a scalar, but received shape: %s"
                % _shape_text(priority)
            )
    if not many:
        for i, c in enumerate(comps):
            if queue.shapes:
                _check_shape(queue, i, queue.shapes[i], c.shape)
        return [tuple(_value(c) for c in comps)]
    batch = comps[0].shape[0] if comps[0].ndim else 0
    for i, c in enumerate(comps):
        if queue.shapes:
            _check_shape(queue, i, (batch,) + queue.shapes[i], c.shape)
        elif not c.ndim or c.shape[0] != batch:
            raise invalid_argument(
                "All input tensors must have the same size in the 0th dimension. Component "
                "%d has %d, and should have %d" % (i, c.shape[0] if c.ndim else 0, batch)
            )
    return [tuple(_value(c[j]) for c in comps) for j in range(batch)]


def _enqueue(many):
    def factory(op, device):
        def compute(ctx, ins, done):
            queue = ins[0]
            try:
                elements = _elements(queue, ins[1:], many)
            except errors.OpError as e:
                done(None, e)
                return
            _wait(ctx, queue, lambda cb: queue.enqueue(elements, cb), done, lambda r: ())

        return compute

    return factory


def _outputs(result):
    """A dequeue's component arrays as a kernel's outputs (scalars as numpy scalars)."""
    return tuple(r[()] if isinstance(r, np.ndarray) and r.ndim == 0 else r for r in result)


def _dequeue(op, device):
    def compute(ctx, ins, done):
        queue = ins[0]
        _wait(ctx, queue, lambda cb: queue.dequeue(1, cb), done, _outputs)

    return compute


def _unshaped_text(queue):
    if isinstance(queue, PriorityQueue):
        return "PriorityQueue's DequeueMany requires the components to have specified shapes."
    return (
        "%s's DequeueMany and DequeueUpTo require the components to have specified shapes."
        % queue.type_name
    )


def _dequeue_many(up_to):
    what = "DequeueUpToOp" if up_to else "DequeueManyOp"

    def factory(op, device):
        def compute(ctx, ins, done):
            queue, n = ins[0], int(ins[1])
            if n < 0:
                done(None, invalid_argument("%s requested %d < 0 elements" % (what, n)))
                return
            if not queue.shapes:
                done(None, invalid_argument(_unshaped_text(queue)))
                return

            def start(callback):
                return queue.dequeue(n, callback, batch=True, up_to=up_to)

            _wait(ctx, queue, start, done, tuple)

        return compute

    return factory


def _close(op, device):
    cancel_pending = op.get_attr("cancel_pending_enqueues")

    def compute(ctx, ins, done):
        queue = ins[0]
        _wait(ctx, queue, lambda cb: queue.close(cancel_pending, cb), done, lambda r: ())

    return compute


register("FIFOQueueV2", _queue_kernel(_make_fifo), cpu="any")
register("PaddingFIFOQueueV2", _queue_kernel(_make_padding_fifo), cpu="any")
register("PriorityQueueV2", _queue_kernel(_make_priority), cpu="any")
register(
    "RandomShuffleQueueV2", _queue_kernel(_make_random_shuffle, _check_random_shuffle), cpu="any"
)
register("QueueEnqueueV2", _enqueue(False), cpu="any", is_async=True)
register("QueueEnqueueManyV2", _enqueue(True), cpu="any", is_async=True)
register("QueueDequeueV2", _dequeue, cpu="any", is_async=True)
register("QueueDequeueManyV2", _dequeue_many(False), cpu="any", is_async=True)
register("QueueDequeueUpToV2", _dequeue_many(True), cpu="any", is_async=True)
register("QueueCloseV2", _close, cpu="any", is_async=True)
register("QueueSizeV2", lambda op, device: lambda ctx, ins: (np.int32(ins[0].size()),), cpu="any")
register(
    "QueueIsClosedV2",
    lambda op, device: lambda ctx, ins: (np.bool_(ins[0].is_closed()),),
    cpu="any",
)
