"""``tf.train.SyncReplicasOptimizer``: synchronous data parallelism with parameter servers.

Book section: "Data parallelism" → "Synchronous updates" ("the aggregator waits for all
gradients to be available before computing the average and applying the result"; spare
replicas).  TF's python/training/sync_replicas_optimizer.py, reference part 2 §18.2-18.3.  Every
replica builds the same graph; ``apply_gradients`` adds:

* ``sync_rep_local_step``, a local variable on the replica's own task: the step its gradients
  belong to;
* per variable, under ``sync_replicas/`` and on the variable's device (its ps task), a
  ``ConditionalAccumulator`` shared as ``<var.name>/grad_accum``, the replica's
  ``ApplyGradient`` (tagged with the local step: stale gradients are dropped) and the chief's
  ``TakeGradient(replicas_to_aggregate)``;
* on the global step's device: the wrapped optimizer's update of the mean gradients (and the
  global step), the unbounded token queue ``sync_token_q`` and 1.15's ``dummy_queue``;
* the replica's train op: push the gradients, wait for a token (``sync_token_q_Dequeue``),
  local step := token.  It is a Tensor, the ``Assign``'s output;
* the chief's sync op, looped by the chief queue runner: take the mean gradients, apply them
  once, enqueue ``tokens_per_step`` tokens carrying the new global step.

``make_session_run_hook(is_chief)`` does the start-up in a ``MonitoredTrainingSession``.
"""

from __future__ import annotations

import logging
from typing import Any

from minitf.framework import dtypes
from minitf.framework.graph import GraphKeys, Tensor, get_default_graph, name_scope
from minitf.lib import deprecation
from minitf.ops import array_ops, control_flow_ops, state_ops
from minitf.ops.accumulator_ops import ConditionalAccumulator
from minitf.ops.data_flow_ops import FIFOQueue
from minitf.ops.variables import Variable, global_variables, report_uninitialized_variables
from minitf.train import session_manager
from minitf.train.optimizer import Optimizer
from minitf.train.queue_runner import QueueRunner
from minitf.train.session_run_hook import SessionRunHook

logger = logging.getLogger("minitf")

_DEPRECATION = (
    "The `SyncReplicaOptimizer` class is deprecated. For synchrononous training, please use "
    "[Distribution Strategies](https://github.com/tensorflow/tensorflow/tree/master/"
    "tensorflow/contrib/distribute)."
)


