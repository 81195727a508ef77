"""A plan (from :mod:`.plan` or :mod:`.sync`) carried out: one job at a time in the
calling thread for a single transfer, ``--jobs`` at a time on one worker pool for many,
every worker on the client's one connection pool. Each finished job prints its line
(``upload: a to s3://b/a``, or a JSON object with ``--json``; a small download once its
file has its final name on disk, so never one whose rename then fails), failures print theirs
on stderr, and a run of many ends with a summary line (files, bytes, rate).
"""

from __future__ import annotations

import functools
import threading
import time
from concurrent.futures import ThreadPoolExecutor, wait
from typing import TYPE_CHECKING, Any

from objsdk import errors

from .errors import EXIT_FAILED, EXIT_OK, EXIT_SKIPPED, error_record, message_for
from .jobs import Cancelled, Job, Outcome, TransferOptions
from .listing import skip_archived
from .output import Output, counted, human_size
from .paths import RemotePath
from .transfer import Runner

if TYPE_CHECKING:
    from objsdk import Client

__all__ = ["check_dest_bucket", "run_jobs"]


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
            out.note(f"(dryrun) {_describe(job, opts)}")
            out.json({**_job_json(job, opts), "dryrun": True})
        out.json({"dryrun": True, "planned": len(jobs)})
        return EXIT_SKIPPED if outcome.skipped else EXIT_OK

    runner = Runner(client, opts, out, outcome)
    total = sum(j.size for j in jobs)
    desc = "transfer" if len(jobs) != 1 else jobs[0].kind
    try:
        with out.progress(total, desc) as progress:
            runner.progress = progress
            try:
                if single or len(jobs) <= 1 or opts.jobs <= 1:
                    for job in jobs:
                        _run_reported(runner, job, propagate=single)
                else:
                    _run_pool(runner, jobs)
            except KeyboardInterrupt as stop:
                runner.cancel.set()
                # What the command line says on its way out: how to resume or discard.
                stop.kept_uploads = list(runner.kept)  # type: ignore[attr-defined]
                raise
    finally:
        # Files complete on disk take their names, durably, even when the run was
        # interrupted: their bytes were verified.
        runner.batch.flush()
        for what, e in runner.batch.failures:
            outcome.failed += 1
            out.error(f"{what} failed: {message_for(e)}", error_record(e))
    if any(j.kind == "stdout" for j in jobs):
        # Standard output carries the object itself: no summary after it.
        if outcome.failed:
            return EXIT_FAILED
        return EXIT_SKIPPED if outcome.skipped else EXIT_OK
    seconds = time.monotonic() - started
    out.json(
        {
            "transferred": outcome.done,
            "deleted": outcome.deleted,
            "failed": outcome.failed,
            "skipped": outcome.skipped,
            "bytes": outcome.bytes,
            "bytes_reused": outcome.reused + outcome.stored,
            "seconds": round(seconds, 3),
        }
    )
    # A rerun after an interruption says what it found on disk, or already stored: it
    # fetched or sent only the rest.
    found = []
    if outcome.reused:
        found.append(f"{human_size(outcome.reused)} of it already on disk")
    if outcome.stored:
        found.append(f"{human_size(outcome.stored)} of it already stored")
    reused = ", ".join(found)
    if not single and (outcome.done or outcome.deleted or outcome.failed):
        rate = human_size(int(outcome.bytes / seconds)) if seconds > 0 else "-"
        parts = []
        if outcome.done or not outcome.deleted:
            parts.append(
                f"{'moved' if opts.move else 'transferred'} {counted(outcome.done, 'file')}, "
                f"{human_size(outcome.bytes)} in {seconds:.1f} s ({rate}/s)"
            )
        if outcome.deleted:
            parts.append(f"deleted {counted(outcome.deleted, 'file')}")
        if reused:
            parts.append(reused)
        if outcome.failed:
            parts.append(f"{outcome.failed} failed")
        if outcome.skipped:
            parts.append(f"{outcome.skipped} skipped")
        out.summary(", ".join(parts))
    elif reused:
        out.summary(f"resumed: {human_size(outcome.bytes)}, {reused}")
    if outcome.failed:
        return EXIT_FAILED
    if outcome.skipped:
        return EXIT_SKIPPED
    return EXIT_OK


def _describe(job: Job, opts: TransferOptions) -> str:
    return job.describe().replace(job.action, "move", 1) if opts.move else job.describe()


