"""``tf.case``: the first of several (predicate, function) pairs whose predicate holds, as
nested ``tf.cond``s.

Book section: none directly (``ops/cond.py``).  As TF 1.15 builds it: in scope ``case``,
``cond(p0, f0, lambda: cond(p1, f1, ... default))``; without a default, the last pair's function
is the default, behind ``Assert``s that no other predicate holds and that its own does; with
``exclusive``, an ``Assert`` that at most one predicate holds runs first.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

from minitf.framework import dtypes
from minitf.framework.graph import Tensor, get_default_graph, name_scope
from minitf.ops import array_ops, math_ops
from minitf.ops.assert_ops import Assert
from minitf.ops.cond import cond

logger = logging.getLogger("minitf")


def _pairs(pred_fn_pairs: Any, exclusive: bool, name: str) -> tuple[tuple, tuple]:
    """The predicates and functions, checked as TF checks them (a dict is taken in the order
    of its predicates' names)."""
    if not isinstance(name, str):
        raise TypeError("name must be a string, got %s" % name)
    if not isinstance(pred_fn_pairs, (list, tuple, dict)):
        raise TypeError("fns must be a list, tuple, or dict")
    if isinstance(pred_fn_pairs, dict):
        pred_fn_pairs = sorted(pred_fn_pairs.items(), key=lambda item: item[0].name)
        if not exclusive:
            logger.warning(
                "%s: An unordered dictionary of predicate/fn pairs was provided, but "
                "exclusive=False. The order of conditional tests is deterministic but not "
                "guaranteed.",
                name,
            )
    for pair in pred_fn_pairs:
        if not isinstance(pair, tuple) or len(pair) != 2:
            raise TypeError("Each entry in pred_fn_pairs must be a 2-tuple")
        pred, fn = pair
        if not isinstance(pred, Tensor):
            raise TypeError("pred must be a Tensor, got: %s" % pred)
        if pred.dtype.base_dtype != dtypes.bool:
            raise TypeError("pred must be Tensor of type bool: %s" % pred.name)
        if not callable(fn):
            raise TypeError("fn for pred %s must be callable." % pred.name)
    if not pred_fn_pairs:
        return (), ()
    predicates, actions = zip(*pred_fn_pairs)
    return predicates, actions


def _assert_at_most_n_true(predicates, n: int, msg: str):
    preds_c = array_ops.stack(list(predicates), name="preds_c")
    num_true = math_ops.reduce_sum(math_ops.cast(preds_c, dtypes.int32), name="num_true_conds")
    condition = math_ops.less_equal(num_true, array_ops.constant(n, name="n_true_conds"))
    names = ", ".join(getattr(p, "name", "?") for p in predicates)
    text = "%s: more than %d conditions (%s) evaluated as True:" % (msg, n, names)
    return Assert(condition, data=[text, preds_c], summarize=len(predicates))


def _default_from_last(predicates, actions):
    """Without a default, the last pair's function becomes it, asserting that no other
    predicate holds and that its own does."""
    k = len(predicates) - 1
    predicate, action = predicates[k], actions[k]
    others, other_actions = predicates[:k], actions[:k]

    def default_action():
        others_msg = (
            "Implementation error: selected default action #%d was called, but some of other "
            "predicates are True: " % k
        )
        default_msg = (
            "Input error: None of conditions evaluated as True:",
            array_ops.stack(list(predicates), name="preds_c"),
        )
        checks = [
            _assert_at_most_n_true(others, n=0, msg=others_msg),  # (of none: an empty Const)
            Assert(predicate, data=list(default_msg)),
        ]
        with get_default_graph().control_dependencies(checks):
            return action()

    return default_action, others, other_actions


def case(
    pred_fn_pairs: Any,
    default: Callable[[], Any] | None = None,
    exclusive: bool = False,
    strict: bool = False,
    name: str = "case",
) -> Any:
    """The result of the function of the first pair whose predicate holds (all of them, with
    ``exclusive``, checked to hold at most once), else of ``default``."""
    predicates, actions = _pairs(pred_fn_pairs, exclusive, name)
    with name_scope(name, "case", list(predicates)):
        if default is None:
            if not predicates:
                raise ValueError("pred_fn_pairs must not be empty when there is no default")
            default, predicates, actions = _default_from_last(predicates, actions)
        fn = default
        for predicate, action in reversed(list(zip(predicates, actions))):
            fn = functools.partial(cond, predicate, true_fn=action, false_fn=fn, strict=strict)
        if exclusive and predicates:
            check = _assert_at_most_n_true(predicates, n=1, msg="Input error: exclusive=True")
            with get_default_graph().control_dependencies([check]):
                return fn()
        return fn()
