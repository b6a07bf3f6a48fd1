"""The conditional accumulator a ``ResourceConditionalAccumulator`` op makes: a resource of its
device, shared by name.

Book section: "Data parallelism" → "Synchronous updates" (TF's
core/kernels/conditional_accumulator_base.cc, typed_conditional_accumulator_base.h and
conditional_accumulator.h, reference part 2 §18.3).  Every replica pushes its gradient, tagged
with the step it was computed for, into one accumulator per variable on the variable's ps task:

* ``apply_grad(local_step, grad)``: a *stale* gradient (``local_step`` below the accumulator's
  global step) is silently dropped; a fresh one is added and counted;
* ``take_grad(n, callback)``: an *attempt* that waits until ``n`` fresh gradients are in, then
  receives their mean (``reduction_type="SUM"``: their sum), resets the count and increments
  the accumulator's global step, so that gradients still on their way from the old step are
  stale when they arrive.  Attempts are served in arrival order;
* ``set_global_step(step)``: the chief aligns the accumulator with the (restored) global step.

An attempt ends by calling its callback, never while the lock is held.  ``cancel(attempt)``
takes a waiting attempt out with ``CancelledError("TakeGrad operation was cancelled")``: that is
how a step's cancellation (a timeout, a closed session) ends the wait.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable

import numpy as np

from minitf.framework import errors
from minitf.lib import cpp_log_level

logger = logging.getLogger("minitf")


def partial_shape_text(shape):
    """TF's ``PartialTensorShape::DebugString``: ``<unknown>``, ``[2,?]``."""
    if shape is None:
        return "<unknown>"
    return "[%s]" % ",".join("?" if d is None else str(d) for d in shape)


def _compatible(shape, got):
    if shape is None:
        return True
    return len(shape) == len(got) and all(d is None or d == g for d, g in zip(shape, got))


class TakeAttempt:
    """One waiting ``TakeGradient``: how many gradients it needs and ``callback(mean, error)``."""

    __slots__ = ("num_required", "callback", "finished")

    def __init__(self, num_required, callback):
        self.num_required = num_required
        self.callback = callback
        self.finished = False


class ConditionalAccumulator:
    """Gradients of one shape and dtype, averaged once enough fresh ones are in."""

    type_name = "ConditionalAccumulator"

    def __init__(self, name, dtype, shape, reduction_type="MEAN"):
        self.name = name
        self.dtype = dtype  # a DType
        self.shape = None if shape is None else tuple(shape)  # None dims: unknown
        self.reduction_type = reduction_type
        self.global_step = 0
        self.counter = 0
        self._accum = None
        self._takes = deque()
        self._lock = threading.Lock()

    def __repr__(self):
        return "<%s '%s' step=%d accumulated=%d>" % (
            self.type_name,
            self.name,
            self.global_step,
            self.counter,
        )

    def num_accumulated(self) -> int:
        with self._lock:
            return self.counter

    def pending(self) -> int:
        """How many take attempts wait now."""
        with self._lock:
            return len(self._takes)

    def set_global_step(self, new_global_step: int) -> None:
        """The chief's ``SetGlobalStep``; going back logs TF's warning but is done."""
        with self._lock:
            if new_global_step < self.global_step and cpp_log_level.shown(cpp_log_level.WARNING):
                logger.warning(
                    "Attempt to set current_global_step_ to smaller value: "
                    "current_global_step_ = %d >= %d = new_global_step.",
                    self.global_step,
                    new_global_step,
                )
            self.global_step = int(new_global_step)

    def apply_grad(self, local_step: int, grad) -> bool:
        """Adds ``grad`` unless it is stale; True when it was counted.  A fresh gradient of the
        wrong shape is TF's ``InvalidArgumentError("Shape mismatch: ...")``."""
        done = []
        with self._lock:
            if local_step < self.global_step:
                return False
            grad = np.asarray(grad, dtype=self.dtype.as_numpy_dtype)
            self._check_shape(grad.shape)
            if self.counter > 0:  # the sum is the accumulator's own buffer: added in place
                np.add(self._accum, grad, out=self._accum)
            else:  # a copy: the first gradient may be read elsewhere
                self._accum = np.array(grad, copy=True)
            self.counter += 1
            self._serve(done)
        _finish(done)
        return True

    def _check_shape(self, got):
        expected = None
        if self.counter > 0 and self._accum.shape != got:
            expected = partial_shape_text(self._accum.shape)
        elif not _compatible(self.shape, got):
            expected = partial_shape_text(self.shape)
        if expected is not None:
            raise errors.InvalidArgumentError(
                None,
                None,
                "Shape mismatch: expected %s, got %s" % (expected, partial_shape_text(got)),
            )

    def take_grad(self, num_required: int, callback: Callable) -> TakeAttempt:
        """Waits for ``num_required`` fresh gradients; ``callback(mean, None)`` then."""
        if num_required <= 0:
            raise errors.InvalidArgumentError(
                None, None, "Argument num_required must be positive, but was %d" % num_required
            )
        attempt = TakeAttempt(int(num_required), callback)
        done = []
        with self._lock:
            self._takes.append(attempt)
            self._serve(done)
        _finish(done)
        return attempt

    def cancel(self, attempt: TakeAttempt) -> None:
        """Ends ``attempt`` if it still waits: ``CancelledError``; the gradients stay."""
        done = []
        with self._lock:
            if attempt.finished:
                return
            attempt.finished = True
            self._takes.remove(attempt)
            error = errors.CancelledError(None, None, "TakeGrad operation was cancelled")
            done.append((attempt, None, error))
            self._serve(done)
        _finish(done)

    def _serve(self, done):
        """Serves the head attempt while enough gradients are in (caller holds the lock)."""
        while self._takes and self.counter >= self._takes[0].num_required:
            attempt = self._takes.popleft()
            self.global_step += 1
            result = self._accum  # handed to the taker: the accumulator starts a new one
            if self.reduction_type == "MEAN":
                result = np.divide(result, self.dtype.as_numpy_dtype(self.counter), out=result)
            self.counter = 0
            self._accum = None
            attempt.finished = True
            done.append((attempt, np.asarray(result, dtype=self.dtype.as_numpy_dtype), None))


def _finish(done):
    for attempt, result, error in done:
        attempt.callback(result, error)
