"""Many objects that arrive in one response each, written to local files as a batch.

A tool that knows from a listing that an object is small (``objsdk cp --recursive``,
the fsspec filesystem's ``get``) needs neither ``Client.download``'s HEAD nor its lock
and fsync per file. An object up to :data:`SMALL_OBJECT` is read whole by one verified
GET (``Client.get_object``: its stored checksum checked) and written to a temporary
name in the destination's directory (``.objsdk-<random>.tmp``, created exclusively).
Nothing is kept to resume: there is nothing worth resuming.

Durability is batched (:class:`Batch`): a temporary file takes its final name only once
its bytes are on disk, and that is done for many files at once: when
:data:`BATCH_FILES` files or :data:`BATCH_BYTES` bytes are waiting, and when the run ends
(also when it is interrupted), one ``syncfs`` flushes them all, then each is renamed
over its final name, then each directory holding new names is fsynced once. ``syncfs``
flushes every file of the filesystem, not only the batch's: where the system holds more
dirty data than :data:`SYNCFS_MAX_FOREIGN` beyond the batch's own bytes (a training job
writing a checkpoint, another copy), each of the batch's files is fsynced instead, so a
``cp`` does not wait for other programs' writes; so too where there is no ``syncfs``.
A batch whose files lie on several filesystems (a mount point inside the destination)
gets one ``syncfs`` on each. So no final name ever holds a partial file, even after a
power cut, and a ``cp`` that returns has every file and name on disk; a
killed run leaves at most the ``.objsdk-*.tmp`` files of its last two batches (one
being flushed, one gathering: no worker waits for the disk before a second fills),
which a rerun ignores and ``sync --delete`` removes.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from objsdk import errors
from objsdk._transfer.download_file import checked_path, creation_error, make_folder

__all__ = [
    "BATCH_BYTES",
    "BATCH_FILES",
    "SMALL_OBJECT",
    "SYNCFS_MAX_FOREIGN",
    "Batch",
    "Getter",
    "Pending",
    "download_small",
]

# Up to one default part: the size at which Client.download would use one GET anyway.
SMALL_OBJECT = 8 << 20
BATCH_FILES = 256
BATCH_BYTES = 64 << 20
# Dirty data not the batch's that one syncfs may flush along with it; above it, an fsync
# of each file costs less. 600 MB of another program's dirty data added 0.4 s to a
# syncfs of 200 x 1 MiB on the EPYC VM's disk (docs/perf.md, "Many files: a batch's flush
# and other programs' writes").
SYNCFS_MAX_FOREIGN = 64 << 20
# A file's date is set through its open descriptor where the system can (no path lookup).
_UTIME_FD = os.utime in os.supports_fd


@dataclass(frozen=True)
class Pending:
    """A complete temporary file waiting for its final name."""

    tmp: str
    dest: str
    size: int
    after: Callable[[int], None] | None = None  # given the size once the file has its name
    bucket: str | None = None  # the object's, for messages
    key: str | None = None

    @property
    def what(self) -> str:
        """The transfer, as a failure names it."""
        if self.bucket is None:
            return f"download to {self.dest}"
        return f"download: s3://{self.bucket}/{self.key} to {self.dest}"

    def write_error(self, e: OSError) -> Exception:
        """The error for the file's bytes or name that the disk failed to flush."""
        if self.bucket is None or self.key is None:
            return OSError(e.errno, e.strerror, self.dest)
        return errors.LocalWriteError(
            e.errno, e.strerror, self.dest, bucket=self.bucket, key=self.key
        )

    def rename_error(self, e: OSError) -> Exception:
        """The error for a rename of :attr:`tmp` over :attr:`dest` that failed (with
        ``e``, which names both): told of ``dest``, as ``Client.download`` tells it."""
        if isinstance(e, IsADirectoryError):
            return _directory_there(self.dest)
        if self.bucket is None or self.key is None:
            return e
        return creation_error(e, self.dest, self.bucket, self.key)


def _syncfs() -> Any:
    """libc's ``syncfs(fd)`` (Linux), or None."""
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).syncfs
    except (OSError, AttributeError):
        return None


