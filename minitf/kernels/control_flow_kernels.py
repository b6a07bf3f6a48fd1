"""Kernels of ``Switch``, ``RefSwitch`` and ``Merge``: the two ops a ``tf.cond`` is made of.

Book section: none directly (``ops/cond.py`` builds them).  ``Switch(data, pred)`` hands
``data`` to output 1 when ``pred`` is true, to output 0 otherwise, and ``DEAD`` to the other
output (``framework/dead_tensor.py``).  ``Merge`` hands on its first live input and that
input's index.  Neither computes anything, so every device has them (TF keeps the predicate of
a GPU ``Switch`` in host memory: it is read on the host here too).
"""

import numpy as np

from minitf.framework.dead_tensor import DEAD
from minitf.kernels.registry import register


def _switch(op, device):
    to_host = device.backend.to_host

    def compute(ctx, ins):
        data, pred = ins
        return (DEAD, data) if bool(to_host(pred)) else (data, DEAD)

    return compute


def _merge(op, device):
    def compute(ctx, ins):
        for i, v in enumerate(ins):
            if v is not DEAD:
                return (v, np.int32(i))  # value_index: host memory on every device
        return (DEAD, DEAD)

    return compute


register("Switch", _switch, cpu="any", gpu="any", cost="inline")
register("RefSwitch", _switch, cpu="any", gpu="any", cost="inline")
register("Merge", _merge, cpu="any", gpu="any", cost="inline")
