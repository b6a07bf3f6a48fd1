"""Turn a traced step (``RunMetadata.step_stats``) into a Chrome trace you can open.

Book section: "Parallel Execution" -- this module makes the chapter's Figure 12-5 visible.
Run a step with ``options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE)`` and a
``run_metadata=md``, then::

    from minitf.runtime import trace
    trace.save(md, "step.json")          # open in https://ui.perfetto.dev or chrome://tracing

or, exactly as with TF 1.x::

    tl = trace.Timeline(md.step_stats)
    open("step.json", "w").write(tl.generate_chrome_trace_format())

What you see (the TF 1.x layout, ``tensorflow/python/client/timeline.py``):

* process 0 is "Allocators" (memory counters); every device gets two processes,
  ``"<device> Compute"`` (one bar per op) and ``"<device> Tensors"`` (tensor lifetimes);
* inside a device, the rows ("threads") are *lanes*, not real threads: ops are packed greedily
  into the first row that is already free, so two rows mean two ops overlapped in time -- the
  inter-op parallelism of Figure 12-5;
* arrows ("DataFlow" flow events) join a producer to a consumer whenever they sit on different
  rows or devices (an arrow along a row would add nothing: the row order already shows it);
* with ``show_memory=True``: tensor objects (create / snapshot / delete) and a per-allocator
  counter of live bytes, plus ``analyze_step_stats().allocator_maximums``.

minitf extras (off by default, so the default output is TF's): ``show_threads=True`` replaces
the lanes by the *real* executor threads that minitf records -- one row per inter-op pool thread
(named through ``thread_name`` metadata), the intra-op chunks of a split kernel (Figure 12-5's
"op A" spread over the intra-op pool) as ``"Chunk"`` bars on the rows of the threads that ran
them, and every cross-device copy (``step_stats.transfers``) as a ``"Transfer"`` arrow from the
producing op to the consuming op, labelled with its size.

Allocator names: minitf's :class:`~minitf.runtime.step_stats.TensorOutput` does not record one,
so a tensor is charged to its device's allocator, named ``"cpu"`` for CPU devices (TF's own name
for its CPU allocator) and ``"<type>_<index>"`` lower-cased otherwise (``"gpu_0"``, ``"gpu_1"``),
so that each GPU gets its own memory counter.  An ``allocator_name`` attribute on an output, if
present, wins.
"""

import collections
import json
import re

from minitf.runtime.step_stats import arrival_micros

__all__ = [
    "AllocationMaximum",
    "ChromeTraceFormatter",
    "StepStatsAnalysis",
    "Timeline",
    "chrome_trace",
    "save",
]


class AllocationMaximum(
    collections.namedtuple("AllocationMaximum", ("timestamp", "num_bytes", "tensors"))
):
    """The peak of one allocator: when (µs), how many bytes, and which tensors were live."""

    __slots__ = ()


class StepStatsAnalysis(
    collections.namedtuple("StepStatsAnalysis", ("chrome_trace", "allocator_maximums"))
):
    """What :meth:`Timeline.analyze_step_stats` returns: the formatter holding the events and
    ``{allocator: AllocationMaximum}`` (empty unless memory was analysed)."""

    __slots__ = ()