class SyncReplicasOptimizer(Optimizer):
    """Aggregates ``replicas_to_aggregate`` gradients per variable, applies their mean once,
    then releases the replicas with tokens (``total_num_replicas`` beyond that: spares)."""

    def __init__(
        self,
        opt: Optimizer,
        replicas_to_aggregate: int,
        total_num_replicas: int | None = None,
        variable_averages: Any = None,
        variables_to_average: Any = None,
        use_locking: bool = False,
        name: str = "sync_replicas",
    ) -> None:
        deprecation.warn(
            "__init__", "tensorflow.python.training.sync_replicas_optimizer", _DEPRECATION
        )
        if total_num_replicas is None:
            total_num_replicas = replicas_to_aggregate
        super().__init__(use_locking, name)
        logger.info(
            "SyncReplicasV2: replicas_to_aggregate=%s; total_num_replicas=%s",
            replicas_to_aggregate,
            total_num_replicas,
        )
        self._opt = opt
        self._replicas_to_aggregate = replicas_to_aggregate
        self._gradients_applied = False
        self._variable_averages = variable_averages
        self._variables_to_average = variables_to_average
        self._total_num_replicas = total_num_replicas
        self._tokens_per_step = max(total_num_replicas, replicas_to_aggregate)
        self._global_step = None
        self._sync_token_queue = None
        self._chief_queue_runner = None
        self._accumulator_list: list[tuple[ConditionalAccumulator, str]] = []

    # -- delegated to the wrapped optimizer -----------------------------------------------------
    def compute_gradients(self, *args: Any, **kwargs: Any) -> list:
        """The wrapped optimizer's gradients (clip them per replica here if needed)."""
        return self._opt.compute_gradients(*args, **kwargs)

    def get_slot(self, *args: Any, **kwargs: Any) -> Any:
        return self._opt.get_slot(*args, **kwargs)

    def get_slot_names(self, *args: Any, **kwargs: Any) -> list[str]:
        return self._opt.get_slot_names(*args, **kwargs)

    def variables(self) -> list[Variable]:
        """The wrapped optimizer's variables (not the local step)."""
        return self._opt.variables()

    # -- the graph ------------------------------------------------------------------------------
    def apply_gradients(self, grads_and_vars, global_step=None, name=None) -> Tensor:
        """Builds §18.3's graph; returns the replica's train op, the local step's new value."""
        grads_and_vars = list(grads_and_vars)
        if not grads_and_vars:
            raise ValueError("Must supply at least one variable")
        if global_step is None:
            raise ValueError("Global step is required to check staleness")
        self._global_step = global_step
        g = get_default_graph()
        self._make_local_step(g, global_step)
        chief_init_ops = [self.local_step_init_op]
        self.ready_for_local_init_op = report_uninitialized_variables(global_variables())
        with name_scope(None, self._name):
            train_ops, aggregated = self._accumulate(g, grads_and_vars)
            with g.device(global_step.device), name_scope(""):
                update_op = self._opt.apply_gradients(
                    zip(aggregated, [v for _, v in grads_and_vars]), global_step
                )
            train_op = self._tokens(g, global_step, train_ops, update_op)
            for accum, device in self._accumulator_list:
                with g.device(device):
                    chief_init_ops.append(accum.set_global_step(global_step, name="SetGlobalStep"))
            self.chief_init_op = control_flow_ops.group(*chief_init_ops)
        self._gradients_applied = True
        return train_op

    def _make_local_step(self, g, global_step):
        """``sync_rep_local_step`` next to an anchor NoOp (the replica's own device, never a
        ps task) and ``local_step_init_op`` (local step := global step)."""
        local_anchor = control_flow_ops.no_op()
        with g.colocate_with(local_anchor):
            self._local_step = Variable(
                initial_value=0,
                trainable=False,
                collections=[GraphKeys.LOCAL_VARIABLES],
                dtype=global_step.dtype.base_dtype,
                name="sync_rep_local_step",
            )
        self.local_step_init_op = state_ops.assign(self._local_step, global_step)

    def _accumulate(self, g, grads_and_vars):
        """Per variable, on its device: the accumulator, the replica's apply and the chief's
        take.  Returns (apply ops, taken mean gradients; None where a variable has none)."""
        train_ops, aggregated = [], []
        for grad, var in grads_and_vars:
            with g.device(var.device):
                if grad is None:
                    aggregated.append(None)
                    continue
                if not isinstance(grad, Tensor):
                    raise ValueError("Unknown grad type!")
                accum = ConditionalAccumulator(
                    grad.dtype, shape=var.get_shape(), shared_name=var.name + "/grad_accum"
                )
                train_ops.append(accum.apply_grad(grad, local_step=self._local_step))
                aggregated.append(accum.take_grad(self._replicas_to_aggregate))
                self._accumulator_list.append((accum, var.device))
        return train_ops, aggregated

    def _tokens(self, g, global_step, train_ops, update_op):
        """The token queue, 1.15's dummy queue, the replica's train op and the chief's sync op
        with its queue runner, all at the root scope on the global step's device."""
        with g.device(global_step.device), name_scope(""):
            token_queue = FIFOQueue(
                -1,
                global_step.dtype.base_dtype,
                shapes=(),
                name="sync_token_q",
                shared_name="sync_token_q",
            )
            self._sync_token_queue = token_queue
            # the chief's runner closes this one when it stops, never the token queue on the ps
            dummy_queue = FIFOQueue(
                1, dtypes.int32, shapes=(), name="dummy_queue", shared_name="dummy_queue"
            )
            with g.control_dependencies(train_ops):
                token = token_queue.dequeue()
            train_op = state_ops.assign(self._local_step, token)
            with g.control_dependencies([update_op]):
                # The new global step.  TF's read of it aliases the variable's buffer, so
                # whenever it ran it shows the increment; minitf's read is a copy taken when it
                # runs: the Fill reads the variable itself, after the update.
                tokens = array_ops.fill([self._tokens_per_step], _ref_of(global_step))
                sync_op = token_queue.enqueue_many((tokens,))
            if self._variable_averages is not None:
                with g.control_dependencies([sync_op]), name_scope(""):
                    sync_op = self._variable_averages.apply(self._variables_to_average)
            self._chief_queue_runner = QueueRunner(dummy_queue, [sync_op])
        return train_op

    # -- the chief's start-up -------------------------------------------------------------------
    def get_chief_queue_runner(self) -> QueueRunner:
        """The runner whose thread loops the sync op (not in ``QUEUE_RUNNERS``: only the chief
        starts it)."""
        if self._gradients_applied is False:
            raise ValueError("Should be called after apply_gradients().")
        return self._chief_queue_runner

    def get_init_tokens_op(self, num_tokens: int = -1):
        """Enqueues ``num_tokens`` tokens (default ``replicas_to_aggregate``) carrying the
        global step, so that the first step can finish."""
        if self._gradients_applied is False:
            raise ValueError("get_init_tokens_op() should be called after apply_gradients().")
        tokens_needed = self._replicas_to_aggregate - self._total_num_replicas
        if num_tokens == -1:
            num_tokens = self._replicas_to_aggregate
        elif num_tokens < tokens_needed:
            raise ValueError(
                "Too few tokens to finish the first step: %d (given) vs %d (needed)"
                % (num_tokens, tokens_needed)
            )
        if num_tokens > 0:
            g = get_default_graph()
            with g.device(self._global_step.device), name_scope(""):
                tokens = array_ops.fill([num_tokens], self._global_step)
                return self._sync_token_queue.enqueue_many((tokens,))
        return control_flow_ops.no_op(name="no_init_tokens")

    def make_session_run_hook(self, is_chief: bool, num_tokens: int = -1) -> SessionRunHook:
        """The hook that runs the start-up in a ``MonitoredTrainingSession``."""
        return _SyncReplicasOptimizerHook(self, is_chief, num_tokens)


