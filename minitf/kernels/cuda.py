"""GPU kernels written with numba.cuda, and the launcher thread that runs them.

Book sections: "Installation" (what a GPU build adds) and "Operations and kernels" (the
GPU kernel of an op).  This module is independent of the rest of minitf: it works on numba
device arrays and numpy dtypes only, and the runtime imports it lazily when a device runs
its kernels through CUDA (a real card, or Numba's simulator with
``MINITF_GPU_BACKEND=cudasim``).

Conventions
-----------
* Every function that touches the GPU takes the ``stream`` it must use as its first
  argument and is meant to run on the device's :class:`CudaLauncher` thread, e.g.
  ``launcher.call(binary, "add", a, b)``.  Kernels are launched asynchronously on that
  stream; only :func:`to_host` waits for it.
* Device arrays are C-contiguous numba device arrays (what :func:`to_device` and every
  kernel here produce).  Results are new arrays, except for :func:`assign`.
* Dtypes follow numpy: ``binary`` computes in ``np.result_type`` of its inputs, every other
  function keeps its input's dtype.  float16 is computed (and accumulated) in float32 and
  stored back as float16 (a floordiv rounds its quotient to float16 before the floor, as
  TF and numpy do).
* Kernels are written MiniTorch-style: an elementwise op is a scalar function (plain
  Python, e.g. ``_binary_fn``) plus a call to one factory, :func:`_elementwise`, which
  compiles it as a device function and wraps it in the shared grid-stride loop; matmul
  and reduce have their own factories.  Kernels are specialised per op, dtype family and
  block size, and cached, so each variant is compiled once per process on a real GPU.

Performance notes (the code is written for real hardware; the simulator only checks it)
----------------------------------------------------------------------------------------
* Elementwise kernels (all built by ``_elementwise``) use one thread per output element
  with a grid-stride loop, so a bounded grid covers any size and consecutive threads touch
  consecutive addresses.  Broadcasting is done by index arithmetic with stride 0 on
  broadcast dimensions; the shapes and strides travel in one small int64 device array.
  The scalar functions (and matmul's tile loads) are device functions, which the CUDA
  compiler inlines: the kernels' PTX has no calls left.  ``add_n`` accumulates in place
  with the binary ``add`` kernel (``out`` passed as its first input too).
* ``matmul`` stages TILE x TILE tiles of both operands in shared memory; transposed
  operands are read in their stored layout (so the global loads stay coalesced) and
  transposed while being written to shared memory (``_load_tile_transposed``); the tiles
  are padded by one column to avoid shared-memory bank conflicts.
* ``reduce`` gathers the reduced elements by strides (no transposed copy) and reduces
  them with a shared-memory tree; each row of a 2-D block reduces one output element.
* Under the simulator (``NUMBA_ENABLE_CUDASIM=1``) blocks have at most 64 threads and
  TILE is 8.  The simulator runs one Python thread per CUDA thread and is slow, mostly
  at ``syncthreads`` barriers; lowering ``sys.setswitchinterval`` speeds it up a lot.
"""

import math
import os
import queue
import threading

import numpy as np
from numba import cuda

from minitf.kernels import cuda_launch, cudasim_shared, tensor_ops

try:  # numba-cuda (the NVIDIA package)
    from numba.cuda.np import numpy_support as _numpy_support
except ImportError:  # pragma: no cover - numba's built-in CUDA target
    from numba.np import numpy_support as _numpy_support


SIMULATOR = cuda_launch.SIMULATOR
if SIMULATOR:
    cudasim_shared.apply()  # the simulator's shared arrays, made race-free


def _quiet_occupancy_warnings():
    """numba-cuda warns at every launch of fewer than 128 blocks; minitf sizes each grid to
    its data, so a small op (a bias add, a loss) would print one on every step, where TF
    prints nothing.  Off unless ``NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS`` is set (numba's own
    switch, which its compiler re-reads from the environment)."""
    os.environ.setdefault("NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS", "0")
    try:
        from numba.cuda.core import config
    except ImportError:  # pragma: no cover - numba's built-in CUDA target
        from numba.core import config
    config.reload_config()


_quiet_occupancy_warnings()

#: side of a matmul tile; a matmul block has TILE x TILE threads
TILE = 8 if SIMULATOR else 16
#: threads per block of the elementwise kernels
ELEMENTWISE_THREADS = 32 if SIMULATOR else 256
#: most blocks an elementwise launch uses (grid-stride loops cover the rest)
MAX_BLOCKS = 2 if SIMULATOR else 4096
#: most threads in a reduction block (a power of two)
REDUCE_THREADS = 64 if SIMULATOR else 256
#: most blocks a reduction or matmul launch uses along one grid axis
MAX_REDUCE_BLOCKS = 1 if SIMULATOR else 4096
MAX_MATMUL_BLOCKS = 4 if SIMULATOR else 1024
#: a reduction of few outputs over many elements first sums chunks of at least this many
#: elements each, into at most PARTIAL_ROWS partial sums (then sums those): a full sum then
#: spreads over many blocks instead of one
REDUCE_CHUNK = 16 if SIMULATOR else 4096
PARTIAL_ROWS = 8 if SIMULATOR else 2048

