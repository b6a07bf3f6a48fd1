"""``tf.train.SessionRunHook``: code a MonitoredSession calls around every ``run``.

Book section: "Managing sessions".  A hook sees the session being made (``begin``,
``after_create_session``), every step (``before_run`` may add fetches and feeds to the step,
``after_run`` sees their values and may ask the loop to stop) and the end (``end``).  The
standard hooks (stop at a step, save checkpoints and summaries, log, count steps) are in
``basic_session_run_hooks.py``.
"""

from __future__ import annotations

import collections
from typing import Any


class SessionRunHook:
    """The hook interface; every method does nothing unless overridden."""

    def begin(self) -> None:
        """Called once, before the session is made (the graph can still change)."""

    def after_create_session(self, session: Any, coord: Any) -> None:
        """Called once the session exists and its model is ready (graph finalized)."""

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs | None:
        """Called before each run: may return extra fetches/feeds for it."""
        return None

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        """Called after each run with the values of what ``before_run`` asked for."""

    def end(self, session: Any) -> None:
        """Called once at the end (not when an exception ends the session)."""


class SessionRunArgs(collections.namedtuple("SessionRunArgs", ["fetches", "feed_dict", "options"])):
    """What a hook adds to a run: fetches (any structure), feeds and run options."""

    def __new__(cls, fetches: Any, feed_dict: dict | None = None, options: Any = None):
        return super().__new__(cls, fetches, feed_dict, options)


class SessionRunContext:
    """What a hook knows of the run in progress: the caller's arguments, the session, and a
    way to ask the loop to stop."""

    def __init__(self, original_args: SessionRunArgs, session: Any) -> None:
        self._original_args = original_args
        self._session = session
        self._stop_requested = False

    @property
    def original_args(self) -> SessionRunArgs:
        return self._original_args

    @property
    def session(self) -> Any:
        return self._session

    @property
    def stop_requested(self) -> bool:
        return self._stop_requested

    def request_stop(self) -> None:
        """After this run the session's ``should_stop()`` is True."""
        self._stop_requested = True


class SessionRunValues(
    collections.namedtuple("SessionRunValues", ["results", "options", "run_metadata"])
):
    """The values of a hook's ``SessionRunArgs.fetches``, and the run's options and metadata."""
