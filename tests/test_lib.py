"""minitf.lib: CRC32C and TF's masked CRC (the checksums of TFRecord, event and checkpoint
files)."""

from hypothesis import given
from hypothesis import strategies as st

from minitf.lib import crc


def test_crc32c_check_value():
    # the CRC-32C catalogue's check value: the checksum of the ASCII digits 1..9
    assert crc.value(b"123456789") == 0xE3069283


def test_crc_continues_from_a_prefix():
    assert crc.value(b"56789", crc.value(b"1234")) == crc.value(b"123456789")


def test_masked_crc_of_an_empty_record_length():
    # a TFRecord header holds the length (8 bytes, little-endian) and its masked CRC; these
    # are the bytes TF writes for an empty record
    assert crc.masked_value(bytes(8)) == crc.mask(crc.value(bytes(8)))
    assert crc.mask(0) == 0xA282EAD8


@given(st.integers(min_value=0, max_value=0xFFFFFFFF))
def test_unmask_inverts_mask(x):
    assert crc.unmask(crc.mask(x)) == x
    assert 0 <= crc.mask(x) <= 0xFFFFFFFF
