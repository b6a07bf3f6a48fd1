"""Array kernels: constants, placeholders, identity, reshaping, joining and filling.

Book sections: "Operations and kernels" and "Placing Operations on Devices" (constants are the
"generator" nodes the placer puts next to their consumer).  Shape kernels compute on the host
(``tensor_ops.host_kernel``): a CUDA backend copies their operands over, as TF does for the
int32 shape operands it keeps in host memory.  Reshape, ExpandDims and Squeeze only work out a
shape on the host and hand back a view of their input (``backend.reshape``): on a card too,
nothing crosses to the host.
"""

import math

import numpy as np

from minitf.framework import dtypes as D
from minitf.framework import errors
from minitf.kernels.registry import ALL, FLOATS, GPU_ARRAY, NUMERIC, register
from minitf.kernels.tensor_ops import host_kernel, invalid_argument, shape_text
from minitf.lib.strided_slice import SliceError, masks_of, numpy_index


def _const(op, device):
    f = device.backend.constant(np.asarray(op.get_attr("value")))
    return lambda ctx, ins: (f(ctx),)


def _placeholder(op, device):
    dtype, shape = op.get_attr("dtype"), op.get_attr("shape")
    shape_part = (
        ""
        if shape.ndims is None
        else " and shape [%s]" % ",".join("?" if d is None else str(d) for d in shape.as_list())
    )
    msg = "You must feed a value for placeholder tensor '%s' with dtype %s%s" % (
        op.name,
        dtype.type_string,
        shape_part,
    )

    def compute(ctx, ins):
        raise errors.InvalidArgumentError(None, None, msg)

    return compute


register("Const", _const, cpu=ALL, gpu=GPU_ARRAY, persistent=True)
register("Placeholder", _placeholder, cpu="any", gpu="any")
register("NoOp", lambda op, device: lambda ctx, ins: (), cpu="any", gpu="any")


def _pass_through(op, device):
    """The kernel of ops that hand their input on unchanged (Identity, StopGradient,
    PreventGradient, an unfed PlaceholderWithDefault): they differ only in the graph."""
    return lambda ctx, ins: (ins[0],)


register("Identity", _pass_through, cpu=ALL, gpu=GPU_ARRAY)


def _dims(shape_tensor):
    """A shape tensor (int32 or int64) as a list of Python ints (``tolist``: a gradient step
    reads a dozen shapes, and ``int()`` per element costs ten times more)."""
    if type(shape_tensor) is np.ndarray and shape_tensor.ndim == 1:  # (nearly every one)
        return shape_tensor.tolist()
    return np.asarray(shape_tensor).reshape(-1).tolist()


_ONE_BYTE = np.zeros(1, np.int8)


def _proxy(shape):
    """An array of ``shape`` over one byte (every stride 0): numpy's shape rules, no data."""
    return np.ndarray(shape, np.int8, _ONE_BYTE, 0, (0,) * len(shape))


def _new_shape(x_shape: tuple, dims: list) -> tuple:
    """The shape Reshape gives a tensor of ``x_shape`` for the requested ``dims``: as they are
    when every one is given and the element counts agree (a step's reshapes), else as numpy
    works it out (one -1 inferred; ValueError when it cannot be done)."""
    if -1 not in dims and math.prod(dims) == math.prod(x_shape) and min(dims, default=0) >= 0:
        return tuple(dims)
    return _proxy(x_shape).reshape(dims).shape


def _reshape(op, device):
    """Reshape: a view of its input in the new shape (a card's too: TF's Reshape aliases its
    input's buffer); the shape operand is read on the host."""
    backend = device.backend

    def compute(ctx, ins):
        x, shape = ins
        x_shape = backend.shape(x)
        dims = _dims(backend.to_host(shape))
        try:
            new_shape = _new_shape(x_shape, dims)
        except ValueError:
            raise errors.InvalidArgumentError(
                None,
                None,
                "Input to reshape is a tensor with %d values, but the requested "
                "shape has %d" % (int(np.prod(x_shape)), int(np.prod(dims))),
            ) from None
        return (backend.reshape(x, new_shape),)

    return compute


