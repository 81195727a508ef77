"""What fsspec's and s3fs's files have that readers and writers share: ``loc`` and
``full_name``."""

from __future__ import annotations

from typing import Any

__all__ = ["FileAttrs"]


class FileAttrs:
    """``loc`` (``tell()``'s fsspec name) and ``full_name`` (the path with its protocol),
    for a file with ``path``, ``fs`` and ``tell()``."""

    path: str
    fs: Any

    def tell(self) -> int:
        raise NotImplementedError

    @property
    def loc(self) -> int:
        """The position: bytes read past, or written so far."""
        return self.tell()

    @property
    def full_name(self) -> str:
        """The path with its protocol (``objsdk://bucket/key``)."""
        return str(self.fs.unstrip_protocol(self.path))
