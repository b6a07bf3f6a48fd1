"""minitf's numba.cuda kernels on a real CUDA card, next to numpy on the host's cores.

Book section: "Operations and kernels" (and notebook 01b).  Run on a machine with an NVIDIA
card::

    python bench/bench_cuda.py            # every figure
    python bench/bench_cuda.py --quick    # smaller sizes, fewer repeats

Without a card it says so and exits: Numba's simulator runs the same kernels, but only to check
that they compute the right thing; its timings mean nothing.  The figures:

1. an n x n float32 matmul (n = 1024, 4096) with minitf's tiled kernel, the one a GPU ``MatMul``
   launches, in GFLOP/s; against numpy on the host (OpenBLAS, every core) and, where CuPy is
   installed (it is not a dependency), cuBLAS on the same card;
2. an element-wise add and a full ``reduce_sum`` of 2^26 float32: GB/s moved, against the card's
   own device-to-device copy;
3. ``Session.run`` of a tiny op pinned to ``/gpu:0`` against ``/cpu:0``: microseconds a run
   (a launch, the stream's sync and the copy back to the client);
4. bench_train's MLP (784-300-100-10, plain SGD) pinned to ``/gpu:0``, against minitf on the CPU
   and the hand-written numpy step: steps/s and the loss after the steps (the same weights and
   batches on every side);
5. what one call costs the host, in microseconds: an element-wise launch through numba's
   dispatcher and through minitf's direct launch (``kernels/cuda_launch.py``), on a flat array
   and on a 2-D one (which numba must see through a reshaped view), a pooled device
   allocation, a scalar's upload and download, and a call through the card's launcher thread.
"""

import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import bench_train  # noqa: E402


def _time(fn, sync, repeats):
    """Seconds per call of ``fn`` (after one warm-up call that also compiles), median of 3."""
    fn()
    sync()
    runs = []
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(repeats):
            fn()
        sync()
        runs.append((time.perf_counter() - start) / repeats)
    return statistics.median(runs)


