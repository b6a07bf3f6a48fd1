"""``tf.train.MonitoredTrainingSession`` and what it is made of: ``Scaffold``, the session
creators, ``MonitoredSession`` and ``SingularMonitoredSession``.

Book section: "Managing sessions" (TF 1.x's recommended way to run distributed training: the
chief initialises or restores the model and saves checkpoints and summaries through hooks; the
other workers wait for it; a session lost with its parameter server is made again from the
last checkpoint).  One ``run`` of a monitored session: every hook's ``before_run`` adds fetches
and feeds, the session runs them all, every hook's ``after_run`` sees its share.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from minitf.framework import errors
from minitf.framework.graph import GraphKeys, get_default_graph
from minitf.ops import control_flow_ops, summary_ops, variables
from minitf.train import basic_session_run_hooks as hooks_lib
from minitf.train.coordinator import Coordinator
from minitf.train.session_manager import SessionManager
from minitf.train.session_run_hook import SessionRunArgs, SessionRunContext, SessionRunValues

logger = logging.getLogger("minitf")

USE_DEFAULT = object()


class Scaffold:
    """The ops that make a model ready and save it; each left None is found in its graph
    collection or built by ``finalize()``, which then finalizes the graph."""

    def __init__(
        self,
        init_op: Any = None,
        init_feed_dict: dict | None = None,
        init_fn: Any = None,
        ready_op: Any = None,
        ready_for_local_init_op: Any = None,
        local_init_op: Any = None,
        summary_op: Any = None,
        saver: Any = None,
        copy_from_scaffold: Scaffold | None = None,
    ) -> None:
        if copy_from_scaffold is not None:
            if not isinstance(copy_from_scaffold, Scaffold):
                raise TypeError("copy_from_scaffold is not a Scaffold instance.")
            c = copy_from_scaffold
            init_op = init_op or c.init_op
            init_feed_dict = init_feed_dict or c.init_feed_dict
            init_fn = init_fn or c._user_init_fn
            ready_op = ready_op or c.ready_op
            ready_for_local_init_op = ready_for_local_init_op or c.ready_for_local_init_op
            local_init_op = local_init_op or c.local_init_op
            summary_op = summary_op or c.summary_op
            saver = saver or c.saver
        self._user_init_fn = init_fn
        self._init_fn = (lambda sess: init_fn(self, sess)) if init_fn else None
        self._init_op, self._init_feed_dict = init_op, init_feed_dict
        self._ready_op, self._ready_for_local_init_op = ready_op, ready_for_local_init_op
        self._local_init_op, self._summary_op, self._saver = local_init_op, summary_op, saver

    def finalize(self) -> Scaffold:
        """Fills in every missing op, then finalizes the graph."""
        graph = get_default_graph()
        if graph.finalized:
            return self
        if self._init_op is None:
            self._init_op = self.get_or_default(
                "init_op",
                GraphKeys.INIT_OP,
                lambda: control_flow_ops.group(variables.global_variables_initializer()),
            )
        if self._ready_op is None:
            self._ready_op = self.get_or_default(
                "ready_op", GraphKeys.READY_OP, variables.report_uninitialized_variables
            )
        if self._ready_for_local_init_op is None:
            self._ready_for_local_init_op = self.get_or_default(
                "ready_for_local_init_op",
                GraphKeys.READY_FOR_LOCAL_INIT_OP,
                lambda: variables.report_uninitialized_variables(variables.global_variables()),
            )
        if self._local_init_op is None:
            self._local_init_op = self.get_or_default(
                "local_init_op", GraphKeys.LOCAL_INIT_OP, self.default_local_init_op
            )
        if self._summary_op is None:
            self._summary_op = self.get_or_default(
                "summary_op", GraphKeys.SUMMARY_OP, summary_ops.merge_all
            )
        if self._saver is None:
            self._saver = _get_saver_or_default()
        if hasattr(self._saver, "build"):
            self._saver.build()
        graph.finalize()
        logger.info("Graph was finalized.")
        return self

    init_op = property(lambda self: self._init_op)
    init_fn = property(lambda self: self._init_fn)
    init_feed_dict = property(lambda self: self._init_feed_dict)
    ready_op = property(lambda self: self._ready_op)
    ready_for_local_init_op = property(lambda self: self._ready_for_local_init_op)
    local_init_op = property(lambda self: self._local_init_op)
    summary_op = property(lambda self: self._summary_op)
    saver = property(lambda self: self._saver)

    @staticmethod
    def get_or_default(arg_name: str, collection_key: str, default_constructor: Any) -> Any:
        """The one op of ``collection_key``, else a new one (added to the collection)."""
        graph = get_default_graph()
        elements = graph.get_collection(collection_key)
        if elements:
            if len(elements) > 1:
                raise RuntimeError(
                    'More than one item in the collection "%s". Please indicate which one '
                    "to use by passing it to the tf.Scaffold constructor as:  "
                    "tf.Scaffold(%s=item to use)" % (collection_key, arg_name)
                )
            return elements[0]
        op = default_constructor()
        if op is not None:
            graph.add_to_collection(collection_key, op)
        return op

    @staticmethod
    def default_local_init_op() -> Any:
        """Initialises the local variables (epoch counters and the like)."""
        return control_flow_ops.group(variables.local_variables_initializer())


def _get_saver_or_default():
    """The graph's one Saver (collection ``savers``), else a new sharded one."""
    from minitf.train.saver import Saver

    graph = get_default_graph()
    savers = graph.get_collection(GraphKeys.SAVERS)
    if savers:
        if len(savers) > 1:
            raise RuntimeError(
                "More than one item in collection {}. Please indicate which one to use by "
                "passing it to the constructor.".format(GraphKeys.SAVERS)
            )
        return savers[0]
    saver = Saver(sharded=True, allow_empty=True)
    graph.add_to_collection(GraphKeys.SAVERS, saver)
    return saver