def _job_json(job: Job, opts: TransferOptions) -> dict[str, Any]:
    return {
        "action": "move" if opts.move and job.kind != "delete" else job.action,
        "source": None if job.src is None else str(job.src),
        "dest": str(job.dst),
    }


def _run_reported(runner: Runner, job: Job, *, propagate: bool) -> None:
    try:
        runner.run_one(job, functools.partial(_done, runner, job))
    except (KeyboardInterrupt, BrokenPipeError):
        raise
    except Exception as e:
        if isinstance(e, Cancelled) and runner.cancel.is_set():
            raise  # the run was stopped: no failure of this job
        if _archived(runner, job, e):
            return
        if propagate and not isinstance(
            e, errors.ReadError | errors.SourceChangedError | errors.ProtocolError | errors.Timeout
        ):
            raise
        with runner.lock:
            runner.outcome.failed += 1
        runner.out.error(
            f"{_describe(job, runner.opts)} failed: {message_for(e)}",
            {**error_record(e), **_job_json(job, runner.opts)},
        )


def _archived(runner: Runner, job: Job, e: Exception) -> bool:
    """Whether ``e`` is the service refusing to read or copy an object for its archive
    storage class (not restored: GetObject's InvalidObjectState, CopyObject's
    ObjectNotInActiveTierError): then the job is skipped as the aws CLI skips it (warned,
    exit 2; quietly with --ignore-glacier-warnings), unless --force-glacier-transfer
    asked for it, when it is the failure it is."""
    if not isinstance(e, errors.InvalidObjectState) or job.kind not in (
        "download",
        "copy",
        "stdout",
    ):
        return False

    def count() -> None:
        with runner.lock:
            runner.outcome.skipped += 1

    action = "copy" if job.kind == "copy" else "download"
    return skip_archived(runner.opts.archived, str(job.src), None, action, runner.out, count)


def _done(runner: Runner, job: Job, n: int) -> None:
    """``job`` is done, ``n`` bytes moved: counted, and its line printed (a small
    download's only once its file has its final name, from whichever thread flushed)."""
    with runner.lock:
        if job.kind == "delete":
            runner.outcome.deleted += 1
        else:
            runner.outcome.done += 1
            runner.outcome.bytes += n
    if job.kind != "stdout":
        runner.out.note(_describe(job, runner.opts))
        runner.out.json({**_job_json(job, runner.opts), "bytes": n})


def _run_pool(runner: Runner, jobs: list[Job]) -> None:
    """``--jobs`` workers, each taking the next job when it is done with one. The calling
    thread only waits for them: it does not wake for each job, which in a run of many
    small files was a hand-off of the GIL per file and a scan of every job in flight."""
    workers = min(runner.opts.jobs, len(jobs))
    queue = iter(jobs)
    lock = threading.Lock()
    failures: list[BaseException] = []  # the first is what stopped the run

    def work() -> None:
        while not runner.cancel.is_set():
            with lock:
                job = next(queue, None)
            if job is None:
                return
            try:
                _run_reported(runner, job, propagate=False)
            except BaseException as e:
                with lock:
                    failures.append(e)  # before the others see the cancellation it causes
                runner.cancel.set()  # the others stop after their current job
                return

    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="objsdk-cp")
    try:
        wait([pool.submit(work) for _ in range(workers)])
    except BaseException:
        runner.cancel.set()
        # Transfers in flight see the cancellation at their next progress report and
        # clean up (abort the multipart upload, keep the download's resumable file).
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    if failures:
        raise failures[0]


def check_dest_bucket(client: Client, jobs: list[Job]) -> None:
    """Fail once, up front, when the destination bucket is missing (not once per file,
    and before standard input is read).

    One file is not asked about: its own request says so, and a HEAD would cost it one
    more. A bucket the credentials may write to but not list (s3:PutObject alone: the
    HEAD needs s3:ListBucket) is taken to exist: its uploads say whether they may."""
    if len(jobs) == 1 and jobs[0].kind != "stdin":
        return
    buckets = {j.dst.bucket for j in jobs if isinstance(j.dst, RemotePath)}
    for b in sorted(buckets):
        try:
            exists = client.bucket_exists(b)
        except errors.AccessDenied:
            continue
        if not exists:
            raise errors.s3_error(
                404, "NoSuchBucket", "The specified bucket does not exist", bucket=b
            )
