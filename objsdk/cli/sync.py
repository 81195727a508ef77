"""``sync``: which objects and files are new or changed (by size, by date, or by
checksum) and so move, and which ``--delete`` removes."""

from __future__ import annotations

import base64
import hashlib
import math
import os
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

from .._core.checksums import crc32c
from .errors import EXIT_BAD_ARGS, CliError
from .jobs import STREAM_CHUNK, Job, Outcome, PlanOptions
from .listing import (
    leave_archived,
    list_objects,
    local_file,
    local_target,
    new_plan,
    safe_local_name,
    walk_files,
)
from .output import Output
from .paths import LocalPath, RemotePath, parse_location

if TYPE_CHECKING:
    from objsdk import Client, ObjectSummary

__all__ = ["local_crc32c", "local_md5", "plan_sync"]


def local_crc32c(path: str) -> str:
    value = 0
    with open(path, "rb") as f:
        while chunk := f.read(STREAM_CHUNK):
            value = crc32c(chunk, value)
    return base64.b64encode(value.to_bytes(4, "big")).decode()


def local_md5(path: str) -> str:
    h = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as f:
        while chunk := f.read(STREAM_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def _same_content_local_remote(client: Client, path: str, remote: RemotePath) -> bool:
    """True when the stored CRC32C (or a single-part ETag's MD5) matches the file's."""
    info = client.head_object(remote.bucket, remote.key)
    stored = info.checksums.get("crc32c")
    if stored and "-" not in stored and info.checksum_type in (None, "FULL_OBJECT"):
        return stored == local_crc32c(path)
    etag = (info.etag or "").strip('"')
    if etag and "-" not in etag:
        return etag == local_md5(path)
    return False  # nothing comparable is stored: copy to be sure


def _same_content_remote_remote(client: Client, a: RemotePath, b: RemotePath) -> bool:
    ia, ib = client.head_object(a.bucket, a.key), client.head_object(b.bucket, b.key)
    ca, cb = ia.checksums.get("crc32c"), ib.checksums.get("crc32c")
    if ca and cb:
        return ca == cb
    return bool(ia.etag) and ia.etag == ib.etag and "-" not in (ia.etag or "")


def _seconds(t: float) -> int:
    """A time to the whole second: many services (AWS, moto, SeaweedFS, s3rver) keep
    LastModified in whole seconds, so a file changed within the second of its upload,
    compared to the sub-second, would look newer than its object forever."""
    return math.floor(t)


def _unchanged_by_time(src_time: float | None, dst_time: float | None, exact: bool) -> bool:
    """True when times say the destination is current: it is not older than the source
    (to the second), or with ``exact`` (``--exact-timestamps``) the same second."""
    if src_time is None or dst_time is None:
        return True
    if exact:
        return _seconds(src_time) == _seconds(dst_time)
    return _seconds(src_time) <= _seconds(dst_time)


#: What sync compares of a file or an object: its size, and when it was last modified
#: (seconds since the epoch; None if not told).
_Side = tuple[int, float | None]


def _file_side(st: os.stat_result | None) -> _Side | None:
    return None if st is None else (st.st_size, st.st_mtime)


def _object_side(summary: ObjectSummary | None) -> _Side | None:
    if summary is None:
        return None
    modified = summary.last_modified
    return summary.size, None if modified is None else modified.timestamp()


def _current(
    opts: PlanOptions,
    src: _Side | None,
    dst: _Side | None,
    same_content: Callable[[], bool],
    *,
    exact: bool = False,
) -> bool:
    """True when the destination ``dst`` (None: there is none) is current, so sync leaves
    it: it has the source's size and ``--size-only`` is given, or with ``--checksum``
    ``same_content()``, or else the times say so (:func:`_unchanged_by_time`)."""
    if src is None or dst is None or src[0] != dst[0]:
        return False
    if opts.size_only:
        return True
    if opts.checksum:
        return same_content()
    return _unchanged_by_time(src[1], dst[1], exact)


def plan_sync(
    client: Client,
    source: str,
    dest: str,
    *,
    opts: PlanOptions,
    out: Output,
    outcome: Outcome,
) -> list[Job]:
    """What ``sync`` copies (new, or changed by size, by date, or by checksum) and deletes.

    ``--exclude``/``--include`` apply to both sides: a file they leave out is neither
    copied nor deleted.
    """
    new_plan()
    src, dst = parse_location(source), parse_location(dest)
    if isinstance(src, LocalPath) and isinstance(dst, LocalPath):
        raise CliError("sync needs at least one s3:// location", EXIT_BAD_ARGS)
    if (isinstance(src, LocalPath) and src.is_stdio) or (
        isinstance(dst, LocalPath) and dst.is_stdio
    ):
        raise CliError("sync works on directories and prefixes, not standard streams", 252)
    if isinstance(src, LocalPath):
        assert isinstance(dst, RemotePath)
        return _sync_up(client, src, dst, opts, out, outcome)
    if isinstance(dst, LocalPath):
        return _sync_down(client, src, dst, opts, out, outcome)
    return _sync_remote(client, src, dst, opts, out, outcome)


def _sync_up(
    client: Client,
    src: LocalPath,
    dst: RemotePath,
    opts: PlanOptions,
    out: Output,
    outcome: Outcome,
) -> list[Job]:
    """A local directory to a prefix: uploads, and deletions of objects with no file."""
    if not os.path.isdir(src.path):
        found = "is not one" if os.path.lexists(src.path) else "does not exist"
        raise CliError(f"sync needs a local directory: {src.path} {found}", EXIT_BAD_ARGS)
    accepts = opts.filters.accepts
    jobs: list[Job] = []
    remote = {rel: s for rel, s in list_objects(client, dst) if accepts(rel)}
    seen = set()
    for rel, st in walk_files(src.path, out, outcome, symlinks=opts.symlinks):
        if not accepts(rel):
            continue
        seen.add(rel)
        path = os.path.join(src.path, rel)
        target = dst.join(rel)
        same = partial(_same_content_local_remote, client, path, target)
        if _current(opts, _file_side(st), _object_side(remote.get(rel)), same):
            continue
        jobs.append(Job("upload", LocalPath(path), target, st.st_size))
    if opts.delete:
        jobs += [Job("delete", None, dst.join(rel)) for rel in sorted(set(remote) - seen)]
    return jobs


def _sync_down(
    client: Client,
    src: RemotePath,
    dst: LocalPath,
    opts: PlanOptions,
    out: Output,
    outcome: Outcome,
) -> list[Job]:
    """A prefix to a local directory: downloads, and deletions of files with no object."""
    accepts = opts.filters.accepts
    local: dict[str, os.stat_result] = {}
    if os.path.isdir(dst.path):
        # Never across a symlinked directory, whatever --follow-symlinks says: what this
        # walk finds, --delete may remove.
        walk = walk_files(dst.path, out, Outcome(), symlinks="files", quiet=True)
        local = {rel: st for rel, st in walk if accepts(rel)}
    elif os.path.exists(dst.path):
        raise CliError(f"{dst.path} exists and is not a directory", EXIT_BAD_ARGS)
    jobs: list[Job] = []
    seen = set()
    for rel, summary in list_objects(client, src):
        if not accepts(rel):
            continue
        safe = safe_local_name(src, summary.key, out, outcome)
        if safe is None:
            continue
        seen.add(safe)  # an archived object left out keeps its file from --delete
        if leave_archived(summary, src.bucket, "download", opts.archived, out, outcome):
            continue
        where = f"s3://{src.bucket}/{summary.key}"
        path = local_target(dst.path, safe, opts.symlinks, where, out, outcome)
        if path is None:
            continue
        source_path = RemotePath(src.bucket, summary.key)
        same = partial(_same_content_local_remote, client, path, source_path)
        there = _file_side(local.get(safe))
        if _current(opts, _object_side(summary), there, same, exact=opts.exact_timestamps):
            continue
        jobs.append(
            Job(
                "download",
                source_path,
                LocalPath(path),
                summary.size,
                summary.last_modified,
                listed=True,
            )
        )
    if opts.delete:
        for rel in sorted(set(local) - seen):
            jobs.append(Job("delete", None, LocalPath(local_file(dst.path, rel)), root=dst.path))
    return jobs


def _sync_remote(
    client: Client,
    src: RemotePath,
    dst: RemotePath,
    opts: PlanOptions,
    out: Output,
    outcome: Outcome,
) -> list[Job]:
    """A prefix to a prefix: server-side copies, and deletions of objects not in ``src``."""
    accepts = opts.filters.accepts
    jobs: list[Job] = []
    dst_objects = {rel: s for rel, s in list_objects(client, dst) if accepts(rel)}
    seen = set()
    for rel, summary in list_objects(client, src):
        if not accepts(rel):
            continue
        seen.add(rel)  # an archived object left out keeps its copy from --delete
        if leave_archived(summary, src.bucket, "copy", opts.archived, out, outcome):
            continue
        source_path = RemotePath(src.bucket, summary.key)
        target = dst.join(rel)
        same = partial(_same_content_remote_remote, client, source_path, target)
        if _current(opts, _object_side(summary), _object_side(dst_objects.get(rel)), same):
            continue
        jobs.append(
            Job("copy", source_path, target, summary.size, summary.last_modified, listed=True)
        )
    if opts.delete:
        jobs += [Job("delete", None, dst.join(rel)) for rel in sorted(set(dst_objects) - seen)]
    return jobs
