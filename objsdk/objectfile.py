"""``ObjectFile``: a resilient, seekable, zero-copy file over an object's GET stream.

One GET serves a whole sequential pass. When it breaks (reset, timeout, truncated or
malformed body) the reader reopens at the next undelivered byte with
``Range: bytes=<next>-`` and ``If-Match: <etag>``, and checks the answer
(:mod:`objsdk.resume`) before taking a byte from it: the caller sees one unbroken
stream of one object version, or an exception.

Copies: ``readinto`` receives straight into the caller's buffer (``recv_into`` through
``http.client``); ``read(n)`` collects network chunks as memoryviews and joins them
once, and returns a network chunk untouched when one chunk is the whole answer.
"""

from __future__ import annotations

import http.client
import io
import logging
import socket
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass
from operator import methodcaller
from typing import TYPE_CHECKING, Any, TypeVar

import requests
import urllib3.exceptions
from urllib3.exceptions import MaxRetryError
from urllib3.util.retry import Retry

from . import errors
from .addressing import check_bucket, check_key
from .integrity import StreamChecksum, checksum_from_headers
from .ranges import format_range
from .readahead import Interruptible, PartResult, PartStream, Prefetcher
from .resume import BadResponse, Changed, Continuation, SizeUnknown, check_response
from .transport import watch

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer as Buffer

    from .client import Client

__all__ = ["DEFAULT_CHUNK_SIZE", "ObjectFile", "ReadStats", "resume_policy"]

log = logging.getLogger("objsdk")

DEFAULT_CHUNK_SIZE = 1 << 20
DEFAULT_MAX_RESUME = 6
DEFAULT_PART_SIZE = 8 << 20
# Reads at least this large may switch a plain-HTTP body to direct socket reads.
_DIRECT_MIN = 256 * 1024
# Read-ahead workers fill a part in slices of this size, checking for cancellation.
_PART_SLICE = 1 << 20
# A forward seek this close to the open stream reads through instead of paying for a
# new request (tarfile's "r:" mode skips member padding and small members like this).
SKIP_THRESHOLD = 256 * 1024

T = TypeVar("T")

# What a body read can raise when the connection breaks: socket errors (including
# timeouts), http.client's IncompleteRead for truncated/malformed chunked bodies, and
# urllib3/requests wrappers of the same.
_BROKEN = (
    OSError,
    http.client.HTTPException,
    urllib3.exceptions.HTTPError,
    requests.exceptions.RequestException,
)


def resume_policy(max_resume: int) -> Retry:
    """The backoff between resume attempts: first at once, then 0.2 s doubling to 5 s,
    with jitter; at most ``max_resume`` consecutive failures."""
    return Retry(
        total=max_resume,
        connect=None,
        read=None,
        status=None,
        other=None,
        redirect=0,
        backoff_factor=0.2,
        backoff_max=5.0,
        backoff_jitter=0.2,
    )


@dataclass
class ReadStats:
    """What one :class:`ObjectFile` did: bytes handed to the caller, GET/HEAD requests
    sent, resumes after a broken stream, bytes received but skipped (discarded) and
    read-ahead bytes fetched but never delivered (wasted)."""

    bytes_delivered: int = 0
    requests: int = 0
    resumes: int = 0
    bytes_discarded: int = 0
    bytes_wasted: int = 0  # read-ahead bytes fetched but never delivered (seek, close)


class _Broken(Exception):
    """The stream broke; ``cause`` says how. Internal: always resumed or re-raised."""

    def __init__(self, cause: Exception | str) -> None:
        self.cause = cause if isinstance(cause, Exception) else errors.ProtocolError(cause)
        super().__init__(self.cause)


Observer = Callable[[int, "bytes | memoryview"], None]


