"""The records this machine keeps of its uploads, taken together: where they are, the
uploads of a bucket they record, forgetting the records of aborted uploads, and pruning
those idle for a week (:data:`~objsdk._core.upload_record.IDLE_SECONDS`). One record and
its upload's run are :mod:`objsdk._transfer.upload_resume`'s."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Iterator
from datetime import timedelta

from objsdk import errors
from objsdk._core.upload_record import IDLE_SECONDS, MAX_RECORD_BYTES, UploadRecord, parse_record
from objsdk._transfer.download_state import O_NOFOLLOW, cache_dir
from objsdk._transfer.multipart_calls import abort_multipart_upload, uploads_older_than
from objsdk._transport.base import Transport
from objsdk.models import MultipartUpload

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no lock, uploads still resume
    fcntl = None  # type: ignore[assignment]

__all__ = ["abort_uploads", "prune", "recorded_uploads", "uploads_dir"]

log = logging.getLogger("objsdk")

# How often one process prunes idle records, at most (a directory listing each time).
_PRUNE_EVERY = 600.0
_pruned: dict[str, float] = {}
_pruned_lock = threading.Lock()
# A temp file left by a crash mid-write is removed once this old.
_STALE_TEMP = 24 * 3600


def uploads_dir() -> str:
    """Where the records of uploads are kept: ``$XDG_CACHE_HOME/objsdk/uploads``."""
    return os.path.join(cache_dir(), "uploads")


def abort_uploads(
    transport: Transport,
    bucket: str,
    prefix: str,
    *,
    older_than: timedelta | None,
    dry_run: bool,
    exact: bool = False,
    upload_id: str | None = None,
) -> list[MultipartUpload]:
    """Abort the multipart uploads under ``prefix`` (``exact``: of the key ``prefix``;
    ``upload_id``: only that one of it) initiated more than ``older_than`` ago (None:
    all), and forget the records this machine keeps of them; return them (``dry_run``:
    only return them)."""
    if older_than is not None and older_than < timedelta(0):
        raise errors.InvalidArgument(f"older_than must not be negative, got {older_than}")
    uploads = uploads_older_than(
        transport, bucket, prefix, older_than, exact=exact or upload_id is not None
    )
    if upload_id is not None:
        uploads = [up for up in uploads if up.upload_id == upload_id]
    if dry_run or not uploads:
        return uploads
    for up in uploads:
        abort_multipart_upload(transport, bucket, up.key, up.upload_id)
    gone = {up.upload_id for up in uploads}
    for base, record in _records(transport.endpoint.url, bucket):
        if record.upload_id in gone:
            _prune_record(base, idle=False)
    return uploads


def recorded_uploads(endpoint: str, bucket: str) -> dict[str, str]:
    """The uploads to ``bucket`` on ``endpoint`` this machine keeps records of, by
    upload id: the file each one is of (a run of the same upload resumes it)."""
    return {record.upload_id: record.path for _, record in _records(endpoint, bucket)}


def _records(endpoint: str, bucket: str) -> Iterator[tuple[str, UploadRecord]]:
    """Each record in the records' directory of an upload to ``bucket`` on
    ``endpoint``, with its path less ``.json`` (only its first line is read)."""
    directory = uploads_dir()
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return
    for name in names:
        if not name.endswith(".json"):
            continue
        base = os.path.join(directory, name[: -len(".json")])
        try:
            fd = os.open(base + ".json", os.O_RDONLY | O_NOFOLLOW)
        except OSError:
            continue
        with os.fdopen(fd, "rb") as f:
            first = f.readline(MAX_RECORD_BYTES)
        found = parse_record(first)
        if found is not None and (found[0].endpoint, found[0].bucket) == (endpoint, bucket):
            yield base, found[0]


def prune(directory: str) -> None:
    """Remove the records in ``directory`` idle for a week (and stale temp files), at
    most once every ten minutes per process; a record whose upload runs is locked and
    kept."""
    now = time.monotonic()
    with _pruned_lock:
        if now - _pruned.get(directory, -_PRUNE_EVERY) < _PRUNE_EVERY:
            return
        _pruned[directory] = now
    try:
        names = os.listdir(directory)
    except OSError:
        return
    wall = time.time()
    for name in names:
        path = os.path.join(directory, name)
        try:
            age = wall - os.stat(path, follow_symlinks=False).st_mtime
        except OSError:
            continue
        if name.endswith(".tmp") and age > _STALE_TEMP:
            with contextlib.suppress(OSError):
                os.unlink(path)
        elif name.endswith((".json", ".lock")) and age > IDLE_SECONDS:
            _prune_record(path.rsplit(".", 1)[0])


def _prune_record(base: str, *, idle: bool = True) -> None:
    """Remove the record at ``base + ".json"`` unless an upload holds its lock
    (``idle``: it was idle for a week; else its upload was aborted)."""
    lock = base + ".lock"
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | O_NOFOLLOW, 0o600)
    except OSError:
        return
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with contextlib.suppress(OSError):
            os.unlink(base + ".json")
        with contextlib.suppress(OSError):
            os.unlink(lock)
        if idle:
            log.info("pruned the record %s, idle for over a week", base + ".json")
    except OSError:
        return  # locked: its upload runs
    finally:
        os.close(fd)
