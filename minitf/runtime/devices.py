"""The devices of a process: ``CPU:0`` (and more with ``device_count``), plus GPUs.

Book sections: "Installation" and "Managing the GPU RAM".  GPUs are the CUDA cards numba sees
or, without any, emulated cards (``minitf.config``).  ``CUDA_VISIBLE_DEVICES`` selects and
renumbers cards (Figure 12-3: ``CUDA_VISIBLE_DEVICES=3,2`` makes card 3 ``/gpu:0``);
``ConfigProto(device_count={"GPU": n})`` and ``gpu_options.visible_device_list`` narrow the set
of one session further.
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from minitf import config as mconfig
from minitf.framework import errors
from minitf.framework.resource_mgr import ResourceMgr
from minitf.kernels import cuda_ops, numpy_ops
from minitf.runtime import card_registry
from minitf.runtime import device_name_utils as dnu

if TYPE_CHECKING:
    from minitf.kernels.tensor_ops import TensorOps
    from minitf.runtime.allocator import Allocator
    from minitf.runtime.config_proto import ConfigProto

CPU_MEMORY_LIMIT = 256 << 20  # what TF reports for a CPU device (268435456)


class PhysicalGPU:
    """One card of the machine, real or emulated, by its physical (driver) id."""

    def __init__(
        self,
        physical_id: int,
        name: str,
        memory_limit: int,
        compute_capability: tuple[int, int],
        emulated: bool,
    ) -> None:
        self.physical_id = physical_id
        self.name = name
        self.memory_limit = memory_limit
        self.compute_capability = compute_capability
        self.emulated = emulated

    @property
    def pci_bus_id(self) -> str:
        return "0000:%02x:00.0" % (self.physical_id + 1)

    def __repr__(self) -> str:
        return "PhysicalGPU(%d, %r, %d bytes)" % (self.physical_id, self.name, self.memory_limit)


_real_cards: list[PhysicalGPU] | None = None


def cuda_available() -> bool:
    """True when a real CUDA driver and card are present (numba.cuda, outside its simulator).

    numba is imported only when the machine has NVIDIA device files, so CPU-only machines pay
    nothing at import or session time.
    """
    return bool(_real_gpus())


def _real_gpus():
    global _real_cards
    if _real_cards is None:
        _real_cards = []
        if (
            os.environ.get("MINITF_GPU_BACKEND", "") in ("", "cuda")
            and os.path.exists("/dev/nvidiactl")
            and os.environ.get("NUMBA_ENABLE_CUDASIM", "0") in ("", "0")
        ):
            try:
                from numba import cuda

                from minitf.runtime import cuda_memory

                try:  # before the first context: numba's allocations capped
                    cuda_memory.install()
                except Exception as e:  # noqa: BLE001 - e.g. a numba with another EMM version
                    import warnings

                    warnings.warn(
                        "minitf: GPU memory options will not cap numba's own allocations (%s)" % e,
                        stacklevel=1,
                    )  # about this machine's numba: point here
                if cuda.is_available():  # the driver has applied CUDA_VISIBLE_DEVICES already
                    for i, dev in enumerate(cuda.list_devices()):
                        with dev:
                            free, total = cuda.current_context().get_memory_info()
                        _real_cards.append(
                            PhysicalGPU(
                                i,
                                dev.name.decode() if isinstance(dev.name, bytes) else dev.name,
                                total,
                                tuple(dev.compute_capability),
                                False,
                            )
                        )
            except Exception:  # noqa: BLE001 - no usable driver: fall back to emulation
                _real_cards = []
    return _real_cards


def real_cards_in_use() -> bool:
    """True when sessions get the machine's real CUDA cards (there are some, and no
    ``emulate_gpus(n)`` stands in for them)."""
    return not mconfig.emulation_asked() and bool(_real_gpus())


def machine_gpus() -> list[PhysicalGPU]:
    """Every card of the machine: the emulated ones asked for with ``emulate_gpus(n)``, else
    the real CUDA cards, else the environment's emulated ones."""
    if real_cards_in_use():
        return list(_real_gpus())
    n, mem = mconfig.emulated_gpus()
    return [PhysicalGPU(i, "minitf emulated GPU", mem, (7, 0), True) for i in range(n)]


