"""What a traced step adds up to: bytes between devices, and when each device was busy.

Book section: "Model Parallelism" (Figures 12-14, 12-15 and 12-16).  Splitting one network over
several devices pays off only if the devices work *at the same time* and if the tensors they
exchange cost less to move than the work they share.  A traced run (``RunOptions(trace_level=
FULL_TRACE)`` and a ``RunMetadata``) or a simulated one records both; these functions read that
record (a ``StepStats``, or the ``RunMetadata`` holding it)::

    transfer_bytes(md)              # {("/...device:GPU:0", "/...device:GPU:1"): 524288, ...}
    busy_intervals(md)              # {device: [(start, end), ...]} in microseconds
    overlap_micros(md, "GPU:0", "GPU:1")  # how long both devices were busy at once
    TimelineView(waits_collapsed(md))     # each _Recv drawn at the instant its tensor came

A device is *busy* while one of its ops runs.  A ``_Recv`` does not count: it is asynchronous,
and the time its record spans is spent waiting for the tensor, not working on it.
"""

from __future__ import annotations

import copy

from minitf.runtime.config_proto import StepStats
from minitf.runtime.step_stats import DeviceStepStats, arrival_micros

WAITING_OPS = frozenset({"_Recv"})
"""Op types whose recorded time is waiting, not work (:func:`busy_intervals` skips them)."""


def _step_stats(source):
    """The ``StepStats`` of a ``RunMetadata``, or ``source`` itself."""
    if not hasattr(source, "dev_stats") and hasattr(source, "step_stats"):
        return source.step_stats
    if not hasattr(source, "dev_stats"):
        raise TypeError(
            "Expected a RunMetadata or a StepStats (from a traced or simulated run), got %s"
            % type(source).__name__
        )
    return source


def transfer_bytes(step_stats_or_run_metadata) -> dict[tuple[str, str], int]:
    """Bytes copied from each device to each other device during the step.

    Returns ``{(source device, destination device): bytes}`` summed over every tensor that
    crossed (TF's ``_Send``/``_Recv`` pairs, recorded by the receiving side), with the device
    names as recorded; pairs that exchanged nothing are absent.
    """
    totals: dict[tuple[str, str], int] = {}
    for tr in _step_stats(step_stats_or_run_metadata).transfers:
        key = (tr.src_device, tr.dst_device)
        totals[key] = totals.get(key, 0) + int(tr.bytes)
    return totals


def _merged(intervals):
    out: list[tuple[int, int]] = []
    for start, end in sorted(intervals):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def busy_intervals(step_stats_or_run_metadata) -> dict[str, list[tuple[int, int]]]:
    """When each device was working: ``{device: [(start, end), ...]}`` in microseconds.

    The intervals of a device are those of its ops (the ``_Recv`` waits of
    :data:`WAITING_OPS` left out), merged where they touch or overlap, in time order.  Devices
    with nothing but waits are absent.
    """
    spans: dict[str, list[tuple[int, int]]] = {}
    for ds in _step_stats(step_stats_or_run_metadata).dev_stats:
        for ns in ds.node_stats:
            if ns.op_type not in WAITING_OPS:
                start = ns.all_start_micros
                spans.setdefault(ds.device, []).append((start, start + ns.all_end_rel_micros))
    return {device: _merged(iv) for device, iv in spans.items()}


def busy_micros(step_stats_or_run_metadata) -> dict[str, int]:
    """How long each device was working during the step (:func:`busy_intervals` summed)."""
    return {
        device: sum(end - start for start, end in iv)
        for device, iv in busy_intervals(step_stats_or_run_metadata).items()
    }


def _named(busy, device):
    """The intervals of ``device``: a full name as recorded, or a short one (``"GPU:1"``)
    that exactly one recorded device ends with."""
    if device in busy:
        return busy[device]
    found = [d for d in busy if d.rsplit("/device:", 1)[-1] == device]
    if len(found) > 1:
        raise ValueError("%r names several devices of the step: %s" % (device, sorted(found)))
    return busy[found[0]] if found else []


def overlap_micros(step_stats_or_run_metadata, device_a: str, device_b: str) -> int:
    """How long ``device_a`` and ``device_b`` were both working at once (0 when one of them
    never worked in the step).  Devices by full name, or by short name (``"GPU:0"``) where
    that is not ambiguous."""
    busy = busy_intervals(step_stats_or_run_metadata)
    a, b = _named(busy, device_a), _named(busy, device_b)
    total, i, j = 0, 0, 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        total += max(0, hi - lo)
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def waits_collapsed(step_stats_or_run_metadata) -> StepStats:
    """A copy of the step's record in which each ``_Recv`` lasts no time and sits at the
    instant its tensor arrived, instead of spanning the whole wait from the step's start.

    For pictures: on a timeline a waiting ``_Recv`` looks like a busy thread, though it holds
    none.  Transfers (and so the timeline's arrows) are kept as they are.
    """
    src = _step_stats(step_stats_or_run_metadata)
    out = StepStats()
    for ds in src.dev_stats:
        nodes = []
        for ns in ds.node_stats:
            if ns.op_type in WAITING_OPS:
                arrived = arrival_micros(ns)
                ns = copy.copy(ns)
                ns.all_start_micros = arrived
                ns.op_end_rel_micros = ns.all_end_rel_micros = 0
            nodes.append(ns)
        out.dev_stats.append(
            DeviceStepStats(ds.device, sorted(nodes, key=lambda n: n.all_start_micros))
        )
    out.transfers.extend(src.transfers)
    return out
