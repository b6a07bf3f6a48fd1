"""Summary kernels: ``ScalarSummary``, ``HistogramSummary``, ``MergeSummary`` (CPU only, as
TF's ``core/kernels/summary_op.cc``).

Book section: "Distributing TensorFlow" (the chief's summary op, run every few steps, gives a
serialized ``Summary`` that the FileWriter appends to the event file).  Each kernel outputs a
scalar string tensor: the bytes of a ``Summary`` proto (a ``bytes`` object, minitf's form of
a ``tf.string`` scalar, as ``Session.run`` returns it).  The error texts are TF 1.15's
(``summary_op.cc``).
"""

from __future__ import annotations

import math

import numpy as np
from google.protobuf.message import DecodeError

from minitf.framework import dtypes as D
from minitf.kernels.registry import register
from minitf.kernels.tensor_ops import invalid_argument
from minitf.lib.histogram import Histogram
from minitf.lib.protobuf import tf_protos_pb2 as pb

# TF_CALL_REAL_NUMBER_TYPES: the dtypes with a ScalarSummary / HistogramSummary kernel
REAL_NUMBER = (
    D.float32,
    D.float64,
    D.int32,
    D.uint8,
    D.int16,
    D.int8,
    D.int64,
    D.uint16,
    D.float16,
    D.uint32,
    D.uint64,
)


def _text(tag) -> str:
    return tag.decode("utf-8", "replace") if isinstance(tag, bytes) else str(tag)


def _shape_text(shape) -> str:
    """TF's ``TensorShape::DebugString``: ``[2,3]``, ``[]``."""
    return "[%s]" % ",".join(str(d) for d in shape)


def _legacy_scalar(shape) -> bool:
    """TF's ``IsLegacyScalar``: a scalar or a one-element vector."""
    return len(shape) == 0 or (len(shape) == 1 and shape[0] == 1)


def _string_scalar(summary: pb.Summary) -> bytes:
    """A scalar string as minitf's numpy kernels hand scalars over (``scalarize``): the bytes."""
    return summary.SerializeToString()


def _scalar_summary(op, device):
    def compute(ctx, ins):
        tags, values = np.asarray(ins[0], dtype=object), np.asarray(ins[1])
        if tags.shape != values.shape and not (
            _legacy_scalar(tags.shape) and _legacy_scalar(values.shape)
        ):
            single = " (tag '%s')" % _text(tags.flat[0]) if tags.size == 1 else ""
            raise invalid_argument(
                "tags and values not the same shape: %s != %s%s"
                % (_shape_text(tags.shape), _shape_text(values.shape), single)
            )
        summary = pb.Summary()
        for tag, v in zip(tags.flat, values.flat):
            summary.value.add(tag=_text(tag), simple_value=float(v))
        return (_string_scalar(summary),)

    return compute


def histogram_value(tag: str, values: np.ndarray, node_name: str) -> pb.Summary.Value:
    """One ``Summary.Value`` with the histogram of ``values``; NaN or infinity is TF's
    InvalidArgumentError naming the node."""
    histo = Histogram()
    for v in np.asarray(values, dtype=np.float64).flat:
        if math.isnan(v):
            raise invalid_argument("Nan in summary histogram for: %s" % node_name)
        if math.isinf(v):
            raise invalid_argument("Infinity in summary histogram for: %s" % node_name)
        histo.add(float(v))
    limits, counts = histo.encoded_buckets()
    value = pb.Summary.Value(tag=tag)
    h = value.histo
    h.min, h.max, h.num, h.sum, h.sum_squares = (
        histo.min,
        histo.max,
        histo.num,
        histo.sum,
        histo.sum_squares,
    )
    h.bucket_limit.extend(limits)
    h.bucket.extend(counts)
    return value


def _histogram_summary(op, device):
    def compute(ctx, ins):
        tag = np.asarray(ins[0], dtype=object)
        if not _legacy_scalar(tag.shape):
            raise invalid_argument("tags must be scalar")
        summary = pb.Summary()
        summary.value.append(histogram_value(_text(tag.flat[0]), ins[1], op.name))
        return (_string_scalar(summary),)

    return compute


def _merge_summary(op, device):
    def compute(ctx, ins):
        merged, seen = pb.Summary(), set()
        for tensor in ins:
            for serialized in np.asarray(tensor, dtype=object).flat:
                part = pb.Summary()
                try:
                    part.ParseFromString(bytes(serialized))
                except DecodeError:
                    raise invalid_argument("Could not parse one of the summary inputs") from None
                for value in part.value:
                    if value.tag in seen:
                        raise invalid_argument(
                            "Duplicate tag %s found in summary inputs" % value.tag
                        )
                    seen.add(value.tag)
                    merged.value.append(value)
        return (_string_scalar(merged),)

    return compute


register("ScalarSummary", _scalar_summary, cpu=REAL_NUMBER)
register("HistogramSummary", _histogram_summary, cpu=REAL_NUMBER)
register("MergeSummary", _merge_summary, cpu="any")
