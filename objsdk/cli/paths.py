"""Command-line locations: ``s3://bucket/key`` for objects, anything else a local path.

Pure: parsing and joining only, nothing is looked up.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

from ..errors import InvalidArgument

__all__ = ["LocalPath", "Location", "RemotePath", "parse_location", "parse_remote"]

SCHEME = "s3://"


@dataclass(frozen=True)
class RemotePath:
    """An object or prefix: ``s3://bucket`` (key ``""``), ``s3://bucket/dir/``, ``s3://b/k``."""

    bucket: str
    key: str = ""

    def __str__(self) -> str:
        return f"{SCHEME}{self.bucket}/{self.key}"

    @property
    def is_prefix(self) -> bool:
        """True when the path names a "directory": the bucket root or a key ending in /."""
        return self.key == "" or self.key.endswith("/")

    @property
    def name(self) -> str:
        """The last segment of the key (``""`` for a prefix)."""
        return posixpath.basename(self.key)

    def join(self, relative: str) -> RemotePath:
        """This path as a prefix (a ``/`` added if needed), followed by ``relative``."""
        base = self.key if self.is_prefix else self.key + "/"
        return RemotePath(self.bucket, base + relative)

    def as_prefix(self) -> RemotePath:
        return self if self.is_prefix else RemotePath(self.bucket, self.key + "/")


@dataclass(frozen=True)
class LocalPath:
    """A local file or directory, or ``-`` for standard input/output."""

    path: str

    def __str__(self) -> str:
        return self.path

    @property
    def is_stdio(self) -> bool:
        return self.path == "-"


Location = RemotePath | LocalPath


def parse_remote(text: str) -> RemotePath:
    """``s3://bucket/key`` as a :class:`RemotePath`; a clear error for anything else."""
    if not text.startswith(SCHEME):
        raise InvalidArgument(f"expected an s3://bucket/key URL, got {text!r}")
    rest = text[len(SCHEME) :]
    bucket, _, key = rest.partition("/")
    if not bucket:
        raise InvalidArgument(f"no bucket in {text!r} (expected s3://bucket/key)")
    return RemotePath(bucket, key)


def parse_location(text: str) -> Location:
    """``s3://...`` is remote; any other text a local path (``-`` is stdin/stdout)."""
    if "://" in text and not text.startswith(SCHEME):
        scheme = text.split("://", 1)[0]
        raise InvalidArgument(f"unsupported URL scheme {scheme!r} in {text!r} (use s3://)")
    if text.startswith(SCHEME):
        return parse_remote(text)
    if not text:
        raise InvalidArgument("empty path")
    return LocalPath(text)


def safe_relative(key: str, prefix: str) -> str | None:
    """``key`` relative to ``prefix`` as a local relative path, or None when it would
    leave the destination directory (``..`` segments, absolute paths) or is empty."""
    rel = key[len(prefix) :] if key.startswith(prefix) else key
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if not parts or ".." in parts or rel.endswith("/"):
        return None
    return "/".join(parts)
