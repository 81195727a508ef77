"""Full-object checksums, computed incrementally as bytes stream past.

S3 stores a checksum with an object when it was uploaded with one, and a CRC64NVME when
it was uploaded without ("Checking object integrity" in the S3 user guide). A
*full-object* checksum covers the whole body and can be checked by hashing it front to
back; a *composite* one (``x-amz-checksum-type: COMPOSITE``, a value ending in
``-<parts>``) is a checksum of the parts' checksums, so it says nothing about a body
hashed whole and is skipped (:func:`full_object_checksum` says why).

The three CRCs hash at hardware speed, each with a library measured for it
(docs/design.md, "Checksums"): CRC32 with ``deflate`` (libdeflate), CRC32C with
``fastcrc``, CRC64NVME with ``awscrt`` (imported on first use: it takes ~30 ms). Each
reads any buffer in place.
"""

from __future__ import annotations

import base64
import bisect
import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import deflate as _deflate
from fastcrc import crc32 as _fastcrc32

from objsdk._core.crc import CRC32, CRC32C, CRC64NVME, CrcPoly, crc_combine

__all__ = [
    "CRC_ALGORITHMS",
    "RangeCrc",
    "RangeCrc32c",
    "StreamChecksum",
    "checksum_from_headers",
    "checksum_headers",
    "crc32c",
    "crc32c_b64",
    "crc32c_combine",
    "crc_function",
    "encode_crc32c",
    "full_object_checksum",
    "is_multipart_etag",
]

Buffer = bytes | bytearray | memoryview
CrcFunction = Callable[[Buffer, int], int]


class _Hash(Protocol):
    def update(self, data: Buffer, /) -> None: ...
    def digest(self) -> bytes: ...


# The CRCs S3 stores, by algorithm name: their polynomial (for combining ranges).
CRC_ALGORITHMS: dict[str, CrcPoly] = {"crc32": CRC32, "crc32c": CRC32C, "crc64nvme": CRC64NVME}


def crc32c(data: Buffer, value: int = 0) -> int:
    """CRC32C of a buffer, read in place (the GIL is released)."""
    # fastcrc's ``initial`` is the previous CRC (its init and final XOR are both ~0).
    return int(_fastcrc32.iscsi(data, value))


def _crc32(data: Buffer, value: int = 0) -> int:
    return int(_deflate.crc32(data, value))


def _crc64nvme(data: Buffer, value: int = 0) -> int:
    return int(_awscrt().crc64nvme(data, value))


_awscrt_checksums: Any = None


def _awscrt() -> Any:
    """awscrt's checksums module, for CRC64NVME alone. Loading awscrt takes ~30 ms of
    CPU, so only a process that meets a CRC64NVME pays it (docs/design.md, "Checksums")."""
    global _awscrt_checksums
    if _awscrt_checksums is None:
        from awscrt import checksums  # type: ignore[import-untyped]

        _awscrt_checksums = checksums
    return _awscrt_checksums


_CRC_FUNCTIONS: dict[str, CrcFunction] = {
    "crc32": _crc32,
    "crc32c": crc32c,
    "crc64nvme": _crc64nvme,
}


def crc_function(algorithm: str) -> CrcFunction:
    """``f(data, value) -> value``: the running CRC of ``algorithm`` (a key of
    :data:`CRC_ALGORITHMS`), at hardware speed, reading ``data`` in place."""
    return _CRC_FUNCTIONS[algorithm]


class _Crc:
    """A running CRC behind hashlib's update/digest interface."""

    def __init__(self, algorithm: str) -> None:
        self._fn = _CRC_FUNCTIONS[algorithm]
        self._bytes = CRC_ALGORITHMS[algorithm].width // 8
        self._value = 0

    def update(self, data: Buffer, /) -> None:
        self._value = self._fn(data, self._value)

    def digest(self) -> bytes:
        return self._value.to_bytes(self._bytes, "big")


_FACTORIES: dict[str, Callable[[], _Hash]] = {
    "crc32c": lambda: _Crc("crc32c"),
    "crc32": lambda: _Crc("crc32"),
    "crc64nvme": lambda: _Crc("crc64nvme"),
    "sha256": hashlib.sha256,
    "sha1": hashlib.sha1,
}

# Preference when an object carries several: the CRCs (a fraction of the SHAs' cost,
# and combinable across parts fetched in parallel), then the SHAs.
_PREFERENCE = ("crc32c", "crc64nvme", "crc32", "sha1", "sha256")


def encode_crc32c(crc: int) -> str:
    """A CRC32C value as S3 transmits it: base64 of its 4 big-endian bytes."""
    return base64.b64encode(crc.to_bytes(4, "big")).decode()