def bench_matmul(mk, stream, n, repeats):
    """1. GFLOP/s of minitf's tiled kernel, numpy and (if present) cuBLAS at n x n."""
    flops = 2.0 * n**3
    host = np.random.default_rng(0).random((n, n), dtype=np.float32)
    dev = mk.to_device(stream, host)
    tiled = _time(lambda: mk.matmul(stream, dev, dev), stream.synchronize, repeats)
    cpu = _time(lambda: host @ host, lambda: None, max(1, repeats // 4))
    got = mk.to_host(stream, mk.matmul(stream, dev, dev))
    ok = np.allclose(got, host @ host, rtol=1e-3)
    line = "1. matmul %d x %d float32: minitf tiled kernel %8.0f GFLOP/s, numpy (host) %6.0f" % (
        n,
        n,
        flops / tiled / 1e9,
        flops / cpu / 1e9,
    )
    try:
        import cupy
    except ImportError:
        cupy = None
    if cupy is not None:
        c = cupy.asarray(host)
        blas = _time(lambda: c @ c, cupy.cuda.Device().synchronize, repeats)
        line += ", cuBLAS (CuPy) %8.0f; minitf/cuBLAS %.3f" % (flops / blas / 1e9, blas / tiled)
    print(line + "; minitf/numpy %.1fx; equal to numpy: %s" % (cpu / tiled, ok))


def bench_bandwidth(mk, stream, n, repeats):
    """2. GB/s of an element-wise add and a full sum, against a device-to-device copy."""
    a = mk.to_device(stream, np.ones(n, np.float32))
    b = mk.to_device(stream, np.full(n, 2.0, np.float32))
    nbytes = 4 * n
    copy = _time(lambda: mk.device_copy(stream, a), stream.synchronize, repeats)
    add = _time(lambda: mk.binary(stream, "add", a, b), stream.synchronize, repeats)
    total = _time(lambda: mk.reduce(stream, "sum", a), stream.synchronize, repeats)
    value = float(mk.to_host(stream, mk.reduce(stream, "sum", a)))
    print(
        "2. 2^%d float32: copy %6.0f GB/s; add %6.0f GB/s (%.2f of copy); reduce_sum %6.0f GB/s "
        "(%.2f of copy's read rate); sum correct: %s"
        % (
            int(np.log2(n)),
            2 * nbytes / copy / 1e9,
            3 * nbytes / add / 1e9,
            (3 * nbytes / add) / (2 * nbytes / copy),
            nbytes / total / 1e9,
            (nbytes / total) / (nbytes / copy),
            value == n,
        )
    )


def bench_tiny_run(tf, runs):
    """3. Session.run of a tiny op on /gpu:0 and on /cpu:0: microseconds, p50."""
    out = {}
    for device in ("/cpu:0", "/gpu:0"):
        graph = tf.Graph()
        with graph.as_default(), tf.device(device):
            x = tf.placeholder(tf.float32, [], name="x")
            y = x + 1.0
        with tf.Session(graph=graph) as sess:
            assert sess.run(y, {x: 1.0}) == 2.0
            times = []
            for i in range(runs):
                start = time.perf_counter()
                sess.run(y, {x: float(i)})
                times.append(time.perf_counter() - start)
        out[device] = statistics.median(times) * 1e6
    print(
        "3. Session.run of a tiny fed add: /cpu:0 %.1f us, /gpu:0 %.1f us (p50 of %d)"
        % (out["/cpu:0"], out["/gpu:0"], runs)
    )


def bench_mlp(steps, batch):
    """4. The MLP's SGD step on the card, on the CPU, and numpy's."""
    data = bench_train.make_data(batch=batch)
    cores = bench_train.CORES
    gpu, gpu_loss = bench_train.run_minitf(steps, data, 0, device="/gpu:0")
    cpu, cpu_loss = bench_train.run_minitf(steps, data, 0, device="/cpu:0")
    ref, ref_loss = bench_train.run_numpy(steps, data, cores)
    print(
        "4. MLP 784-300-100-10, batch %d, %d steps: minitf /gpu:0 %.0f steps/s, minitf /cpu:0 "
        "%.0f, numpy (%d cores) %.0f; gpu/numpy %.2fx; losses %.6f / %.6f / %.6f"
        % (batch, steps, gpu, cpu, cores, ref, gpu / ref, gpu_loss, cpu_loss, ref_loss)
    )


def bench_host_costs(mk, stream, runs):
    """5. Host microseconds per call: numba's launch against the direct one, and the rest."""
    from minitf.kernels import cuda_launch

    n = 1024
    kernel = mk._binary_kernel("add", np.dtype(np.float32))
    blocks, threads = mk._launch_1d(n)
    a = mk.to_device(stream, np.ones(n, np.float32))
    a2 = mk.to_device(stream, np.ones((32, 32), np.float32))
    out = mk._empty(stream, (n,), np.float32)
    out2 = mk._empty(stream, (32, 32), np.float32)

    calls = {
        "launch, numba": lambda: kernel[blocks, threads, stream](out, a, a),
        "launch, direct": lambda: cuda_launch.launch(kernel, blocks, threads, stream, (out, a, a)),
        "2-D launch, numba": lambda: cuda_launch._through_numba(
            kernel, blocks, threads, stream, (out2, a2, a2), True
        ),
        "2-D launch, direct": lambda: cuda_launch.launch(
            kernel, blocks, threads, stream, (out2, a2, a2)
        ),
        "device_array (pooled)": lambda: mk._empty(stream, (n,), np.float32),
        "scalar upload": lambda: mk.to_device(stream, np.float32(1.0)),
        "scalar download": lambda: mk.to_host(stream, a[:1]),
    }
    got = {name: _time(fn, stream.synchronize, runs) * 1e6 for name, fn in calls.items()}
    launcher = mk.CudaLauncher(0)
    try:
        got["launcher-thread hop"] = (
            _time(lambda: launcher.call(lambda s: None), lambda: None, runs) * 1e6
        )
    finally:
        launcher.close()
    check = mk.to_host(stream, mk.binary(stream, "add", a2, a2))
    print(
        "5. host us per call: "
        + ", ".join("%s %.1f" % kv for kv in got.items())
        + "; launch numba/direct %.1fx, 2-D %.1fx; direct add correct: %s"
        % (
            got["launch, numba"] / got["launch, direct"],
            got["2-D launch, numba"] / got["2-D launch, direct"],
            bool((check == 2).all()),
        )
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    import minitf as tf
    from minitf.kernels import cuda as mk
    from minitf.runtime import devices

    if mk.SIMULATOR or not devices.cuda_available():
        print("No CUDA card here (or Numba's simulator is on): nothing to time.")
        return 0
    from numba import cuda

    card = devices.machine_gpus()[0]
    print("card: %s, compute capability %s; numba %s" % (card.name, card.compute_capability, _v()))
    stream = cuda.stream()
    repeats = 3 if args.quick else 10
    for n in (512, 1024) if args.quick else (1024, 4096):
        bench_matmul(mk, stream, n, repeats)
    bench_bandwidth(mk, stream, 1 << (22 if args.quick else 26), repeats)
    bench_host_costs(mk, stream, 200 if args.quick else 2000)
    bench_tiny_run(tf, 200 if args.quick else 2000)
    for batch in (128,) if args.quick else (128, 2048):
        bench_mlp(30 if args.quick else 200, batch)
    return 0


def _v():
    import numba

    try:
        from importlib.metadata import version

        return "%s, numba-cuda %s" % (numba.__version__, version("numba-cuda"))
    except Exception:  # noqa: BLE001 - numba-cuda's own metadata missing
        return numba.__version__


if __name__ == "__main__":
    sys.exit(main())
