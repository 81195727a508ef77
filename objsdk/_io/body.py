"""One open GET body, read from a known offset: the unit a reader resumes."""

from __future__ import annotations

from collections.abc import Callable

from objsdk import errors
from objsdk._core.sizes import DEFAULT_CHUNK_SIZE, RECEIVE_SLICE
from objsdk._transport.base import Response

__all__ = ["BodyStream", "Broken", "Observer"]

Observer = Callable[[int, "bytes | memoryview"], None]


class Broken(Exception):
    """The stream broke; ``cause`` says how. Internal: always resumed or re-raised."""

    def __init__(self, cause: Exception | str) -> None:
        self.cause = cause if isinstance(cause, Exception) else errors.ProtocolError(cause)
        super().__init__(self.cause)


class BodyStream:
    """One open GET body: the object's bytes from ``pos`` up to ``end``.

    ``observer(offset, data)`` sees every received byte in order (checksums).
    """

    def __init__(self, resp: Response, start: int, end: int | None, observer: Observer | None):
        self.resp = resp
        self.pos = start
        self.end = end
        self.observer = observer

    def _account(self, data: bytes | memoryview, asked: int) -> None:
        n = len(data)
        if n == 0 and asked and self.end is not None and self.pos < self.end:
            raise Broken(f"connection closed {self.end - self.pos} bytes before the end")
        if n and self.observer is not None:
            self.observer(self.pos, data)
        self.pos += n

    def _cap(self, n: int) -> int:
        # Never read past `end`: a window answered with a whole 200 body goes on beyond it.
        return n if self.end is None else min(n, self.end - self.pos)

    def read(self, n: int) -> bytes:
        return self._receive(self.resp.read, n)

    def read1(self, n: int) -> bytes:
        return self._receive(self.resp.read1, n)

    def _receive(self, receive: Callable[[int], bytes], n: int) -> bytes:
        """What ``receive(n)`` gives, never past ``end``; its transport error breaks the
        stream (:class:`Broken`)."""
        n = self._cap(n)
        try:
            data = receive(n)
        except errors.TransportError as e:
            raise Broken(e) from e
        self._account(data, n)
        return data

    def readinto(self, view: memoryview) -> int:
        view = view[: self._cap(len(view))]
        # The observer (the checksum) reads each slice while it is still in the CPU cache:
        # a 1 MiB buffer hashed after the kernel filled it is read back from memory, which
        # costs several times the CRC itself (docs/perf.md, "Checksums: what verification
        # costs a read").
        if self.observer is None or len(view) <= RECEIVE_SLICE:
            return self._readinto(view)
        n = 0
        while n < len(view):
            piece = view[n : n + RECEIVE_SLICE]
            got = self._readinto(piece)
            n += got
            if got < len(piece):
                break  # the end, or what one receive gave: the caller asks again
        return n

    def _readinto(self, view: memoryview) -> int:
        try:
            n = self.resp.readinto(view)
        except errors.TransportError as e:
            raise Broken(e) from e
        self._account(view[:n], len(view))
        return n

    def discard(self, n: int) -> None:
        scratch = memoryview(bytearray(min(n, DEFAULT_CHUNK_SIZE)))
        while n > 0:
            got = self.readinto(scratch[: min(n, len(scratch))])
            if got == 0:
                raise Broken("end of body while skipping")
            n -= got

    @property
    def done(self) -> bool:
        return self.end is not None and self.pos >= self.end

    def close(self) -> None:
        self.resp.close()