# the backend surface's functions (``tensor_ops``), and a copy on the card
BINARY_OPS = tensor_ops.ZIP_FNS
UNARY_OPS = tensor_ops.MAP_FNS + ("identity",)
REDUCE_OPS = tensor_ops.REDUCE_FNS


# ---------------------------------------------------------------------------------------
# The launcher thread
# ---------------------------------------------------------------------------------------


class _Pending:
    """The result slot of one call: filled by the launcher thread, read by the caller, who
    waits on ``ready``, a lock held until the result is in (the cheapest one-shot signal
    between two threads: one semaphore, where an Event is a Condition over a lock)."""

    __slots__ = ("ready", "result", "error")

    def __init__(self):
        self.ready = threading.Lock()
        self.ready.acquire()
        self.result = None
        self.error = None


_STOP = object()


class CudaLauncher:
    """One daemon thread that makes every CUDA call for one device.

    The simulator only tolerates CUDA calls from a single thread, and on real hardware a
    CUDA context is current per thread, so a device funnels all its work through here.
    ``call(fn, *args)`` runs ``fn(stream, *args)`` on the thread, with the launcher's own
    stream (created on that thread), and returns the result or re-raises the exception in
    the caller.  A call made from the launcher thread itself runs directly.
    """

    def __init__(self, device_index=0, name=None):
        self.device_index = int(device_index)
        self._queue = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._closed = False
        self._stream = None
        self._started = threading.Event()
        self._start_error = None
        self._thread = threading.Thread(
            target=self._run,
            name=name or "minitf-cuda-launcher-%d" % self.device_index,
            daemon=True,
        )
        self._thread.start()
        self._started.wait()
        if self._start_error is not None:
            self._thread.join(timeout=5.0)
            self._closed = True
            raise self._start_error

    # -- the thread ----------------------------------------------------------------------

    def _run(self):
        try:
            if not SIMULATOR or self.device_index != 0:
                cuda.select_device(self.device_index)
            self._stream = cuda.stream()
        except BaseException as exc:  # reported to the constructor
            self._start_error = exc
            self._started.set()
            return
        self._started.set()
        while True:
            item = self._queue.get()
            if item is _STOP:
                break
            fn, args, kwargs, pending = item
            try:
                pending.result = fn(self._stream, *args, **kwargs)
            except BaseException as exc:  # handed to the caller
                pending.error = exc
            finally:
                pending.ready.release()
        try:
            self._stream.synchronize()
        except Exception:  # pragma: no cover - best effort at shutdown
            pass

    # -- the public side -----------------------------------------------------------------

    @property
    def stream(self):
        """The launcher's CUDA stream (use it only from the launcher thread)."""
        return self._stream

    @property
    def closed(self):
        return self._closed

    @property
    def thread(self):
        return self._thread

    def call(self, fn, *args, timeout=None, **kwargs):
        """Run ``fn(stream, *args, **kwargs)`` on the launcher thread; return its result.

        Raises ``RuntimeError`` if the launcher is closed, ``TimeoutError`` if ``timeout``
        seconds pass first, or whatever ``fn`` raised.
        """
        if threading.current_thread() is self._thread:
            return fn(self._stream, *args, **kwargs)
        pending = _Pending()
        with self._lock:
            if self._closed:
                raise RuntimeError("CudaLauncher for device %d is closed" % self.device_index)
            self._queue.put((fn, args, kwargs, pending))
        if not pending.ready.acquire(timeout=-1 if timeout is None else timeout):
            raise TimeoutError(
                "CUDA call %s did not finish within %s s" % (getattr(fn, "__name__", fn), timeout)
            )
        if pending.error is not None:
            raise pending.error
        return pending.result

    def close(self, timeout=10.0):
        """Stop the thread after the calls already queued; later calls raise RuntimeError."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._queue.put(_STOP)
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return "<CudaLauncher device=%d%s>" % (self.device_index, " closed" if self._closed else "")


# ---------------------------------------------------------------------------------------
# Host-side helpers
# ---------------------------------------------------------------------------------------


def _numba_type(np_dtype):
    return _numpy_support.from_dtype(np.dtype(np_dtype))


def _compute_dtype(np_dtype):
    """The dtype arithmetic is done in: float16 widens to float32."""
    np_dtype = np.dtype(np_dtype)
    return np.dtype(np.float32) if np_dtype == np.float16 else np_dtype


def _accumulate_dtype(np_dtype):
    """The dtype sums are accumulated in."""
    np_dtype = np.dtype(np_dtype)
    if np_dtype.kind == "f":
        return _compute_dtype(np_dtype)
    if np_dtype.kind == "u":
        return np.dtype(np.uint64)
    if np_dtype.kind == "i":
        return np.dtype(np.int64)
    return np_dtype


def _check_numeric(np_dtype, what):
    np_dtype = np.dtype(np_dtype)
    if np_dtype.kind not in "iuf":
        raise TypeError("%s: unsupported dtype %s on the GPU" % (what, np_dtype))
    return np_dtype


def _size(shape):
    n = 1
    for d in shape:
        n *= int(d)
    return n


def _contiguous_strides(shape):
    """Element strides of a C-contiguous array of ``shape``."""
    strides = [1] * len(shape)
    acc = 1
    for d in range(len(shape) - 1, -1, -1):
        strides[d] = acc
        acc *= int(shape[d])
    return strides


def _empty(stream, shape, dtype):
    return cuda.device_array(tuple(int(d) for d in shape), dtype=np.dtype(dtype), stream=stream)


_metas: dict = {}  # (stream, values) -> device array: a step's shapes repeat every step
_METAS_KEPT = 4096


def _meta(stream, values):
    """Shapes and strides for a kernel, as one small int64 device array, uploaded once per
    stream and list of values (kernels only read it; an upload costs more than a launch)."""
    key = (stream, tuple(values))
    dev = _metas.get(key)
    if dev is None:
        if len(_metas) >= _METAS_KEPT:
            _metas.clear()
        host = np.array(list(values) or [0], dtype=np.int64)
        dev = _metas[key] = cuda.to_device(host, stream=stream)
    return dev


def _launch_1d(n):
    threads = ELEMENTWISE_THREADS
    blocks = max(1, min(MAX_BLOCKS, (n + threads - 1) // threads))
    return blocks, threads


def _next_pow2(n):
    p = 1
    while p < n:
        p *= 2
    return p


# ---------------------------------------------------------------------------------------
# Transfers
# ---------------------------------------------------------------------------------------


def to_device(stream, host_array):
    """Copy a numpy array (or scalar) to a new device array."""
    host = np.asarray(host_array)
    if not host.flags.c_contiguous:
        host = np.ascontiguousarray(host)  # (never for 0-d arrays: it would make them 1-d)
    if host.dtype.kind not in "biuf":
        raise TypeError("cannot put dtype %s on a CUDA device" % host.dtype)
    return cuda.to_device(host, stream=stream)


def to_host(stream, dev_array):
    """Copy a device array back to a new numpy array; waits for the stream."""
    out = dev_array.copy_to_host(stream=stream)
    stream.synchronize()
    return out


def device_copy(stream, dev_array):
    """A new device array with the same contents (a device-to-device copy)."""
    out = _empty(stream, dev_array.shape, dev_array.dtype)
    if dev_array.size:
        out.copy_to_device(dev_array, stream=stream)
    return out


# ---------------------------------------------------------------------------------------
# Elementwise kernels: one factory; an op is a scalar function plus a call to it
# ---------------------------------------------------------------------------------------

_factory_lock = threading.Lock()
_kernels = {}


def _cached(key, build):
    with _factory_lock:
        kernel = _kernels.get(key)
        if kernel is None:
            kernel = _kernels[key] = build()
    return kernel


@cuda.jit(device=True)
def _broadcast_offsets(i, meta, ndim):
    """The offsets in ``a`` and ``b`` of output element ``i`` of a broadcasting op.

    ``meta`` is [out_shape(ndim), a_strides(ndim), b_strides(ndim)], with stride 0 on the
    dimensions an input is broadcast along; one pass over the dimensions gives both offsets
    (the integer divisions are what costs).
    """
    rem = i
    ia = 0
    ib = 0
    for d in range(ndim - 1, -1, -1):
        extent = meta[d]
        coord = rem % extent
        rem //= extent
        ia += coord * meta[ndim + d]
        ib += coord * meta[2 * ndim + d]
    return ia, ib


def _elementwise(key, fn, nin, broadcast=False):
    """The grid-stride kernel of an elementwise op whose scalar function is ``fn``.

    ``fn`` is a plain Python function of ``nin`` scalars, compiled here as a device
    function.  The kernel stores ``fn(...)`` into every element ``i`` of the flat output
    ``out``, one thread per element in a grid-stride loop: a thread starts at its global
    index and steps by the grid's size, so a bounded grid covers any size and consecutive
    threads touch consecutive addresses.  Its arguments are flat device arrays, output first:

    * ``nin=0``: ``kernel(out, value)``: ``out[i] = fn(value)``, ``value`` a scalar;
    * ``nin=1``: ``kernel(out, a)``: ``out[i] = fn(a[i])``;
    * ``nin=2``: ``kernel(out, a, b)``: ``out[i] = fn(a[i], b[i])``; ``out`` may be ``a``
      (every element is read and written by the same thread);
    * ``nin=2, broadcast=True``: ``kernel(out, a, b, meta, ndim)``: ``out[i] = fn(a[ia],
      b[ib])``, the offsets from :func:`_broadcast_offsets`.

    A store converts to ``out``'s dtype.  The kernel is built once per ``key`` (the op and
    the dtypes ``fn`` depends on) and cached.
    """

    def build():
        f = cuda.jit(device=True)(fn)
        if broadcast:

            def kernel(out, a, b, meta, ndim):
                for i in range(cuda.grid(1), out.shape[0], cuda.gridsize(1)):
                    ia, ib = _broadcast_offsets(i, meta, ndim)
                    out[i] = f(a[ia], b[ib])
        elif nin == 2:

            def kernel(out, a, b):
                for i in range(cuda.grid(1), out.shape[0], cuda.gridsize(1)):
                    out[i] = f(a[i], b[i])
        elif nin == 1:

            def kernel(out, a):
                for i in range(cuda.grid(1), out.shape[0], cuda.gridsize(1)):
                    out[i] = f(a[i])
        else:

            def kernel(out, value):
                for i in range(cuda.grid(1), out.shape[0], cuda.gridsize(1)):
                    out[i] = f(value)

        return cuda.jit(kernel)

    return _cached(("elementwise", nin, bool(broadcast)) + tuple(key), build)


def _launch(stream, kernel, out, *args):
    """Launch an :func:`_elementwise` kernel over every element of ``out`` (every array
    argument seen flat)."""
    blocks, threads = _launch_1d(out.size)
    cuda_launch.launch(kernel, blocks, threads, stream, (out,) + args)


def _identity(x):
    return x  # converted on store (floats truncate toward 0)


def _nonzero(x):
    return x != 0


def _through_float32(x):
    """float16 to an integer: a card converts a half to an int rounding to nearest (1.5 -> 2);
    through float32 the store truncates toward 0, as numpy and TF's Cast do."""
    return np.float32(x)


