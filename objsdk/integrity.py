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

__all__ = ["StreamChecksum", "checksum_from_headers", "crc32c_b64"]

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


def _crc32c_update(data: Buffer, value: int) -> int:
    return int(_crc32c.crc32c(data, value))


def _crc32_update(data: Buffer, value: int) -> int:
    return zlib.crc32(data, value)


_FACTORIES: dict[str, Callable[[], _Hash]] = {
    "crc32c": lambda: _Crc(_crc32c_update),
    "crc32": lambda: _Crc(_crc32_update),
    "sha256": hashlib.sha256,
    "sha1": hashlib.sha1,
}

# Preference when an object carries several: the cheapest to compute first.
_PREFERENCE = ("crc32c", "crc32", "sha1", "sha256")


def crc32c_b64(data: Buffer, value: int = 0) -> str:
    """Base64 of the big-endian CRC32C of ``data``, as S3 transmits it."""
    crc = int(_crc32c.crc32c(data, value))
    return base64.b64encode(crc.to_bytes(4, "big")).decode()


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
