"""CRC32C (Castagnoli) and the "masked" form TF stores in TFRecord files, event files and
checkpoint bundles (``core/lib/hash/crc32c.h``).  The checksum itself comes from the maintained
``crc32c`` package (hardware instructions where the CPU has them)."""

from __future__ import annotations

import crc32c as _crc32c

_MASK_DELTA = 0xA282EAD8


def value(data: bytes, crc: int = 0) -> int:
    """CRC32C of ``data``, continuing from ``crc``."""
    return _crc32c.crc32c(data, crc)


def mask(crc: int) -> int:
    """TF's masked form of a CRC: rotated right by 15 bits plus a constant, so that a CRC of
    data that holds CRCs is not itself a weak checksum."""
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + _MASK_DELTA) & 0xFFFFFFFF


def unmask(masked: int) -> int:
    """Inverse of ``mask``."""
    rot = (masked - _MASK_DELTA) & 0xFFFFFFFF
    return ((rot >> 17) | (rot << 15)) & 0xFFFFFFFF


def masked_value(data: bytes) -> int:
    """``mask(value(data))``: what a TFRecord header or payload checksum holds."""
    return mask(value(data))