def _id_list(text, count, bad_entry, out_of_range, duplicate):
    """Parses a comma-separated list of GPU ids below ``count`` (no repeats); the three
    message formats say what was wrong in the words of the setting being parsed."""
    ids = []
    for part in text.split(","):
        part = part.strip()
        try:
            i = int(part)
        except ValueError:
            raise errors.InvalidArgumentError(None, None, bad_entry % part) from None
        if not 0 <= i < count:
            raise errors.InvalidArgumentError(None, None, out_of_range % i)
        if i in ids:
            raise errors.InvalidArgumentError(None, None, duplicate % i)
        ids.append(i)
    return ids


def parse_cuda_visible_devices(value: str | None, count: int) -> list[int]:
    """Physical ids listed by ``CUDA_VISIBLE_DEVICES`` (None: variable unset = all cards)."""
    if value is None:
        return list(range(count))
    value = value.strip()
    if not value:
        return []
    return _id_list(
        value,
        count,
        "CUDA_VISIBLE_DEVICES=%r: %%r is not a GPU id (expected a comma-separated list of "
        "integers such as '3,2')" % value,
        "CUDA_VISIBLE_DEVICES=%r lists GPU %%d but this machine has %d GPU card(s)"
        % (value, count),
        "CUDA_VISIBLE_DEVICES=%r lists GPU %%d twice" % value,
    )


def visible_gpus() -> list[PhysicalGPU]:
    """The cards this process sees, in CUDA order (``CUDA_VISIBLE_DEVICES`` applied)."""
    cards = machine_gpus()
    if real_cards_in_use():
        return cards  # the CUDA driver already applied CUDA_VISIBLE_DEVICES
    ids = parse_cuda_visible_devices(os.environ.get("CUDA_VISIBLE_DEVICES"), len(cards))
    return [cards[i] for i in ids]


def _visible_device_list(spec, count):
    if not spec:
        return list(range(count))
    return _id_list(
        spec,
        count,
        "Could not parse entry in 'visible_device_list': '%%s'. visible_device_list = %s" % spec,
        "'visible_device_list' listed an invalid GPU id '%%d' but visible device count is %d"
        % count,
        "visible_device_list contained a duplicate entry: %s (GPU %%d)" % spec,
    )


# TF's GpuIdManager: which CUDA device (platform id) each TF GPU id of this process stands for.
# The first session fixes it; a later session (or list_local_devices) that maps a GPU id to
# another card fails, as in TF 1.x.  emulate_gpus (a new machine) and release_gpu_memory clear it.
_gpu_ids: dict[int, int] = {}
_gpu_ids_machine = [mconfig.machine_generation()]  # the machine _gpu_ids belongs to

_GPU_ID_CONFLICT = (
    "TensorFlow device (GPU:%d) is being mapped to multiple CUDA devices (%d now, and %d "
    "previously), which is not supported. This may be the result of providing different GPU "
    "configurations (ConfigProto.gpu_options, for example different visible_device_list) when "
    "creating multiple Sessions in the same process. This is not  currently supported, see "
    "https://github.com/tensorflow/tensorflow/issues/19083"
)


def record_gpu_ids(pairs: Iterable[tuple[int, int]]) -> None:
    """Records ``(tf gpu id, platform gpu id)`` pairs of a new set of devices; a TF GPU id
    already mapped to another card raises TF's AlreadyExistsError (nothing is recorded then)."""
    pairs = list(pairs)
    if _gpu_ids_machine[0] != mconfig.machine_generation():  # emulate_gpus made a new machine
        forget_gpu_ids()
    for tf_id, platform_id in pairs:
        before = _gpu_ids.get(tf_id, platform_id)
        if before != platform_id:
            raise errors.AlreadyExistsError(
                None, None, _GPU_ID_CONFLICT % (tf_id, platform_id, before)
            )
    _gpu_ids.update(pairs)


def forget_gpu_ids() -> None:
    """Forgets the process's GPU id mapping (a new machine, or tests that restart)."""
    _gpu_ids.clear()
    _gpu_ids_machine[0] = mconfig.machine_generation()


