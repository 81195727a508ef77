"""End-to-end verification of one full pass over an object, in object order."""

from __future__ import annotations

from collections.abc import Mapping

from objsdk import errors
from objsdk._core.checksums import StreamChecksum, checksum_from_headers

__all__ = ["PassVerifier", "check_value", "check_whole"]


class PassVerifier:
    """Hashes received bytes in object order and checks the stored checksum at the end.

    A pass starts from byte 0 (:meth:`start` with that answer's headers, or :meth:`prime`
    with what HEAD said). Bytes received twice (a 200 answer to a resume) are hashed
    once; a gap (a far seek) ends verification for the pass.
    """

    def __init__(self, bucket: str, key: str) -> None:
        self.bucket = bucket
        self.key = key
        self.checksum: StreamChecksum | None = None
        self.hashed = 0  # length of the object prefix fed to the checksum

    def start(self, headers: Mapping[str, str]) -> None:
        """An answer from byte 0: a full pass starts, checked against what it stores."""
        self.prime(checksum_from_headers(headers))

    def prime(self, checksum: StreamChecksum | None) -> None:
        self.checksum, self.hashed = checksum, 0

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
            return
        checksum.update(data[self.hashed - offset :] if offset < self.hashed else data)
        self.hashed = end
        if size is not None and self.hashed >= size:
            self.checksum = None
            check_whole(checksum, bucket=self.bucket, key=self.key, offset=self.hashed)


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
