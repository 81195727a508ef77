"""Upload sources: where :func:`~objsdk._transfer.upload.upload` reads an object's
bytes from, one strategy per kind of source behind one interface (:class:`Source`), as
s3transfer's upload input managers are.

* :class:`MemorySource`, bytes-like data (a ``BytesIO`` through its buffer): one PUT
  sent from the memory itself, and parts that are slices of it, so nothing is copied.
* :class:`FileSource`, a regular file (a path, or a file object with a descriptor):
  one PUT by ``Transport.send_file`` (over plain http ``sendfile(2)`` from the page
  cache to the socket, no byte copied into Python). Over plain http the parts go from
  the file to the socket with sendfile(2) too, each after its CRC32C is read through a
  small per-thread buffer, so no part is buffered at all; otherwise (TLS) each worker
  reads its own part with ``os.preadv`` into one of at most ``parallel + 1`` reused
  buffers (anonymous memory maps, :mod:`objsdk._io.buffers`), so reads run beside the
  sends. The file is read, never memory-mapped: a file truncated while it uploads (say
  by logrotate's copytruncate) is a :class:`~objsdk.SourceChangedError`, not a SIGBUS
  that kills the process, and so is a file whose size or mtime changed before
  completion.
* :class:`StreamSource`, any other file object that can seek: one PUT streamed by the
  transport, after a pass for its CRC32C; parts read in order into at most
  ``parallel + 1`` reused buffers.
* :class:`UnsizedStreamSource`, a file object that cannot seek: its first part read
  ahead, to learn whether one PUT holds it; then, like a stream, parts read in order
  until it ends.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import itertools
import os
import stat
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from typing import IO, BinaryIO, ClassVar, Protocol

from objsdk import errors
from objsdk._core.bytes_like import flat_view, is_bytes_like
from objsdk._core.checksums import crc32c
from objsdk._core.parts import Part
from objsdk._core.sizes import MAX_PARTS, MAX_SINGLE_PUT
from objsdk._core.streams import READ_BLOCK, SMALL_FILE_PUT, fill, refuse_text, stream_crc32c
from objsdk._io.buffers import PartBuffer, part_buffer
from objsdk._transfer.multipart import MultipartSession
from objsdk._transfer.progress import ProgressTracker
from objsdk.errors import SourceChangedError
from objsdk.models import ObjectInfo

__all__ = [
    "FileSource",
    "MemorySource",
    "Send",
    "Source",
    "StreamSource",
    "Target",
    "UnsizedStreamSource",
    "UploadSource",
    "open_source",
    "parts_until_the_end",
]

UploadSource = str | os.PathLike[str] | BinaryIO | bytes | bytearray | memoryview

# Sends a multipart upload's parts on its session.
Send = Callable[[MultipartSession], None]


class Target(Protocol):
    """The object a source's one PUT stores."""

    def put_bytes(self, data: memoryview) -> ObjectInfo:
        """PUT ``data``, sent from the memory it is in."""
        ...

    def put_file(
        self, file: IO[bytes], offset: int, count: int, crc: int, progress: Callable[[int], None]
    ) -> ObjectInfo:
        """PUT ``count`` bytes of ``file`` from ``offset`` (``Transport.send_file``),
        whose CRC32C is ``crc``; ``progress(done)`` as they go."""
        ...


class Source(ABC):
    """What an upload reads: ``size`` bytes (None: known only once a stream ends).

    ``any_order``: parts may be read in any order (an adaptive upload then sends its
    small last part first). :meth:`one_put` decides between one PUT (:meth:`put`) and
    parts (:meth:`sender`); after the parts, :meth:`check_unchanged` refuses a source
    that changed under them.
    """

    any_order: ClassVar[bool] = True

    def __init__(self, size: int | None) -> None:
        self.size = size

    def one_put(self, threshold: int, part_size: int) -> bool:
        """Whether one PUT sends it all: an empty source always (a multipart one gets no
        stored checksum from MinIO, and gains nothing), else one below ``threshold``
        and S3's single-PUT limit of 5 GiB ("PutObject")."""
        size = self.size
        return size is not None and (size == 0 or (size < threshold and size <= MAX_SINGLE_PUT))

    @abstractmethod
    def put(self, target: Target, tracker: ProgressTracker) -> ObjectInfo:
        """Send all of it in one PUT to ``target``, with its CRC32C."""

    @abstractmethod
    def sender(self, parts: Iterable[Part], longest: int, *, direct: bool) -> Send:
        """What sends ``parts`` (none longer than ``longest``) on a session, each read
        once; ``direct``: the transport can send a regular file's bytes itself
        (``Transport.direct_file_bodies``)."""

    def check_unchanged(self) -> None:
        """Raise :class:`~objsdk.SourceChangedError` if the source is known to have
        changed since it was opened."""
        # Only a file keeps a stamp to compare; memory and streams cannot tell.
        return None


