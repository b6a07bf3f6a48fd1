"""The memory options on real cards: numba's allocations capped (runtime/cuda_memory.py).

Book section: "Managing the GPU RAM".  CI has no GPU, so the cap is tested as plain Python, and
numba's memory-manager class is built in a subprocess without the simulator, with numba's own
device allocation replaced by a fake (what would need a card: the real cuMemAlloc).
"""

import os
import subprocess
import sys
import textwrap

import pytest

import minitf as tf
from minitf.runtime import cuda_memory

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

pytestmark = pytest.mark.cudasim


def test_cap_lets_allocations_through_up_to_the_limit_then_flushes_then_refuses():
    held = [600]
    flushed = []

    def flush():
        flushed.append(held[0])
        held[0] = 500  # the pending frees gave 100 bytes back

    cap = cuda_memory.MemoryCap(0, 1000)
    cap.check(400, lambda: held[0], flush)  # 600 + 400 fits exactly
    assert flushed == []
    cap.check(500, lambda: held[0], flush)  # fits only after the flush
    assert flushed == [600]
    with pytest.raises(tf.errors.ResourceExhaustedError) as info:
        cap.check(501, lambda: held[0], flush)
    assert info.value.message == (
        "OOM when allocating 501 bytes on GPU 0: this process may "
        "hold at most 1000B (1000 bytes) of the card (gpu_options) "
        "and holds 500 bytes"
    )
    cuda_memory.MemoryCap(3).check(1 << 60, lambda: 0, flush)  # no cap: anything goes


def test_size_classes_round_up_by_at_most_an_eighth():
    assert [cuda_memory.size_class(n) for n in (0, 1, 512, 513, 8192)] == [
        512,
        512,
        512,
        1024,
        8192,
    ]
    for n in (8193, 10_000, 1 << 20, (1 << 20) + 1, 3 * 10**8):
        c = cuda_memory.size_class(n)
        assert n <= c <= n * 1.125 and cuda_memory.size_class(c) == c


def test_block_pool_hands_back_blocks_of_the_same_size_class():
    pool = cuda_memory.BlockPool()
    assert pool.take(1024) is None
    pool.give("a", 1024)
    pool.give("b", 2048)
    assert pool.idle_bytes == 3072
    assert pool.take(512) is None and pool.take(1024) == "a" and pool.take(1024) is None
    assert pool.idle_bytes == 2048
    assert pool.drain() == ["b"] and pool.idle_bytes == 0 and pool.take(2048) is None


def test_caps_are_set_per_device():
    cuda_memory.set_cap(7, 123)
    assert cuda_memory.cap_of(7).limit == 123 and cuda_memory.cap_of(8).limit is None
    cuda_memory.set_cap(7, None)
    assert cuda_memory.cap_of(7).limit is None


_CHILD = r"""
from numba.cuda.cudadrv import driver
from minitf.runtime import cuda_memory
from minitf.framework import errors

cls = cuda_memory.memory_manager_class()
assert issubclass(cls, driver.NumbaCUDAMemoryManager)
cuda_memory.install()                       # numba's interface-version check accepts it
assert driver._memory_manager is cls

class Dev:
    id = 0

class Ctx:                                  # (a class: numba keeps a weak proxy of it)
    device = Dev()

class Pointer:                              # numba's AutoFreePointer: free() runs the finalizer
    def __init__(self, ctx, block, size, finalizer):
        self.block, self.size, self.free = block, size, finalizer
    def own(self):
        return self

blocks = []
def fake_alloc(self, size):                 # what cuMemAlloc would do on a card
    blocks.append(size)
    return len(blocks)
cls._device_alloc = fake_alloc
cls._device_free = lambda self, block: print("freed", block)
driver.AutoFreePointer = Pointer
driver.NumbaCUDAMemoryManager.get_memory_info = lambda self: driver.MemoryInfo(
    free=10 << 30, total=16 << 30)

mm = cls(context=Ctx())
a = mm.memalloc(5 << 30)
print("uncapped", a.block, mm.get_memory_info().total >> 30)
cuda_memory.set_cap(0, 6 << 30)             # e.g. per_process_gpu_memory_fraction=0.375
info = mm.get_memory_info()
print("capped view", info.total >> 30, info.free >> 30)
b = mm.memalloc(1 << 30)
print("fits", b.block)
try:
    mm.memalloc(1)
except errors.ResourceExhaustedError as e:
    print("refused", e.message)
b.free()                                    # back to the pool, not to the driver
c = mm.memalloc(1 << 30)
print("reused", c.block, "driver allocations", len(blocks))
a.free(); c.free()                          # both idle in the pool, still held
print("held", mm.held_bytes() >> 30)
print("bigger", mm.memalloc(6 << 30).block) # passes the cap once the idle blocks are freed
print("smi sees", cuda_memory.held_by_this_process(0) >> 30, cuda_memory.held_by_this_process(1))
"""


def test_numba_memory_manager_plugin_caps_allocations():
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join(filter(None, [REPO, os.environ.get("PYTHONPATH")]))
    )
    env.pop("NUMBA_ENABLE_CUDASIM", None)  # the real driver module (no card needed)
    env["MINITF_GPU_BACKEND"] = "numpy"
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_CHILD)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "uncapped 1 16",
        "capped view 6 1",
        "fits 2",
        "refused OOM when allocating 512 bytes on GPU 0: this process may hold at most 6.00G "
        "(6442450944 bytes) of the card (gpu_options) and holds 6442450944 bytes",
        "reused 2 driver allocations 2",
        "held 6",
        "freed 2",
        "freed 1",
        "bigger 3",
        "smi sees 6 None",
    ]
