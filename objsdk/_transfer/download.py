"""Parallel, resumable downloads of whole objects, and parallel reads into buffers.

:func:`download` HEADs the object, splits it into parts and fetches them with a pool of
threads. Each part is a :class:`~objsdk._io.range_reader.RangeReader` window pinned to
the object's ETag, size and version: it resumes on network faults and raises
:class:`~objsdk.ObjectChangedError` if the object is replaced, so every byte comes from
one version. Bytes go straight into place: ``readinto`` on slices of a caller's buffer,
or ``readinto`` a small per-part buffer and ``os.pwrite`` at the part's offset in a file.

A download to a path writes a hidden temp file beside ``dest`` (``.<name>.objsdk-<tag>``,
a name no object key can produce: :mod:`objsdk._transfer.download_state`) and renames it
over ``dest`` once complete, fsynced and verified, so ``dest`` never holds a partial
file. Beside the temp file, a record says which parts are on disk: a later call for the
same object, ETag, version, size, part size and destination fetches only the parts not
recorded; anything else starts over.

Verification: the object's full-object checksum (CRC32, CRC32C, CRC64NVME, SHA1 or
SHA256) is checked over every whole-object transfer. For the CRCs each part hashes its
bytes as they land and the parts' CRCs are combined; a SHA is computed in a second pass
over the bytes in place. Composite checksums are never taken for full-object ones.
"""

from __future__ import annotations

import contextlib
import errno
import mmap
import os
import threading
from collections.abc import Callable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import replace
from typing import TYPE_CHECKING, Any, NoReturn

from objsdk import errors
from objsdk._core.addressing import check_bucket, check_count, check_key
from objsdk._core.parts import Part, adaptive_part_size, plan_parts
from objsdk._core.pin import VersionPin
from objsdk._core.sizes import DEFAULT_PART_SIZE, MiB
from objsdk._io.range_reader import DEFAULT_MAX_RESUME, RangeReader
from objsdk._s3.head import head_object
from objsdk._transfer.download_check import Check, Feed
from objsdk._transfer.download_engine import drop_frame_locals, fetch_parts, into_buffer, into_file
from objsdk._transfer.download_result import DownloadResult
from objsdk._transfer.download_state import (
    O_NOFOLLOW,
    DownloadState,
    download_paths,
    load_state,
    reusable_parts,
    save_state,
)
from objsdk._transfer.download_stream import download_stream, is_stream_file
from objsdk._transfer.holes import punch_hole
from objsdk._transfer.progress import Progress, ProgressTracker
from objsdk._transfer.writeback import Writeback
from objsdk._transport.base import Transport
from objsdk.models import ObjectInfo

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: concurrent downloads are not detected
    fcntl = None  # type: ignore[assignment]

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
        path = _checked_path(dest, bucket, key)
        info = _head(transport, bucket, key, version_id)
        part_size = part_size or adaptive_part_size(_size(info))
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
        return _download_to_path(
            transport, info, path, parallel, part_size, progress, max_resume, check
        )
    with _writable_view(dest, bucket, key, "dest") as view:
        info = _head(transport, bucket, key, version_id)
        size = _size(info)
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
        size = _size(info)
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


def _checked_path(dest: str | os.PathLike[str], bucket: str, key: str) -> str:
    """``dest`` as a str naming a file: refused empty, holding NUL, ending in a
    separator, with a file name longer than its directory allows, or where a directory
    stands; all before anything is fetched (the rename at the end would find them too
    late, after the whole object, and leave its temp file behind)."""
    path = os.fspath(dest)
    where = f"(bucket {bucket!r}, key {key!r})"
    if not isinstance(path, str):
        raise errors.InvalidArgument(f"dest path must be str, got {type(path).__name__} {where}")
    if not path:
        raise errors.InvalidArgument(f"dest must name a file, got an empty path {where}")
    if "\0" in path:
        raise errors.InvalidArgument(f"dest {path!r} holds a NUL character {where}")
    if os.path.isdir(path):
        raise IsADirectoryError(errno.EISDIR, f"a directory is there, not a file {where}", path)
    directory, name = os.path.split(path)
    if not name:
        raise errors.InvalidArgument(
            f"dest {path!r} ends with a separator: name the file, such as "
            f"{os.path.join(path, key.rsplit('/', 1)[-1] or 'file')!r} {where}"
        )
    length, longest = len(os.fsencode(name)), _name_max(directory or ".")
    if length > longest:
        raise errors.InvalidArgument(
            f"dest {path!r}: its file name is {length} bytes, and its directory allows "
            f"{longest} {where}"
        )
    return path


def _name_max(directory: str) -> int:
    """The longest file name ``directory`` takes, in bytes (POSIX ``NAME_MAX``; 255 where
    the system does not say)."""
    try:
        return int(os.pathconf(directory, "PC_NAME_MAX"))
    except (OSError, ValueError, AttributeError):
        return 255


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


# -- downloads to a path -----------------------------------------------------------------


