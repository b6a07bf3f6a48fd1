"""Philox4x32-10, TF's counter-based random generator (``core/lib/random/philox_random.h``),
and the one-number-at-a-time adapter (``random_distributions.h``'s ``SingleSampleAdapter``).

Book section: "RandomShuffleQueue" (Asynchronous Communication Using TensorFlow Queues).  A
``RandomShuffleQueue`` picks the element a dequeue takes as ``sample % size`` with samples of
this generator keyed by the op's two seeds, so the same seeds give the same order as TF.
"""

_M0, _M1 = 0xD2511F53, 0xCD9E8D57  # the round multipliers
_W0, _W1 = 0x9E3779B9, 0xBB67AE85  # the key increments (golden ratio, sqrt(3) - 1)
_MASK32 = 0xFFFFFFFF


def philox_block(counter: list, key: tuple) -> list:
    """The four 32-bit outputs of ten Philox rounds of ``counter`` (4 words) under ``key`` (2)."""
    c0, c1, c2, c3 = counter
    k0, k1 = key
    for r in range(10):
        p0, p1 = _M0 * c0, _M1 * c2
        c0, c1, c2, c3 = (
            (p1 >> 32) ^ c1 ^ k0,
            p1 & _MASK32,
            (p0 >> 32) ^ c3 ^ k1,
            p0 & _MASK32,
        )
        if r < 9:
            k0, k1 = (k0 + _W0) & _MASK32, (k1 + _W1) & _MASK32
    return [c0, c1, c2, c3]


class PhiloxSampler:
    """``SingleSampleAdapter<PhiloxRandom(seed, seed2)>``: 32-bit samples, one per call.

    ``seed`` is the key (low word first), ``seed2`` the high half of the 128-bit counter."""

    def __init__(self, seed: int, seed2: int) -> None:
        seed &= 2**64 - 1
        seed2 &= 2**64 - 1
        self._key = (seed & _MASK32, seed >> 32)
        self._counter = [0, 0, seed2 & _MASK32, seed2 >> 32]
        self._buffer: list = []

    def __call__(self) -> int:
        if not self._buffer:
            self._buffer = philox_block(self._counter, self._key)[::-1]
            self._skip_one()
        return self._buffer.pop()

    def _skip_one(self):
        """Adds one to the 128-bit counter, word 0 lowest."""
        for i in range(4):
            self._counter[i] = (self._counter[i] + 1) & _MASK32
            if self._counter[i]:
                break
