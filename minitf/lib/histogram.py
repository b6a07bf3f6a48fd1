"""TF's histogram of a tensor's values, as ``HistogramSummary`` writes it
(``core/lib/histogram/histogram.cc``).

Book section: "Distributing TensorFlow" (summaries the chief writes for TensorBoard).  The
default bucket limits grow by 10% from 1e-12 to 1e20, mirrored for negative values around a
bucket at 0, and end at ±DBL_MAX; a value ``v`` is counted in the first bucket whose limit is
greater than ``v``.  Encoding collapses every run of empty buckets into one entry (the limit
of its last bucket), as ``Histogram::EncodeToProto(proto, preserve_zero_buckets=false)``.
"""

from __future__ import annotations

import bisect
import sys
from collections.abc import Iterable

DBL_MAX = sys.float_info.max


def _default_limits() -> list[float]:
    """TF's ``InitDefaultBucketsInner``: the same double arithmetic (``v *= 1.1``)."""
    positive = []
    v = 1.0e-12
    while v < 1.0e20:
        positive.append(v)
        v *= 1.1
    positive.append(DBL_MAX)
    return [-x for x in reversed(positive)] + [0.0] + positive


DEFAULT_BUCKET_LIMITS: tuple[float, ...] = tuple(_default_limits())


class Histogram:
    """Counts of values per default bucket, and their min, max, count, sum and sum of squares
    (the fields of ``HistogramProto``)."""

    def __init__(self) -> None:
        self.limits = DEFAULT_BUCKET_LIMITS
        self.buckets = [0.0] * len(self.limits)
        self.min, self.max = DBL_MAX, -DBL_MAX
        self.num = self.sum = self.sum_squares = 0.0

    def add(self, value: float) -> None:
        """Counts one finite value (TF's ``Histogram::Add``)."""
        b = min(bisect.bisect_right(self.limits, value), len(self.buckets) - 1)
        self.buckets[b] += 1.0
        self.min = min(self.min, value)
        self.max = max(self.max, value)
        self.num += 1
        self.sum += value
        self.sum_squares += value * value

    def add_all(self, values: Iterable[float]) -> Histogram:
        for v in values:
            self.add(float(v))
        return self

    def encoded_buckets(self) -> tuple[list[float], list[float]]:
        """``(bucket_limit, bucket)`` with runs of empty buckets collapsed into one entry."""
        limits, counts = [], []
        i, n = 0, len(self.buckets)
        while i < n:
            end, count = self.limits[i], self.buckets[i]
            i += 1
            if count <= 0.0:
                while i < n and self.buckets[i] <= 0.0:
                    end, count = self.limits[i], self.buckets[i]
                    i += 1
            limits.append(end)
            counts.append(count)
        return limits, counts
