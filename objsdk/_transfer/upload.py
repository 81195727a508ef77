"""``upload``: a file, buffer or stream to one object, by the cheapest safe route.

Below ``multipart_threshold`` (and S3's 5 GiB single-PUT limit) one PUT:

* a regular file: ``Transport.send_file`` (over plain http, ``sendfile(2)`` from the
  page cache to the socket, no byte copied into Python);
* another seekable stream: streamed by the transport;
* bytes-like data (``BytesIO`` too, through its buffer): sent from its own memory.

Above it, a multipart upload (:class:`~objsdk._transfer.multipart.MultipartSession`)
with ``parallel`` parts in flight. The parts of a buffer are slices of it, so nothing is
copied. Over plain http the parts of a regular file go from the file to the socket
with sendfile(2), each after its CRC32C is read through a small per-thread buffer, so
no part is buffered at all; otherwise (TLS) a file or stream is read part by part into
at most ``parallel + 1`` reused buffers (anonymous memory maps,
:mod:`objsdk._io.buffers`). The file itself is read, never memory-mapped: a file
truncated while it uploads (say by logrotate's copytruncate) is a
:class:`~objsdk.SourceChangedError`, not a SIGBUS that kills the process, and a file
whose size or mtime changed before completion is refused the same way. Any failure,
an exception from ``progress`` or a ``KeyboardInterrupt`` aborts the upload, so no
parts are left behind, and is re-raised.

Every route stores a full-object CRC32C (``x-amz-checksum-crc32c``, "Checking object
integrity" in the S3 user guide), which the server checks on arrival and
:class:`~objsdk.ObjectFile` checks again on a full read.
"""

from __future__ import annotations

import contextlib
import io
import os
import stat
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import IO, BinaryIO

from objsdk import errors
from objsdk._core.addressing import check_bucket, check_count, check_key
from objsdk._core.checksums import crc32c, encode_crc32c
from objsdk._core.headers import object_headers, upload_info
from objsdk._core.parts import (
    Part,
    adaptive_upload_part_size,
    plan_upload,
    plan_upload_probed,
    upload_part_size,
)
from objsdk._core.sizes import (
    ADAPTIVE_PART_SIZE,
    ADAPTIVE_PROBE,
    DEFAULT_MULTIPART_THRESHOLD,
    MAX_PARTS,
    MAX_SINGLE_PUT,
    MiB,
)
from objsdk._io.buffers import PartBuffer, part_buffer
from objsdk._s3.objects import put_bytes
from objsdk._transfer.multipart import MultipartSession
from objsdk._transfer.progress import Progress, ProgressTracker
from objsdk._transfer.upload_plan import CutMemory, UploadPlan
from objsdk._transport.base import Transport
from objsdk._transport.retry import counting_failures
from objsdk.errors import SourceChangedError
from objsdk.models import ObjectInfo, UploadInfo

__all__ = ["UploadSource", "upload"]

# Reads of a stream that is not a file, to checksum it before sending it.
_READ_BLOCK = MiB

UploadSource = str | os.PathLike[str] | BinaryIO | bytes | bytearray | memoryview