def _session_manager(scaffold):
    """The SessionManager of a (finalized) scaffold's readiness and local-init ops."""
    return SessionManager(
        local_init_op=scaffold.local_init_op,
        ready_op=scaffold.ready_op,
        ready_for_local_init_op=scaffold.ready_for_local_init_op,
        graph=get_default_graph(),
    )


class SessionCreator:
    """Makes a ``tf.Session`` whose model is ready."""

    def create_session(self) -> Any:
        raise NotImplementedError("create_session is what a SessionCreator subclass provides")


class ChiefSessionCreator(SessionCreator):
    """The chief's: restores the latest checkpoint of ``checkpoint_dir`` or initialises."""

    def __init__(
        self,
        scaffold: Scaffold | None = None,
        master: str = "",
        config: Any = None,
        checkpoint_dir: str | None = None,
        checkpoint_filename_with_path: str | None = None,
    ) -> None:
        self._scaffold = scaffold or Scaffold()
        self._master, self._config = master, config
        self._checkpoint_dir = checkpoint_dir
        self._checkpoint_filename_with_path = checkpoint_filename_with_path
        self._session_manager = None

    def create_session(self) -> Any:
        self._scaffold.finalize()
        if self._session_manager is None:
            self._session_manager = _session_manager(self._scaffold)
        return self._session_manager.prepare_session(
            self._master,
            saver=self._scaffold.saver,
            checkpoint_dir=self._checkpoint_dir,
            checkpoint_filename_with_path=self._checkpoint_filename_with_path,
            config=self._config,
            init_op=self._scaffold.init_op,
            init_feed_dict=self._scaffold.init_feed_dict,
            init_fn=self._scaffold.init_fn,
        )


class WorkerSessionCreator(SessionCreator):
    """A non-chief worker's: waits until the chief made the model ready."""

    def __init__(
        self,
        scaffold: Scaffold | None = None,
        master: str = "",
        config: Any = None,
        max_wait_secs: float = 30 * 60,
    ) -> None:
        self._scaffold = scaffold or Scaffold()
        self._master, self._config, self._max_wait_secs = master, config, max_wait_secs
        self._session_manager = None

    def create_session(self) -> Any:
        self._scaffold.finalize()
        if self._session_manager is None:
            self._session_manager = _session_manager(self._scaffold)
        return self._session_manager.wait_for_session(
            self._master, config=self._config, max_wait_secs=self._max_wait_secs
        )


def _merge_feeds(user_feeds, hook_feeds):
    """The user's feeds plus every hook's; a tensor fed twice is TF's RuntimeError."""
    merged = dict(user_feeds or {})
    seen: dict = {}
    for feeds in hook_feeds:
        both = [k for k in feeds if k in seen]
        if both:
            raise RuntimeError("Same tensor is fed by two hooks. Conflict(s): %s" % both)
        seen.update(feeds)
    clash = [k for k in seen if k in merged]
    if clash:
        raise RuntimeError(
            "Same tensor is fed by a SessionRunHook and user. Conflict(s): %s" % clash
        )
    merged.update(seen)
    return merged


#: (first, longest) seconds between attempts to make a session again while its task is lost.
#: TF's client gets the same pacing from its RPC layer: a master call waits for the channel to
#: be ready and is retried with an exponential backoff (``GrpcRemoteMaster``), where minitf's
#: calls fail at once.
RETRY_WAIT_SECS = (0.05, 2.0)