@contextlib.contextmanager
def open_source(source: UploadSource, bucket: str, key: str) -> Iterator[Source]:
    """The strategy for ``source``; a file object is left at the end of what was read,
    a path's file is closed."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        with flat_view(source, "upload", bucket, key) as view:
            yield MemorySource(view)
    elif isinstance(source, (str, os.PathLike)):
        # A path that cannot be opened (missing, a directory, no permission) raises
        # Python's own OSError, as open() does (docs/errors.md, "Not objsdk errors").
        with open(source, "rb") as f:
            yield _file_source(f)
    elif isinstance(source, io.BytesIO):
        # Its buffer, not its bytes: getbuffer() shares the memory.
        start = source.tell()
        with source.getbuffer() as whole, whole[start:] as view:
            size = view.nbytes
            yield MemorySource(view)
        source.seek(start + size)
    elif not callable(getattr(source, "read", None)):
        # Any other object with the buffer protocol (array.array, numpy) is memory.
        if not is_bytes_like(source):
            raise errors.InvalidArgument(
                "upload source must be bytes-like, a path or a binary file object, got "
                f"{type(source).__name__} (bucket {bucket!r}, key {key!r})"
            )
        with flat_view(source, "upload", bucket, key) as view:
            yield MemorySource(view)
    else:
        _check_file_object(source, bucket, key)
        src = _file_source(source)
        yield src
        # One that cannot seek is left where reading it stopped.
        if not isinstance(src, UnsizedStreamSource):
            source.seek(src.start + src.size)


def _check_file_object(f: object, bucket: str, key: str) -> None:
    """Refuse a file object no byte can be read from (closed, or opened in text mode)
    before any request, naming it: its first read would fail deep in a part."""
    refuse_text(f, "upload source", bucket, key)
    if getattr(f, "closed", False) is True:
        raise errors.InvalidArgument(
            f"upload source is a closed file: {type(f).__name__} (bucket {bucket!r}, key {key!r})"
        )


def _file_source(f: IO[bytes]) -> FileSource | StreamSource | UnsizedStreamSource:
    try:
        seekable = f.seekable()
    except (AttributeError, OSError, ValueError):
        seekable = False
    if not seekable:
        return UnsizedStreamSource(f)
    start = f.tell()
    end = f.seek(0, os.SEEK_END)
    f.seek(start)
    size = max(0, end - start)
    try:
        st = os.fstat(f.fileno())
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return StreamSource(f, size, start)
    if stat.S_ISREG(st.st_mode):
        return FileSource(f, size, start, (st.st_size, st.st_mtime_ns))
    return StreamSource(f, size, start)


def parts_until_the_end(part_size: int) -> Iterator[Part]:
    """Parts of ``part_size``, one after another without end: the parts of a stream
    whose size is known only once it ends (which makes its last part shorter)."""
    for index in itertools.count():
        yield Part(index, index * part_size, (index + 1) * part_size)


# -- memory ------------------------------------------------------------------------------


class MemorySource(Source):
    """A flat ``view`` of the caller's memory, sent from where it is."""

    def __init__(self, view: memoryview) -> None:
        super().__init__(view.nbytes)
        self.view = view

    def put(self, target: Target, tracker: ProgressTracker) -> ObjectInfo:
        return target.put_bytes(self.view)

    def sender(self, parts: Iterable[Part], longest: int, *, direct: bool) -> Send:
        view = self.view
        # Slices of the caller's buffer: each part is sent from the memory it is in.
        slices = ((p, view[p.start : p.stop]) for p in parts)
        return lambda session: session.send_all(slices, memoryview.release)