class _Stream:
    """One open GET body: the bytes of the object from ``pos`` up to ``end``.

    ``observer(offset, data)`` sees every received byte in order (checksums).
    """

    def __init__(
        self, resp: requests.Response, start: int, end: int | None, observer: Observer | None
    ) -> None:
        self.resp = resp
        self.pos = start
        self.end = end
        self.observer = observer
        fp = getattr(resp.raw, "_fp", None)
        # http.client's response reads straight into a caller's buffer (recv_into);
        # urllib3's own readinto goes through a temporary bytes object.
        self._fp: http.client.HTTPResponse | None = (
            fp if isinstance(fp, http.client.HTTPResponse) else None
        )
        # Set once the body is read from the socket directly (see _direct_socket).
        self._sock: socket.socket | None = None

    def _direct_socket(self, n: int) -> tuple[socket.socket, io.BufferedIOBase] | None:
        """The socket to read the rest of a plain-HTTP body from directly, if possible.

        After one ``read1``/``readinto1`` of a large buffer, http.client's read buffer is
        empty for good, and ``recv(..., MSG_WAITALL)`` then fills a whole buffer per
        system call instead of about ten. That needs a blocking socket (on a socket with
        a timeout CPython polls and MSG_WAITALL stops waiting), so the read timeout moves
        into the kernel as SO_RCVTIMEO. The connection is not reused afterwards.
        """
        fp = self._fp
        sock = getattr(getattr(self.resp.raw, "connection", None), "sock", None)
        if (
            n < _DIRECT_MIN
            or fp is None
            or fp.fp is None
            or fp.chunked
            or self.end is None
            or type(sock) is not socket.socket  # not TLS
        ):
            return None
        return sock, fp.fp

    def _switch_direct(self, sock: socket.socket) -> None:
        timeout = sock.gettimeout()
        if timeout:
            whole = int(timeout)
            timeval = struct.pack("ll", whole, int((timeout - whole) * 1_000_000))
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, timeval)
        sock.settimeout(None)
        self._sock = sock

    def _account(self, data: bytes | memoryview, asked: int) -> None:
        n = len(data)
        if n == 0 and asked and self.end is not None and self.pos < self.end:
            raise _Broken(f"connection closed {self.end - self.pos} bytes before the end")
        if n and self.observer is not None:
            self.observer(self.pos, data)
        self.pos += n

    def _cap(self, n: int) -> int:
        # Never read past `end`: a window answered with a whole 200 body goes on beyond it.
        return n if self.end is None else min(n, self.end - self.pos)

    def read(self, n: int) -> bytes:
        n = self._cap(n)
        try:
            if self._sock is not None:
                data = self._sock.recv(n, socket.MSG_WAITALL)
            elif (direct := self._direct_socket(n)) is not None:
                sock, buffered = direct
                data = buffered.read1(n)  # empties http.client's buffer for good
                self._switch_direct(sock)
            else:
                data = self._fp.read(n) if self._fp else self.resp.raw.read(n)
        except _BROKEN as e:
            raise _Broken(e) from e
        self._account(data, n)
        return data

    def read1(self, n: int) -> bytes:
        n = self._cap(n)
        try:
            if self._sock is not None:
                data = self._sock.recv(n)
            else:
                data = self._fp.read1(n) if self._fp else self.resp.raw.read1(n)
        except _BROKEN as e:
            raise _Broken(e) from e
        self._account(data, n)
        return data

    def readinto(self, view: memoryview) -> int:
        view = view[: self._cap(len(view))]
        try:
            if self._sock is not None:
                n = self._sock.recv_into(view, len(view), socket.MSG_WAITALL)
            elif (direct := self._direct_socket(len(view))) is not None:
                sock, buffered = direct
                n = buffered.readinto1(view)  # empties http.client's buffer for good
                self._switch_direct(sock)
            else:
                n = self._fp.readinto(view) if self._fp else self.resp.raw.readinto(view)
        except _BROKEN as e:
            raise _Broken(e) from e
        self._account(view[:n], len(view))
        return n

    def discard(self, n: int) -> None:
        scratch = memoryview(bytearray(min(n, DEFAULT_CHUNK_SIZE)))
        while n > 0:
            got = self.readinto(scratch[: min(n, len(scratch))])
            if got == 0:
                raise _Broken("end of body while skipping")
            n -= got

    def fill_view(self, n: int) -> tuple[bytes, int]:
        return self.read(n), 0

    @property
    def done(self) -> bool:
        return self.end is not None and self.pos >= self.end

    def close(self) -> None:
        if self.done and self._fp is not None and self._fp.isclosed():
            # Fully read: hand the connection back to the pool for the next request.
            self.resp.raw.release_conn()
        else:
            self.resp.close()


