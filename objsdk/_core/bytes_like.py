"""Bytes-like data: any object with the buffer protocol, seen as flat bytes (pure)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from objsdk import errors

__all__ = ["flat_view", "is_bytes_like"]


def is_bytes_like(data: object) -> bool:
    """True for bytes, bytearray, memoryview and any other object with the buffer
    protocol (array.array, numpy arrays) that is not a file to read from."""
    if isinstance(data, bytes | bytearray | memoryview):
        return True
    if callable(getattr(data, "read", None)):
        return False
    try:
        memoryview(data).release()  # type: ignore[arg-type]
    except TypeError:
        return False
    return True


@contextlib.contextmanager
def flat_view(data: object, operation: str, bucket: str, key: str) -> Iterator[memoryview]:
    """A flat byte view of a C-contiguous buffer (array('I'), 2-D views...): what is
    sent is the buffer's bytes in memory order. A strided view has no such bytes
    without a copy, which is the caller's to make."""
    view = memoryview(data)  # type: ignore[arg-type]
    with view:
        if not view.c_contiguous:
            raise errors.InvalidArgument(
                f"{operation} needs a contiguous buffer (bucket {bucket!r}, key {key!r})"
            )
        with view.cast("B") as flat:
            yield flat
