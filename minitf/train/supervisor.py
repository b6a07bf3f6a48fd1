"""``tf.train.Supervisor``: the TF 1.0-era way to run a training cluster's sessions.

Book section: "Managing sessions" (the book's distributed examples and seed 003 use it; TF 1.15
calls it deprecated in favour of MonitoredTrainingSession).  The chief restores the latest
checkpoint of ``logdir`` or initialises the model, writes the graph and runs three services in
threads: summaries every ``save_summaries_secs``, the step rate, a checkpoint every
``save_model_secs``.  Other workers wait until the model is ready.  The graph is finalized.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Iterator
from typing import Any

from minitf.framework import dtypes, graph_io
from minitf.framework.graph import GraphKeys, get_default_graph
from minitf.ops import control_flow_ops, summary_ops, variables
from minitf.summary.writer import FileWriter
from minitf.train import basic_session_run_hooks as hooks_lib
from minitf.train import training_util
from minitf.train.coordinator import Coordinator, LooperThread
from minitf.train.session_manager import SessionManager

logger = logging.getLogger("minitf")


class Supervisor:
    """A coordinator, a session manager and the chief's standard services, for one task."""

    USE_DEFAULT = 0

    def __init__(
        self,
        graph: Any = None,
        ready_op: Any = USE_DEFAULT,
        ready_for_local_init_op: Any = USE_DEFAULT,
        is_chief: bool = True,
        init_op: Any = USE_DEFAULT,
        init_feed_dict: dict | None = None,
        local_init_op: Any = USE_DEFAULT,
        logdir: str | None = None,
        summary_op: Any = USE_DEFAULT,
        saver: Any = USE_DEFAULT,
        global_step: Any = USE_DEFAULT,
        save_summaries_secs: float = 120,
        save_model_secs: float = 600,
        recovery_wait_secs: float = 30,
        stop_grace_secs: float = 120,
        checkpoint_basename: str = "model.ckpt",
        session_manager: SessionManager | None = None,
        summary_writer: Any = USE_DEFAULT,
        init_fn: Any = None,
        local_init_run_options: Any = None,
    ) -> None:
        self._graph = graph = graph if graph is not None else get_default_graph()
        with graph.as_default():
            self._init_ops(ready_op, ready_for_local_init_op, init_op, local_init_op)
            self._saver = self._default(saver, GraphKeys.SAVERS, _default_saver)
            self._summary_op = self._default(summary_op, GraphKeys.SUMMARY_OP, _merge_all)
            self._global_step = self._default(global_step, GraphKeys.GLOBAL_STEP, _step_tensor)
        self._init_feed_dict, self._init_fn = init_feed_dict, init_fn
        self._is_chief = is_chief
        self._coord = Coordinator()
        self._recovery_wait_secs, self._stop_grace_secs = recovery_wait_secs, stop_grace_secs
        self._logdir = self._save_path = self._summary_writer = None
        self._save_summaries_secs = self._save_model_secs = None
        self._graph_added_to_summary = False
        if is_chief:
            self._logdir = logdir
            self._save_summaries_secs, self._save_model_secs = save_summaries_secs, save_model_secs
            if logdir:
                self._save_path = os.path.join(logdir, checkpoint_basename)
            if summary_writer is Supervisor.USE_DEFAULT:
                if logdir:
                    self._summary_writer = FileWriter(logdir)
            else:
                self._summary_writer = summary_writer
        self._session_manager = session_manager or SessionManager(
            local_init_op=self._local_init_op,
            ready_op=self._ready_op,
            ready_for_local_init_op=self._ready_for_local_init_op,
            graph=graph,
            recovery_wait_secs=recovery_wait_secs,
            local_init_run_options=local_init_run_options,
        )
        self._verify_setup()
        graph.finalize()

    def _default(self, value, key, make):
        """``value`` unless USE_DEFAULT; then the first item of collection ``key``, else
        ``make()`` (added to the collection when not None)."""
        if value is not Supervisor.USE_DEFAULT:
            return value
        items = self._graph.get_collection(key)
        if items:
            return items[0]
        made = make(self._graph)
        if made is not None and key != GraphKeys.GLOBAL_STEP:
            self._graph.add_to_collection(key, made)
        return made

    def _init_ops(self, ready_op, ready_for_local_init_op, init_op, local_init_op):
        self._ready_op = self._default(
            ready_op, GraphKeys.READY_OP, lambda g: variables.report_uninitialized_variables()
        )
        self._ready_for_local_init_op = self._default(
            ready_for_local_init_op, GraphKeys.READY_FOR_LOCAL_INIT_OP, lambda g: None
        )
        self._init_op = self._default(
            init_op, GraphKeys.INIT_OP, lambda g: variables.global_variables_initializer()
        )
        self._local_init_op = self._default(
            local_init_op,
            GraphKeys.LOCAL_INIT_OP,
            lambda g: control_flow_ops.group(variables.local_variables_initializer()),
        )

    def _verify_setup(self):
        if self._is_chief:
            return
        for op in self._graph.get_operations():
            if op.type in ("Variable", "VariableV2") and not op.device:
                raise ValueError(
                    "When using replicas, all Variables must have their device set: %s"
                    % op.node_def
                )

    # -- sessions ------------------------------------------------------------------------------
    def prepare_or_wait_for_session(
        self,
        master: str = "",
        config: Any = None,
        wait_for_checkpoint: bool = False,
        max_wait_secs: float = 7200,
        start_standard_services: bool = True,
    ) -> Any:
        """The chief: a restored or initialised session, the graph written, the services
        started; another worker: a session once the chief made the model ready.  Then the
        queue runners start."""
        self._coord.clear_stop()
        if self._summary_writer:
            self._summary_writer.reopen()
        if self._is_chief:
            sess = self._session_manager.prepare_session(
                master,
                init_op=self._init_op,
                saver=self._saver,
                checkpoint_dir=self._logdir,
                wait_for_checkpoint=wait_for_checkpoint,
                max_wait_secs=max_wait_secs,
                config=config,
                init_feed_dict=self._init_feed_dict,
                init_fn=self._init_fn,
            )
            self._write_graph()
            if start_standard_services:
                logger.info("Starting standard services.")
                self.start_standard_services(sess)
        else:
            sess = self._session_manager.wait_for_session(
                master, config=config, max_wait_secs=max_wait_secs
            )
        if start_standard_services:
            logger.info("Starting queue runners.")
            self.start_queue_runners(sess)
        return sess

    @contextlib.contextmanager
    def managed_session(
        self,
        master: str = "",
        config: Any = None,
        start_standard_services: bool = True,
        close_summary_writer: bool = True,
    ) -> Iterator[Any]:
        """``with sv.managed_session(target) as sess:`` a ready session; on leaving, the
        threads are stopped and the session closed.  OutOfRangeError raised in the block ends
        it cleanly; any other exception is raised again once everything stopped."""
        sess = None
        try:
            sess = self.prepare_or_wait_for_session(
                master=master, config=config, start_standard_services=start_standard_services
            )
            yield sess
        except Exception as e:  # noqa: BLE001 - kept by the coordinator, re-raised by stop()
            self.request_stop(e)
        finally:
            try:
                self.stop(close_summary_writer=close_summary_writer)
            finally:
                if sess is not None:
                    with contextlib.suppress(Exception):
                        sess.close()

    def _write_graph(self):
        if self._is_chief and self._logdir:
            graph_io.write_graph(self._graph, self._logdir, "graph.pbtxt")
        if self._summary_writer and not self._graph_added_to_summary:
            self._summary_writer.add_graph(self._graph)
            self._graph_added_to_summary = True

    # -- services ------------------------------------------------------------------------------
    def start_standard_services(self, sess: Any) -> list:
        """The chief's threads: summaries, step rate and checkpoints (those with a period)."""
        if not self._is_chief:
            raise RuntimeError(
                "Only chief supervisor can start standard services. Because only chief "
                "supervisors can write events."
            )
        if not self._logdir:
            logger.warning("Standard services need a 'logdir' passed to the SessionManager")
            return []
        if self._global_step is not None and self._summary_writer:
            step = training_util.global_step(sess, self._global_step)
            self._summary_writer.add_session_log(hooks_lib._session_log(1), step)  # START
        threads = []
        if self._save_summaries_secs and self._summary_writer:
            if self._summary_op is not None:
                threads.append(
                    LooperThread(
                        self._coord, self._save_summaries_secs, self._write_summaries, (sess,)
                    )
                )
            if self._global_step is not None:
                threads.append(_StepCounterThread(self, sess))
        if self._saver and self._save_model_secs:
            threads.append(
                LooperThread(self._coord, self._save_model_secs, self._checkpoint, (sess,))
            )
        for t in threads:
            t.start()
        return threads

    def _write_summaries(self, sess):
        step = None
        if self._global_step is not None:
            summary, step = sess.run([self._summary_op, self._global_step])
        else:
            summary = sess.run(self._summary_op)
        logger.info("Recording summary at step %s.", step)
        self._summary_writer.add_summary(summary, step)

    def _checkpoint(self, sess):
        logger.info("Saving checkpoint to path %s", self._save_path)
        self._saver.save(sess, self._save_path, global_step=self._global_step)
        if self._summary_writer and self._global_step is not None:
            step = training_util.global_step(sess, self._global_step)
            log = hooks_lib._session_log(3, self._save_path)  # CHECKPOINT
            self._summary_writer.add_session_log(log, step)

    def start_queue_runners(self, sess: Any, queue_runners: list | None = None) -> list:
        """Starts the graph's queue runners (or those given) as daemon threads."""
        if queue_runners is None:
            queue_runners = self._graph.get_collection(GraphKeys.QUEUE_RUNNERS)
        threads = []
        for runner in queue_runners:
            threads.extend(runner.create_threads(sess, coord=self._coord, daemon=True, start=True))
        return threads

    def loop(
        self, timer_interval_secs: float, target: Any, args: Any = None, kwargs: Any = None
    ) -> LooperThread:
        """Calls ``target`` every ``timer_interval_secs`` in a thread until the stop."""
        return LooperThread.loop(self._coord, timer_interval_secs, target, args, kwargs)

    def summary_computed(self, sess: Any, summary: Any, global_step: int | None = None) -> None:
        if not self._summary_writer:
            raise RuntimeError("Writing a summary requires a summary writer.")
        if global_step is None and self._global_step is not None:
            global_step = training_util.global_step(sess, self._global_step)
        self._summary_writer.add_summary(summary, global_step)

    # -- stopping ------------------------------------------------------------------------------
    def stop(
        self,
        threads: list | None = None,
        close_summary_writer: bool = True,
        ignore_live_threads: bool = False,
    ) -> None:
        """Stops the threads and waits for them (re-raising what stopped them); then writes a
        STOP session log and closes the summary writer."""
        self._coord.request_stop()
        try:
            self._coord.join(
                threads,
                stop_grace_period_secs=self._stop_grace_secs,
                ignore_live_threads=ignore_live_threads,
            )
        finally:
            if close_summary_writer and self._summary_writer:
                self._summary_writer.add_session_log(hooks_lib._session_log(2))  # STOP
                self._summary_writer.close()
                self._graph_added_to_summary = False

    def request_stop(self, ex: Any = None) -> None:
        self._coord.request_stop(ex=ex)

    def should_stop(self) -> bool:
        return self._coord.should_stop()

    def stop_on_exception(self) -> Any:
        return self._coord.stop_on_exception()

    def wait_for_stop(self) -> None:
        self._coord.wait_for_stop()

    is_chief = property(lambda self: self._is_chief)
    session_manager = property(lambda self: self._session_manager)
    coord = property(lambda self: self._coord)
    init_op = property(lambda self: self._init_op)
    init_feed_dict = property(lambda self: self._init_feed_dict)
    ready_op = property(lambda self: self._ready_op)
    ready_for_local_init_op = property(lambda self: self._ready_for_local_init_op)
    summary_writer = property(lambda self: self._summary_writer)
    summary_op = property(lambda self: self._summary_op)
    save_summaries_secs = property(lambda self: self._save_summaries_secs)
    global_step = property(lambda self: self._global_step)
    saver = property(lambda self: self._saver)
    save_model_secs = property(lambda self: self._save_model_secs)
    save_path = property(lambda self: self._save_path)


