"""Input producers and batching (TF's python/training/input.py).

Book section: "Reading the Training Data Directly from the Graph" and the queue runners of
"Asynchronous Communication Using TensorFlow Queues".  A *producer* fills a FIFO queue with the
elements of a tensor (filenames, indices, slices), epoch after epoch, from a ``QueueRunner``
thread; with ``num_epochs`` a local ``limit_epochs/epochs`` counter (``CountUpTo``) ends it: the
runner sees ``OutOfRangeError`` and closes the queue, so the consumers drain it and then get
``OutOfRangeError`` themselves.  A *batching* function (``batch``, ``shuffle_batch`` and their
``_join`` forms) enqueues single examples into a FIFO (``PaddingFIFOQueue`` with
``dynamic_pad``) or ``RandomShuffleQueue`` from ``num_threads`` runner threads and returns the
``dequeue_many`` (``dequeue_up_to`` with ``allow_smaller_final_batch``) op named like its scope.

Each function also adds a scalar summary of how full its queue is to ``GraphKeys.SUMMARIES``,
named as TF names it inside the scope: ``fraction_of_<capacity>_full`` (size / capacity) for the
producers and ``batch``; for ``shuffle_batch`` ``fraction_over_<min>_of_<capacity-min>_full``,
the share of the room above the ``min_after_dequeue`` floor that is filled.  A queue near 0 has
a starved consumer (the readers are too slow); near 1, the consumer is the slow part.
"""

from __future__ import annotations

from typing import Any

from minitf.framework import dtypes, tensor_shape
from minitf.framework.graph import (
    GraphKeys,
    Tensor,
    convert_to_tensor,
    get_default_graph,
    name_scope,
)
from minitf.ops import array_ops, data_flow_ops, math_ops, random_ops, summary_ops
from minitf.ops.assert_ops import Assert
from minitf.ops.variables import Variable
from minitf.train.queue_runner import QueueRunner, add_queue_runner

# -- producers ---------------------------------------------------------------------------------


def limit_epochs(tensor: Any, num_epochs: int | None = None, name: str | None = None) -> Tensor:
    """``tensor``, but after ``num_epochs`` evaluations an ``OutOfRangeError`` ("Reached limit
    of <n>"): a local int64 ``epochs`` variable counted up by ``CountUpTo`` before each one.
    ``local_variables_initializer()`` must run first."""
    if num_epochs is None:
        return tensor
    if num_epochs <= 0:
        raise ValueError("num_epochs must be > 0 not %d." % num_epochs)
    with name_scope(name, "limit_epochs", [tensor]) as scope:
        zero64 = array_ops.constant(0, dtype=dtypes.int64)
        epochs = Variable(
            zero64, name="epochs", trainable=False, collections=[GraphKeys.LOCAL_VARIABLES]
        )
        counter = epochs.count_up_to(num_epochs)
        with get_default_graph().control_dependencies([counter]):
            return array_ops.identity(tensor, name=scope)


def input_producer(
    input_tensor: Any,
    element_shape: Any = None,
    num_epochs: int | None = None,
    shuffle: bool = True,
    seed: int | None = None,
    capacity: int = 32,
    shared_name: str | None = None,
    summary_name: str | None = None,
    name: str | None = None,
    cancel_op: Any = None,
) -> data_flow_ops.FIFOQueue:
    """A FIFO queue (named like the scope, ``input_producer``) fed by a QueueRunner with the
    rows of ``input_tensor``, shuffled each epoch when ``shuffle``; returns the queue."""
    with name_scope(name, "input_producer", [input_tensor]):
        input_tensor = convert_to_tensor(input_tensor, name="input_tensor")
        element_shape = input_tensor.shape[1:].merge_with(tensor_shape.as_shape(element_shape))
        if not element_shape.is_fully_defined():
            raise ValueError(
                "Either `input_tensor` must have a fully defined shape or `element_shape` must "
                "be specified"
            )
        if shuffle:
            input_tensor = random_ops.random_shuffle(input_tensor, seed=seed)
        input_tensor = limit_epochs(input_tensor, num_epochs)
        q = data_flow_ops.FIFOQueue(
            capacity=capacity,
            dtypes=[input_tensor.dtype.base_dtype],
            shapes=[element_shape],
            shared_name=shared_name,
            name=name,
        )
        enq = q.enqueue_many([input_tensor])
        add_queue_runner(QueueRunner(q, [enq], cancel_op=cancel_op))
        if summary_name is not None:
            _fullness_summary(summary_name, q.size(), 0, capacity)
        return q