def _download_to_path(
    transport: Transport,
    info: ObjectInfo,
    path: str,
    parallel: int | None,
    part_size: int,
    progress: Progress | None,
    max_resume: int,
    check: Check,
) -> DownloadResult:
    size = _size(info)
    temp, state_path = download_paths(path)
    parts = plan_parts(0, size, part_size)
    wanted = DownloadState(
        info.bucket,
        info.key,
        info.etag,
        info.version_id,
        size,
        part_size,
        dest=os.path.abspath(path),
    )
    fd = _open_locked(temp, path, info)
    try:
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
        # Parts are recorded in groups, once a flush has put them on disk (writeback.py).
        writeback = Writeback(fd, on_durable=journal.mark_done)
        try:
            used = fetch_parts(
                transport,
                info,
                todo,
                into_file(fd, check.crcs, writeback),
                parallel,
                max_resume,
                tracker,
                writeback.written,
                on_start=check.on_start,
            )
        except (errors.ObjectChangedError, errors.IntegrityError):
            writeback.close()  # nothing on disk is worth resuming (removed below)
            raise
        except BaseException:
            # What is written is recorded, so the next call resumes from it; if the
            # disk is full, the blocks of parts not written are freed for the record.
            writeback.keep(lambda waiting: _free_unwritten(fd, todo, journal.done, waiting))
            raise
        writeback.finish()
        check.verify(lambda update, start, stop: _hash_file(fd, start, stop, update))
        os.fsync(fd)
    except (errors.ObjectChangedError, errors.IntegrityError):
        # The bytes on disk are of another version, or wrong: nothing worth resuming.
        _remove(temp, state_path, state_path + ".tmp")
        os.close(fd)
        raise
    except OSError as e:
        os.close(fd)  # temp and state stay: the next call resumes
        _raise_write_error(e, info, path)
    except BaseException:
        os.close(fd)  # temp and state stay: the next call resumes
        raise
    try:
        # Still under the lock: no other download can write the temp file while it
        # becomes dest (one that opened it before the rename finds, once it has the
        # lock, that the name no longer leads to it: _open_locked).
        os.replace(temp, path)
        _fsync_dir(os.path.dirname(os.path.abspath(path)))
        _remove(state_path, state_path + ".tmp")
    except OSError as e:
        _raise_write_error(e, info, path)
    finally:
        os.close(fd)
    fetched = sum(p.length for p in todo)
    return DownloadResult(
        info,
        len(parts),
        len(todo),
        len(reused),
        fetched,
        used,
        check.verified,
        check.unverified_reason,
    )


def _open_locked(temp: str, path: str, info: ObjectInfo) -> int:
    """The temp file, open and locked: the file the name ``temp`` leads to once the
    lock is held (a download that finished meanwhile renamed the file it opened to
    ``dest``: locking that one would rewrite a complete file in place)."""
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0) | O_NOFOLLOW
    for _ in range(100):
        try:
            fd = os.open(temp, flags, 0o666)
        except OSError as e:
            raise errors.InvalidArgument(
                f"cannot write {temp!r} (the temp file of {path!r}): {e.strerror} "
                f"(bucket {info.bucket!r}, key {info.key!r})"
            ) from e
        try:
            _lock(fd, path, info)
            if _same_file(fd, temp):
                return fd
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)  # renamed or removed under us: open the name again
    raise errors.DownloadLockedError(  # pragma: no cover - a name that keeps changing
        f"the temp file of {path!r} keeps being replaced by another download "
        f"(bucket {info.bucket!r}, key {info.key!r})"
    )


# Faults of the path itself stay Python's own (docs/errors.md, "Not objsdk errors").
_PATH_ERRORS = (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError)


def _raise_write_error(e: OSError, info: ObjectInfo, path: str) -> NoReturn:
    """Raise a local write that failed (disk or quota full, EFBIG, EIO; in a part's
    pwrite, the record, fsync or the rename) as an error naming the object and its
    destination."""
    if isinstance(e, (errors.LocalWriteError, *_PATH_ERRORS)):
        raise e
    reason = e.strerror or str(e) or type(e).__name__
    raise errors.LocalWriteError(e.errno, reason, path, bucket=info.bucket, key=info.key) from e


def _same_file(fd: int, name: str) -> bool:
    try:
        st = os.stat(name, follow_symlinks=False)
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (mine.st_dev, mine.st_ino)


class _Journal:
    """The state record, rewritten each time parts are on disk."""

    def __init__(self, path: str, state: DownloadState) -> None:
        self._path = path
        self._state = state
        self._lock = threading.Lock()

    @property
    def done(self) -> frozenset[int]:
        """The parts the record claims."""
        return self._state.done

    def mark_done(self, parts: Sequence[Part]) -> None:
        with self._lock:
            done = self._state.done | {part.index for part in parts}
            self._state = replace(self._state, done=done)
            save_state(self._path, self._state)


def _free_unwritten(
    fd: int, parts: Sequence[Part], recorded: AbstractSet[int], written: Sequence[Part]
) -> None:
    """Give back the blocks of every part of ``parts`` neither recorded nor written
    (partly received: worth nothing, fetched again by the next call)."""
    done = recorded | {p.index for p in written}
    for part in parts:
        if part.index not in done:
            punch_hole(fd, part.start, part.stop)


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
