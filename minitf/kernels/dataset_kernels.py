"""Dataset kernels: what ``TensorSliceDataset``, ``BatchDatasetV2``, ``MapDataset`` ... compute.

Book section: "Loading Data Directly from the Graph" (the Data API, TF's core/kernels/data/).
A dataset op computes no data: its output (a ``variant`` scalar) is a :class:`DatasetValue`,
a recipe that knows its input datasets and arguments.  Only an iterator (``kernels/
iterator_kernels.py``) asks a dataset for elements, through ``elements()``: a fresh Python
generator of elements, each a tuple of numpy arrays (the flat components).  Pulling from it
pulls from its inputs in turn, so a pipeline runs one element at a time, inside the
``IteratorGetNext`` kernel that asked, except behind a ``prefetch``, whose own thread runs its
input ahead, in a ``map`` with ``num_parallel_calls``, whose threads map that many elements at
once, and in an ``interleave`` with ``num_parallel_calls``, which reads each open dataset ahead
on a thread of its own, as TF's do (the order of the elements is the same).  A transformation
with a function (``map`` ...) calls the function's runner (``runtime/function_library.py``) for
each element.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections import deque
from collections.abc import Iterator

import numpy as np

from minitf.framework import dtypes, errors, tensor_shape
from minitf.kernels import script_kernels
from minitf.kernels.reader_kernels import _load, _TFRecords
from minitf.kernels.registry import register
from minitf.kernels.script_kernels import tensor_value
from minitf.kernels.tensor_ops import invalid_argument
from minitf.lib import nest
from minitf.lib.cores import schedulable_cores
from minitf.lib.philox import PhiloxSampler


class DatasetValue:
    """A dataset, as a ``variant`` tensor holds it: ``elements()`` starts a pass over it."""

    def __init__(self, op_type: str, make: callable) -> None:
        self.op_type = op_type
        self._make = make

    def __repr__(self) -> str:
        return "<%s>" % self.op_type

    def elements(self) -> Iterator[tuple]:
        return self._make()


class ErrorElement(tuple):
    """An element whose computation failed (a map function's error): the iterator that meets
    it raises ``error``, and the pass goes on after it, as in TF; transformations hand it on."""

    def __new__(cls, error: errors.OpError) -> ErrorElement:
        element = super().__new__(cls)
        element.error = error
        return element


def _dataset_kernel(op_type, make_elements):
    """Registers ``op_type``: its kernel packs ``make_elements(op, device, inputs)`` (a function
    that starts a pass) into a :class:`DatasetValue`."""

    def factory(op, device):
        def compute(ctx, ins):
            return (DatasetValue(op_type, make_elements(op, device, ins)),)

        return compute

    register(op_type, factory, cpu="any")


def _int(x) -> int:
    return int(np.asarray(x))


def _shape(x) -> tuple:
    return () if isinstance(x, bytes) else x.shape


# -- sources ------------------------------------------------------------------------------------


def _tensor(op, device, ins):
    element = tuple(tensor_value(x) for x in ins)
    return lambda: iter((element,))


def _tensor_slices(op, device, ins):
    comps = [tensor_value(x) for x in ins]
    n = comps[0].shape[0]
    for c in comps[1:]:
        if c.shape[0] != n:
            raise invalid_argument("All components must have the same size in the 0th dimension")
    return lambda: (tuple(c[i] for c in comps) for i in range(n))


def _range(op, device, ins):
    start, stop, step = (_int(x) for x in ins)
    if step == 0:
        raise invalid_argument("step must be a non-zero integer.")
    return lambda: ((np.int64(i),) for i in range(start, stop, step))


def _files(ins):
    names = np.asarray(ins[0], dtype=object).reshape(-1)
    return [n.decode("utf-8", "surrogateescape") if isinstance(n, bytes) else str(n) for n in names]


def _records(open_source, files):
    for name in files:
        source, at_end = open_source(name), False
        while not at_end:
            record, at_end = source.next()
            if record is not None:
                yield (record[1],)


def _text_lines(op, device, ins):
    _compression(ins[1])
    files = _files(ins)
    return lambda: ((line,) for name in files for line in _lines_of(_load(name)))


def _lines_of(data: bytes) -> list:
    """A text file's lines as the readers' ``TextLineReader`` reads them (``_TextLines``):
    without their ``\n`` and one trailing ``\r``; a last line without a newline counts unless
    it is empty once its ``\r`` is gone.  Split at once rather than line by line."""
    lines = data.split(b"\n")
    last = lines.pop()  # after the last newline: b"" when the file ends with one
    lines = [line[:-1] if line.endswith(b"\r") else line for line in lines]
    last = last[:-1] if last.endswith(b"\r") else last
    return lines + [last] if last else lines


def _tf_records(op, device, ins):
    _compression(ins[1])
    files = _files(ins)
    return lambda: _records(_TFRecords, files)


def _compression(kind):
    kind = np.asarray(kind, dtype=object).item()
    if kind not in (b"", ""):
        raise errors.UnimplementedError(
            None, None, "minitf reads uncompressed files only (compression_type %r)" % (kind,)
        )


def _generator(op, device, ins):
    """``GeneratorDataset``: a fresh call of the generator its token names for each pass; each
    value it yields is flattened and converted to the element's dtypes and checked against its
    shapes (a failure is that element's :class:`ErrorElement`: the generator goes on)."""
    token = script_kernels.token_of(op)
    types = list(op.get_attr("output_types"))
    shapes = list(op.get_attr("output_shapes"))
    args = [tensor_value(x) for x in ins]

    def make():
        fn = script_kernels.registered(token)
        for value in fn(*args):
            try:
                yield _generated(value, fn.output_types, types, shapes)
            except errors.OpError as e:
                yield ErrorElement(e)

    return make


def _generated(value, structure, types, shapes):
    try:
        flat = nest.flatten_up_to(structure, value, lists=False)
    except ValueError:
        raise invalid_argument(
            "TypeError: `generator` yielded an element that did not match the expected "
            "structure. The expected structure was %s, but the yielded element was %s."
            % (structure, value)
        ) from None
    out = []
    for v, dtype, shape in zip(flat, types, shapes):
        try:
            c = tensor_value(v) if dtype == dtypes.string else np.asarray(v, dtype.as_numpy_dtype)
        except (TypeError, ValueError, OverflowError):
            raise invalid_argument(
                "TypeError: `generator` yielded an element that could not be converted to the "
                "expected type. The expected type was %s, but the yielded element was %s."
                % (dtype.name, v)
            ) from None
        if not shape.is_compatible_with(tensor_shape.TensorShape(_shape(c))):
            raise invalid_argument(
                "ValueError: `generator` yielded an element of shape %s where an element of "
                "shape %s was expected." % (tensor_shape.TensorShape(_shape(c)), shape)
            )
        out.append(c[()] if isinstance(c, np.ndarray) and c.ndim == 0 else c)
    return tuple(out)


_dataset_kernel("GeneratorDataset", _generator)
_dataset_kernel("TensorDataset", _tensor)
_dataset_kernel("TensorSliceDataset", _tensor_slices)
_dataset_kernel("RangeDataset", _range)
_dataset_kernel("TextLineDataset", _text_lines)
_dataset_kernel("TFRecordDataset", _tf_records)


# -- transformations without a function --------------------------------------------------------


def _repeat(op, device, ins):
    inner, count = ins[0], _int(ins[1])
    fused = getattr(inner._make, "repeated", None)  # a reshuffling ShuffleDataset's
    if fused is not None:
        return lambda: fused(count)

    def make():
        epoch = 0
        while count < 0 or epoch < count:
            empty = True
            for element in inner.elements():
                empty = False
                yield element
            if empty:  # an empty input repeated forever is still empty (TF's rule)
                return
            epoch += 1

    return make


def _skip_or_take(skip):
    def make_elements(op, device, ins):
        inner, count = ins[0], _int(ins[1])

        def make():
            for i, element in enumerate(inner.elements()):
                if skip and (count < 0 or i < count):
                    continue
                if not skip and 0 <= count <= i:
                    return
                yield element

        return make

    return make_elements


def _batch(op, device, ins):
    inner, size = ins[0], _batch_size(ins[1])
    drop = bool(np.asarray(ins[2]))
    return lambda: _batches(inner, size, drop, _stack)


def _padded_batch(op, device, ins):
    """Each component padded to its padded shape (-1: the batch's longest) with its padding
    value, then stacked."""
    n = op.get_attr("N")
    inner, size = ins[0], _batch_size(ins[1])
    shapes = [[int(d) for d in np.asarray(s).reshape(-1)] for s in ins[2 : 2 + n]]
    values = [np.asarray(v) for v in ins[2 + n : 2 + 2 * n]]
    drop = bool(np.asarray(ins[2 + 2 * n]))

    def pad(batch):
        return tuple(
            _pad_component([element[k] for element in batch], k, shape, value)
            for k, (shape, value) in enumerate(zip(shapes, values))
        )

    return lambda: _batches(inner, size, drop, pad)


def _batch_size(x):
    size = _int(x)
    if size <= 0:
        raise invalid_argument("Batch size must be greater than zero.")
    return size


def _batches(inner, size, drop, combine):
    """Runs of ``size`` elements (the last one shorter unless ``drop``), each made one element
    by ``combine``; a batch that cannot be made is that batch's :class:`ErrorElement`.  An
    input's error comes out at once, and the batch begun is lost, as in TF."""
    batch = []
    for element in inner.elements():
        if type(element) is ErrorElement:
            batch = []
            yield element
            continue
        batch.append(element)
        if len(batch) == size:
            yield _combined(combine, batch)
            batch = []
    if batch and not drop:
        yield _combined(combine, batch)


def _combined(combine, batch):
    try:
        return combine(batch)
    except errors.OpError as e:
        return ErrorElement(e)


def _stack(batch):
    out = []
    for k in range(len(batch[0])):
        first = _shape(batch[0][k])
        for element in batch[1:]:
            if _shape(element[k]) != first:  # (TF 1.15 compares the numbers of elements)
                raise invalid_argument(
                    "Cannot add tensor to the batch: number of elements does not match. Shapes "
                    "are: [tensor]: %s, [batch]: %s"
                    % (_shape_text(_shape(element[k])), _shape_text(first))
                )
        if isinstance(batch[0][k], bytes):
            column = np.empty(len(batch), dtype=object)
            column[:] = [element[k] for element in batch]
            out.append(column)
        else:
            out.append(np.stack([element[k] for element in batch]))
    return tuple(out)


def _pad_component(values, k, shape, padding):
    """Component ``k`` of a batch, each value padded to ``shape`` with ``padding``."""
    parts = [np.asarray(v, dtype=object if isinstance(v, bytes) else None) for v in values]
    for part in parts:
        if part.ndim != len(shape):
            raise invalid_argument(
                "All elements in a batch must have the same rank as the padded shape for "
                "component%d: expected rank %d but got element with rank %d"
                % (k, len(shape), part.ndim)
            )
    dims = [d if d >= 0 else max(p.shape[i] for p in parts) for i, d in enumerate(shape)]
    result = np.full([len(parts)] + dims, padding, dtype=parts[0].dtype)
    for i, part in enumerate(parts):
        if any(a > b for a, b in zip(part.shape, dims)):
            raise invalid_argument("Attempted to pad to a smaller size than the input element.")
        if part.ndim:
            result[(i,) + tuple(slice(0, d) for d in part.shape)] = part
        else:  # (an object scalar would go in whole, as an array)
            result[i] = part.item()
    return result


def _shape_text(shape):
    return "[%s]" % ",".join(str(d) for d in shape)


def _zip(op, device, ins):
    def make():
        for parts in zip(*(d.elements() for d in ins)):
            yield tuple(c for part in parts for c in part)

    return make


def _concatenate(op, device, ins):
    def make():
        for d in ins:
            yield from d.elements()

    return make


def _prefetch(op, device, ins):
    """A background thread runs the input ahead of the consumer, up to ``buffer_size``
    elements (AUTOTUNE: 1, where TF's autotuner starts; 0: no thread, the input as it is)."""
    inner, size = ins[0], _int(ins[1])
    if size < -1:  # -1: AUTOTUNE
        raise invalid_argument("buffer_size must be >= 0 or set buffer_size to be AUTOTUNE.")
    if size == 0:
        return inner.elements
    return lambda: _prefetched(inner, 1 if size == -1 else size)


class _Raised:
    """An exception the input raised on the prefetch thread, for the consumer to raise."""

    def __init__(self, error: BaseException) -> None:
        self.error = error


_END = object()


def _prefetched(inner: DatasetValue, size: int) -> Iterator[tuple]:
    """One pass over ``inner`` whose elements a thread of its own computes and buffers (TF's
    ``PrefetchDatasetOp``).  As in TF the thread starts at the first element asked for."""
    yield from _read_ahead(inner, size, "prefetch")


def _read_ahead(inner: DatasetValue, size: int, name: str, permits=None) -> _Taken:
    """Starts a thread named ``name`` that reads a pass over ``inner`` into a buffer of
    ``size`` elements (holding one of ``permits``, a semaphore, while it computes an element);
    returns the :class:`_Taken` that hands them on.  When that is closed (the pass ends, the
    iterator starts another, its session closes) the thread stops after at most the element
    it is computing."""
    buffer: queue.Queue = queue.Queue(size)
    stop = threading.Event()

    def produce():
        try:
            elements = inner.elements()
            while True:
                with permits if permits is not None else contextlib.nullcontext():
                    element = next(elements, _END)
                if element is _END:
                    break
                buffer.put(element)
                if stop.is_set():  # the consumer drained the buffer once it set this
                    return
            buffer.put(_END)
        except BaseException as e:  # noqa: BLE001  (handed to the consumer, which raises it)
            buffer.put(_Raised(e))

    threading.Thread(target=produce, name=name, daemon=True).start()
    return _Taken(buffer, stop)


class _Taken:
    """The consumer's end of a read-ahead thread: ``next`` takes its elements in order (its
    errors raised in their place); ``close`` (also when the pass ends, or when this goes)
    stops the thread, even if no element was ever taken."""

    def __init__(self, buffer: queue.Queue, stop: threading.Event) -> None:
        self._buffer, self._stop = buffer, stop

    def __iter__(self) -> _Taken:
        return self

    def __next__(self) -> tuple:
        if self._stop.is_set():
            raise StopIteration
        item = self._buffer.get()
        if item is _END or type(item) is _Raised:
            self.close()
            if item is _END:
                raise StopIteration
            raise item.error
        return item

    def close(self) -> None:
        if self._stop.is_set():
            return
        self._stop.set()
        while True:  # room for the one put the thread may still make before it sees ``stop``
            try:
                self._buffer.get_nowait()
            except queue.Empty:
                break

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001, S110 - interpreter shutdown: nothing left to stop
            pass


def _shard(op, device, ins):
    inner, shards, index = ins[0], _int(ins[1]), _int(ins[2])
    if shards <= 0:
        raise invalid_argument(
            "Number of shards must be greater than zero (currently num_shards = %d)." % shards
        )
    if not 0 <= index < shards:
        raise invalid_argument(
            "Index must be between 0 and %d (currently index = %d)." % (shards - 1, index)
        )
    return lambda: (e for i, e in enumerate(inner.elements()) if i % shards == index)


def _cache(op, device, ins):
    """In memory: the first pass that reaches the end is kept; later passes replay it."""
    inner, name = ins[0], tensor_value(ins[1])
    if name:
        raise errors.UnimplementedError(
            None, None, "minitf caches datasets in memory only (filename %r)" % (name,)
        )
    kept = []

    def make():
        if kept:
            yield from kept[0]
            return
        seen = []
        for element in inner.elements():
            seen.append(element)
            yield element
        kept.append(seen)

    return make


def _unbatch(op, device, ins):
    def make():
        for element in ins[0].elements():
            if type(element) is ErrorElement:
                yield element
                continue
            sizes = [len(c) for c in element]
            if any(n != sizes[0] for n in sizes):
                k = next(i for i, n in enumerate(sizes) if n != sizes[0])
                yield ErrorElement(
                    invalid_argument(
                        "Input element must have the same batch size in each component. "
                        "Component 0 had size %d but component %d had size %d."
                        % (sizes[0], k, sizes[k])
                    )
                )
                continue
            for i in range(sizes[0] if sizes else 0):
                yield tuple(c[i] for c in element)

    return make


_dataset_kernel("ShardDataset", _shard)
_dataset_kernel("CacheDataset", _cache)
_dataset_kernel("UnbatchDataset", _unbatch)
_dataset_kernel("RepeatDataset", _repeat)
_dataset_kernel("SkipDataset", _skip_or_take(True))
_dataset_kernel("TakeDataset", _skip_or_take(False))
_dataset_kernel("BatchDatasetV2", _batch)
_dataset_kernel("PaddedBatchDatasetV2", _padded_batch)
_dataset_kernel("ZipDataset", _zip)
_dataset_kernel("ConcatenateDataset", _concatenate)
_dataset_kernel("PrefetchDataset", _prefetch)
_dataset_kernel("OptimizeDataset", lambda op, device, ins: ins[0]._make)
_dataset_kernel("ModelDataset", lambda op, device, ins: ins[0]._make)


# -- shuffle (TF's shuffle_dataset_op.cc) --------------------------------------------------------


def _shuffle(op, device, ins):
    """A buffer of ``buffer_size`` elements, kept full while the input lasts; each output is
    the one at a random place (a Philox sample modulo the count), whose place the oldest
    element takes.  With ``reshuffle_each_iteration`` (the default) each pass (each epoch of
    a later ``repeat``) draws two new seeds from a generator seeded with the op's; else every
    pass uses the op's seeds.  A ``repeat`` right after it fuses with it, as TF's default
    optimization ``shuffle_and_repeat_fusion`` does: one generator, the op's own seeds, and a
    buffer that reaches into the next epoch (elements of an epoch still come out before any
    of the next)."""
    inner, size = ins[0], _int(ins[1])
    seed, seed2 = _int(ins[2]), _int(ins[3])
    if size <= 0:
        raise invalid_argument("buffer_size must be greater than zero.")
    if seed == 0 and seed2 == 0:  # TF: random::New64() twice
        seed, seed2 = (int(x) for x in np.random.default_rng().integers(1, 2**63, size=2))
    reshuffle = op.get_attr("reshuffle_each_iteration")
    seeds = PhiloxSampler(seed, seed2)

    def make():
        s, s2 = (seeds(), seeds()) if reshuffle else (seed, seed2)
        return _shuffled(inner, 1, size, PhiloxSampler(s, s2))

    if reshuffle:  # what a RepeatDataset over it runs instead (_repeat)
        make.repeated = lambda count: _shuffled(inner, count, size, PhiloxSampler(seed, seed2))
    return make


def _shuffled(inner, count, size, sample):
    """TF's ``ShuffleDatasetBase`` iterator: a ring buffer whose elements are split into one
    slice per epoch; each output is drawn from the oldest slice (``count`` -1: forever)."""
    buf, slices, epoch, first = [None] * size, [[0, 0]], 0, True
    elements = inner.elements()
    held = 0
    while True:
        while elements is not None and held < size:
            element = None
            while count < 0 or epoch < count:
                element = next(elements, None)
                if type(element) is ErrorElement:
                    break
                if element is not None:
                    first = False
                    break
                if first and count < 0:  # an empty input repeated forever is empty
                    return
                epoch += 1
                slices.append([slices[-1][1], slices[-1][1]])
                elements = inner.elements()
            if element is None:
                elements = None
                break
            if type(element) is ErrorElement:  # an input's error comes out at once
                yield element
                continue
            buf[slices[-1][1] % size] = element
            slices[-1][1] += 1
            held += 1
        while slices and slices[0][0] == slices[0][1]:
            slices.pop(0)
        if not slices:
            return
        start, end = slices[0]
        index = (start + sample() % (end - start)) % size
        out, buf[index] = buf[index], buf[start % size]
        buf[start % size] = None
        slices[0][0] += 1
        held -= 1
        yield out


_dataset_kernel("ShuffleDataset", _shuffle)


# -- transformations with a function -----------------------------------------------------------


def _function(op, device, ins):
    """``(apply, n)``: ``apply(element)`` runs the op's function on an element and the values
    it captured (the op's ``n`` inputs after its dataset), giving the results or the
    :class:`ErrorElement` of its failure (TF prefixes the message with ``{{function_node
    <name>}}``); an ErrorElement passes through."""
    runner = device.function_runner(op.get_attr("predicate" if op.type == "FilterDataset" else "f"))
    n = len(op.get_attr("Targuments"))
    captured = [x if isinstance(x, DatasetValue) else tensor_value(x) for x in ins[1 : 1 + n]]

    def apply(element):
        if type(element) is ErrorElement:
            return element
        try:
            return tuple(runner(list(element) + captured))
        except errors.OpError as e:
            message = "{{function_node %s}} %s" % (runner.name, e.message)
            return ErrorElement(type(e)(None, None, message))

    return apply, n


def _map(op, device, ins):
    inner, (apply, n) = ins[0], _function(op, device, ins)
    if op.type == "ParallelMapDataset":
        calls = _parallel_calls(ins[1 + n], autotune=schedulable_cores)
        return lambda: _parallel_mapped(inner, apply, calls)
    return lambda: (apply(element) for element in inner.elements())


def _parallel_calls(x, autotune) -> int:
    """A ``num_parallel_calls`` operand: more than zero, or AUTOTUNE (-1), which takes
    ``autotune()``."""
    calls = _int(x)
    if calls == -1:
        return autotune()
    if calls <= 0:
        raise invalid_argument("num_parallel_calls must be greater than zero.")
    return calls


def _parallel_mapped(inner: DatasetValue, apply, calls: int) -> Iterator[tuple]:
    """One pass of a ``map(num_parallel_calls=calls)`` (TF's ``ParallelMapDatasetOp``, not
    sloppy): up to ``calls`` elements are mapped at once, on threads of their own, which start
    at the first element asked for; the results, failures and the input's own errors come in
    the input's order.  When the pass goes the threads stop after the element they are on."""
    tasks: queue.SimpleQueue = queue.SimpleQueue()

    def work():
        while (job := tasks.get()) is not None:
            slot, element = job
            try:
                slot.put(apply(element))
            except BaseException as e:  # noqa: BLE001  (raised by the consumer, in order)
                slot.put(_Raised(e))

    for _ in range(calls):
        threading.Thread(target=work, name="parallel_map", daemon=True).start()
    source, pending, error = inner.elements(), deque(), None
    try:
        while True:
            while source is not None and len(pending) < calls:
                try:
                    element = next(source)
                except StopIteration:
                    source = None
                    break
                except BaseException as e:  # noqa: BLE001  (after the elements before it)
                    source, error = None, e
                    break
                pending.append(queue.SimpleQueue())
                tasks.put((pending[-1], element))
            if not pending:
                if error is not None:
                    raise error
                return
            result = pending.popleft().get()
            if type(result) is _Raised:
                raise result.error
            yield result
    finally:
        for _ in range(calls):
            tasks.put(None)


def _filter(op, device, ins):
    inner, (apply, _) = ins[0], _function(op, device, ins)

    def make():
        for element in inner.elements():
            keep = apply(element)
            if type(keep) is ErrorElement:
                yield keep
            elif bool(keep[0]):
                yield element

    return make


def _flat_map(op, device, ins):
    inner, (apply, _) = ins[0], _function(op, device, ins)

    def make():
        for element in inner.elements():
            made = apply(element)
            if type(made) is ErrorElement:
                yield made
            else:
                yield from made[0].elements()

    return make


def _interleave(op, device, ins):
    """TF's InterleaveDataset: up to ``cycle_length`` inner datasets open at once; take
    ``block_length`` elements from each in turn; one that ends gives its place to the dataset
    of the next input element."""
    inner, (apply, n) = ins[0], _function(op, device, ins)
    cycle, block = _int(ins[1 + n]), _int(ins[2 + n])
    if cycle == -1:  # AUTOTUNE: TF's number of schedulable cores
        cycle = schedulable_cores()
    if cycle <= 0:
        raise invalid_argument("cycle_length must be greater than zero.")
    if block <= 0:
        raise invalid_argument("block_length must be greater than zero.")
    if op.type == "ParallelInterleaveDatasetV2":
        calls = min(_parallel_calls(ins[3 + n], autotune=lambda: cycle), cycle)
        return lambda: _interleaved(
            inner.elements(), apply, cycle, block, _reader(block, calls), eager=True
        )
    return lambda: _interleaved(inner.elements(), apply, cycle, block, DatasetValue.elements)


def _reader(block: int, calls: int):
    """How a parallel interleave opens an inner dataset (TF's ``ParallelInterleaveDatasetV2``,
    not sloppy): on a thread of its own that reads ``block`` elements ahead from the moment it
    opens, at most ``calls`` of the cycle's threads computing at a time."""
    permits = threading.BoundedSemaphore(calls)
    return lambda dataset: _read_ahead(dataset, block, "parallel_interleave", permits)


def _interleaved(outer, apply, cycle, block, open_dataset, eager=False):
    """The interleave's order: ``block`` elements from each open dataset in turn; an empty
    place takes the dataset of the next input element at its turn (``eager``: at the start
    of each round, so that their readers start at once; the order is the same)."""
    slots, failed, more = [None] * cycle, [None] * cycle, True

    def fill(i):
        nonlocal more
        element = next(outer, None)
        more = element is not None
        if more:
            made = apply(element)
            if type(made) is ErrorElement:
                failed[i] = made
            else:
                slots[i] = open_dataset(made[0])

    try:
        while True:
            for i in range(cycle) if eager else ():
                if slots[i] is None and failed[i] is None and more:
                    fill(i)
            for i in range(cycle):
                if not eager and slots[i] is None and more:
                    fill(i)
                if failed[i] is not None:
                    yield failed[i]
                    failed[i] = None
                    continue
                for _ in range(block):
                    if slots[i] is None:
                        break
                    element = next(slots[i], None)
                    if element is None:
                        slots[i] = None
                        break
                    yield element
            if not more and all(s is None for s in slots):
                return
    finally:  # a pass cut short: the open datasets' readers stop now
        for slot in slots:
            if slot is not None:
                slot.close()


_dataset_kernel("MapDataset", _map)
_dataset_kernel("ParallelMapDataset", _map)
_dataset_kernel("FilterDataset", _filter)
_dataset_kernel("FlatMapDataset", _flat_map)
_dataset_kernel("InterleaveDataset", _interleave)
_dataset_kernel("ParallelInterleaveDatasetV2", _interleave)
