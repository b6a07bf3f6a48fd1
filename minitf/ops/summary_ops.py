"""Summary ops: ``tf.summary.scalar``, ``histogram``, ``merge``, ``merge_all``, and the pre-1.0
names the blog posts use (``tf.scalar_summary``, ``tf.merge_all_summaries`` ...).

Book section: "Distributing TensorFlow" (the chief's Supervisor or MonitoredTrainingSession runs
the merged summary op and writes its output to an event file).  TF's pieces:
``python/summary/summary.py``, ``python/ops/summary_op_util.py`` and the legacy functions of
``python/ops/logging_ops.py``; the ops of ``core/ops/logging_ops.cc``.  Each op outputs a
serialized ``Summary`` proto as a scalar string (kernels/summary_kernels.py computes it).

Names: ``scalar("loss", x)`` makes a ``ScalarSummary`` op named by a name scope on ``loss``
(``loss``, then ``loss_1``; ``s/acc`` under scope ``s``) and the summary's *tag* is that op name;
its tag constant is ``loss/tags`` and a Python value becomes ``loss/values``.  ``merge`` makes
``Merge/MergeSummary``.  Summaries join ``GraphKeys.SUMMARIES`` unless ``collections`` says
otherwise.

The legacy names were removed from TF's API at 1.0 (TF 1.15 has no ``tf.merge_all_summaries``:
reference §20.2); minitf keeps them, with their old signatures (``scalar_summary(tags, values)``:
the tag is not scoped), so that seed 003's code runs.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator, Sequence

from minitf.framework import dtypes, tensor_shape
from minitf.framework.graph import (
    GraphKeys,
    Tensor,
    convert_to_tensor,
    get_default_graph,
    name_scope,
)
from minitf.ops.array_ops import TensorLike
from minitf.ops.op_def import apply_op, register_op

register_op("ScalarSummary")
register_op("HistogramSummary")
register_op("MergeSummary")

_SCALAR = tensor_shape.TensorShape([])
# TF's ``realnumbertypes``: what ScalarSummary and HistogramSummary accept
_REAL_NUMBER_TYPES = (
    "float32",
    "float64",
    "int32",
    "uint8",
    "int16",
    "int8",
    "int64",
    "bfloat16",
    "uint16",
    "half",
    "uint32",
    "uint64",
)
_INVALID_TAG_CHARACTERS = re.compile(r"[^-/\w\.]")


def clean_tag(name: str | None) -> str | None:
    """TF's ``summary_op_util.clean_tag``: characters other than ``-/\\w.`` become ``_``, and
    leading slashes go."""
    if name is None:
        return None
    return _INVALID_TAG_CHARACTERS.sub("_", name).lstrip("/")


@contextlib.contextmanager
def summary_scope(
    name: str, family: str | None = None, default_name: str | None = None, values=None
) -> Iterator[tuple[str, str]]:
    """TF's ``summary_scope``: a name scope on ``family/name`` (or ``name``); yields
    ``(tag, scope)`` where the tag is the scope's name (prefixed by ``family/`` again)."""
    name, family = clean_tag(name), clean_tag(family)
    base = name if family is None else "%s/%s" % (family, name)
    with name_scope(base, default_name, values) as scope:
        tag = scope.rstrip("/") if family is None else "%s/%s" % (family, scope.rstrip("/"))
        yield tag, scope


def _collect(op_output: Tensor, collections, default_collections) -> None:
    """TF's ``summary_op_util.collect``."""
    if collections is None:
        collections = default_collections
    for key in collections:
        op_output.graph.add_to_collection(key, op_output)


def _real_number(values: Tensor, op_type: str) -> dtypes.DType:
    dt = values.dtype.base_dtype
    if dt.name not in _REAL_NUMBER_TYPES:
        raise TypeError(
            "Value passed to parameter 'values' has DataType %s not in list of allowed "
            "values: %s" % (dt.name, ", ".join(_REAL_NUMBER_TYPES))
        )
    return dt


def _summary_op(op_type: str, tag_arg: str, tag, values, scope: str) -> Tensor:
    """A ``ScalarSummary``/``HistogramSummary`` op named ``scope``; its inputs are converted
    inside that scope (``<scope>/tags``, ``<scope>/values``) as TF's op_def_library does."""
    with name_scope(scope):
        tag_t = convert_to_tensor(tag, dtype=dtypes.string, name=tag_arg)
        values_t = convert_to_tensor(values, name="values")
    dt = _real_number(values_t, op_type)
    op = apply_op(op_type, [tag_t, values_t], [(dtypes.string, _SCALAR)], scope, {"T": dt})
    return op.outputs[0]


