"""Reading a caller's binary stream: filling a buffer from it, and the CRC32C of a span
of it before it is sent (the server checks the bytes that arrive against it)."""

from __future__ import annotations

import io
from typing import IO

from objsdk import errors
from objsdk._core.checksums import crc32c
from objsdk._core.sizes import MiB

__all__ = ["READ_BLOCK", "SMALL_FILE_PUT", "fill", "refuse_text", "stream_crc32c"]

# Reads of a file or stream to checksum it before sending it.
READ_BLOCK = MiB
# A file up to this size goes in one PUT from memory. Bytes from memory have their
# SHA-256 signed: ~0.15 ms of CPU at this size, where a file body goes UNSIGNED-PAYLOAD.
SMALL_FILE_PUT = 64 * 1024


# What to do about a stream whose reads give str.
_BINARY = "open it with 'rb' (binary mode)"


def refuse_text(f: object, argument: str, bucket: str, key: str) -> None:
    """Refuse a text file (an :class:`io.TextIOBase`: its reads give str, never the
    bytes a request carries) before any request, naming the ``argument`` it came as
    (``"put_object data"``, ``"upload source"``) and where it was to go."""
    if isinstance(f, io.TextIOBase):
        raise errors.InvalidArgument(
            f"{argument} is a text file, {_BINARY}: {type(f).__name__} "
            f"(bucket {bucket!r}, key {key!r})"
        )


def fill(stream: IO[bytes], view: memoryview) -> int:
    """Read into ``view`` until it is full or the stream ends; return the bytes read.
    A stream whose ``read`` gives str is an :class:`~objsdk.InvalidArgument`."""
    got = 0
    readinto = getattr(stream, "readinto", None)
    while got < view.nbytes:
        if readinto is not None:
            n = readinto(view[got:])
        else:
            chunk = stream.read(view.nbytes - got)
            if isinstance(chunk, str):  # a text stream that is no io.TextIOBase
                raise errors.InvalidArgument(
                    f"the stream's read() gave str, not bytes: {_BINARY} ({type(stream).__name__})"
                )
            n = None if chunk is None else len(chunk)
            if n:
                view[got : got + n] = chunk
        if n is None:
            raise errors.InvalidArgument("upload cannot read a non-blocking stream")
        if n == 0:
            break
        got += n
    return got


def stream_crc32c(stream: IO[bytes], start: int, size: int) -> int:
    """CRC32C of ``size`` bytes of a seekable stream from ``start``, through one small
    reused buffer; the stream is left at ``start``. Raises
    :class:`~objsdk.SourceChangedError` if it ends early."""
    buf = bytearray(min(size, READ_BLOCK))
    crc = 0
    left = size
    stream.seek(start)
    with memoryview(buf) as view:
        while left:
            n = fill(stream, view[: min(left, view.nbytes)])
            if n == 0:
                raise errors.SourceChangedError(f"the stream ended {left} bytes early")
            crc = crc32c(view[:n], crc)
            left -= n
    stream.seek(start)
    return crc