def _fullness_summary(summary_name: str, size: Tensor, floor: int, capacity: int) -> Tensor:
    """TF's queue summaries: ``size / capacity`` as float32 (``floor`` 0), or above a
    ``min_after_dequeue`` floor ``max(0, size - floor) / (capacity - floor)``."""
    if floor:
        size = math_ops.maximum(0, size - floor)
    fraction = math_ops.cast(size, dtypes.float32) * (1.0 / (capacity - floor))
    return summary_ops.scalar(summary_name, fraction)


def string_input_producer(
    string_tensor: Any,
    num_epochs: int | None = None,
    shuffle: bool = True,
    seed: int | None = None,
    capacity: int = 32,
    shared_name: str | None = None,
    name: str | None = None,
    cancel_op: Any = None,
) -> data_flow_ops.FIFOQueue:
    """The filename queue of the book's readers: ``input_producer`` of a 1-D string tensor,
    behind an ``Assert`` that it is not empty (an empty Python list fails at once)."""
    not_null_err = "string_input_producer requires a non-null input tensor"
    if not isinstance(string_tensor, Tensor) and not string_tensor:
        raise ValueError(not_null_err)
    with name_scope(name, "input_producer", [string_tensor]) as scope:
        string_tensor = convert_to_tensor(string_tensor, dtype=dtypes.string)
        not_empty = math_ops.greater(array_ops.size(string_tensor), 0)
        with get_default_graph().control_dependencies([Assert(not_empty, [not_null_err])]):
            string_tensor = array_ops.identity(string_tensor)
        return input_producer(
            input_tensor=string_tensor,
            element_shape=[],
            num_epochs=num_epochs,
            shuffle=shuffle,
            seed=seed,
            capacity=capacity,
            shared_name=shared_name,
            name=scope,
            summary_name="fraction_of_%d_full" % capacity,
            cancel_op=cancel_op,
        )


def range_input_producer(
    limit: Any,
    num_epochs: int | None = None,
    shuffle: bool = True,
    seed: int | None = None,
    capacity: int = 32,
    shared_name: str | None = None,
    name: str | None = None,
) -> data_flow_ops.FIFOQueue:
    """A queue of the integers ``0 .. limit-1``, epoch after epoch."""
    with name_scope(name, "input_producer", [limit]) as scope:
        range_tensor = math_ops.range_(limit)
        return input_producer(
            range_tensor,
            [],
            num_epochs,
            shuffle,
            seed,
            capacity,
            shared_name,
            "fraction_of_%d_full" % capacity,
            scope,
        )


def slice_input_producer(
    tensor_list: list,
    num_epochs: int | None = None,
    shuffle: bool = True,
    seed: int | None = None,
    capacity: int = 32,
    shared_name: str | None = None,
    name: str | None = None,
) -> list:
    """One slice (row) of every tensor of ``tensor_list`` at a time: a range producer of row
    indices and a ``gather`` per tensor."""
    with name_scope(name, "input_producer", tensor_list):
        tensor_list = [convert_to_tensor(t) for t in tensor_list]
        if not tensor_list:
            raise ValueError("Expected at least one tensor in slice_input_producer().")
        range_size = array_ops.shape(tensor_list[0])[0]
        queue = range_input_producer(
            range_size,
            num_epochs=num_epochs,
            shuffle=shuffle,
            seed=seed,
            capacity=capacity,
            shared_name=shared_name,
        )
        index = queue.dequeue()
        return [array_ops.gather(t, index) for t in tensor_list]


# -- batching ----------------------------------------------------------------------------------


def _as_tensor_list(tensors):
    if isinstance(tensors, dict):
        return [tensors[k] for k in sorted(tensors)]
    return tensors


def _as_original_type(original, dequeued):
    """A dict gives a dict back; one tensor in a list gives a Tensor (the dequeue unwrapped it)."""
    if isinstance(original, dict):
        if len(original) == 1:
            dequeued = [dequeued]
        return {k: dequeued[i] for i, k in enumerate(sorted(original))}
    return dequeued


