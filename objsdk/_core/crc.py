"""Combining CRCs of adjacent byte ranges (pure maths, a few microseconds per combine).

zlib's ``crc32_combine`` (1.2.12 and later), for any reflected CRC whose initial value
equals its final XOR (CRC32, CRC32C and CRC64NVME all start from and XOR with all
ones): the CRC of ``A + B`` is the CRC of A multiplied by x^(8 * len(B)) modulo the
polynomial, plus (XOR) the CRC of B. Parts fetched in parallel each hash their own
bytes as they land; combining their CRCs gives the object's without a second pass.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

__all__ = ["CRC32", "CRC32C", "CRC64NVME", "CrcPoly", "crc_combine"]


def _x2n_table(width: int, poly: int, entries: int) -> tuple[int, ...]:
    """x^(2^k) modulo the polynomial for k < ``entries``."""
    table = []
    p = 1 << (width - 2)  # x^1, in reflected order
    for _ in range(entries):
        table.append(p)
        p = _multmodp(width, poly, p, p)
    return tuple(table)


def _multmodp(width: int, poly: int, a: int, b: int) -> int:
    """a(x) * b(x) modulo the polynomial, in reflected bit order."""
    m = 1 << (width - 1)
    p = 0
    while m and a:
        if a & m:
            p ^= b
            a ^= m
        m >>= 1
        b = (b >> 1) ^ poly if b & 1 else b >> 1
    return p


@dataclass(frozen=True)
class CrcPoly:
    """A reflected CRC polynomial of ``width`` bits, with its x^(2^k) table.

    The table has an entry for every k a length in bytes can reach (k = 3 + the length's
    bit length, up to 2^125 bytes). zlib indexes its table with ``k & 31``, which holds
    for its own polynomial only (x^(2^k) happens to repeat with period 32 there):
    Castagnoli's and NVMe's polynomials do not, so wrapping k gives wrong CRCs for
    ranges of 512 MiB and more.
    """

    name: str
    width: int
    poly: int  # bit-reflected, as the CRC is computed

    @cached_property
    def _x2n(self) -> tuple[int, ...]:
        # Built on first use, not at import: 128 products for each of the three
        # polynomials cost every process that imports objsdk about 4 ms.
        return _x2n_table(self.width, self.poly, 128)

    def multmodp(self, a: int, b: int) -> int:
        return _multmodp(self.width, self.poly, a, b)

    def x8nmodp(self, n: int) -> int:
        """x^(8 * n) modulo the polynomial: ``n`` zero bytes."""
        k = 3
        if k + n.bit_length() > len(self._x2n):
            raise ValueError(f"length {n} is beyond what the {self.name} tables cover")
        p = 1 << (self.width - 1)  # x^0 = 1
        while n:
            if n & 1:
                p = self.multmodp(self._x2n[k], p)
            n >>= 1
            k += 1
        return p


# RFC 1952 / IEEE 802.3 (zlib's), RFC 3720 §B.4 (Castagnoli), and the NVMe spec's
# CRC-64 (NVM Command Set 1.0 §5.2.1.3.4; S3's CRC64NVME): all bit-reflected.
CRC32 = CrcPoly("crc32", 32, 0xEDB88320)
CRC32C = CrcPoly("crc32c", 32, 0x82F63B78)
CRC64NVME = CrcPoly("crc64nvme", 64, 0x9A6C9329AC4BC9B5)


def crc_combine(poly: CrcPoly, crc1: int, crc2: int, len2: int) -> int:
    """The CRC of ``A + B`` from ``crc(A)``, ``crc(B)`` and ``len(B)``."""
    return poly.multmodp(poly.x8nmodp(len2), crc1) ^ crc2
