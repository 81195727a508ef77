"""What a whole-object transfer (``download``, ``get_into``) verifies, and how: the
object's full-object checksum, from the parts' CRCs combined or a pass over the bytes in
place."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from objsdk._core.checksums import (
    CRC_ALGORITHMS,
    RangeCrc,
    StreamChecksum,
    full_object_checksum,
    is_multipart_etag,
)
from objsdk._io.verify import check_value, check_whole, info_checksum
from objsdk.models import ObjectInfo

__all__ = ["Check", "Feed"]

# feed(update, start, stop) passes the received bytes [start, stop) to update, in order.
Feed = Callable[[Callable[[Any], None], int, int], None]


class Check:
    """What one whole-object transfer verifies, and how.

    The checksum comes from HEAD (:func:`~objsdk._io.verify.info_checksum`). Where HEAD
    leaves it open whether a multipart object's checksum is full-object or composite
    (no ``x-amz-checksum-type``), the GET of byte 0 may say: the parts are hashed with
    the candidate's CRC meanwhile, and it is checked only if that GET says FULL_OBJECT.
    For a CRC (``crcs``), each part hashes its own bytes as they land and the CRCs are
    combined: no second pass over the object.
    """

    def __init__(self, info: ObjectInfo, verify: bool) -> None:
        self.info = info
        self.verified: str | None = None
        self.unverified_reason: str | None = None if verify else "verify=False"
        self.checksum: StreamChecksum | None = None
        self.open = False  # full-object or composite: the GET of byte 0 decides
        self._get_type: str | None = None
        if verify:
            self.checksum, why = info_checksum(info)
            if self.checksum is None and not info.checksum_type and is_multipart_etag(info.etag):
                self.checksum, _ = full_object_checksum(info.checksums, "FULL_OBJECT", None)
                self.open = self.checksum is not None
            if self.checksum is None:
                self.unverified_reason = why
        algorithm = self.checksum.algorithm if self.checksum is not None else None
        self.crcs = RangeCrc(algorithm) if algorithm in CRC_ALGORITHMS else None

    @property
    def on_start(self) -> Callable[[Mapping[str, str]], None] | None:
        """For the GET of byte 0, where HEAD left the checksum type open."""
        return self._on_start if self.open else None

    def _on_start(self, headers: Mapping[str, str]) -> None:
        self._get_type = (headers.get("x-amz-checksum-type") or "").upper() or None

    def verify(self, feed: Feed) -> None:
        """Check the object's full-object checksum, if it has one: from the parts' CRCs
        (any range they lack, such as parts an earlier run left, hashed through
        ``feed``), else over all the bytes ``feed`` passes in object order."""
        checksum, info = self.checksum, self.info
        if checksum is None:
            return
        if self.open and self._get_type != "FULL_OBJECT":
            self.unverified_reason = (
                f"multipart object (ETag {info.etag}) whose checksum type neither HEAD "
                "nor GET states: taken as composite, which covers the parts, not the object"
            )
            return
        size = info.size or 0
        crcs = self.crcs
        if crcs is None:
            feed(checksum.update, 0, size)
            check_whole(checksum, bucket=info.bucket, key=info.key, offset=size)
        else:
            for start, stop in crcs.gaps(size):
                gap = _RunningCrc(crcs)
                feed(gap.update, start, stop)
                crcs.add(start, stop, gap.value)
            actual = crcs.encoded(size)
            check_value(checksum, actual, bucket=info.bucket, key=info.key, offset=size)
        self.verified, self.unverified_reason = checksum.algorithm, None


class _RunningCrc:
    """A running CRC of ``crcs``' algorithm, fed like a hash."""

    def __init__(self, crcs: RangeCrc) -> None:
        self._crc = crcs.crc
        self.value = 0

    def update(self, data: Any) -> None:
        self.value = self._crc(data, self.value)
