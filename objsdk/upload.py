"""``upload``: a file, buffer or stream to one object, by the cheapest safe route.

Below ``multipart_threshold`` (and S3's 5 GiB single-PUT limit) one PUT:

* a regular file over plain http: signed headers, then ``sendfile(2)`` from the page
  cache to the socket (:mod:`objsdk.sendfile`), no byte ever copied into Python;
* a regular file over https, or another seekable stream: streamed by the transport;
* bytes-like data (``BytesIO`` too, through its buffer): ``Client.put_object``.

Above it, a multipart upload with ``parallel`` parts in flight. The parts of a file are
slices of an ``mmap`` of it and the parts of a buffer slices of that buffer, so nothing
is copied; a stream is read part by part into reused buffers. Any failure, an exception
from ``progress`` or a ``KeyboardInterrupt`` aborts the upload, so no parts are left
behind, and is re-raised.

Every route stores a full-object CRC32C (``x-amz-checksum-crc32c``, "Checking object
integrity" in the S3 user guide), which the server checks on arrival and
:class:`~objsdk.objectfile.ObjectFile` checks again on a full read. For multipart
uploads the object's CRC is combined from the parts' CRCs (zlib's ``crc32_combine``
algorithm), so the data is read once.
"""

from __future__ import annotations

import base64
import contextlib
import io
import logging
import mmap
import os
import stat
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, replace
from typing import IO, TYPE_CHECKING, BinaryIO, cast

import crc32c
from requests.structures import CaseInsensitiveDict

from . import errors
from .addressing import check_bucket, check_key
from .client import _checksums, _object_headers
from .models import ObjectInfo
from .multipart import (
    DEFAULT_PART_SIZE,
    MAX_PART_SIZE,
    MAX_PARTS,
    MIN_PART_SIZE,
    CompletedPart,
    Part,
    abort_multipart_upload,
    complete_multipart_upload,
    create_multipart_upload,
    plan_parts,
    upload_part,
)
from .sendfile import SourceChangedError, _CallbackError, put_file
from .signing import UNSIGNED_PAYLOAD

if TYPE_CHECKING:
    from .client import Client

__all__ = [
    "DEFAULT_MULTIPART_THRESHOLD",
    "Progress",
    "SourceChangedError",
    "UploadSource",
    "crc32c_combine",
    "upload",
]

log = logging.getLogger("objsdk")

MiB = 1 << 20
DEFAULT_MULTIPART_THRESHOLD = 64 * MiB
# PutObject takes at most 5 GB in one request (S3 API reference, PutObject).
MAX_SINGLE_PUT = 5 << 30
# Reads of a stream that is not a file, to checksum it before sending it.
_READ_BLOCK = MiB

UploadSource = str | os.PathLike[str] | BinaryIO | bytes | bytearray | memoryview
Progress = Callable[[int, int], None]