def upload(
    transport: Transport,
    bucket: str,
    key: str,
    source: UploadSource,
    *,
    part_size: int | None = None,
    parallel: int | None = None,
    content_type: str | None = None,
    metadata: Mapping[str, str] | None = None,
    progress: Progress | None = None,
    multipart_threshold: int = DEFAULT_MULTIPART_THRESHOLD,
    cut_memory: CutMemory | None = None,
    extra_headers: Mapping[str, str] | None = None,
) -> UploadInfo:
    """Store ``source`` under ``key``: one PUT below ``multipart_threshold``, else a
    multipart upload of ``part_size`` parts, ``parallel`` at a time (``None``, the
    default: one at first, more while the aggregate rate keeps rising; unless
    ``part_size`` is given, from a file or memory a 1 MiB last part sent first, alone,
    then whole rounds of 16 parts of 8 to 16 MiB where the object holds them, from a
    stream parts of 8 MiB; a fixed ``parallel`` defaults to 16 MiB parts).

    ``source`` is a path, a binary file object (read from its position to its end,
    and left at its end), or bytes-like data. ``progress(done, total)`` follows the
    contract of :mod:`objsdk._transfer.progress`, called in the calling thread;
    ``total`` is None while the size of a stream is unknown. The object is sent with a
    full-object CRC32C, reported in ``checksums["crc32c"]`` once the service's answer
    confirms it stored it (never merely because it was sent). Keep ``parallel`` within
    the client's ``max_pool_connections`` so connections are reused.

    An adaptive upload whose part's connection breaks sends the parts it has not
    handed out yet in parts of 5 MiB, and so does the next one given the same
    ``cut_memory`` (see :mod:`objsdk._transfer.upload_plan`). The answer tells how many
    parts there were, how many were in flight at the end, and how often a broken
    connection made a part (or the PUT) go again. ``cache_control``,
    ``content_encoding`` and ``storage_class`` are stored with the object.
    """
    check_bucket(bucket)
    check_key(key)
    # extra_headers (Cache-Control, storage class...) go with the PUT or the Create.
    headers = {**object_headers(bucket, key, content_type, metadata), **(extra_headers or {})}
    if parallel is not None:
        check_count("parallel", parallel, 1, bucket, key)
    check_count("multipart_threshold", multipart_threshold, 0, bucket, key)
    # Adaptive with parts of our choosing: from files and memory a small probe part
    # first, then parts sized by the object (_upload_multipart); from a stream 8 MiB,
    # so that the level has parts to climb with.
    probed = parallel is None and part_size is None
    if part_size is not None:
        upload_part_size(None, part_size)  # refuses sizes outside S3's limits
    elif parallel is None:
        part_size = ADAPTIVE_PART_SIZE
    job = _Job(transport, bucket, key, headers, content_type, dict(metadata or {}), parallel)
    with _open_source(source, bucket, key) as src, counting_failures() as failures:
        size = src.size
        tracker = ProgressTracker(progress, size)
        if size is None:
            info = _upload_unsized(job, src, upload_part_size(None, part_size), tracker)
        elif size == 0 or (size < multipart_threshold and size <= MAX_SINGLE_PUT):
            # An empty object is one PUT whatever the threshold: a multipart one gets
            # no stored checksum from MinIO, and gains nothing.
            info = _put_single(job, src, size, tracker)
        else:
            info = _upload_multipart(job, src, size, part_size, probed, tracker, cut_memory)
        tracker.finish(info.size or 0)
        if isinstance(info, UploadInfo):
            return info
        return UploadInfo.of(info, parts=1, parallel=1, cuts=failures.count)  # one PUT


# -- sources ----------------------------------------------------------------------------


@dataclass
class _Source:
    """What to upload: a regular ``file`` (bytes ``start`` to ``start + size``), a
    ``view`` of memory, or any other ``stream`` (``size`` None if it cannot seek)."""

    size: int | None
    start: int = 0
    file: IO[bytes] | None = None
    view: memoryview | None = None
    stream: IO[bytes] | None = None
    stamp: tuple[int, int] | None = None  # a file's (size, mtime_ns) when it was opened


@contextlib.contextmanager
def _open_source(source: UploadSource, bucket: str, key: str) -> Iterator[_Source]:
    if isinstance(source, (bytes, bytearray, memoryview)):
        with _flat(source, bucket, key) as view:
            yield _Source(view.nbytes, view=view)
    elif isinstance(source, (str, os.PathLike)):
        try:
            f = open(source, "rb")  # noqa: SIM115 - closed below
        except OSError as e:
            raise errors.InvalidArgument(
                f"cannot read {os.fspath(source)!r}: {e.strerror} (bucket {bucket!r}, key {key!r})"
            ) from e
        with f:
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


def _file_source(f: IO[bytes]) -> _Source:
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
        st = os.fstat(f.fileno())
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return _Source(size, start, stream=f)
    if stat.S_ISREG(st.st_mode):
        return _Source(size, start, file=f, stamp=(st.st_size, st.st_mtime_ns))
    return _Source(size, start, stream=f)


def _check_unchanged(src: _Source) -> None:
    """Refuse a file whose size or mtime moved since the upload began."""
    if src.file is None or src.stamp is None:
        return
    st = os.fstat(src.file.fileno())
    if (st.st_size, st.st_mtime_ns) != src.stamp:
        raise SourceChangedError(
            f"the file changed while being uploaded (size {src.stamp[0]} -> {st.st_size})"
        )


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


@dataclass
class _Job:
    transport: Transport
    bucket: str
    key: str
    headers: dict[str, str]
    content_type: str | None
    metadata: dict[str, str]
    parallel: int | None

    def put_bytes(self, data: memoryview) -> ObjectInfo:
        info = put_bytes(
            self.transport,
            self.bucket,
            self.key,
            data,
            headers=self.headers,
            content_type=self.content_type,
            metadata=self.metadata,
        )
        if not info.checksums:
            return info
        return replace(info, checksum_type=info.checksum_type or "FULL_OBJECT")

    def session(
        self,
        tracker: ProgressTracker,
        part_size: int,
        probe: int | None = None,
        on_cut: Callable[[], None] | None = None,
    ) -> MultipartSession:
        return MultipartSession(
            self.transport,
            self.bucket,
            self.key,
            headers=self.headers,
            content_type=self.content_type,
            metadata=self.metadata,
            parallel=self.parallel,
            part_size=part_size,
            progress=tracker,
            probe=probe,
            on_cut=on_cut,
        )


