"""The CUDA programming lesson (notebook 01b) and its instruments (``minitf.viz.cuda_view``).

The notebook must show minitf's own kernels, not copies: it fetches them from
``minitf.kernels.cuda`` and these tests check that what it fetches is the very object minitf's
GPU ``MatMul`` launches, and that the notebook defines no CUDA kernel of its own besides the
three written as contrasts.  The read counts are measured on the real kernels under Numba's
simulator (the only place reads can be counted) and compared with the formulas.
"""

import ast
import json
import os
from pathlib import Path

import numpy as np
import pytest

import minitf as tf
from helpers import cuda_backend
from minitf.kernels import cuda as mk
from minitf.viz import cuda_view as cv

pytestmark = [pytest.mark.cudasim, pytest.mark.usefixtures("fast_thread_switching")]

NOTEBOOK = Path(__file__).parent.parent / "notebooks" / "01b_cuda_programming.ipynb"
NOTEBOOK_KERNELS = {"whoami", "naive_matmul", "no_bounds_check"}  # written as contrasts


def notebook_code():
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    return "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")


def launcher():
    """The simulator's one launcher, the backend's own (CUDA calls from one thread only)."""
    return cuda_backend().launcher


@pytest.mark.usefixtures("cuda_kernels")
def test_matmul_kernel_shown_is_the_one_gpu_matmul_launches(monkeypatch):
    """After a GPU MatMul ran, the kernel cache holds the kernel it launched; the notebook's
    ``mk._matmul_kernel(False, False, np.float32)`` returns that same object."""
    monkeypatch.setattr(mk, "_kernels", {})
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    with tf.device("/gpu:0"):
        m = tf.matmul(tf.constant(a), tf.constant(a.T))
        s = tf.reduce_sum(m)
    sess = tf.Session()
    assert sess._impl.devices[1].backend.name == "cuda"
    mv, sv = sess.run([m, s])
    np.testing.assert_allclose(mv, a @ a.T)
    launched = {k[0]: v for k, v in mk._kernels.items()}
    assert set(launched) >= {"matmul", "reduce"}
    assert mk._matmul_kernel(False, False, np.float32) is launched["matmul"]
    assert "mk._matmul_kernel(False, False, np.float32)" in notebook_code()


def test_notebook_defines_no_copy_of_minitf_kernels():
    """The notebook's own ``@cuda.jit`` functions are only the contrasts; the tiled matmul and
    the reduction it runs come from ``minitf.kernels.cuda``."""
    tree = ast.parse(notebook_code())
    jitted = {
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef)
        and any("cuda.jit" in ast.unparse(d) for d in node.decorator_list)
    }
    assert jitted == NOTEBOOK_KERNELS
    code = notebook_code()
    assert "from minitf.kernels import cuda as mk" in code
    for call in ("mk.matmul(stream, ca, cb)", 'mk.reduce(stream, "sum", x)'):
        assert call in code


@pytest.mark.simulator
@pytest.mark.parametrize("m, n, k", [(16, 16, 16), (12, 20, 10), (3, 5, 9)])
def test_counted_reads_of_minitf_matmul_match_formula(m, n, k):
    rng = np.random.RandomState(0)
    a, b = rng.rand(m, k).astype(np.float32), rng.rand(k, n).astype(np.float32)

    def body(stream):
        ca, cb = cv.counting_array(a), cv.counting_array(b)
        out = mk.to_host(stream, mk.matmul(stream, ca, cb))
        return out, ca.reads + cb.reads

    out, reads = launcher().call(body)
    np.testing.assert_allclose(out, a @ b, rtol=1e-5)
    assert reads == cv.tiled_matmul_reads(m, n, k, mk.TILE)


def test_read_formulas():
    t = mk.TILE
    assert cv.naive_matmul_reads(16, 16, 16) == 8192
    assert cv.tiled_matmul_reads(2 * t, 2 * t, 2 * t, t) == 2 * (2 * t) ** 3 // t
    assert cv.tiled_matmul_reads(1, 1, 1, t) == 2
    # edges: nothing outside the matrices is read
    assert cv.tiled_matmul_reads(t + 1, 1, 1, t) == (t + 1) + 2


@pytest.mark.simulator
def test_counted_reads_of_minitf_reduction():
    x = np.arange(100, dtype=np.float32)

    def body(stream):
        cx = cv.counting_array(x)
        return mk.to_host(stream, mk.reduce(stream, "sum", cx)), cx.reads

    total, reads = launcher().call(body)
    assert total == x.sum() and reads == x.size


def test_counting_array_only_under_the_simulator(monkeypatch):
    monkeypatch.setattr(mk, "SIMULATOR", False)
    with pytest.raises(RuntimeError, match="NUMBA_ENABLE_CUDASIM"):
        cv.counting_array(np.zeros(3))


def test_thread_map_labels_every_element():
    block = np.zeros((2, 3, 2), np.int32)
    block[:, 2, 0] = 1
    thread = np.zeros((2, 3, 2), np.int32)
    thread[:, 1, 0] = 1
    thread[1, :, 1] = 1
    svg = cv.ThreadMap(block, thread, (2, 2))._repr_svg_()
    assert svg.count("<rect") == 6
    assert "b(1,0)" in svg and "t(1,1)" in svg and "g(2,1)" in svg
    with pytest.raises(ValueError, match="rows, cols, 2"):
        cv.ThreadMap(block, thread[:1], (2, 2))


def test_reduction_tree_rounds():
    tree = cv.ReductionTree([3, 1, 4, 1, 5, 9, 2, 6])
    rounds = tree.rounds()
    assert [len(r) for r in rounds] == [8, 4, 2, 1]
    assert rounds[1] == [8.0, 10.0, 6.0, 7.0]
    assert rounds[-1] == [31.0]
    assert "half=4" in tree._repr_svg_()
    with pytest.raises(ValueError, match="power of two"):
        cv.ReductionTree([1, 2, 3])


def test_memory_over_time_series():
    cards = lambda used: [{"id": 0, "memory_used": used << 20}]  # noqa: E731
    view = cv.MemoryOverTime([(0, cards(2)), (1, cards(4)), (2, cards(4))])
    assert view.series() == {0: [(0, 2.0), (1, 4.0), (2, 4.0)]}
    assert "<polyline" in view._repr_svg_() and "GPU 0" in view._repr_svg_()
    with pytest.raises(ValueError, match="at least one sample"):
        cv.MemoryOverTime([])


def test_notebook_says_its_outputs_are_the_simulators_and_what_a_real_card_gave():
    text = NOTEBOOK.read_text()
    assert "The outputs you see are the simulator's" in text
    assert "NVIDIA H100" in text and "GFLOP/s" in text
    assert os.path.basename(str(NOTEBOOK)).startswith("01b_")


def test_thread_map_draws_idle_threads_of_the_launch():
    block = np.zeros((2, 3, 2), np.int32)
    thread = np.zeros((2, 3, 2), np.int32)
    svg = cv.ThreadMap(block, thread, (2, 2), grid_dim=(2, 1))._repr_svg_()
    assert svg.count("<rect") == 8 and svg.count("idle") == 2