class ObjectFile(io.BufferedIOBase):
    """A read-only, seekable binary file over one object in a bucket.

    Lazy: nothing is sent until the first read (or ``size``). Pinned: the first answer's
    ETag is sent as ``If-Match`` on every later request, so all bytes come from one
    version; if the object changes, :class:`~objsdk.ObjectChangedError` is raised. A
    broken stream is resumed from the next undelivered byte up to ``max_resume``
    consecutive failures (:class:`~objsdk.ResumeLimitError` after that). With
    ``verify``, a full pass from byte 0 to the end is checked against the object's
    stored checksum (:class:`~objsdk.IntegrityError` on mismatch). Picklable: a copy
    reopens lazily at the same position and version.
    """

    def __init__(
        self,
        client: Client,
        bucket: str,
        key: str,
        *,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        max_resume: int = DEFAULT_MAX_RESUME,
        version_id: str | None = None,
        verify: bool = True,
        etag: str | None = None,
        size: int | None = None,
        end: int | None = None,
        readahead: int = 0,
        part_size: int = DEFAULT_PART_SIZE,
    ) -> None:
        super().__init__()
        check_bucket(bucket)
        check_key(key)
        if chunk_size < 1:
            raise errors.InvalidArgument(f"chunk_size must be positive, got {chunk_size}")
        if max_resume < 0:
            raise errors.InvalidArgument(f"max_resume must be >= 0, got {max_resume}")
        if end is not None and end < 0:
            raise errors.InvalidArgument(f"end must be >= 0, got {end}")
        if readahead < 0 or part_size < 1:
            raise errors.InvalidArgument(
                f"readahead must be >= 0 and part_size positive, got {readahead}, {part_size}"
            )
        self._client = client
        self.bucket = bucket
        self.key = key
        self.chunk_size = chunk_size
        self.max_resume = max_resume
        self.verify = verify
        self.version_id = version_id
        self.etag = etag
        self._size = size
        # A window: only bytes before `end` are read (closed Range requests), as if the
        # object ended there. Parallel parts and downloads are windows.
        self._end = end
        self.readahead = readahead
        self.part_size = part_size
        self._prefetcher: Prefetcher | None = None
        self._head_checksum: StreamChecksum | None = None
        # Bytes read in sequence since the last far seek: read-ahead starts once a whole
        # part's worth has gone by, so random small reads do not fetch whole parts.
        # A fresh reader counts as sequential.
        self._run = part_size
        # Set (by another thread) to stop this reader: a read-ahead part was cancelled.
        self._abort: threading.Event | None = None
        self.stats = ReadStats()
        # _pos: the caller's position. Received but undelivered bytes sit in
        # _tail[_tail_off:] at _pos; _recv_pos is the next byte to take from the network
        # (== _pos + buffered bytes, outside a read call that is collecting chunks).
        self._pos = 0
        self._recv_pos = 0
        self._tail: bytes | memoryview = b""
        self._tail_off = 0
        self._stream: _Stream | PartStream | None = None
        self._policy = resume_policy(max_resume)
        self._retry = self._policy
        self._opened_once = False
        self._checksum: StreamChecksum | None = None
        self._hashed = 0  # length of the object prefix fed to _checksum

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
        if not self.closed:
            self._drop_stream()
            self._tail, self._tail_off = b"", 0
            if self._prefetcher is not None:
                self._prefetcher.close()  # joins the workers
                self.stats.bytes_wasted = self._prefetcher.wasted
                self._prefetcher = None
        super().close()

    def __reduce__(self) -> tuple[Any, ...]:
        # Reopen lazily in the unpickling process, pinned to the same version.
        state = {
            "chunk_size": self.chunk_size,
            "max_resume": self.max_resume,
            "version_id": self.version_id,
            "verify": self.verify,
            "etag": self.etag,
            "size": self._size,
            "end": self._end,
            "readahead": self.readahead,
            "part_size": self.part_size,
        }
        return (_restore, (self._client, self.bucket, self.key, state, self._pos, self.closed))

    # -- size, position ----------------------------------------------------------------

    @property
    def size(self) -> int:
        """The object's size in bytes (asks the server with HEAD if not known yet)."""
        if self._size is None:
            self._check_open()
            self.stats.requests += 1
            info = self._client.head_object(self.bucket, self.key, version_id=self.version_id)
            if self.etag is not None and info.etag != self.etag:
                raise self._changed(f"ETag {self.etag} is now {info.etag}", self._pos)
            self.etag = info.etag
            self.version_id = self.version_id or info.version_id
            self._size = info.size or 0
            headers = {f"x-amz-checksum-{a}": v for a, v in info.checksums.items()}
            if info.checksum_type:
                headers["x-amz-checksum-type"] = info.checksum_type
            self._head_checksum = checksum_from_headers(headers)
        return self._size

    def tell(self) -> int:
        self._check_open()
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        self._check_open()
        if whence == io.SEEK_SET:
            if offset < 0:
                raise ValueError(f"negative seek position {offset}")
            target = offset
        # Relative seeks before the start stop at 0, as io.BytesIO does.
        elif whence == io.SEEK_CUR:
            target = max(0, self._pos + offset)
        elif whence == io.SEEK_END:
            target = max(0, self.size + offset)
        else:
            raise ValueError(f"invalid whence ({whence}, should be 0, 1 or 2)")
        delta = target - self._pos
        if 0 <= delta <= len(self._tail) - self._tail_off:
            self._tail_off += delta  # free: already received
        else:
            self._tail, self._tail_off = b"", 0
            self._recv_pos = target
            stream = self._stream
            if not (stream and 0 <= target - stream.pos <= SKIP_THRESHOLD):
                self._drop_stream()  # far or backward: reopen lazily at the new offset
                self._run = 0
            # else the next network read skips forward on the open stream
        self._pos = target
        return target

    # -- reading -----------------------------------------------------------------------

    def _resync(self) -> None:
        """After a read raised: forget what it had received but not delivered.

        The caller's position is the truth; the next read starts again from it (the ETag
        pin makes re-fetching those bytes safe), so nothing is skipped or repeated.
        """
        self._drop_stream()
        self._tail, self._tail_off = b"", 0
        self._recv_pos = self._pos

    def read(self, size: int | None = -1) -> bytes:
        # Fast path: small reads (tarfile asks for 10 KiB at a time) served from the
        # buffered network chunk with one slice, the one copy. A closed file has an
        # empty buffer, so it always takes the checked path below.
        if size is not None and size > 0:
            start = self._tail_off
            end = start + size
            if end <= len(self._tail):
                self._tail_off = end
                self._pos += size
                self.stats.bytes_delivered += size
                # bytes(bytes) is the same object; a read-ahead part view is copied here.
                return bytes(self._tail[start:end])
        return self._guard(self._read, size)

    def _guard(self, op: Callable[[Any], T], arg: Any) -> T:
        """Run a read: refuse on a closed file, resync if it raises, and recycle
        read-ahead buffers no longer referenced once it is over."""
        self._check_open()
        try:
            return op(arg)
        except BaseException:
            self._resync()
            raise
        finally:
            stream = self._stream
            if isinstance(stream, PartStream):
                stream.settle(self._tail)

    def _read(self, size: int | None = -1) -> bytes:
        if size is None or size < 0:
            return self._read_all()
        chunks: list[bytes | memoryview] = []
        got = self._take_tail(size, chunks)
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
            assert isinstance(haystack, (bytes, bytearray))
            newline = haystack.find(b"\n", self._tail_off, end)
            stop = end if newline < 0 else newline + 1
            # Lines may span many parts: copy out of read-ahead buffers as we go so no
            # more than one is held.
            got += self._take_tail(stop - self._tail_off, chunks, copy=not isinstance(tail, bytes))
            if newline >= 0:
                break
        return self._deliver(chunks, got)

    def _read_all(self) -> bytes:
        chunks: list[bytes | memoryview] = []
        got = self._take_tail(len(self._tail), chunks)
        while data := self._net(methodcaller("read", self.chunk_size), b""):
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
        return n

    def _fill_tail(self) -> bool:
        """Receive one network chunk into the (consumed) tail; False at end of object.

        From read-ahead parts this is a view of the part buffer: no copy."""
        empty: tuple[bytes | memoryview, int] = (b"", 0)
        self._tail, self._tail_off = self._net(methodcaller("fill_view", self.chunk_size), empty)
        return self._tail_off < len(self._tail)

    def _deliver(self, chunks: list[bytes | memoryview], got: int) -> bytes:
        self._pos += got
        self.stats.bytes_delivered += got
        if len(chunks) == 1 and isinstance(chunks[0], bytes):
            return chunks[0]  # a single network chunk is handed over as received
        return b"".join(chunks)  # the one copy

    # -- the network, with resume ------------------------------------------------------

    def _net(self, op: Callable[[Any], T], empty: T) -> T:
        """Run one body read at ``_recv_pos``, resuming on breaks; ``empty`` at the end."""
        while True:
            try:
                stream = self._stream_at(self._recv_pos)
                if stream is None:
                    return empty
                start = stream.pos
                result = op(stream)
            except _Broken as e:
                self._on_break(e)
                continue
            if stream.pos > start:
                self._run += stream.pos - start
                self._recv_pos = stream.pos
                self._retry = self._policy  # progress forgives earlier failures
            # A finished part stream stays: the tail may still view its last buffer.
            if stream.done and isinstance(stream, _Stream):
                self._drop_stream()
            return result

    def _stream_at(self, want: int) -> _Stream | PartStream | None:
        """The stream positioned at ``want`` (opened if needed); None at end of object."""
        stream = self._stream
        if (
            self.readahead
            and self._run >= self.part_size
            and not isinstance(stream, PartStream)
            and self._abort is None
        ):
            # Reading is sequential: switch to parallel parts from here on.
            self._drop_stream()
            stream = self._start_parts(want)
            if stream is None:
                return None
        if stream is not None and stream.pos < want:
            skip = want - stream.pos
            stream.discard(skip)  # raises _Broken on failure: then we resume at want
            self.stats.bytes_discarded += skip
        if stream is not None and stream.pos == want:
            return stream
        self._drop_stream()
        limit = self._size if self._end is None else min(self._end, self._size or self._end)
        if limit is not None and want >= limit:
            return None
        return self._open(want)

    def _start_parts(self, want: int) -> PartStream | None:
        size = self.size  # HEAD if not known yet: parts need the size and the ETag
        limit = size if self._end is None else min(size, self._end)
        if want >= limit:
            return None
        if want == 0 and self.verify and self._checksum is None:
            self._checksum, self._hashed = self._head_checksum, 0
        if self._prefetcher is None:
            self._prefetcher = Prefetcher(
                _part_fetcher(self), workers=self.readahead, part_size=self.part_size
            )
        stream = PartStream(
            self._prefetcher,
            want,
            limit,
            self._observe if self._checksum else None,
            self._count_part,
        )
        self._stream = stream
        return stream

    def _count_part(self, result: PartResult) -> None:
        self.stats.requests += result.requests
        self.stats.resumes += result.resumes

    def _open(self, want: int) -> _Stream | None:
        headers = {"Accept-Encoding": "identity"}  # offsets must be stored bytes
        if self._end is not None:
            headers["Range"] = format_range(want, self._end - 1)
        elif want:
            headers["Range"] = format_range(want)
        if self.etag:
            headers["If-Match"] = self.etag
        if want == 0 and self.verify:
            # S3 returns stored checksums only when asked (GetObject, ChecksumMode).
            headers["x-amz-checksum-mode"] = "ENABLED"
        params = [("versionId", self.version_id)] if self.version_id else []
        self.stats.requests += 1
        try:
            resp = self._client._transport.request(
                "GET",
                operation="read",
                bucket=self.bucket,
                key=self.key,
                params=params,
                headers=headers,
                stream=True,
                ok=(200, 206, 412, 416),
            )
        except errors.NoSuchKey as e:
            if not self._opened_once:
                raise
            raise self._changed("it was deleted", want) from e
        except errors.TransportError as e:
            raise _Broken(e) from e
        except errors.S3Error as e:
            if e.status >= 500:  # still failing after the transport's own retries
                raise _Broken(e) from e
            raise
        try:
            cont = check_response(
                resp.status_code,
                resp.headers,
                want=want,
                etag=self.etag,
                size=self._size,
                end=self._end,
            )
        except Changed as e:
            resp.close()
            raise self._changed(str(e), want) from None
        except BadResponse as e:
            resp.close()
            raise _Broken(str(e)) from None
        except SizeUnknown:
            resp.close()
            if want >= self.size:  # HEAD, pinned to our ETag
                return None
            raise _Broken(f"416 for offset {want} of a {self.size}-byte object") from None
        self._adopt(cont, resp, want)
        if cont.eof:
            resp.close()
            return None
        stop = cont.size if self._end is None or cont.size is None else min(cont.size, self._end)
        stream = _Stream(resp, cont.start, stop, self._observe if self._checksum else None)
        self._stream = stream
        if cont.discard:
            stream.discard(cont.discard)
            self.stats.bytes_discarded += cont.discard
        return stream

    def _adopt(self, cont: Continuation, resp: requests.Response, want: int) -> None:
        """Pin what a good answer says about the object: ETag, size, version, checksum."""
        self._opened_once = True
        self.etag = self.etag or cont.etag
        if self._size is None:
            self._size = cont.size
        self.version_id = self.version_id or resp.headers.get("x-amz-version-id")
        if want == 0 and not cont.eof and self.verify:
            # A pass from byte 0 starts verification; a resume keeps the pinned checksum.
            self._checksum = checksum_from_headers(resp.headers)
            self._hashed = 0

    def _on_break(self, e: _Broken) -> None:
        self._drop_stream()
        cause = e.cause
        if self._abort is not None and self._abort.is_set():
            raise errors.ReadError(
                "read cancelled", bucket=self.bucket, key=self.key, offset=self._recv_pos
            ) from cause
        try:
            self._retry = self._retry.increment(method="GET", error=cause)
        except MaxRetryError:
            raise errors.ResumeLimitError(
                f"stream broke {self.max_resume + 1} times in a row without progress "
                f"(last: {_describe(cause)})",
                bucket=self.bucket,
                key=self.key,
                offset=self._recv_pos,
            ) from cause
        self.stats.resumes += 1
        log.warning(
            "resuming read of bucket %r key %r at offset %d after %s",
            self.bucket,
            self.key,
            self._recv_pos,
            _describe(cause),
        )
        self._retry.sleep()

    def _drop_stream(self) -> None:
        if self._stream is not None:
            stream, self._stream = self._stream, None
            stream.close()

    def _changed(self, why: str, offset: int) -> errors.ObjectChangedError:
        self._drop_stream()
        return errors.ObjectChangedError(
            f"object changed while being read: {why}",
            bucket=self.bucket,
            key=self.key,
            offset=offset,
        )

    # -- integrity ---------------------------------------------------------------------

    def _observe(self, offset: int, data: bytes | memoryview) -> None:
        """Hash received bytes in object order; verify when the last one arrives."""
        checksum = self._checksum
        if checksum is None:
            return
        end = offset + len(data)
        if end <= self._hashed:
            return  # received again (a 200 answer to a resume): hashed already
        if offset > self._hashed:
            self._checksum = None  # a gap (far seek): this pass cannot be verified
            return
        checksum.update(data[self._hashed - offset :] if offset < self._hashed else data)
        self._hashed = end
        if self._size is not None and self._hashed >= self._size:
            self._checksum = None
            if not checksum.matches():
                self._drop_stream()
                raise errors.IntegrityError(
                    f"{checksum.algorithm} mismatch: stored {checksum.expected}, "
                    f"received bytes hash to {checksum.actual()}",
                    bucket=self.bucket,
                    key=self.key,
                    offset=self._hashed,
                )


