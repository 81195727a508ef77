"""Uploads of files that resume: the record of a path upload's multipart upload, its
lock, and what a later run of the same upload reuses.

An upload of a path in parts (:func:`~objsdk._transfer.upload.upload`) runs under an
:class:`UploadKeeper`. Before the first request it takes the lock of its record in
``$XDG_CACHE_HOME/objsdk/uploads/`` (``~/.cache``; a second upload of the same file to
the same key fails at once with :class:`~objsdk.UploadLockedError`, so two never
interleave the parts of one upload), and finds the record an earlier run left. Then:

* no record, or one that cannot be trusted (:func:`~objsdk._core.upload_record.parse_record`):
  a new multipart upload, whose record is written (temp file, fsync, rename) once it
  exists;
* a record of a file of another size, or of other object fields: the old upload is
  aborted, and a new one started;
* else ``ListParts`` (one page per 1,000 parts) says which parts are stored; each one
  the record names is checked against the file's bytes now
  (:func:`~objsdk._core.upload_record.check_for`), and the upload goes on with the
  parts that match, sending only the rest (:func:`~objsdk._core.upload_record.plan_rest`);
  an upload the service no longer has (``NoSuchUpload``: aborted, or expired by a
  lifecycle rule) starts over.

Each part the service stores is appended to the record by the thread that sent it, and
flushed (fdatasync) at once by the record's own thread
(:class:`~objsdk._transfer.writeback.Writeback`; lines that arrive during a flush share
the next one), so no part waits for the disk: with the disk busy, as it is beside a
local server storing the parts, a flush took 5 to 20 ms. A crash between a part's answer
and its line costs that part being sent again, never a part reused that was not checked;
a kill loses no line written (the kernel has it), a power cut at most those not flushed
yet. An upload that stops and is kept flushes its record before the call returns.

An upload that completes removes its record; one that stops for a reason a later run
can get past (:func:`~objsdk._core.upload_record.keeps_upload`) keeps both its record and
its multipart upload, and the error says so and names it (its ``kept_upload``); one that
stops for good is aborted and its record removed. Records idle for a week are pruned.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace

from objsdk import errors
from objsdk._core.checksums import encode_crc32c
from objsdk._core.parts import Part
from objsdk._core.upload_record import (
    MAX_RECORD_BYTES,
    KeptUpload,
    StoredPart,
    UploadRecord,
    check_for,
    fields_digest,
    keeps_upload,
    md5_etag_matches,
    parse_record,
    plan_rest,
    record_tag,
)
from objsdk._transfer.download_state import O_NOFOLLOW, record_key
from objsdk._transfer.multipart_calls import (
    CompletedPart,
    abort_multipart_upload,
    list_parts,
)
from objsdk._transfer.sources import FileSource, Source, UploadSource
from objsdk._transfer.upload_records import prune, uploads_dir
from objsdk._transfer.writeback import Writeback
from objsdk._transport.base import Transport

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no lock, uploads still resume
    fcntl = None  # type: ignore[assignment]

__all__ = ["Resumed", "UploadKeeper", "keeping"]

log = logging.getLogger("objsdk")

# The file's data, not its metadata (macOS has no fdatasync).
_datasync = getattr(os, "fdatasync", os.fsync)


@dataclass
class Resumed:
    """Where an upload an earlier run left goes on from: its ``upload_id``, the parts
    already stored that are kept (each as the session records it: the service's
    answer, the CRC32C of its bytes, and the part), and the parts ``todo``."""

    upload_id: str
    kept: list[tuple[CompletedPart, int, Part]] = field(default_factory=list)
    todo: list[Part] = field(default_factory=list)

    @property
    def reused(self) -> int:
        """How many of the object's bytes the kept parts hold."""
        return sum(part.length for _, _, part in self.kept)


