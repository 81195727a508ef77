"""Full-object checksums, computed incrementally as bytes stream past.

S3 stores a checksum with an object when it was uploaded with one
(``x-amz-checksum-<algorithm>``, "Checking object integrity" in the S3 user guide). A
*full-object* checksum covers the whole body and can be checked by hashing it front to
back; a *composite* one (``...-<parts>``, from multipart uploads) cannot, so it is
skipped. CRC32C uses the ``crc32c`` package, which hashes any buffer without copying
at several GB/s, so verification costs a few percent of a read at most.
"""

from __future__ import annotations

import base64
import hashlib
import zlib
from collections.abc import Callable, Mapping
from typing import Protocol

import crc32c as _crc32c

__all__ = [
    "RangeCrc32c",
    "StreamChecksum",
    "checksum_from_headers",
    "checksum_headers",
    "crc32c",
    "crc32c_b64",
    "crc32c_combine",
    "encode_crc32c",
]

Buffer = bytes | bytearray | memoryview


class _Hash(Protocol):
    def update(self, data: Buffer, /) -> None: ...
    def digest(self) -> bytes: ...


class _Crc:
    """A CRC32-family running value behind hashlib's update/digest interface."""

    def __init__(self, fn: Callable[[Buffer, int], int]) -> None:
        self._fn = fn
        self._value = 0

    def update(self, data: Buffer, /) -> None:
        self._value = self._fn(data, self._value)

    def digest(self) -> bytes:
        return self._value.to_bytes(4, "big")


def _crc32_update(data: Buffer, value: int) -> int:
    return zlib.crc32(data, value)


_FACTORIES: dict[str, Callable[[], _Hash]] = {
    "crc32c": lambda: _Crc(crc32c),
    "crc32": lambda: _Crc(_crc32_update),
    "sha256": hashlib.sha256,
    "sha1": hashlib.sha1,
}

# Preference when an object carries several: the cheapest to compute first.
_PREFERENCE = ("crc32c", "crc32", "sha1", "sha256")


def crc32c(data: Buffer, value: int = 0) -> int:
    """CRC32C of a buffer, read in place (the GIL is released for large ones)."""
    return int(_crc32c.crc32c(data, value))


def encode_crc32c(crc: int) -> str:
    """A CRC32C value as S3 transmits it: base64 of its 4 big-endian bytes."""
    return base64.b64encode(crc.to_bytes(4, "big")).decode()


def crc32c_b64(data: Buffer, value: int = 0) -> str:
    """Base64 of the big-endian CRC32C of ``data``, as S3 transmits it."""
    return encode_crc32c(crc32c(data, value))


# -- combining part CRCs ------------------------------------------------------------------

# CRC32C's polynomial (Castagnoli), bit-reflected as CRCs are computed (RFC 3720 §B.4).
_POLY = 0x82F63B78


def _multmodp(a: int, b: int) -> int:
    """a(x) * b(x) modulo the polynomial, in reflected bit order; ``a`` must not be 0."""
    m = 1 << 31
    p = 0
    while True:
        if a & m:
            p ^= b
            if not a & (m - 1):
                return p
        m >>= 1
        b = (b >> 1) ^ _POLY if b & 1 else b >> 1


def _x2n_table(entries: int) -> list[int]:
    table = []
    p = 1 << 30  # x^1
    for _ in range(entries):
        table.append(p)
        p = _multmodp(p, p)
    return table


# _X2N[k] is x^(2^k) modulo the polynomial, for every k a length in bytes can reach
# (k = 3 + bit length). zlib indexes its table with ``k & 31``, which holds for its own
# polynomial only: Castagnoli's does not repeat with period 32, so wrapping k gives wrong
# CRCs for ranges of 512 MiB and more.
_X2N = _x2n_table(128)


def _x2nmodp(n: int, k: int) -> int:
    """x^(n * 2^k) modulo the polynomial."""
    if k + n.bit_length() > len(_X2N):
        raise ValueError(f"length {n} << {k} is beyond what the CRC tables cover")
    p = 1 << 31  # x^0 = 1
    while n:
        if n & 1:
            p = _multmodp(_X2N[k], p)
        n >>= 1
        k += 1
    return p


def crc32c_combine(crc1: int, crc2: int, len2: int) -> int:
    """CRC32C of ``A + B`` from ``crc32c(A)``, ``crc32c(B)`` and ``len(B)``.

    zlib's ``crc32_combine`` (1.2.12 and later) for CRC32C's polynomial: the CRC of A
    shifted over ``len2`` zero bytes, i.e. multiplied by x^(8 * len2), plus the CRC of
    B. A few microseconds, whatever the lengths.
    """
    return _multmodp(_x2nmodp(len2, 3), crc1) ^ crc2


class RangeCrc32c:
    """The CRC32C of a whole object from the CRC32Cs of byte ranges of it, added in any
    order (parts fetched in parallel each hash their bytes as they land, while they are
    still in the CPU cache, instead of a second pass over the object).

    One :meth:`add` per range, from any thread (a dict store is atomic in CPython).
    """

    def __init__(self) -> None:
        self._ranges: dict[int, tuple[int, int]] = {}  # start -> (stop, crc)

    def add(self, start: int, stop: int, crc: int) -> None:
        self._ranges[start] = (stop, crc)

    def gaps(self, size: int) -> list[tuple[int, int]]:
        """The ranges of ``[0, size)`` not added."""
        out, pos = [], 0
        for start, (stop, _) in sorted(self._ranges.items()):
            if start > pos:
                out.append((pos, start))
            pos = max(pos, stop)
        if pos < size:
            out.append((pos, size))
        return out

    def value(self, size: int) -> int:
        """The CRC32C of ``[0, size)``; the ranges added must tile it exactly."""
        crc = pos = 0
        for start, (stop, part) in sorted(self._ranges.items()):
            if start != pos:
                raise ValueError(f"the ranges do not tile the object at offset {pos}")
            crc, pos = crc32c_combine(crc, part, stop - start), stop
        if pos != size:
            raise ValueError(f"the ranges end at offset {pos}, not at {size}")
        return crc


class StreamChecksum:
    """Hashes a body in order and compares the result with the stored value."""

    def __init__(self, algorithm: str, expected_b64: str) -> None:
        self.algorithm = algorithm
        self.expected = expected_b64
        self._hash = _FACTORIES[algorithm]()

    def update(self, data: Buffer) -> None:
        self._hash.update(data)

    def actual(self) -> str:
        return base64.b64encode(self._hash.digest()).decode()

    def matches(self) -> bool:
        return self.actual() == self.expected


def checksum_from_headers(headers: Mapping[str, str]) -> StreamChecksum | None:
    """A checker for the full-object checksum in ``headers``, or None if there is none.

    Composite checksums (``x-amz-checksum-type: COMPOSITE``, or a value ending in
    ``-<parts>``) describe parts, not the body, and are ignored.
    """
    if (headers.get("x-amz-checksum-type") or "FULL_OBJECT").upper() != "FULL_OBJECT":
        return None
    for algorithm in _PREFERENCE:
        value = headers.get(f"x-amz-checksum-{algorithm}")
        if value and "-" not in value:
            return StreamChecksum(algorithm, value)
    return None


def checksum_headers(checksums: Mapping[str, str], checksum_type: str | None) -> dict[str, str]:
    """The ``x-amz-checksum-*`` headers that carry ``checksums`` (algorithm -> value)."""
    headers = {f"x-amz-checksum-{algo}": value for algo, value in checksums.items()}
    if checksum_type:
        headers["x-amz-checksum-type"] = checksum_type
    return headers
