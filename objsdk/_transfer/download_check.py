"""What a whole-object transfer (``download``, ``get_into``) verifies, and how: the
object's full-object checksum, from the parts' CRCs combined or a pass over the bytes in
place; or a multipart upload's composite checksum, part by part."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from objsdk import errors
from objsdk._core.checksums import (
    CRC_ALGORITHMS,
    RangeCrc,
    StreamChecksum,
    full_object_checksum,
    is_multipart_etag,
)
from objsdk._core.continuation import is_strong_etag
from objsdk._io.verify import check_value, check_whole, info_checksum
from objsdk._transport.base import Transport
from objsdk.models import ObjectInfo

__all__ = ["Check", "Feed"]

# feed(update, start, stop) passes the received bytes [start, stop) to update, in order.
Feed = Callable[[Callable[[Any], None], int, int], None]

# Preference among composite checksums: the CRCs (combinable as parts land), then SHAs.
_COMPOSITE_PREFERENCE = ("crc32c", "crc64nvme", "crc32", "sha1", "sha256")


@dataclass(frozen=True)
class _Composite:
    """A multipart upload's checksum of its parts' checksums: ``value`` (base64,
    without the ``-<parts>``) over ``parts`` parts of ``part_size`` bytes (the last one
    shorter). ``maybe_full``: no type was stated, so it may also be a full-object one."""

    algorithm: str
    value: str
    parts: int
    part_size: int
    maybe_full: bool

    def bounds(self, size: int) -> list[tuple[int, int]]:
        return [
            (i * self.part_size, min(size, (i + 1) * self.part_size)) for i in range(self.parts)
        ]


class Check:
    """What one whole-object transfer verifies, and how.

    The checksum comes from HEAD (:func:`~objsdk._io.verify.info_checksum`). For a CRC
    (``crcs``), each part hashes its own bytes as they land and the CRCs are combined:
    no second pass over the object; a SHA takes one pass over the bytes in place.

    A composite checksum (a multipart upload's checksum of its parts' checksums, or a
    bare one on a multipart object whose type nobody states) is checked part by part
    where ``HEAD ?partNumber=1`` gives the upload's part size (S3 sizes every part but
    the last alike when an SDK uploads): the CRCs are then cut at the upload's part
    boundaries as bytes land. Where the layout cannot be known, nothing is checked and
    ``unverified_reason`` says why.
    """

    def __init__(self, info: ObjectInfo, verify: bool, transport: Transport | None = None) -> None:
        self.info = info
        self.verified: str | None = None
        self.unverified_reason: str | None = None if verify else "verify=False"
        self.checksum: StreamChecksum | None = None
        self.composite: _Composite | None = None
        self.open = False  # full-object or composite: the GET of byte 0 decides
        self._get_type: str | None = None
        if verify:
            self.checksum, why = info_checksum(info)
            if self.checksum is None and transport is not None:
                self.composite, why = _composite(transport, info, why)
            untyped = not info.checksum_type and is_multipart_etag(info.etag)
            if self.checksum is None and self.composite is None and untyped:
                self.checksum, _ = full_object_checksum(info.checksums, "FULL_OBJECT", None)
                self.open = self.checksum is not None
            if self.checksum is None and self.composite is None:
                self.unverified_reason = why
        if self.composite is not None:
            algorithm: str | None = self.composite.algorithm
            cuts = [stop for _, stop in self.composite.bounds(info.size or 0)]
        else:
            algorithm = self.checksum.algorithm if self.checksum is not None else None
            cuts = []
        self.crcs = RangeCrc(algorithm, cuts) if algorithm in CRC_ALGORITHMS else None

    @property
    def on_start(self) -> Callable[[Mapping[str, str]], None] | None:
        """For the GET of byte 0, where HEAD left the checksum type open."""
        return self._on_start if self.open else None

    def _on_start(self, headers: Mapping[str, str]) -> None:
        self._get_type = (headers.get("x-amz-checksum-type") or "").upper() or None

    def verify(self, feed: Feed) -> None:
        """Check the object's checksum, if it has one: from the parts' CRCs (any range
        they lack, such as parts an earlier run left, hashed through ``feed``), else
        over all the bytes ``feed`` passes in object order."""
        info = self.info
        size = info.size or 0
        if self.crcs is not None:
            for start, stop in self.crcs.gaps(size):
                for a, b in self.crcs.pieces(start, stop):
                    gap = _RunningCrc(self.crcs)
                    feed(gap.update, a, b)
                    self.crcs.add(a, b, gap.value)
        if self.composite is not None:
            self._verify_composite(self.composite, feed, size)
            return
        checksum = self.checksum
        if checksum is None:
            return
        if self.open and self._get_type != "FULL_OBJECT":
            self.unverified_reason = (
                f"multipart object (ETag {info.etag}) whose checksum type neither HEAD "
                "nor GET states: taken as composite, which covers the parts, not the object"
            )
            return
        if self.crcs is None:
            feed(checksum.update, 0, size)
            check_whole(checksum, bucket=info.bucket, key=info.key, offset=size)
        else:
            actual = self.crcs.encoded(size)
            check_value(checksum, actual, bucket=info.bucket, key=info.key, offset=size)
        self.verified, self.unverified_reason = checksum.algorithm, None

    def _verify_composite(self, composite: _Composite, feed: Feed, size: int) -> None:
        info, algorithm = self.info, composite.algorithm
        digests = []
        for start, stop in composite.bounds(size):
            if self.crcs is not None:
                width = self.crcs.poly.width // 8
                digests.append(self.crcs.value(stop, start).to_bytes(width, "big"))
            else:
                h = hashlib.new(algorithm)
                feed(h.update, start, stop)
                digests.append(h.digest())
        if self.crcs is not None:
            whole_digest = self.crcs.crc(b"".join(digests), 0).to_bytes(width, "big")
        else:
            whole_digest = hashlib.new(algorithm, b"".join(digests)).digest()
        actual = base64.b64encode(whole_digest).decode()
        full = self.crcs.encoded(size) if composite.maybe_full and self.crcs is not None else None
        if actual != composite.value and full == composite.value:
            actual = full  # a full-object CRC after all
        if actual != composite.value:
            raise errors.IntegrityError(
                f"{algorithm} mismatch: the stored checksum of the {composite.parts} "
                f"parts' checksums is {composite.value}, the received parts give {actual}",
                bucket=info.bucket,
                key=info.key,
                offset=size,
            )
        self.verified, self.unverified_reason = algorithm, None


def _composite(transport: Transport, info: ObjectInfo, why: str) -> tuple[_Composite | None, str]:
    """The composite checksum to check part by part, or None and why not."""
    etag_parts = _suffix(info.etag.strip('"') if info.etag else "")
    untyped = not info.checksum_type
    typed = (info.checksum_type or "").upper() == "COMPOSITE"
    for algorithm in _COMPOSITE_PREFERENCE:
        stored = info.checksums.get(algorithm)
        if not stored:
            continue
        value, _, count = stored.partition("-")
        if not (count or typed or (untyped and etag_parts)):
            continue
        size = info.size or 0
        part_size, reported = _first_part(transport, info)
        parts = reported or (int(count) if _is_count(count) else etag_parts) or 0
        if not part_size or parts < 1 or not (parts - 1) * part_size < size <= parts * part_size:
            return None, (
                f"composite {algorithm} checksum over {parts} parts whose sizes "
                "HEAD ?partNumber=1 does not tell: it covers the parts, not the object"
            )
        maybe_full = untyped and not count
        return _Composite(algorithm, value, parts, part_size, maybe_full), ""
    return None, why


def _is_count(text: str) -> bool:
    # ASCII digits only: str.isdigit() takes "²", which int() refuses. At most 19 (a
    # 64-bit count): int() refuses more than 4300 with a ValueError.
    return len(text) <= 19 and text.isascii() and text.isdigit()


def _suffix(text: str) -> int | None:
    _, dash, count = text.rpartition("-")
    return int(count) if dash and _is_count(count) else None


def _first_part(transport: Transport, info: ObjectInfo) -> tuple[int | None, int | None]:
    """The size of the object's first upload part, and its number of parts, from
    ``HEAD ?partNumber=1`` (GetObject/HeadObject PartNumber), pinned to the ETag."""
    params = [("partNumber", "1")]
    if info.version_id:
        params.append(("versionId", info.version_id))
    headers = {"If-Match": info.etag} if info.etag and is_strong_etag(info.etag) else {}
    try:
        resp = transport.request(
            "HEAD",
            operation="head_object(partNumber=1)",
            bucket=info.bucket,
            key=info.key,
            params=params,
            headers=headers,
            ok=(200, 206),  # S3 answers a part as a range of the object
        )
    except errors.S3Error:
        return None, None  # no part layout to be had (a 412 is caught by the parts' pins)
    length = resp.headers.get("Content-Length") or ""
    count = resp.headers.get("x-amz-mp-parts-count") or ""
    return (int(length) if _is_count(length) else None), (int(count) if _is_count(count) else None)


class _RunningCrc:
    """A running CRC of ``crcs``' algorithm, fed like a hash."""

    def __init__(self, crcs: RangeCrc) -> None:
        self._crc = crcs.crc
        self.value = 0

    def update(self, data: Any) -> None:
        self.value = self._crc(data, self.value)