def _binary_fn(op, out_dtype):
    """The scalar function of a binary op whose result has dtype ``out_dtype``; it computes
    in ``ctype``, the compute dtype of ``out_dtype``."""
    ctype = _compute_dtype(out_dtype).type
    stype = np.dtype(out_dtype).type
    is_float = np.dtype(ctype).kind == "f"
    if op in _SELECT_BINARY:
        return _select_binary_fn(op, ctype)
    if op == "add":

        def f(x, y):
            return ctype(x) + ctype(y)
    elif op == "sub":

        def f(x, y):
            return ctype(x) - ctype(y)
    elif op == "mul":

        def f(x, y):
            return ctype(x) * ctype(y)
    elif op == "realdiv" and is_float:

        def f(x, y):
            return ctype(x) / ctype(y)
    elif op == "realdiv":
        # integer RealDiv/Div truncate toward zero, like C and TF
        def f(x, y):
            p = ctype(x)
            q = ctype(y)
            r = p // q
            if r < 0 and r * q != p:
                r += 1
            return r
    elif op == "floordiv" and is_float and stype is not ctype:
        # float16: the quotient is rounded to float16 before the floor, as TF and numpy do
        def f(x, y):
            r = ctype(stype(ctype(x) / ctype(y)))
            if r - r != 0:  # inf or nan
                return r
            return ctype(math.floor(r))
    elif op == "floordiv" and is_float:
        # TF's FloorDiv on floats: floor(x / y); inf and nan pass through
        def f(x, y):
            r = ctype(x) / ctype(y)
            if r - r != 0:  # inf or nan
                return r
            return ctype(math.floor(r))
    elif op == "floordiv":

        def f(x, y):
            return ctype(x) // ctype(y)  # Python-style floor division
    else:
        raise ValueError("unknown binary op %r (known: %s)" % (op, ", ".join(BINARY_OPS)))
    return f


