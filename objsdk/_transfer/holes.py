"""Giving a file's blocks back to the filesystem without changing its size.

A download that filled the disk must still rewrite its record to be resumable; the
bytes of parts it never finished are worth nothing (no record claims them, a rerun
fetches them again), so their blocks are freed for it: ``fallocate(2)`` with
``FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE`` (Linux; ext4, XFS, Btrfs and tmpfs
support it). Elsewhere nothing is freed and the caller goes on without the room.
"""

from __future__ import annotations

import functools
from typing import Any

__all__ = ["punch_hole"]

# linux/falloc.h
_FALLOC_FL_KEEP_SIZE = 0x01
_FALLOC_FL_PUNCH_HOLE = 0x02


@functools.cache
def _fallocate() -> Any:
    """libc's ``fallocate`` with its argument types, or None."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        # fallocate64 takes a 64-bit offset on 32-bit systems too (glibc, musl).
        fallocate = getattr(libc, "fallocate64", None) or libc.fallocate
    except (OSError, AttributeError):
        return None
    fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
    fallocate.restype = ctypes.c_int
    return fallocate


def punch_hole(fd: int, start: int, stop: int) -> bool:
    """Free the blocks of bytes ``[start, stop)`` of the open file ``fd`` (they read as
    zeros after); the size stays. False where the system or filesystem cannot."""
    fallocate = _fallocate()
    if fallocate is None or stop <= start:
        return False
    mode = _FALLOC_FL_PUNCH_HOLE | _FALLOC_FL_KEEP_SIZE
    return bool(fallocate(fd, mode, start, stop - start) == 0)
