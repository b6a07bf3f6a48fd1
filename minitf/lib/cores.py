"""How many cores this process may run on (TF's ``port::NumSchedulableCPUs``).

Book section: "Parallel Execution": the default size of the thread pools, and the cycle of a
``tf.data`` ``interleave`` left to AUTOTUNE.
"""

from __future__ import annotations

import os


def schedulable_cores() -> int:
    """The cores this process may run on: its CPU affinity (``taskset``, a container's
    cpuset), as TF's ``port::NumSchedulableCPUs`` counts them, not every core of the machine."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):  # no affinity on this platform
        return os.cpu_count() or 1
