"""``FileReader``: the :class:`~objsdk.ObjectFile` fsspec files are, with what fsspec's
cache layers expect of a file (``blocksize``, ``_fetch_range``, a ``cache`` to read
through), so ``blockcache::objsdk://...`` and ``filecache::`` work.

Without a cache it is an ObjectFile: read-ahead, resumes, one pinned version. When
fsspec's ``blockcache`` sets ``cache`` (an ``MMapCache`` over ``_fetch_range``), reads go
through it: blocks already on local disk are not fetched again, and each block that is
fetched is a pinned, verified range of the same version.
"""

from __future__ import annotations

from typing import Any

from objsdk._io.objectfile import ObjectFile
from objsdk.filesystem.fileattrs import FileAttrs

__all__ = ["FileReader"]


class FileReader(ObjectFile, FileAttrs):
    """An ObjectFile with fsspec's file attributes: ``blocksize`` (the unit fsspec's
    caches fetch), ``path``, ``fs``, ``mode``, ``cache`` (None unless a cache layer
    sets one), and s3fs's file's ``details``/``info()``, ``loc``, ``full_name`` and
    ``url()``."""

    blocksize: int
    path: str
    fs: Any
    mode = "rb"
    cache: Any = None
    _details: dict[str, Any] | None = None

    @property
    def details(self) -> dict[str, Any]:
        """The file's entry, as ``fs.info`` gives it (from the HEAD ``open`` sent)."""
        if self._details is None:
            self._details = self.fs.info(self.path)
        return self._details

    @details.setter
    def details(self, entry: dict[str, Any]) -> None:
        self._details = entry

    def info(self) -> dict[str, Any]:
        """:attr:`details` (as s3fs's files)."""
        return self.details

    def url(self, **kwargs: Any) -> str:
        """A presigned URL of the object (``fs.url``)."""
        return str(self.fs.url(self.path, **kwargs))

    @property
    def closed(self) -> bool:
        return super().closed

    @closed.setter
    def closed(self, value: bool) -> None:
        # fsspec's cache layers mark the files they close (``f.closed = True``).
        if value:
            self.close()

    def close(self) -> None:
        self.cache = None  # as fsspec's files drop theirs
        super().close()

    @property
    def version_id(self) -> str | None:
        """The version read, on a version-aware filesystem (None otherwise, as s3fs)."""
        return super().version_id if getattr(self.fs, "version_aware", False) else None

    def _fetch_range(self, start: int, end: int) -> bytes:
        """Bytes ``start:end`` of the pinned version, leaving the position as it was."""
        pos = self.tell()
        ObjectFile.seek(self, start)
        try:
            return ObjectFile.read(self, max(0, end - start))
        finally:
            ObjectFile.seek(self, pos)

    def read(self, size: int | None = -1) -> bytes:
        if self.cache is None:
            return super().read(size)
        start = self.tell()
        end = self.size if size is None or size < 0 else min(self.size, start + size)
        if end <= start:
            return b""
        data: bytes = self.cache._fetch(start, end)
        ObjectFile.seek(self, start + len(data))
        return data

    def readinto(self, b: Any) -> int:
        if self.cache is None:
            return super().readinto(b)
        with memoryview(b) as view, view.cast("B") as out:
            data = self.read(out.nbytes)
            out[: len(data)] = data
            return len(data)

    def read1(self, size: int = -1) -> bytes:
        return super().read1(size) if self.cache is None else self.read(size)

    def readline(self, size: int | None = -1) -> bytes:
        if self.cache is None:
            return super().readline(size)
        out = bytearray()
        while size is None or size < 0 or len(out) < size:
            want = self.blocksize if size is None or size < 0 else size - len(out)
            start = self.tell()
            chunk = self.read(min(want, self.blocksize))
            if not chunk:
                break
            newline = chunk.find(b"\n")
            if newline >= 0:
                out += chunk[: newline + 1]
                ObjectFile.seek(self, start + newline + 1)
                break
            out += chunk
        return bytes(out)
