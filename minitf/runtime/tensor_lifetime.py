"""How long a step's tensors live, and which buffers an op may write its result into.

Book section: "Parallel Execution" (and "Managing the GPU RAM": what a step holds on a card).
TF's executor hands each consumer of a tensor its own reference; when the last consumer of the
step has run, the tensor's buffer goes back to its allocator, so a chain of a thousand matmuls
holds two or three intermediate results at a time, not a thousand.  An element-wise op whose
input dies with it writes its result into that input's buffer (``forward_input_or_allocate_output``
in TF), so a chain of element-wise ops allocates nothing new.  minitf does both:

* :class:`Lifetimes` is computed once per execution plan: how many reads each node's outputs
  get in a step (``uses``), which nodes are fetched (``pinned``: they live until the step ends),
  and which input each node may forward (``forward``).  A value handed to a ``_Send`` whose
  ``_Recv`` is in the same plan lives until that ``_Recv`` has it (``kept_until``).
* :meth:`Lifetimes.deaths` gives the serial driver, which runs nodes in one fixed order, the
  nodes whose outputs die after each node; the threaded driver counts reads down as they happen.
* :class:`StepMemory` charges a step's tensors on a device with an allocator (an emulated or
  real GPU card) from the moment their producer ran until they die; an output that *is* one of
  the node's inputs (a forwarded buffer, an ``Identity``) shares its buffer's allocation.

An input may be forwarded only when the step surely holds the buffer's only reference: its
producer's kernel ``allocates`` (registered so: new buffers, no reference kept to its inputs),
every other reader of it allocates too (no ``Identity`` alias, no ``_Send`` keeping it), it is
not fetched, the node reads it once, and the node is its last reader.  The node itself need not
allocate: ``ApplyGradientDescent`` returns its variable and uses a dying gradient's buffer as
scratch space.  Scalars are immutable numpy
scalars and are never forwarded.
"""

from __future__ import annotations

import threading

from minitf.framework.resource_mgr import VariableRef


class Lifetimes:
    """The static part of tensor lifetime for one plan (see the module docstring).

    ``inputs[i]``: node ``i``'s (source, output) data edges; ``allocates[i]``: whether its
    kernel allocates its outputs and keeps no reference to its inputs; ``forwards[i]``: the
    input positions its kernel can write its result into; ``scalar[i]``: its outputs are
    statically scalars; ``fetched``: fetched nodes; ``persistent[i]``: node ``i``'s outputs are
    its kernel's own (a constant); ``send_recv``: (``_Send`` node, ``_Recv`` node) pairs of the
    plan; ``aliases[i]``: node ``i`` outputs its input 0 itself (an ``Identity``: what
    ``tf.control_dependencies`` and the gradients' ``tuple`` put between a gradient and its
    update).  Fetched and persistent nodes are ``pinned``: their outputs never die in a step."""

    __slots__ = ("uses", "pinned", "persistent", "forward", "kept_until")

    def __init__(
        self,
        inputs,
        allocates,
        forwards,
        scalar,
        fetched,
        persistent=None,
        send_recv=(),
        aliases=None,
    ):
        n = len(inputs)
        uses = [0] * n
        readers: list[list[int]] = [[] for _ in range(n)]
        for i, src in enumerate(inputs):
            for s, _ in src:
                uses[s] += 1
                readers[s].append(i)
        self.kept_until: dict[int, int] = {}  # _Recv node -> the node whose value it releases
        for send, recv in send_recv:
            for s, _ in inputs[send]:
                uses[s] += 1
                self.kept_until[recv] = s
        self.uses = uses
        self.persistent = list(persistent) if persistent is not None else [False] * n
        self.pinned = list(self.persistent)
        for s in fetched:
            self.pinned[s] = True
        self.forward = [-1] * n
        # node -> the node whose output it passes on (an alias), else -1
        alias_of = [
            inputs[j][0][0] if aliases is not None and aliases[j] and inputs[j] else -1
            for j in range(n)
        ]
        for i, src in enumerate(inputs):
            if scalar[i]:
                continue
            for p in forwards[i]:
                s = src[p][0] if p < len(src) else None
                if s is not None and self._forwardable(s, i, src, readers, allocates, alias_of):
                    self.forward[i] = p
                    break

    def _forwardable(self, s, i, src, readers, allocates, alias_of):
        if sum(1 for t, _ in src if t == s) != 1:
            return False
        reader = i
        # back through Identity nodes to the buffer's producer, each link read by the next
        # alone and not fetched
        while alias_of[s] >= 0:
            if readers[s] != [reader] or self.pinned[s]:
                return False
            reader, s = s, alias_of[s]
        if self.pinned[s] or not allocates[s]:
            return False
        if reader != i:  # reached through aliases: the producer's one reader is the first link
            return readers[s] == [reader]  # (the threaded driver counts down i's input only)
        # every other reader keeps no reference (i itself may not allocate: an update writing
        # into a gradient that dies with it)
        return all(allocates[r] or r == i for r in readers[s])

    def deaths(self, order, inputs, transfers=True):
        """Per node (indexed by node), the nodes whose outputs die once it has run in
        ``order``: its inputs it read last, and itself if nothing reads it; None if none.
        ``transfers``: a value handed to a ``_Send`` dies at its ``_Recv`` (False: at its last
        reader, for drivers that count the ``_Recv`` apart: ``device_programs``)."""
        last = {}
        for i in order:
            for s, _ in inputs[i]:
                last[s] = i
        for recv, s in self.kept_until.items() if transfers else ():
            last[s] = recv
        dead: dict[int, list[int]] = {}
        for i in order:
            if self.uses[i] == 0 and not self.pinned[i]:
                dead[i] = [i]
        for s, i in last.items():
            if not self.pinned[s]:
                dead.setdefault(i, []).append(s)
        out: list[tuple | None] = [None] * len(self.uses)
        for i, d in dead.items():
            out[i] = tuple(d)
        return out


