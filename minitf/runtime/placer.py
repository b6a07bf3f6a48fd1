"""The simple placer: which device each op of a graph runs on (TF 1.15's rules).

Book section: "Placing Operations on Devices" ("Simple placement", "Logging placements",
"Operations and kernels", "Soft placement").  The rules, in the order they apply:

1. an op placed in an earlier run of the session (a stateful one) stays where it is;
2. ops that must share a device are grouped: ``_class`` colocation attributes (a variable's
   ``Assign`` and ``read``), reference edges (anything that writes to a variable) and
   resource edges (a queue's access ops and a reader's read join the op making the resource);
3. the group's requested devices are merged; the candidates are the devices matching that
   request and having a kernel for every member, best first (GPU before CPU, then by name);
4. an op with no inputs and one output (a "generator", e.g. a constant) is placed last, with
   its consumers when they all agree;
5. when no candidate is left, ``allow_soft_placement`` retries without the device type and
   index; otherwise placement fails with TF's "Cannot assign a device" error.

TF 1.15's ``placer.cc`` and ``colocation_graph.cc`` are what these rules follow (the
specification the tests check against: recorded TF outputs in ``tests/data/tf_outputs``).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from minitf.framework import dtypes, errors
from minitf.framework.graph import Operation
from minitf.kernels import registry
from minitf.ops.op_def import get_op_def
from minitf.runtime import device_name_utils as dnu
from minitf.runtime.gc_pause import gc_paused


def _sort_key(device):
    return (-registry.DEVICE_PRIORITY.get(device.device_type, 50), device.name)


def attach_node(message, name):
    """TF's trailing ``\\n\\t [[name]]`` marker that tells which node an error belongs to."""
    if "{{node %s}}" % name in message:
        return "%s\n\t [[%s]]" % (message, name)
    return "%s\n\t [[{{node %s}}]]" % (message, name)


class _Group:
    __slots__ = ("members", "request", "types", "assigned", "candidates")

    def __init__(self):
        self.members = []
        self.request = None  # the members' requests merged (``_colocation_groups``)
        self.types = None
        self.assigned = None
        self.candidates = None


class Placement:
    """The result of placing a graph: ``device_of[op]`` and the log lines, in TF's order
    (``assigned``: the ops in the order they were placed; the lines are written when asked
    for, so a big graph placed without ``log_device_placement`` keeps no text per op)."""

    def __init__(self, ops, device_of, assigned):
        self.ops = ops
        self.device_of = device_of
        self.assigned = assigned

    @property
    def log_lines(self) -> list[str]:
        return [
            "%s: (%s): %s" % (op.name, op.type, self.device_of[op].name) for op in self.assigned
        ]


def place(
    ops: Sequence[Operation],
    devices: Sequence,
    allow_soft_placement: bool = False,
    preassigned: dict | None = None,
    has_cuda: bool = False,
) -> Placement:
    """Places every op of ``ops`` (graph order) on one of ``devices``.

    ``preassigned`` maps op names to device names kept from an earlier placement.
    """
    if not devices:
        raise errors.FailedPreconditionError(None, None, "No devices are registered")
    requests, types = _requests_and_types(ops)
    group_of = _colocation_groups(ops, requests, types, allow_soft_placement)
    assigner = _Assigner(devices, group_of, requests, types, allow_soft_placement, has_cuda)
    by_name = {d.name: d for d in devices}
    preassigned = preassigned or {}
    postponed = []
    for op in ops:
        kept = preassigned.get(op.name)
        if kept is not None and kept in by_name:
            assigner.assign(op, by_name[kept])
        elif not op._inputs and len(op._outputs) == 1 and not op._outputs[0].dtype.is_ref_dtype:
            postponed.append(op)  # rule 4: a generator goes last, next to its consumers
        else:
            assigner.assign(op, assigner.candidates(op)[0])
    consumers = _consumers(ops)
    for op in postponed:
        assigner.assign(op, assigner.generator_device(op, consumers.get(op)))
    return Placement(ops, assigner.device_of, assigner.log)


