"""``TF_CPP_MIN_LOG_LEVEL``: which of TF's C++ log lines are shown.

Book section: "Installation" (the logs a GPU build prints at start-up); the blog of seed 003
sets it in its first cell.  TF's C++ runtime logs with a severity (INFO 0, WARNING 1, ERROR 2,
FATAL 3) and shows a line only when its severity is at least the level read from the
environment variable: 0 (the default) shows all, 1 hides INFO, 2 hides WARNING too, 3 hides
ERROR too; larger values hide everything, as in TF.  A value that is not an integer counts as 0
(TF parses it with ``strtol``-like leniency and falls back to 0).  The variable is read at each
log call, so setting it in a notebook takes effect at once (TF reads it once per process).

It governs only what TF writes through its C++ logger: in minitf the ``Created TensorFlow
device`` lines (INFO) and C++ warnings such as the accumulator's stale-step one.  The
``log_device_placement`` lines are ``printf``-ed to stdout by TF, so no level hides them; Python
``tf.logging`` messages have their own verbosity.
"""

from __future__ import annotations

import os

INFO = 0
WARNING = 1
ERROR = 2
FATAL = 3


def min_log_level() -> int:
    """The level ``TF_CPP_MIN_LOG_LEVEL`` asks for (0 when unset or not an integer)."""
    raw = os.environ.get("TF_CPP_MIN_LOG_LEVEL", "").strip()
    try:
        return max(0, int(raw))
    except ValueError:
        return 0


def shown(severity: int) -> bool:
    """Whether a C++ log line of ``severity`` (INFO, WARNING, ERROR, FATAL) is shown now."""
    return severity >= min_log_level()
