"""What a recursive ``cp`` or a ``sync`` works through: the regular files under a local
directory, the objects under a prefix, which keys are safe as local paths, and which
objects an archive storage class keeps from being read."""

from __future__ import annotations

import functools
import os
import stat
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from objsdk import ObjectSummary

from .._core.wildcards import has_wildcard, key_pattern, wildcard_base
from .jobs import Archived, Outcome, Symlinks
from .output import Output
from .paths import RemotePath, safe_relative

if TYPE_CHECKING:
    from objsdk import Client

__all__ = [
    "ARCHIVE_CLASSES",
    "archive_warning",
    "inside",
    "key_prefix",
    "leave_archived",
    "list_objects",
    "local_file",
    "local_target",
    "new_plan",
    "safe_local_name",
    "skip_archived",
    "walk_files",
]


def walk_files(
    root: str,
    out: Output,
    outcome: Outcome,
    *,
    symlinks: Symlinks = "files",
    quiet: bool = False,
) -> Iterator[tuple[str, os.stat_result]]:
    """Regular files under ``root`` as (relative posix path, stat), a directory's files
    (sorted) before its subdirectories; unreadable and special files are warned about
    and counted as skipped.

    ``symlinks``: ``"files"`` (the default) follows links to files but never crosses a
    symlinked directory (noted, unless ``quiet``); ``"all"`` crosses them too
    (``--follow-symlinks``), each real directory once, so loops (``a -> .``,
    ``sub/up -> ..``) end; ``"none"`` leaves every symlink out
    (``--no-follow-symlinks``, as the aws CLI). A walk of a destination, whose files
    may be deleted, uses ``"files"``: nothing outside it is ever reached.
    """
    root_st = os.stat(root)
    walked = {(root_st.st_dev, root_st.st_ino)}
    stack = [(root, "")]
    while stack:
        dirpath, rel_dir = stack.pop()
        try:
            with os.scandir(dirpath) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as e:
            out.warn(f"skipping {dirpath}: {e.strerror}")
            outcome.skipped += 1
            continue
        subdirs: list[tuple[str, str]] = []
        for entry in entries:
            path, rel = entry.path, rel_dir + entry.name
            link = entry.is_symlink()
            if link and symlinks == "none":
                continue
            try:
                st = os.stat(path)
            except OSError as e:
                out.warn(f"skipping {path}: {e.strerror}")
                outcome.skipped += 1
                continue
            if stat.S_ISDIR(st.st_mode):
                if link and symlinks != "all":
                    if not quiet:
                        out.warn(
                            f"not following symlinked directory {path} (--follow-symlinks does)"
                        )
                    continue
                ident = (st.st_dev, st.st_ino)
                if ident in walked:
                    if not quiet:
                        out.warn(f"not following {path}: its directory is walked already")
                    continue
                walked.add(ident)
                subdirs.append((path, rel + "/"))
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
        stack.extend(reversed(subdirs))


def inside(root: str, path: str) -> bool:
    """True when no component of ``path`` below ``root`` is a symlink to elsewhere (a
    deletion at ``path`` then happens in the tree under ``root``, nowhere else)."""
    real_root = os.path.realpath(root)
    rel = os.path.relpath(os.path.dirname(os.path.abspath(path)), os.path.abspath(root))
    expected = os.path.normpath(os.path.join(real_root, rel))
    return (
        rel != ".."
        and not rel.startswith(".." + os.sep)
        and (os.path.realpath(os.path.dirname(os.path.abspath(path))) == expected)
    )


def key_prefix(src: RemotePath) -> str:
    """The prefix the objects under ``src`` share: its key as a "directory" ("" for a
    bucket); for a key with wildcards, the prefix before the first one, to its last ``/``."""
    if has_wildcard(src.key):
        return wildcard_base(src.key)
    return src.as_prefix().key if src.key else ""