def _requests_and_types(ops):
    """Per op: its requested device (parsed) and the device types with a kernel for it (ops
    asking alike share them: neither is changed in place, and a big graph has few of each)."""
    requests, types, parsed = {}, {}, {}
    for op in ops:
        t = registry.device_types(op)
        if not t:
            raise errors.InvalidArgumentError(
                None,
                op,
                attach_node(
                    "No OpKernel was registered to support Op '%s' with these attrs.  Registered "
                    "devices: [%s], Registered kernels:\n%s"
                    % (
                        op.type,
                        ",".join(registry.registered_devices()),
                        registry.registered_kernels_text(op),
                    ),
                    op.name,
                ),
            )
        types[op] = t
        req = parsed.get(op.device, parsed)
        if req is parsed:
            req = parsed[op.device] = dnu.parse_full_name(op.device)
        if req is None:
            raise errors.InvalidArgumentError(
                None,
                op,
                attach_node(
                    "Malformed device specification '%s' in node: {{node %s}}"
                    % (op.device, op.name),
                    op.name,
                ),
            )
        requests[op] = req
    return requests, types


class _UnionFind:
    """Colocation groups: ops joined by ``_class`` attributes and reference edges (the group's
    root is its earliest op)."""

    def __init__(self, ops):
        self.parent = {op: op for op in ops}

    def find(self, op):
        parent = self.parent
        while parent[op] is not op:
            parent[op] = parent[parent[op]]
            op = parent[op]
        return op

    def union(self, a, b):
        ra, rb = self.find(a), self.find(b)
        if ra is not rb:
            if ra._id > rb._id:
                ra, rb = rb, ra
            self.parent[rb] = ra


def _join_colocated(ops, requests):
    """Rule 2: the union-find of ``_class`` colocations and reference edges (a write to a
    variable goes where the variable is: its device wins a conflicting request)."""
    uf = _UnionFind(ops)
    ops_by_name = {op.name: op for op in ops}
    for op in ops:
        if not op._attrs.get("_class"):
            continue  # its only class is its own name (``colocation_groups``)
        for cls in op.colocation_groups():
            name = cls.decode() if isinstance(cls, bytes) else cls
            target = ops_by_name.get(name[len("loc:@") :])
            if target is not None and target is not op:
                uf.union(op, target)
    for op in ops:
        refs = get_op_def(op.type).ref_inputs
        if True in refs:
            for t, is_ref in zip(op._inputs, refs):
                if is_ref and t.dtype.is_ref_dtype:
                    rs, rd = requests[t.op], requests[op]
                    if _has_details(rs) and _has_details(rd) and not _compatible(rs, rd):
                        requests[op] = rs.copy()  # the variable's device wins
                    uf.union(t.op, op)
        _join_resource_edges(uf, op, requests)
    return uf


def _join_resource_edges(uf, op, requests):
    """Part 2 §22.2: an op taking a resource handle (a queue's dequeue, a reader's
    ``ReaderReadV2``) joins the group of the op that made it, whose device wins a conflicting
    request; two resource producers asking for incompatible devices cannot be placed."""
    first = None
    for t in op._inputs:
        if t.dtype is not dtypes.resource:  # DTypes are interned
            continue
        rs, rd = requests[t.op], requests[op]
        if first is not None:
            rf = requests[first]
            if _has_details(rf) and _has_details(rs) and not _compatible(rf, rs):
                raise errors.InvalidArgumentError(
                    None,
                    op,
                    "Cannot place the graph because a reference or resource edge connects "
                    "colocation groups with incompatible resource devices: %s vs %s. The edge "
                    "src node is %s , and the dst node is %s" % (rs, rf, t.op.name, op.name),
                )
        elif _has_details(rs) and _has_details(rd) and not _compatible(rs, rd):
            requests[op] = rs.copy()  # the resource's device wins
        uf.union(t.op, op)
        first = first or t.op


