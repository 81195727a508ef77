"""Downloads into a file that must not be renamed over: a device or a FIFO
(``/dev/null``, ``/dev/stdout`` on a pipe or a terminal, a named pipe).

A download to a path renames a complete temp file over it; over ``/dev/null`` that
would replace the device for every program on the machine. These are written into
instead, in object order (a pipe cannot seek), as ``cp`` and ``aws s3 cp`` write them
(s3transfer's special-file case): one :class:`~objsdk._io.objectfile.ObjectFile`,
pinned to the version HEAD found, reading ahead in parallel parts where that pays.
The bytes are verified as they pass; a mismatch raises
:class:`~objsdk.IntegrityError` once they are out (nothing can call them back).
Nothing is resumable: no temp file, no record.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass

from objsdk import errors
from objsdk._core.sizes import MiB
from objsdk._io.objectfile import ObjectFile
from objsdk._transfer.download_file import creation_error
from objsdk._transfer.download_result import DownloadResult
from objsdk._transfer.progress import Progress, ProgressTracker
from objsdk._transport.base import Transport
from objsdk.models import ObjectInfo

__all__ = ["download_stream", "is_stream_file"]

# What each read hands to the file: the reader's own chunk size.
_COPY = 1 * MiB


def is_stream_file(path: str) -> bool:
    """True when ``path`` leads (through links) to a character or block device or a
    FIFO: a file to write into, never to replace."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return False
    return stat.S_ISCHR(mode) or stat.S_ISBLK(mode) or stat.S_ISFIFO(mode)


@dataclass(frozen=True)
class _Through:
    """What :class:`ObjectFile` needs of a client: its transport."""

    transport: Transport


def download_stream(
    transport: Transport,
    info: ObjectInfo,
    path: str,
    *,
    parallel: int | None,
    part_size: int,
    progress: Progress | None,
    max_resume: int,
    verify: bool,
) -> DownloadResult:
    """Write the object ``info`` describes into the device or FIFO at ``path``, in
    order; ``parallel`` parts read ahead (None: as many as pay, 1: one stream)."""
    size = info.size or 0
    tracker = ProgressTracker(progress, size, announce=True)
    # ObjectFile counts the parts it reads ahead beside its stream: 0 is one stream.
    readahead = None if parallel is None else 0 if parallel == 1 else parallel
    reader = ObjectFile(
        _Through(transport),
        info.bucket,
        info.key,
        pin=info,
        max_resume=max_resume,
        verify=verify,
        readahead=readahead,
        part_size=part_size,
        chunk_size=_COPY,
    )
    with reader:
        try:
            out = open(path, "wb")  # noqa: SIM115 - closed below, its errors named
        except OSError as e:
            # A fault of the path (no permission: a device node on a filesystem
            # mounted nodev refuses even root) stays Python's own error naming it.
            raise creation_error(e, path, info.bucket, info.key) from e
        with memoryview(bytearray(_COPY)) as buffer:
            try:
                with out:
                    while n := reader.readinto(buffer):
                        out.write(buffer[:n])
                        tracker.add(n)
            except OSError as e:
                raise errors.LocalWriteError(
                    e.errno, e.strerror, path, bucket=info.bucket, key=info.key
                ) from e
        stats = reader.stats
    tracker.finish(size)
    return DownloadResult(
        info,
        parts_total=1,
        parts_fetched=1,
        parts_reused=0,
        bytes_fetched=stats.bytes_delivered,
        parallel=max(1, stats.readahead),
        verified=stats.verified,
        unverified_reason=None if stats.verified else stats.unverified_reason or "verify=False",
    )
