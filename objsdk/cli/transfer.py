"""``cp`` and ``sync``: planning which objects and files move where, then moving them.

A plan is a list of :class:`Job` values (pure data); :func:`run_jobs` carries them out,
one at a time in the calling thread for a single transfer, ``--jobs`` at a time in a
thread pool for many. Interruption (Ctrl-C) cancels every transfer in flight through its
progress callback, so each one cleans up as on any failure: an upload aborts its
multipart upload, a download keeps its resumable temporary file (never the final name).
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import stat
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, cast

import crc32c

from objsdk import ObjectSummary, errors

from .errors import EXIT_BAD_ARGS, EXIT_FAILED, EXIT_OK, EXIT_SKIPPED, CliError, message_for
from .output import Output, Progress
from .paths import LocalPath, Location, RemotePath, parse_location, safe_relative

if TYPE_CHECKING:
    from objsdk import Client

__all__ = ["Job", "TransferOptions", "plan_cp", "plan_sync", "run_jobs"]

Kind = Literal["upload", "download", "copy", "stdin", "stdout", "delete"]
MAX_COPY = 5 << 30  # S3's limit for one CopyObject
STREAM_CHUNK = 1 << 20


@dataclass(frozen=True)
class Job:
    """One transfer (or, for sync --delete, one deletion)."""

    kind: Kind
    src: Location | None
    dst: Location
    size: int = 0
    mtime: datetime | None = None  # the source object's date, given to downloaded files

    def describe(self) -> str:
        if self.kind == "delete":
            return f"delete: {self.dst}"
        action = {"stdin": "upload", "stdout": "download"}.get(self.kind, self.kind)
        return f"{action}: {self.src} to {self.dst}"


@dataclass(frozen=True)
class TransferOptions:
    parallel: int = 4
    jobs: int = 4
    part_size: int | None = None
    multipart_threshold: int | None = None
    content_type: str | None = None


@dataclass
class Outcome:
    done: int = 0
    failed: int = 0
    skipped: int = 0
    bytes: int = 0
    reused: int = 0  # bytes a resumed download found already on disk


class Cancelled(Exception):
    """Raised from progress callbacks to stop transfers after Ctrl-C."""


# -- planning ------------------------------------------------------------------------------


def _walk(root: str, out: Output, outcome: Outcome) -> Iterator[tuple[str, os.stat_result]]:
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


def _list(client: Client, src: RemotePath) -> Iterator[tuple[str, ObjectSummary]]:
    """Objects under ``src`` as a prefix, as (key relative to it, summary)."""
    prefix = src.as_prefix().key if src.key else ""
    for entry in client.list_objects(src.bucket, prefix=prefix):
        if isinstance(entry, ObjectSummary) and not entry.key.endswith("/"):
            yield entry.key[len(prefix) :], entry


def _local_target(dst: LocalPath, name: str) -> str:
    path = dst.path
    if path.endswith(("/", os.sep)) or os.path.isdir(path):
        return os.path.join(path, name)
    return path


def plan_cp(
    client: Client, source: str, dest: str, *, recursive: bool, out: Output, outcome: Outcome
) -> list[Job]:
    """The jobs ``cp source dest`` means (raises CliError for impossible combinations)."""
    src, dst = parse_location(source), parse_location(dest)
    if isinstance(src, LocalPath) and isinstance(dst, LocalPath):
        raise CliError("cp needs at least one s3:// location (for local copies use cp(1))", 252)
    if recursive:
        return _plan_recursive(client, src, dst, out, outcome)

    if isinstance(src, LocalPath):
        assert isinstance(dst, RemotePath)
        if src.is_stdio:
            if dst.is_prefix:
                raise CliError(f"give a full key to upload standard input to, not {dst}", 252)
            return [Job("stdin", src, dst)]
        if os.path.isdir(src.path):
            raise CliError(f"{src.path} is a directory (use --recursive)", EXIT_BAD_ARGS)
        if not os.path.exists(src.path):
            raise CliError(f"no such file: {src.path}", EXIT_BAD_ARGS)
        target = dst.join(os.path.basename(src.path)) if dst.is_prefix else dst
        return [Job("upload", src, target, os.path.getsize(src.path))]

    if src.is_prefix:
        raise CliError(f"{src} is a prefix, not an object (use --recursive)", EXIT_BAD_ARGS)
    if isinstance(dst, LocalPath):
        if dst.is_stdio:
            return [Job("stdout", src, dst)]
        return [Job("download", src, LocalPath(_local_target(dst, src.name)))]
    target = dst.join(src.name) if dst.is_prefix else dst
    return [Job("copy", src, target)]


def _plan_recursive(
    client: Client, src: Location, dst: Location, out: Output, outcome: Outcome
) -> list[Job]:
    if isinstance(src, LocalPath):
        assert isinstance(dst, RemotePath)
        if src.is_stdio or not os.path.isdir(src.path):
            raise CliError(f"--recursive needs a local directory, got {src.path}", EXIT_BAD_ARGS)
        return [
            Job("upload", LocalPath(os.path.join(src.path, rel)), dst.join(rel), st.st_size)
            for rel, st in _walk(src.path, out, outcome)
        ]
    jobs: list[Job] = []
    prefix = src.as_prefix().key if src.key else ""
    for _, summary in _list(client, src):
        if isinstance(dst, LocalPath):
            if dst.is_stdio:
                raise CliError("--recursive cannot write to standard output", EXIT_BAD_ARGS)
            rel = safe_relative(summary.key, prefix)
            if rel is None:
                out.warn(f"skipping s3://{src.bucket}/{summary.key}: not a safe local path")
                outcome.skipped += 1
                continue
            target: Location = LocalPath(os.path.join(dst.path, *rel.split("/")))
            kind: Kind = "download"
        else:
            target = dst.join(summary.key[len(prefix) :])
            kind = "copy"
        jobs.append(
            Job(
                kind,
                RemotePath(src.bucket, summary.key),
                target,
                summary.size,
                summary.last_modified,
            )
        )
    return jobs


# -- sync ----------------------------------------------------------------------------------


def local_crc32c(path: str) -> str:
    value = 0
    with open(path, "rb") as f:
        while chunk := f.read(STREAM_CHUNK):
            value = crc32c.crc32c(chunk, value)
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


def plan_sync(
    client: Client,
    source: str,
    dest: str,
    *,
    checksum: bool,
    delete: bool,
    out: Output,
    outcome: Outcome,
) -> list[Job]:
    """What ``sync`` copies (new, or changed by size, by date, or by checksum) and deletes."""
    src, dst = parse_location(source), parse_location(dest)
    if isinstance(src, LocalPath) and isinstance(dst, LocalPath):
        raise CliError("sync needs at least one s3:// location", EXIT_BAD_ARGS)
    if (isinstance(src, LocalPath) and src.is_stdio) or (
        isinstance(dst, LocalPath) and dst.is_stdio
    ):
        raise CliError("sync works on directories and prefixes, not standard streams", 252)
    jobs: list[Job] = []

    if isinstance(src, LocalPath):
        assert isinstance(dst, RemotePath)
        if not os.path.isdir(src.path):
            raise CliError(f"no such directory: {src.path}", EXIT_BAD_ARGS)
        remote = dict(_list(client, dst))
        seen = set()
        for rel, st in _walk(src.path, out, outcome):
            seen.add(rel)
            path = os.path.join(src.path, rel)
            target = dst.join(rel)
            have = remote.get(rel)
            if have is not None and have.size == st.st_size:
                if checksum:
                    if _same_content_local_remote(client, path, target):
                        continue
                elif have.last_modified is None or st.st_mtime <= have.last_modified.timestamp():
                    continue
            jobs.append(Job("upload", LocalPath(path), target, st.st_size))
        if delete:
            jobs += [Job("delete", None, dst.join(rel)) for rel in sorted(set(remote) - seen)]
        return jobs

    if isinstance(dst, LocalPath):
        local: dict[str, os.stat_result] = {}
        if os.path.isdir(dst.path):
            local = dict(_walk(dst.path, out, Outcome()))
        elif os.path.exists(dst.path):
            raise CliError(f"{dst.path} exists and is not a directory", EXIT_BAD_ARGS)
        seen = set()
        prefix = src.as_prefix().key if src.key else ""
        for _rel, summary in _list(client, src):
            safe = safe_relative(summary.key, prefix)
            if safe is None:
                out.warn(f"skipping s3://{src.bucket}/{summary.key}: not a safe local path")
                outcome.skipped += 1
                continue
            seen.add(safe)
            path = os.path.join(dst.path, *safe.split("/"))
            st_local = local.get(safe)
            if st_local is not None and st_local.st_size == summary.size:
                if checksum:
                    if _same_content_local_remote(
                        client, path, RemotePath(src.bucket, summary.key)
                    ):
                        continue
                elif (
                    summary.last_modified is None
                    or summary.last_modified.timestamp() <= st_local.st_mtime
                ):
                    continue
            jobs.append(
                Job(
                    "download",
                    RemotePath(src.bucket, summary.key),
                    LocalPath(path),
                    summary.size,
                    summary.last_modified,
                )
            )
        if delete:
            for rel in sorted(set(local) - seen):
                jobs.append(Job("delete", None, LocalPath(os.path.join(dst.path, *rel.split("/")))))
        return jobs

    dst_objects = dict(_list(client, dst))
    seen = set()
    for rel, summary in _list(client, src):
        seen.add(rel)
        have = dst_objects.get(rel)
        source_path = RemotePath(src.bucket, summary.key)
        target = dst.join(rel)
        if have is not None and have.size == summary.size:
            if checksum:
                if _same_content_remote_remote(client, source_path, target):
                    continue
            elif (
                summary.last_modified is None
                or have.last_modified is None
                or summary.last_modified <= have.last_modified
            ):
                continue
        jobs.append(Job("copy", source_path, target, summary.size, summary.last_modified))
    if delete:
        jobs += [Job("delete", None, dst.join(rel)) for rel in sorted(set(dst_objects) - seen)]
    return jobs


# -- running -------------------------------------------------------------------------------


class Runner:
    """Carries out jobs; shared state for cancellation and the progress bar."""

    def __init__(self, client: Client, opts: TransferOptions, out: Output, outcome: Outcome):
        self.client = client
        self.opts = opts
        self.out = out
        self.outcome = outcome
        self.cancel = threading.Event()
        self.lock = threading.Lock()
        self.progress: Progress | None = None

    def check(self) -> None:
        if self.cancel.is_set():
            raise Cancelled("interrupted")

    def callback(self) -> Callable[[int, Any], None]:
        assert self.progress is not None
        return self.progress.callback(self.check)

    def run_one(self, job: Job) -> int:
        """Carry out ``job``; return the bytes moved."""
        c = self.client
        self.check()
        src, dst = job.src, job.dst
        if job.kind == "delete":
            if isinstance(dst, RemotePath):
                c.delete_object(dst.bucket, dst.key)
            else:
                os.unlink(dst.path)
            return 0
        if job.kind == "upload":
            assert isinstance(src, LocalPath)
            assert isinstance(dst, RemotePath)
            kwargs: dict[str, Any] = {"parallel": self.opts.parallel, "progress": self.callback()}
            if self.opts.part_size is not None:
                kwargs["part_size"] = self.opts.part_size
            if self.opts.multipart_threshold is not None:
                kwargs["multipart_threshold"] = self.opts.multipart_threshold
            if self.opts.content_type:
                kwargs["content_type"] = self.opts.content_type
            info = c.upload(dst.bucket, dst.key, src.path, **kwargs)
            return info.size or job.size
        if job.kind == "stdin":
            assert isinstance(dst, RemotePath)
            wkw: dict[str, Any] = {"parallel": self.opts.parallel, "progress": self.callback()}
            if self.opts.part_size is not None:
                wkw["part_size"] = self.opts.part_size
            if self.opts.content_type:
                wkw["content_type"] = self.opts.content_type
            total = 0
            stdin = cast(io.BufferedReader, sys.stdin.buffer)
            buf = bytearray(STREAM_CHUNK)
            view = memoryview(buf)
            with c.open_write(dst.bucket, dst.key, **wkw) as w:
                while n := stdin.readinto(view):
                    self.check()
                    w.write(view[:n])
                    total += n
            return total
        if job.kind == "download":
            assert isinstance(src, RemotePath)
            assert isinstance(dst, LocalPath)
            parent = os.path.dirname(dst.path)
            if parent:
                os.makedirs(parent, exist_ok=True)
            result = c.download(
                src.bucket,
                src.key,
                dst.path,
                parallel=self.opts.parallel,
                progress=self.callback(),
                **({"part_size": self.opts.part_size} if self.opts.part_size else {}),
            )
            mtime = job.mtime or result.info.last_modified
            if mtime is not None:
                ts = mtime.timestamp()
                os.utime(dst.path, (ts, ts))
            size = result.info.size or 0
            with self.lock:
                self.outcome.reused += size - result.bytes_fetched
            return size
        if job.kind == "stdout":
            assert isinstance(src, RemotePath)
            return stream_to_stdout(c, src, 0, None, self.check)
        assert job.kind == "copy"
        assert isinstance(src, RemotePath)
        assert isinstance(dst, RemotePath)
        size = job.size or (c.head_object(src.bucket, src.key).size or 0)
        if size <= MAX_COPY:
            c.copy_object(src.bucket, src.key, dst.bucket, dst.key)
            if self.progress is not None:
                self.progress.add(size)
            return size
        # Above one CopyObject's limit: stream through this machine (resumable reader,
        # multipart writer) rather than fail.
        with (
            c.open(src.bucket, src.key) as r,
            c.open_write(dst.bucket, dst.key, parallel=self.opts.parallel) as w,
        ):
            buf = bytearray(8 * STREAM_CHUNK)
            while n := r.readinto(buf):
                self.check()
                w.write(memoryview(buf)[:n])
                if self.progress is not None:
                    self.progress.add(n)
        return size


def stream_to_stdout(
    client: Client,
    src: RemotePath,
    offset: int,
    length: int | None,
    check: Callable[[], None] | None = None,
) -> int:
    """Copy the object's bytes (from ``offset``, ``length`` of them) to standard output."""
    out = sys.stdout.buffer
    sent = 0
    buf = bytearray(STREAM_CHUNK)
    view = memoryview(buf)
    with client.open(src.bucket, src.key) as f:
        if offset:
            f.seek(offset)
        while length is None or sent < length:
            want = STREAM_CHUNK if length is None else min(STREAM_CHUNK, length - sent)
            n = f.readinto(view[:want])
            if not n:
                break
            if check is not None:
                check()
            out.write(view[:n])
            sent += n
    out.flush()
    return sent


