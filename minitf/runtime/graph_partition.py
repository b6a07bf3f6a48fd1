"""Splitting a step's graph over devices or tasks, with a ``_Send``/``_Recv`` pair per crossing.

Book sections: "Placing Operations on Devices" and "The Master and Worker Services" (how a graph
placed over several devices, or several servers, runs as one).  This is TF's
``core/graph/graph_partition.cc``, one pure function used three times, as in TF:

* a local session splits its step graph by device (TF's DirectSession: the CPU and the GPUs
  of one process exchange tensors through the step's rendezvous);
* the master splits it by task, and registers each task's piece on that task's worker;
* each worker splits its piece by device again (TF's GraphMgr).

:func:`partition` gives every node to the location ``loc_of(node)`` names.  An edge whose two
ends land in different locations becomes a ``_Send`` next to the producer and a ``_Recv`` in
the consumer's location (on the device of its first consumer there), sharing a rendezvous key;
one pair serves every consumer of that tensor in that location.  A control edge crosses the
same way with an empty float.  A fetched tensor produced away from ``fetch_device`` (a local
session's client CPU) crosses to it too.  Nothing of the input is changed: every node is
copied.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

from minitf.framework import dtypes
from minitf.framework.tensor_shape import TensorShape
from minitf.ops.sendrecv_ops import RECV_OP, SEND_OP
from minitf.runtime.step_graph import Node, StepGraph


class Partitions:
    """The result of :func:`partition`: ``parts[loc]`` lists the nodes of each location (every
    input before its consumer), ``fetches`` / ``args`` / ``targets`` are the step graph's,
    rewired to the copies (a fetch that crossed to ``fetch_device`` comes from its ``_Recv``)."""

    __slots__ = ("parts", "fetches", "args", "targets")

    def __init__(self, parts, fetches, args, targets):
        self.parts: dict[str, list[Node]] = parts
        self.fetches: list[tuple[Node, int]] = fetches
        self.args: list[Node] = args
        self.targets: list[Node] = targets


def namer(template: str, taken: set) -> Callable[[str], str]:
    """A ``new_name(prefix)`` giving ``template % (prefix, n)`` for n = 0, 1, ... and never a
    name in ``taken`` (TF's sessions use ``"%s/_%d"``, its master ``"%s_S%d"``, its workers
    ``"%s_G%d"``)."""
    counter = itertools.count()

    def new_name(prefix: str) -> str:
        while True:
            name = template % (prefix, next(counter))
            if name not in taken:
                taken.add(name)
                return name

    return new_name


def _pair(src: Node, k: int | None, dst_device: str, new_name, incarnation_of):
    """The ``_Send`` (on ``src``'s device, no edges yet) and ``_Recv`` (on ``dst_device``) of
    output ``k`` of ``src`` (``None``: a control edge)."""
    control = k is None
    tensor_name = "^" + src.name if control else "%s:%d" % (src.name, k)
    dtype = dtypes.float32 if control else src.outputs[k][0].base_dtype
    shape = TensorShape([]) if control else src.outputs[k][1]
    common = {
        "tensor_name": tensor_name,
        "send_device": src.device,
        "send_device_incarnation": incarnation_of(src.device),
        "recv_device": dst_device,
        "client_terminated": False,
    }
    send = Node(new_name(src.name), SEND_OP, src.device, dict(common, T=dtype), [])
    recv = Node(
        new_name(src.name), RECV_OP, dst_device, dict(common, tensor_type=dtype), [(dtype, shape)]
    )
    return send, recv


class _Splitter:
    """The state of one :func:`partition` call."""

    def __init__(self, step, loc_of, new_name, incarnation_of):
        self.loc_of = loc_of
        self.new_name = new_name
        self.incarnation_of = incarnation_of
        self.copy = {n: n.copy() for n in step.nodes}
        self.loc = {n: loc_of(n) for n in step.nodes}
        self.parts: dict[str, list[Node]] = {}
        self.sends: dict[str, list[Node]] = {}
        self.recvs: dict[tuple, Node] = {}  # (source node, output or None, location) -> _Recv

    def received(self, src: Node, k: int | None, loc: str, device: str) -> Node:
        """The ``_Recv`` in ``loc`` of output ``k`` of ``src`` (made with its ``_Send`` on
        first use, on ``device``)."""
        key = (src, k, loc)
        recv = self.recvs.get(key)
        if recv is None:
            send, recv = _pair(src, k, device, self.new_name, self.incarnation_of)
            if k is None:
                send.control_inputs = [self.copy[src]]
            else:
                send.inputs = [(self.copy[src], k)]
            self.sends.setdefault(self.loc[src], []).append(send)
            self.parts.setdefault(loc, []).append(recv)
            self.recvs[key] = recv
        return recv

    def wire(self, node: Node) -> Node:
        """The copy of ``node`` with its edges, each one that crosses replaced by a _Recv."""
        c, loc = self.copy[node], self.loc[node]
        for src, k in node.inputs:
            same = self.loc[src] == loc
            c.inputs.append(
                (self.copy[src], k) if same else (self.received(src, k, loc, node.device), 0)
            )
        for src in node.control_inputs:
            same = self.loc[src] == loc
            c.control_inputs.append(
                self.copy[src] if same else self.received(src, None, loc, node.device)
            )
        return c


def partition(
    step: StepGraph,
    loc_of: Callable[[Node], str],
    new_name: Callable[[str], str],
    incarnation_of: Callable[[str], int],
    fetch_device: str | None = None,
) -> Partitions:
    """Splits ``step`` over the locations ``loc_of`` gives its nodes (see the module
    docstring); ``new_name(prefix)`` names each added node, ``incarnation_of(device)`` gives
    the incarnation of a sending device (part of the rendezvous key)."""
    locs = {loc_of(n) for n in step.nodes}
    if len(locs) <= 1 and (fetch_device is None or fetch_device in locs or not step.fetches):
        # nothing crosses: one partition, the step graph itself (it is not changed)
        return Partitions(
            {loc: list(step.nodes) for loc in locs},
            list(step.fetches),
            list(step.args),
            list(step.targets),
        )
    s = _Splitter(step, loc_of, new_name, incarnation_of)
    for node in step.nodes:
        wired = s.wire(node)
        s.parts.setdefault(s.loc[node], []).append(wired)
    fetches = []
    for src, k in step.fetches:
        if fetch_device is None or src.device == fetch_device:
            fetches.append((s.copy[src], k))
        else:
            fetches.append((s.received(src, k, fetch_device, fetch_device), 0))
    for loc, sends in s.sends.items():
        s.parts.setdefault(loc, []).extend(sends)
    return Partitions(
        s.parts, fetches, [s.copy[a] for a in step.args], [s.copy[t] for t in step.targets]
    )