def upload(
    client: Client,
    bucket: str,
    key: str,
    source: UploadSource,
    *,
    part_size: int | None = None,
    parallel: int = 4,
    content_type: str | None = None,
    metadata: Mapping[str, str] | None = None,
    progress: Progress | None = None,
    multipart_threshold: int = DEFAULT_MULTIPART_THRESHOLD,
) -> ObjectInfo:
    """Store ``source`` under ``key``: one PUT below ``multipart_threshold``, else a
    multipart upload of ``part_size`` parts (default 16 MiB), ``parallel`` at a time.

    ``source`` is a path, a binary file object (read from its position to its end,
    and left at its end), or bytes-like data. A regular file must not be truncated
    while it uploads: its parts are memory-mapped. ``progress(done, total)`` is called
    in the calling thread as bytes are sent, ``done`` never decreasing, and last with
    ``(size, size)``; ``total`` is -1 while the size of a stream is unknown. The
    object always gets a full-object CRC32C, returned in ``checksums["crc32c"]``.
    Keep ``parallel`` within the client's ``max_pool_connections`` so connections are
    reused.
    """
    check_bucket(bucket)
    check_key(key)
    headers = _object_headers(bucket, key, content_type, metadata)
    if isinstance(parallel, bool) or not isinstance(parallel, int) or parallel < 1:
        raise errors.InvalidArgument(f"parallel must be an int >= 1, got {parallel!r}")
    if (
        isinstance(multipart_threshold, bool)
        or not isinstance(multipart_threshold, int)
        or multipart_threshold < 0
    ):
        raise errors.InvalidArgument(
            f"multipart_threshold must be an int >= 0, got {multipart_threshold!r}"
        )
    if part_size is not None and (
        isinstance(part_size, bool)
        or not isinstance(part_size, int)
        or not MIN_PART_SIZE <= part_size <= MAX_PART_SIZE
    ):
        raise errors.InvalidArgument(
            f"part_size must be 5 MiB to 5 GiB (S3's limits), got {part_size!r}"
        )
    job = _Job(client, bucket, key, headers, content_type, metadata or {}, parallel)
    try:
        with _open_source(source, bucket, key) as src:
            size = src.size
            reporter = _Reporter(progress, -1 if size is None else size)
            if size is None:
                info = _upload_unsized(job, src, part_size or DEFAULT_PART_SIZE, reporter)
            elif size == 0 or (size < multipart_threshold and size <= MAX_SINGLE_PUT):
                # An empty object is one PUT whatever the threshold: a multipart one gets
                # no stored checksum from MinIO, and gains nothing.
                info = _put_single(job, src, size, reporter)
            else:
                info = _upload_multipart(job, src, plan_parts(size, part_size), reporter)
            reporter.finish(info.size or 0)
            return info
    except _CallbackError as e:
        error = e.error
    # The caller's own exception from progress, as it was raised (sendfile._CallbackError).
    raise error


# -- CRC32C combination (pure) ----------------------------------------------------------

# CRC32C's polynomial (Castagnoli), bit-reflected as CRCs are computed (RFC 3720 §B.4).
_POLY = 0x82F63B78


def _multmodp(a: int, b: int) -> int:
    """a(x) * b(x) modulo the polynomial, in reflected bit order; ``a`` must not be 0."""
    m = 1 << 31
    p = 0
    while True:
        if a & m:
            p ^= b
            if not a & (m - 1):
                return p
        m >>= 1
        b = (b >> 1) ^ _POLY if b & 1 else b >> 1


def _x2n_table() -> list[int]:
    table = []
    p = 1 << 30  # x^1
    for _ in range(32):
        table.append(p)
        p = _multmodp(p, p)
    return table


# _X2N[k] is x^(2^k) modulo the polynomial.
_X2N = _x2n_table()


def _x2nmodp(n: int, k: int) -> int:
    """x^(n * 2^k) modulo the polynomial."""
    p = 1 << 31  # x^0 = 1
    while n:
        if n & 1:
            p = _multmodp(_X2N[k & 31], p)
        n >>= 1
        k += 1
    return p


def crc32c_combine(crc1: int, crc2: int, len2: int) -> int:
    """CRC32C of ``A + B`` from ``crc32c(A)``, ``crc32c(B)`` and ``len(B)``.

    zlib's ``crc32_combine`` (1.2.12 and later) for CRC32C's polynomial: the CRC of A
    shifted over ``len2`` zero bytes, i.e. multiplied by x^(8 * len2), plus the CRC of
    B. A few microseconds, whatever the lengths.
    """
    return _multmodp(_x2nmodp(len2, 3), crc1) ^ crc2


def _b64(crc: int) -> str:
    return base64.b64encode(crc.to_bytes(4, "big")).decode()


def _crc(data: memoryview, value: int = 0) -> int:
    """CRC32C of a buffer, read in place (the GIL is released for large ones)."""
    return int(crc32c.crc32c(data, value))


# -- sources ----------------------------------------------------------------------------


@dataclass
class _Source:
    """What to upload: a regular ``file`` (bytes ``start`` to ``start + size``), a
    ``view`` of memory, or any other ``stream`` (``size`` None if it cannot seek)."""

    size: int | None
    start: int = 0
    file: BinaryIO | None = None
    view: memoryview | None = None
    stream: IO[bytes] | None = None