class DeviceAttributes:
    """What ``sess.list_devices()`` returns per device (TF's ``_DeviceAttributes``)."""

    def __init__(
        self, name: str, device_type: str, memory_limit_bytes: int, incarnation: int
    ) -> None:
        self.name = name
        self.device_type = device_type
        self.memory_limit_bytes = memory_limit_bytes
        self.incarnation = incarnation

    def __repr__(self) -> str:
        return "_DeviceAttributes(%s, %s, %d, %d)" % (
            self.name,
            self.device_type,
            self.memory_limit_bytes,
            self.incarnation,
        )


class Device:
    """A runtime device: a full name, a type, its resource manager and (GPU) its card."""

    def __init__(
        self,
        job: str,
        replica: int,
        task: int,
        device_type: str,
        index: int,
        memory_limit: int,
        physical: PhysicalGPU | None = None,
        virtual_limit: int | None = None,
    ) -> None:
        self.job, self.replica, self.task = job, replica, task
        self.device_type, self.index = device_type, index
        self.name = dnu.full_name(job, replica, task, device_type, index)
        self.parsed = dnu.parse_full_name(self.name)
        self.memory_limit = memory_limit
        self.physical = physical
        # a logical GPU made with gpu_options.experimental.virtual_devices: its bytes, and its
        # position among the logical GPUs of its card
        self.virtual_limit = virtual_limit
        self.slot = 0
        self.platform_id = index  # the card's number among the visible ones (TF's "device: N")
        self.resource_manager = ResourceMgr(default_container=job)
        self.allocator: Allocator | None = (
            None  # GPUs: the process's allocator for the card (ensure_gpu_memory)
        )
        self.incarnation = random.getrandbits(63) or 1  # part of every rendezvous key
        # what its kernels compute with (kernels/tensor_ops.py): numpy on the host (CPUs,
        # emulated cards), or numba.cuda on a real card, or on an emulated one with
        # MINITF_GPU_BACKEND=cudasim (Numba's simulator)
        self.backend: TensorOps = numpy_ops.NUMPY
        if physical is not None and (
            not physical.emulated or os.environ.get("MINITF_GPU_BACKEND") == "cudasim"
        ):
            self.backend = cuda_ops.backend_for_card(physical.physical_id, physical.emulated)

    def function_runner(self, func_graph):
        """A function of the graph's library, runnable on this device (``tf.data``'s ``map``
        ...): ``runner(args)`` -> its results (runtime/function_library.py)."""
        from minitf.runtime.function_library import runner_for

        return runner_for(func_graph, self)

    @property
    def description(self) -> str:
        """TF's ``physical_device_desc`` ('' for CPUs, which the Device mapping block skips)."""
        p = self.physical
        if p is None:
            return ""
        return "device: %d, name: %s, pci bus id: %s, compute capability: %d.%d" % (
            self.platform_id,
            p.name,
            p.pci_bus_id,
            *p.compute_capability[:2],
        )

    def __repr__(self) -> str:
        return "<Device %s>" % self.name


def local_devices(
    config: ConfigProto | None = None, job: str = "localhost", task: int = 0
) -> list[Device]:
    """The devices one session (or one server task) creates, CPUs first, then GPUs."""
    counts = dict(config.device_count) if config is not None else {}
    n_cpu = counts.get("CPU", 1)
    if n_cpu < 0:
        raise errors.InvalidArgumentError(
            None, None, "device_count['CPU'] must be >= 0, got %d" % n_cpu
        )
    devices = [Device(job, 0, task, "CPU", i, CPU_MEMORY_LIMIT) for i in range(max(n_cpu, 1))]
    gpus = visible_gpus()
    spec = config.gpu_options.visible_device_list if config is not None else ""
    ids = _visible_device_list(spec, len(gpus))
    chosen = ids[: max(counts.get("GPU", len(ids)), 0)]
    virtual = _virtual_limits(config, len(ids), len(chosen))
    for i, limits in zip(chosen, virtual):
        for slot, limit in enumerate(limits):
            d = Device(
                job,
                0,
                task,
                "GPU",
                sum(1 for x in devices if x.device_type == "GPU"),
                gpus[i].memory_limit if limit is None else limit,
                gpus[i],
                limit,
            )
            d.slot, d.platform_id = slot, i
            devices.append(d)
    record_gpu_ids((d.index, d.platform_id) for d in devices if d.device_type == "GPU")
    return devices


