"""End-to-end verification of one full pass over an object, in object order."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from objsdk import errors
from objsdk._core.checksums import StreamChecksum, full_object_checksum
from objsdk._core.object_headers import stored_checksums
from objsdk._core.ranges import parse_content_range
from objsdk.models import ObjectInfo

__all__ = [
    "PassVerifier",
    "VerifyStats",
    "check_body",
    "check_value",
    "check_whole",
    "info_checksum",
]


class VerifyStats(Protocol):
    """Where a verifier reports (``ReadStats``): the algorithm the last full pass was
    verified with, or why a pass from byte 0 could not be verified."""

    verified: str | None
    unverified_reason: str | None


def info_checksum(info: ObjectInfo | None) -> tuple[StreamChecksum | None, str]:
    """The checker for the full-object checksum HEAD (or an upload) described, or None
    and why there is none."""
    if info is None:
        return None, "the stored checksums are not known (no HEAD was sent)"
    return full_object_checksum(info.checksums, info.checksum_type, info.etag)


class PassVerifier:
    """Hashes received bytes in object order and checks the stored checksum at the end.

    A pass starts from byte 0 (:meth:`start` with that answer's headers, or :meth:`prime`
    with what HEAD said). Bytes received twice (a 200 answer to a resume) are hashed
    once; a gap (a far seek) ends verification for the pass.
    """

    def __init__(self, bucket: str, key: str, stats: VerifyStats | None = None) -> None:
        self.bucket = bucket
        self.key = key
        self.stats = stats
        self.checksum: StreamChecksum | None = None
        self.hashed = 0  # length of the object prefix fed to the checksum

    def start(self, headers: Mapping[str, str]) -> None:
        """An answer from byte 0: a full pass starts, checked against what it stores
        (the answer's own ``x-amz-checksum-type`` and ETag say whether it is
        full-object)."""
        self.prime(
            *full_object_checksum(
                stored_checksums(headers), headers.get("x-amz-checksum-type"), headers.get("ETag")
            )
        )

    def prime(self, checksum: StreamChecksum | None, why_not: str = "") -> None:
        """A full pass starts, checked against ``checksum`` (None: ``why_not``)."""
        self.checksum, self.hashed = checksum, 0
        if checksum is None:
            self._unverified(why_not or "no checksum stored")

    def _unverified(self, why: str) -> None:
        if self.stats is not None:
            self.stats.unverified_reason = why

    def observe(self, offset: int, data: bytes | memoryview, size: int | None) -> None:
        """``data`` arrived at ``offset``; raises IntegrityError at the end on mismatch."""
        checksum = self.checksum
        if checksum is None:
            return
        end = offset + len(data)
        if end <= self.hashed:
            return  # received again: hashed already
        if offset > self.hashed:
            self.checksum = None  # a gap: this pass cannot be verified
            self._unverified(f"bytes {self.hashed}-{offset - 1} were skipped, not read")
            return
        checksum.update(data[self.hashed - offset :] if offset < self.hashed else data)
        self.hashed = end
        if size is not None and self.hashed >= size:
            self.checksum = None
            check_whole(checksum, bucket=self.bucket, key=self.key, offset=self.hashed)
            if self.stats is not None:
                self.stats.verified, self.stats.unverified_reason = checksum.algorithm, None


def check_whole(checksum: StreamChecksum, *, bucket: str, key: str, offset: int) -> None:
    """Raise :class:`~objsdk.IntegrityError` unless the bytes fed to ``checksum`` (the
    whole object) hash to the stored value."""
    check_value(checksum, checksum.actual(), bucket=bucket, key=key, offset=offset)


def check_value(
    checksum: StreamChecksum, actual: str, *, bucket: str, key: str, offset: int
) -> None:
    """Raise :class:`~objsdk.IntegrityError` unless ``actual`` (base64, as S3 sends it),
    worked out some other way than feeding ``checksum``, is the stored value."""
    if actual != checksum.expected:
        raise errors.IntegrityError(
            f"{checksum.algorithm} mismatch: stored {checksum.expected}, "
            f"received bytes hash to {actual}",
            bucket=bucket,
            key=key,
            offset=offset,
        )


def check_body(bucket: str, key: str, status: int, headers: Mapping[str, str], body: bytes) -> None:
    """Verify ``body``, a whole answer read into memory, if it is the whole object: a 200,
    or a 206 whose ``Content-Range`` covers every byte. Raises
    :class:`~objsdk.IntegrityError` if it does not hash to the full-object checksum the
    answer carries (none, or a composite one: nothing to check)."""
    if status == 206:
        cr = parse_content_range(headers.get("Content-Range"))
        if cr is None or cr.first != 0 or cr.total != len(body):
            return
    elif status != 200:
        return
    checksum, _ = full_object_checksum(
        stored_checksums(headers), headers.get("x-amz-checksum-type"), headers.get("ETag")
    )
    if checksum is not None:
        checksum.update(body)
        check_whole(checksum, bucket=bucket, key=key, offset=len(body))
