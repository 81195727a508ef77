"""Parallel, resumable downloads of whole objects, and parallel reads into buffers.

:func:`download` HEADs the object, splits it into parts and fetches them with a pool of
threads. Each part is a :class:`~objsdk._io.range_reader.RangeReader` window pinned to
the object's ETag, size and version: it resumes on network faults and raises
:class:`~objsdk.ObjectChangedError` if the object is replaced, so every byte comes from
one version. Bytes go straight into place: ``readinto`` on slices of a caller's buffer,
or ``readinto`` a small per-part buffer and ``os.pwrite`` at the part's offset in a file.

A download to a path writes a hidden temp file beside ``dest`` and renames it over
``dest`` once complete, fsynced and verified, so ``dest`` never holds a partial file; a
later call resumes it (:mod:`objsdk._transfer.download_file`). A device or a FIFO is
written into instead (:mod:`objsdk._transfer.download_stream`).

Verification: the object's full-object checksum (CRC32, CRC32C, CRC64NVME, SHA1 or
SHA256) is checked over every whole-object transfer. For the CRCs each part hashes its
bytes as they land and the parts' CRCs are combined; a SHA is computed in a second pass
over the bytes in place. Composite checksums are never taken for full-object ones.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from objsdk import errors
from objsdk._core.addressing import check_bucket, check_count, check_key
from objsdk._core.parts import adaptive_part_size, plan_parts
from objsdk._core.pin import VersionPin
from objsdk._core.sizes import DEFAULT_PART_SIZE
from objsdk._io.range_reader import DEFAULT_MAX_RESUME, RangeReader
from objsdk._s3.head import head_object
from objsdk._transfer.download_check import Check, Feed
from objsdk._transfer.download_engine import drop_frame_locals, fetch_parts, into_buffer
from objsdk._transfer.download_file import checked_path, download_to_path, object_size
from objsdk._transfer.download_result import DownloadResult
from objsdk._transfer.download_state import download_paths
from objsdk._transfer.download_stream import download_stream, is_stream_file
from objsdk._transfer.progress import Progress, ProgressTracker
from objsdk._transport.base import Transport
from objsdk.models import ObjectInfo

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer as WritableBuffer

__all__ = ["DownloadResult", "download", "download_paths", "get_into"]


# -- the public functions ----------------------------------------------------------------


def download(
    transport: Transport,
    bucket: str,
    key: str,
    dest: str | os.PathLike[str] | WritableBuffer,
    *,
    parallel: int | None = None,
    part_size: int | None = None,
    progress: Progress | None = None,
    max_resume: int = DEFAULT_MAX_RESUME,
    verify: bool = True,
    version_id: str | None = None,
) -> DownloadResult:
    """Download a whole object to a path or into a writable buffer, ``parallel`` parts of
    ``part_size`` bytes at a time; ``parallel=None`` (the default) starts with one and
    adds parts in flight while the aggregate rate keeps rising (up to 16). Parts are
    16 MiB by default, smaller (:func:`~objsdk._core.parts.adaptive_part_size`) in an
    adaptive download of an object too small to hold 16 of them.

    A path is written to a hidden temp file beside it, verified against the object's
    full-object checksum if it has one (unless ``verify=False``), fsynced and renamed
    over ``dest``: ``dest`` is either untouched or complete. Parts are recorded as
    done in groups, once a flush has put them on disk (every 32 MiB, and within half
    a second: :mod:`~objsdk._transfer.writeback`). If the call fails, calling it again
    fetches only the parts not recorded, provided the object's ETag is unchanged: a
    call that raises records every part it finished first; a killed process loses at
    most its last 32 MiB or half second. If
    the object changes mid-download, :class:`~objsdk.ObjectChangedError` is raised and
    the temp file is removed.

    A buffer (bytearray, mmap, numpy array, shared memory...) must hold at least the
    object's size; the object fills its first bytes, received straight from the socket.

    ``progress(bytes_done, bytes_total)`` is called from worker threads, one call at a
    time, with ``bytes_done`` never decreasing; keep it quick. ``version_id`` names a
    version of a versioned object (default: the current one).
    """
    part_size = _checked(bucket, key, parallel, part_size)
    check_count("max_resume", max_resume, 0, bucket, key)
    if isinstance(dest, (str, os.PathLike)):
        path = checked_path(dest, bucket, key)
        info = _head(transport, bucket, key, version_id)
        part_size = part_size or adaptive_part_size(object_size(info))
        if is_stream_file(path):
            return download_stream(
                transport,
                info,
                path,
                parallel=parallel,
                part_size=part_size,
                progress=progress,
                max_resume=max_resume,
                verify=verify,
            )
        check = Check(info, verify, transport)
        return download_to_path(
            transport, info, path, parallel, part_size, progress, max_resume, check
        )
    with _writable_view(dest, bucket, key, "dest") as view:
        info = _head(transport, bucket, key, version_id)
        size = object_size(info)
        if view.nbytes < size:
            raise errors.InvalidArgument(
                f"buffer of {view.nbytes} bytes is too small for the {size}-byte object "
                f"(bucket {bucket!r}, key {key!r})"
            )
        parts = plan_parts(0, size, part_size or adaptive_part_size(size))
        tracker = ProgressTracker(progress, size, announce=True)
        check = Check(info, verify, transport)
        sink = into_buffer(view, 0, check.crcs)
        used = fetch_parts(
            transport, info, parts, sink, parallel, max_resume, tracker, on_start=check.on_start
        )
        check.verify(_from_memory(view))
    return DownloadResult(
        info, len(parts), len(parts), 0, size, used, check.verified, check.unverified_reason
    )


def get_into(
    transport: Transport,
    bucket: str,
    key: str,
    buffer: WritableBuffer,
    *,
    offset: int = 0,
    parallel: int | None = None,
    part_size: int | None = None,
    verify: bool = True,
    version_id: str | None = None,
) -> int:
    """Fill ``buffer`` with the object's bytes from ``offset``; return how many.

    ``len(buffer)`` bytes, fewer at the end of the object, 0 at or past it. Bytes are
    received straight from the socket into the buffer. A buffer larger than
    ``part_size`` is filled by ``parallel`` ranged GETs of one pinned version (after a
    HEAD; ``None`` adapts, as in :func:`download`); a smaller one by a single ranged GET.
    A fill of the whole object (``offset=0``, a buffer at least its size) is checked
    against its full-object checksum, unless ``verify=False``
    (:class:`~objsdk.IntegrityError` on mismatch). ``version_id`` names a version of a
    versioned object (default: the current one).
    """
    part_size = _checked(bucket, key, parallel, part_size)
    check_count("offset", offset, 0, bucket, key)
    with _writable_view(buffer, bucket, key, "buffer") as view:
        want = view.nbytes
        if want == 0:
            # Still report a missing bucket, key or version.
            head_object(transport, bucket, key, version_id=version_id)
            return 0
        if want <= (part_size or adaptive_part_size(want)) or parallel == 1:
            return _read_window(transport, bucket, key, view, offset, verify, version_id)
        info = _head(transport, bucket, key, version_id)
        size = object_size(info)
        if offset >= size:
            return 0
        stop = min(size, offset + want)
        parts = plan_parts(offset, stop, part_size or adaptive_part_size(stop - offset))
        check = Check(info, verify and offset == 0 and stop == size, transport)
        sink = into_buffer(view, offset, check.crcs)
        tracker = ProgressTracker(None, stop - offset)
        fetch_parts(
            transport,
            info,
            parts,
            sink,
            parallel,
            DEFAULT_MAX_RESUME,
            tracker,
            on_start=check.on_start,
        )
        check.verify(_from_memory(view))
        return stop - offset


# -- helpers -----------------------------------------------------------------------------


def _checked(bucket: str, key: str, parallel: int | None, part_size: int | None) -> int | None:
    """Refuse bad names and tuning; return the part size to use, or None where the
    level adapts and none was given (then sized to the bytes: ``adaptive_part_size``)."""
    check_bucket(bucket)
    check_key(key)
    if parallel is not None:
        check_count("parallel", parallel, 1, bucket, key)
    if part_size is None:
        return None if parallel is None else DEFAULT_PART_SIZE
    check_count("part_size", part_size, 1, bucket, key)
    return part_size


def _writable_view(obj: Any, bucket: str, key: str, what: str) -> memoryview:
    """A flat, writable byte view of ``obj`` (the caller releases it)."""
    try:
        view = memoryview(obj)
    except TypeError:
        raise errors.InvalidArgument(
            f"{what} must be a path or a writable buffer, got {type(obj).__name__} "
            f"(bucket {bucket!r}, key {key!r})"
        ) from None
    with view:
        if view.readonly:
            raise errors.InvalidArgument(
                f"{what} is a read-only buffer ({type(obj).__name__}) "
                f"(bucket {bucket!r}, key {key!r})"
            )
        try:
            return view.cast("B")
        except TypeError:
            raise errors.InvalidArgument(
                f"{what} must be a C-contiguous buffer (bucket {bucket!r}, key {key!r})"
            ) from None


def _head(transport: Transport, bucket: str, key: str, version_id: str | None) -> ObjectInfo:
    info = head_object(transport, bucket, key, version_id=version_id)
    object_size(info)
    return info


def _read_window(
    transport: Transport,
    bucket: str,
    key: str,
    view: memoryview,
    offset: int,
    verify: bool,
    version_id: str | None,
) -> int:
    """One closed-range GET of ``[offset, offset + len(view))`` straight into ``view``."""
    try:
        return _read_window_into(transport, bucket, key, view, offset, verify, version_id)
    except BaseException as e:
        drop_frame_locals(e)  # the finished frames below hold slices of the view
        raise


def _read_window_into(
    transport: Transport,
    bucket: str,
    key: str,
    view: memoryview,
    offset: int,
    verify: bool,
    version_id: str | None,
) -> int:
    reader = RangeReader(
        transport, bucket, key, pin=VersionPin(version_id=version_id), end=offset + len(view)
    )
    reader.seek(offset)
    try:
        n = 0
        while n < len(view):
            with view[n:] as rest:
                k = reader.readinto(rest)
            if k == 0:
                break  # end of the object (0 at once if offset is at or past it)
            n += k
    finally:
        reader.close()
    if verify and offset == 0 and n and n == reader.size:
        with view[:n] as whole:
            _verify_whole(transport, bucket, key, whole, reader.pin)
    return n


def _verify_whole(
    transport: Transport, bucket: str, key: str, data: memoryview, pin: VersionPin
) -> None:
    """Check ``data``, the whole object as one ranged GET returned it, against the stored
    checksum. Ranged answers carry none (MinIO's and S3's never do, even for a range
    that covers the object), so HEAD says what is stored; if the object was replaced
    since (another ETag), the bytes read were one consistent version that is no longer
    described anywhere, and are returned unverified."""
    info = head_object(transport, bucket, key, version_id=pin.version_id)
    if pin.etag is not None and info.etag != pin.etag:
        return
    check = Check(info, True, transport)
    check.verify(_from_memory(data))


def _from_memory(view: memoryview) -> Feed:
    def feed(update: Callable[[Any], None], start: int, stop: int) -> None:
        with view[start:stop] as chunk:
            update(chunk)

    return feed
