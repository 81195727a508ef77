"""Part buffers: anonymous memory maps, for the parts of reads and uploads.

A ``bytearray(n)`` is zero-filled at creation by the thread that asks for it, holding
the GIL, and each of its 4 KiB pages is then faulted in one at a time. An anonymous
map gets its zeroed pages from the kernel instead: either as they are first touched
(by a socket read or ``preadv`` that has released the GIL), or all at once when the
map is made (``MAP_POPULATE``, mmap(2)), which costs less per page than faulting
them in one by one.
"""

from __future__ import annotations

import mmap

__all__ = ["PartBuffer", "part_buffer"]

PartBuffer = mmap.mmap

# Linux only; elsewhere the pages come on first touch.
_POPULATE = getattr(mmap, "MAP_POPULATE", 0)


def part_buffer(size: int, *, populate: bool = False) -> PartBuffer:
    """A new zero-filled buffer of ``size`` bytes.

    ``populate``: map every page now, in this thread. Right for a buffer that is filled
    whole at once (an upload part read from a file); wrong where the buffer should
    be handed on at once and filled by others (read-ahead parts, whose pages the
    workers' socket reads fault in, in parallel).
    """
    if populate and _POPULATE:
        return mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | _POPULATE)
    return mmap.mmap(-1, size)