def dirty_bytes() -> int | None:
    """Bytes of file data in memory not yet on disk, system-wide (``Dirty`` and
    ``Writeback`` of ``/proc/meminfo``, Linux); None where that is not known."""
    try:
        with open("/proc/meminfo", "rb") as f:
            text = f.read()
    except OSError:
        return None
    total = 0
    for line in text.splitlines():
        name, _, value = line.partition(b":")
        if name in (b"Dirty", b"Writeback"):
            total += int(value.split()[0]) * 1024  # "kB" in the file: KiB
    return total


class Batch:
    """Temporary files that take their final names together, once flushed to disk.

    Thread-safe: workers :meth:`add` their finished files; whoever fills the batch
    flushes it, unless a flush is under way: then that worker goes back to work, and
    the flush under way takes the files that filled the batch meanwhile once it is done
    (a worker waits for it only once two batches wait). :meth:`flush` (the run's end)
    waits for a flush under way.

    A rename that fails (a directory is at the name) is kept in :attr:`failures` for
    the caller to report, as ``(what failed, error)``; its temporary file is removed,
    and its ``after`` is not run. So is a file the disk fails to flush (EIO from its
    fsync; the files flushed take their names), and a name whose folder's fsync fails
    (its file keeps the name, but a move keeps its source). So is an error of an item's
    ``after`` (its bytes were delivered), except ``BrokenPipeError``: standard output is
    gone, which stops the run.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._flush_lock = threading.Lock()
        self._pending: list[Pending] = []
        self._bytes = 0
        self._syncfs = _syncfs()
        self.failures: list[tuple[str, Exception]] = []

    def add(self, item: Pending) -> None:
        with self._lock:
            self._pending.append(item)
            self._bytes += item.size
            due = self._due()
        # One flush at a time, and a worker waits for another's only once two batches
        # wait (the disk is slower than the network): workers that queued behind a flush
        # each flushed the few files that came meanwhile (9 syncfs instead of 4 for
        # 200 x 1 MiB), and none of them received while they waited.
        while due and self._flush_lock.acquire(blocking=due > 1):
            try:
                self._flush()
            finally:
                self._flush_lock.release()
            with self._lock:
                due = self._due()

    def _due(self) -> int:
        """How many batches wait to be flushed: 0, 1, or 2 for two or more (the lock is
        held)."""
        files, size = len(self._pending), self._bytes
        if files >= 2 * BATCH_FILES or size >= 2 * BATCH_BYTES:
            return 2
        return int(files >= BATCH_FILES or size >= BATCH_BYTES)

    def flush(self) -> None:
        """Make the waiting files durable, give them their names, fsync their folders
        (after any flush under way)."""
        with self._flush_lock:
            self._flush()

    def _flush(self) -> None:
        with self._lock:
            items, self._pending, self._bytes = self._pending, [], 0
        if not items:
            return
        dirs: dict[str, list[Pending]] = {}
        for item in self._sync(items):
            try:
                os.replace(item.tmp, item.dest)
            except OSError as e:
                with contextlib.suppress(OSError):
                    os.unlink(item.tmp)
                self._failed(item.what, item.rename_error(e))
                continue
            dirs.setdefault(os.path.dirname(item.tmp) or ".", []).append(item)
        named = []
        for d in sorted(dirs):
            try:
                _fsync_path(d, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
            except OSError as e:
                # The names may not survive a power cut: not done, and a move keeps
                # its source (``after`` does not run).
                for item in dirs[d]:
                    self._failed(item.what, item.write_error(e))
                continue
            named += dirs[d]
        for item in named:
            if item.after is not None:
                try:
                    item.after(item.size)
                except BrokenPipeError:
                    raise
                except Exception as e:
                    self._failed(f"removing the source of {item.dest}", e)

    def _failed(self, what: str, e: Exception) -> None:
        with self._lock:
            self.failures.append((what, e))

    def _sync(self, items: list[Pending]) -> list[Pending]:
        """Put the bytes of ``items`` on disk: one ``syncfs`` per filesystem they are on,
        unless others' unwritten data would make that cost more than an fsync of each.
        Returns the items on disk; one the disk failed to flush (EIO) is a failure, and
        its temporary file is removed."""
        if self._syncfs is not None and self._little_foreign(items):
            # A destination tree may cross a mount point: one syncfs per filesystem,
            # found from each directory (its files are on its filesystem).
            one_per_device: dict[int, str] = {}
            try:
                for directory, tmp in {os.path.dirname(i.tmp): i.tmp for i in items}.items():
                    one_per_device.setdefault(os.stat(directory or ".").st_dev, tmp)
                if all(self._syncfs_of(tmp) for tmp in one_per_device.values()):
                    return items
            except OSError:
                pass  # each file on its own, below
        synced = []
        for item in items:  # each on its own (others' writes are not flushed)
            try:
                _fsync_path(item.tmp, os.O_RDONLY)
            except OSError as e:
                with contextlib.suppress(OSError):
                    os.unlink(item.tmp)
                self._failed(item.what, item.write_error(e))
                continue
            synced.append(item)
        return synced

    @staticmethod
    def _little_foreign(items: list[Pending]) -> bool:
        """Whether at most SYNCFS_MAX_FOREIGN of what waits for the disk is not ``items``'."""
        dirty = dirty_bytes()
        return dirty is not None and dirty - sum(i.size for i in items) <= SYNCFS_MAX_FOREIGN

    def _syncfs_of(self, path: str) -> bool:
        fd = os.open(path, os.O_RDONLY)
        try:
            return bool(self._syncfs(fd) == 0)
        finally:
            os.close(fd)