# every binary op after the arithmetic ones: maximum, minimum and the gradient helpers
_SELECT_BINARY = BINARY_OPS[BINARY_OPS.index("maximum") :]


def _select_binary_fn(op, ctype):
    """The scalar functions of Maximum, Minimum (a NaN operand wins, as in numpy) and of
    tf.nn's gradient helpers ``ReluGrad(g, features)``, ``SigmoidGrad(y, g)``,
    ``TanhGrad(y, g)``, ``SqrtGrad(y, g)``, ``RsqrtGrad(y, g)``, ``ReciprocalGrad(y, g)``,
    computing in ``ctype``."""
    if op == "maximum":

        def f(x, y):
            return ctype(x) if (x > y or x != x) else ctype(y)
    elif op == "minimum":

        def f(x, y):
            return ctype(x) if (x < y or x != x) else ctype(y)
    elif op == "relu_grad":

        def f(x, y):  # TF's functor multiplies: a NaN or infinite dead gradient gives NaN
            return ctype(x) * (ctype(1) if y > 0 else ctype(0))
    elif op == "sigmoid_grad":

        def f(x, y):
            return ctype(y) * ctype(x) * (ctype(1) - ctype(x))
    elif op == "sqrt_grad":

        def f(x, y):
            return ctype(0.5) * ctype(y) / ctype(x)
    elif op == "rsqrt_grad":

        def f(x, y):
            return ctype(-0.5) * (ctype(y) * ctype(x)) * (ctype(x) * ctype(x))
    elif op == "reciprocal_grad":

        def f(x, y):
            return -(ctype(y) * ctype(x) * ctype(x))
    else:  # tanh_grad

        def f(x, y):
            return ctype(y) * (ctype(1) - ctype(x) * ctype(x))

    return f


def _binary_kernel(op, out_dtype, broadcast=False):
    return _elementwise(
        ("binary", op, np.dtype(out_dtype).str), _binary_fn(op, out_dtype), 2, broadcast
    )


def _unary_fn(op, ctype):
    """The scalar function of a unary op, computing in numpy scalar type ``ctype``."""
    if op in _MATH_UNARY:
        return _math_unary_fn(op, ctype)
    if op == "neg":

        def f(x):
            return -ctype(x)
    elif op == "square":

        def f(x):
            return ctype(x) * ctype(x)
    elif op == "abs":

        def f(x):
            return -ctype(x) if x < 0 else ctype(x)
    elif op == "relu":

        def f(x):
            return ctype(x) if (x > 0 or x != x) else ctype(0)
    else:
        return _identity
    return f


