"""Python's cycle collector paused while a placement or an execution plan is built.

Book section: "Placing Operations on Devices" (what a session does at its first run).

Every object such a build makes lives as long as its result, and collections that scan them
over and over again cost 2-4x the build of a 10,000-node graph.
"""

import contextlib
import gc


@contextlib.contextmanager
def gc_paused():
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