@contextlib.contextmanager
def _open_source(source: UploadSource, bucket: str, key: str) -> Iterator[_Source]:
    if isinstance(source, (bytes, bytearray, memoryview)):
        with _flat(source, bucket, key) as view:
            yield _Source(view.nbytes, view=view)
    elif isinstance(source, (str, os.PathLike)):
        with open(source, "rb") as f:
            yield _file_source(f)
    elif isinstance(source, io.BytesIO):
        # Its buffer, not its bytes: getbuffer() shares the memory.
        start = source.tell()
        with source.getbuffer() as whole, whole[start:] as view:
            size = view.nbytes
            yield _Source(size, view=view)
        source.seek(start + size)
    else:
        src = _file_source(source)
        yield src
        if src.size is not None:
            source.seek(src.start + src.size)


@contextlib.contextmanager
def _flat(data: bytes | bytearray | memoryview, bucket: str, key: str) -> Iterator[memoryview]:
    """A flat byte view of any C-contiguous buffer (array('I'), 2-D views...)."""
    view = memoryview(data)
    with view:
        if not view.c_contiguous:
            raise errors.InvalidArgument(
                f"upload needs a contiguous buffer (bucket {bucket!r}, key {key!r})"
            )
        with view.cast("B") as flat:
            yield flat


def _file_source(f: BinaryIO) -> _Source:
    try:
        seekable = f.seekable()
    except (AttributeError, OSError, ValueError):
        seekable = False
    if not seekable:
        return _Source(None, stream=f)
    start = f.tell()
    end = f.seek(0, os.SEEK_END)
    f.seek(start)
    size = max(0, end - start)
    try:
        regular = stat.S_ISREG(os.fstat(f.fileno()).st_mode)
    except (AttributeError, OSError, ValueError):
        regular = False
    if regular:
        return _Source(size, start, file=f)
    return _Source(size, start, stream=f)


@contextlib.contextmanager
def _mapped(f: BinaryIO, start: int, size: int) -> Iterator[memoryview]:
    """Bytes ``start`` to ``start + size`` of a regular file, memory-mapped read-only."""
    if size == 0:
        yield memoryview(b"")  # mmap refuses empty mappings
        return
    base = start - start % mmap.ALLOCATIONGRANULARITY  # mmap offsets must be aligned
    mm = mmap.mmap(f.fileno(), start - base + size, offset=base, access=mmap.ACCESS_READ)
    try:
        with memoryview(mm) as whole, whole[start - base :] as view:
            yield view
    finally:
        # A view kept alive elsewhere (an exception's traceback) keeps the mapping
        # until it is collected; unmapping then is all that is left to do.
        with contextlib.suppress(BufferError):
            mm.close()


def _fill(stream: IO[bytes], view: memoryview) -> int:
    """Read into ``view`` until it is full or the stream ends; return the bytes read."""
    got = 0
    readinto = getattr(stream, "readinto", None)
    while got < view.nbytes:
        if readinto is not None:
            n = readinto(view[got:])
        else:
            chunk = stream.read(view.nbytes - got)
            n = None if chunk is None else len(chunk)
            if n:
                view[got : got + n] = chunk
        if n is None:
            raise errors.InvalidArgument("upload cannot read a non-blocking stream")
        if n == 0:
            break
        got += n
    return got


# -- the job and its progress -----------------------------------------------------------


@dataclass
class _Job:
    client: Client
    bucket: str
    key: str
    headers: dict[str, str]
    content_type: str | None
    metadata: Mapping[str, str]
    parallel: int

    def info(self, size: int, headers: Mapping[str, str], crc: int) -> ObjectInfo:
        """What an upload of ``size`` bytes with this ``crc`` answered."""
        found = CaseInsensitiveDict(headers)
        checksums = _checksums(found)
        if "ChecksumCRC32C" in found:  # CompleteMultipartUpload's XML
            checksums.setdefault("crc32c", found["ChecksumCRC32C"])
        # The server checked the value we sent, so it holds even if it was not echoed.
        checksums.setdefault("crc32c", _b64(crc))
        return ObjectInfo(
            bucket=self.bucket,
            key=self.key,
            size=size,
            etag=found.get("ETag"),
            version_id=found.get("x-amz-version-id"),
            content_type=self.content_type,
            metadata=dict(self.metadata),
            checksums=checksums,
            checksum_type=found.get("ChecksumType")
            or found.get("x-amz-checksum-type")
            or "FULL_OBJECT",
        )


