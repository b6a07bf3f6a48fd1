"""``tf.train.replica_device_setter``: variables round-robin over the ps tasks, ops on workers.

Book section: "Sharding Variables Across Multiple Parameter Servers".  The device function it
returns sends every variable (a ``VariableV2`` op, and the other stateful "ps ops") to the next
parameter-server task in turn, and every other op to ``worker_device``; device strings set by
inner ``tf.device`` blocks win field by field.  reference/tf1_semantics.md §4 is the spec.

``ps_strategy`` picks the task: round robin by default; ``GreedyLoadBalancingStrategy`` with
``byte_size_load_fn`` (TF 1.15's ``tf.contrib.training``, re-exported by ``minitf.contrib``)
sends each variable, in creation order, to the ps task holding the fewest bytes so far, so that
one big layer does not share its task with everything else.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from minitf.distributed.cluster_spec import ClusterSpec
from minitf.framework.device_spec import DeviceSpec
from minitf.framework.tensor_shape import TensorShape

STANDARD_PS_OPS = (
    "Variable",
    "VariableV2",
    "AutoReloadVariable",
    "MutableHashTable",
    "MutableHashTableV2",
    "MutableHashTableOfTensors",
    "MutableHashTableOfTensorsV2",
    "MutableDenseHashTable",
    "MutableDenseHashTableV2",
    "VarHandleOp",
    "BoostedTreesEnsembleResourceHandleOp",
    "BoostedTreesQuantileStreamResourceHandleOp",
    "DecisionTreeResource",
    "ResourceConditionalAccumulator",
)


class _RoundRobinStrategy:
    """Task 0, 1, ..., n-1, 0, ... — one counter per replica_device_setter call."""

    def __init__(self, num_tasks):
        self._num_tasks = num_tasks
        self._next = 0

    def __call__(self, unused_op):
        task = self._next
        self._next = (self._next + 1) % self._num_tasks
        return task


class GreedyLoadBalancingStrategy:
    """``tf.contrib.training.GreedyLoadBalancingStrategy``: the least-loaded ps task so far
    (ties: the lowest index), then that task's load grows by ``load_fn(op)``.  The result
    depends on the order in which the variables are made."""

    def __init__(self, num_tasks: int, load_fn: Callable[[Any], float]) -> None:
        self._num_tasks = num_tasks
        self._load_fn = load_fn
        self._ps_loads = np.zeros(num_tasks)

    def __call__(self, op: Any) -> int:
        task = int(np.argmin(self._ps_loads))
        self._ps_loads[task] += self._load_fn(op)
        return task


def byte_size_load_fn(op: Any) -> int:
    """``tf.contrib.training.byte_size_load_fn``: the bytes of a single-output op's tensor
    (a variable's size), its elements times its dtype's size."""
    if len(op.outputs) != 1:
        raise ValueError("Op %s must have a single output" % op)
    output = op.outputs[0]
    shape = output.get_shape()
    if not shape.is_fully_defined():
        # a variable op being placed may not have its output's shape yet: its attr has it
        shape = TensorShape(op.get_attr("shape"))
    shape.assert_is_fully_defined()
    return shape.num_elements() * output.dtype.size


class _ReplicaDeviceChooser:
    def __init__(self, ps_tasks, ps_device, worker_device, merge_devices, ps_ops, ps_strategy):
        self._ps_tasks = ps_tasks
        self._ps_device = ps_device
        self._worker_device = worker_device
        self._merge_devices = merge_devices
        self._ps_ops = ps_ops
        self._ps_strategy = ps_strategy

    def device_function(self, op):
        """The device of ``op`` (its ``op.device`` already holds what inner blocks asked)."""
        if not self._merge_devices and op.device:
            return op.device
        current = DeviceSpec.from_string(op.device or "")
        node_def = op.node_def if hasattr(op, "node_def") else op
        op_type = node_def.op if hasattr(node_def, "op") else op.type
        if self._ps_tasks and self._ps_device and op_type in self._ps_ops:
            ps = DeviceSpec.from_string(self._ps_device)
            if ps.job and (not current.job or current.job == ps.job):
                ps = ps.replace(task=self._ps_strategy(op))
            return ps.make_merged_spec(current).to_string()
        worker = DeviceSpec.from_string(self._worker_device or "")
        return worker.make_merged_spec(current).to_string()


def replica_device_setter(
    ps_tasks: int = 0,
    ps_device: str = "/job:ps",
    worker_device: str | None = "/job:worker",
    merge_devices: bool = True,
    cluster: ClusterSpec | dict[str, Any] | None = None,
    ps_ops: Iterable[str] | None = None,
    ps_strategy: Callable[[Any], int] | None = None,
) -> Callable[[Any], str] | None:
    """Returns a device function for ``tf.device`` — or None when there are no ps tasks (which
    ``tf.device(None)`` turns into "forget the enclosing device blocks", as in TF)."""
    if cluster is not None:
        if isinstance(cluster, ClusterSpec):
            cluster_spec = cluster.as_dict()
        else:
            cluster_spec = ClusterSpec(cluster).as_dict()
        ps_job_name = DeviceSpec.from_string(ps_device).job
        if ps_job_name not in cluster_spec or cluster_spec[ps_job_name] is None:
            return None
        ps_tasks = len(cluster_spec[ps_job_name])
    if ps_tasks == 0:
        return None
    if ps_ops is None:
        ps_ops = list(STANDARD_PS_OPS)
    if not merge_devices:
        logging.warning(
            "DEPRECATION: It is recommended to set merge_devices=true in replica_device_setter"
        )
    if ps_strategy is None:
        ps_strategy = _RoundRobinStrategy(ps_tasks)
    if not callable(ps_strategy):
        raise TypeError("ps_strategy must be callable")
    chooser = _ReplicaDeviceChooser(
        ps_tasks, ps_device, worker_device, merge_devices, ps_ops, ps_strategy
    )
    return chooser.device_function