def charge(allocator, name, value):
    """Allocates ``value``'s bytes on ``allocator`` for op ``name``; returns the token, or None
    for a value that takes nothing there (a variable reference: its variable accounts for its
    own storage; a value without bytes)."""
    if type(value) is VariableRef:
        return None
    nbytes = int(getattr(value, "nbytes", 0) or 0)
    if not nbytes:
        return None
    return allocator.allocate(
        nbytes, name, getattr(value, "shape", None), getattr(value, "dtype", None)
    )


class _Buffer:
    """One allocation of a step: freed when the last output sharing it dies."""

    __slots__ = ("allocator", "token", "value", "refs")

    def __init__(self, allocator, token, value):
        self.allocator, self.token, self.value, self.refs = allocator, token, value, 1


class StepMemory:
    """The allocations of one step's tensors on devices with an allocator (used by the
    threads of the step's devices at once: one lock keeps each buffer's count whole)."""

    __slots__ = ("_held", "_by_id", "_lock")

    def __init__(self):
        self._held: dict[int, list[_Buffer]] = {}  # node -> the buffers of its outputs
        self._by_id: dict[tuple, _Buffer] = {}  # (id(value), allocator) -> its live buffer
        self._lock = threading.Lock()

    def account(self, i, allocator, name, outs):
        """Charges node ``i``'s outputs to ``allocator``; an output that is a live value of the
        step on the same allocator (a forwarded input, an alias) shares that allocation (a
        value handed to another card is charged there again: a copy in TF)."""
        held = []
        with self._lock:
            for v in outs:
                key = (id(v), allocator)
                buf = self._by_id.get(key)
                if buf is not None and buf.value is v:
                    buf.refs += 1
                else:
                    token = charge(allocator, name, v)
                    if token is None:
                        continue
                    buf = self._by_id[key] = _Buffer(allocator, token, v)
                held.append(buf)
            if held:
                self._held[i] = held

    def release(self, i):
        """Node ``i``'s outputs died: frees the buffers nothing else shares."""
        with self._lock:
            for buf in self._held.pop(i, ()):
                buf.refs -= 1
                if buf.refs == 0:
                    buf.allocator.free(buf.token)
                    del self._by_id[(id(buf.value), buf.allocator)]
                    buf.value = None

    def release_nodes(self, nodes):
        """``release`` of one node (an int) or of each of a tuple of nodes."""
        if nodes.__class__ is int:
            self.release(nodes)
        else:
            for i in nodes:
                self.release(i)

    def release_all(self):
        """The step ended: frees what is left (fetched values, a failed step's tensors)."""
        for i in list(self._held):
            self.release(i)

    def live_nodes(self):
        """The nodes whose outputs are still charged (for tests and the widgets)."""
        return sorted(self._held)