def encode_crc(algorithm: str, crc: int) -> str:
    """A CRC value as S3 transmits it: base64 of its big-endian bytes."""
    return base64.b64encode(crc.to_bytes(CRC_ALGORITHMS[algorithm].width // 8, "big")).decode()


def crc32c_b64(data: Buffer, value: int = 0) -> str:
    """Base64 of the big-endian CRC32C of ``data``, as S3 transmits it."""
    return encode_crc32c(crc32c(data, value))


def crc32c_combine(crc1: int, crc2: int, len2: int) -> int:
    """CRC32C of ``A + B`` from ``crc32c(A)``, ``crc32c(B)`` and ``len(B)``
    (:func:`objsdk._core.crc.crc_combine`)."""
    return crc_combine(CRC32C, crc1, crc2, len2)


class RangeCrc:
    """The CRC (``algorithm``: crc32, crc32c or crc64nvme) of a whole object from the
    CRCs of byte ranges of it, added in any order (parts fetched in parallel each hash
    their bytes as they land, while they are still in the CPU cache, instead of a second
    pass over the object).

    One :meth:`add` per range, from any thread (a dict store is atomic in CPython).
    ``cuts`` are offsets no range may straddle (the parts of a multipart upload, whose
    own CRCs :meth:`value` of each gives): whoever adds ranges ends one at each cut
    (:meth:`next_cut`).
    """

    def __init__(self, algorithm: str = "crc32c", cuts: Sequence[int] = ()) -> None:
        self.algorithm = algorithm
        self.poly = CRC_ALGORITHMS[algorithm]
        self.crc: CrcFunction = _CRC_FUNCTIONS[algorithm]  # the running CRC, for parts
        self.cuts = sorted(cuts)
        self._ranges: dict[int, tuple[int, int]] = {}  # start -> (stop, crc)

    def next_cut(self, pos: int) -> int | None:
        """The first cut after ``pos``, or None."""
        i = bisect.bisect_right(self.cuts, pos)
        return self.cuts[i] if i < len(self.cuts) else None

    def pieces(self, start: int, stop: int) -> list[tuple[int, int]]:
        """``[start, stop)`` cut at the cuts inside it."""
        out = []
        while start < stop:
            cut = self.next_cut(start)
            end = stop if cut is None else min(cut, stop)
            out.append((start, end))
            start = end
        return out

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

    def value(self, size: int, start: int = 0) -> int:
        """The CRC of ``[start, size)``; the ranges added there must tile it exactly."""
        crc, pos = 0, start
        for first, (stop, part) in sorted(self._ranges.items()):
            if first < start or first >= size:
                continue
            if first != pos or stop > size:
                raise ValueError(f"the ranges do not tile the object at offset {pos}")
            crc, pos = crc_combine(self.poly, crc, part, stop - first), stop
        if pos != size:
            raise ValueError(f"the ranges end at offset {pos}, not at {size}")
        return crc

    def encoded(self, size: int) -> str:
        """:meth:`value` as S3 transmits it (base64, big-endian)."""
        return encode_crc(self.algorithm, self.value(size))


class RangeCrc32c(RangeCrc):
    """:class:`RangeCrc` for CRC32C."""

    def __init__(self) -> None:
        super().__init__("crc32c")


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


# A multipart upload's ETag: "<MD5 of the parts' MD5s>-<parts>" (S3 user guide, "Checking
# object integrity", multipart uploads).
_MULTIPART_ETAG = re.compile(r"-[0-9]+\"?$")


def is_multipart_etag(etag: str | None) -> bool:
    """True for the ETag of an object stored by a multipart upload."""
    return bool(etag) and _MULTIPART_ETAG.search(etag or "") is not None


def full_object_checksum(
    checksums: Mapping[str, str], checksum_type: str | None, etag: str | None
) -> tuple[StreamChecksum | None, str]:
    """A checker for the object's full-object checksum, or None and the reason there is
    none (for stats and messages).

    ``checksums`` maps algorithm to the stored base64 value (HEAD or GET headers),
    ``checksum_type`` is ``x-amz-checksum-type`` if the answer had one, ``etag`` the
    object's ETag. Composite checksums describe the parts, not the body, and are never
    checked against it: ``x-amz-checksum-type: COMPOSITE``; a value ending in
    ``-<parts>``; and, when the type is not stated, any CRC32, CRC32C, SHA1 or SHA256
    of an object whose ETag says it was uploaded in parts (boto3's ``upload_fileobj``
    with ``ChecksumAlgorithm="CRC32"`` stores a composite CRC32 that some services return
    bare and without a type). A CRC64NVME is always full-object (S3 computes it only
    that way), so it is checked whatever the ETag.
    """
    kind = (checksum_type or "").upper()
    if kind and kind != "FULL_OBJECT":
        return None, f"{kind.lower()} checksum: it covers the parts, not the object"
    found = [(algo, checksums[algo]) for algo in _PREFERENCE if checksums.get(algo)]
    if not found:
        return None, "no checksum stored"
    for algorithm, value in found:
        if "-" in value:
            continue  # "<checksum of the parts' checksums>-<parts>"
        if not kind and algorithm != "crc64nvme" and is_multipart_etag(etag):
            continue
        return StreamChecksum(algorithm, value), ""
    if not kind and is_multipart_etag(etag):
        return None, (
            f"multipart object (ETag {etag}) whose checksum type is not stated: "
            "taken as composite, which covers the parts, not the object"
        )
    return None, "composite checksum: it covers the parts, not the object"


def checksum_from_headers(headers: Mapping[str, str]) -> StreamChecksum | None:
    """A checker for the full-object checksum in the (case-insensitive) ``headers`` of
    an answer, or None if there is none (see :func:`full_object_checksum`)."""
    stored = {}
    for algorithm in _PREFERENCE:
        value = headers.get(f"x-amz-checksum-{algorithm}")
        if value:
            stored[algorithm] = value
    checker, _ = full_object_checksum(
        stored, headers.get("x-amz-checksum-type"), headers.get("ETag")
    )
    return checker


def checksum_headers(checksums: Mapping[str, str], checksum_type: str | None) -> dict[str, str]:
    """The ``x-amz-checksum-*`` headers that carry ``checksums`` (algorithm -> value)."""
    headers = {f"x-amz-checksum-{algo}": value for algo, value in checksums.items()}
    if checksum_type:
        headers["x-amz-checksum-type"] = checksum_type
    return headers
