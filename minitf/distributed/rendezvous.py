"""Per-step rendezvous of a worker and the ``_Send`` / ``_Recv`` ops that use it.

A partition's ``_Send`` puts its input into its task's rendezvous under ``(step id, key)``;
the peer's ``_Recv`` asks the producing task for that key over ``RecvTensor``, which waits
(with the RPC's deadline) until the value is there.  When a partition fails, its step is
aborted in the rendezvous: waiting ``RecvTensor`` calls return the error at once, so a failure
spreads through the cluster instead of leaving steps hanging.
"""

import threading
import time

import numpy as np

from minitf.framework import errors
from minitf.kernels import registry
from minitf.ops.op_def import register_op

SEND_OP = "_Send"
RECV_OP = "_Recv"
_STALE_SECONDS = 600.0

register_op(SEND_OP, is_stateful=True)
register_op(RECV_OP, is_stateful=True, type_attr="tensor_type")


class _StepTable:
    __slots__ = ("values", "error", "created")

    def __init__(self):
        self.values = {}
        self.error = None
        self.created = time.monotonic()


class Rendezvous:
    """The tensors ``_Send`` ops of one task produced, until their ``_Recv`` takes them.

    A step's table goes away when its last value is taken; tables of aborted steps are
    swept after a while.
    """

    def __init__(self):
        self._cond = threading.Condition()
        self._steps = {}
        self._last_sweep = time.monotonic()

    def _table(self, step_id):
        t = self._steps.get(step_id)
        if t is None:
            t = self._steps[step_id] = _StepTable()
        return t

    def send(self, step_id, key, value):
        with self._cond:
            t = self._table(step_id)
            if t.error is None:
                t.values[key] = value
                self._cond.notify_all()

    def take(self, step_id, key, timeout):
        """The value sent under ``key`` (removed); raises the step's abort error, or
        DeadlineExceededError after ``timeout`` seconds."""
        deadline = time.monotonic() + max(timeout, 0.0)
        with self._cond:
            while True:
                t = self._table(step_id)
                if t.error is not None:
                    raise t.error
                if key in t.values:
                    value = t.values.pop(key)
                    if not t.values:
                        del self._steps[step_id]
                    return value
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    if not t.values:
                        self._steps.pop(step_id, None)
                    raise errors.DeadlineExceededError(None, None, "Timed out waiting for "
                                                       "tensor %s" % key[:200])
                self._cond.wait(min(remaining, 1.0))

    def abort(self, step_id, error):
        with self._cond:
            t = self._table(step_id)
            if t.error is None:
                t.error = error
                t.values.clear()
            self._cond.notify_all()

    def finish(self, step_id):
        """Drops the tables of steps aborted (or never taken from) long ago."""
        now = time.monotonic()
        if now - self._last_sweep < 10.0:
            return
        with self._cond:
            self._last_sweep = now
            for s in [s for s, t in self._steps.items() if now - t.created > _STALE_SECONDS]:
                del self._steps[s]

    def abort_all(self, error):
        with self._cond:
            for t in self._steps.values():
                if t.error is None:
                    t.error = error
                    t.values.clear()
            self._cond.notify_all()


# -- kernels ---------------------------------------------------------------------------------
# The executor hands kernels ``ctx.feeds``; a worker passes a list subclass whose ``step``
# attribute is the running step (minitf.distributed.worker._StepState): send / recv go there.

def _send_factory(op, device):
    key = op.get_attr("key")

    def compute(ctx, ins):
        step = ctx.feeds.step
        value = ins[0] if ins else np.float32(0)
        from minitf.runtime.executor import host_value
        step.send(key, host_value(value, device))
        return ()
    return compute


def _recv_factory(op, device):
    key = op.get_attr("key")
    send_task = op.get_attr("send_task")
    src_node = op.get_attr("send_node")
    src_device = op.get_attr("send_device")
    tensor_name = op.get_attr("tensor_name")
    name = op.name
    control = bool(op.get_attr("control"))

    def compute(ctx, ins):
        step = ctx.feeds.step
        value = step.recv(send_task, key, tensor_name, src_node, src_device, name,
                          device.name, control)
        return (value,)
    return compute


registry.register(SEND_OP, _send_factory, cpu="any", gpu="any")
registry.register(RECV_OP, _recv_factory, cpu="any", gpu="any", cost="expensive")
