"""Splitting a byte range into parts: one ``Part`` type and one planner for uploads,
downloads and read-ahead (pure)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from objsdk import errors
from objsdk._core.sizes import (
    ADAPTIVE_CAP,
    ADAPTIVE_PART_SIZE,
    DEFAULT_PART_SIZE,
    MAX_OBJECT_SIZE,
    MAX_PART_SIZE,
    MAX_PARTS,
    MIN_PART_SIZE,
    MiB,
)

__all__ = [
    "Part",
    "adaptive_part_size",
    "adaptive_upload_part_size",
    "covers",
    "part_count",
    "plan_parts",
    "plan_upload",
    "plan_upload_probed",
    "replan_smaller",
    "split_evenly",
    "upload_part_size",
]


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


def adaptive_part_size(span: int) -> int:
    """The part size of an adaptive download of ``span`` bytes: ``DEFAULT_PART_SIZE``
    where the span holds ``ADAPTIVE_CAP`` such parts, else smaller (whole MiB, down to
    ``ADAPTIVE_PART_SIZE``) so that levels up to the cap still find parts to run.

    Every part costs a request and a record in the resume state, and a part size that
    splits the object into more parts than the cap can run at once leaves a second
    round for most connections: the smaller parts pay only where they buy a level.
    """
    fits = span // ADAPTIVE_CAP // MiB * MiB
    return max(ADAPTIVE_PART_SIZE, min(DEFAULT_PART_SIZE, fits))


def adaptive_upload_part_size(size: int, probe: int) -> int:
    """The part size of an adaptive upload of ``size`` bytes whose last ``probe`` bytes
    go first (:func:`plan_upload_probed`): the rest shared by a whole multiple of
    ``ADAPTIVE_CAP`` parts of at most ``DEFAULT_PART_SIZE`` where each would still hold
    ``ADAPTIVE_PART_SIZE``, else by as many parts of ``ADAPTIVE_PART_SIZE`` as fit.

    At the cap every connection then sends the same bytes in every round: 255 MiB as
    17 parts would leave one connection a second round alone, and as 15 parts would
    leave one idle.
    """
    body = size - probe
    rounds = -(-body // (ADAPTIVE_CAP * DEFAULT_PART_SIZE))
    count = min(ADAPTIVE_CAP * rounds, MAX_PARTS - 1)
    if count < 1 or body // count < ADAPTIVE_PART_SIZE:  # count < 1: no body at all
        return ADAPTIVE_PART_SIZE
    return body // count


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


def plan_upload_probed(size: int, part_size: int, probe: int) -> list[Part]:
    """The parts of a multipart upload in the order to send them: the last part, of
    ``probe`` bytes, first, then the others in order, each of at least ``part_size``
    bytes (the object's bytes shared evenly between them).

    S3 lets only the last part be smaller than 5 MiB ("UploadPart": each part but the
    last must be at least 5 MiB), and parts may be sent in any order. A small part sent
    alone first measures one connection in a fraction of a whole part's time, which is
    how long an adaptive upload waits before it adds connections. An object too small to
    hold a probe and a whole part gets :func:`plan_upload`'s parts.

    The last part is numbered 10,000 whatever the count: part numbers need not be
    consecutive, only ascending in CompleteMultipartUpload ("UploadPart": "you can choose
    any part number between 1 and 10,000"), and the numbers left free let the parts not
    yet sent be re-planned smaller (:func:`replan_smaller`) after the probe went out.
    """
    want = upload_part_size(size, part_size)
    body = size - probe
    if probe < 1 or body < want:
        return plan_upload(size, part_size)
    count = min(body // want, MAX_PARTS - 1)
    return [Part(MAX_PARTS - 1, body, size), *split_evenly(0, body, count, 0)]


def replan_smaller(pending: Sequence[Part], part_size: int = MIN_PART_SIZE) -> list[Part]:
    """``pending``, consecutive parts not yet sent (none of them the object's last),
    as more parts of at least ``part_size`` bytes sharing the same bytes evenly and
    numbered on from the first; ``pending`` itself where that would not make more.

    A connection that breaks during a part loses the bytes of that part sent so far
    (S3 keeps no partial part), half a part on average: where a network has cut one,
    smaller parts lose less to the next cut, for a request each. More than
    ``ADAPTIVE_CAP`` parts are a whole multiple of it, so that no connection sends a
    last round alone. Numbers stay below 10,000, which is the last part's
    (:func:`plan_upload_probed`).
    """
    if not pending:
        return list(pending)
    first, start, stop = pending[0].index, pending[0].start, pending[-1].stop
    count = min((stop - start) // part_size, MAX_PARTS - 1 - first)
    if count > ADAPTIVE_CAP:
        count -= count % ADAPTIVE_CAP
    if count <= len(pending):
        return list(pending)
    return split_evenly(start, stop, count, first)


def split_evenly(start: int, stop: int, count: int, first: int) -> list[Part]:
    """``[start, stop)`` as ``count`` parts whose lengths differ by one byte at most,
    indexed from ``first``."""
    base, extra = divmod(stop - start, count)
    parts = []
    for i in range(count):
        end = start + base + (1 if i < extra else 0)
        parts.append(Part(first + i, start, end))
        start = end
    return parts


def covers(parts: Sequence[Part], size: int) -> bool:
    """Do ``parts``, in part-number order, hold the bytes ``[0, size)`` end to end, each
    byte once? (What CompleteMultipartUpload will make of them.)"""
    end = 0
    for part in sorted(parts, key=lambda p: p.number):
        if part.start != end:
            return False
        end = part.stop
    return end == size and bool(parts)