_MATH_UNARY = ("exp", "log", "sqrt", "rsqrt", "reciprocal", "floor", "sigmoid", "tanh")


def _math_unary_fn(op, ctype):
    """The scalar functions of the float-only unary ops (Exp, Log, Sqrt, Rsqrt, Reciprocal,
    Floor, Sigmoid, Tanh).  Domain edges are handled before ``math`` is called (TF gives -inf,
    inf or nan there, where Python's ``math``, which the simulator runs, would raise)."""
    if op == "exp":

        def f(x):
            return ctype(math.inf) if x > 709.0 else ctype(math.exp(x))
    elif op == "log":

        def f(x):
            if x < 0:
                return ctype(math.nan)
            return ctype(-math.inf) if x == 0 else ctype(math.log(x))
    elif op == "sqrt":

        def f(x):
            return ctype(math.nan) if x < 0 else ctype(math.sqrt(x))
    elif op == "rsqrt":

        def f(x):
            if x < 0:
                return ctype(math.nan)
            if x == 0:  # 1 / sqrt(-0.0) is -inf
                return ctype(math.copysign(math.inf, x))
            return ctype(1.0 / math.sqrt(x))
    elif op == "reciprocal":

        def f(x):
            if x == 0:  # 1 / -0.0 is -inf
                return ctype(math.copysign(math.inf, x))
            return ctype(1.0 / x)
    elif op == "floor":

        def f(x):
            if math.isinf(x) or math.isnan(x):
                return ctype(x)
            return ctype(math.floor(x))
    elif op == "sigmoid":

        def f(x):
            if x >= 0:
                return ctype(1.0 / (1.0 + math.exp(-x)))
            e = math.exp(x) if x > -745.0 else 0.0
            return ctype(e / (1.0 + e))
    else:  # tanh

        def f(x):
            return ctype(math.tanh(x))

    return f


def _collapse(shape, *stride_lists):
    """Merge adjacent dimensions that are contiguous in every stride list; drop size 1."""
    dims = [(int(n), [int(s[d]) for s in stride_lists]) for d, n in enumerate(shape) if int(n) != 1]
    merged = []
    for n, strides in dims:
        if merged:
            pn, pstrides = merged[-1]
            if all(ps == s * n for ps, s in zip(pstrides, strides)):
                merged[-1] = (pn * n, strides)
                continue
        merged.append((n, strides))
    out_shape = [n for n, _ in merged]
    out_strides = [[s[k] for _, s in merged] for k in range(len(stride_lists))]
    return out_shape, out_strides


def _broadcast_strides(in_shape, out_shape):
    pad = len(out_shape) - len(in_shape)
    full = [1] * pad + [int(d) for d in in_shape]
    strides = _contiguous_strides(full)
    return [0 if full[d] == 1 and int(out_shape[d]) != 1 else strides[d] for d in range(len(full))]


def _fits(out, shape, dtype):
    """Whether ``out`` (a forwarded input, or None) can hold a result of ``shape``/``dtype``."""
    return (
        out is not None
        and hasattr(out, "copy_to_host")  # a device array, not a host value
        and tuple(out.shape) == tuple(shape)
        and np.dtype(out.dtype) == np.dtype(dtype)
    )


def binary(stream, op, a, b, out=None):
    """``op(a, b)`` elementwise with numpy broadcasting; op in BINARY_OPS; written into
    ``out`` (an input that dies with the op) when it fits."""
    if op not in BINARY_OPS:
        raise ValueError("unknown binary op %r (known: %s)" % (op, ", ".join(BINARY_OPS)))
    _check_numeric(a.dtype, op)
    _check_numeric(b.dtype, op)
    out_dtype = np.result_type(a.dtype, b.dtype)
    try:
        out_shape = np.broadcast_shapes(tuple(a.shape), tuple(b.shape))
    except ValueError:
        raise ValueError(
            "%s: incompatible shapes %s and %s" % (op, list(a.shape), list(b.shape))
        ) from None
    if not _fits(out, out_shape, out_dtype):
        out = _empty(stream, out_shape, out_dtype)
    if out.size == 0:
        return out
    if tuple(a.shape) == tuple(b.shape):
        _launch(stream, _binary_kernel(op, out_dtype), out, a, b)
        return out
    shape, (sa, sb) = _collapse(
        out_shape, _broadcast_strides(a.shape, out_shape), _broadcast_strides(b.shape, out_shape)
    )
    meta = _meta(stream, shape + sa + sb)
    _launch(
        stream,
        _binary_kernel(op, out_dtype, broadcast=True),
        out,
        a,
        b,
        meta,
        len(shape),
    )
    return out


def unary(stream, op, a, out=None):
    """``op(a)`` elementwise; op in UNARY_OPS; written into ``out`` when it fits."""
    if op not in UNARY_OPS:
        raise ValueError("unknown unary op %r (known: %s)" % (op, ", ".join(UNARY_OPS)))
    if op != "identity":
        _check_numeric(a.dtype, op)
    if not _fits(out, a.shape, a.dtype):
        out = _empty(stream, a.shape, a.dtype)
    if out.size:
        ctype = _compute_dtype(a.dtype).type
        kernel = _elementwise(("unary", op, np.dtype(ctype).str), _unary_fn(op, ctype), 1)
        _launch(stream, kernel, out, a)
    return out


