"""Random kernels: normal, uniform, truncated normal and integer draws, TF1's seeding.

Book section: "Operations and kernels".  Each kernel owns a numpy generator seeded from the op's
``seed``/``seed2`` attributes (``random_ops.make_generator``), so a session keeps drawing new
numbers run after run, and two sessions with the same graph-level seed draw the same ones.  They
compute on the host on every device (``host_kernel``).
"""

import numpy as np

from minitf.framework import dtypes as D
from minitf.framework import errors
from minitf.kernels.numpy_ops import scalarize
from minitf.kernels.registry import FLOATS, register
from minitf.kernels.tensor_ops import host_kernel
from minitf.ops.random_ops import make_generator


def _truncated(rng, shape, dtype):
    x = rng.standard_normal(shape, dtype=dtype)
    bad = np.abs(x) > 2
    while bad.any():
        x[bad] = rng.standard_normal(int(bad.sum()), dtype=dtype)
        bad = np.abs(x) > 2
    return x


def _random(kind):
    @host_kernel
    def factory(op, device):
        rng = make_generator(op)
        out_dtype = op.get_attr("dtype" if kind != "int" else "Tout").as_numpy_dtype
        gen_dtype = out_dtype if out_dtype in (np.float32, np.float64) else np.float64

        def compute(ctx, ins):
            shape = [int(d) for d in np.reshape(ins[0], -1)]
            if kind == "normal":
                x = rng.standard_normal(shape, dtype=gen_dtype)
            elif kind == "uniform":
                x = rng.random(shape, dtype=gen_dtype)
            elif kind == "truncated":
                x = _truncated(rng, shape, gen_dtype)
            else:
                lo, hi = int(ins[1]), int(ins[2])
                if lo >= hi:
                    raise errors.InvalidArgumentError(
                        None, None, "Need minval < maxval, got %d >= %d" % (lo, hi)
                    )
                x = rng.integers(lo, hi, size=shape)
            return (scalarize(np.asarray(x, dtype=out_dtype)),)

        return compute

    return factory


register("RandomStandardNormal", _random("normal"), cpu=FLOATS, gpu=FLOATS)
register("RandomUniform", _random("uniform"), cpu=FLOATS, gpu=FLOATS)
register("TruncatedNormal", _random("truncated"), cpu=FLOATS, gpu=FLOATS)
register("RandomUniformInt", _random("int"), cpu=(D.int32, D.int64), gpu=(D.int32, D.int64))


def _random_shuffle(op, device):
    rng = make_generator(op)

    def compute(ctx, ins):
        value = np.asarray(ins[0])
        if value.ndim == 0:
            return (ins[0],)
        return (value[rng.permutation(value.shape[0])],)

    return compute


register("RandomShuffle", _random_shuffle, cpu="any")
