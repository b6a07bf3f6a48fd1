"""Queue kernels: ``FIFOQueueV2`` and the asynchronous access kernels.

Book section: "Asynchronous Communication Using TensorFlow Queues".  ``FIFOQueueV2`` finds or
makes its queue (``framework/queue_resource.py``) at its first run: a shared queue in its
device's resource manager by container and ``shared_name`` (every session of the process on that
device finds the same one), a private one (``_<n>_<op name>``) held by the kernel, so each
session has its own.  Enqueue, dequeue and close are asynchronous kernels: a request that must
wait becomes an attempt of the queue and holds no thread; it ends when the queue serves it, or
when the step is cancelled (a timeout, a closed session), through the step's cancellation hook
``ctx.on_cancel``.
"""

import itertools
import re
import threading

import numpy as np

from minitf.framework import errors
from minitf.framework.queue_resource import FIFOQueue
from minitf.kernels.registry import register

_private_ids = itertools.count()  # the process-wide counter of private resource names
_CONTAINER = re.compile(r"[A-Za-z0-9.][A-Za-z0-9.\-/]*\Z")


def _invalid(text):
    return errors.InvalidArgumentError(None, None, text)


def _shape_text(shape):
    return "[%s]" % ",".join("?" if d is None else str(d) for d in shape)


def _requested_queue(op):
    """``(component dtypes, shapes, capacity)`` from the op's attrs."""
    types = list(op.get_attr("component_types"))
    shapes = [tuple(s.as_list()) for s in op.get_attr("shapes")]
    return types, shapes, op.get_attr("capacity")


def _check_match(queue, op, name):
    """A shared queue found by name must be the one this op asks for."""
    types, shapes, capacity = _requested_queue(op)
    if capacity < 0:
        capacity = 2**31 - 1
    if queue.capacity != capacity:
        raise _invalid(
            "Shared queue '%s' has capacity %d but requested capacity was %d"
            % (name, queue.capacity, capacity)
        )
    have = [dt.type_string for dt in queue.component_types]
    want = [dt.type_string for dt in op.get_attr("component_types")]
    if have != want:
        raise _invalid(
            "Shared queue '%s' has component types %s but requested component types were %s"
            % (name, ", ".join(have), ", ".join(want))
        )
    if queue.shapes != shapes:
        raise _invalid(
            "Shared queue '%s' has component shapes [%s] but requested component shapes were [%s]"
            % (
                name,
                ", ".join(_shape_text(s) for s in queue.shapes),
                ", ".join(_shape_text(s) for s in shapes),
            )
        )


def _fifo_queue(op, device):
    """``FIFOQueueV2``: the queue, found or made at the kernel's first run."""
    held = []
    lock = threading.Lock()

    def make(name):
        types, shapes, capacity = _requested_queue(op)
        return FIFOQueue(name, types, shapes, capacity)

    def compute(ctx, ins):
        with lock:
            if not held:
                held.append(_find_or_make(op, device, make))
        return (held[0],)

    return compute


def _find_or_make(op, device, make):
    container = op.get_attr("container")
    shared = op.get_attr("shared_name")
    if container and not _CONTAINER.match(container):
        raise _invalid("container contains invalid characters: %s" % container)
    if not shared:
        return make("_%d_%s" % (next(_private_ids), op.name))
    if shared.startswith("_"):
        raise _invalid("shared_name cannot start with '_':%s" % shared)
    queue = device.resource_manager.lookup_or_create(container, shared, lambda: make(shared))
    _check_match(queue, op, shared)
    return queue


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
    if tuple(expected) != tuple(got):
        raise _invalid(
            "Shape mismatch in tuple component %d. Expected %s, got %s"
            % (i, _shape_text(expected), _shape_text(got))
        )


def _elements(queue, comps, many):
    """The elements an enqueue brings (tuples of arrays), checked against the queue's shapes."""
    comps = [np.asarray(c) for c in comps]
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
            raise _invalid(
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


def _dequeue_many(up_to):
    what = "DequeueUpToOp" if up_to else "DequeueManyOp"

    def factory(op, device):
        def compute(ctx, ins, done):
            queue, n = ins[0], int(ins[1])
            if n < 0:
                done(None, _invalid("%s requested %d < 0 elements" % (what, n)))
                return
            if not queue.shapes:
                done(
                    None,
                    _invalid(
                        "%s's DequeueMany and DequeueUpTo require the components to have "
                        "specified shapes." % queue.type_name
                    ),
                )
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


register("FIFOQueueV2", _fifo_queue, cpu="any")
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