def _convert_into(stream, src, dst):
    if dst.size:
        to_bool = np.dtype(dst.dtype) == np.bool_
        half_to_int = np.dtype(src.dtype) == np.float16 and np.dtype(dst.dtype).kind in "iu"
        fn = _nonzero if to_bool else _through_float32 if half_to_int else _identity
        kernel = _elementwise(("convert", to_bool, half_to_int), fn, 1)
        _launch(stream, kernel, dst, src)
    return dst


def cast(stream, a, np_dtype):
    """``a`` converted to ``np_dtype`` (a new array, even when the dtype is unchanged)."""
    np_dtype = np.dtype(np_dtype)
    if np_dtype.kind not in "biuf" or np.dtype(a.dtype).kind not in "biuf":
        raise TypeError("cannot cast %s to %s on the GPU" % (a.dtype, np_dtype))
    if np_dtype == np.dtype(a.dtype):
        return device_copy(stream, a)
    return _convert_into(stream, a, _empty(stream, a.shape, np_dtype))


def assign(stream, dst, src):
    """Copy ``src`` into the existing device array ``dst`` (same shape); returns ``dst``."""
    if tuple(dst.shape) != tuple(src.shape):
        raise ValueError("assign: shapes %s and %s differ" % (list(dst.shape), list(src.shape)))
    if dst.size == 0:
        return dst
    if np.dtype(dst.dtype) == np.dtype(src.dtype):
        dst.copy_to_device(src, stream=stream)
        return dst
    return _convert_into(stream, src, dst)


def fill(stream, shape, value, dtype):
    """A new device array of ``shape`` and ``dtype`` with every element ``value``."""
    dtype = np.dtype(dtype)
    if dtype.kind not in "biuf":
        raise TypeError("fill: unsupported dtype %s on the GPU" % dtype)
    shape = tuple(int(d) for d in shape)
    if any(d < 0 for d in shape):
        raise ValueError("fill: negative dimension in shape %s" % (list(shape),))
    out = _empty(stream, shape, dtype)
    if out.size:
        # the value travels in the compute dtype (float16 as float32) and converts on store
        value = np.array(value, dtype=dtype).astype(_compute_dtype(dtype))[()]
        _launch(stream, _elementwise(("fill",), _identity, 0), out, value)
    return out


def add_n(stream, arrays):
    """The elementwise sum of same-shape, same-dtype device arrays."""
    arrays = list(arrays)
    if not arrays:
        raise ValueError("add_n needs at least one array")
    shape, dtype = tuple(arrays[0].shape), np.dtype(arrays[0].dtype)
    _check_numeric(dtype, "add_n")
    for x in arrays[1:]:
        if tuple(x.shape) != shape:
            raise ValueError("add_n: shapes %s and %s differ" % (list(shape), list(x.shape)))
        if np.dtype(x.dtype) != dtype:
            raise TypeError("add_n: dtypes %s and %s differ" % (dtype, x.dtype))
    out = device_copy(stream, arrays[0])
    if out.size and len(arrays) > 1:
        # out += x in place: the binary add kernel in the compute dtype, with out as its a
        kernel = _binary_kernel("add", dtype)
        for x in arrays[1:]:
            _launch(stream, kernel, out, out, x)
    return out


# ---------------------------------------------------------------------------------------
# Matrix multiplication
# ---------------------------------------------------------------------------------------


@cuda.jit(device=True)
def _load_tile(tile, src, r0, c0):
    """Stage ``src[r0:r0 + TILE, c0:c0 + TILE]`` in the shared ``tile`` (0 past the edges).

    Thread (tx, ty) copies element [ty, tx]: the threads of a warp (consecutive tx) read
    consecutive addresses along ``src``'s last, contiguous axis, so the loads coalesce.
    """
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    i = r0 + ty
    j = c0 + tx
    if i < src.shape[0] and j < src.shape[1]:
        tile[ty, tx] = src[i, j]
    else:
        tile[ty, tx] = 0


@cuda.jit(device=True)
def _load_tile_transposed(tile, src, r0, c0):
    """Stage the tile of ``src``'s transpose ``src.T[r0:r0 + TILE, c0:c0 + TILE]`` in ``tile``.

    Thread (tx, ty) reads ``src[c0 + ty, r0 + tx]``: still along ``src``'s contiguous axis,
    so the loads coalesce; it writes the element transposed, to ``tile[tx, ty]``.  Those
    writes step through shared memory by a whole (padded) tile row, which is why the rows
    are TILE + 1 long: with TILE they would all fall in the same bank.
    """
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    i = c0 + ty
    j = r0 + tx
    if i < src.shape[0] and j < src.shape[1]:
        tile[tx, ty] = src[i, j]
    else:
        tile[tx, ty] = 0


