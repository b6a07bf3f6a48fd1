"""``tf.test``: the GPU checks the chapter's readers run first.

Book section: "Installation" ("check that TensorFlow sees your GPU").  With emulated cards
``gpu_device_name()`` answers ``/device:GPU:0`` like a CUDA machine would;
``is_built_with_cuda()`` and ``is_gpu_available(cuda_only=True)`` tell the truth about real
CUDA hardware.
"""

from __future__ import annotations

from collections.abc import Sequence

from minitf.runtime import devices


def gpu_device_name() -> str:
    """``'/device:GPU:0'`` when this process sees a GPU (real or emulated), else ``''``."""
    return "/device:GPU:0" if devices.visible_gpus() else ""


def is_built_with_cuda() -> bool:
    """True when minitf can run real CUDA kernels here (numba.cuda found a driver)."""
    return devices.cuda_available()


def is_gpu_available(
    cuda_only: bool = False, min_cuda_compute_capability: Sequence[int] | None = None
) -> bool:
    """Whether a GPU is visible; ``cuda_only`` ignores emulated cards; a (major, minor)
    minimum compute capability filters cards."""
    cards = devices.visible_gpus()
    if cuda_only:
        cards = [c for c in cards if not c.emulated]
    if min_cuda_compute_capability is not None:
        cards = [
            c for c in cards if tuple(c.compute_capability) >= tuple(min_cuda_compute_capability)
        ]
    return bool(cards)
