"""Objects that arrive in one response, written to local files without the machinery of
large downloads.

``Client.download`` keeps a resume record beside a temporary file, locks it, and fetches
parts in threads: worth it for an object of many parts, pure cost for a 4 KiB one (four
opens, three fsyncs, three unlinks, two renames and a thread per object). An object up
to :data:`SMALL_OBJECT` is instead read whole by one verified GET (``Client.open`` with
no read-ahead: pinned to the first answer's ETag, its stored checksum checked), written
to a temporary name in the destination's directory, fsynced, and renamed over the final
name. A killed run leaves no partial file under a final name (at most a
``.objsdk-*.tmp`` file, which ``sync --delete`` removes and a rerun ignores); it keeps
nothing to resume either, as there is nothing worth resuming.

Durability is batched (:class:`Durability`): each file's bytes are fsynced by the worker
that wrote them, before its rename, and every directory a rename touched is fsynced once,
when the run ends, so a ``cp`` that returns has every file and every name on disk.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import threading
from datetime import datetime
from typing import TYPE_CHECKING

from objsdk import errors

if TYPE_CHECKING:
    from objsdk import Client

__all__ = ["SMALL_OBJECT", "Durability", "download_small"]

# Up to one default part: the size at which Client.download would use one GET anyway.
SMALL_OBJECT = 8 << 20


class Durability:
    """The directories whose new names still need an fsync; :meth:`flush` does them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._dirs: set[str] = set()

    def renamed_in(self, directory: str) -> None:
        with self._lock:
            self._dirs.add(directory or ".")

    def flush(self) -> None:
        """fsync each directory once (a rename is durable when its directory is)."""
        with self._lock:
            dirs, self._dirs = self._dirs, set()
        for d in sorted(dirs):
            with contextlib.suppress(FileNotFoundError):
                fd = os.open(d, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)


def download_small(
    client: Client,
    bucket: str,
    key: str,
    dest: str,
    mtime: datetime | None,
    durability: Durability,
) -> int:
    """Write the object to ``dest`` by one verified GET and a rename; return its size.

    The file gets ``mtime`` (the object's date) before it takes its final name.
    """
    with client.open(bucket, key, readahead=0) as f:
        data = f.read()
    directory = os.path.dirname(dest)
    if directory:
        os.makedirs(directory, exist_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    while True:
        # A random name no other job picks; O_EXCL refuses anything already there.
        tmp = os.path.join(directory, f".objsdk-{secrets.token_hex(8)}.tmp")
        try:
            fd = os.open(tmp, flags, 0o666)
            break
        except FileExistsError:
            continue
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        if mtime is not None:
            ts = mtime.timestamp()
            os.utime(tmp, (ts, ts))
        if os.path.isdir(dest) and not os.path.islink(dest):
            raise errors.InvalidArgument(
                f"cannot write s3://{bucket}/{key} to {dest}: a directory is there"
            )
        os.replace(tmp, dest)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    durability.renamed_in(directory)
    return len(data)