def run_jobs(
    client: Client,
    jobs: list[Job],
    opts: TransferOptions,
    out: Output,
    outcome: Outcome,
    *,
    dry_run: bool = False,
    single: bool = False,
) -> int:
    """Carry out ``jobs`` and return the exit code (0, 1 if any failed, 2 if any skipped).

    ``single``: one transfer the user named; its error propagates as it is (so a missing
    key is a service error, 254) instead of being counted as a failed transfer.
    """
    started = time.monotonic()
    if dry_run:
        for job in jobs:
            out.note(f"(dryrun) {job.describe()}")
        out.json({"dryrun": True, "planned": [_job_json(j) for j in jobs]})
        return EXIT_SKIPPED if outcome.skipped else EXIT_OK

    runner = Runner(client, opts, out, outcome)
    total = sum(j.size for j in jobs)
    desc = "transfer" if len(jobs) != 1 else jobs[0].kind
    with out.progress(total, desc) as progress:
        runner.progress = progress
        try:
            if single or len(jobs) <= 1 or opts.jobs <= 1:
                for job in jobs:
                    _run_reported(runner, job, propagate=single)
            else:
                _run_pool(runner, jobs)
        except KeyboardInterrupt:
            runner.cancel.set()
            raise
    if any(j.kind == "stdout" for j in jobs):
        # Standard output carries the object itself: no summary after it.
        return EXIT_FAILED if outcome.failed else EXIT_OK
    out.json(
        {
            "transferred": outcome.done,
            "failed": outcome.failed,
            "skipped": outcome.skipped,
            "bytes": outcome.bytes,
            "bytes_reused": outcome.reused,
            "seconds": round(time.monotonic() - started, 3),
        }
    )
    if outcome.failed:
        return EXIT_FAILED
    if outcome.skipped:
        return EXIT_SKIPPED
    return EXIT_OK