def _directory_there(dest: str) -> IsADirectoryError:
    # As Client.download and open(dest, "wb") refuse it: the path's fault, Python's error.
    return IsADirectoryError(errno.EISDIR, "a directory is there", dest)


def _fsync_path(path: str, flags: int) -> None:
    with contextlib.suppress(FileNotFoundError):
        fd = os.open(path, flags)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


class Getter(Protocol):
    """What :func:`download_small` needs of a client (``Client`` is one)."""

    def get_object(self, bucket: str, key: str, *, version_id: str | None = None) -> bytes: ...


def download_small(
    client: Getter,
    bucket: str,
    key: str,
    dest: str,
    mtime: datetime | None,
    batch: Batch,
    after: Callable[[int], None] | None = None,
    version_id: str | None = None,
) -> int:
    """Write the object (its ``version_id``, else the current version) to a temporary
    file beside ``dest`` by one verified GET, and hand it to ``batch`` to take its final
    name (then ``after`` runs, given the size); return its size.

    The file gets ``mtime`` (the object's date) before it takes its final name.
    """
    # A directory at the name fails the job now, before its GET, not at the batch's
    # rename (which still catches one made meanwhile, by another job).
    if os.path.isdir(dest):
        raise _directory_there(dest)
    # A name longer than its directory takes fails now too, named as Client.download
    # names it, not as a rename of a temporary file after the GET.
    checked_path(dest, bucket, key)
    # One GET read whole, its stored checksum checked (Client.get_object): an object
    # that arrives in one answer needs neither a pinned, resumable reader nor a buffer
    # sized from the listing (it may have changed since).
    data = memoryview(client.get_object(bucket, key, version_id=version_id))
    directory = os.path.dirname(dest)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    made = False  # the folder is made only when the file cannot be opened in it
    while True:
        # A random name no other job picks; O_EXCL refuses anything already there.
        tmp = os.path.join(directory, f".objsdk-{secrets.token_hex(8)}.tmp")
        try:
            fd = os.open(tmp, flags, 0o666)
            break
        except FileExistsError:
            continue
        except (FileNotFoundError, NotADirectoryError) as e:
            if not directory or made:
                # The folder went again as soon as it was made: not ours to fight.
                raise creation_error(e, dest, bucket, key) from e
            # Made as cp makes it; a file where it should be is named by make_folder.
            make_folder(dest, bucket, key)
            made = True
        except OSError as e:  # a read-only filesystem, no permission
            raise creation_error(e, dest, bucket, key) from e
    try:
        try:
            view = data
            while view:
                view = view[os.write(fd, view) :]
            if mtime is not None:
                ts = mtime.timestamp()
                os.utime(fd if _UTIME_FD else tmp, (ts, ts))
        except OSError as e:  # a full disk or quota (ENOSPC, EDQUOT), EFBIG, EIO
            raise errors.LocalWriteError(e.errno, e.strerror, dest, bucket=bucket, key=key) from e
        finally:
            os.close(fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    batch.add(Pending(tmp, dest, len(data), after, bucket, key))
    return len(data)
