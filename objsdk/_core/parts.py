"""Splitting a byte range into parts: one ``Part`` type and one planner for uploads,
downloads and read-ahead (pure)."""

from __future__ import annotations

from dataclasses import dataclass

from objsdk import errors
from objsdk._core.sizes import (
    DEFAULT_PART_SIZE,
    MAX_OBJECT_SIZE,
    MAX_PART_SIZE,
    MAX_PARTS,
    MIN_PART_SIZE,
    MiB,
)

__all__ = ["Part", "part_count", "plan_parts", "plan_upload", "upload_part_size"]


@dataclass(frozen=True)
class Part:
    """Part ``index`` (0-based) of a transfer: object bytes ``[start, stop)``."""

    index: int
    start: int
    stop: int

    @property
    def length(self) -> int:
        return self.stop - self.start

    @property
    def number(self) -> int:
        """S3's 1-based part number (UploadPart, CompleteMultipartUpload)."""
        return self.index + 1


def plan_parts(start: int, stop: int, part_size: int) -> list[Part]:
    """Split ``[start, stop)`` into consecutive parts of ``part_size`` bytes (the last
    one shorter); no parts for an empty range."""
    if isinstance(part_size, bool) or not isinstance(part_size, int) or part_size < 1:
        raise errors.InvalidArgument(f"part_size must be a positive int, got {part_size!r}")
    return [
        Part(i, s, min(s + part_size, stop)) for i, s in enumerate(range(start, stop, part_size))
    ]


def part_count(size: int, part_size: int) -> int:
    """How many parts an object of ``size`` bytes has."""
    return -(-size // part_size)


def upload_part_size(size: int | None, part_size: int | None) -> int:
    """The part size for a multipart upload of ``size`` bytes (None: unknown).

    ``part_size`` (default 16 MiB) must be within S3's limits, and is raised when
    needed to stay within 10,000 parts, rounded up to a whole MiB.
    """
    want = DEFAULT_PART_SIZE if part_size is None else part_size
    if (
        isinstance(want, bool)
        or not isinstance(want, int)
        or not MIN_PART_SIZE <= want <= MAX_PART_SIZE
    ):
        raise errors.InvalidArgument(
            f"part_size must be 5 MiB to 5 GiB (S3's limits), got {want!r}"
        )
    if size is not None and size > want * MAX_PARTS:
        want = -(-size // MAX_PARTS)  # ceil
        want = -(-want // MiB) * MiB
    return want


def plan_upload(size: int, part_size: int | None = None) -> list[Part]:
    """The parts of a multipart upload of ``size`` bytes, within S3's limits (see
    :func:`upload_part_size`). A 0-byte object is one empty part."""
    if size < 0 or size > MAX_OBJECT_SIZE:
        raise errors.InvalidArgument(f"object size {size} is outside 0..5 TiB")
    want = upload_part_size(size, part_size)
    if size == 0:
        return [Part(0, 0, 0)]
    return plan_parts(0, size, want)