class _Reporter:
    """Calls ``progress(done, total)`` when ``done`` grows; retries never make it shrink."""

    def __init__(self, progress: Progress | None, total: int) -> None:
        self._progress = progress
        self.total = total
        self.done = 0
        self._last: tuple[int, int] | None = None

    def reached(self, done: int) -> None:
        if done > self.done:
            self.done = done
            self._call()

    def add(self, n: int) -> None:
        self.reached(self.done + n)

    def finish(self, size: int) -> None:
        self.done = self.total = size
        if self._last != (size, size):
            self._call()

    def _call(self) -> None:
        if self._progress is not None:
            self._last = (self.done, self.total)
            self._progress(self.done, self.total)


# -- one PUT ----------------------------------------------------------------------------


def _put_single(job: _Job, src: _Source, size: int, reporter: _Reporter) -> ObjectInfo:
    client = job.client
    if src.view is not None:
        info = client.put_object(
            job.bucket, job.key, src.view, content_type=job.content_type, metadata=job.metadata
        )
        return replace(info, checksum_type=info.checksum_type or "FULL_OBJECT")
    if src.file is not None:
        with _mapped(src.file, src.start, size) as view:
            crc = _crc(view)
        headers = {**job.headers, "x-amz-checksum-crc32c": _b64(crc)}
        if client.endpoint.scheme == "http":
            answer = put_file(
                client,
                job.bucket,
                job.key,
                src.file,
                offset=src.start,
                count=size,
                headers=headers,
                progress=reporter.reached,
            )
            return job.info(size, answer, crc)
        stream: IO[bytes] = src.file
    else:
        assert src.stream is not None
        stream = src.stream
        crc = _crc_of_stream(stream, src.start, size)
        headers = {**job.headers, "x-amz-checksum-crc32c": _b64(crc)}
    body = _Window(stream, src.start, size, reporter.reached)
    resp = client._transport.request(
        "PUT",
        operation="upload",
        bucket=job.bucket,
        key=job.key,
        headers=headers,
        body=cast(IO[bytes], body),
        content_length=size,
        payload_hash=UNSIGNED_PAYLOAD,
    )
    return job.info(size, resp.headers, crc)


def _crc_of_stream(stream: IO[bytes], start: int, size: int) -> int:
    """CRC32C of ``size`` bytes of a seekable stream from ``start``, through one small
    reused buffer; the stream is left at ``start``."""
    buf = bytearray(min(size, _READ_BLOCK))
    crc = 0
    left = size
    stream.seek(start)
    with memoryview(buf) as view:
        while left:
            n = _fill(stream, view[: min(left, view.nbytes)])
            if n == 0:
                raise SourceChangedError(f"the stream ended {left} bytes early")
            crc = _crc(view[:n], crc)
            left -= n
    stream.seek(start)
    return crc


class _Window:
    """Bytes ``start`` to ``start + size`` of a seekable stream, as a file that ends
    there (a file that grows meanwhile must not overrun Content-Length). Positions are
    relative to ``start``; ``on_read(pos)`` follows the reads."""

    def __init__(
        self, stream: IO[bytes], start: int, size: int, on_read: Callable[[int], None]
    ) -> None:
        self._stream = stream
        self._start = start
        self._size = size
        self._pos = 0
        self._on_read = on_read
        stream.seek(start)

    def read(self, n: int = -1) -> bytes:
        left = self._size - self._pos
        if n < 0 or n > left:
            n = left
        if n == 0:
            return b""
        data = self._stream.read(n)
        if not data:
            raise SourceChangedError(
                f"the stream ended {left} bytes early: it shrank while being uploaded"
            )
        self._pos += len(data)
        try:
            self._on_read(self._pos)
        except BaseException as e:
            # Through urllib3 and requests untouched, to be re-raised as it was.
            raise _CallbackError(e) from e
        return data

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        base = {os.SEEK_SET: 0, os.SEEK_CUR: self._pos, os.SEEK_END: self._size}[whence]
        self._pos = min(max(0, base + offset), self._size)
        self._stream.seek(self._start + self._pos)
        return self._pos