def _ref_of(global_step):
    return global_step._ref() if isinstance(global_step, Variable) else global_step


class _SyncReplicasOptimizerHook(SessionRunHook):
    """Chief: ``chief_init_op``, the init tokens, the chief queue runner's threads; other
    replicas: ``local_step_init_op``; both once the model is initialised."""

    def __init__(self, sync_optimizer, is_chief, num_tokens):
        self._sync_optimizer = sync_optimizer
        self._is_chief = is_chief
        self._num_tokens = num_tokens

    def begin(self):
        opt = self._sync_optimizer
        if opt._gradients_applied is False:
            raise ValueError(
                "SyncReplicasOptimizer.apply_gradient should be called before using the hook."
            )
        self._ready_for_local_init_op = opt.ready_for_local_init_op
        if self._is_chief:
            self._local_init_op = opt.chief_init_op
            self._q_runner = opt.get_chief_queue_runner()
            self._init_tokens_op = opt.get_init_tokens_op(self._num_tokens)
        else:
            self._local_init_op = opt.local_step_init_op
            self._q_runner = None
            self._init_tokens_op = None

    def after_create_session(self, session, coord):
        ready, msg = session_manager._ready(
            self._ready_for_local_init_op,
            session,
            "Model is not ready for SyncReplicasOptimizer local init.",
        )
        if not ready:
            raise RuntimeError(
                "Init operations did not make model ready for SyncReplicasOptimizer "
                "local_init. Init op: %s, error: %s" % (self._local_init_op.name, msg)
            )
        session.run(self._local_init_op)
        if self._init_tokens_op is not None:
            session.run(self._init_tokens_op)
        if self._q_runner is not None:
            self._q_runner.create_threads(session, coord=coord, daemon=True, start=True)
