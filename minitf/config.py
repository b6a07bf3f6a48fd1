"""Process-wide settings of minitf: how many emulated GPU cards this process sees.

Book section: "Installation" / "Managing the GPU RAM".  Without a CUDA GPU, minitf offers
emulated cards (2 of 4 GiB by default) so the chapter's GPU examples run anywhere.
``MINITF_EMULATED_GPUS=0`` gives a CPU-only process, exactly like TF on a machine without GPU.
"""

from __future__ import annotations

import os

DEFAULT_EMULATED_GPUS = 2
DEFAULT_GPU_MEMORY = 4 << 30

# (count, memory_limit) set by emulate_gpus(); None: read the environment
_emulated: tuple[int, int] | None = None
_machine_generation = 0  # bumped by every emulate_gpus call (a new machine)


def emulate_gpus(n: int | None, memory_limit: int | None = None) -> None:
    """Use ``n`` emulated GPU cards of ``memory_limit`` bytes (default 4 GiB) in new sessions.

    Asked for this way, the emulated cards stand in for the machine's real ones too (a page
    written for four cards runs on a laptop with one).  ``emulate_gpus(None)`` goes back to
    the machine: its real cards, or else the environment's emulated ones
    (``MINITF_EMULATED_GPUS``).  A new set of cards is a new machine: the process's GPU id
    mapping (``visible_device_list``) is forgotten.
    """
    global _emulated, _machine_generation
    _machine_generation += 1
    if n is None:
        _emulated = None
        return
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise ValueError("emulate_gpus expects a number of cards >= 0, got %r" % (n,))
    if memory_limit is not None and (not isinstance(memory_limit, int) or memory_limit <= 0):
        raise ValueError(
            "memory_limit must be a positive number of bytes, got %r" % (memory_limit,)
        )
    _emulated = (n, memory_limit or DEFAULT_GPU_MEMORY)


def machine_generation() -> int:
    """A number that changes at every :func:`emulate_gpus` call: each call makes a new machine,
    whose GPU id mapping (``runtime/devices.py``) starts afresh."""
    return _machine_generation


def emulation_asked() -> bool:
    """True after ``emulate_gpus(n)`` (until ``emulate_gpus(None)``): emulated cards replace
    real ones."""
    return _emulated is not None


def emulated_gpus() -> tuple[int, int]:
    """(count, memory bytes) of the emulated cards new sessions will see."""
    if _emulated is not None:
        return _emulated
    raw = os.environ.get("MINITF_EMULATED_GPUS", "").strip()
    if not raw:
        return DEFAULT_EMULATED_GPUS, DEFAULT_GPU_MEMORY
    try:
        n = int(raw)
        if n < 0:
            raise ValueError
    except ValueError:
        raise ValueError("MINITF_EMULATED_GPUS must be a number >= 0, got %r" % raw) from None
    return n, DEFAULT_GPU_MEMORY
