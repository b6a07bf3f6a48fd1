"""Running a function of the graph's library on one device (TF's FunctionLibraryRuntime).

Book section: "Loading Data Directly from the Graph" (the Data API).  A dataset's ``map``,
``filter``, ``flat_map`` or ``interleave`` function (``ops/func_graph.py``) runs once per
element, inside the iterator's kernel, on the iterator's device: its ops are not placed by the
placer but all given that device, and its graph is planned once, like a step of a session with
the function's arguments as feeds and its results as fetches.  A call then runs the plan on the
calling thread (no pool: the kernel that calls it already holds a thread of the step).
"""

from __future__ import annotations

import threading

from minitf.framework import errors
from minitf.framework.dead_tensor import DEAD
from minitf.runtime import executor, step_run, subgraph


class FunctionRunner:
    """One function made runnable on ``device``: ``runner(args)`` -> its flat results."""

    def __init__(self, func_graph, device) -> None:
        self.name = func_graph.name
        ops = func_graph.get_operations()
        feeds = list(func_graph.inputs) + list(func_graph.captures.values())
        step = subgraph.build_step_graph(
            ops,
            dict.fromkeys(ops, device),
            func_graph.outputs,
            [],
            feeds,
            lambda t: device.name,
        )
        self._device = device
        names = ("%s/_%d", {n.name for n in step.nodes})
        kernels = executor.KernelCache()
        self._plan = executor.plan(step, {device.name: device}, kernels, names, device.name)

    def __call__(self, args) -> list:
        ctx = executor.StepContext(list(args))
        vals = step_run.run_step(self._plan, ctx)
        out = []
        for s, k in self._plan.fetch_slots:
            value = vals[s][k]
            if value is DEAD:
                raise errors.InvalidArgumentError(None, None, "Function returned a dead tensor")
            out.append(executor.host_value(value, self._device))
        return out


_lock = threading.Lock()


def runner_for(func_graph, device) -> FunctionRunner:
    """The runner of ``func_graph`` on ``device``, made at its first use and kept with the
    function (so it goes when the graph goes)."""
    with _lock:
        runners = func_graph.__dict__.setdefault("_runners", {})
        runner = runners.get(device.name)
        if runner is None or runner._device is not device:
            runner = runners[device.name] = FunctionRunner(func_graph, device)
        return runner