def list_objects(
    client: Client, src: RemotePath, *, markers: bool = False, page_size: int = 1000
) -> Iterator[tuple[str, ObjectSummary]]:
    """Objects under ``src`` as a prefix (or matching its wildcards, ``*`` crossing
    ``/`` as in s5cmd), as (key relative to the prefix, summary), listed ``page_size``
    keys a request. Folder markers (keys ending in ``/``: no file to copy) only with
    ``markers`` (what ``rm`` deletes)."""
    prefix = key_prefix(src)
    pattern = key_pattern(src.key) if has_wildcard(src.key) else None
    for entry in client.list_objects(src.bucket, prefix=prefix, page_size=page_size):
        if not isinstance(entry, ObjectSummary) or (entry.key.endswith("/") and not markers):
            continue
        if pattern is not None and not pattern.match(entry.key):
            continue
        yield entry.key[len(prefix) :], entry


# Storage classes whose objects the service will not read or copy until restored (S3
# API reference, GetObject: InvalidObjectState); a listing does not say which are.
ARCHIVE_CLASSES = frozenset({"GLACIER", "DEEP_ARCHIVE"})


def archive_warning(where: str, storage_class: str | None, action: str) -> str:
    """The warning for an object the service holds in an archive storage class."""
    of = f"its storage class is {storage_class}" if storage_class else "it is archived"
    return (
        f"skipping {where}: {of}, and the service will not {action} it until it is "
        "restored (--force-glacier-transfer tries it, for restored objects; "
        "--ignore-glacier-warnings skips it quietly)"
    )


def skip_archived(
    archived: Archived,
    where: str,
    storage_class: str | None,
    action: str,
    out: Output,
    count: Callable[[], None],
) -> bool:
    """Whether to skip an archived object, as the aws CLI does: warned and counted
    (``count()``; exit 2), or quietly with ``"ignore"``; never with ``"force"``."""
    if archived == "force":
        return False
    if archived == "warn":
        out.warn(archive_warning(where, storage_class, action))
        count()
    return True


def leave_archived(
    summary: ObjectSummary,
    bucket: str,
    action: str,
    archived: Archived,
    out: Output,
    outcome: Outcome,
) -> bool:
    """Whether to leave out a listed object in an archive storage class
    (:func:`skip_archived`; with ``"force"`` it is tried: restored objects can be read,
    and the listing cannot say which are)."""
    if summary.storage_class not in ARCHIVE_CLASSES:
        return False

    def count() -> None:
        outcome.skipped += 1

    where = f"s3://{bucket}/{summary.key}"
    return skip_archived(archived, where, summary.storage_class, action, out, count)


def safe_local_name(src: RemotePath, key: str, out: Output, outcome: Outcome) -> str | None:
    """``key`` relative to ``src``'s prefix as a safe relative local path; None (warned,
    counted as skipped) when it is not one."""
    rel = safe_relative(key, key_prefix(src))
    if rel is None:
        out.warn(f"skipping s3://{src.bucket}/{key}: not a safe local path")
        outcome.skipped += 1
    return rel


def local_target(
    root: str, rel: str, symlinks: Symlinks, src: str, out: Output, outcome: Outcome
) -> str | None:
    """The local path for ``rel`` under ``root``, or None (warned, counted as skipped)
    when a symlinked directory inside ``root`` would take the write elsewhere and
    ``--follow-symlinks`` was not given. Folders are looked up once per plan: call
    :func:`new_plan` before each."""
    path = local_file(root, rel)
    if symlinks != "all" and not _folder_inside(root, os.path.dirname(path)):
        out.warn(
            f"skipping {src}: {path} is reached through a symlinked directory "
            "(--follow-symlinks writes through it)"
        )
        outcome.skipped += 1
        return None
    return path


@functools.lru_cache(maxsize=4096)
def _folder_inside(root: str, folder: str) -> bool:
    """:func:`inside` for the files of one folder, looked up once per plan (the many
    files of a folder share the answer)."""
    return inside(root, os.path.join(folder, "x"))


def new_plan() -> None:
    """Forget the folders :func:`local_target` looked up (the disk may have changed)."""
    _folder_inside.cache_clear()


def local_file(root: str, rel: str) -> str:
    """The local path of ``rel`` (a relative posix path) under the directory ``root``."""
    return os.path.join(root, *rel.split("/"))