def _expand_dims(op, device):
    backend = device.backend

    def compute(ctx, ins):
        axis = int(backend.to_host(ins[1]))
        shape = tuple(backend.shape(ins[0]))
        if -len(shape) - 1 <= axis <= len(shape):  # numpy's rule, without its Python wrapper
            axis %= len(shape) + 1
            return (backend.reshape(ins[0], shape[:axis] + (1,) + shape[axis:]),)
        return (backend.reshape(ins[0], np.expand_dims(_proxy(shape), axis).shape),)

    return compute


@host_kernel
def _concat(op, device):
    return lambda ctx, ins: (np.concatenate(ins[:-1], axis=int(ins[-1])),)


@host_kernel
def _pack(op, device):
    axis = op.get_attr("axis")
    return lambda ctx, ins: (np.stack(ins, axis=axis),)


@host_kernel
def _fill(op, device):
    np_dtype = op.get_attr("T").as_numpy_dtype

    def compute(ctx, ins):
        dims, value = _dims(ins[0]), ins[1]
        if not dims and type(value) is np_dtype:  # a scalar (the 1.0 tf.gradients starts
            return (value,)  # from) is its value: numpy scalars are immutable
        return (np.full(dims, value, dtype=np_dtype),)

    return compute


register("Reshape", _reshape, cpu=ALL, gpu=GPU_ARRAY)
register("ExpandDims", _expand_dims, cpu=ALL, gpu=GPU_ARRAY)
register("ConcatV2", _concat, cpu=ALL, gpu=GPU_ARRAY)
register("Pack", _pack, cpu=ALL, gpu=GPU_ARRAY)
register("Fill", _fill, cpu=ALL, gpu=GPU_ARRAY)


# -- the kernels gradients are built from ----------------------------------------------------


def _shape(op, device):
    """``Shape``, ``Size`` and ``Rank`` read a tensor's shape where it is, without copying it."""
    backend = device.backend
    np_dtype = np.int32 if op.type == "Rank" else op.get_attr("out_type").as_numpy_dtype
    if op.type == "Rank":
        return lambda ctx, ins: (backend.from_host(np.int32(len(backend.shape(ins[0])))),)
    if op.type == "Size":
        return lambda ctx, ins: (
            backend.from_host(np_dtype(int(np.prod(backend.shape(ins[0]), dtype=np.int64)))),
        )
    return lambda ctx, ins: (backend.from_host(np.array(backend.shape(ins[0]), dtype=np_dtype)),)


@host_kernel
def _filled_like(op, device):
    value = 0 if op.type == "ZerosLike" else 1
    return lambda ctx, ins: (np.full_like(ins[0], value),)


@host_kernel
def _tile(op, device):
    def compute(ctx, ins):
        x, multiples = ins
        reps = _dims(multiples)
        if len(reps) != np.ndim(x):
            raise errors.InvalidArgumentError(
                None,
                None,
                "Expected multiples argument to be a vector of length %d but got length %d"
                % (np.ndim(x), len(reps)),
            )
        return (_tiled(np.asarray(x), reps),)

    return compute


def _tiled(x: np.ndarray, reps: list) -> np.ndarray:
    """``np.tile(x, reps)`` for ``len(reps) == x.ndim``, as one broadcast copy: the result
    seen as shape ``(r0, s0, r1, s1, ...)`` is ``x`` seen as ``(1, s0, 1, s1, ...)``
    broadcast along the repeats (np.tile's Python makes one copy per axis)."""
    out = np.empty([d for r, s in zip(reps, x.shape) for d in (r, s)], x.dtype)
    out[...] = x.reshape([d for s in x.shape for d in (1, s)])
    return out.reshape([r * s for r, s in zip(reps, x.shape)])