# -- a regular file ----------------------------------------------------------------------


class FileSource(Source):
    """Bytes ``start`` to ``start + size`` of a regular ``file``, whose ``(size,
    mtime_ns)`` was ``stamp`` when it was opened."""

    size: int

    def __init__(self, file: IO[bytes], size: int, start: int, stamp: tuple[int, int]) -> None:
        super().__init__(size)
        self.file = file
        self.start = start
        self.stamp = stamp

    def put(self, target: Target, tracker: ProgressTracker) -> ObjectInfo:
        if self.size <= SMALL_FILE_PUT:
            data = self._read_whole()
            return target.put_bytes(data)
        return _put_stream(target, self.file, self.start, self.size, tracker)

    def _read_whole(self) -> memoryview:
        """A small file's bytes in one buffer: sent from memory (one read, one send on
        the transport's own connections) it costs less than a CRC32C pass, a rewind and a
        file body; its CRC32C and SHA-256 come from the very bytes sent."""
        view = memoryview(bytearray(self.size))
        self.file.seek(self.start)
        got = fill(self.file, view)
        if got != self.size:
            raise SourceChangedError(f"the file ended {self.size - got} bytes early")
        return view

    def sender(self, parts: Iterable[Part], longest: int, *, direct: bool) -> Send:
        if direct:
            return self._from_file(parts)
        # Each worker reads its own part (pread), so reads run in parallel with the
        # sends instead of one after another in this thread.
        fd, base = self.file.fileno(), self.start
        free: list[PartBuffer] = []
        empty = _empty_parts(parts, longest, free)

        def fill(part: Part, body: memoryview) -> None:
            _pread_all(fd, body, base + part.start)

        return lambda session: session.send_all(empty, _recycle(free), fill=fill)

    def _from_file(self, parts: Iterable[Part]) -> Send:
        """Parts sent from the file itself: no part buffers, no copy through Python. A
        part buffer is fresh memory the kernel must zero and map page by page, which on
        this route's loopback profile cost more client CPU than the bytes' own copies."""
        file = self.file
        fd, base = file.fileno(), self.start

        def crc_of(part: Part) -> int:
            return _crc_of_range(fd, base + part.start, part.length)

        def send(session: MultipartSession) -> None:
            try:
                session.send_file_parts(file, base, parts, crc_of)
            except errors.S3Error:
                # A part whose bytes changed after its CRC32C was read is refused by the
                # server: say what happened to the file, if it did.
                self.check_unchanged()
                raise

        return send

    def checksums(self, part: Part, *, md5: bool = False) -> tuple[int, str | None]:
        """The CRC32C of the file's bytes of ``part`` as they are now and, if asked,
        their MD5 (hex): what tells whether a part an earlier run stored still holds
        them."""
        digest = hashlib.md5(usedforsecurity=False) if md5 else None
        fd, base = self.file.fileno(), self.start
        view = memoryview(bytearray(min(part.length, READ_BLOCK)))
        crc = 0
        for at in range(part.start, part.stop, READ_BLOCK):
            chunk = view[: min(READ_BLOCK, part.stop - at)]
            _pread_all(fd, chunk, base + at)
            crc = crc32c(chunk, crc)
            if digest is not None:
                digest.update(chunk)
        return crc, None if digest is None else digest.hexdigest()

    def check_unchanged(self) -> None:
        """Refuse a file whose size or mtime moved since the upload began."""
        st = os.fstat(self.file.fileno())
        if (st.st_size, st.st_mtime_ns) != self.stamp:
            raise SourceChangedError(
                f"the file changed while being uploaded (size {self.stamp[0]} -> {st.st_size})"
            )


# Each sending thread's buffer for reading its parts' CRC32C.
_scratch = threading.local()


def _crc_of_range(fd: int, offset: int, length: int) -> int:
    """CRC32C of ``length`` bytes of ``fd`` from ``offset``, read through this thread's
    reused buffer (small, so the bytes are still in the CPU's cache when checksummed)."""
    view: memoryview | None = getattr(_scratch, "view", None)
    if view is None:
        view = _scratch.view = memoryview(bytearray(READ_BLOCK))
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


# -- a stream ----------------------------------------------------------------------------