# -- one PUT ----------------------------------------------------------------------------


def _put_single(job: _Job, src: _Source, size: int, tracker: ProgressTracker) -> ObjectInfo:
    if src.view is not None:
        return job.put_bytes(src.view)
    stream = src.file or src.stream
    assert stream is not None
    crc = _crc_of_stream(stream, src.start, size)
    answer = job.transport.send_file(
        job.bucket,
        job.key,
        stream,
        offset=src.start,
        count=size,
        headers={**job.headers, "x-amz-checksum-crc32c": encode_crc32c(crc)},
        progress=tracker.reached,
    )
    return upload_info(job.bucket, job.key, size, answer, job.content_type, job.metadata)


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
            crc = crc32c(view[:n], crc)
            left -= n
    stream.seek(start)
    return crc


# -- multipart --------------------------------------------------------------------------


def _upload_multipart(
    job: _Job,
    src: _Source,
    size: int,
    part_size: int | None,
    probed: bool,
    tracker: ProgressTracker,
    cut_memory: CutMemory | None = None,
) -> UploadInfo:
    probe: int | None = None
    plan: UploadPlan | None = None
    if probed and src.stream is None and part_size is not None:
        # Files and memory are read in any order: the small last part goes first.
        part_size = adaptive_upload_part_size(size, ADAPTIVE_PROBE)
        parts = plan_upload_probed(size, part_size, ADAPTIVE_PROBE)
        if parts[0].index != 0:
            probe = parts[0].length
            plan = UploadPlan(parts[0], parts[1:], cut_memory)
    else:
        parts = plan_upload(size, part_size)
    longest = max(p.length for p in parts)
    todo: Iterable[Part] = parts if plan is None else plan

    def multipart(send: Callable[[MultipartSession], None], size_of_parts: int) -> UploadInfo:
        if plan is None:
            return _multipart(job, send, tracker, len(parts), size, src, size_of_parts)
        try:  # the plan's count is known at the end; its parts must cover the object
            return _multipart(job, send, tracker, None, size, src, size_of_parts, probe, plan.cut)
        finally:
            plan.finish()

    if src.view is not None:
        view = src.view
        # Slices of the caller's buffer: each part is sent from the memory it is in.
        slices: Iterator[tuple[Part, memoryview]] = ((p, view[p.start : p.stop]) for p in todo)
        return multipart(lambda session: session.send_all(slices, memoryview.release), longest)
    if src.file is not None and job.transport.direct_file_bodies:
        return multipart(_from_file(src, todo), longest)
    free: list[PartBuffer] = []
    if src.file is not None:
        # A regular file: each worker reads its own part (pread), so reads run in
        # parallel with the sends instead of one after another in this thread.
        fd, base = src.file.fileno(), src.start
        empty = _empty_parts(todo, longest, free)

        def fill(part: Part, body: memoryview) -> None:
            _pread_all(fd, body, base + part.start)

        return multipart(
            lambda session: session.send_all(empty, _recycle(free), fill=fill), longest
        )
    stream = src.stream
    assert stream is not None
    stream.seek(src.start)
    items = _stream_parts(stream, parts[0].length, parts, free)
    return multipart(lambda session: session.send_all(items, _recycle(free)), parts[0].length)


def _from_file(src: _Source, parts: Iterable[Part]) -> Callable[[MultipartSession], None]:
    """Parts sent from the file itself: no part buffers, no copy through Python. A
    part buffer is fresh memory the kernel must zero and map page by page, which on
    this route's loopback profile cost more client CPU than the bytes' own copies."""
    file = src.file
    assert file is not None
    fd, base = file.fileno(), src.start

    def crc_of(part: Part) -> int:
        return _crc_of_range(fd, base + part.start, part.length)

    def send(session: MultipartSession) -> None:
        try:
            session.send_file_parts(file, base, parts, crc_of)
        except errors.S3Error:
            # A part whose bytes changed after its CRC32C was read is refused by the
            # server: say what happened to the file, if it did.
            _check_unchanged(src)
            raise

    return send


# Each sending thread's buffer for reading its parts' CRC32C.
_scratch = threading.local()


def _crc_of_range(fd: int, offset: int, length: int) -> int:
    """CRC32C of ``length`` bytes of ``fd`` from ``offset``, read through this thread's
    reused buffer (small, so the bytes are still in the CPU's cache when checksummed)."""
    view: memoryview | None = getattr(_scratch, "view", None)
    if view is None:
        view = _scratch.view = memoryview(bytearray(_READ_BLOCK))
    crc = 0
    done = 0
    while done < length:
        chunk = view[: min(length - done, view.nbytes)]
        _pread_all(fd, chunk, offset + done)
        crc = crc32c(chunk, crc)
        done += chunk.nbytes
    return crc


