"""Parallel, resumable downloads of whole objects, and parallel reads into buffers.

:func:`download` HEADs the object, splits it into parts and fetches them with a pool of
threads. Each part is a :class:`~objsdk._io.range_reader.RangeReader` window pinned to
the object's ETag, size and version: it resumes on network faults and raises
:class:`~objsdk.ObjectChangedError` if the object is replaced, so every byte comes from
one version. Bytes go straight into place: ``readinto`` on slices of a caller's buffer,
or ``readinto`` a small per-part buffer and ``os.pwrite`` at the part's offset in a file.

A download to a path writes ``<dest>.objsdk-download`` and renames it over ``dest`` once
complete, fsynced and verified, so ``dest`` never holds a partial file. Beside the temp
file, a record (:mod:`objsdk._transfer.download_state`) says which parts are on disk: a
later call for the same object, ETag, version, size and part size fetches only the parts
not recorded; anything else starts over.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from objsdk import errors
from objsdk._core.addressing import check_bucket, check_count, check_key
from objsdk._core.checksums import (
    RangeCrc32c,
    StreamChecksum,
    checksum_from_headers,
    checksum_headers,
    crc32c,
    encode_crc32c,
)
from objsdk._core.parts import Part, adaptive_part_size, plan_parts
from objsdk._core.sizes import DEFAULT_PART_SIZE, MiB
from objsdk._io.range_reader import DEFAULT_MAX_RESUME, RangeReader
from objsdk._io.verify import check_value, check_whole
from objsdk._s3.head import head_object
from objsdk._transfer.download_state import (
    O_NOFOLLOW,
    DownloadState,
    load_state,
    reusable_parts,
    save_state,
)
from objsdk._transfer.fetch import drop_frame_locals, fetch_parts, into_buffer, into_file
from objsdk._transfer.progress import Progress, ProgressTracker
from objsdk._transport.base import Transport
from objsdk.models import ObjectInfo

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: concurrent downloads are not detected
    fcntl = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer as WritableBuffer

__all__ = ["DownloadResult", "download", "get_into"]

TEMP_SUFFIX = ".objsdk-download"
STATE_SUFFIX = ".json"


@dataclass(frozen=True)
class DownloadResult:
    """What :func:`download` did.

    ``info`` describes the version downloaded (size, ETag, version, checksums).
    ``parts_reused`` parts were already on disk from an interrupted earlier call;
    ``parts_fetched`` parts (``bytes_fetched`` bytes) were fetched by this one, with
    ``parallel`` parts in flight at the end (what ``parallel=None`` settled on).
    """

    info: ObjectInfo
    parts_total: int
    parts_fetched: int
    parts_reused: int
    bytes_fetched: int
    parallel: int = 1


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
) -> DownloadResult:
    """Download a whole object to a path or into a writable buffer, ``parallel`` parts of
    ``part_size`` bytes at a time; ``parallel=None`` (the default) starts with one and
    adds parts in flight while the aggregate rate keeps rising (up to 16). Parts are
    16 MiB by default, smaller (:func:`~objsdk._core.parts.adaptive_part_size`) in an
    adaptive download of an object too small to hold 16 of them.

    A path is written to ``<dest>.objsdk-download``, verified against the object's
    full-object checksum if it has one, fsynced and renamed over ``dest``: ``dest`` is
    either untouched or complete. If the call fails (network, crash, kill), calling it
    again fetches only the missing parts, provided the object's ETag is unchanged. If
    the object changes mid-download, :class:`~objsdk.ObjectChangedError` is raised and
    the temp file is removed.

    A buffer (bytearray, mmap, numpy array, shared memory...) must hold at least the
    object's size; the object fills its first bytes, received straight from the socket.

    ``progress(bytes_done, bytes_total)`` is called from worker threads, one call at a
    time, with ``bytes_done`` never decreasing; keep it quick.
    """
    part_size = _checked(bucket, key, parallel, part_size)
    check_count("max_resume", max_resume, 0, bucket, key)
    if isinstance(dest, (str, os.PathLike)):
        path = os.fspath(dest)
        if not isinstance(path, str):
            raise errors.InvalidArgument(
                f"dest path must be str, got {type(path).__name__} (bucket {bucket!r}, key {key!r})"
            )
        info = _head(transport, bucket, key)
        part_size = part_size or adaptive_part_size(_size(info))
        return _download_to_path(transport, info, path, parallel, part_size, progress, max_resume)
    with _writable_view(dest, bucket, key, "dest") as view:
        info = _head(transport, bucket, key)
        size = _size(info)
        if view.nbytes < size:
            raise errors.InvalidArgument(
                f"buffer of {view.nbytes} bytes is too small for the {size}-byte object "
                f"(bucket {bucket!r}, key {key!r})"
            )
        parts = plan_parts(0, size, part_size or adaptive_part_size(size))
        tracker = ProgressTracker(progress, size, announce=True)
        crcs = _range_crcs(info)
        used = fetch_parts(
            transport, info, parts, into_buffer(view, 0, crcs), parallel, max_resume, tracker
        )
        _verify(info, crcs, _from_memory(view))
    return DownloadResult(info, len(parts), len(parts), 0, size, used)


def get_into(
    transport: Transport,
    bucket: str,
    key: str,
    buffer: WritableBuffer,
    *,
    offset: int = 0,
    parallel: int | None = None,
    part_size: int | None = None,
) -> int:
    """Fill ``buffer`` with the object's bytes from ``offset``; return how many.

    ``len(buffer)`` bytes, fewer at the end of the object, 0 at or past it. Bytes are
    received straight from the socket into the buffer. A buffer larger than
    ``part_size`` is filled by ``parallel`` ranged GETs of one pinned version (after a
    HEAD; ``None`` adapts, as in :func:`download`); a smaller one by a single ranged GET.
    """
    part_size = _checked(bucket, key, parallel, part_size)
    check_count("offset", offset, 0, bucket, key)
    with _writable_view(buffer, bucket, key, "buffer") as view:
        want = view.nbytes
        if want == 0:
            head_object(transport, bucket, key)  # still report a missing bucket or key
            return 0
        if want <= (part_size or adaptive_part_size(want)) or parallel == 1:
            return _read_window(transport, bucket, key, view, offset)
        info = _head(transport, bucket, key)
        size = _size(info)
        if offset >= size:
            return 0
        stop = min(size, offset + want)
        parts = plan_parts(offset, stop, part_size or adaptive_part_size(stop - offset))
        whole = offset == 0 and stop == size
        crcs = _range_crcs(info) if whole else None
        sink = into_buffer(view, offset, crcs)
        tracker = ProgressTracker(None, stop - offset)
        fetch_parts(transport, info, parts, sink, parallel, DEFAULT_MAX_RESUME, tracker)
        if whole:
            _verify(info, crcs, _from_memory(view))
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


def _head(transport: Transport, bucket: str, key: str) -> ObjectInfo:
    info = head_object(transport, bucket, key)
    _size(info)
    return info


def _size(info: ObjectInfo) -> int:
    if info.size is None:
        raise errors.ProtocolError(
            "HEAD answer has no Content-Length",
            operation="download",
            bucket=info.bucket,
            key=info.key,
        )
    return info.size


def _read_window(transport: Transport, bucket: str, key: str, view: memoryview, offset: int) -> int:
    """One closed-range GET of ``[offset, offset + len(view))`` straight into ``view``."""
    try:
        return _read_window_into(transport, bucket, key, view, offset)
    except BaseException as e:
        drop_frame_locals(e)  # the finished frames below hold slices of the view
        raise


def _read_window_into(
    transport: Transport, bucket: str, key: str, view: memoryview, offset: int
) -> int:
    reader = RangeReader(transport, bucket, key, end=offset + len(view))
    reader.seek(offset)
    try:
        n = 0
        while n < len(view):
            with view[n:] as rest:
                k = reader.readinto(rest)
            if k == 0:
                break  # end of the object (0 at once if offset is at or past it)
            n += k
        return n
    finally:
        reader.close()


# feed(update, start, stop) passes the received bytes [start, stop) to update, in order.
Feed = Callable[[Callable[[Any], None], int, int], None]


def _whole_checksum(info: ObjectInfo) -> StreamChecksum | None:
    return checksum_from_headers(checksum_headers(info.checksums, info.checksum_type))


def _range_crcs(info: ObjectInfo) -> RangeCrc32c | None:
    """Where the object's full-object checksum is a CRC32C (objsdk's uploads always
    store one), the parts hash their own bytes as they land and the CRCs are combined:
    no second pass over the object."""
    checksum = _whole_checksum(info)
    return RangeCrc32c() if checksum is not None and checksum.algorithm == "crc32c" else None


def _verify(info: ObjectInfo, crcs: RangeCrc32c | None, feed: Feed) -> None:
    """Check the object's full-object checksum, if it has one: from the parts' CRC32Cs
    in ``crcs`` (any range they lack, such as parts an earlier run left, hashed through
    ``feed``), else over all the bytes ``feed`` passes in object order."""
    checksum = _whole_checksum(info)
    if checksum is None:
        return
    size = info.size or 0
    if crcs is None:
        feed(checksum.update, 0, size)
        check_whole(checksum, bucket=info.bucket, key=info.key, offset=size)
        return
    for start, stop in crcs.gaps(size):
        gap = _Crc32c()
        feed(gap.update, start, stop)
        crcs.add(start, stop, gap.value)
    actual = encode_crc32c(crcs.value(size))
    check_value(checksum, actual, bucket=info.bucket, key=info.key, offset=size)


class _Crc32c:
    """A running CRC32C fed like a hash."""

    def __init__(self) -> None:
        self.value = 0

    def update(self, data: Any) -> None:
        self.value = crc32c(data, self.value)


def _from_memory(view: memoryview) -> Feed:
    def feed(update: Callable[[Any], None], start: int, stop: int) -> None:
        with view[start:stop] as chunk:
            update(chunk)

    return feed


# -- downloads to a path -----------------------------------------------------------------


def _download_to_path(
    transport: Transport,
    info: ObjectInfo,
    path: str,
    parallel: int | None,
    part_size: int,
    progress: Progress | None,
    max_resume: int,
) -> DownloadResult:
    size = _size(info)
    temp = path + TEMP_SUFFIX
    state_path = temp + STATE_SUFFIX
    parts = plan_parts(0, size, part_size)
    wanted = DownloadState(info.bucket, info.key, info.etag, info.version_id, size, part_size)
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0) | O_NOFOLLOW
    try:
        fd = os.open(temp, flags, 0o666)
    except OSError as e:
        raise errors.InvalidArgument(
            f"cannot write {temp!r}: {e.strerror} (bucket {info.bucket!r}, key {info.key!r})"
        ) from e
    try:
        _lock(fd, path, info)
        reused = reusable_parts(load_state(state_path), wanted, os.fstat(fd).st_size)
        if not reused:
            # Another version, another layout, or nothing usable: start over. The record
            # is replaced first, so no crash can leave one that claims the old contents.
            save_state(state_path, wanted)
            os.ftruncate(fd, 0)
            os.ftruncate(fd, size)
        journal = _Journal(state_path, replace(wanted, done=reused))
        todo = [p for p in parts if p.index not in reused]
        done = sum(p.length for p in parts if p.index in reused)
        tracker = ProgressTracker(progress, size, done=done, announce=True)
        crcs = _range_crcs(info)
        sink = into_file(fd, crcs)
        used = fetch_parts(
            transport, info, todo, sink, parallel, max_resume, tracker, journal.mark_done
        )
        _verify(info, crcs, lambda update, start, stop: _hash_file(fd, start, stop, update))
        os.fsync(fd)
    except (errors.ObjectChangedError, errors.IntegrityError):
        # The bytes on disk are of another version, or wrong: nothing worth resuming.
        os.close(fd)
        _remove(temp, state_path, state_path + ".tmp")
        raise
    except BaseException:
        os.close(fd)  # temp and state stay: the next call resumes
        raise
    try:
        # Still under the lock: no other download can write the temp file while it
        # becomes dest.
        os.replace(temp, path)
        _fsync_dir(os.path.dirname(os.path.abspath(path)))
        _remove(state_path, state_path + ".tmp")
    finally:
        os.close(fd)
    fetched = sum(p.length for p in todo)
    return DownloadResult(info, len(parts), len(todo), len(reused), fetched, used)


class _Journal:
    """The state record, rewritten each time a part is done."""

    def __init__(self, path: str, state: DownloadState) -> None:
        self._path = path
        self._state = state
        self._lock = threading.Lock()

    def mark_done(self, part: Part) -> None:
        with self._lock:
            self._state = replace(self._state, done=self._state.done | {part.index})
            save_state(self._path, self._state)


def _lock(fd: int, path: str, info: ObjectInfo) -> None:
    """Refuse to run two downloads into one temp file at once (another process)."""
    if fcntl is None:  # pragma: no cover
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise errors.DownloadLockedError(
            f"another download to {path!r} is in progress "
            f"(bucket {info.bucket!r}, key {info.key!r})"
        ) from None


def _hash_file(fd: int, start: int, stop: int, update: Callable[[Any], None]) -> None:
    """Feed the file's bytes ``[start, stop)`` to ``update`` in order, without copying
    them."""
    if stop <= start:
        return
    with mmap.mmap(fd, stop, access=mmap.ACCESS_READ) as mm:
        if hasattr(mm, "madvise"):
            mm.madvise(mmap.MADV_SEQUENTIAL)
        with memoryview(mm) as view:
            for at in range(start, stop, 8 * MiB):
                with view[at : min(at + 8 * MiB, stop)] as chunk:
                    update(chunk)


def _fsync_dir(directory: str) -> None:
    """Make a rename in ``directory`` durable."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms that cannot open directories
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _remove(*paths: str) -> None:
    for p in paths:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(p)