class _MonitoredSession:
    """A session run through hooks, stopped through a coordinator, and (when
    ``should_recover``) made again when a task it needs was lost."""

    def __init__(self, session_creator, hooks, should_recover, stop_grace_period_secs=120):
        self._graph = get_default_graph()
        self._graph_was_finalized = self._graph.finalized
        self._hooks = list(hooks or [])
        for hook in self._hooks:
            hook.begin()
        self._creator = session_creator or ChiefSessionCreator()
        self._should_recover = should_recover
        self._stop_grace_period_secs = stop_grace_period_secs
        self._stop_requested = False
        self._sess = self._coord = None
        self._create()

    def _create(self):
        wait = RETRY_WAIT_SECS[0]
        while True:
            try:
                self._sess = self._creator.create_session()
                break
            except (errors.AbortedError, errors.UnavailableError) as e:
                if not self._should_recover:
                    raise
                logger.info("An error was raised while a session was being created: %s", e)
                # a lost task takes a while to come back: trying again at once would spin (a
                # refused connection fails in a millisecond) and slow its restart down
                time.sleep(wait)
                wait = min(2 * wait, RETRY_WAIT_SECS[1])
        self._coord = Coordinator(clean_stop_exception_types=[])
        for runner in self._graph.get_collection(GraphKeys.QUEUE_RUNNERS):
            runner.create_threads(self._sess, coord=self._coord, daemon=True, start=True)
        for hook in self._hooks:
            hook.after_create_session(self._sess, self._coord)

    @property
    def graph(self):
        return self._graph

    def run(
        self,
        fetches: Any,
        feed_dict: dict | None = None,
        options: Any = None,
        run_metadata: Any = None,
    ) -> Any:
        """Runs ``fetches`` with every hook's additions; returns the caller's values."""
        if self._sess is None:
            raise RuntimeError("Session is already closed.")
        if self.should_stop():
            raise RuntimeError("Run called even after should_stop requested.")
        while True:
            try:
                return self._hooked_run(fetches, feed_dict, options, run_metadata)
            except (errors.AbortedError, errors.UnavailableError) as e:
                if not self._should_recover:
                    raise
                logger.info(
                    "An error was raised. This may be due to a preemption in a connected "
                    "worker or parameter server. The current session will be closed and a new "
                    "session will be created. Error: %s",
                    e,
                )
                self._close_quietly()
                self._create()

    def _hooked_run(self, fetches, feed_dict, options, run_metadata):
        context = SessionRunContext(SessionRunArgs(fetches, feed_dict, options), self._sess)
        extra = {hook: hook.before_run(context) for hook in self._hooks}
        extra = {hook: args for hook, args in extra.items() if args is not None}
        keys = {hook: "hook_%d" % i for i, hook in enumerate(extra)}
        all_fetches = {"caller": fetches}
        for hook, args in extra.items():
            all_fetches[keys[hook]] = args.fetches
        feeds = _merge_feeds(feed_dict, [a.feed_dict for a in extra.values() if a.feed_dict])
        hook_options = [a.options for a in extra.values() if a.options is not None]
        options = options if options is not None or not hook_options else hook_options[0]
        outputs = self._sess.run(
            all_fetches, feed_dict=feeds, options=options, run_metadata=run_metadata
        )
        for hook in self._hooks:
            results = outputs[keys[hook]] if hook in keys else None
            hook.after_run(context, SessionRunValues(results, options, run_metadata))
        self._stop_requested = self._stop_requested or context.stop_requested
        return outputs["caller"]

    def should_stop(self) -> bool:
        if self._stop_requested:
            return True
        if self._coord is not None and self._coord.should_stop():
            if not self._should_recover:  # a singular session says why at once
                self._coord.raise_requested_exception()
            return True
        return False

    def _close_quietly(self):
        try:
            self._coord.request_stop()
            self._coord.join(
                stop_grace_period_secs=self._stop_grace_period_secs, ignore_live_threads=True
            )
        except Exception as e:  # noqa: BLE001 - the session is being replaced anyway
            logger.info("Error while closing the lost session: %s", e)
        finally:
            try:
                self._sess.close()
            except Exception as e:  # noqa: BLE001
                logger.info("Error while closing the lost session: %s", e)

    def close(self) -> None:
        self._close_internal(None)

    def _close_internal(self, exception_type):
        if self._sess is None:
            raise RuntimeError("Session is already closed.")
        try:
            if not exception_type:
                for hook in self._hooks:
                    hook.end(self._sess)
        finally:
            try:
                self._coord.request_stop()
                self._coord.join(
                    stop_grace_period_secs=self._stop_grace_period_secs, ignore_live_threads=True
                )
            finally:
                try:
                    self._sess.close()
                finally:
                    self._sess = None
                    if not self._graph_was_finalized:
                        self._graph._unsafe_unfinalize()

    def __enter__(self):
        return self

    def __exit__(self, exception_type, exception_value, traceback):
        if exception_type in (errors.OutOfRangeError, StopIteration):
            exception_type = None
        self._close_internal(exception_type)
        return exception_type is None


