"""``cp`` and ``sync``'s transfers carried out: :func:`run_jobs` runs a plan
(from :mod:`.plan` or :mod:`.sync`), one job at a time in the calling thread for a single
transfer, ``--jobs`` at a time in a thread pool for many. Interruption (Ctrl-C) cancels
every transfer in flight through its progress callback, so each one cleans up as on any
failure: an upload aborts its multipart upload, a download keeps its resumable temporary
file (never the final name).
"""

from __future__ import annotations

import io
import os
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import TYPE_CHECKING, Any, cast

from objsdk import errors

from .errors import EXIT_FAILED, EXIT_OK, EXIT_SKIPPED, message_for
from .jobs import STREAM_CHUNK, Cancelled, Job, Outcome, TransferOptions
from .output import Output, Progress
from .paths import LocalPath, RemotePath

if TYPE_CHECKING:
    from objsdk import Client

__all__ = ["check_dest_bucket", "run_jobs", "stream_to_stdout"]

MAX_COPY = 5 << 30  # S3's limit for one CopyObject


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

    def write_options(self) -> dict[str, Any]:
        """The keyword arguments an upload or a writer takes from the options."""
        kwargs: dict[str, Any] = {"parallel": self.opts.parallel, "progress": self.callback()}
        if self.opts.part_size is not None:
            kwargs["part_size"] = self.opts.part_size
        if self.opts.content_type:
            kwargs["content_type"] = self.opts.content_type
        return kwargs

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
            kwargs = self.write_options()
            if self.opts.multipart_threshold is not None:
                kwargs["multipart_threshold"] = self.opts.multipart_threshold
            info = c.upload(dst.bucket, dst.key, src.path, **kwargs)
            return info.size or job.size
        if job.kind == "stdin":
            assert isinstance(dst, RemotePath)
            total = 0
            stdin = cast(io.BufferedReader, sys.stdin.buffer)
            buf = bytearray(STREAM_CHUNK)
            view = memoryview(buf)
            with c.open_write(dst.bucket, dst.key, **self.write_options()) as w:
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
                part_size=self.opts.part_size or None,
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
    return {
        "action": job.action,
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