def _validate(tensor_list):
    tensor_list = [convert_to_tensor(t) for t in tensor_list]
    if not tensor_list:
        raise ValueError("Expected at least one tensor in batch().")
    return tensor_list


def _dtypes(tensor_list_list):
    all_types = [[t.dtype.base_dtype for t in tl] for tl in tensor_list_list]
    types = all_types[0]
    for other in all_types[1:]:
        if other != types:
            raise TypeError(
                "Expected types to be consistent: %s vs. %s."
                % (", ".join(x.name for x in types), ", ".join(x.name for x in other))
            )
    return types


def _shapes(tensor_list_list, shapes, enqueue_many):
    """The queue's shapes: given, or the inputs' static shapes merged (without dim 0 for
    ``enqueue_many``)."""
    if shapes is not None:
        return shapes
    for tl in tensor_list_list:
        for t in tl:
            if t.shape.ndims is None:
                raise ValueError("Cannot infer Tensor's rank: %s" % t)
    merged = []
    for i in range(len(tensor_list_list[0])):
        shape_list = [tl[i].shape for tl in tensor_list_list]
        if enqueue_many:
            shape_list = [s.with_rank_at_least(1)[1:] for s in shape_list]
        shape = shape_list[0]
        for s in shape_list[1:]:
            shape = shape.merge_with(s)
        merged.append(shape.as_list())
    return merged


def _make_queue(kind, types, shapes, capacity, shared_name, **kw):
    if kind == "shuffle":
        return data_flow_ops.RandomShuffleQueue(
            capacity=capacity, dtypes=types, shapes=shapes, shared_name=shared_name, **kw
        )
    if kind == "padding":
        return data_flow_ops.PaddingFIFOQueue(
            capacity=capacity, dtypes=types, shapes=shapes, shared_name=shared_name
        )
    return data_flow_ops.FIFOQueue(
        capacity=capacity, dtypes=types, shapes=shapes, shared_name=shared_name
    )


def _batch_graph(tensor_list_list, per_list_threads, spec):
    """What every batching function builds inside its scope ``spec["scope"]``: the queue, one
    enqueue op per input list (repeated ``per_list_threads`` times), the runner, and the
    dequeue op named like the scope."""
    types = _dtypes(tensor_list_list)
    shapes = _shapes(tensor_list_list, spec["shapes"], spec["enqueue_many"])
    queue = _make_queue(
        spec["kind"], types, shapes, spec["capacity"], spec["shared_name"], **spec["queue_kw"]
    )
    enqueue_fn = queue.enqueue_many if spec["enqueue_many"] else queue.enqueue
    if per_list_threads is None:
        enqueue_ops = [enqueue_fn(tl) for tl in tensor_list_list]
    else:
        enqueue_ops = [enqueue_fn(tensor_list_list[0])] * per_list_threads
    add_queue_runner(QueueRunner(queue, enqueue_ops))
    capacity, floor = spec["capacity"], spec["queue_kw"].get("min_after_dequeue", 0)
    if spec["kind"] == "shuffle":
        summary_name = "fraction_over_%d_of_%d_full" % (floor, capacity - floor)
    else:
        summary_name = "fraction_of_%d_full" % capacity
    _fullness_summary(summary_name, queue.size(), floor, capacity)
    if spec["allow_smaller_final_batch"]:
        return queue.dequeue_up_to(spec["batch_size"], name=spec["scope"])
    return queue.dequeue_many(spec["batch_size"], name=spec["scope"])


def _batch(tensors, default_name, join, name, **spec):
    """``batch``/``batch_join``/``shuffle_batch``/``shuffle_batch_join`` in one: ``tensors``
    is one list (or dict) of tensors, or with ``join`` a list of such lists."""
    lists = [_as_tensor_list(t) for t in tensors] if join else [_as_tensor_list(tensors)]
    flat = [t for tl in lists for t in (tl.values() if isinstance(tl, dict) else tl)]
    with name_scope(name, default_name, flat) as scope:
        if spec["kind"] == "shuffle":
            capacity, floor = spec["capacity"], spec["queue_kw"]["min_after_dequeue"]
            if capacity <= floor:
                raise ValueError(
                    "capacity %d must be bigger than min_after_dequeue %d." % (capacity, floor)
                )
        lists = [_validate(tl) for tl in lists]
        # TF converts its keep_input=True to a tensor here: a bool Const, <scope>/Const, that
        # nothing reads (maybe_batch's filter; minitf has no maybe_batch)
        array_ops.constant(True)
        threads = None if join else spec.pop("num_threads")
        dequeued = _batch_graph(lists, threads, dict(spec, scope=scope))
        return _as_original_type(tensors[0] if join else tensors, dequeued)