def _empty_parts(
    parts: Iterable[Part], longest: int, free: list[PartBuffer]
) -> Iterator[tuple[Part, memoryview]]:
    """Each part with a (reused) buffer of ``longest`` bytes, to be filled by whoever
    sends it."""
    for part in parts:
        buf = free.pop() if free else part_buffer(longest, populate=True)
        yield part, memoryview(buf)[: part.length]


# Reads straight into a buffer (Linux, the BSDs, macOS 11+).
_preadv: Callable[[int, list[memoryview], int], int] | None = getattr(os, "preadv", None)


def _pread_all(fd: int, view: memoryview, offset: int) -> None:
    """Fill ``view`` from ``fd`` at ``offset``; a file that ends first has shrunk."""
    got = 0
    while got < len(view):
        if _preadv is not None:
            n = _preadv(fd, [view[got:]], offset + got)
        else:  # pragma: no cover - platforms without preadv: one copy more
            data = os.pread(fd, len(view) - got, offset + got)
            n = len(data)
            view[got : got + n] = data
        if n == 0:
            raise SourceChangedError(
                f"the file ended {len(view) - got} bytes early: it shrank while being uploaded"
            )
        got += n


def _upload_unsized(
    job: _Job, src: _Source, part_size: int, tracker: ProgressTracker
) -> ObjectInfo:
    """A stream of unknown size: one PUT if it ends within the first part, else parts."""
    assert src.stream is not None
    first = part_buffer(part_size, populate=True)
    with memoryview(first) as view:
        n = _fill(src.stream, view)
        if n < part_size:
            with view[:n] as data:
                return job.put_bytes(data)
    free = [first]
    items = _stream_parts(src.stream, part_size, None, free, filled=n)
    return _multipart(
        job,
        lambda session: session.send_all(items, _recycle(free)),
        tracker,
        None,
        None,
        src,
        part_size,
    )


def _multipart(
    job: _Job,
    send: Callable[[MultipartSession], None],
    tracker: ProgressTracker,
    expected: int | None,
    size: int | None,
    src: _Source,
    part_size: int,
    probe: int | None = None,
    on_cut: Callable[[], None] | None = None,
) -> UploadInfo:
    """One multipart upload whose parts ``send(session)`` sends; aborted on any failure."""
    cuts: list[None] = []

    def cut() -> None:  # called by the sending threads (list.append is atomic)
        cuts.append(None)
        if on_cut is not None:
            on_cut()

    session = job.session(tracker, part_size, probe, cut)
    session.start()
    try:
        send(session)
        _check_unchanged(src)
        total = size if size is not None else tracker.done
        info = session.complete(expected_parts=expected, size=total)
    except BaseException:
        session.abort()
        raise
    level = session.level.target() if session.level is not None else job.parallel or 1
    return UploadInfo.of(info, parts=session.parts, parallel=level, cuts=len(cuts))


def _stream_parts(
    stream: IO[bytes],
    part_size: int,
    plan: list[Part] | None,
    free: list[PartBuffer],
    *,
    filled: int | None = None,
) -> Iterator[tuple[Part, memoryview]]:
    """Parts read in order into buffers from ``free`` (new ones when it is empty).

    With a ``plan`` each part must fill its length; without one the stream is read
    until it ends. ``filled``: the first buffer in ``free`` already holds that many
    bytes.
    """
    index, offset = 0, 0
    while True:
        if plan is not None and index >= len(plan):
            return
        if index >= MAX_PARTS:
            raise errors.InvalidArgument(
                f"the stream is longer than {MAX_PARTS} parts of {part_size} bytes "
                "(S3's limit): pass a larger part_size"
            )
        want = plan[index].length if plan is not None else part_size
        buf = free.pop() if free else part_buffer(part_size, populate=True)
        view = memoryview(buf)[:want]
        if filled is not None:
            n, filled = filled, None
        else:
            n = _fill(stream, view)
        if plan is not None and n < want:
            view.release()
            raise SourceChangedError(
                f"the source ended {want - n} bytes early: it shrank while being uploaded"
            )
        if n == 0 and index > 0:
            view.release()
            return
        if n < want:
            with view:
                body = view[:n]
        else:
            body = view
        yield Part(index, offset, offset + n), body
        if n < want:
            return
        index += 1
        offset += n


def _recycle(free: list[PartBuffer]) -> Callable[[memoryview], None]:
    def release(view: memoryview) -> None:
        buf = view.obj
        view.release()
        if isinstance(buf, PartBuffer):
            free.append(buf)

    return release