class ChromeTraceFormatter:
    """Collects Chrome trace events; metadata ("ph": "M") always comes first in the output."""

    def __init__(self):
        self.metadata = []
        self.events = []

    # -- metadata --------------------------------------------------------------------------
    def emit_pid(self, name, pid):
        self.metadata.append(
            {"name": "process_name", "ph": "M", "pid": pid, "args": {"name": name}}
        )

    def emit_tid(self, name, pid, tid):
        self.metadata.append(
            {"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}}
        )

    # -- events ----------------------------------------------------------------------------
    @staticmethod
    def _event(ph, cat, name, pid, tid, ts):
        return {"ph": ph, "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts}

    def emit_region(self, ts, dur, pid, tid, cat, name, args):
        ev = self._event("X", cat, name, pid, tid, ts)
        ev["dur"] = dur
        ev["args"] = args
        self.events.append(ev)

    def emit_obj_create(self, cat, name, ts, pid, tid, object_id):
        ev = self._event("N", cat, name, pid, tid, ts)
        ev["id"] = object_id
        self.events.append(ev)

    def emit_obj_snapshot(self, cat, name, ts, pid, tid, object_id, snapshot):
        ev = self._event("O", cat, name, pid, tid, ts)
        ev["id"] = object_id
        ev["args"] = {"snapshot": snapshot}
        self.events.append(ev)

    def emit_obj_delete(self, cat, name, ts, pid, tid, object_id):
        ev = self._event("D", cat, name, pid, tid, ts)
        ev["id"] = object_id
        self.events.append(ev)

    def emit_flow(self, cat, name, start, end, flow_id, args=None):
        """A flow arrow: ``start``/``end`` are ``(ts, pid, tid)``."""
        for ph, (ts, pid, tid) in (("s", start), ("t", end)):
            ev = self._event(ph, cat, name, pid, tid, ts)
            ev["id"] = flow_id
            if args is not None:
                ev["args"] = dict(args)
            self.events.append(ev)

    def emit_counter(self, cat, name, pid, ts, counter, value):
        ev = self._event("C", cat, name, pid, 0, ts)
        ev["args"] = {counter: value}
        self.events.append(ev)

    # -- output ----------------------------------------------------------------------------
    def trace(self):
        """The trace as a dict ``{"traceEvents": [...]}``."""
        return {"traceEvents": self.metadata + self.events}

    def format_to_string(self, pretty=False):
        """JSON text: indented by 4 with ``": "`` after keys when ``pretty``, compact else."""
        if pretty:
            return json.dumps(self.trace(), indent=4, separators=(",", ": "))
        return json.dumps(self.trace(), separators=(",", ":"))


_ChromeTraceFormatter = ChromeTraceFormatter  # TF's name for it


class _Tensor:
    """The life of one produced tensor: who made it, where, how big, and its last use."""

    __slots__ = ("name", "object_id", "create_time", "pid", "allocator", "num_bytes", "unref_times")

    def __init__(self, name, object_id, create_time, pid, allocator, num_bytes):
        self.name, self.object_id, self.create_time, self.pid = name, object_id, create_time, pid
        self.allocator, self.num_bytes = allocator, num_bytes
        self.unref_times = []

    @property
    def last_unref(self):
        return max(self.unref_times)


_LABEL = re.compile(r"(.*) = (.*)\((.*)\)")
_DEVICE_KIND = re.compile(r"/(?:device:)?([A-Za-z_]+):(\d+)")


def parse_op_label(label):
    """``"x = Op(a, b:1, ^c)"`` -> ``("x", "Op", ["a", "b:1", "^c"])``.

    A label that does not have this shape (``_Send``/``_Recv``, whose label lacks the closing
    parenthesis) gives ``("unknown", "unknown", [])``.
    """
    m = _LABEL.match(label or "")
    if m is None:
        return "unknown", "unknown", []
    name, op, inputs = m.groups()
    return name, op, inputs.split(", ") if inputs else []


def _is_gputrace_device(device):
    return "/stream:" in device or "/memcpy" in device


def default_allocator(device):
    """minitf's allocator name for a device: ``"cpu"``, ``"gpu_0"``, ``"gpu_1"`` ..."""
    found = _DEVICE_KIND.findall(device or "")
    if not found:
        return "cpu"
    kind, index = found[-1]
    return "cpu" if kind.upper() == "CPU" else "%s_%s" % (kind.lower(), index)


def _dtype_enum_name(name):
    from minitf.framework import dtypes

    try:
        return dtypes.as_dtype(name).enum_name
    except (TypeError, ValueError):
        pass
    try:
        import numpy as np

        return dtypes.as_dtype(np.dtype(name)).enum_name
    except (TypeError, ValueError):
        return "DT_INVALID"


def tensor_description_text(output, allocator):
    """The protobuf text form of TF's ``TensorDescription`` for ``output``, double quotes
    dropped (as the TF timeline shows it in a tensor snapshot)."""
    lines = []
    enum = _dtype_enum_name(output.dtype)
    if enum != "DT_INVALID":
        lines.append("dtype: %s" % enum)
    lines.append("shape {")
    shape = output.shape
    if shape is not None:
        for d in shape:
            lines += ["  dim {", "    size: %d" % (-1 if d is None else int(d)), "  }"]
    else:
        lines.append("  unknown_rank: true")
    lines.append("}")
    lines.append("allocation_description {")
    if output.requested_bytes:
        lines.append("  requested_bytes: %d" % output.requested_bytes)
    lines.append("  allocator_name: %s" % allocator)
    lines.append("}")
    return "\n".join(lines) + "\n"


class Timeline:
    """A Chrome-trace view of one step's ``StepStats`` (TF's ``timeline.Timeline``).

    ``step_stats`` is ``run_metadata.step_stats`` (a whole ``RunMetadata`` is accepted too);
    ``graph`` is accepted for TF compatibility and not used.  The input is never modified (TF
    writes the lane numbers into its own copy; minitf keeps them aside).
    """

    def __init__(self, step_stats, graph=None):
        if not hasattr(step_stats, "dev_stats") and hasattr(step_stats, "step_stats"):
            step_stats = step_stats.step_stats
        self._step_stats = step_stats
        self._graph = graph

    # -- public ----------------------------------------------------------------------------
    def generate_chrome_trace_format(
        self, show_dataflow=True, show_memory=False, show_threads=False
    ):
        """The step as Chrome trace JSON text (indent 4), ready for Perfetto/chrome://tracing.

        ``show_threads`` is a minitf extra (see the module docstring); leave it False to get
        TF's output.
        """
        analysis = self.analyze_step_stats(
            show_dataflow=show_dataflow, show_memory=show_memory, show_threads=show_threads
        )
        return analysis.chrome_trace.format_to_string(pretty=True)

    def analyze_step_stats(self, show_dataflow=True, show_memory=True, show_threads=False):
        """Build the events; returns ``StepStatsAnalysis(chrome_trace, allocator_maximums)``.

        Event order: metadata; the tensor N/O events of every device; per node its "X" event
        (then, with ``show_threads``, its chunk events) followed by the flow pairs of its
        inputs; (``show_threads``) the transfer flows; the D events; the memory counters.
        """
        self._fmt = ChromeTraceFormatter()
        self._show_threads = show_threads
        self._tensors = {}  # tensor name -> _Tensor
        self._flow_starts = {}  # tensor name -> (ts, pid, tid)
        self._next_flow_id = 0
        self._node_places = {}  # (device, node name) -> (arrival, end, pid, tid)
        self._allocate_pids()
        self._assign_tids()
        if show_threads:
            self._emit_thread_names()
        self._analyze_tensors(show_memory)
        self._show_compute(show_dataflow)
        if show_threads:
            self._show_transfers()
        self._keep_sent_tensors()
        maximums = self._show_memory_counters() if show_memory else {}
        return StepStatsAnalysis(chrome_trace=self._fmt, allocator_maximums=maximums)

    # -- steps -----------------------------------------------------------------------------
    def _dev_stats(self):
        return list(self._step_stats.dev_stats)

    def _allocate_pids(self):
        self._allocators_pid = 0
        self._fmt.emit_pid("Allocators", 0)
        self._compute_pids, self._tensor_pids = [], []
        pid = 1
        for ds in self._dev_stats():
            self._compute_pids.append(pid)
            self._tensor_pids.append(pid + 1)
            self._fmt.emit_pid(ds.device + " Compute", pid)
            self._fmt.emit_pid(ds.device + " Tensors", pid + 1)
            pid += 2

    def _assign_tids(self):
        """``self._tids[d][i]``: the row of node ``i`` of device ``d``.

        TF's rule: walk the nodes in order; take the first lane whose last op ended strictly
        before this node starts, else open a new lane.  With ``show_threads``: the thread id.
        """
        self._tids = []
        for ds in self._dev_stats():
            if self._show_threads:
                self._tids.append([ns.thread_id for ns in ds.node_stats])
                continue
            lane_ends, tids = [], []
            for ns in ds.node_stats:
                start = ns.all_start_micros
                # the first lane free before this op starts, else a new one
                lane = next((k for k, end in enumerate(lane_ends) if end < start), len(lane_ends))
                if lane == len(lane_ends):
                    lane_ends.append(None)
                lane_ends[lane] = start + ns.all_end_rel_micros
                tids.append(lane)
            self._tids.append(tids)

    def _emit_thread_names(self):
        for d, ds in enumerate(self._dev_stats()):
            seen = {}
            for ns in ds.node_stats:
                seen.setdefault(ns.thread_id, ns.thread_name)
                for ch in getattr(ns, "chunks", ()):
                    seen.setdefault(ch.thread_id, ch.thread_name)
            for tid, name in seen.items():
                self._fmt.emit_tid(
                    name if name is not None else "thread %s" % tid, self._compute_pids[d], tid
                )

    def _analyze_tensors(self, show_memory):
        for d, ds in enumerate(self._dev_stats()):
            compute_pid, tensors_pid = self._compute_pids[d], self._tensor_pids[d]
            for i, ns in enumerate(ds.node_stats):
                tid = self._tids[d][i]
                start = ns.all_start_micros
                end = start + ns.all_end_rel_micros
                for k, out in enumerate(ns.output):
                    name = "%s:%d" % (ns.node_name, k) if k else ns.node_name
                    allocator = getattr(out, "allocator_name", None) or default_allocator(ds.device)
                    tensor = _Tensor(
                        name, len(self._tensors), start, tensors_pid, allocator, out.requested_bytes
                    )
                    tensor.unref_times.append(end)
                    self._tensors[name] = tensor
                    self._flow_starts[name] = (end, compute_pid, tid)
                    if show_memory:
                        self._fmt.emit_obj_create(
                            "Tensor", name, start, tensors_pid, tid, tensor.object_id
                        )
                        self._fmt.emit_obj_snapshot(
                            "Tensor",
                            name,
                            end - 1,
                            tensors_pid,
                            tid,
                            tensor.object_id,
                            {
                                "tensor_description": tensor_description_text(
                                    out, allocator
                                ).replace('"', "")
                            },
                        )

    def _op_of(self, ns, gputrace):
        """(node name, op type, inputs) shown for a node."""
        if gputrace:
            name, op = (ns.node_name.split(":") + ["unknown"])[:2]
            return name, op, []
        if ns.node_name == "RecvTensor":
            return ns.node_name, "RecvTensor", []
        _, op, inputs = parse_op_label(ns.timeline_label)
        return ns.node_name, op, inputs

    def _alloc_flow_id(self):
        fid = self._next_flow_id
        self._next_flow_id += 1
        return fid

    def _show_compute(self, show_dataflow):
        for d, ds in enumerate(self._dev_stats()):
            pid = self._compute_pids[d]
            gputrace = _is_gputrace_device(ds.device)
            for i, ns in enumerate(ds.node_stats):
                tid = self._tids[d][i]
                start = ns.all_start_micros
                end = start + ns.all_end_rel_micros
                self._node_places.setdefault(
                    (ds.device, ns.node_name), (arrival_micros(ns), end, pid, tid)
                )
                name, op, inputs = self._op_of(ns, gputrace)
                args = {"name": name, "op": op}
                for k, inp in enumerate(inputs):
                    args["input%d" % k] = inp
                self._fmt.emit_region(start, ns.all_end_rel_micros, pid, tid, "Op", op, args)
                if self._show_threads:
                    self._emit_chunks(ns, op, pid)
                if gputrace or ns.node_name == "RecvTensor":
                    continue
                for inp in inputs:
                    if inp.startswith("^"):
                        continue  # a control edge carries no tensor
                    if inp not in self._tensors:
                        cut = inp.rfind("/_")  # "x/_3": renamed by graph partitioning
                        if cut > 0:
                            inp = inp[:cut]
                    tensor = self._tensors.get(inp)
                    if tensor is None:
                        continue
                    tensor.unref_times.append(end - 1)
                    if show_dataflow:
                        src = self._flow_starts[inp]
                        if src[1] != pid or src[2] != tid:
                            self._fmt.emit_flow(
                                "DataFlow", inp, src, (start, pid, tid), self._alloc_flow_id()
                            )

    def _emit_chunks(self, ns, op, pid):
        for ch in getattr(ns, "chunks", ()):
            self._fmt.emit_region(
                ch.start_micros,
                ch.end_micros - ch.start_micros,
                pid,
                ch.thread_id,
                "Chunk",
                "%s/chunk%d" % (op, ch.index),
                {"name": ns.node_name, "op": op, "chunk": ch.index, "thread": ch.thread_name},
            )

    def _find_node(self, device, node):
        place = self._node_places.get((device, node))
        if place is None:
            for (_, name), p in self._node_places.items():
                if name == node:
                    return p
        return place

    def _show_transfers(self):
        """A flow arrow per transfer: from the producer's end to the tensor's arrival (the
        end of its ``_Recv``)."""
        for tr in getattr(self._step_stats, "transfers", ()):
            src = self._find_node(tr.src_device, tr.src_node)
            dst = self._find_node(tr.dst_device, tr.dst_node)
            if src is None or dst is None:
                continue
            self._fmt.emit_flow(
                "Transfer",
                tr.tensor_name,
                (src[1], src[2], src[3]),
                (dst[0], dst[2], dst[3]),
                self._alloc_flow_id(),
                {"bytes": tr.bytes, "src": tr.src_device, "dst": tr.dst_device},
            )

    def _keep_sent_tensors(self):
        """A tensor handed to a ``_Send`` lives until its ``_Recv`` has it (the runtime frees
        it then: ``runtime/tensor_lifetime.py``), not only until the ``_Send`` ran."""
        for tr in getattr(self._step_stats, "transfers", ()):
            name = tr.tensor_name[:-2] if tr.tensor_name.endswith(":0") else tr.tensor_name
            tensor = self._tensors.get(name)
            dst = self._find_node(tr.dst_device, tr.dst_node)
            if tensor is not None and dst is not None:
                tensor.unref_times.append(dst[1])

    def _show_memory_counters(self):
        """D events per tensor, then per allocator a running total of live bytes; returns
        ``{allocator: AllocationMaximum}``."""
        per_allocator = {}
        for name, t in self._tensors.items():
            self._fmt.emit_obj_delete("Tensor", name, t.last_unref, t.pid, 0, t.object_id)
            changes = per_allocator.setdefault(t.allocator, [])
            changes.append((t.create_time, t.num_bytes, name))
            changes.append((t.last_unref, -t.num_bytes, name))
        maximums = {}
        for allocator, changes in per_allocator.items():
            changes.sort()  # by time; at a tie frees (negative) come first
            live, total = set(), 0
            best = AllocationMaximum(0, 0, set())
            for ts, delta, name in changes:
                total += delta
                if delta < 0:
                    live.discard(name)
                else:
                    live.add(name)
                if total > best.num_bytes:
                    best = AllocationMaximum(ts, total, set(live))
                self._fmt.emit_counter(
                    "Memory", allocator, self._allocators_pid, ts, allocator, total
                )
            maximums[allocator] = best
        return maximums


def _step_stats_of(run_metadata):
    if hasattr(run_metadata, "dev_stats"):
        return run_metadata
    return run_metadata.step_stats


def chrome_trace(run_metadata, **kw):
    """The step's Chrome trace as a parsed dict ``{"traceEvents": [...]}``.

    ``run_metadata``: a ``RunMetadata`` (or its ``StepStats``); ``kw``: ``graph``,
    ``show_dataflow``, ``show_memory``, ``show_threads`` as for :class:`Timeline`.
    """
    graph = kw.pop("graph", None)
    text = Timeline(_step_stats_of(run_metadata), graph).generate_chrome_trace_format(**kw)
    return json.loads(text)


def save(run_metadata, path, **kw):
    """Write the step's Chrome trace JSON to ``path`` (open it in ui.perfetto.dev); returns
    ``path``.  ``kw`` as for :func:`chrome_trace`."""
    graph = kw.pop("graph", None)
    text = Timeline(_step_stats_of(run_metadata), graph).generate_chrome_trace_format(**kw)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path