@contextlib.contextmanager
def keeping(
    transport: Transport,
    bucket: str,
    key: str,
    source: UploadSource,
    src: Source,
    headers: Mapping[str, str],
    *,
    resume: bool,
) -> Iterator[UploadKeeper | None]:
    """The keeper of an upload of ``source`` in parts, locked for the block: None if
    the source is not a path to a regular file (a stream cannot be read again), or the
    records cannot be kept (no writable cache directory). ``resume=False``: an earlier
    run's upload is aborted and the new one is not recorded."""
    if not isinstance(source, (str, os.PathLike)) or not isinstance(src, FileSource):
        yield None
        return
    path = os.path.abspath(os.fspath(source))
    directory = uploads_dir()
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        secret = record_key()
    except OSError as e:
        log.debug("uploads are not resumable: cannot keep records in %s: %s", directory, e)
        yield None
        return
    prune(directory)
    endpoint = transport.endpoint.url
    tag = record_tag(secret, endpoint, bucket, key, path)
    keeper = UploadKeeper(
        transport, bucket, key, src, path, os.path.join(directory, tag), fields_digest(headers)
    )
    try:
        keeper.lock()
    except OSError as e:  # (UploadLockedError is not one)
        log.debug("uploads are not resumable: cannot lock a record in %s: %s", directory, e)
        yield None
        return
    try:
        if not resume:
            keeper.discard_earlier()
            keeper.recording = False
        yield keeper
    finally:
        keeper.close()


