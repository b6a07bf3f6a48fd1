"""``device_lib.list_local_devices()``: the devices a new session of this process would get.

Book section: "Installation" (checking which devices TensorFlow sees).  Mirrors TF's
``tensorflow.python.client.device_lib``: names without a job (``/device:GPU:0``), types,
memory limits and, for GPUs, the physical description.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from minitf.runtime import devices

if TYPE_CHECKING:
    from minitf.runtime.config_proto import ConfigProto


class DeviceAttributes:
    """One local device: ``name``, ``device_type``, ``memory_limit``, ``incarnation`` and
    ``physical_device_desc``."""

    def __init__(
        self,
        name: str,
        device_type: str,
        memory_limit: int,
        incarnation: int,
        physical_device_desc: str,
    ) -> None:
        self.name = name
        self.device_type = device_type
        self.memory_limit = memory_limit
        self.incarnation = incarnation
        self.physical_device_desc = physical_device_desc

    def __repr__(self) -> str:
        lines = [
            'name: "%s"' % self.name,
            'device_type: "%s"' % self.device_type,
            "memory_limit: %d" % self.memory_limit,
            "incarnation: %d" % self.incarnation,
        ]
        if self.physical_device_desc:
            lines.append('physical_device_desc: "%s"' % self.physical_device_desc)
        return "\n".join(lines)


def list_local_devices(session_config: ConfigProto | None = None) -> list[DeviceAttributes]:
    """The devices of a session created with ``session_config`` (CPU first, then GPUs)."""
    return [
        DeviceAttributes(
            "/device:%s:%d" % (d.device_type, d.index),
            d.device_type,
            d.memory_limit,
            i + 1,
            d.description,
        )
        for i, d in enumerate(devices.local_devices(session_config))
    ]
