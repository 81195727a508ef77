"""``ObjectFile``: a resilient, seekable, zero-copy file over an object's GET stream.

The network side is a :class:`~objsdk._io.range_reader.RangeReader` (one pinned GET that
resumes where it broke) or, for sequential reads with ``readahead``, a
:class:`~objsdk._io.readahead.PartStream` of parts fetched in parallel. This class adds
what a Python file needs on top: buffering, ``seek``/``tell``, ``readline``, pickling,
and end-to-end verification of a full pass against the stored checksum.

Copies: ``readinto`` receives straight into the caller's buffer; ``read(n)`` collects
network chunks as memoryviews and joins them once, and returns a network chunk
untouched when one chunk is the whole answer.
"""

from __future__ import annotations

import io
import threading
from collections.abc import Callable, Mapping
from operator import methodcaller
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from objsdk import errors
from objsdk._core.addressing import check_bucket, check_count, check_key
from objsdk._core.pin import VersionPin, pin_for
from objsdk._core.sizes import (
    DEFAULT_CHUNK_SIZE,
    DEFAULT_READAHEAD_PART_SIZE,
)
from objsdk._io.buffers import PartBuffer
from objsdk._io.callbacks import weakly
from objsdk._io.lines import Lines
from objsdk._io.range_reader import DEFAULT_MAX_RESUME, RangeReader
from objsdk._io.read_source import ReadSource
from objsdk._io.read_stats import ReadStats
from objsdk._io.verify import PassVerifier, info_checksum
from objsdk._transport.base import Transport
from objsdk.models import ObjectInfo

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer as Buffer

__all__ = ["ObjectFile", "ReadStats"]

T = TypeVar("T")


class HasTransport(Protocol):
    """What ``ObjectFile`` needs of a client: its transport (``Client`` is one)."""

    @property
    def transport(self) -> Transport: ...


