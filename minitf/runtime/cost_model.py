"""How long a node takes on a virtual clock: the simulator's cost model.

Book section: "Parallel Execution" (Figure 12-5).  ``simulate.py`` replays a step with these
durations instead of running kernels, so its timelines are the same on every machine.  A node's
cost depends on its op type and static shapes only; a tensor crossing devices takes
:func:`transfer_micros`; a splittable kernel splits as the real one would
(:func:`split_count`, from the numpy backend's own rules).
"""

from __future__ import annotations

import math

from minitf.kernels import numpy_ops
from minitf.runtime import pools

BASE_MICROS = 1
"""Every op costs at least this many virtual microseconds (launching a kernel is not free)."""

CPU_ELEMENTS_PER_MICRO = 1000
"""Elementwise throughput of a CPU device: 1000 elements per microsecond (1 G elements/s)."""

CPU_FLOPS_PER_MICRO = 10000
"""Matrix-multiply throughput of a CPU device: 10 000 flops per microsecond (10 GFLOP/s)."""

GPU_SPEEDUP = 10
"""A GPU device is this many times faster than a CPU device, for elementwise ops and matmuls."""

FREE_OPS = frozenset(
    {
        "Const",
        "Placeholder",
        "NoOp",
        "Identity",
        "VariableV2",
        "_Arg",
        "IsVariableInitialized",
        "Reshape",
        "ExpandDims",
        "Shape",
        "Rank",
        "Size",
        "StopGradient",
        "_Send",
        "_Recv",
    }
)
"""Op types costing only :data:`BASE_MICROS`: they hand over a buffer without touching it
(a ``_Recv`` waits for its tensor besides: :func:`transfer_micros`)."""

REDUCTION_OPS = frozenset({"Sum", "Mean", "Max", "Min", "Prod", "ArgMax", "ArgMin"})
"""Op types whose work is proportional to their *input* (they read every element once)."""

CHUNK_OVERHEAD_MICROS = 2
"""What each chunk of a split node adds to its share of the work (handing it to a thread)."""

TRANSFER_LATENCY_MICROS = 10
"""Fixed cost of one cross-device copy."""

TRANSFER_BYTES_PER_MICRO = 8000
"""Cross-device bandwidth: 8000 bytes per microsecond (8 GB/s, a PCIe 3.0 x16 link)."""


def num_elements(shape) -> int:
    """Elements of a static shape, unknown dimensions (and unknown rank) counting as 1."""
    if shape.ndims is None:
        return 1
    total = 1
    for d in shape.as_list():
        total *= 1 if d is None else d
    return total


def output_bytes(node, k: int) -> int:
    """Bytes of output ``k`` of a step graph node from its static dtype and shape (0 when the
    shape is not fully known)."""
    dtype, shape = node.outputs[k]
    n = shape.num_elements()
    return 0 if n is None else n * dtype.base_dtype.size