class UploadKeeper:
    """The record and lock of one upload of the file ``path`` to ``bucket/key``, from
    before its first request until it completes or stops (see the module)."""

    def __init__(
        self,
        transport: Transport,
        bucket: str,
        key: str,
        src: FileSource,
        path: str,
        base: str,
        fields: str,
    ) -> None:
        self.transport = transport
        self.bucket = bucket
        self.key = key
        self.src = src
        self.path = path
        self.record_path = base + ".json"
        self.lock_path = base + ".lock"
        self.fields = fields
        #: Whether parts are recorded (False: ``resume=False``, or nothing to record).
        self.recording = True
        self._record: UploadRecord | None = None
        self._lock_fd: int | None = None
        self._journal: int | None = None
        # Flushes the journal in the background (step 1: each line asks for a flush).
        self._flusher: Writeback | None = None
        self._write_lock = threading.Lock()

    # -- the lock ---------------------------------------------------------------------

    def lock(self) -> None:
        """Hold the record's lock, or raise :class:`~objsdk.UploadLockedError`."""
        flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0) | O_NOFOLLOW
        for _ in range(100):
            fd = os.open(self.lock_path, flags, 0o600)
            try:
                if fcntl is not None:
                    try:
                        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    except BlockingIOError:
                        raise errors.UploadLockedError(
                            f"another upload of {self.path!r} to this key is in progress "
                            f"(bucket {self.bucket!r}, key {self.key!r})"
                        ) from None
                if _same_file(fd, self.lock_path):
                    self._lock_fd = fd
                    return
            except BaseException:
                os.close(fd)
                raise
            os.close(fd)  # removed by the upload that held it: lock the name again
        raise errors.UploadLockedError(  # pragma: no cover - a name that keeps changing
            f"the lock of the upload of {self.path!r} keeps being replaced "
            f"(bucket {self.bucket!r}, key {self.key!r})"
        )

    def close(self) -> None:
        """Close the record (on disk) and give the lock up (its file goes with it)."""
        self._close_journal(flush=True)
        if self._lock_fd is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.lock_path)  # still held: no one else is in between
            os.close(self._lock_fd)
            self._lock_fd = None

    # -- an earlier run ---------------------------------------------------------------

    def resume_point(self, size: int, part_size: int | None) -> Resumed | None:
        """Where an earlier run of this upload left it, if it can go on from there;
        None to start a new one (an earlier upload that cannot be resumed is aborted).
        ``part_size``: the size of the parts to send (None: the earlier run's)."""
        if not self.recording:
            return None
        found = self._load()
        if found is None:
            return None
        record, stored = found
        stamp = self.src.stamp
        if record.size != size:
            log.info(
                "upload of %r to bucket %r, key %r: the file is now %d bytes, not %d: "
                "starting over",
                self.path,
                self.bucket,
                self.key,
                size,
                record.size,
            )
            self.discard_earlier(record)
            return None
        try:
            listed = list(list_parts(self.transport, self.bucket, self.key, record.upload_id))
        except errors.S3Error as e:
            if e.code != "NoSuchUpload" and not isinstance(e, errors.AccessDenied):
                raise
            # Aborted or expired (a lifecycle rule), or not ours to list: start over.
            log.info("upload %s of %r cannot be resumed (%s): starting over", record.upload_id,
                     self.path, e.code)  # fmt: skip
            self.discard_earlier(record, abort=e.code != "NoSuchUpload")
            return None
        checked: dict[int, tuple[CompletedPart, int]] = {}
        for part in listed:
            mine = stored.get(part.number)
            how = check_for(mine, part) if mine is not None else None
            if mine is None or how is None:
                continue
            crc, md5 = self.src.checksums(mine.part, md5=how == "md5")
            same = (
                encode_crc32c(crc) == part.crc32c
                if how == "crc32c"
                else md5 is not None and md5_etag_matches(part.etag, md5)
            )
            if same:
                answer = CompletedPart(part.number, part.etag, encode_crc32c(crc), mine.opaque)
                checked[part.number] = (answer, crc)
        parts = [stored[n].part for n in checked]
        kept, todo = plan_rest(size, part_size or record.part_size, parts)
        resumed = Resumed(record.upload_id, todo=todo)
        for p in kept:
            answer, crc = checked[p.number]
            resumed.kept.append((answer, crc, p))
        # The record again, of the file as it is now and of the parts kept: compact.
        self._write(
            replace(record, mtime_ns=stamp[1], created=time.time()),
            [stored[p.number] for p in kept],
        )
        log.info(
            "resuming upload %s of %r to bucket %r, key %r: %d of %d bytes already stored",
            record.upload_id,
            self.path,
            self.bucket,
            self.key,
            resumed.reused,
            size,
        )
        return resumed

    def discard_earlier(self, record: UploadRecord | None = None, *, abort: bool = True) -> None:
        """Abort the upload an earlier run left (best effort: logged) and remove its
        record."""
        if record is None:
            found = self._load()
            record = found[0] if found is not None else None
        if record is not None and abort:
            try:
                abort_multipart_upload(self.transport, self.bucket, self.key, record.upload_id)
            except errors.ObjsdkError as e:
                log.warning(
                    "could not abort the earlier multipart upload %s (bucket %r, key %r): %s",
                    record.upload_id,
                    self.bucket,
                    self.key,
                    e,
                )
        self._remove_record()

    # -- this run ---------------------------------------------------------------------

    def started(self, upload_id: str, size: int, part_size: int) -> None:
        """A new multipart upload of the file exists: its record is written (an upload
        that cannot be recorded still goes on, without resuming)."""
        if not self.recording:
            return
        record = UploadRecord(
            endpoint=self.transport.endpoint.url,
            bucket=self.bucket,
            key=self.key,
            path=self.path,
            size=size,
            mtime_ns=self.src.stamp[1],
            upload_id=upload_id,
            part_size=part_size,
            fields=self.fields,
            created=time.time(),
        )
        self._write(record, [])

    def stored(self, part: Part, answer: CompletedPart, crc: int) -> None:
        """The service stored ``part`` (called by the thread that sent it): its line
        is appended to the record, and flushed in the background."""
        line = StoredPart(
            part.number, part.start, part.length, encode_crc32c(crc), answer.etag, answer.opaque
        ).line()
        with self._write_lock:
            if self._journal is None:
                return
            try:
                if self._flusher is not None:
                    self._flusher.check()  # what a background flush met, if anything
                os.write(self._journal, line)
                if self._flusher is not None:
                    self._flusher.wrote(len(line))
            except OSError as e:
                # A full disk or a failed flush, say: the upload goes on; parts not
                # recorded are sent again if it has to be resumed.
                log.warning("cannot record the parts of %r any more: %s", self.path, e)
                self._close_journal(locked=True)

    def completed(self) -> None:
        """The object is stored: the record goes."""
        self._remove_record()

    def stopped(self, error: BaseException, upload_id: str | None) -> bool:
        """The upload stopped with ``error``: True if it is kept to be resumed (the
        error then names it, see :class:`~objsdk._core.upload_record.KeptUpload`);
        False if the caller must abort it (its record is removed)."""
        recorded = self.recording and self._record is not None
        if not recorded or upload_id is None or not keeps_upload(error):
            self._remove_record()
            return False
        self._close_journal(flush=True)
        kept = KeptUpload(self.bucket, self.key, upload_id, self.path)
        with contextlib.suppress(AttributeError, TypeError):
            error.kept_upload = kept  # type: ignore[attr-defined]
            if isinstance(error, errors.ObjsdkError) and error.args:
                first, *rest = error.args
                if isinstance(first, str):
                    error.args = (f"{first}; {kept.advice()}", *rest)
        log.info("upload stopped (%s); %s", type(error).__name__, kept.advice())
        return True

    # -- the record file --------------------------------------------------------------

    def _load(self) -> tuple[UploadRecord, dict[int, StoredPart]] | None:
        """The record an earlier run left, if it is one of this upload."""
        try:
            fd = os.open(self.record_path, os.O_RDONLY | O_NOFOLLOW)
        except OSError:  # none, or a link
            return None
        with os.fdopen(fd, "rb") as f:
            data = f.read(MAX_RECORD_BYTES + 1)
        found = parse_record(data)
        if found is None:
            return None
        record = found[0]
        endpoint = self.transport.endpoint.url
        if not record.same_target(endpoint, self.bucket, self.key, self.path, self.fields):
            # Of other fields (a new content type...): the earlier upload would store
            # those. Anything else is not this upload's record at all.
            if record.same_target(endpoint, self.bucket, self.key, self.path, record.fields):
                self.discard_earlier(record)
            return None
        return found

    def _write(self, record: UploadRecord, parts: list[StoredPart]) -> None:
        """Replace the record atomically (temp, fsync, rename) with ``record`` and
        ``parts``, and keep it open to append to."""
        self._close_journal()
        tmp = f"{self.record_path}.{os.getpid()}.tmp"
        try:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(record.header() + b"".join(p.line() for p in parts))
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.record_path)
            _fsync_dir(os.path.dirname(self.record_path))
            journal = os.open(self.record_path, os.O_WRONLY | os.O_APPEND | O_NOFOLLOW)
        except OSError as e:
            log.warning("cannot record the upload of %r (it will not resume): %s", self.path, e)
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            return
        with self._write_lock:
            self._journal = journal
            self._flusher = Writeback(journal, step=1, flush=_datasync)
            self._record = record

    def _close_journal(self, *, locked: bool = False, flush: bool = False) -> None:
        """Stop the background flushes and close the journal; ``flush``: put the lines
        written on disk first (quietly nothing if that fails: they are sent again)."""
        with contextlib.nullcontext() if locked else self._write_lock:
            journal, self._journal = self._journal, None
            flusher, self._flusher = self._flusher, None
        if flusher is not None:
            # After its flush in progress (which uses the journal), if any.
            if flush:
                flusher.keep()
            else:
                flusher.close()
        if journal is not None:
            os.close(journal)

    def _remove_record(self) -> None:
        self._close_journal()
        self._record = None
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.record_path)


def _same_file(fd: int, name: str) -> bool:
    try:
        st = os.stat(name, follow_symlinks=False)
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (mine.st_dev, mine.st_ino)


def _fsync_dir(directory: str) -> None:
    """Make a rename in ``directory`` durable."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms that cannot open directories
        return
    try:
        os.fsync(fd)
    except OSError as e:  # pragma: no cover
        if e.errno not in (errno.EINVAL, errno.EBADF):
            raise
    finally:
        os.close(fd)
