"""MSB-first bit reading for the codecs' headers, bounded: a read past the end raises
:class:`~.byte_source.Unreadable` with the header's name, never an IndexError or a long loop."""

from __future__ import annotations

from .byte_source import Unreadable

# The bytes of a header read at most: every header read here ends far sooner (an SPS with
# every scaling list and 64 reference picture sets is a few kilobytes), and reading a huge
# integer bit by bit would be slow.
_MAX_BYTES = 1 << 16


class Bits:
    """An MSB-first reader of ``data``, with the exp-Golomb codes of ITU-T H.264/H.265 9.x
    and AV1's ``uvlc``; ``what`` names the header in the reason when the data runs out."""

    def __init__(self, data: bytes, what: str):
        data = data[:_MAX_BYTES]
        self._value = int.from_bytes(data, "big")
        self._left = 8 * len(data)
        self._what = what

    def fail(self) -> Unreadable:
        return Unreadable(f"unreadable {self._what}")

    @property
    def left(self) -> int:
        return self._left

    def u(self, n: int) -> int:
        if n > self._left:
            raise self.fail()
        self._left -= n
        return (self._value >> self._left) & ((1 << n) - 1)

    def flag(self) -> bool:
        return bool(self.u(1))

    def skip(self, n: int) -> None:
        self.u(n)

    def _leading_zeros(self, limit: int) -> int:
        rest = self._value & ((1 << self._left) - 1)
        zeros = self._left - rest.bit_length()  # zero bits before the next 1
        if zeros > limit:
            raise self.fail()
        return zeros

    def ue(self, limit: int = (1 << 32) - 2) -> int:
        zeros = self._leading_zeros(31)
        self._left -= zeros
        value = self.u(zeros + 1) - 1  # the marker bit and as many more: 2**zeros - 1 + info
        if value > limit:
            raise self.fail()
        return value

    def se(self, bound: int = 1 << 31) -> int:
        k = self.ue()
        value = (k + 1) // 2 if k & 1 else -(k // 2)
        if not -bound <= value <= bound:
            raise self.fail()
        return value

    def uvlc(self) -> int:
        """AV1's uvlc() (4.10.3): 32 or more leading zeros give 2**32 - 1."""
        rest = self._value & ((1 << self._left) - 1)
        zeros = self._left - rest.bit_length()
        if zeros >= 32:
            if rest == 0:  # the marker never comes
                raise self.fail()
            self._left -= zeros + 1
            return (1 << 32) - 1
        self._left -= zeros + 1
        return self.u(zeros) + (1 << zeros) - 1


def rbsp(nal: bytes, header: int) -> bytes:
    """An H.264/H.265 NAL unit's payload after its ``header`` bytes, without its
    emulation-prevention bytes (00 00 03 -> 00 00)."""
    return nal[header:].replace(b"\x00\x00\x03", b"\x00\x00")
