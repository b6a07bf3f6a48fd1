"""Readers: ``tf.TextLineReader`` and friends (TF 1.15's python/ops/io_ops.py, reader part).

Book section: "Loading Data Directly from the Graph" (Figures 12-9 and 12-10).  A reader is a
stateful resource made by its own op (``TextLineReaderV2``, ``FixedLengthRecordReaderV2``,
``TFRecordReaderV2``, ``WholeFileReaderV2``, ``IdentityReaderV2``); its methods add ops that
take the reader's handle: ``read(queue)`` is ``ReaderReadV2``, whose second input is the
*filename queue's* handle, so the read runs where the queue is (part 2 §13.4, §22.2).  The
reader remembers the file it is in and its position; when the file is done the next read
dequeues a new file name.  The work itself is the kernels' (``kernels/reader_kernels.py``).
"""

from __future__ import annotations

from minitf.framework import dtypes, tensor_shape
from minitf.framework.graph import Tensor, convert_to_tensor
from minitf.lib import deprecation
from minitf.ops.op_def import NotDifferentiable, apply_op, register_op

_READER_TYPES = (
    "TextLineReaderV2",
    "FixedLengthRecordReaderV2",
    "TFRecordReaderV2",
    "WholeFileReaderV2",
    "IdentityReaderV2",
)
_ACCESS_TYPES = (
    "ReaderReadV2",
    "ReaderReadUpToV2",
    "ReaderNumRecordsProducedV2",
    "ReaderNumWorkUnitsCompletedV2",
    "ReaderResetV2",
    "ReaderSerializeStateV2",
    "ReaderRestoreStateV2",
)
for _op_type in _READER_TYPES:
    register_op(_op_type, is_stateful=True, has_container=True)
for _op_type in _ACCESS_TYPES:
    register_op(_op_type, is_stateful=True)
for _op_type in _READER_TYPES + _ACCESS_TYPES:
    NotDifferentiable(_op_type)

_SCALAR = tensor_shape.TensorShape([])
_VECTOR = tensor_shape.TensorShape([None])


def _deprecated(cls_name, dataset):
    """TF's once-per-class deprecation warning pointing to ``tf.data``."""
    deprecation.warn(
        cls_name + ".__init__",
        "tensorflow.python.ops.io_ops",
        "Queue-based input pipelines have been replaced by `tf.data`. Use `%s`." % dataset,
    )


def _make_reader(op_type, name, attrs):
    """The reader op (no inputs, a scalar resource handle out) with TF's attrs."""
    attrs = dict(attrs, container="", shared_name="")
    op = apply_op(op_type, [], [(dtypes.resource, _SCALAR)], name or op_type, attrs)
    return op.outputs[0]


def _queue_ref(queue):
    """``read`` takes a queue object or a queue's handle tensor."""
    return queue if isinstance(queue, Tensor) else queue.queue_ref


class ReaderBase:
    """What every TF reader offers over its handle (``reader_ref``): ``read``,
    ``read_up_to``, the two counters and ``reset`` (TF's ``io_ops.ReaderBase``)."""

    def __init__(self, reader_ref: Tensor, supports_serialize: bool = False):
        self._reader_ref = reader_ref
        self._supports_serialize = supports_serialize

    @property
    def reader_ref(self) -> Tensor:
        return self._reader_ref

    @property
    def supports_serialize(self) -> bool:
        return self._supports_serialize

    def read(self, queue, name: str | None = None):
        """``ReaderReadV2``: the next ``(key, value)`` record, two string scalars; dequeues a
        file name from ``queue`` when the reader has no file in progress."""
        outs = [(dtypes.string, _SCALAR), (dtypes.string, _SCALAR)]
        inputs = [self._reader_ref, _queue_ref(queue)]
        op = apply_op("ReaderReadV2", inputs, outs, name or "ReaderReadV2")
        return op.outputs[0], op.outputs[1]

    def read_up_to(self, queue, num_records, name: str | None = None):
        """``ReaderReadUpToV2``: up to ``num_records`` records of one file, as string vectors."""
        n = convert_to_tensor(num_records, dtype=dtypes.int64)
        outs = [(dtypes.string, _VECTOR), (dtypes.string, _VECTOR)]
        inputs = [self._reader_ref, _queue_ref(queue), n]
        op = apply_op("ReaderReadUpToV2", inputs, outs, name or "ReaderReadUpToV2")
        return op.outputs[0], op.outputs[1]

    def _counter(self, op_type, name):
        outs = [(dtypes.int64, _SCALAR)]
        return apply_op(op_type, [self._reader_ref], outs, name or op_type).outputs[0]

    def num_records_produced(self, name: str | None = None) -> Tensor:
        """``ReaderNumRecordsProducedV2``: records read so far, an int64 scalar."""
        return self._counter("ReaderNumRecordsProducedV2", name)

    def num_work_units_completed(self, name: str | None = None) -> Tensor:
        """``ReaderNumWorkUnitsCompletedV2``: files finished so far, an int64 scalar."""
        return self._counter("ReaderNumWorkUnitsCompletedV2", name)

    def serialize_state(self, name: str | None = None) -> Tensor:
        """``ReaderSerializeStateV2``: the reader's state as a string scalar (a
        ``ReaderBaseState`` proto; readers other than WholeFileReader and IdentityReader fail
        with ``UnimplementedError("Reader SerializeState")``)."""
        outs = [(dtypes.string, _SCALAR)]
        op = apply_op(
            "ReaderSerializeStateV2", [self._reader_ref], outs, name or "ReaderSerializeStateV2"
        )
        return op.outputs[0]

    def restore_state(self, state, name: str | None = None):
        """``ReaderRestoreStateV2``: takes over a state ``serialize_state`` produced."""
        state = convert_to_tensor(state, dtype=dtypes.string)
        inputs = [self._reader_ref, state]
        return apply_op("ReaderRestoreStateV2", inputs, [], name or "ReaderRestoreStateV2")

    def reset(self, name: str | None = None):
        """``ReaderResetV2``: forgets the current file and both counters."""
        return apply_op("ReaderResetV2", [self._reader_ref], [], name or "ReaderResetV2")


