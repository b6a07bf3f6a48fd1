"""TF's deprecation warnings: logged once per deprecated thing, naming the learner's line.

Book section: none; TF 1.15 logs these for the chapter's queue readers, ``SyncReplicasOptimizer``
and ``tf.to_float`` & co., and a learner comparing outputs sees them (``WARNING:tensorflow:From
x.py:3: to_float (from tensorflow.python.ops.math_ops) is deprecated and will be removed in a
future version.``).
"""

from __future__ import annotations

import logging
import os
import sys

logger = logging.getLogger("minitf")

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: what has warned already (TF warns once per function)
warned: set[str] = set()


def call_location() -> str:
    """``file:line`` of the first frame outside minitf: the user's code that called it."""
    frame = sys._getframe(1)
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE):
        frame = frame.f_back
    if frame is None:
        return "<unknown>"
    return "%s:%d" % (frame.f_code.co_filename, frame.f_lineno)


def warn(name: str, module: str, instructions: str) -> None:
    """Logs TF's warning that ``name`` (from TF's ``module``) is deprecated, once per
    ``(module, name)``, with the ``instructions`` TF gives."""
    key = module + ":" + name
    if key in warned:
        return
    warned.add(key)
    logger.warning(
        "From %s: %s (from %s) is deprecated and will be removed in a future version.\n"
        "Instructions for updating:\n%s",
        call_location(),
        name,
        module,
        instructions,
    )