def broadcast_reduction_axes(s0, s1):
    """TF's ``BroadcastGradientArgs`` on two shapes: for each, the axes of the broadcast result
    it was stretched along, which its gradient is summed over: every axis where it is 1 or
    missing (none at all when the shapes are equal)."""
    s0, s1 = [int(d) for d in s0], [int(d) for d in s1]
    try:
        rank = len(np.broadcast_shapes(tuple(s0), tuple(s1)))
    except ValueError:
        raise errors.InvalidArgumentError(
            None, None, "Incompatible shapes: %s vs. %s" % (shape_text(s0), shape_text(s1))
        ) from None
    if s0 == s1:
        return [], []
    return [[i for i, d in enumerate([1] * (rank - len(s)) + s) if d == 1] for s in (s0, s1)]


@host_kernel
def _broadcast_gradient_args(op, device):
    """The answers are kept per pair of shapes (a training step asks the same question every
    step): read-only arrays, which no kernel writes into (this kernel does not allocate)."""
    np_dtype = op.get_attr("T").as_numpy_dtype
    known = {}

    def compute(ctx, ins):
        key = (tuple(_dims(ins[0])), tuple(_dims(ins[1])))
        outs = known.get(key)
        if outs is None:
            outs = tuple(np.array(r, dtype=np_dtype) for r in broadcast_reduction_axes(*key))
            for r in outs:
                r.flags.writeable = False
            if len(known) >= _KNOWN_SHAPES:
                known.clear()
            known[key] = outs
        return outs

    return compute


_KNOWN_SHAPES = 64  # pairs of shapes a BroadcastGradientArgs kernel remembers


register("Shape", _shape, cpu=ALL, gpu=GPU_ARRAY)
register("Size", _shape, cpu=ALL, gpu=GPU_ARRAY)
register("Rank", _shape, cpu=ALL, gpu=GPU_ARRAY)
register("ZerosLike", _filled_like, cpu=ALL, gpu=GPU_ARRAY)
register("OnesLike", _filled_like, cpu=ALL, gpu=GPU_ARRAY)
register("Tile", _tile, cpu=ALL, gpu=GPU_ARRAY)
register(
    "BroadcastGradientArgs",
    _broadcast_gradient_args,
    cpu=(D.int32, D.int64),
    gpu=(D.int32, D.int64),
)
register("StopGradient", _pass_through, cpu=ALL, gpu=GPU_ARRAY)
register("PreventGradient", _pass_through, cpu=ALL, gpu=GPU_ARRAY)


@host_kernel
def _logical_not(op, device):
    return lambda ctx, ins: (np.logical_not(ins[0]),)


@host_kernel
def _where(op, device):
    return lambda ctx, ins: (np.argwhere(np.asarray(ins[0])).astype(np.int64),)


def _squeeze(op, device):
    axes = tuple(op.get_attr("squeeze_dims"))
    backend = device.backend

    def compute(ctx, ins):
        shape = backend.shape(ins[0])
        picked = tuple(a % max(len(shape), 1) for a in axes)
        bad = [a for a in picked if shape[a] != 1]
        if bad:
            raise errors.InvalidArgumentError(
                None,
                None,
                "Can not squeeze dim[%d], expected a dimension of 1, got %d"
                % (bad[0], shape[bad[0]]),
            )
        return (backend.reshape(ins[0], np.squeeze(_proxy(shape), axis=picked or None).shape),)

    return compute


@host_kernel
def _gather(op, device):
    def compute(ctx, ins):
        params, indices, axis = np.asarray(ins[0]), np.asarray(ins[1]), int(ins[2])
        limit = params.shape[axis]
        bad = indices[(indices < 0) | (indices >= limit)]
        if bad.size:
            raise errors.InvalidArgumentError(
                None, None, "indices = %d is not in [0, %d)" % (bad.reshape(-1)[0], limit)
            )
        return (np.take(params, indices, axis=axis),)

    return compute


def _slice_index(shape, begin, end, strides, masks):
    try:
        return numpy_index(
            shape, *(np.reshape(v, -1).tolist() for v in (begin, end, strides)), masks
        )
    except SliceError as e:
        raise invalid_argument(str(e)) from None