def _describe(cause: BaseException) -> str:
    text = str(cause).split("\n")[0][:200]
    return f"{type(cause).__name__}: {text}" if text else type(cause).__name__


def _restore(
    client: Client, bucket: str, key: str, state: dict[str, Any], pos: int, closed: bool
) -> ObjectFile:
    f = ObjectFile(client, bucket, key, **state)
    f._pos = f._recv_pos = pos
    if closed:
        f.close()
    return f


def _part_fetcher(
    owner: ObjectFile,
) -> Callable[[int, int, memoryview, threading.Event, Callable[[Interruptible], None]], PartResult]:
    """How a read-ahead worker fetches one part: through its own window reader, pinned
    to the owner's version, with the same resume rules and errors."""
    client, bucket, key = owner._client, owner.bucket, owner.key
    etag, size, version_id = owner.etag, owner._size, owner.version_id
    max_resume = owner.max_resume

    def fetch(
        start: int,
        stop: int,
        into: memoryview,
        cancel: threading.Event,
        register: Callable[[Interruptible], None],
    ) -> PartResult:
        with watch() as w:
            register(w)  # PartStream.close() interrupts it from the reader's thread
            reader = ObjectFile(
                client,
                bucket,
                key,
                etag=etag,
                size=size,
                version_id=version_id,
                end=stop,
                max_resume=max_resume,
                verify=False,  # the owner verifies the whole object, in order
            )
            reader._abort = cancel
            try:
                reader.seek(start)
                n = 0
                while n < len(into) and not cancel.is_set():
                    k = reader.readinto(into[n : n + _PART_SLICE])
                    if k == 0:
                        raise errors.ProtocolError(
                            f"part {start}-{stop} ended after {n} bytes",
                            operation="read",
                            bucket=bucket,
                            key=key,
                        )
                    n += k
                return PartResult(n, reader.stats.requests, reader.stats.resumes)
            finally:
                reader.close()

    return fetch