def batch(
    tensors: Any,
    batch_size: int,
    num_threads: int = 1,
    capacity: int = 32,
    enqueue_many: bool = False,
    shapes: Any = None,
    dynamic_pad: bool = False,
    allow_smaller_final_batch: bool = False,
    shared_name: str | None = None,
    name: str | None = None,
) -> Any:
    """``tf.train.batch``: batches of ``batch_size`` from a FIFO queue (a PaddingFIFOQueue with
    ``dynamic_pad``) filled by ``num_threads`` threads running the same enqueue op."""
    kind = "padding" if dynamic_pad else "fifo"
    return _batch(
        tensors,
        "batch",
        False,
        name,
        kind=kind,
        batch_size=batch_size,
        num_threads=num_threads,
        capacity=capacity,
        enqueue_many=enqueue_many,
        shapes=shapes,
        allow_smaller_final_batch=allow_smaller_final_batch,
        shared_name=shared_name,
        queue_kw={},
    )


def batch_join(
    tensors_list: list,
    batch_size: int,
    capacity: int = 32,
    enqueue_many: bool = False,
    shapes: Any = None,
    dynamic_pad: bool = False,
    allow_smaller_final_batch: bool = False,
    shared_name: str | None = None,
    name: str | None = None,
) -> Any:
    """``tf.train.batch_join``: like ``batch``, one enqueue op (and thread) per input list."""
    kind = "padding" if dynamic_pad else "fifo"
    return _batch(
        tensors_list,
        "batch_join",
        True,
        name,
        kind=kind,
        batch_size=batch_size,
        capacity=capacity,
        enqueue_many=enqueue_many,
        shapes=shapes,
        allow_smaller_final_batch=allow_smaller_final_batch,
        shared_name=shared_name,
        queue_kw={},
    )


def shuffle_batch(
    tensors: Any,
    batch_size: int,
    capacity: int,
    min_after_dequeue: int,
    num_threads: int = 1,
    seed: int | None = None,
    enqueue_many: bool = False,
    shapes: Any = None,
    allow_smaller_final_batch: bool = False,
    shared_name: str | None = None,
    name: str | None = None,
) -> Any:
    """``tf.train.shuffle_batch``: batches drawn at random from a RandomShuffleQueue that keeps
    at least ``min_after_dequeue`` examples while its input lasts."""
    return _batch(
        tensors,
        "shuffle_batch",
        False,
        name,
        kind="shuffle",
        batch_size=batch_size,
        num_threads=num_threads,
        capacity=capacity,
        enqueue_many=enqueue_many,
        shapes=shapes,
        allow_smaller_final_batch=allow_smaller_final_batch,
        shared_name=shared_name,
        queue_kw={"min_after_dequeue": min_after_dequeue, "seed": seed},
    )


def shuffle_batch_join(
    tensors_list: list,
    batch_size: int,
    capacity: int,
    min_after_dequeue: int,
    seed: int | None = None,
    enqueue_many: bool = False,
    shapes: Any = None,
    allow_smaller_final_batch: bool = False,
    shared_name: str | None = None,
    name: str | None = None,
) -> Any:
    """``tf.train.shuffle_batch_join``: ``shuffle_batch`` with one enqueue op per input list."""
    return _batch(
        tensors_list,
        "shuffle_batch_join",
        True,
        name,
        kind="shuffle",
        batch_size=batch_size,
        capacity=capacity,
        enqueue_many=enqueue_many,
        shapes=shapes,
        allow_smaller_final_batch=allow_smaller_final_batch,
        shared_name=shared_name,
        queue_kw={"min_after_dequeue": min_after_dequeue, "seed": seed},
    )
