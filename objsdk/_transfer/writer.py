"""``ObjectWriter``: a writable binary file that streams into one S3 object.

Writes are copied into a part buffer (a preallocated ``bytearray`` of ``part_size``,
filled by slice assignment: the one copy a buffered writer cannot avoid). A full buffer
is handed to a small thread pool that uploads it, straight from the buffer, as one part
of a multipart upload, while the caller fills the next buffer. ``close()`` completes the
upload; an object that never filled a part is sent as one PUT instead.

Memory: at most ``parallel + 1`` part buffers exist. The writer fills one, the pool
uploads at most ``parallel`` others, and a write that needs a buffer while all are in
flight waits for an upload to finish and reuses its buffer.

Integrity: the upload is created with ``x-amz-checksum-algorithm: CRC32C`` and
``x-amz-checksum-type: FULL_OBJECT``; every part carries its own CRC32C, and the
completion carries the CRC32C of the whole object, computed from the caller's bytes as
they were written ("Checking object integrity" in the S3 user guide, full-object
checksums for multipart uploads). The server checks each part against its CRC32C and
the parts together against the full-object value, and stores the latter, which every
later full read with :class:`~objsdk.ObjectFile` verifies. A service that checks none
(moto) is caught after the completion instead: a stored CRC32C other than the caller's
bytes' deletes the object and raises IntegrityError (:mod:`objsdk._transfer.confirm`).
"""

from __future__ import annotations

import functools
import io
import logging
import os
import warnings
from collections.abc import Mapping
from concurrent.futures import FIRST_COMPLETED, Future, wait
from types import TracebackType
from typing import TYPE_CHECKING, NoReturn

from objsdk import errors
from objsdk._core.addressing import check_bucket, check_count, check_key
from objsdk._core.checksums import crc32c
from objsdk._core.object_headers import object_headers
from objsdk._core.parts import Part, upload_part_size
from objsdk._core.sizes import DEFAULT_PART_SIZE, DEFAULT_WRITER_PARALLEL, MAX_PARTS
from objsdk._s3.objects import put_bytes
from objsdk._transfer.multipart import CompletedPart, MultipartSession
from objsdk._transfer.progress import Progress, ProgressTracker
from objsdk._transport import forks
from objsdk._transport.base import Transport
from objsdk.models import ObjectInfo

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer

    from objsdk._io.objectfile import HasTransport

__all__ = ["ObjectWriter"]

log = logging.getLogger("objsdk")

# Writes of bytes under _SMALL gather, up to _STAGE, before they are checksummed and
# copied on together. Larger ones go straight into the part buffer: for them the second
# copy would cost more than the call it saves.
_SMALL = 4 * 1024
_STAGE = 64 * 1024