# -- multipart --------------------------------------------------------------------------


def _upload_multipart(
    job: _Job, src: _Source, parts: list[Part], reporter: _Reporter
) -> ObjectInfo:
    if src.stream is not None:
        buffers: list[bytearray] = []
        items = _stream_parts(src.stream, parts[0].length, parts, buffers)
        return _multipart(job, items, _recycle(buffers), reporter, expected=parts)
    if src.file is not None:
        size = parts[-1].offset + parts[-1].length
        with _mapped(src.file, src.start, size) as view:
            return _multipart_of_view(job, view, parts, reporter)
    assert src.view is not None
    return _multipart_of_view(job, src.view, parts, reporter)


def _multipart_of_view(
    job: _Job, view: memoryview, parts: list[Part], reporter: _Reporter
) -> ObjectInfo:
    """Parts as slices of ``view``: each is sent from the memory it is in."""
    items = ((p, view[p.offset : p.offset + p.length]) for p in parts)
    return _multipart(job, items, memoryview.release, reporter, expected=parts)


def _upload_unsized(job: _Job, src: _Source, part_size: int, reporter: _Reporter) -> ObjectInfo:
    """A stream of unknown size: one PUT if it ends within the first part, else parts."""
    assert src.stream is not None
    first = bytearray(part_size)
    with memoryview(first) as view:
        n = _fill(src.stream, view)
        if n < part_size:
            with view[:n] as data:
                info = job.client.put_object(
                    job.bucket,
                    job.key,
                    data,
                    content_type=job.content_type,
                    metadata=job.metadata,
                )
            return replace(info, checksum_type=info.checksum_type or "FULL_OBJECT")
    buffers = [first]
    items = _stream_parts(src.stream, part_size, None, buffers, filled=n)
    return _multipart(job, items, _recycle(buffers), reporter, expected=None)


def _stream_parts(
    stream: IO[bytes],
    part_size: int,
    plan: list[Part] | None,
    free: list[bytearray],
    *,
    filled: int | None = None,
) -> Iterator[tuple[Part, memoryview]]:
    """Parts read in order into buffers from ``free`` (new ones when it is empty).

    With a ``plan`` each part must fill its length; without one the stream is read
    until it ends. ``filled``: the first buffer in ``free`` already holds that many
    bytes.
    """
    number, offset = 1, 0
    while True:
        if plan is not None and number > len(plan):
            return
        if number > MAX_PARTS:
            raise errors.InvalidArgument(
                f"the stream is longer than {MAX_PARTS} parts of {part_size} bytes "
                "(S3's limit): pass a larger part_size"
            )
        want = plan[number - 1].length if plan is not None else part_size
        buf = free.pop() if free else bytearray(part_size)
        view = memoryview(buf)[:want]
        if filled is not None:
            n, filled = filled, None
        else:
            n = _fill(stream, view)
        if plan is not None and n < want:
            view.release()
            raise SourceChangedError(f"the stream ended {want - n} bytes early")
        if n == 0 and number > 1:
            view.release()
            return
        if n < want:
            with view:
                body = view[:n]
        else:
            body = view
        yield Part(number, offset, n), body
        if n < want:
            return
        number += 1
        offset += n


def _recycle(free: list[bytearray]) -> Callable[[memoryview], None]:
    def release(view: memoryview) -> None:
        buf = view.obj
        view.release()
        if isinstance(buf, bytearray):
            free.append(buf)

    return release