class ObjectFile(Lines, io.BufferedIOBase):
    """A read-only, seekable binary file over one object in a bucket.

    Lazy: nothing is sent until the first read (or ``size``). Pinned: the first answer's
    ETag is sent as ``If-Match`` on every later request, so all bytes come from one
    version; if the object changes, :class:`~objsdk.ObjectChangedError` is raised. A
    broken stream is resumed from the next undelivered byte up to ``max_resume``
    consecutive failures (:class:`~objsdk.ResumeLimitError` after that), or for as long
    as ``max_stall`` seconds without progress allow, when given. With
    ``verify``, a full pass from byte 0 to the end is checked against the object's
    stored checksum (:class:`~objsdk.IntegrityError` on mismatch). With ``readahead=N``,
    sequential reading switches to N threads fetching the next ``part_size`` parts;
    ``readahead=0`` is one stream; ``None`` (the default) measures one stream, then
    reads more parts ahead while the rate keeps rising and drops back when it does not
    (``stats.readahead`` tells what it chose). ``pin``: the ObjectInfo ``head_object``
    returned (or a VersionPin): the file reads that version from its first request, and
    knows its size and stored checksums without a HEAD of its own.

    Picklable: a copy reopens lazily at the same position and version. Thread-safe like
    ``io.BufferedReader``: each call holds a lock, so two threads sharing one file get
    whole, non-overlapping reads (whose order between them is theirs to arrange).
    """

    def __init__(
        self,
        client: HasTransport,
        bucket: str,
        key: str,
        *,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        max_resume: int = DEFAULT_MAX_RESUME,
        version_id: str | None = None,
        verify: bool = True,
        readahead: int | None = None,
        part_size: int = DEFAULT_READAHEAD_PART_SIZE,
        pin: ObjectInfo | VersionPin | None = None,
        max_stall: float | None = None,
    ) -> None:
        super().__init__()
        check_bucket(bucket)
        check_key(key)
        check_count("chunk_size", chunk_size, 1, bucket, key)
        check_count("max_resume", max_resume, 0, bucket, key)
        if readahead is not None:
            check_count("readahead", readahead, 0, bucket, key)
        check_count("part_size", part_size, 1, bucket, key)
        self._client = client
        self._transport = client.transport
        self.bucket = bucket
        self.key = key
        self.chunk_size = chunk_size
        self.max_resume = max_resume
        self.verify = verify
        self.part_size = part_size
        self.stats = ReadStats()
        # Weakly: no callback keeps this file alive (see objsdk._io.callbacks).
        observe = weakly(self._observe) if verify else None
        self._reader = RangeReader(
            self._transport,
            bucket,
            key,
            pin=pin_for(bucket, key, version_id, pin),
            max_resume=max_resume,
            checksum_mode=verify,
            observer=observe,
            on_start=weakly(self._on_start) if verify else None,
            stats=self.stats,
            max_stall=max_stall,
        )
        # What HEAD said (its checksums verify a pass read ahead in parts).
        self._head_info = pin if isinstance(pin, ObjectInfo) else None
        self._source = ReadSource(
            self._reader,
            readahead=readahead,
            part_size=part_size,
            stats=self.stats,
            size=weakly(self._current_size),
            observer=observe,
            from_start=weakly(self._prime),
        )
        # _pos: the caller's position. Received but undelivered bytes sit in
        # _tail[_tail_off:] at _pos; _recv_pos is the next byte to take from the network
        # (== _pos + buffered bytes, outside a read call that is collecting chunks).
        self._pos = 0
        self._recv_pos = 0
        self._tail: bytes | memoryview = b""
        self._tail_off = 0
        # Iteration's lines: the rest of the tail's complete lines, last first. They are
        # valid while _lines_gen == _tail_gen: everything but taking a line that moves
        # the tail or the position in it counts one more in _tail_gen.
        self._tail_gen = 0
        self._lines: list[bytes] = []
        self._lines_gen = -1
        self._verifier = PassVerifier(bucket, key, self.stats)
        self._lock = threading.Lock()

    # The pin, as the first answer set it.
    @property
    def etag(self) -> str | None:
        """The ETag every request is pinned to (None until the first answer)."""
        return self._reader.pin.etag

    @property
    def version_id(self) -> str | None:
        return self._reader.pin.version_id

    @property
    def reached(self) -> bool:
        """Whether the caller has read from this file's endpoint before (a dataset sets
        it on the shards after its first). Then a request that cannot connect before
        the first answer is an outage, resumed within ``max_resume`` or ``max_stall``
        like a broken stream; by default it raises :class:`~objsdk.ConnectError` at
        once (after the transport's connect retries): the endpoint is not reached."""
        return self._reader.reached

    @reached.setter
    def reached(self, value: bool) -> None:
        self._reader.reached = value

    def __repr__(self) -> str:
        return f"<ObjectFile bucket={self.bucket!r} key={self.key!r} pos={self._pos}>"

    # -- io.IOBase plumbing ------------------------------------------------------------

    def readable(self) -> bool:
        self._check_open()
        return True

    def seekable(self) -> bool:
        self._check_open()
        return True

    def writable(self) -> bool:
        self._check_open()
        return False

    def _check_open(self) -> None:
        if self.closed:
            raise ValueError("I/O operation on closed file.")

    def close(self) -> None:
        with self._lock:
            if not self.closed:
                self._source.close()
                self._set_tail(b"", 0)
                self._lines = []
            super().close()

    def __reduce__(self) -> tuple[Any, ...]:
        # Reopen lazily in the unpickling process, pinned to the same version.
        state = {
            "chunk_size": self.chunk_size,
            "max_resume": self.max_resume,
            "verify": self.verify,
            "readahead": self._source.readahead,
            "part_size": self.part_size,
            "max_stall": self._reader.max_stall,
            "reached": self._reader.reached,
        }
        pin = self._reader.pin
        return (_restore, (self._client, self.bucket, self.key, state, pin, self._pos, self.closed))

    # -- size, position ----------------------------------------------------------------

    @property
    def size(self) -> int:
        """The object's size in bytes (asks the server with HEAD if not known yet)."""
        if self._reader.size is None:
            self._check_open()
            self._head_info = self._reader.head()
        assert self._reader.size is not None
        return self._reader.size

    def _current_size(self) -> int:
        return self.size

    def tell(self) -> int:
        self._check_open()
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        with self._lock:
            return self._seek(offset, whence)

    def _seek(self, offset: int, whence: int) -> int:
        self._check_open()
        if whence == io.SEEK_SET:
            if offset < 0:
                raise errors.InvalidArgument(
                    f"negative seek position {offset} (bucket {self.bucket!r}, key {self.key!r})"
                )
            target = offset
        # Relative seeks before the start stop at 0, as io.BytesIO does.
        elif whence == io.SEEK_CUR:
            target = max(0, self._pos + offset)
        elif whence == io.SEEK_END:
            target = max(0, self.size + offset)
        else:
            raise errors.InvalidArgument(
                f"seek whence must be 0, 1 or 2, got {whence!r} "
                f"(bucket {self.bucket!r}, key {self.key!r})"
            )
        delta = target - self._pos
        if 0 <= delta <= len(self._tail) - self._tail_off:
            self._tail_off += delta  # free: already received
            self._tail_gen += 1
        else:
            self._set_tail(b"", 0)
            self._source.seek(target)
            self._recv_pos = target
        self._pos = target
        return target

    # -- reading -----------------------------------------------------------------------

    def _resync(self) -> None:
        """After a read raised: forget what it had received but not delivered.

        The caller's position is the truth; the next read starts again from it (the ETag
        pin makes re-fetching those bytes safe), so nothing is skipped or repeated.
        """
        self._source.drop()
        self._set_tail(b"", 0)
        self._recv_pos = self._pos

    def read(self, size: int | None = -1) -> bytes:
        # Fast path: small reads (tarfile asks for 10 KiB at a time) served from the
        # buffered network chunk with one slice, the one copy. A closed file has an
        # empty buffer, so it always takes the checked path below. Another thread's
        # call in progress sends this one down the locked path too.
        if size is not None and size > 0 and self._lock.acquire(False):
            try:
                start = self._tail_off
                end = start + size
                if end <= len(self._tail):
                    self._tail_off = end
                    self._tail_gen += 1
                    self._pos += size
                    self.stats.bytes_delivered += size
                    # bytes(bytes) is the same object; a read-ahead part view is copied.
                    return bytes(self._tail[start:end])
            finally:
                self._lock.release()
        return self._guard(self._read, size)

    def _guard(self, op: Callable[[Any], T], arg: Any) -> T:
        """Run a read under the lock: refuse on a closed file, resync if it raises, and
        recycle read-ahead buffers no longer referenced once it is over."""
        with self._lock:
            self._check_open()
            try:
                return op(arg)
            except BaseException:
                self._resync()
                raise
            finally:
                self._source.settle(self._tail)

    def _read(self, size: int | None = -1) -> bytes:
        if size is None or size < 0:
            return self._read_all()
        chunks: list[bytes | memoryview] = []
        got = self._take_tail(size, chunks)
        if got < size:
            self._source.expect(size - got)
        while got < size:
            need = size - got
            if need >= self.chunk_size:
                # Big reads go straight from the socket into the chunk we return.
                data = self._net(methodcaller("read", need), b"")
                if not data:
                    break
                chunks.append(data)
                got += len(data)
            elif self._fill_tail():
                got += self._take_tail(need, chunks)
            else:
                break
        return self._deliver(chunks, got)

    def read1(self, size: int = -1) -> bytes:
        return self._guard(self._read1, size)

    def _read1(self, size: int = -1) -> bytes:
        limit = size if size >= 0 else self.chunk_size
        chunks: list[bytes | memoryview] = []
        got = self._take_tail(limit, chunks)
        if not got and limit:
            if limit >= self.chunk_size:
                data = self._net(methodcaller("read1", limit), b"")
                chunks.append(data)
                got = len(data)
            elif self._fill_tail():
                got = self._take_tail(limit, chunks)
        return self._deliver(chunks, got)

    def readinto(self, b: Buffer) -> int:
        return self._guard(self._readinto_all, b)

    def readinto1(self, b: Buffer) -> int:
        return self._guard(self._readinto_one, b)

    def _readinto_all(self, b: Buffer) -> int:
        return self._readinto_view(b, one=False)

    def _readinto_one(self, b: Buffer) -> int:
        return self._readinto_view(b, one=True)

    def _readinto_view(self, b: Buffer, *, one: bool) -> int:
        with memoryview(b) as outer, outer.cast("B") as view:
            n = min(len(view), len(self._tail) - self._tail_off)
            if n:
                view[:n] = memoryview(self._tail)[self._tail_off : self._tail_off + n]
                self._tail_off += n
                self._tail_gen += 1
            if n < len(view):
                self._source.expect(len(view) - n)
            while n < len(view) and not (one and n):
                # Received straight into the caller's memory: no intermediate object.
                k = self._net(methodcaller("readinto", view[n:]), 0)
                if k == 0:
                    break
                n += k
            self._pos += n
            self.stats.bytes_delivered += n
            return n

    def peek(self, size: int = 0) -> bytes:
        """Buffered bytes at the current position, without consuming them."""
        return self._guard(self._peek, size)

    def _peek(self, size: int) -> bytes:
        if self._tail_off >= len(self._tail):
            self._fill_tail()
        return bytes(self._tail[self._tail_off :])

    def readline(self, size: int | None = -1) -> bytes:
        return self._guard(self._readline, size)

    def _readline(self, size: int | None = -1) -> bytes:
        limit = size if size is not None and size >= 0 else None
        chunks: list[bytes | memoryview] = []
        got = 0
        while limit is None or got < limit:
            if self._tail_off >= len(self._tail) and not self._fill_tail():
                break
            end = len(self._tail)
            if limit is not None:
                end = min(end, self._tail_off + limit - got)
            # A read-ahead view starts at its part buffer's first byte, so offsets into
            # the view are offsets into the buffer, which can be searched.
            tail = self._tail
            haystack = tail if isinstance(tail, bytes) else tail.obj
            assert isinstance(haystack, (bytes, PartBuffer))
            newline = haystack.find(b"\n", self._tail_off, end)
            stop = end if newline < 0 else newline + 1
            # Lines may span many parts: copy out of read-ahead buffers as we go, hold one.
            got += self._take_tail(stop - self._tail_off, chunks, copy=not isinstance(tail, bytes))
            if newline >= 0:
                break
        return self._deliver(chunks, got)

    def _read_all(self) -> bytes:
        chunks: list[bytes | memoryview] = []
        got = self._take_tail(len(self._tail), chunks)
        self._source.expect(-1)
        # To the end: pieces of at least 64 KiB, however small chunk_size is (each piece
        # is kept if the stream breaks in a later one).
        read = methodcaller("read", max(self.chunk_size, 64 * 1024))
        while data := self._net(read, b""):
            chunks.append(data)
            got += len(data)
        return self._deliver(chunks, got)

    # -- buffer bookkeeping ------------------------------------------------------------

    def _take_tail(
        self, limit: int, chunks: list[bytes | memoryview], *, copy: bool = False
    ) -> int:
        """Move up to ``limit`` buffered bytes into ``chunks`` as a view (no copy)."""
        n = min(limit, len(self._tail) - self._tail_off)
        if n <= 0:
            return 0
        if self._tail_off == 0 and n == len(self._tail) and not copy:
            chunks.append(self._tail)
        else:
            view = memoryview(self._tail)[self._tail_off : self._tail_off + n]
            chunks.append(bytes(view) if copy else view)
        self._tail_off += n
        self._tail_gen += 1
        return n

    def _fill_tail(self) -> bool:
        """Receive one network chunk into the (consumed) tail; False at end of object.

        From read-ahead parts this is a view of the part buffer: no copy."""
        empty: tuple[bytes | memoryview, int] = (b"", 0)
        size = self._source.fill_size(self.chunk_size)
        self._set_tail(*self._net(methodcaller("fill_view", size), empty))
        return self._tail_off < len(self._tail)

    def _set_tail(self, tail: bytes | memoryview, off: int) -> None:
        self._tail, self._tail_off = tail, off
        self._tail_gen += 1

    def _deliver(self, chunks: list[bytes | memoryview], got: int) -> bytes:
        self._pos += got
        self.stats.bytes_delivered += got
        if len(chunks) == 1 and isinstance(chunks[0], bytes):
            return chunks[0]  # a single network chunk is handed over as received
        return b"".join(chunks)  # the one copy

    # -- the network ----------------------------------------------------------------------

    def _net(self, op: Callable[[Any], T], empty: T) -> T:
        """Run one body read at ``_recv_pos``; ``empty`` at the end of the object."""
        result = self._source.receive(op, empty, self._recv_pos)
        self._recv_pos = self._source.pos
        return result

    @property
    def readahead(self) -> int | None:
        """Parts read ahead: the number asked for, None while adaptive, 0 on one stream
        (which a reader falls back to for good when parts cannot be used)."""
        return self._source.readahead

    @property
    def readahead_settled(self) -> int | None:
        """The parts this reader reads ahead for good: the number asked for, or, with
        ``readahead=None``, the level the adaptive climb settled at (0: one stream);
        None while the climb still measures."""
        return self._source.settled()

    def wait_readahead_settled(self, timeout: float | None = None) -> int | None:
        """:attr:`readahead_settled` once it is known, waiting up to ``timeout`` seconds
        for the adaptive climb to settle (from any thread; None if it did not, or the
        file was closed first)."""
        self._source.wait_settled(timeout)
        return self._source.settled()

    # -- integrity ---------------------------------------------------------------------

    def _on_start(self, headers: Mapping[str, str]) -> None:
        self._verifier.start(headers)

    def _prime(self) -> None:
        # Parts from byte 0: HEAD's checksums verify the pass (no GET answer gives them).
        if self.verify and self._verifier.checksum is None:
            self._verifier.prime(*info_checksum(self._head_info))

    def _observe(self, offset: int, data: bytes | memoryview) -> None:
        try:
            self._verifier.observe(offset, data, self._reader.size)
        except errors.IntegrityError:
            self._source.drop()
            raise


def _restore(
    client: HasTransport,
    bucket: str,
    key: str,
    state: dict[str, Any],
    pin: VersionPin | tuple[str | None, int | None, str | None],
    pos: int,
    closed: bool,
) -> ObjectFile:
    if isinstance(pin, tuple):  # pickled before VersionPin: version_id is in ``state``
        pin = VersionPin(etag=pin[0], size=pin[1], last_modified=pin[2])
    reached = state.pop("reached", False)  # (pickled before it was kept: False)
    f = ObjectFile(client, bucket, key, pin=pin, **state)
    f.reached = reached
    f._pos = f._recv_pos = pos
    if closed:
        f.close()
    return f
