"""minitf's kernel launches: numba's the first time, then packed and sent directly
(minitf/kernels/cuda_launch.py).  The packing is checked against numba's array data model with
stand-in arrays everywhere; on a real card (MINITF_TEST_REAL_CUDA=1) the second launch of a
kernel must go the direct way and compute the same as numba's."""

import ctypes

import numpy as np
import pytest
from numba.cuda import types

from helpers import REAL_CUDA, cuda_backend
from minitf.kernels import cuda_launch


class _Pointer:
    def __init__(self, value):
        self.value = value


class _Array:
    """What cuda_launch reads of a device array."""

    def __init__(self, shape, dtype, ptr=0x7000):
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        self.ndim = len(self.shape)
        self.size = int(np.prod(self.shape, dtype=np.int64))
        self.strides = tuple(
            int(s) for s in np.empty(self.shape, self.dtype).strides
        )  # C order, bytes
        self.device_ctypes_pointer = _Pointer(ptr)
        self.reshaped = []

    def copy_to_host(self):  # marks a device array
        raise AssertionError("not read")

    def is_c_contiguous(self):
        return True

    def reshape(self, n):
        self.reshaped.append(n)
        return _Array((n,), self.dtype, self.device_ctypes_pointer.value)


def test_packers_follow_numba_types():
    assert cuda_launch.packer_for(types.Array(types.float32, 1, "C"), True) is cuda_launch.FLAT
    assert cuda_launch.packer_for(types.Array(types.float32, 2, "C"), False) is cuda_launch.ARRAY
    assert cuda_launch.packer_for(types.Array(types.float32, 1, "C"), False) is cuda_launch.ARRAY
    assert cuda_launch.packer_for(types.Array(types.float32, 2, "A"), False) is None
    assert cuda_launch.packer_for(types.int64, True) is ctypes.c_int64
    assert cuda_launch.packer_for(types.uint32, True) is ctypes.c_uint32
    assert cuda_launch.packer_for(types.float64, True) is ctypes.c_double
    assert cuda_launch.packer_for(types.float32, True) is ctypes.c_float
    assert cuda_launch.packer_for(types.boolean, True) is bool
    assert cuda_launch.packer_for(types.complex64, True) is None


def test_parameters_are_numbas_array_model():
    """meminfo, parent, items, item size, data pointer, shape, strides (bytes); a flat array is
    one dimension of all its items; scalars are C values."""
    x = _Array((3, 4), np.float32, ptr=0x1000)
    m = _Array((2, 5), np.float64, ptr=0x2000)
    packers = (cuda_launch.FLAT, cuda_launch.ARRAY, ctypes.c_int64, ctypes.c_float)
    params = cuda_launch.parameters(packers, (x, m, 7, 0.5))
    assert params[:7] == [0, 0, 12, 4, 0x1000, 12, 4]
    assert params[7:16] == [0, 0, 10, 8, 0x2000, 2, 5, 40, 8]
    assert isinstance(params[16], ctypes.c_int64) and params[16].value == 7
    assert isinstance(params[17], ctypes.c_float) and params[17].value == 0.5
    assert x.reshaped == []  # no view built


class _Kernel:
    """A numba dispatcher's launch surface: kernel[grid, block, stream](*args)."""

    def __init__(self):
        self.numba_launches = []

    def __getitem__(self, config):
        return lambda *args: self.numba_launches.append((config, args))


def test_second_launch_of_the_same_kinds_goes_direct(monkeypatch):
    sent = []
    plans = []

    def plan_for(kernel, numba_args, flat):
        plans.append([tuple(a.shape) if hasattr(a, "shape") else a for a in numba_args])
        return cuda_launch._Plan("fn", (cuda_launch.FLAT, ctypes.c_int64), send)

    def send(stream, config, function, *params):
        sent.append((stream, config, function, params))

    monkeypatch.setattr(cuda_launch, "SIMULATOR", False)
    monkeypatch.setattr(cuda_launch, "plan_for", plan_for)
    monkeypatch.setattr(cuda_launch, "_plans", {})
    monkeypatch.setattr(cuda_launch, "_streams", {"s": "core-s"})
    monkeypatch.setattr(cuda_launch, "_configs", {(4, 256): "cfg"})
    kernel = _Kernel()
    a = _Array((2, 3), np.float32, ptr=0x10)
    cuda_launch.launch(kernel, 4, 256, "s", (a, 5))
    assert len(kernel.numba_launches) == 1 and plans == [[(6,), 5]]  # numba saw it flat
    assert a.reshaped == [6] and sent == []
    cuda_launch.launch(kernel, 4, 256, "s", (_Array((6,), np.float32, ptr=0x20), 9))
    assert len(kernel.numba_launches) == 1
    assert len(sent) == 1 and sent[0][:3] == ("core-s", "cfg", "fn")
    assert sent[0][3][:7] == (0, 0, 6, 4, 0x20, 6, 4) and sent[0][3][7].value == 9
    # another dtype is another overload: numba launches it first
    cuda_launch.launch(kernel, 4, 256, "s", (_Array((6,), np.float64), 9))
    assert len(kernel.numba_launches) == 2 and len(sent) == 1
    # a strided array is never packed as flat: it goes to numba, which refuses it
    strided = _Array((2, 3), np.float32)
    strided.is_c_contiguous = lambda: False
    with pytest.raises(ValueError, match="C-contiguous"):
        cuda_launch.launch(kernel, 4, 256, "s", (strided, 9))
    assert len(sent) == 1


def test_kinds_numba_launches_itself_stay_with_numba(monkeypatch):
    monkeypatch.setattr(cuda_launch, "SIMULATOR", False)
    monkeypatch.setattr(cuda_launch, "plan_for", lambda kernel, args, flat: None)
    monkeypatch.setattr(cuda_launch, "_plans", {})
    kernel = _Kernel()
    for _ in range(3):
        cuda_launch.launch(kernel, 1, 32, "s", (_Array((4,), np.int32),))
    assert len(kernel.numba_launches) == 3


@pytest.mark.cudasim
@pytest.mark.usefixtures("fast_thread_switching")
def test_launches_on_the_backend():
    """Under the simulator every launch is numba's (nothing compiled, no plan); on a real card
    the second launch of a kernel with the same kinds of arguments is direct, and both compute
    what numpy does."""
    from minitf.kernels import cuda as K

    a = np.arange(12, dtype=np.float32).reshape(3, 4)

    def mul(stream, k):
        out = K.binary(stream, "mul", K.to_device(stream, a), K.to_device(stream, a + k))
        return K.to_host(stream, out)

    launcher = cuda_backend().launcher
    for k in range(3):
        np.testing.assert_array_equal(launcher.call(mul, k), a * (a + k))
    kernel = K._binary_kernel("mul", np.dtype(np.float32))
    plans = [p for key, p in cuda_launch._plans.items() if key[:2] == (kernel, launcher.stream)]
    if REAL_CUDA:
        assert plans and all(p is not None for p in plans)
    else:
        assert plans == []