def _non_negative(value):
    return 0 if value is None else int(value)


class TextLineReader(ReaderBase):
    """``tf.TextLineReader``: one record per line; keys ``<file>:<line>`` (1-based, skipped
    header lines counted)."""

    def __init__(self, skip_header_lines: int | None = None, name: str | None = None):
        _deprecated("TextLineReader", "tf.data.TextLineDataset")
        attrs = {"skip_header_lines": _non_negative(skip_header_lines)}
        super().__init__(_make_reader("TextLineReaderV2", name, attrs))


class FixedLengthRecordReader(ReaderBase):
    """``tf.FixedLengthRecordReader``: records of ``record_bytes`` bytes every ``hop_bytes``
    after ``header_bytes``, keeping ``footer_bytes`` off the end; keys ``<file>:<index>``."""

    def __init__(
        self,
        record_bytes: int,
        header_bytes: int | None = None,
        footer_bytes: int | None = None,
        hop_bytes: int | None = None,
        name: str | None = None,
        encoding: str | None = None,
    ):
        _deprecated("FixedLengthRecordReader", "tf.data.FixedLengthRecordDataset")
        attrs = {
            "record_bytes": int(record_bytes),
            "header_bytes": _non_negative(header_bytes),
            "footer_bytes": _non_negative(footer_bytes),
            "hop_bytes": _non_negative(hop_bytes),
            "encoding": encoding or "",
        }
        super().__init__(_make_reader("FixedLengthRecordReaderV2", name, attrs))


def _compression_type(options):
    """``options``: None, a ``TFRecordOptions``-like object (``compression_type``) or a string."""
    if options is None:
        return ""
    value = getattr(options, "compression_type", options)
    if isinstance(value, int):  # TFRecordCompressionType.NONE/ZLIB/GZIP
        return ("", "ZLIB", "GZIP")[value]
    return value or ""


class TFRecordReader(ReaderBase):
    """``tf.TFRecordReader``: the records of TFRecord files; keys ``<file>:<byte offset>``."""

    def __init__(self, name: str | None = None, options=None):
        _deprecated("TFRecordReader", "tf.data.TFRecordDataset")
        attrs = {"compression_type": _compression_type(options)}
        super().__init__(_make_reader("TFRecordReaderV2", name, attrs))


class WholeFileReader(ReaderBase):
    """``tf.WholeFileReader``: one record per file, the file's name and its whole contents."""

    def __init__(self, name: str | None = None):
        _deprecated("WholeFileReader", "tf.data.Dataset.map(tf.read_file)")
        super().__init__(_make_reader("WholeFileReaderV2", name, {}), supports_serialize=True)


class IdentityReader(ReaderBase):
    """``tf.IdentityReader``: one record per work item, its key and value both the item."""

    def __init__(self, name: str | None = None):
        _deprecated("IdentityReader", "tf.data.Dataset.map(...)")
        super().__init__(_make_reader("IdentityReaderV2", name, {}), supports_serialize=True)
