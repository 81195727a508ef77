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
later full read with :class:`~objsdk.ObjectFile` verifies.
"""

from __future__ import annotations

import base64
import contextlib
import io
import logging
import threading
import warnings
from collections.abc import Callable, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from types import TracebackType
from typing import TYPE_CHECKING, NoReturn

import crc32c

from . import errors
from .addressing import check_bucket, check_key
from .integrity import crc32c_b64
from .models import ObjectInfo
from .multipart import (
    MAX_PART_SIZE,
    MAX_PARTS,
    MIN_PART_SIZE,
    CompletedPart,
    Part,
    abort_multipart_upload,
    complete_multipart_upload,
    create_multipart_upload,
    upload_part,
)

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer

    from .client import Client

__all__ = ["DEFAULT_PARALLEL", "DEFAULT_PART_SIZE", "ObjectWriter"]

log = logging.getLogger("objsdk")

MiB = 1 << 20
DEFAULT_PART_SIZE = 16 * MiB
DEFAULT_PARALLEL = 2

Progress = Callable[[int, int | None], None]


class _Shared:
    """What the writer shares with its pool threads: the first failure and progress.

    Pool tasks hold this, never the writer, so a writer dropped without ``close()`` is
    collected (and its upload aborted) even while parts are in flight.
    """

    def __init__(self, progress: Progress | None) -> None:
        self.lock = threading.Lock()
        self.error: BaseException | None = None
        self.progress = progress
        self.uploaded = 0
        self.total: int | None = None

    def fail(self, err: BaseException) -> BaseException:
        """Record ``err`` unless a failure is already recorded; return the first one."""
        with self.lock:
            if self.error is None:
                self.error = err
            return self.error

    def report(self, n: int) -> None:
        # Under the lock: callbacks never overlap and see a growing count.
        with self.lock:
            self.uploaded += n
            if self.progress is not None:
                self.progress(self.uploaded, self.total)


def _upload(
    shared: _Shared,
    client: Client,
    bucket: str,
    key: str,
    upload_id: str,
    part: Part,
    buf: bytearray,
) -> CompletedPart:
    """Runs in the pool: send one part from its buffer, without a copy, with its CRC32C."""
    try:
        view = memoryview(buf)[: part.length]
        done = upload_part(
            client, bucket, key, upload_id, part, view, checksum_crc32c=crc32c_b64(view)
        )
        shared.report(part.length)
    except BaseException as e:
        shared.fail(e)  # seen by the writer's next write() without waiting on futures
        raise
    return done


class ObjectWriter(io.BufferedIOBase):
    """A write-only, non-seekable binary file whose bytes become one object.

    Small writes are buffered into parts of ``part_size`` bytes (5 MiB to 5 GiB) and
    streamed as a multipart upload, ``parallel`` parts at a time; an object smaller than
    one part is sent as a single PUT. ``close()`` completes the upload: only then does
    the object appear under ``key``. Leaving a ``with`` block by an exception, or
    calling :meth:`abort`, discards the upload instead: nothing is stored under ``key``.

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
    """

    def __init__(
        self,
        client: Client,
        bucket: str,
        key: str,
        *,
        part_size: int = DEFAULT_PART_SIZE,
        parallel: int = DEFAULT_PARALLEL,
        content_type: str | None = None,
        metadata: Mapping[str, str] | None = None,
        progress: Progress | None = None,
    ) -> None:
        super().__init__()
        check_bucket(bucket)
        check_key(key)
        if isinstance(part_size, bool) or not isinstance(part_size, int):
            raise errors.InvalidArgument(f"part_size must be an int, got {part_size!r}")
        if not MIN_PART_SIZE <= part_size <= MAX_PART_SIZE:
            # S3 user guide, "Amazon S3 multipart upload limits".
            raise errors.InvalidArgument(
                f"part_size must be 5 MiB to 5 GiB (S3's part limits), got {part_size}"
            )
        if isinstance(parallel, bool) or not isinstance(parallel, int) or parallel < 1:
            raise errors.InvalidArgument(f"parallel must be an int >= 1, got {parallel!r}")
        # Imported here: client.py imports this module to offer Client.open_write().
        from .client import _object_headers

        # Checked now, so bad metadata fails before any byte is written or sent.
        self._headers = _object_headers(bucket, key, content_type, metadata)
        self._client = client
        self.bucket = bucket
        self.key = key
        self.part_size = part_size
        self.parallel = parallel
        self.content_type = content_type
        self.metadata = dict(metadata or {})

        self._shared = _Shared(progress)
        self._pos = 0  # bytes accepted by write()
        self._crc = 0  # running CRC32C of those bytes
        self._buf: bytearray | None = None  # the part being filled
        self._view: memoryview | None = None  # ... and a view to copy into it
        self._fill = 0  # bytes of it filled
        self._free: list[bytearray] = []  # buffers back from finished uploads
        self._allocated = 0  # part buffers in existence: at most parallel + 1
        self._upload_id: str | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._pending: dict[Future[CompletedPart], bytearray] = {}
        self._parts: list[CompletedPart] = []
        self._next_number = 1
        self._completed = False
        self._aborted = False
        self._info: ObjectInfo | None = None

    def __repr__(self) -> str:
        return f"<ObjectWriter bucket={self.bucket!r} key={self.key!r} pos={self._pos}>"

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
        return self._pos

    def flush(self) -> None:
        """Does nothing: S3 cannot append, so bytes leave as whole parts or at close()."""
        self._check_open()

    def _check_open(self) -> None:
        if self.closed:
            raise ValueError("I/O operation on closed file.")

    @property
    def info(self) -> ObjectInfo | None:
        """What the server stored (ETag, size, CRC32C) once ``close()`` succeeded."""
        return self._info

    # -- writing -----------------------------------------------------------------------

    def write(self, b: ReadableBuffer) -> int:
        """Append the bytes of ``b`` (any bytes-like object); return how many.

        Blocks while every part buffer is being uploaded.
        """
        self._check_open()
        if self._shared.error is not None:
            self._fail(self._shared.error)
        with memoryview(b) as outer, outer.cast("B") as view:
            n = view.nbytes
            if n == 0:
                return 0
            self._check_limits(n)
            try:
                self._write(view)
            except BaseException as e:
                self._fail(e)
        return n

    def _check_limits(self, n: int) -> None:
        # Refused before a byte is taken, so the writer stays usable for smaller writes.
        end = self._pos + n
        if -(-end // self.part_size) > MAX_PARTS:
            raise errors.InvalidArgument(
                f"writing {n} more bytes would take the object to {end} bytes, more than "
                f"{MAX_PARTS} parts of {self.part_size} bytes (S3's limit); use a larger "
                f"part_size (bucket {self.bucket!r}, key {self.key!r})"
            )

    def _write(self, view: memoryview) -> None:
        self._crc = crc32c.crc32c(view, self._crc)
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

    def _reap(self, *, block: bool) -> None:
        """Collect finished uploads: keep their answers, take back their buffers.

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
            self._parts.append(fut.result())
            self._free.append(buf)

    def _ship(self) -> None:
        """Hand the current buffer to the pool as the next part."""
        buf, n = self._buf, self._fill
        assert buf is not None
        if self._upload_id is None:
            self._start()
        assert self._executor is not None
        assert self._upload_id is not None
        number = self._next_number
        part = Part(number, (number - 1) * self.part_size, n)
        fut = self._executor.submit(
            _upload, self._shared, self._client, self.bucket, self.key, self._upload_id, part, buf
        )
        self._pending[fut] = buf
        self._next_number += 1
        self._drop_current()

    def _drop_current(self) -> None:
        if self._view is not None:
            self._view.release()
        self._buf, self._view, self._fill = None, None, 0

    def _start(self) -> None:
        headers = dict(self._headers)
        # One CRC32C for the whole object, checked by the server at completion and
        # stored for readers (S3 user guide, "Checking object integrity").
        headers["x-amz-checksum-algorithm"] = "CRC32C"
        headers["x-amz-checksum-type"] = "FULL_OBJECT"
        self._upload_id = create_multipart_upload(
            self._client, self.bucket, self.key, headers=headers
        )
        self._executor = ThreadPoolExecutor(
            max_workers=self.parallel, thread_name_prefix="objsdk-writer"
        )

    # -- finishing ---------------------------------------------------------------------

    def close(self) -> None:
        """Store the object: complete the multipart upload, or send the single PUT.

        If a part failed, or completing fails, the upload is aborted and the error
        raised; the object is then not stored. Closing again does nothing.
        """
        if self.closed:
            return
        try:
            if self._shared.error is not None:
                self._fail(self._shared.error)
            try:
                self._finish()
            except BaseException as e:
                self._fail(e)
        finally:
            self._release()
            super().close()

    def _finish(self) -> None:
        if self._upload_id is None:
            # Never filled a part: one PUT, which carries its own CRC32C.
            data = memoryview(self._buf)[: self._fill] if self._buf is not None else b""
            self._info = self._client.put_object(
                self.bucket,
                self.key,
                data,
                content_type=self.content_type,
                metadata=self.metadata,
            )
            self._shared.total = self._pos
            self._shared.report(self._pos)
            return
        with self._shared.lock:
            self._shared.total = self._pos
        if self._fill:
            self._ship()  # the last part, possibly short
        while self._pending:
            self._reap(block=True)
        numbers = sorted(p.number for p in self._parts)
        if numbers != list(range(1, self._next_number)):
            raise errors.ProtocolError(
                f"parts {numbers} finished, expected 1..{self._next_number - 1}",
                operation="complete_multipart_upload",
                bucket=self.bucket,
                key=self.key,
            )
        crc = base64.b64encode(self._crc.to_bytes(4, "big")).decode()
        result = complete_multipart_upload(
            self._client,
            self.bucket,
            self.key,
            self._upload_id,
            self._parts,
            headers={"x-amz-checksum-crc32c": crc, "x-amz-checksum-type": "FULL_OBJECT"},
        )
        self._completed = True
        lower = {k.lower(): v for k, v in result.items()}
        self._info = ObjectInfo(
            bucket=self.bucket,
            key=self.key,
            size=self._pos,
            etag=result.get("ETag") or lower.get("etag"),
            content_type=self.content_type,
            metadata=dict(self.metadata),
            version_id=lower.get("x-amz-version-id"),
            checksums={"crc32c": result.get("ChecksumCRC32C") or crc},
            checksum_type=result.get("ChecksumType") or "FULL_OBJECT",
        )

    def abort(self) -> None:
        """Discard everything written and close: nothing is stored under ``key`` (an
        object already there is left as it was). Waits for parts in flight, then aborts
        the multipart upload. Does nothing if already closed."""
        if self.closed:
            return
        try:
            self._abort_upload()
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
        try:
            self.abort()
        except Exception:
            log.warning(
                "could not abort upload %s of bucket %r key %r after %s",
                self._upload_id,
                self.bucket,
                self.key,
                exc_type.__name__,
                exc_info=True,
            )

    def _fail(self, err: BaseException) -> NoReturn:
        """Abort (once), then raise the first failure; later calls raise it again."""
        first = self._shared.fail(err)
        if not self._aborted:
            try:
                self._abort_upload()
            except Exception:
                # The caller needs the original failure; the orphaned upload is logged.
                log.warning(
                    "could not abort upload %s of bucket %r key %r",
                    self._upload_id,
                    self.bucket,
                    self.key,
                    exc_info=True,
                )
        raise first

    def _abort_upload(self) -> None:
        self._aborted = True
        if self._executor is not None:
            # A part still in flight may land after the abort and keep its storage
            # (S3 API reference, AbortMultipartUpload): let running parts finish first,
            # and drop the ones not started.
            self._executor.shutdown(wait=True, cancel_futures=True)
        self._pending.clear()
        if self._upload_id is not None and not self._completed:
            # If the bucket is gone, its uploads went with it: nothing is left to free.
            with contextlib.suppress(errors.NoSuchBucket):
                abort_multipart_upload(self._client, self.bucket, self.key, self._upload_id)
            self._upload_id = None

    def _release(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
            self._executor = None
        self._pending.clear()
        self._drop_current()
        self._free.clear()
        self._allocated = 0

    def __del__(self) -> None:
        if "_shared" not in self.__dict__ or self.closed:
            return  # never fully constructed, or closed properly
        # Collected while open: what was written may be a fraction of what was meant, so
        # the upload is aborted, never completed.
        try:
            self._abort_upload()
        except Exception:
            log.warning(
                "could not abort upload %s of bucket %r key %r (writer never closed)",
                self._upload_id,
                self.bucket,
                self.key,
                exc_info=True,
            )
        finally:
            self._release()
            super().close()
        warnings.warn(f"unclosed {self!r}; its upload was aborted", ResourceWarning, stacklevel=1)
