"""``tf.train.SessionManager``: a session whose model is ready, from a checkpoint or from
scratch.

Book section: "Managing sessions" (what a Supervisor or a MonitoredTrainingSession does when it
starts: the chief restores the latest checkpoint or runs the init op; other workers wait until
the chief made the model ready).  A model is *ready* when its ``ready_op`` (the names of the
variables still uninitialised) comes back empty.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import numpy as np

from minitf.framework import errors
from minitf.framework.graph import get_default_graph
from minitf.runtime.session import Session
from minitf.train import checkpoint_management

logger = logging.getLogger("minitf")


def _ready(op, sess, msg):
    """(True, None) when ``op`` reports nothing uninitialised, else (False, why)."""
    if op is None:
        return True, None
    try:
        value = sess.run(op)
    except errors.FailedPreconditionError as e:
        if "uninitialized" not in str(e):
            logger.warning("%s : error [%s]", msg, e)
            raise
        return False, str(e)
    value = np.asarray(value)
    if value.dtype == np.int32 or value.size == 0:
        return True, None
    names = ", ".join(v.decode("utf-8") if isinstance(v, bytes) else str(v) for v in value)
    return False, "Variables not initialized: " + names


class SessionManager:
    """Creates sessions and makes their model ready (``prepare_session`` on the chief,
    ``wait_for_session`` on the other workers)."""

    def __init__(
        self,
        local_init_op: Any = None,
        ready_op: Any = None,
        ready_for_local_init_op: Any = None,
        graph: Any = None,
        recovery_wait_secs: float = 30,
        local_init_run_options: Any = None,
    ) -> None:
        self._local_init_op = local_init_op
        self._ready_op = ready_op
        self._ready_for_local_init_op = ready_for_local_init_op
        self._graph = graph if graph is not None else get_default_graph()
        self._recovery_wait_secs = recovery_wait_secs
        self._local_init_run_options = local_init_run_options
        if ready_for_local_init_op is not None and local_init_op is None:
            raise ValueError(
                "If you pass a ready_for_local_init_op you must also pass a local_init_op , "
                "ready_for_local_init_op [%s]" % ready_for_local_init_op
            )

    def _restore_checkpoint(
        self,
        master,
        saver=None,
        checkpoint_dir=None,
        checkpoint_filename_with_path=None,
        wait_for_checkpoint=False,
        max_wait_secs=7200,
        config=None,
    ):
        """A new session, and whether a checkpoint was restored into it."""
        if checkpoint_dir and checkpoint_filename_with_path:
            raise ValueError(
                "Can not provide both checkpoint_dir and checkpoint_filename_with_path."
            )
        sess = Session(master, graph=self._graph, config=config)
        if not saver or not (checkpoint_dir or checkpoint_filename_with_path):
            return sess, False
        if checkpoint_filename_with_path:
            saver.restore(sess, checkpoint_filename_with_path)
            return sess, True
        path = _wait_for_checkpoint(
            checkpoint_dir, wait_for_checkpoint, max_wait_secs, self._recovery_wait_secs
        )
        if path is None:
            return sess, False
        saver.restore(sess, path)
        if hasattr(saver, "recover_last_checkpoints"):
            state = checkpoint_management.get_checkpoint_state(checkpoint_dir)
            saver.recover_last_checkpoints(state.all_model_checkpoint_paths)
        return sess, True

    def prepare_session(
        self,
        master: str,
        init_op: Any = None,
        saver: Any = None,
        checkpoint_dir: str | None = None,
        checkpoint_filename_with_path: str | None = None,
        wait_for_checkpoint: bool = False,
        max_wait_secs: float = 7200,
        config: Any = None,
        init_feed_dict: dict | None = None,
        init_fn: Any = None,
    ) -> Session:
        """A session with the model ready: restored from the latest checkpoint when there is
        one, else initialised by ``init_op`` and ``init_fn``; then the local init op."""
        sess, restored = self._restore_checkpoint(
            master,
            saver,
            checkpoint_dir,
            checkpoint_filename_with_path,
            wait_for_checkpoint,
            max_wait_secs,
            config,
        )
        if not restored:
            if not init_op and not init_fn and not self._local_init_op:
                raise RuntimeError(
                    "Model is not initialized and no init_op or init_fn or local_init_op was given"
                )
            if init_op is not None:
                sess.run(init_op, feed_dict=init_feed_dict)
            if init_fn:
                init_fn(sess)
        local_ok, msg = self._try_run_local_init_op(sess)
        if not local_ok:
            raise RuntimeError(
                "Init operations did not make model ready for local_init.  Init op: %s, "
                "init fn: %s, error: %s" % (_name(init_op), init_fn, msg)
            )
        ready, msg = self._model_ready(sess)
        if not ready:
            raise RuntimeError(
                "Init operations did not make model ready.  Init op: %s, init fn: %s, "
                "local_init_op: %s, error: %s" % (_name(init_op), init_fn, self._local_init_op, msg)
            )
        return sess

    def recover_session(
        self,
        master: str,
        saver: Any = None,
        checkpoint_dir: str | None = None,
        checkpoint_filename_with_path: str | None = None,
        wait_for_checkpoint: bool = False,
        max_wait_secs: float = 7200,
        config: Any = None,
    ) -> tuple[Session, bool]:
        """A session restored from a checkpoint if there is one; and whether it is ready."""
        sess, restored = self._restore_checkpoint(
            master,
            saver,
            checkpoint_dir,
            checkpoint_filename_with_path,
            wait_for_checkpoint,
            max_wait_secs,
            config,
        )
        local_ok, _ = self._try_run_local_init_op(sess)
        if not restored or not local_ok:
            return sess, False
        ready, msg = self._model_ready(sess)
        if not ready:
            logger.info("Restoring model from %s did not make model ready: %s", checkpoint_dir, msg)
            return sess, False
        return sess, True

    def wait_for_session(
        self, master: str, config: Any = None, max_wait_secs: float = float("inf")
    ) -> Session:
        """A session whose model another task (the chief) made ready: tries every
        ``recovery_wait_secs`` until ``max_wait_secs`` (then DeadlineExceededError)."""
        deadline = time.monotonic() + max_wait_secs
        while True:
            sess = Session(master, graph=self._graph, config=config)
            local_ok, local_msg = self._try_run_local_init_op(sess)
            ready = msg = None
            if local_ok:
                ready, msg = self._model_ready(sess)
                if ready:
                    return sess
            sess.close()
            remaining = deadline - time.monotonic()
            if remaining < self._recovery_wait_secs:
                raise errors.DeadlineExceededError(
                    None, None, "Session was not ready after waiting %d secs." % max_wait_secs
                )
            logger.info(
                "Waiting for model to be ready.  Ready_for_local_init_op:  %s, ready: %s",
                local_msg,
                msg,
            )
            time.sleep(self._recovery_wait_secs)  # the chief's progress is polled, as TF does

    def _model_ready(self, sess):
        return _ready(self._ready_op, sess, "Model not ready")

    def _model_ready_for_local_init(self, sess):
        return _ready(self._ready_for_local_init_op, sess, "Model not ready for local init")

    def _try_run_local_init_op(self, sess):
        if self._local_init_op is None:
            return True, None
        ok, msg = self._model_ready_for_local_init(sess)
        if not ok:
            return False, msg
        sess.run(self._local_init_op, options=self._local_init_run_options)
        return True, None


def _wait_for_checkpoint(checkpoint_dir, wait, max_wait_secs, recovery_wait_secs):
    """The path of the latest checkpoint in ``checkpoint_dir`` (waiting for one to appear,
    up to ``max_wait_secs``, when ``wait``), or None."""
    deadline = time.monotonic() + max_wait_secs
    while True:
        state = checkpoint_management.get_checkpoint_state(checkpoint_dir)
        if state is not None and state.model_checkpoint_path:
            return state.model_checkpoint_path
        if not wait or time.monotonic() + recovery_wait_secs > deadline:
            return None
        logger.info("Waiting for checkpoint to be available.")
        time.sleep(recovery_wait_secs)  # a new file is polled for, as TF does


def _name(op):
    return getattr(op, "name", op)