def _default_saver(graph):
    if not variables.global_variables():
        return None
    from minitf.train.saver import Saver

    return Saver()


def _merge_all(graph):
    return summary_ops.merge_all()


def _step_tensor(graph):
    """The tensor ``global_step:0`` when it is an integer, else None."""
    try:
        step = graph.get_tensor_by_name("global_step:0")
    except KeyError:
        return None
    return step if step.dtype.base_dtype in (dtypes.int32, dtypes.int64) else None


class _StepCounterThread(LooperThread):
    """Writes ``global_step/sec`` every ``save_summaries_secs``."""

    def __init__(self, sv, sess):
        super().__init__(sv.coord, sv.save_summaries_secs)
        self._sv, self._sess = sv, sess
        self._tag = "%s/sec" % sv.global_step.op.name

    def start_loop(self):
        self._last_time = time.time()
        self._last_step = training_util.global_step(self._sess, self._sv.global_step)

    def run_loop(self):
        step = training_util.global_step(self._sess, self._sv.global_step)
        added, self._last_step = step - self._last_step, step
        now = time.time()
        elapsed, self._last_time = now - self._last_time, now
        rate = added / elapsed if elapsed > 0 else float("inf")
        self._sv.summary_writer.add_summary(hooks_lib._scalar_summary(self._tag, rate), step)
        logger.info("%s: %g", self._tag, rate)
