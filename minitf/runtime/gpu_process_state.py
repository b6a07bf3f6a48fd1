"""This process's GPU memory: the allocators of its GPU devices, shared by all its sessions.

Book section: "Managing the GPU RAM".  TensorFlow keeps a process's GPU allocators in one place
(``GPUProcessState``, ``common_runtime/gpu/gpu_process_state.h``): the first session that runs
creates them with its ``gpu_options`` - taking the card memory they say - and every later
session of the process shares them, whatever its own options.  :func:`ensure_gpu_memory` does
that for minitf: on an emulated card it reserves the memory in the emulator's registry
(``runtime/card_registry.py``); on a real card it caps numba's allocations
(``runtime/cuda_memory.py``).  :func:`memory_policies` turns the options into each GPU's
:class:`~minitf.runtime.allocator.GpuMemoryPolicy`; :func:`process_gpu_allocators` is what the
memory view reads; :func:`release_gpu_memory` gives the memory back.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from minitf.framework import errors
from minitf.runtime import card_registry, cuda_memory
from minitf.runtime.allocator import (
    Allocator,
    GpuMemoryPolicy,
    Reservation,
    describe_size,
    growth_callback,
)

if TYPE_CHECKING:
    from minitf.runtime.config_proto import GPUOptions
    from minitf.runtime.devices import Device, PhysicalGPU


def memory_policies(
    devices: Iterable[Device], gpu_options: GPUOptions | None
) -> dict[Device, GpuMemoryPolicy]:
    """{device: GpuMemoryPolicy} of the GPUs among ``devices``; checks that the logical GPUs of
    one card fit on it together (InvalidArgumentError otherwise)."""
    policies = {}
    per_card: dict[PhysicalGPU, list[int]] = {}
    for d in devices:
        if d.device_type == "GPU":
            card = d.physical
            policies[d] = GpuMemoryPolicy(
                card.memory_limit,
                gpu_options,
                free_bytes=card.memory_limit,
                memory_limit=d.virtual_limit,
            )
            if d.virtual_limit is not None:
                per_card.setdefault(card, []).append(d.virtual_limit)
    for card, limits in per_card.items():
        if sum(limits) > card.memory_limit:
            raise errors.InvalidArgumentError(
                None,
                None,
                "The virtual devices of GPU %d ask for %s in all, more than its %s"
                % (card.physical_id, describe_size(sum(limits)), describe_size(card.memory_limit)),
            )
    return policies


_process_gpu_lock = threading.Lock()
# (physical card id, slot) -> (Reservation or None, Allocator)
_process_gpus: dict[tuple[int, int], tuple[Reservation | None, Allocator]] = {}


def ensure_gpu_memory(devices: Sequence[Device], gpu_options: GPUOptions | None) -> None:
    """Gives every GPU device its process-wide allocator, reserving card memory on first use.

    As in TF the first session decides (its ``gpu_options``) and later sessions share the same
    reservation.  The default takes the whole card minus TF's system reserve, computed for an
    empty card, so a second default program on the same emulated card fails with the book's
    ``CUDA_ERROR_OUT_OF_MEMORY`` error; ``per_process_gpu_memory_fraction`` and ``allow_growth``
    take less.  On a real card nothing is reserved up front: numba allocates on demand, capped
    at the same limit (``runtime/cuda_memory.py``).
    """
    with _process_gpu_lock:
        policies = None
        caps: dict[int, int] = {}
        for d in devices:
            if d.device_type != "GPU" or d.allocator is not None:
                continue
            card = d.physical
            state = _process_gpus.get((card.physical_id, d.slot))
            if state is None:
                if policies is None:
                    policies = memory_policies(devices, gpu_options)
                policy = policies[d]
                state = _process_gpus[card.physical_id, d.slot] = _new_gpu_state(d, policy)
                if not card.emulated:
                    caps[card.physical_id] = caps.get(card.physical_id, 0) + policy.limit_bytes
            d.allocator = state[1]
        for card_id, limit in caps.items():  # a real card: numba's own allocations too
            cuda_memory.set_cap(card_id, limit)


def _new_gpu_state(device: Device, policy: GpuMemoryPolicy) -> tuple[Reservation | None, Allocator]:
    """The reservation (emulated cards only) and the allocator of one GPU device, per ``policy``."""
    card = device.physical
    reservation = None
    if card.emulated:
        reservation = card_registry.reserve(
            card.physical_id, card.memory_limit, policy.initial_bytes
        )
    grow = (
        growth_callback(reservation, policy.limit_bytes)
        if policy.allow_growth and reservation is not None
        else None
    )
    # a real card's memory is numba's to allocate on demand, up to the cap of ensure_gpu_memory
    allocator = Allocator(
        "GPU_%d_bfc" % device.index,
        device.name,
        policy.initial_bytes if card.emulated else policy.limit_bytes,
        grow=grow,
    )
    return reservation, allocator


def process_gpu_allocators() -> dict[int, list[Allocator]]:
    """{physical card id: [Allocator per logical GPU on it]} of this process (what the memory
    monitor reads)."""
    with _process_gpu_lock:
        out: dict[int, list[Allocator]] = {}
        for (card, _), (_, allocator) in sorted(_process_gpus.items()):
            out.setdefault(card, []).append(allocator)
        return out


def release_gpu_memory() -> None:
    """Gives this process's card reservations back and forgets its GPU id mapping (tests and
    notebooks that restart)."""
    from minitf.runtime import devices

    devices.forget_gpu_ids()
    with _process_gpu_lock:
        for reservation, _ in _process_gpus.values():
            if reservation is not None:
                reservation.release()
        _process_gpus.clear()


def creation_lines(devices, gpu_options):
    """TF's ``Created TensorFlow device (... with N MB memory) -> physical GPU (...)`` lines."""
    return [
        "Created TensorFlow device (%s with %d MB memory) -> physical GPU (%s)"
        % (d.name, policy.limit_bytes >> 20, d.description)
        for d, policy in memory_policies(devices, gpu_options).items()
    ]
