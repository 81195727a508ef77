"""What a recursive ``cp`` or a ``sync`` works through: the regular files under a local
directory, the objects under a prefix, and which keys are safe as local paths."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from typing import TYPE_CHECKING

from objsdk import ObjectSummary

from .jobs import Outcome
from .output import Output
from .paths import RemotePath, safe_relative

if TYPE_CHECKING:
    from objsdk import Client

__all__ = ["key_prefix", "list_objects", "local_file", "safe_local_name", "walk_files"]


def walk_files(root: str, out: Output, outcome: Outcome) -> Iterator[tuple[str, os.stat_result]]:
    """Regular files under ``root`` as (relative posix path, stat), sorted; others skipped."""
    for dirpath, dirnames, filenames in os.walk(root, followlinks=True):
        dirnames.sort()
        for name in sorted(filenames):
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root).replace(os.sep, "/")
            try:
                st = os.stat(path)
            except OSError as e:
                out.warn(f"skipping {path}: {e.strerror}")
                outcome.skipped += 1
                continue
            if not stat.S_ISREG(st.st_mode):
                out.warn(f"skipping {path}: not a regular file")
                outcome.skipped += 1
                continue
            if not os.access(path, os.R_OK):
                out.warn(f"skipping {path}: permission denied")
                outcome.skipped += 1
                continue
            yield rel, st


def key_prefix(src: RemotePath) -> str:
    """The prefix the objects under ``src`` share: its key as a "directory" ("" for a bucket)."""
    return src.as_prefix().key if src.key else ""


def list_objects(client: Client, src: RemotePath) -> Iterator[tuple[str, ObjectSummary]]:
    """Objects under ``src`` as a prefix, as (key relative to it, summary)."""
    prefix = key_prefix(src)
    for entry in client.list_objects(src.bucket, prefix=prefix):
        if isinstance(entry, ObjectSummary) and not entry.key.endswith("/"):
            yield entry.key[len(prefix) :], entry


def safe_local_name(src: RemotePath, key: str, out: Output, outcome: Outcome) -> str | None:
    """``key`` relative to ``src``'s prefix as a safe relative local path; None (warned,
    counted as skipped) when it is not one."""
    rel = safe_relative(key, key_prefix(src))
    if rel is None:
        out.warn(f"skipping s3://{src.bucket}/{key}: not a safe local path")
        outcome.skipped += 1
    return rel


def local_file(root: str, rel: str) -> str:
    """The local path of ``rel`` (a relative posix path) under the directory ``root``."""
    return os.path.join(root, *rel.split("/"))