class ObjectWriter(io.BufferedIOBase):
    """A write-only, non-seekable binary file whose bytes become one object.

    Small writes are buffered into parts of ``part_size`` bytes (5 MiB to 5 GiB) and
    streamed as a multipart upload, ``parallel`` parts at a time; an object smaller than
    one part is sent as a single PUT. ``close()`` completes the upload: only then does
    the object appear under ``key``. Leaving a ``with`` block by an exception, or
    calling :meth:`abort`, discards the upload instead: nothing is stored under ``key``.
    The abort is retried for up to a minute while the server throttles it (see
    ``MultipartSession.abort``); an abort that still fails is named on the error raised.

    A failed part upload is raised, as the part's own error and after the upload is
    aborted, by the next ``write()`` or ``close()``, and by every later one: the writer
    never completes an object it could not upload whole.

    ``progress(bytes_uploaded, total)`` is called as each part (or the single PUT)
    finishes (for parts, from the pool's threads), never two calls at once; ``total`` is
    None until ``close()`` has fixed the size. It should not raise: an exception from it is
    handled like a failed part.

    A writer garbage collected without being closed is aborted, best effort, and never
    completed, since what was written may be only part of what was meant. Collection
    waits for parts in flight (so none lands after the abort), then emits a
    ``ResourceWarning`` like an unclosed file. Not thread-safe: write from one thread.

    An upload belongs to the process that opened the writer. A forked child's copy
    refuses to write or complete (:class:`~objsdk.InvalidArgument`); its ``abort()``,
    ``with`` exit or collection sends nothing, and the parent's upload goes on.
    """

    def __init__(
        self,
        client: HasTransport,
        bucket: str,
        key: str,
        *,
        part_size: int = DEFAULT_PART_SIZE,
        parallel: int = DEFAULT_WRITER_PARALLEL,
        content_type: str | None = None,
        metadata: Mapping[str, str] | None = None,
        progress: Progress | None = None,
        extra_headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__()
        check_bucket(bucket)
        check_key(key)
        # S3 user guide, "Amazon S3 multipart upload limits".
        upload_part_size(None, part_size)
        check_count("parallel", parallel, 1, bucket, key)
        # Checked now, so bad metadata fails before any byte is written or sent.
        self._headers = {
            **object_headers(bucket, key, content_type, metadata),
            **(extra_headers or {}),  # Cache-Control, storage class...: with the PUT or Create
        }
        self._transport: Transport = client.transport
        self.bucket = bucket
        self.key = key
        self.part_size = part_size
        self.parallel = parallel
        self.content_type = content_type
        self.metadata = dict(metadata or {})

        self._progress = ProgressTracker(progress, None)
        # Failures as they happen, the first raised ever after: the parts' (recorded by
        # their futures' callbacks, which hold this list, not the writer) and its own.
        self._failed: list[BaseException] = []
        self._pos = 0  # bytes accepted by write() and moved into part buffers
        self._crc = 0  # running CRC32C of those bytes
        # Small writes (a line, a CSV row) gather here and go on in one _write: per
        # write, a bytearray append instead of a CRC call and a buffer copy each.
        self._stage = bytearray()
        self._room = MAX_PARTS * part_size  # S3's limit on the object's size
        self._buf: bytearray | None = None  # the part being filled
        self._view: memoryview | None = None  # ... and a view to copy into it
        self._fill = 0  # bytes of it filled
        self._free: list[bytearray] = []  # buffers back from finished uploads
        self._allocated = 0  # part buffers in existence: at most parallel + 1
        self._session: MultipartSession | None = None
        self._pending: dict[Future[tuple[CompletedPart, int]], bytearray] = {}
        self._next_index = 0
        self._aborted = False
        self._info: ObjectInfo | None = None
        self._forks = forks.generation  # the process the upload belongs to
        self._owner = os.getpid()

    def __repr__(self) -> str:
        pos = self._pos + len(self._stage)
        return f"<ObjectWriter bucket={self.bucket!r} key={self.key!r} pos={pos}>"

    def __reduce__(self) -> NoReturn:
        # Unlike ObjectFile, a writer cannot be re-created elsewhere: its buffered bytes
        # and upload in progress belong to this process.
        raise TypeError(f"cannot pickle {type(self).__name__}: an upload belongs to one process")

    # -- io.IOBase plumbing ------------------------------------------------------------

    def readable(self) -> bool:
        self._check_open()
        return False

    def seekable(self) -> bool:
        self._check_open()
        return False

    def writable(self) -> bool:
        self._check_open()
        return True

    def tell(self) -> int:
        """Bytes written so far."""
        self._check_open()
        return self._pos + len(self._stage)

    def flush(self) -> None:
        """Does nothing: S3 cannot append, so bytes leave as whole parts or at close()."""
        self._check_open()

    def _check_open(self) -> None:
        if self.closed:
            raise ValueError("I/O operation on closed file.")

    def _owned(self) -> bool:
        return self._forks == forks.generation

    def _check_owner(self) -> None:
        if not self._owned():
            raise errors.InvalidArgument(
                f"this writer's upload belongs to process {self._owner}, which opened it; "
                f"a forked child may not write to it or complete it "
                f"(bucket {self.bucket!r}, key {self.key!r})"
            )

    def _disown(self) -> None:
        """In a forked child: close this copy without a request (the parent's upload goes
        on) and without waiting for parts, whose threads are the parent's."""
        self._stage = bytearray()
        self._session = None
        self._pending = {}
        self._buf = self._view = None
        self._free = []
        super().close()

    @property
    def info(self) -> ObjectInfo | None:
        """What the server stored (ETag, size, CRC32C) once ``close()`` succeeded."""
        return self._info

    # -- writing -----------------------------------------------------------------------

    def write(self, b: ReadableBuffer) -> int:
        """Append the bytes of ``b`` (any bytes-like object); return how many.

        Blocks while every part buffer is being uploaded.
        """
        if type(b) is bytes:
            # A part's failure is recorded as it happens (_failed), so checking it here
            # is as prompt as the full check below.
            stage, n = self._stage, len(b)
            end = self._pos + len(stage) + n
            fits = n < _SMALL and n + len(stage) <= _STAGE and end <= self._room
            if fits and not self._failed and not self.closed and self._owned():
                stage += b
                return n
        self._check_open()
        self._check_owner()
        self._check_failed()
        if isinstance(b, str):
            raise TypeError(
                f"write() takes bytes-like data, not str (bucket {self.bucket!r}, key "
                f"{self.key!r}): encode it, or wrap the writer in io.TextIOWrapper"
            )
        with memoryview(b) as outer, outer.cast("B") as view:
            n = view.nbytes
            if n == 0:
                return 0
            self._check_limits(n)
            try:
                self._unstage()
                self._write(view)
            except BaseException as e:
                self._fail(e)
        return n

    def _unstage(self) -> None:
        """Move the staged small writes into the part buffers, in order."""
        if self._stage:
            with memoryview(self._stage) as staged:
                self._write(staged)
            self._stage.clear()

    def _check_limits(self, n: int) -> None:
        # Refused before a byte is taken, so the writer stays usable for smaller writes.
        end = self._pos + len(self._stage) + n
        if -(-end // self.part_size) > MAX_PARTS:
            raise errors.InvalidArgument(
                f"writing {n} more bytes would take the object to {end} bytes, more than "
                f"{MAX_PARTS} parts of {self.part_size} bytes (S3's limit); use a larger "
                f"part_size (bucket {self.bucket!r}, key {self.key!r})"
            )

    def _write(self, view: memoryview) -> None:
        self._crc = crc32c(view, self._crc)
        off, n = 0, len(view)
        while off < n:
            if self._view is None:
                self._buf = self._take_buffer()
                self._view = memoryview(self._buf)
            k = min(self.part_size - self._fill, n - off)
            # Into a memoryview: a bytearray's own slice assignment would first copy a
            # source that is not a bytearray into a temporary one.
            self._view[self._fill : self._fill + k] = view[off : off + k]
            self._fill += k
            self._pos += k
            off += k
            if self._fill == self.part_size:
                self._ship()

    def _take_buffer(self) -> bytearray:
        """A returned buffer, a new one, or (all in flight) the next one to come back."""
        self._reap(block=False)
        while not self._free and self._allocated > self.parallel and self._pending:
            self._reap(block=True)
        if self._free:
            return self._free.pop()
        self._allocated += 1
        return bytearray(self.part_size)

    def _check_failed(self) -> None:
        """Raise (after aborting) the first failure: recorded, or of a finished part."""
        if not self._failed:
            for fut in self._pending:
                if fut.done() and (exc := fut.exception()) is not None:
                    self._failed.append(exc)
                    break
        if self._failed:
            self._fail(self._failed[0])

    def _reap(self, *, block: bool) -> None:
        """Collect finished uploads and take back their buffers.

        With ``block``, wait for at least one. Raises the first failure found.
        """
        if block:
            done, _ = wait(self._pending, return_when=FIRST_COMPLETED)
        else:
            done = {f for f in self._pending if f.done()}
        for fut in done:
            buf = self._pending.pop(fut)
            exc = fut.exception()
            if exc is not None:
                raise exc
            self._free.append(buf)

    def _ship(self) -> None:
        """Hand the current buffer to the pool as the next part."""
        buf, n = self._buf, self._fill
        assert buf is not None
        if self._session is None:
            self._session = MultipartSession(
                self._transport,
                self.bucket,
                self.key,
                headers=self._headers,
                content_type=self.content_type,
                metadata=self.metadata,
                parallel=self.parallel,
                part_size=self.part_size,
                progress=self._progress,
            )
            self._session.start()
        start = self._next_index * self.part_size
        part = Part(self._next_index, start, start + n)
        uploading = self._session.submit(part, memoryview(buf)[:n])
        uploading.add_done_callback(functools.partial(_record_failure, self._failed))
        self._pending[uploading] = buf
        self._next_index += 1
        self._drop_current()

    def _drop_current(self) -> None:
        if self._view is not None:
            self._view.release()
        self._buf, self._view, self._fill = None, None, 0

    # -- finishing ---------------------------------------------------------------------

    def close(self) -> None:
        """Store the object: complete the multipart upload, or send the single PUT.

        If a part failed, or completing fails, the upload is aborted and the error
        raised; the object is then not stored. Closing again does nothing.
        """
        if self.closed:
            return
        if not self._owned():
            self._disown()
            self._check_owner()
        try:
            self._check_failed()
            try:
                self._unstage()
                self._finish()
            except BaseException as e:
                self._fail(e)
        finally:
            self._release()
            super().close()

    def _finish(self) -> None:
        if self._session is None:
            # Never filled a part: one PUT, which carries its own CRC32C.
            data = memoryview(self._buf)[: self._fill] if self._buf is not None else b""
            self._info = put_bytes(
                self._transport,
                self.bucket,
                self.key,
                data,
                headers=self._headers,
                content_type=self.content_type,
                metadata=self.metadata,
            )
            self._progress.finish(self._pos)
            return
        self._progress.set_total(self._pos)
        if self._fill:
            self._ship()  # the last part, possibly short
        while self._pending:
            self._reap(block=True)
        self._info = self._session.complete(
            expected_parts=self._next_index, size=self._pos, crc=self._crc
        )
        self._progress.finish(self._pos)

    def abort(self) -> None:
        """Discard everything written and close: nothing is stored under ``key`` (an
        object already there is left as it was). Waits for parts in flight, then aborts
        the multipart upload, retried for up to a minute; if it still fails, its error
        is raised, naming the upload id. Does nothing if already closed."""
        self._discard(None)

    def _discard(self, failure: BaseException | None) -> None:
        """Abort and close, unless closed already; an abort that fails (after being
        retried: see ``MultipartSession.abort``) is named on ``failure``, else raised."""
        if self.closed:
            return
        if not self._owned():
            self._disown()
            return
        try:
            self._abort_upload(failure)
        finally:
            self._release()
            super().close()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.close()
            return
        # The block failed: what was written may be incomplete, so it must not be stored.
        # The block's exception goes on; an abort that fails is logged and named on it.
        self._discard(exc)

    def _fail(self, err: BaseException) -> NoReturn:
        """Abort (once), then raise the first failure; later calls raise it again."""
        if not self._failed:
            self._failed.append(err)
        if not self._aborted:
            self._abort_upload(self._failed[0])
        raise self._failed[0]

    def _abort_upload(self, failure: BaseException | None = None) -> None:
        """Wait for parts in flight, drop the ones not started, abort (see
        ``MultipartSession.abort``: an abort that fails is named on ``failure``, or
        raised without one)."""
        self._aborted = True
        self._pending.clear()
        if self._session is not None and not self._session.completed:
            self._session.abort(failure)

    def _release(self) -> None:
        self._stage = bytearray()
        if self._session is not None and self._session.pool is not None:
            self._session.pool.close()
        self._pending.clear()
        self._drop_current()
        self._free.clear()
        self._allocated = 0

    def __del__(self) -> None:
        if "_progress" not in self.__dict__ or self.closed:
            return  # never fully constructed, or closed properly
        if not self._owned():
            self._disown()  # a forked child's copy: the upload is the parent's
            return
        # Collected while open: what was written may be a fraction of what was meant, so
        # the upload is aborted, never completed. An abort that fails was logged with
        # its upload id.
        try:
            self._abort_upload()
        except Exception:
            log.warning(
                "could not abort the upload of bucket %r key %r (writer never closed)",
                self.bucket,
                self.key,
            )
        finally:
            self._release()
            super().close()
        warnings.warn(f"unclosed {self!r}; its upload was aborted", ResourceWarning, stacklevel=1)


def _record_failure(failed: list[BaseException], done: Future[tuple[CompletedPart, int]]) -> None:
    """A part's future is done: record its failure (in the pool's thread, at once)."""
    if not done.cancelled() and (exc := done.exception()) is not None:
        failed.append(exc)
