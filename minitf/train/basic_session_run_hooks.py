"""The standard hooks of a MonitoredSession: stop at a step, save checkpoints, save summaries,
count steps, log tensors, stop on a NaN loss.

Book section: "Managing sessions" (the chief of a cluster saves checkpoints and summaries for
everyone; ``StopAtStepHook`` ends training at a global step shared by all workers).  Each hook
reads the global step through one cached ``global_step/add`` tensor and fires on a
``SecondOrStepTimer``.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any

import numpy as np

from minitf.framework import graph_io
from minitf.framework.graph import GraphKeys, Tensor, get_default_graph
from minitf.lib.protobuf import tf_protos_pb2 as pb
from minitf.summary.writer import FileWriterCache
from minitf.train import training_util
from minitf.train.session_run_hook import SessionRunArgs, SessionRunHook

logger = logging.getLogger("minitf")

GLOBAL_STEP_READ_KEY = "global_step_read_op_cache"


def get_or_create_global_step_read(graph: Any = None) -> Tensor | None:
    """``global_step + 0`` in name scope ``global_step/`` (``global_step/add``), made once per
    graph (collection ``global_step_read_op_cache``): what hooks fetch to know the step."""
    graph = graph or get_default_graph()
    cached = graph.get_collection(GLOBAL_STEP_READ_KEY)
    if cached:
        return cached[0]
    step = training_util.get_global_step(graph)
    if step is None:
        return None
    with graph.as_default(), graph.name_scope(None), graph.name_scope(step.op.name + "/"):
        read = step + 0
    graph.add_to_collection(GLOBAL_STEP_READ_KEY, read)
    return read


def _global_step_read(hook_name):
    step = get_or_create_global_step_read()
    if step is None:
        raise RuntimeError("Global step should be created to use %s." % hook_name)
    return step


class SecondOrStepTimer:
    """Fires every ``every_secs`` seconds or every ``every_steps`` steps (exactly one)."""

    def __init__(self, every_secs: float | None = None, every_steps: int | None = None) -> None:
        if (every_secs is None) == (every_steps is None):
            raise ValueError(
                "Either every_secs or every_steps should be provided."
                if every_secs is None
                else "Can not provide both every_secs and every_steps."
            )
        self._every_secs, self._every_steps = every_secs, every_steps
        self.reset()

    def reset(self) -> None:
        self._last_time: float | None = None
        self._last_step: int | None = None

    def should_trigger_for_step(self, step: int) -> bool:
        if self._last_step is None:
            return True
        if self._last_step == step:
            return False
        if self._every_secs is not None:
            return time.time() >= self._last_time + self._every_secs
        return step >= self._last_step + self._every_steps

    def update_last_triggered_step(self, step: int) -> tuple[float | None, int | None]:
        """Records a firing at ``step``; (seconds, steps) since the previous one (None, None
        the first time)."""
        now = time.time()
        elapsed = (None, None)
        if self._last_time is not None:
            elapsed = (now - self._last_time, step - self._last_step)
        self._last_time, self._last_step = now, step
        return elapsed

    def last_triggered_step(self) -> int | None:
        return self._last_step


class StopAtStepHook(SessionRunHook):
    """Asks the session to stop once the global step reached ``last_step`` (or ``num_steps``
    past its value when the session was made)."""

    def __init__(self, num_steps: int | None = None, last_step: int | None = None) -> None:
        if num_steps is None and last_step is None:
            raise ValueError("One of num_steps or last_step must be specified.")
        if num_steps is not None and last_step is not None:
            raise ValueError("Only one of num_steps or last_step can be specified.")
        self._num_steps, self._last_step = num_steps, last_step

    def begin(self) -> None:
        self._global_step_tensor = _global_step_read("StopAtStepHook")

    def after_create_session(self, session, coord):
        if self._last_step is None:
            self._last_step = int(session.run(self._global_step_tensor)) + self._num_steps

    def before_run(self, run_context):
        return SessionRunArgs(self._global_step_tensor)

    def after_run(self, run_context, run_values):
        if int(run_values.results) + 1 >= self._last_step:
            # the value fetched is the one before the run: read it again to be sure
            if int(run_context.session.run(self._global_step_tensor)) >= self._last_step:
                run_context.request_stop()


def _writer(logdir):
    return FileWriterCache.get(logdir)


def _session_log(status, checkpoint_path=""):
    return pb.SessionLog(status=status, checkpoint_path=checkpoint_path)


def _scalar_summary(tag, value):
    return pb.Summary(value=[pb.Summary.Value(tag=tag, simple_value=float(value))])


class CheckpointSaverListener:
    """Called around each save of a ``CheckpointSaverHook``; ``after_save`` returning True
    asks training to stop."""

    def begin(self) -> None: ...

    def before_save(self, session: Any, global_step_value: int) -> None: ...

    def after_save(self, session: Any, global_step_value: int) -> bool | None: ...

    def end(self, session: Any, global_step_value: int) -> None: ...


class CheckpointSaverHook(SessionRunHook):
    """Saves ``<checkpoint_dir>/model.ckpt-<step>``: when the session is made, then every
    ``save_secs`` or ``save_steps``, and at the end."""

    def __init__(
        self,
        checkpoint_dir: str,
        save_secs: float | None = None,
        save_steps: int | None = None,
        saver: Any = None,
        checkpoint_basename: str = "model.ckpt",
        scaffold: Any = None,
        listeners: list | None = None,
    ) -> None:
        if saver is not None and scaffold is not None:
            raise ValueError("You cannot provide both saver and scaffold.")
        self._saver, self._scaffold = saver, scaffold
        self._checkpoint_dir = checkpoint_dir
        self._save_path = os.path.join(checkpoint_dir, checkpoint_basename)
        self._timer = SecondOrStepTimer(every_secs=save_secs, every_steps=save_steps)
        self._listeners = list(listeners or [])

    def begin(self) -> None:
        self._summary_writer = _writer(self._checkpoint_dir)
        self._global_step_tensor = _global_step_read("CheckpointSaverHook")
        for listener in self._listeners:
            listener.begin()

    def after_create_session(self, session, coord):
        step = int(session.run(self._global_step_tensor))
        graph = get_default_graph()
        graph_io.write_graph(graph, self._checkpoint_dir, "graph.pbtxt")
        self._summary_writer.add_graph(graph)
        self._save(session, step)
        self._timer.update_last_triggered_step(step)

    def before_run(self, run_context):
        return SessionRunArgs(self._global_step_tensor)

    def after_run(self, run_context, run_values):
        if self._timer.should_trigger_for_step(int(run_values.results) + 1):
            step = int(run_context.session.run(self._global_step_tensor))
            if self._timer.should_trigger_for_step(step):
                self._timer.update_last_triggered_step(step)
                if self._save(run_context.session, step):
                    run_context.request_stop()

    def end(self, session):
        step = int(session.run(self._global_step_tensor))
        if step != self._timer.last_triggered_step():
            self._save(session, step)
        for listener in self._listeners:
            listener.end(session, step)

    def _save(self, session, step):
        """Saves; True if a listener asked to stop."""
        logger.info("Saving checkpoints for %d into %s.", step, self._save_path)
        for listener in self._listeners:
            listener.before_save(session, step)
        self._get_saver().save(session, self._save_path, global_step=step)
        self._summary_writer.add_session_log(_session_log(3, self._save_path), step)  # CHECKPOINT
        stop = False
        for listener in self._listeners:
            stop = bool(listener.after_save(session, step)) or stop
        return stop

    def _get_saver(self):
        if self._saver is not None:
            return self._saver
        if self._scaffold is not None:
            return self._scaffold.saver
        savers = get_default_graph().get_collection(GraphKeys.SAVERS)
        if len(savers) != 1:
            raise RuntimeError(
                "More than one item in collection {}. Please indicate which one to use by "
                "passing it to the constructor.".format(GraphKeys.SAVERS)
                if savers
                else "No items in collection {}. Please add a saver to the collection or "
                "provide a saver or scaffold.".format(GraphKeys.SAVERS)
            )
        self._saver = savers[0]
        return self._saver


class StepCounterHook(SessionRunHook):
    """Writes ``global_step/sec`` summaries (and logs them) every N steps or seconds."""

    def __init__(
        self,
        every_n_steps: int | None = 100,
        every_n_secs: float | None = None,
        output_dir: str | None = None,
        summary_writer: Any = None,
    ) -> None:
        if (every_n_steps is None) == (every_n_secs is None):
            raise ValueError("exactly one of every_n_steps and every_n_secs should be provided.")
        self._timer = SecondOrStepTimer(every_steps=every_n_steps, every_secs=every_n_secs)
        self._summary_writer, self._output_dir = summary_writer, output_dir

    def begin(self) -> None:
        if self._summary_writer is None and self._output_dir:
            self._summary_writer = _writer(self._output_dir)
        self._global_step_tensor = _global_step_read("StepCounterHook")
        self._summary_tag = self._global_step_tensor.op.name.split("/")[0] + "/sec"

    def before_run(self, run_context):
        return SessionRunArgs(self._global_step_tensor)

    def after_run(self, run_context, run_values):
        if not self._timer.should_trigger_for_step(int(run_values.results) + 1):
            return
        step = int(run_context.session.run(self._global_step_tensor))
        if self._timer.should_trigger_for_step(step):
            secs, steps = self._timer.update_last_triggered_step(step)
            if secs is not None and secs > 0:
                rate = steps / secs
                if self._summary_writer is not None:
                    self._summary_writer.add_summary(_scalar_summary(self._summary_tag, rate), step)
                logger.info("%s: %g", self._summary_tag, rate)


class SummarySaverHook(SessionRunHook):
    """Runs the summary op every N steps or seconds and writes what it returns; a START
    session log on the first run."""

    def __init__(
        self,
        save_steps: int | None = None,
        save_secs: float | None = None,
        output_dir: str | None = None,
        summary_writer: Any = None,
        scaffold: Any = None,
        summary_op: Any = None,
    ) -> None:
        if (scaffold is None) == (summary_op is None):
            raise ValueError("Exactly one of scaffold or summary_op must be provided.")
        self._summary_op, self._scaffold = summary_op, scaffold
        self._summary_writer, self._output_dir = summary_writer, output_dir
        self._timer = SecondOrStepTimer(every_secs=save_secs, every_steps=save_steps)

    def begin(self) -> None:
        if self._summary_writer is None and self._output_dir:
            self._summary_writer = _writer(self._output_dir)
        self._next_step = None
        self._global_step_tensor = _global_step_read("SummarySaverHook")

    def _summaries(self):
        if self._summary_op is not None:
            op = self._summary_op
            return list(op) if isinstance(op, (list, tuple)) else [op]
        op = self._scaffold.summary_op
        return [] if op is None else [op]

    def before_run(self, run_context):
        self._request = self._next_step is None or self._timer.should_trigger_for_step(
            self._next_step
        )
        fetches = {"global_step": self._global_step_tensor}
        if self._request and self._summaries():
            fetches["summary"] = self._summaries()
        return SessionRunArgs(fetches)

    def after_run(self, run_context, run_values):
        if not self._summary_writer:
            return
        step = int(run_values.results["global_step"]) + 1
        if self._next_step is None or self._request:
            step = int(run_context.session.run(self._global_step_tensor))
        if self._next_step is None:
            self._summary_writer.add_session_log(_session_log(1), step)  # START
        if self._request:
            self._timer.update_last_triggered_step(step)
            for summary in run_values.results.get("summary", ()):
                self._summary_writer.add_summary(summary, step)
        self._next_step = step + 1

    def end(self, session=None):
        if self._summary_writer:
            self._summary_writer.flush()


class LoggingTensorHook(SessionRunHook):
    """Logs ``tag = value`` of the given tensors every N runs or seconds (and/or at the end)."""

    def __init__(
        self,
        tensors: Any,
        every_n_iter: int | None = None,
        every_n_secs: float | None = None,
        at_end: bool = False,
        formatter: Any = None,
    ) -> None:
        only_log_at_end = at_end and every_n_iter is None and every_n_secs is None
        if not only_log_at_end and (every_n_iter is None) == (every_n_secs is None):
            raise ValueError(
                "either at_end and/or exactly one of every_n_iter and every_n_secs "
                "must be provided."
            )
        if every_n_iter is not None and every_n_iter <= 0:
            raise ValueError("invalid every_n_iter=%s." % every_n_iter)
        if not isinstance(tensors, dict):
            tensors = {getattr(t, "name", t): t for t in tensors}
        self._tag_order = sorted(tensors)
        self._tensors = tensors
        self._formatter, self._at_end = formatter, at_end
        self._timer = None
        if not only_log_at_end:
            self._timer = SecondOrStepTimer(every_secs=every_n_secs, every_steps=every_n_iter)

    def begin(self) -> None:
        if self._timer is not None:
            self._timer.reset()
        self._iter_count = 0
        graph = get_default_graph()
        self._current = {
            tag: graph.as_graph_element(t) if isinstance(t, str) else t
            for tag, t in self._tensors.items()
        }

    def before_run(self, run_context):
        self._should_trigger = self._timer is not None and self._timer.should_trigger_for_step(
            self._iter_count
        )
        return SessionRunArgs(self._current) if self._should_trigger else None

    def _log(self, values):
        if self._formatter:
            logger.info(self._formatter(values))
        else:
            logger.info(", ".join("%s = %s" % (tag, values[tag]) for tag in self._tag_order))

    def after_run(self, run_context, run_values):
        if self._should_trigger:
            self._timer.update_last_triggered_step(self._iter_count)
            self._log(run_values.results)
        self._iter_count += 1

    def end(self, session):
        if self._at_end:
            self._log(session.run(self._current))


class NanLossDuringTrainingError(RuntimeError):
    def __str__(self) -> str:
        return "NaN loss during training."


class NanTensorHook(SessionRunHook):
    """Fails (or just stops, ``fail_on_nan_loss=False``) when the loss becomes NaN."""

    def __init__(self, loss_tensor: Any, fail_on_nan_loss: bool = True) -> None:
        self._loss_tensor, self._fail_on_nan_loss = loss_tensor, fail_on_nan_loss

    def before_run(self, run_context):
        return SessionRunArgs(self._loss_tensor)

    def after_run(self, run_context, run_values):
        if np.isnan(run_values.results):
            if self._fail_on_nan_loss:
                logger.error("Model diverged with loss = NaN.")
                raise NanLossDuringTrainingError
            logger.warning("Model diverged with loss = NaN.")
            run_context.request_stop()
