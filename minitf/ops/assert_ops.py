"""``tf.Assert``: an op that fails the step, printing some data, when a condition is false.

Book section: "Reading the Training Data Directly from the Graph" (a string input producer
asserts it was given files).  As TF 1.15 builds it: an ``Assert`` op when all the data is
string or int32 (kept on the host); otherwise the ``Assert`` sits in the false branch of a
``tf.cond`` on the condition (``AssertGuard``), so that data on a card is only copied to the
host when the assertion fails.
"""

from __future__ import annotations

from typing import Any

from minitf.framework import dtypes
from minitf.framework.graph import Operation, convert_to_tensor, name_scope
from minitf.ops.cond import cond
from minitf.ops.control_flow_ops import no_op
from minitf.ops.op_def import apply_op, register_op

register_op("Assert", is_stateful=True)

_HOST_TYPES = (dtypes.string, dtypes.int32)


def _assert_op(condition, data, summarize, name="Assert") -> Operation:
    with name_scope(None, name) as scope:
        inputs = [condition] + [
            convert_to_tensor(x, name="data_%d" % i) for i, x in enumerate(data)
        ]
        attrs = {"T": [x.dtype.base_dtype for x in inputs[1:]], "summarize": summarize or 3}
        return apply_op("Assert", inputs, [], scope, attrs)


def Assert(  # noqa: N802 - TF's name
    condition: Any, data: list, summarize: int | None = None, name: str | None = None
) -> Operation:
    """An op that fails its run with ``InvalidArgumentError("assertion failed: [<data>]
    ...")`` (the first ``summarize`` elements of each, 3 by default) when ``condition`` is
    false."""
    with name_scope(name, "Assert", [condition] + list(data)):
        xs = [convert_to_tensor(x) for x in data]  # TF converts the data here...
        if all(x.dtype.base_dtype in _HOST_TYPES for x in xs):
            condition = convert_to_tensor(condition, dtype=dtypes.bool, name="Condition")
            return _assert_op(condition, data, summarize)  # ...and again in the op's scope
        condition = convert_to_tensor(condition, name="Condition")
        guarded = cond(  # (the data converted once more, inside the branch, as TF does)
            condition,
            no_op,
            lambda: _assert_op(condition, data, summarize),
            name="AssertGuard",
        )
        return guarded.op