def transfer_micros(nbytes: int) -> int:
    """How long a tensor of ``nbytes`` takes to cross from one device to another."""
    return TRANSFER_LATENCY_MICROS + -(-nbytes // TRANSFER_BYTES_PER_MICRO)


def device_type(device_name: str) -> str:
    """``"GPU"`` for ``/job:localhost/replica:0/task:0/device:GPU:1``."""
    return pools.short_device(device_name).split(":")[0].upper()


def _dims2(shape, transposed):
    """(rows, cols) of a matmul operand as the product sees it; unknown dims count as 1."""
    if shape.ndims != 2:
        return 1, 1
    r, c = (1 if d is None else d for d in shape.as_list())
    return (c, r) if transposed else (r, c)


def _input_shape(node, k):
    """Static shape of input ``k`` of a step graph Node (or of a graph Operation)."""
    if hasattr(node, "_inputs"):
        return node._inputs[k].shape
    src, slot = node.inputs[k]
    return src.outputs[slot][1]


def _output_shapes(node):
    if hasattr(node, "_outputs"):
        return [t.shape for t in node._outputs]
    return [shape for _, shape in node.outputs]


def _matmul_dims(node):
    m, k = _dims2(_input_shape(node, 0), node.get_attr("transpose_a"))
    _, n = _dims2(_input_shape(node, 1), node.get_attr("transpose_b"))
    return m, k, n


class CostModel:
    """How long a node takes, in virtual microseconds, from its type and static shapes only.

    * ops in :data:`FREE_OPS` (constants, feeds, ``NoOp``, ``Identity``, sends ...):
      :data:`BASE_MICROS`;
    * ``MatMul``: ``BASE_MICROS + ceil(2*m*k*n / flops per microsecond)`` where a CPU device
      does :data:`CPU_FLOPS_PER_MICRO` and a GPU device :data:`GPU_SPEEDUP` times more;
    * reductions (:data:`REDUCTION_OPS`): proportional to the elements of their input;
      ``AddN``: to the elements of all its inputs;
    * every other op (elementwise math, casts, fills, assignments, random numbers ...):
      ``BASE_MICROS + ceil(output elements / elements per microsecond)``, a CPU device doing
      :data:`CPU_ELEMENTS_PER_MICRO` and a GPU device :data:`GPU_SPEEDUP` times more.

    Unknown dimensions count as 1.  ``overrides`` maps a node name or an op type to a fixed
    number of microseconds (a node name wins over its type), e.g.
    ``CostModel(overrides={"MatMul": 500, "loss": 20})``.
    """

    def __init__(self, overrides=None):
        overrides = dict(overrides or {})
        for key, value in overrides.items():
            if not isinstance(key, str):
                raise TypeError(
                    "CostModel overrides are keyed by node name or op type (str), got %r" % (key,)
                )
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not math.isfinite(value)
                or value < 0
            ):
                raise ValueError(
                    "CostModel override for %r must be a number of microseconds "
                    ">= 0, got %r" % (key, value)
                )
        self.overrides = {k: int(round(v)) for k, v in overrides.items()}

    @staticmethod
    def speed(device_type):
        """(elements per microsecond, flops per microsecond) of a device type."""
        factor = GPU_SPEEDUP if device_type == "GPU" else 1
        return CPU_ELEMENTS_PER_MICRO * factor, CPU_FLOPS_PER_MICRO * factor

    def micros(self, node, device_type):
        """The duration of ``node`` (a step graph Node, or an Operation of the graph) on a
        device of type ``device_type``."""
        for key in (node.name, node.type):
            if key in self.overrides:
                return self.overrides[key]
        if node.type in FREE_OPS:
            return BASE_MICROS
        per_elem, per_flop = self.speed(device_type)
        if node.type == "MatMul":
            m, k, n = _matmul_dims(node)
            return BASE_MICROS + -(-2 * m * k * n // per_flop)
        if node.type in REDUCTION_OPS:
            work = num_elements(_input_shape(node, 0)) if node.inputs else 1
        elif node.type == "AddN":
            work = sum(num_elements(_input_shape(node, k)) for k in range(len(node.inputs)))
        else:
            work = max([num_elements(shape) for shape in _output_shapes(node)] or [1])
        return BASE_MICROS + -(-work // per_elem)

    def __repr__(self):
        return "CostModel(overrides=%r)" % (self.overrides,)


def split_count(node, intra_threads: int) -> int:
    """Into how many chunks the (splittable) kernel of ``node`` cuts its work on an intra-op
    pool of ``intra_threads`` threads; 0 when it runs in one piece.

    The kernels decide from the actual operands (``numpy_ops.splits_matmul`` and
    ``splits_elementwise``); the simulator from the static shapes, so an op with an unknown
    dimension never splits here.
    """
    if intra_threads < 1:
        return 0
    shapes = [_input_shape(node, k) for k in range(len(node.inputs))]
    if node.type == "MatMul":
        if not all(s.is_fully_defined() for s in shapes) or shapes[0].ndims != 2:
            return 0
        m, k, n = _matmul_dims(node)
        if not numpy_ops.splits_matmul(m, k, n):
            return 0
        return pools.chunk_count(numpy_ops.matmul_split_length(m, n), intra_threads)
    if (
        len(shapes) == 2
        and all(s.is_fully_defined() for s in shapes)
        and shapes[0].as_list() == shapes[1].as_list()
    ):
        n = shapes[0].num_elements()
        if numpy_ops.splits_elementwise(n):
            return pools.chunk_count(n, intra_threads)
    return 0