def _multipart(
    job: _Job,
    items: Iterator[tuple[Part, memoryview]],
    release: Callable[[memoryview], None],
    reporter: _Reporter,
    *,
    expected: list[Part] | None,
) -> ObjectInfo:
    client, bucket, key = job.client, job.bucket, job.key
    upload_id = create_multipart_upload(
        client,
        bucket,
        key,
        headers={
            **job.headers,
            # One CRC32C over the whole object, not a checksum of checksums
            # ("Checking object integrity": full object vs composite checksums).
            "x-amz-checksum-algorithm": "CRC32C",
            "x-amz-checksum-type": "FULL_OBJECT",
        },
    )
    try:
        done = _send_parts(job, upload_id, items, release, reporter)
        done.sort(key=lambda d: d[0].number)
        _check_parts([d[0] for d in done], expected, bucket, key)
        crc = 0
        for _, part_crc, length in done:
            crc = crc32c_combine(crc, part_crc, length)
        answer = complete_multipart_upload(
            client,
            bucket,
            key,
            upload_id,
            [d[0] for d in done],
            # The server recomputes the object's CRC32C and refuses a mismatch.
            headers={"x-amz-checksum-crc32c": _b64(crc), "x-amz-checksum-type": "FULL_OBJECT"},
        )
    except BaseException:
        try:
            abort_multipart_upload(client, bucket, key, upload_id)
        except Exception:
            log.warning(
                "upload: could not abort multipart upload %s (bucket %r, key %r); "
                "its parts stay until it is aborted",
                upload_id,
                bucket,
                key,
                exc_info=True,
            )
        raise
    return job.info(sum(d[2] for d in done), answer, crc)


def _send_parts(
    job: _Job,
    upload_id: str,
    items: Iterator[tuple[Part, memoryview]],
    release: Callable[[memoryview], None],
    reporter: _Reporter,
) -> list[tuple[CompletedPart, int, int]]:
    """Upload parts ``job.parallel`` at a time, taking the next item only when a worker
    is free (so a stream is read no faster than it is sent); return for each part what
    S3 answered, its CRC32C and its length. Progress is reported here, in the caller's
    thread."""
    done: list[tuple[CompletedPart, int, int]] = []
    in_flight: dict[Future[tuple[CompletedPart, int]], tuple[Part, memoryview]] = {}
    with ThreadPoolExecutor(job.parallel, thread_name_prefix="objsdk-upload") as pool:
        try:
            more = True
            while True:
                while more and len(in_flight) < job.parallel:
                    item = next(items, None)
                    if item is None:
                        more = False
                        break
                    part, body = item
                    future = pool.submit(_send_part, job, upload_id, part, body)
                    in_flight[future] = item
                if not in_flight:
                    return done
                finished, _ = wait(in_flight, return_when=FIRST_COMPLETED)
                for future in finished:
                    part, body = in_flight.pop(future)
                    release(body)
                    completed, crc = future.result()
                    done.append((completed, crc, part.length))
                    reporter.add(part.length)
        except BaseException:
            # Parts still on the wire finish (or fail) before the caller aborts, so none
            # lands after the abort (AbortMultipartUpload: parts being uploaded "might
            # or might not succeed").
            for future in in_flight:
                future.cancel()
            wait(in_flight)
            for _, body in in_flight.values():
                release(body)
            raise


def _send_part(
    job: _Job, upload_id: str, part: Part, body: memoryview
) -> tuple[CompletedPart, int]:
    crc = _crc(body)
    # PUT is idempotent: the transport re-sends a part whole on a broken connection or a
    # 5xx, under the client's retry policy.
    completed = upload_part(
        job.client, job.bucket, job.key, upload_id, part, body, checksum_crc32c=_b64(crc)
    )
    if not completed.checksum_crc32c:
        completed = replace(completed, checksum_crc32c=_b64(crc))
    return completed, crc


def _check_parts(
    parts: list[CompletedPart], expected: list[Part] | None, bucket: str, key: str
) -> None:
    """Every part answered with an ETag, numbered 1..N without gaps (and N as planned)."""
    numbers = [p.number for p in parts]
    want = len(expected) if expected is not None else len(parts)
    if numbers != list(range(1, want + 1)) or not all(p.etag for p in parts):
        raise errors.ProtocolError(
            f"parts {numbers} do not make up the object ({want} planned), or lack an ETag",
            operation="complete_multipart_upload",
            bucket=bucket,
            key=key,
        )