def _matmul_kernel(transpose_a, transpose_b, acc_dtype):
    """The tiled shared-memory matmul kernel ``kernel(a, b, out)``, accumulating in
    ``acc_dtype``, for the given transposes (built once per variant and cached)."""
    acc_nb = _numba_type(acc_dtype)
    acc = np.dtype(acc_dtype).type
    T = TILE
    TP = TILE + 1  # padded row length: shared-array shapes must be literals
    load_a = _load_tile_transposed if transpose_a else _load_tile
    load_b = _load_tile_transposed if transpose_b else _load_tile

    def build():
        def kernel(a, b, out):
            # out[M, N] = A[M, K] @ B[K, N]; a is stored as A (M, K) or, transposed, (K, M);
            # b as B (K, N) or (N, K).  A block computes TILE x TILE tiles of out (a
            # grid-stride loop over the tiles); thread (tx, ty) computes element [ty, tx].
            tile_a = cuda.shared.array((T, TP), acc_nb)  # tile_a[row, k]
            tile_b = cuda.shared.array((T, TP), acc_nb)  # tile_b[k, col]
            tx = cuda.threadIdx.x
            ty = cuda.threadIdx.y
            M = out.shape[0]
            N = out.shape[1]
            if transpose_a:
                K = a.shape[0]
            else:
                K = a.shape[1]
            tiles_m = (M + T - 1) // T
            tiles_n = (N + T - 1) // T
            for tm in range(cuda.blockIdx.y, tiles_m, cuda.gridDim.y):
                for tn in range(cuda.blockIdx.x, tiles_n, cuda.gridDim.x):
                    row0 = tm * T
                    col0 = tn * T
                    total = acc(0)
                    for k0 in range(0, K, T):
                        load_a(tile_a, a, row0, k0)  # A[row0:row0 + T, k0:k0 + T]
                        load_b(tile_b, b, k0, col0)  # B[k0:k0 + T, col0:col0 + T]
                        cuda.syncthreads()  # both tiles are complete
                        for kk in range(T):
                            total += tile_a[ty, kk] * tile_b[kk, tx]
                        cuda.syncthreads()  # everyone is done with them
                    r = row0 + ty
                    c = col0 + tx
                    if r < M and c < N:
                        out[r, c] = total

        return cuda.jit(kernel)

    return _cached(
        ("matmul", bool(transpose_a), bool(transpose_b), np.dtype(acc_dtype).str, T), build
    )