def _job_json(job: Job) -> dict[str, Any]:
    action = {"stdin": "upload", "stdout": "download"}.get(job.kind, job.kind)
    return {
        "action": action,
        "source": None if job.src is None else str(job.src),
        "dest": str(job.dst),
    }


def _run_reported(runner: Runner, job: Job, *, propagate: bool) -> None:
    try:
        n = runner.run_one(job)
    except (KeyboardInterrupt, Cancelled):
        raise
    except BrokenPipeError:
        raise
    except Exception as e:
        if propagate and not isinstance(
            e, errors.ReadError | errors.SourceChangedError | errors.ProtocolError | errors.Timeout
        ):
            raise
        with runner.lock:
            runner.outcome.failed += 1
        print(f"{job.describe()} failed: {message_for(e)}", file=sys.stderr, flush=True)
        return
    with runner.lock:
        runner.outcome.done += 1
        runner.outcome.bytes += n
    if job.kind != "stdout":
        runner.out.note(job.describe())


def _run_pool(runner: Runner, jobs: list[Job]) -> None:
    pool = ThreadPoolExecutor(max_workers=runner.opts.jobs, thread_name_prefix="objsdk-cp")
    pending: set[Future[None]] = set()
    try:
        it = iter(jobs)
        for job in it:
            pending.add(pool.submit(_run_reported, runner, job, propagate=False))
            if len(pending) >= runner.opts.jobs * 2:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for f in done:
                    f.result()
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for f in done:
                f.result()
    except BaseException:
        runner.cancel.set()
        for f in pending:
            f.cancel()
        # Transfers in flight see the cancellation at their next progress report and
        # clean up (abort the multipart upload, keep the download's resumable file).
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)


def check_dest_bucket(client: Client, jobs: list[Job]) -> None:
    """Fail once, up front, when the destination bucket is missing (not once per file)."""
    buckets = {j.dst.bucket for j in jobs if isinstance(j.dst, RemotePath)}
    for b in sorted(buckets):
        if not client.bucket_exists(b):
            raise errors.NoSuchBucket(
                404, "NoSuchBucket", "The specified bucket does not exist", bucket=b
            )