@host_kernel
def _strided_slice(op, device):
    """``StridedSlice``: numpy's indexing of ``lib/strided_slice.py``'s index, copied (the
    output never shares the input's buffer); ``StridedSliceGrad``: the gradient put where
    the slice took its values, zeros elsewhere."""
    masks = masks_of(op)

    def forward(ctx, ins):
        x = np.asarray(ins[0])
        index = _slice_index(x.shape, *ins[1:4], masks)
        return (np.array(x[index]),)

    def backward(ctx, ins):
        shape, dy = np.reshape(ins[0], -1).tolist(), np.asarray(ins[4])
        out = np.zeros(shape, dy.dtype)
        index = _slice_index(out.shape, *ins[1:4], masks)
        out[index] = dy.reshape(out[index].shape)
        return (out,)

    return forward if op.type == "StridedSlice" else backward


def _permutation(perm, dims):
    """TF's checks of a permutation of ``dims`` dimensions (Transpose, InvertPermutation)."""
    perm = [int(p) for p in np.reshape(perm, -1)]
    if len(perm) != dims:
        raise invalid_argument(
            "transpose expects a vector of size %d. But input(1) is a vector of size %d"
            % (dims, len(perm))
        )
    for d in perm:
        if not 0 <= d < dims:
            raise invalid_argument("%d is out of range [0 .. %d)" % (d, dims))
    for i in range(dims):
        if i not in perm:
            text = ",".join(str(p) for p in perm)
            raise invalid_argument("%d is missing from {%s}." % (i, text))
    return perm


@host_kernel
def _transpose(op, device):
    """``Transpose`` (a contiguous copy, never a view of the input) and
    ``InvertPermutation``."""
    if op.type == "InvertPermutation":
        return lambda ctx, ins: (
            np.argsort(_permutation(ins[0], np.size(ins[0]))).astype(np.asarray(ins[0]).dtype),
        )

    def compute(ctx, ins):
        x = np.asarray(ins[0])
        return (np.ascontiguousarray(np.transpose(x, _permutation(ins[1], x.ndim))),)

    return compute


