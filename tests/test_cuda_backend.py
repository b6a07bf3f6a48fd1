"""GPU ops running numba.cuda kernels (``MINITF_GPU_BACKEND=cudasim``: Numba's simulator here;
on the machine's card with ``MINITF_TEST_REAL_CUDA=1``).

Book section: "Operations and kernels".  Tensors of GPU ops stay on the card as device arrays;
they cross to the host only on edges to CPU ops, on fetches and on feeds.
"""

import numpy as np
import pytest

import minitf as tf

pytestmark = [pytest.mark.cudasim, pytest.mark.usefixtures("cuda_kernels")]


def _rand(*shape, seed=0):
    return np.random.RandomState(seed).rand(*shape).astype(np.float32)


def test_gpu_ops_run_cuda_kernels_and_match_numpy():
    """matmul, broadcasting arithmetic, reductions, add_n and cast on a GPU equal numpy."""
    a_np, b_np = _rand(5, 4), _rand(4, 3, seed=1)
    with tf.device("/gpu:0"):
        a, b = tf.constant(a_np), tf.constant(b_np)
        m = tf.matmul(a, b)
        z = m * 2.0 - tf.constant([1.0, 2.0, 3.0])
        s = tf.reduce_sum(m, axis=1)
        mean = tf.reduce_mean(m)
        n = tf.add_n([m, m, m])
        c = tf.cast(m, tf.float64)
    sess = tf.Session()
    assert sess._impl.devices[1].backend.name == "cuda"
    mv, zv, sv, meanv, nv, cv = sess.run([m, z, s, mean, n, c])
    ref = a_np @ b_np
    np.testing.assert_allclose(mv, ref, rtol=1e-5)
    np.testing.assert_allclose(zv, ref * 2 - [1, 2, 3], rtol=1e-5)
    np.testing.assert_allclose(sv, ref.sum(1), rtol=1e-5)
    np.testing.assert_allclose(meanv, ref.mean(), rtol=1e-5)
    assert isinstance(meanv, np.float32)
    np.testing.assert_allclose(nv, 3 * ref, rtol=1e-5)
    assert cv.dtype == np.float64


def test_tensors_cross_between_card_and_host():
    """A feed goes up to the card, a GPU result comes down for a CPU op and for the fetch."""
    p = tf.placeholder(tf.float32, [3], name="p")
    with tf.device("/gpu:0"):
        g = tf.square(p, name="g")
    with tf.device("/cpu:0"):
        h = tf.add(g, 1.0, name="h")
    md = tf.RunMetadata()
    gv, hv = tf.Session().run(
        [g, h], {p: [1.0, 2.0, 3.0]}, options=tf.RunOptions(trace_level=3), run_metadata=md
    )
    np.testing.assert_allclose(gv, [1, 4, 9])
    np.testing.assert_allclose(hv, [2, 5, 10])
    assert isinstance(gv, np.ndarray) and isinstance(hv, np.ndarray)
    moved = {t.tensor_name: (t.src_device[-5:], t.dst_device[-5:]) for t in md.step_stats.transfers}
    # the feed goes up to the card, g comes down once: for h and for the fetch
    assert moved == {"_arg_p_0_0:0": ("CPU:0", "GPU:0"), "g:0": ("GPU:0", "CPU:0")}


def test_variables_live_on_the_card():
    """A GPU variable is initialised, updated and read by CPU ops; its storage is on the card."""
    with tf.device("/gpu:0"):
        v = tf.Variable(np.ones(3, np.float32), name="v")
        inc = v.assign_add([1.0, 2.0, 3.0])
    with tf.device("/cpu:0"):
        doubled = v * 2.0
    sess = tf.Session()
    sess.run(v.initializer)
    sess.run(inc)
    np.testing.assert_allclose(sess.run(v), [2, 3, 4])
    np.testing.assert_allclose(sess.run(doubled), [4, 6, 8])
    ref = sess._impl._kernels.get("v", "/job:localhost/replica:0/task:0/device:GPU:0")(None, [])[0]
    assert hasattr(ref.value, "copy_to_host")
    assert sess._impl.devices[1].allocator.bytes_in_use >= 12


def test_ops_without_cuda_kernels_fall_back_to_host_copies():
    """Random numbers and reshapes on a GPU run their CPU kernel on host copies, correctly."""
    with tf.device("/gpu:0"):
        r = tf.random_normal([2, 3], seed=7)
        shaped = tf.reshape(r, [3, 2]) + 0.0
    tf.set_random_seed(1)
    sess = tf.Session()
    rv, sv = sess.run([r, shaped])
    assert rv.shape == (2, 3) and sv.shape == (3, 2)
    np.testing.assert_allclose(sv, rv.reshape(3, 2))


def test_cuda_kernel_errors_name_the_op():
    """A runtime shape error in a CUDA kernel is an InvalidArgumentError naming the op."""
    p = tf.placeholder(tf.float32, name="p")
    q = tf.placeholder(tf.float32, name="q")
    with tf.device("/gpu:0"):
        bad = tf.matmul(p, q, name="bad")
    with pytest.raises(tf.errors.InvalidArgumentError) as info:
        tf.Session().run(bad, {p: np.ones((2, 3)), q: np.ones((2, 3))})
    assert "[[{{node bad}}]]" in str(info.value)