class MonitoredSession(_MonitoredSession):
    """A session for training: hooks around every run, and a session lost with a parameter
    server or worker (AbortedError, UnavailableError) made again and the run retried."""

    def __init__(
        self,
        session_creator: SessionCreator | None = None,
        hooks: list | None = None,
        stop_grace_period_secs: float = 120,
    ) -> None:
        super().__init__(session_creator, hooks, True, stop_grace_period_secs)


class SingularMonitoredSession(_MonitoredSession):
    """A chief's monitored session without recovery; ``raw_session()`` is its tf.Session."""

    def __init__(
        self,
        hooks: list | None = None,
        scaffold: Scaffold | None = None,
        master: str = "",
        config: Any = None,
        checkpoint_dir: str | None = None,
        stop_grace_period_secs: float = 120,
        checkpoint_filename_with_path: str | None = None,
    ) -> None:
        creator = ChiefSessionCreator(
            scaffold=scaffold,
            master=master,
            config=config,
            checkpoint_dir=checkpoint_dir,
            checkpoint_filename_with_path=checkpoint_filename_with_path,
        )
        super().__init__(creator, hooks, False, stop_grace_period_secs)

    def raw_session(self) -> Any:
        return self._sess


def _resolve(steps, secs, default_steps, default_secs):
    """TF's reading of a (steps, secs) pair where either may be USE_DEFAULT."""
    if steps is USE_DEFAULT and secs is USE_DEFAULT:
        return default_steps, default_secs
    return (None if steps is USE_DEFAULT else steps), (None if secs is USE_DEFAULT else secs)


def MonitoredTrainingSession(  # noqa: N802 - TF's name (a function that makes a session)
    master: str = "",
    is_chief: bool = True,
    checkpoint_dir: str | None = None,
    scaffold: Scaffold | None = None,
    hooks: list | None = None,
    chief_only_hooks: list | None = None,
    save_checkpoint_secs: Any = USE_DEFAULT,
    save_summaries_steps: Any = USE_DEFAULT,
    save_summaries_secs: Any = USE_DEFAULT,
    config: Any = None,
    stop_grace_period_secs: float = 120,
    log_step_count_steps: int = 100,
    max_wait_secs: float = 7200,
    save_checkpoint_steps: Any = USE_DEFAULT,
    summary_dir: str | None = None,
) -> MonitoredSession:
    """A MonitoredSession set up for (distributed) training: on the chief, restore or
    initialise, and hooks that count steps, save summaries (every 100 steps) and checkpoints
    (every 600 s) into ``checkpoint_dir``; on other workers, wait for the chief."""
    summary_steps, summary_secs = _resolve(save_summaries_steps, save_summaries_secs, 100, None)
    ckpt_steps, ckpt_secs = _resolve(save_checkpoint_steps, save_checkpoint_secs, None, 600)
    scaffold = scaffold or Scaffold()
    if not is_chief:
        creator = WorkerSessionCreator(
            scaffold=scaffold, master=master, config=config, max_wait_secs=max_wait_secs
        )
        return MonitoredSession(creator, hooks or [], stop_grace_period_secs)
    all_hooks = list(chief_only_hooks or [])
    creator = ChiefSessionCreator(
        scaffold=scaffold, checkpoint_dir=checkpoint_dir, master=master, config=config
    )
    summary_dir = summary_dir or checkpoint_dir
    if summary_dir:
        if log_step_count_steps and log_step_count_steps > 0:
            all_hooks.append(
                hooks_lib.StepCounterHook(
                    output_dir=summary_dir, every_n_steps=log_step_count_steps
                )
            )
        if (summary_steps and summary_steps > 0) or (summary_secs and summary_secs > 0):
            all_hooks.append(
                hooks_lib.SummarySaverHook(
                    scaffold=scaffold,
                    save_steps=summary_steps,
                    save_secs=summary_secs,
                    output_dir=summary_dir,
                )
            )
    if checkpoint_dir and ((ckpt_secs and ckpt_secs > 0) or (ckpt_steps and ckpt_steps > 0)):
        all_hooks.append(
            hooks_lib.CheckpointSaverHook(
                checkpoint_dir, save_steps=ckpt_steps, save_secs=ckpt_secs, scaffold=scaffold
            )
        )
    all_hooks.extend(hooks or [])
    return MonitoredSession(creator, all_hooks, stop_grace_period_secs)