@host_kernel
def _split(op, device):
    """``Split`` (equal pieces), ``SplitV`` (given sizes, one may be -1) and ``Unpack`` (the
    slices along an axis); every piece a copy, never a view of the input."""
    if op.type == "Unpack":
        num, axis = op.get_attr("num"), op.get_attr("axis")

        def unpack(ctx, ins):
            x = np.asarray(ins[0])
            if x.shape[axis] != num:
                raise invalid_argument(
                    "Input shape axis %d must equal %d, got shape %s"
                    % (axis, num, shape_text(x.shape))
                )
            return tuple(np.array(p) for p in np.moveaxis(x, axis, 0))

        return unpack
    num = op.get_attr("num_split")

    def compute(ctx, ins):
        if op.type == "Split":
            axis, x = int(ins[0]), np.asarray(ins[1])
            size = x.shape[axis % x.ndim]
            if size % num:
                raise invalid_argument(
                    "Number of ways to split should evenly divide the split dimension, but got "
                    "split_dim %d (size = %d) and num_split %d" % (axis, size, num)
                )
            cuts = [size // num * i for i in range(1, num)]
        else:
            x, axis = np.asarray(ins[0]), int(ins[2])
            cuts = _split_v_cuts(np.reshape(ins[1], -1).tolist(), x.shape[axis % x.ndim])
        return tuple(np.array(p) for p in np.split(x, cuts, axis=axis))

    return compute


def _split_v_cuts(sizes, total):
    if sizes.count(-1) == 1:
        sizes[sizes.index(-1)] = total - (sum(sizes) + 1)
    if sum(sizes) != total or min(sizes) < 0:
        raise invalid_argument(
            "Determined shape must either match input shape along split_dim exactly if fully "
            "specified, or be less than the size of the input along split_dim if not fully "
            "specified.  Got: %d" % sum(sizes)
        )
    return np.cumsum(sizes)[:-1].tolist()


register("LogicalNot", _logical_not, cpu="any", gpu="any")
register("Where", _where, cpu=NUMERIC + (D.bool,), gpu=FLOATS + (D.int32, D.int64, D.bool))
register("Squeeze", _squeeze, cpu=ALL, gpu=GPU_ARRAY)
register("GatherV2", _gather, cpu=ALL, gpu=GPU_ARRAY)
register("Transpose", _transpose, cpu=ALL, gpu=GPU_ARRAY, allocates=True)
register("InvertPermutation", _transpose, cpu=(D.int32, D.int64), gpu=(D.int32, D.int64))
register("Split", _split, cpu=ALL, gpu=GPU_ARRAY, allocates=True)
register("SplitV", _split, cpu=ALL, gpu=GPU_ARRAY, allocates=True)
register("Unpack", _split, cpu=ALL, gpu=GPU_ARRAY, allocates=True)
register("StridedSlice", _strided_slice, cpu=ALL, gpu=GPU_ARRAY, allocates=True)
register("StridedSliceGrad", _strided_slice, cpu=ALL, gpu=GPU_ARRAY, allocates=True)
# PlaceholderWithDefault: its input, unless fed (a fed tensor is cut from the step graph)
register(
    "PlaceholderWithDefault",
    _pass_through,
    cpu=ALL,
    gpu=GPU_ARRAY,
)


def _assert(op, device):
    """``Assert``: ``assertion failed: [<data 0>] [<data 1>]`` when the condition is false,
    each data tensor's first ``summarize`` elements."""
    summarize = op.get_attr("summarize")

    def compute(ctx, ins):
        if not np.all(ins[0]):
            parts = ["[%s]" % _summarize(v, summarize) for v in ins[1:]]
            raise errors.InvalidArgumentError(None, None, "assertion failed: " + " ".join(parts))
        return ()

    return compute


def _summarize(value, summarize=3):
    """A tensor as TF's ``Assert`` prints it: its first ``summarize`` elements, ``...`` if there
    are more; bools as 1/0, floats in the shortest form that reads back (``2.25``, ``1``)."""
    value = np.asarray(value)
    flat = value.ravel()
    text = " ".join(_element_text(v) for v in flat[:summarize])
    return text + "..." if flat.size > summarize else text


def _element_text(v):
    if isinstance(v, bytes):
        return v.decode()
    if isinstance(v, (np.bool_, bool)):
        return "1" if v else "0"
    if isinstance(v, np.floating):
        short, long = (6, 9) if v.dtype.itemsize <= 4 else (15, 17)
        text = "%.*g" % (short, v)
        return text if type(v)(text) == v or v != v else "%.*g" % (long, v)
    return str(v.item() if isinstance(v, np.generic) else v)


register("Assert", _assert, cpu="any")


@host_kernel
def _dynamic_stitch(op, device):
    """``out[indices[m][i]] = data[m][i]`` in order of m, on the host (TF keeps the indices
    there; a shape's pieces in a gradient)."""

    def compute(ctx, ins):
        n = len(ins) // 2
        indices = [np.asarray(i) for i in ins[:n]]
        data = [np.asarray(d) for d in ins[n:]]
        tail = data[0].shape[indices[0].ndim :]
        for m, (i, d) in enumerate(zip(indices, data)):
            if d.shape[: i.ndim] != i.shape or d.shape[i.ndim :] != tail:
                raise invalid_argument(
                    "data[%d].shape = %s does not start with indices[%d].shape = %s"
                    % (m, shape_text(d.shape), m, shape_text(i.shape))
                )
            if i.size and i.min() < 0:
                raise invalid_argument("indices[%d] is out of range" % int(np.argmin(i)))
        first = max((int(i.max()) + 1 for i in indices if i.size), default=0)
        out = np.zeros((first,) + tail, dtype=data[0].dtype)
        for i, d in zip(indices, data):
            out[i.reshape(-1)] = d.reshape((-1,) + tail)
        return (out,)

    return compute


register("DynamicStitch", _dynamic_stitch, cpu=ALL, gpu=GPU_ARRAY, allocates=True)