class StreamSource(Source):
    """Any other file object that can seek: ``size`` bytes from ``start``, read in
    order."""

    size: int
    any_order = False

    def __init__(self, stream: IO[bytes], size: int, start: int) -> None:
        super().__init__(size)
        self.stream = stream
        self.start = start

    def put(self, target: Target, tracker: ProgressTracker) -> ObjectInfo:
        return _put_stream(target, self.stream, self.start, self.size, tracker)

    def sender(self, parts: Iterable[Part], longest: int, *, direct: bool) -> Send:
        self.stream.seek(self.start)
        free: list[PartBuffer] = []
        items = _stream_parts(self.stream, parts, longest, free, exact=True)
        return lambda session: session.send_all(items, _recycle(free))


class UnsizedStreamSource(Source):
    """A file object that cannot seek: read in order until it ends, its size known
    only then (``size`` None)."""

    any_order = False

    def __init__(self, stream: IO[bytes]) -> None:
        super().__init__(None)
        self.stream = stream
        # Its first part, read ahead by one_put, and how many bytes of it it held.
        self._head: tuple[PartBuffer, int] | None = None

    def one_put(self, threshold: int, part_size: int) -> bool:
        """One PUT if the stream ends within its first ``part_size`` bytes, whatever
        ``threshold`` (read ahead here, sent by :meth:`put` or first by :meth:`sender`,
        which must follow)."""
        first = part_buffer(part_size, populate=True)
        with memoryview(first) as view:
            self._head = (first, fill(self.stream, view))
        return self._head[1] < part_size

    def _take_head(self) -> tuple[PartBuffer, int]:
        head, self._head = self._head, None
        assert head is not None, "one_put reads the head first"
        return head

    def put(self, target: Target, tracker: ProgressTracker) -> ObjectInfo:
        first, n = self._take_head()
        with memoryview(first) as view, view[:n] as data:
            return target.put_bytes(data)

    def sender(self, parts: Iterable[Part], longest: int, *, direct: bool) -> Send:
        """``parts``: as many as it takes (:func:`parts_until_the_end`)."""
        first, filled = self._take_head()
        free = [first]  # recycled for the parts after it
        items = _stream_parts(self.stream, parts, longest, free, exact=False, filled=filled)
        return lambda session: session.send_all(items, _recycle(free))


def _stream_parts(
    stream: IO[bytes],
    parts: Iterable[Part],
    longest: int,
    free: list[PartBuffer],
    *,
    exact: bool,
    filled: int | None = None,
) -> Iterator[tuple[Part, memoryview]]:
    """``parts`` read in order into buffers of ``longest`` bytes from ``free`` (new ones
    when it is empty).

    ``exact``: each part must fill its length; else the stream is read until it ends,
    its last part the shorter. ``filled``: the first buffer in ``free`` already holds
    that many bytes.
    """
    for part in parts:
        if part.index >= MAX_PARTS:
            raise errors.InvalidArgument(
                f"the stream is longer than {MAX_PARTS} parts of {longest} bytes "
                "(S3's limit): pass a larger part_size"
            )
        want = part.length
        buf = free.pop() if free else part_buffer(longest, populate=True)
        view = memoryview(buf)[:want]
        if filled is not None:
            n, filled = filled, None
        else:
            n = fill(stream, view)
        if exact and n < want:
            view.release()
            raise SourceChangedError(
                f"the source ended {want - n} bytes early: it shrank while being uploaded"
            )
        if n == 0 and part.index > 0:
            view.release()
            return
        if n < want:
            with view:
                body = view[:n]
        else:
            body = view
        yield Part(part.index, part.start, part.start + n), body
        if n < want:
            return


def _recycle(free: list[PartBuffer]) -> Callable[[memoryview], None]:
    def release(view: memoryview) -> None:
        buf = view.obj
        view.release()
        if isinstance(buf, PartBuffer):
            free.append(buf)

    return release


# -- reading -----------------------------------------------------------------------------


def _put_stream(
    target: Target, stream: IO[bytes], start: int, size: int, tracker: ProgressTracker
) -> ObjectInfo:
    """One PUT of ``size`` bytes of a seekable ``stream`` from ``start``, its CRC32C
    read first (the server checks it on arrival)."""
    crc = stream_crc32c(stream, start, size)
    return target.put_file(stream, start, size, crc, tracker.reached)
