"""A download into a file at a path: the temp file it is written to, who may write
it, the record that lets a later call resume it, and the rename that makes it ``dest``.

The temp file is hidden beside ``dest`` (``.<name>.objsdk-<tag>``, a name no object key
can produce: :mod:`objsdk._transfer.download_state`), opened without following links and
locked, so a second download into the same path fails at once. Beside it, a record says
which parts are durably on disk (:class:`_Journal`, rewritten as
:mod:`~objsdk._transfer.writeback` reports flushes): a later call for the same object,
ETag, version, size, part size and destination fetches only the parts not recorded. The
complete file is verified, fsynced and renamed over ``dest`` (a symlink there is
replaced, as ``mv`` replaces it), and the directory fsynced.
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
from typing import Any, NoReturn

from objsdk import errors
from objsdk._core.parts import Part, plan_parts
from objsdk._core.sizes import MiB
from objsdk._transfer.download_check import Check
from objsdk._transfer.download_engine import fetch_parts, into_file
from objsdk._transfer.download_result import DownloadResult
from objsdk._transfer.download_state import (
    O_NOFOLLOW,
    DownloadState,
    download_paths,
    load_state,
    reusable_parts,
    save_state,
)
from objsdk._transfer.holes import punch_hole
from objsdk._transfer.progress import Progress, ProgressTracker
from objsdk._transfer.writeback import Writeback
from objsdk._transport.base import Transport
from objsdk.models import ObjectInfo

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: concurrent downloads are not detected
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "checked_path",
    "creation_error",
    "download_to_path",
    "make_directory",
    "make_folder",
    "object_size",
]


def checked_path(dest: str | os.PathLike[str], bucket: str, key: str) -> str:
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


def object_size(info: ObjectInfo) -> int:
    """The size a HEAD answer gave, which a download cannot go without."""
    if info.size is None:
        raise errors.ProtocolError(
            "HEAD answer has no Content-Length",
            operation="download",
            bucket=info.bucket,
            key=info.key,
        )
    return info.size


def download_to_path(
    transport: Transport,
    info: ObjectInfo,
    path: str,
    parallel: int | None,
    part_size: int,
    progress: Progress | None,
    max_resume: int,
    check: Check,
) -> DownloadResult:
    size = object_size(info)
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
    if len(parts) <= 1:
        return _download_whole(
            transport, info, path, temp, state_path, fd, parts, progress, max_resume, check
        )
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
    _rename(fd, temp, state_path, path, info)
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


def _download_whole(
    transport: Transport,
    info: ObjectInfo,
    path: str,
    temp: str,
    state_path: str,
    fd: int,
    parts: Sequence[Part],
    progress: Progress | None,
    max_resume: int,
    check: Check,
) -> DownloadResult:
    """An object of at most one part into the open, locked temp file ``fd`` (named
    ``temp``; ``state_path`` is where its record would be): nothing is recorded (there
    is no part to resume short of the whole) and nothing is flushed in the background;
    a failure removes the temp file. The whole file is fsynced before the rename, as in
    a download of many parts."""
    size = object_size(info)
    try:
        # A record left by an earlier download into this temp file would claim bytes
        # about to be overwritten: it goes first.
        _remove(state_path, state_path + ".tmp")
        os.ftruncate(fd, 0)
        tracker = ProgressTracker(progress, size, announce=True)
        used = fetch_parts(
            transport,
            info,
            parts,
            into_file(fd, check.crcs, None),
            1,
            max_resume,
            tracker,
            on_start=check.on_start,
        )
        check.verify(lambda update, start, stop: _hash_file(fd, start, stop, update))
        os.fsync(fd)
    except BaseException as e:
        _remove(temp)
        os.close(fd)
        if isinstance(e, OSError):
            _raise_write_error(e, info, path)
        raise
    _rename(fd, temp, state_path, path, info)
    return DownloadResult(
        info, len(parts), len(parts), 0, size, used, check.verified, check.unverified_reason
    )


def _rename(fd: int, temp: str, state_path: str, path: str, info: ObjectInfo) -> None:
    """Give the complete, fsynced temp file its final name, durably, and remove the
    record beside it; close ``fd``."""
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


def _open_locked(temp: str, path: str, info: ObjectInfo) -> int:
    """The temp file, open and locked: the file the name ``temp`` leads to once the
    lock is held (a download that finished meanwhile renamed the file it opened to
    ``dest``: locking that one would rewrite a complete file in place)."""
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0) | O_NOFOLLOW
    for _ in range(100):
        try:
            fd = os.open(temp, flags, 0o666)
        except OSError as e:
            raise creation_error(e, path, info.bucket, info.key) from e
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


def creation_error(e: OSError, dest: str, bucket: str, key: str) -> OSError:
    """The error for a file that could not be created, written or renamed at or beside
    ``dest`` (its temp file): a fault of the path itself (a missing folder, a file where
    a folder should be, no permission, a file there that may not be replaced) is
    Python's own error, as ``open(dest, "wb")`` raises it, naming ``dest`` rather than
    the hidden name; anything else (a read-only filesystem, a full disk) a
    :class:`~objsdk.LocalWriteError` naming the object and ``dest``."""
    if isinstance(e, _PATH_ERRORS):
        return type(e)(e.errno, e.strerror, dest)
    reason = e.strerror or str(e) or type(e).__name__
    return errors.LocalWriteError(e.errno, reason, dest, bucket=bucket, key=key)


def make_folder(dest: str, bucket: str, key: str) -> None:
    """Make the folder ``dest`` goes in, and those above it, as ``aws s3 cp`` does
    (``Client.download`` does not: a missing folder is its ``FileNotFoundError``). A
    file where a folder should be is a ``NotADirectoryError`` naming it (``os.makedirs``
    says ``FileExistsError``); other failures as :func:`creation_error` says."""
    folder = os.path.dirname(dest)
    if folder:
        _make_dirs(folder, dest, bucket, key)


def make_directory(path: str, bucket: str, key: str) -> None:
    """Make the directory ``path`` itself, and those above it: where an archive is
    extracted, or a remote directory (``bucket``, ``key``) is downloaded to. Failures
    as :func:`make_folder` says, naming ``path``."""
    _make_dirs(path, path, bucket, key)


def _make_dirs(folder: str, dest: str, bucket: str, key: str) -> None:
    try:
        os.makedirs(folder, exist_ok=True)
    except FileExistsError as e:
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), folder) from e
    except _PATH_ERRORS:
        raise  # names the folder that could not be made
    except OSError as e:
        raise creation_error(e, dest, bucket, key) from e


def _raise_write_error(e: OSError, info: ObjectInfo, path: str) -> NoReturn:
    """Raise a local write that failed (disk or quota full, EFBIG, EIO; in a part's
    pwrite, the record, fsync or the rename) as :func:`creation_error` says: never
    naming the temp file (a rename over a file that may not be replaced fails naming
    both)."""
    if isinstance(e, errors.LocalWriteError):
        raise e
    raise creation_error(e, path, info.bucket, info.key) from e


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