def matmul(stream, a, b, transpose_a=False, transpose_b=False):
    """The matrix product of two rank-2 device arrays, optionally transposing either."""
    if a.ndim != 2 or b.ndim != 2:
        raise ValueError(
            "matmul: both operands must be rank 2, got shapes %s and %s"
            % (list(a.shape), list(b.shape))
        )
    _check_numeric(a.dtype, "matmul")
    _check_numeric(b.dtype, "matmul")
    m, k = (a.shape[1], a.shape[0]) if transpose_a else (a.shape[0], a.shape[1])
    k2, n = (b.shape[1], b.shape[0]) if transpose_b else (b.shape[0], b.shape[1])
    if k != k2:
        raise ValueError(
            "matmul: inner dimensions differ: %s%s @ %s%s"
            % (
                list(a.shape),
                "^T" if transpose_a else "",
                list(b.shape),
                "^T" if transpose_b else "",
            )
        )
    out_dtype = np.result_type(a.dtype, b.dtype)
    out = _empty(stream, (m, n), out_dtype)
    if out.size == 0:
        return out
    if k == 0:
        return fill(stream, (m, n), 0, out_dtype)
    grid = (
        max(1, min(MAX_MATMUL_BLOCKS, (n + TILE - 1) // TILE)),
        max(1, min(MAX_MATMUL_BLOCKS, (m + TILE - 1) // TILE)),
    )
    kernel = _matmul_kernel(
        transpose_a,
        transpose_b,
        _accumulate_dtype(out_dtype) if out_dtype.kind == "f" else out_dtype,
    )
    cuda_launch.launch(kernel, grid, (TILE, TILE), stream, (a, b, out), flat=False)
    return out


# ---------------------------------------------------------------------------------------
# Reductions
# ---------------------------------------------------------------------------------------


def _reduce_kernel(mean, acc_dtype, out_kind, rx, ry):
    acc_nb = _numba_type(acc_dtype)
    acc = np.dtype(acc_dtype).type
    float_mean = mean and out_kind == "f"
    int_mean = mean and out_kind != "f"

    def build():
        def kernel(x, meta, nk, nr, count, chunk, parts, divisor, out):
            # meta = [kept_shape(nk), kept_strides(nk), red_shape(nr), red_strides(nr)]; row
            # v = o * parts + p of out (block row ty) sums the p-th chunk of the `count`
            # elements kept element o gathers, its threads tx striding through the chunk
            buf = cuda.shared.array((ry, rx), acc_nb)
            tx = cuda.threadIdx.x
            ty = cuda.threadIdx.y
            n_rows = out.shape[0]
            rounds = (n_rows + ry - 1) // ry
            for rnd in range(cuda.blockIdx.x, rounds, cuda.gridDim.x):
                v = rnd * ry + ty
                total = acc(0)
                if v < n_rows:
                    rem = v // parts
                    start = (v - rem * parts) * chunk
                    base = 0
                    for d in range(nk - 1, -1, -1):
                        extent = meta[d]
                        base += (rem % extent) * meta[nk + d]
                        rem //= extent
                    for r in range(start + tx, min(count, start + chunk), rx):
                        off = base
                        rem = r
                        for d in range(nr - 1, -1, -1):
                            extent = meta[2 * nk + d]
                            off += (rem % extent) * meta[2 * nk + nr + d]
                            rem //= extent
                        total += acc(x[off])
                buf[ty, tx] = total
                cuda.syncthreads()
                half = rx // 2
                while half > 0:
                    if tx < half:
                        buf[ty, tx] += buf[ty, tx + half]
                    cuda.syncthreads()
                    half //= 2
                if tx == 0 and v < n_rows:
                    s = buf[ty, 0]
                    if float_mean:
                        out[v] = s / divisor
                    elif int_mean:
                        n = acc(divisor)
                        q = s // n  # floor, then truncate toward zero
                        if q < 0 and q * n != s:
                            q += 1
                        out[v] = q
                    else:
                        out[v] = s
                cuda.syncthreads()  # buf is reused by the next round

        return cuda.jit(kernel)

    return _cached(("reduce", bool(mean), np.dtype(acc_dtype).str, out_kind, rx, ry), build)


def _reduce_pass(stream, mean, x, kept, red, out, chunk, parts, divisor):
    """One launch: row ``o * parts + p`` of flat ``out`` gets the sum (or, with ``mean``, the
    sum / ``divisor``) of chunk ``p`` of the elements of ``x`` that kept element ``o``
    gathers.  ``kept`` and ``red`` are (shape, strides) of the kept and reduced axes."""
    count = _size(red[0])
    meta = _meta(stream, kept[0] + kept[1] + red[0] + red[1])
    rx = max(1, min(REDUCE_THREADS, _next_pow2(min(count, chunk))))
    ry = max(1, min(REDUCE_THREADS // rx, _next_pow2(out.size)))
    blocks = max(1, min(MAX_REDUCE_BLOCKS, (out.size + ry - 1) // ry))
    dtype = np.dtype(out.dtype)
    kernel = _reduce_kernel(mean, _accumulate_dtype(dtype), dtype.kind, rx, ry)
    args = (x, meta, len(kept[0]), len(red[0]), count, chunk, parts, divisor, out)
    cuda_launch.launch(kernel, blocks, (rx, ry), stream, args)
    return out


def _normalize_axes(axes, ndim):
    if axes is None:
        return tuple(range(ndim))
    if isinstance(axes, (int, np.integer)):
        axes = (axes,)
    result = []
    for ax in axes:
        ax = int(ax)
        if not -ndim <= ax < ndim:
            raise ValueError("reduction axis %d is out of range for rank %d" % (ax, ndim))
        ax %= ndim
        if ax in result:
            raise ValueError("duplicate reduction axis %d" % ax)
        result.append(ax)
    return tuple(sorted(result))


def reduce(stream, op, a, axes=None, keepdims=False):
    """``sum`` or ``mean`` of ``a`` over ``axes`` (None: all), keeping the input dtype.

    float16 accumulates in float32, integers in 64 bits; an integer mean truncates toward
    zero as TF does.
    """
    if op not in REDUCE_OPS:
        raise ValueError("unknown reduction %r (known: %s)" % (op, ", ".join(REDUCE_OPS)))
    dtype = _check_numeric(a.dtype, op)
    shape = tuple(int(d) for d in a.shape)
    ndim = len(shape)
    red = _normalize_axes(axes, ndim)
    kept = tuple(d for d in range(ndim) if d not in red)
    out_shape = (
        tuple(1 if d in red else shape[d] for d in range(ndim))
        if keepdims
        else tuple(shape[d] for d in kept)
    )
    out = _empty(stream, out_shape, dtype)
    n_out = out.size
    if n_out == 0:
        return out
    count = _size([shape[d] for d in red])
    if count == 0:  # empty reduction: 0, or nan for a float mean
        value = np.nan if (op == "mean" and dtype.kind == "f") else 0
        return fill(stream, out_shape, value, dtype)
    strides = _contiguous_strides(shape)
    kshape, (kstrides,) = _collapse([shape[d] for d in kept], [strides[d] for d in kept])
    rshape, (rstrides,) = _collapse([shape[d] for d in red], [strides[d] for d in red])
    parts = min(-(-count // REDUCE_CHUNK), max(1, PARTIAL_ROWS // n_out))
    if parts < 2:  # enough outputs to fill the card: one pass
        return _reduce_pass(
            stream, op == "mean", a, (kshape, kstrides), (rshape, rstrides), out, count, 1, count
        )
    # few outputs of many elements each (a full sum): partial sums of chunks first, so that
    # many blocks share the reading, then each output sums its `parts` partials
    chunk = -(-count // parts)
    partial = _empty(stream, (n_out, parts), _accumulate_dtype(dtype))
    _reduce_pass(stream, False, a, (kshape, kstrides), (rshape, rstrides), partial, chunk, parts, 1)
    _reduce_pass(
        stream, op == "mean", partial, ((n_out,), (parts,)), ((parts,), (1,)), out, parts, 1, count
    )
    return out