def _colocation_groups(ops, requests, types, soft):
    """``{op: _Group}``: each group's merged request and the device types all members
    support (TF's "Cannot colocate nodes" errors otherwise)."""
    uf = _join_colocated(ops, requests)
    groups, group_of = {}, {}
    for op in ops:
        group_of[op] = g = groups.setdefault(uf.find(op), _Group())
        g.members.append(op)
    for g in groups.values():
        first = g.members[0]
        if len(g.members) == 1:  # most ops: the group asks what its op asks (never changed)
            g.request, g.types = requests[first], types[first]
            continue
        g.request = dnu.ParsedName()
        for op in g.members:
            try:
                dnu.merge_dev_names(g.request, requests[op], soft)
            except errors.InvalidArgumentError as e:
                raise errors.InvalidArgumentError(
                    None,
                    op,
                    attach_node(
                        "Cannot colocate nodes {{colocation_node %s}} and "
                        "{{colocation_node %s}}: %s" % (first.name, op.name, e.message),
                        op.name,
                    ),
                ) from None
            t = types[op] if g.types is None else [x for x in g.types if x in types[op]]
            if not t:
                raise errors.InvalidArgumentError(
                    None,
                    op,
                    attach_node(
                        "Cannot colocate nodes {{colocation_node %s}} and {{colocation_node %s}} "
                        "because no device type supports both of those nodes and the other nodes "
                        "colocated with them.%s" % (first.name, op.name, _debug_info(g, types)),
                        op.name,
                    ),
                )
            g.types = t
    return group_of


def _consumers(ops):
    """``{op: [ops reading it, by data or control edge]}``."""
    consumers = {}
    for op in ops:
        for t in op._inputs:
            consumers.setdefault(t.op, []).append(op)
        for c in op._control_inputs:
            consumers.setdefault(c, []).append(op)
    return consumers


class _Assigner:
    """Rule 3: each group's candidate devices, best first; ``assign`` records the choice and
    TF's log line.  Groups that ask alike share one candidate list (most of a big graph)."""

    def __init__(self, devices, group_of, requests, types, soft, has_cuda):
        self.devices, self.group_of = devices, group_of
        self.requests, self.types = requests, types
        self.soft, self.has_cuda = soft, has_cuda
        self.device_of, self.log = {}, []
        self._shared = {}  # (id of a lone op's request, its types) -> candidates

    def assign(self, op, device):
        self.device_of[op] = device
        self.group_of[op].assigned = device
        self.log.append(op)

    def candidates(self, op):
        g = self.group_of[op]
        if g.assigned is not None:
            return [g.assigned]
        if g.candidates is None:
            alone = len(g.members) == 1  # its request and types are its op's, shared
            key = (id(g.request), g.types)
            g.candidates = self._shared.get(key) if alone else None
            if g.candidates is None:
                g.candidates = _candidates(
                    op, g, self.devices, self.soft, self.requests, self.types, self.has_cuda
                )
                if alone:
                    self._shared[key] = g.candidates
        return g.candidates

    def generator_device(self, op, users):
        """Rule 4: a generator goes with its consumers when they all went to one device it
        may use; else to its own best candidate."""
        cands = self.candidates(op)
        if users and all(u in self.device_of for u in users):
            first = self.device_of[users[0]]
            if all(self.device_of[u] is first for u in users) and first in cands:
                return first
        return cands[0]


def print_log(lines: Sequence[str]) -> None:
    """What ``log_device_placement`` prints (the devices a session creates, then one
    ``name: (type): device`` line per op) goes to stdout: in a notebook, the cell's output (TF
    writes it to the terminal's stderr)."""
    sys.stdout.write("\n".join(lines) + "\n")
    sys.stdout.flush()


class GraphPlacer:
    """Places a session's graph at its first run and again whenever it grew, as TF sessions do:
    an op that holds state (a variable, a queue) stays on the device it was first placed on,
    whatever the new placement would choose.  Local sessions and the master both use it."""

    def __init__(self, devices, allow_soft_placement=False, has_cuda=False):
        self.devices = devices
        self.allow_soft_placement = allow_soft_placement
        self.has_cuda = has_cuda
        self._stateful = {}  # op name -> device name, kept across placements

    def place(self, ops):
        with gc_paused():
            placement = place(
                ops,
                self.devices,
                self.allow_soft_placement,
                preassigned=self._stateful,
                has_cuda=self.has_cuda,
            )
        for op in ops:
            if get_op_def(op.type).is_stateful:
                self._stateful.setdefault(op.name, placement.device_of[op].name)
        return placement


