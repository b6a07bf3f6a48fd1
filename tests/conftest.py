"""Shared pytest fixtures for the minitf tests.

* every test starts from a fresh default graph (``tf.reset_default_graph()``) in a process with
  two emulated GPU cards, whatever the environment says;
* ``cpu_only``: a process without GPUs, like the CPU-only machine that produced
  tests/data/tf_outputs (``tf.config.emulate_gpus(0)``);
* ``two_gpus``: a process with two emulated GPU cards (``tf.config.emulate_gpus(2)``), for the
  book's and the blog's GPU examples;
* ``fresh_cards``: a private reservation registry and no card memory held by this process.

Both device fixtures go back to the environment's setting (``emulate_gpus(None)``) afterwards.
"""

import atexit
import os
import shutil
import sys
import tempfile

import pytest
from hypothesis import settings

# Property tests check values, not speed (speed is measured in bench/): no per-example deadline,
# which a loaded 2-core machine would miss for reasons that have nothing to do with the code.
settings.register_profile("minitf", deadline=None)
settings.load_profile("minitf")

# Card reservations of emulated GPUs are machine-wide (like a real driver's): keep this test
# run's in a private registry so it never competes with notebooks or other runs on the machine.
os.environ["MINITF_STATE_DIR"] = _STATE_DIR = tempfile.mkdtemp(prefix="minitf-tests-")
_RUN_PID = os.getpid()


def _remove_state_dir():
    """The run's registry folder goes when the run ends (never from a forked child)."""
    if os.getpid() == _RUN_PID:
        shutil.rmtree(_STATE_DIR, ignore_errors=True)


atexit.register(_remove_state_dir)
# CI has no GPU: CUDA kernels run in Numba's simulator unless MINITF_TEST_REAL_CUDA=1 (set it
# on a CUDA machine to run the same tests on the card).
if os.environ.get("MINITF_TEST_REAL_CUDA") != "1":
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"

import minitf as tf  # noqa: E402


def pytest_collection_modifyitems(config, items):
    """With MINITF_TEST_REAL_CUDA=1, tests that need the simulator itself are left out (a
    real card's memory reads cannot be counted from Python)."""
    from helpers import REAL_CUDA

    if not REAL_CUDA:
        return
    dropped = [item for item in items if item.get_closest_marker("simulator")]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [item for item in items if not item.get_closest_marker("simulator")]


@pytest.fixture(autouse=True)
def fresh_default_graph():
    """Each test builds its ops in a new, empty default graph, with two emulated GPUs."""
    tf.reset_default_graph()
    tf.config.emulate_gpus(2)
    yield
    tf.config.emulate_gpus(None)


@pytest.fixture
def cuda_kernels(monkeypatch):
    """GPU ops run minitf's numba.cuda kernels: on the emulated cards under Numba's simulator
    (``MINITF_GPU_BACKEND=cudasim``), or on the machine's real card with
    ``MINITF_TEST_REAL_CUDA=1``."""
    from helpers import REAL_CUDA

    if REAL_CUDA:  # the machine's own cards, not the two emulated ones every test starts with
        monkeypatch.delenv("MINITF_GPU_BACKEND", raising=False)
        tf.config.emulate_gpus(None)
    else:
        monkeypatch.setenv("MINITF_GPU_BACKEND", "cudasim")


@pytest.fixture(scope="module")
def fast_thread_switching():
    """Numba's CUDA simulator runs a thread per CUDA thread and its barriers wait on the
    interpreter's thread switch interval: a short one makes the simulated kernels fast."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-4)
    try:
        yield
    finally:
        sys.setswitchinterval(old)


@pytest.fixture
def cpu_only():
    """No GPU in this process: sessions see only /job:localhost/replica:0/task:0/device:CPU:0."""
    tf.config.emulate_gpus(0)
    try:
        yield
    finally:
        tf.config.emulate_gpus(None)


@pytest.fixture
def two_gpus():
    """Two emulated GPU cards: sessions see CPU:0, GPU:0 and GPU:1."""
    tf.config.emulate_gpus(2)
    try:
        yield
    finally:
        tf.config.emulate_gpus(None)


@pytest.fixture
def book_setter_graph():
    """Builds the chapter's sharding example under a device function: five variables, ``s``
    and the ops ``p1``..``p4`` pinned by nested blocks (the graph of
    tests/data/tf_outputs/ex_e_cluster); returns ``build(setter) -> ([s, p1, p2, p3, p4],
    init)``."""

    def build(setter):
        with tf.device(setter):
            v = [tf.Variable(float(i), name="v%d" % i) for i in range(1, 6)]
            s = tf.add(v[0], v[1], name="s")
            with tf.device("/gpu:0"):
                p1 = tf.multiply(2.0, s, name="p1")
            with tf.device("/task:1/gpu:0"):
                p2 = tf.multiply(3.0, s, name="p2")
            with tf.device("/job:worker/task:2/cpu:0"):
                p3 = tf.add(v[2] + v[3] + v[4], s, name="p3")
            with tf.device("/job:ps/task:1"):
                p4 = tf.multiply(s, 4.0, name="p4_on_ps1")
        return [s, p1, p2, p3, p4], tf.global_variables_initializer()

    return build


@pytest.fixture
def fresh_cards(tmp_path, monkeypatch):
    """A private reservation registry and no card memory held by this process yet."""
    from minitf.runtime import gpu_process_state

    monkeypatch.setenv("MINITF_STATE_DIR", str(tmp_path))
    gpu_process_state.release_gpu_memory()
    yield
    gpu_process_state.release_gpu_memory()


@pytest.fixture
def no_thread_left():
    """Every thread a test starts (its own, runner threads, a session's pools) has ended after
    it."""
    import threading

    from helpers import threads_left_since

    before = set(threading.enumerate())
    yield
    left = threads_left_since(before)
    assert not left, left


@pytest.fixture
def no_child_process_left():
    """Every process a test starts (servers, client programs) has ended within 10 s after it."""
    from helpers import child_pids, wait_until

    before = child_pids()
    yield
    assert wait_until(lambda: not (child_pids() - before), 10)