def _virtual_limits(config, n_visible, n_used):
    """Per card used: the byte limits of its logical GPUs (``[None]``: one GPU, default size),
    from ``gpu_options.experimental.virtual_devices`` (TF 1.15's checks and messages)."""
    entries = list(config.gpu_options.experimental.virtual_devices) if config is not None else []
    if not entries:
        return [[None]] * n_used
    if config.gpu_options.per_process_gpu_memory_fraction > 0:
        raise errors.InvalidArgumentError(
            None,
            None,
            "It's invalid to set per_process_gpu_memory_fraction when virtual_devices is set.",
        )
    if n_used < len(entries):
        raise errors.UnknownError(
            None,
            None,
            "Not enough GPUs to create virtual devices. "
            "num_gpus_to_use: %d #virtual_devices: %d" % (n_used, len(entries)),
        )
    if n_visible != len(entries):
        raise errors.InvalidArgumentError(
            None,
            None,
            "The number of GPUs in visible_device_list doesn't match the number of "
            "elements in the virtual_devices list. #GPUs in visible_device_list: %d "
            "virtual_devices.size(): %d" % (n_visible, len(entries)),
        )
    out = []
    for e in entries:
        for mb in e.memory_limit_mb:
            if not mb > 0:  # NaN too
                raise errors.InvalidArgumentError(
                    None, None, "virtual_devices memory_limit_mb must be > 0, got %r" % mb
                )
        out.append([int(mb * (1 << 20)) for mb in e.memory_limit_mb] or [None])
    return out


def device_mapping_lines(devices: Iterable[Device]) -> list[str]:
    """The ``Device mapping:`` block TF prints when a session is created with logging on."""
    described = [d for d in devices if d.description]
    if not described:
        return ["Device mapping: no known devices."]
    return ["Device mapping:"] + ["%s -> %s" % (d.name, d.description) for d in described]


def _on_real_card(card) -> list[dict[str, Any]]:
    """This process's use of a real card, as registry-like entries: what numba holds for it
    there (other processes' use of a real card is the driver's to tell, not minitf's)."""
    from minitf.runtime import cuda_memory

    held = cuda_memory.held_by_this_process(card.physical_id)
    if held is None:
        return []
    return [{"pid": os.getpid(), "name": card_registry.process_name(), "bytes": held}]


def card_usage() -> list[dict[str, Any]]:
    """The machine's cards as a list of dicts, one per card, in physical order::

        {"id": 0, "name": "minitf emulated GPU", "bus_id": "0000:01:00.0", "emulated": True,
         "memory_total": 4294967296, "memory_used": 1717986918, "memory_free": ...,
         "processes": [{"pid": 4242, "name": "python3 train.py", "memory": 1717986918,
                        "sessions": 1}]}

    Memory is in bytes; a process holding several reservations on one card is listed once
    with their sum.  Dead processes' reservations are reclaimed while reading.
    """
    cards = []
    for card in machine_gpus():
        per_pid: dict[int, dict[str, Any]] = {}  # in the order the processes first reserved
        usage = card_registry.usage(card.physical_id) if card.emulated else _on_real_card(card)
        for e in card_registry.oldest_first(usage):
            p = per_pid.setdefault(
                e["pid"],
                {"pid": e["pid"], "name": e.get("name") or "?", "memory": 0, "sessions": 0},
            )
            p["memory"] += int(e["bytes"])
            p["sessions"] += int(e.get("sessions", 0))
        procs = list(per_pid.values())
        used = sum(p["memory"] for p in procs)
        cards.append(
            {
                "id": card.physical_id,
                "name": card.name,
                "bus_id": card.pci_bus_id,
                "emulated": bool(card.emulated),
                "memory_total": int(card.memory_limit),
                "memory_used": used,
                "memory_free": max(0, card.memory_limit - used),
                "processes": procs,
            }
        )
    return cards