def _has_details(p):
    return any(x is not None for x in (p.job, p.replica, p.task, p.type, p.id))


def _compatible(a, b):
    return all(
        x is None or y is None or x == y
        for x, y in (
            (a.job, b.job),
            (a.replica, b.replica),
            (a.task, b.task),
            (a.type, b.type),
            (a.id, b.id),
        )
    )


def _matching(request, devices):
    return [d for d in devices if dnu.is_complete_specification(request, d.parsed)]


def _candidates(op, group, devices, soft, requests, types, has_cuda):
    """The devices ``op``'s group may go to, best first (rule 3, soft placement rule 5);
    TF's "Cannot assign a device" error when there is none."""
    req = group.request
    if not _has_details(req):
        found = [d for d in devices if d.device_type in group.types]
        if not found:
            raise _cannot_assign(
                op,
                "Node had no OpKernel registered to support this operation: "
                "Operation was %s and inputs were [%s]%s"
                % (op.type, ", ".join(t.dtype.name for t in op._inputs), _debug_info(group, types)),
            )
        return sorted(found, key=_sort_key)
    found = [d for d in _matching(req, devices) if d.device_type in group.types]
    if not found and soft:
        loose = req.copy()
        loose.type = None
        loose.id = None
        found = [d for d in _matching(loose, devices) if d.device_type in group.types]
    if found:
        return sorted(found, key=_sort_key)
    raise _unsatisfiable(op, group, devices, requests, types, has_cuda)


def _unsatisfiable(op, group, devices, requests, types, has_cuda):
    """Why no device matches the request of ``op``'s group, in TF's words."""
    own, req = requests[op], group.request
    debug = _debug_info(group, types)
    if own != req:
        return _cannot_assign(
            op,
            "Could not satisfy explicit device specification '%s' because the "
            "node {{colocation_node %s}} was colocated with a group of nodes that "
            "required incompatible device '%s'. All available devices [%s].%s"
            % (
                op.device,
                op.name,
                req.to_string(),
                ", ".join(sorted(d.name for d in devices)),
                debug,
            ),
        )
    if not _matching(own, devices):
        names = ", ".join(sorted(d.name for d in devices))
        gpu = ""
        if not has_cuda and (own.type or "").lower() == "gpu":
            gpu = " The requested device appears to be a GPU, but CUDA is not enabled."
        return _cannot_assign(
            op,
            "{{node %s}} was explicitly assigned to %s but available "
            "devices are [ %s ]. Make sure the device specification refers "
            "to a valid device.%s" % (op.name, op.device, names, gpu),
        )
    if own.type is not None:
        return _cannot_assign(
            op,
            "Could not satisfy explicit device specification '%s' "
            "because no supported kernel for %s devices is available.%s"
            "\nOp: %s\nRegistered kernels:\n%s"
            % (op.device, own.type, debug, op.type, registry.registered_kernels_text(op)),
        )
    return _cannot_assign(
        op, "Could not satisfy explicit device specification '%s'%s" % (op.device, debug)
    )


def _cannot_assign(op, reason):
    return errors.InvalidArgumentError(
        None,
        op,
        attach_node("Cannot assign a device for operation %s: %s" % (op.name, reason), op.name),
    )


def _debug_info(group, types):
    """TF's "Colocation Debug Info" block (only for groups of two or more ops)."""
    if len(group.members) < 2:
        return ""
    lines = [
        "",
        "Colocation Debug Info:",
        "Colocation group had the following types and supported devices: ",
    ]
    seen = set()
    for op in group.members:
        if op.type not in seen:
            seen.add(op.type)
            lines.append("%s: %s " % (op.type, " ".join(types[op])))
    lines += [
        "",
        "Colocation members, user-requested devices, and framework assigned devices, if any:",
    ]
    lines += ["  %s (%s) %s" % (op.name, op.type, op.device) for op in group.members]
    return "\n".join(lines) + "\n"