def scalar(name: str, tensor: TensorLike, collections=None, family: str | None = None) -> Tensor:
    """``tf.summary.scalar``: a ``ScalarSummary`` op whose tag is its (scoped) op name."""
    with summary_scope(name, family, values=[tensor]) as (tag, scope):
        val = _summary_op("ScalarSummary", "tags", tag, tensor, scope)
        _collect(val, collections, [GraphKeys.SUMMARIES])
    return val


def histogram(name: str, values: TensorLike, collections=None, family: str | None = None) -> Tensor:
    """``tf.summary.histogram``: a ``HistogramSummary`` op (tag = its scoped op name) whose
    kernel buckets every value of ``values`` (TF's default exponential buckets)."""
    with summary_scope(name, family, values=[values]) as (tag, scope):
        val = _summary_op("HistogramSummary", "tag", tag, values, scope)
        _collect(val, collections, [GraphKeys.SUMMARIES])
    return val


def _merge_op(inputs: Sequence, name: str | None) -> Tensor:
    """A ``MergeSummary`` op named ``name`` (default ``MergeSummary``) in the current scope."""
    tensors = [convert_to_tensor(x, dtype=dtypes.string) for x in inputs]
    if not tensors:
        raise ValueError(
            "List argument 'inputs' to 'MergeSummary' Op with length 0 shorter than "
            "minimum length 1."
        )
    op = apply_op(
        "MergeSummary",
        tensors,
        [(dtypes.string, _SCALAR)],
        name or "MergeSummary",
        {"N": len(tensors)},
    )
    return op.outputs[0]


def merge(inputs: Sequence, collections=None, name: str | None = None) -> Tensor:
    """``tf.summary.merge``: one ``Summary`` holding every value of ``inputs`` (serialized
    summaries); the op is ``Merge/MergeSummary`` (``<name>/<name>`` when named)."""
    name = clean_tag(name)
    with name_scope(name, "Merge", list(inputs)):
        val = _merge_op(inputs, name)
        _collect(val, collections, [])
    return val


def merge_all(key: str = GraphKeys.SUMMARIES, scope: str | None = None, name: str | None = None):
    """``tf.summary.merge_all``: ``merge`` of the collection ``key`` (filtered by ``scope``), or
    None when it is empty."""
    summary_ops = get_default_graph().get_collection(key, scope=scope)
    if not summary_ops:
        return None
    return merge(summary_ops, name=name)


# -- the pre-1.0 names (python/ops/logging_ops.py), kept for seed 003 ---------------------------


def scalar_summary(tags: TensorLike, values: TensorLike, collections=None, name=None) -> Tensor:
    """Legacy ``tf.scalar_summary(tags, values)`` (removed in TF 1.0; ``tf.summary.scalar``):
    the tags are given, not made from the op name; the op is ``ScalarSummary``."""
    with name_scope(name, "ScalarSummary", [tags, values]) as scope:
        val = _summary_op("ScalarSummary", "tags", tags, values, scope)
        _collect(val, collections, [GraphKeys.SUMMARIES])
    return val


def histogram_summary(tag: TensorLike, values: TensorLike, collections=None, name=None) -> Tensor:
    """Legacy ``tf.histogram_summary(tag, values)`` (removed in TF 1.0;
    ``tf.summary.histogram``): the op is ``HistogramSummary``."""
    with name_scope(name, "HistogramSummary", [tag, values]) as scope:
        val = _summary_op("HistogramSummary", "tag", tag, values, scope)
        _collect(val, collections, [GraphKeys.SUMMARIES])
    return val


def merge_summary(inputs: Sequence, collections=None, name: str | None = None) -> Tensor:
    """Legacy ``tf.merge_summary`` (removed in TF 1.0; ``tf.summary.merge``): the op is
    ``MergeSummary/MergeSummary``."""
    with name_scope(name, "MergeSummary", list(inputs)):
        val = _merge_op(inputs, name)
        _collect(val, collections, [])
    return val


def merge_all_summaries(key: str = GraphKeys.SUMMARIES) -> Tensor | None:
    """Legacy ``tf.merge_all_summaries`` (removed in TF 1.0, still called by seed 003;
    ``tf.summary.merge_all``): ``merge_summary`` of the collection, None when it is empty."""
    summary_ops = get_default_graph().get_collection(key)
    if not summary_ops:
        return None
    return merge_summary(summary_ops)
