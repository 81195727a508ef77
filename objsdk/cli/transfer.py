"""One job of ``cp``, ``mv`` or ``sync`` carried out (:class:`Runner`); :mod:`.run`
runs a whole plan. Interruption (Ctrl-C, SIGTERM, SIGHUP) cancels every transfer in
flight through its progress callback, so each one stops as on a failure a later run can
get past: an upload of a file keeps its multipart upload for the same command to resume
(``--no-resume``: aborts it), a stream from standard input aborts its own, a download
keeps its resumable temporary file (never the final name). ``mv`` removes each source
only once its copy is verified.
"""

from __future__ import annotations

import io
import mimetypes
import os
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from objsdk import errors
from objsdk._core.parts import upload_part_size
from objsdk._core.upload_record import KeptUpload
from objsdk._transfer.copy import MAX_SINGLE_COPY
from objsdk._transfer.download_file import make_folder
from objsdk._transfer.download_stream import is_stream_file
from objsdk._transfer.smallfile import SMALL_OBJECT, Batch, download_small

from .errors import EXIT_FAILED, CliError
from .jobs import PARALLEL_PER_FILE, STREAM_CHUNK, Cancelled, Job, Outcome, TransferOptions
from .listing import inside
from .output import Output, Progress
from .paths import LocalPath, RemotePath

if TYPE_CHECKING:
    from objsdk import Client, ObjectInfo


__all__ = ["Runner", "stream_to_stdout"]


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
        self.batch = Batch()
        #: Uploads of files that stopped and were kept for a later run to resume.
        self.kept: list[KeptUpload] = []

    def check(self) -> None:
        if self.cancel.is_set():
            raise Cancelled("interrupted")

    def callback(self) -> Callable[[int, Any], None]:
        assert self.progress is not None
        return self.progress.callback(self.check)

    def _checking(self, done: int, total: Any) -> None:
        """A progress callback that only stops the transfer once the run is cancelled."""
        self.check()

    def writer_part_size(self) -> int | None:
        """A stream's part size: ``--part-size``, or, with ``--expected-size``, large
        enough that S3's 10,000 parts hold the stream (whole MiB)."""
        if self.opts.expected_size is None:
            return self.opts.part_size
        return upload_part_size(self.opts.expected_size, self.opts.part_size)

    def writer_parallel(self) -> int:
        """The parts in flight of a writer (``open_write``), which does not adapt."""
        return self.opts.parallel or PARALLEL_PER_FILE

    def write_options(self, *, writer: bool = False) -> dict[str, Any]:
        """The keyword arguments an upload (``writer``: a writer) takes from the
        options; without a ``parallel``, an upload adapts its parts."""
        kwargs: dict[str, Any] = {"progress": self.callback()}
        parallel = self.writer_parallel() if writer else self.opts.parallel
        if parallel is not None:
            kwargs["parallel"] = parallel
        part = self.writer_part_size() if writer else self.opts.part_size
        if part is not None:
            kwargs["part_size"] = part
        if self.opts.content_type:
            kwargs["content_type"] = self.opts.content_type
        if self.opts.metadata:
            kwargs["metadata"] = self.opts.metadata
        if self.opts.acl:
            kwargs["acl"] = self.opts.acl
        return kwargs

    def _upload(self, src: LocalPath, dst: RemotePath) -> int:
        """A file to an object, with the fields the options store (Content-Type guessed
        from the file name unless given or ``--no-guess-mime-type``, as aws and s5cmd)."""
        kwargs = self.write_options()
        if self.opts.multipart_threshold is not None:
            kwargs["multipart_threshold"] = self.opts.multipart_threshold
        if "content_type" not in kwargs and self.opts.guess_mime_type:
            guessed, _ = mimetypes.guess_type(src.path)
            if guessed:
                kwargs["content_type"] = guessed
        o = self.opts
        for name in ("cache_control", "content_encoding", "storage_class"):
            if getattr(o, name):
                kwargs[name] = getattr(o, name)
        if not o.resume:
            kwargs["resume"] = False
        try:
            info = self.client.upload(dst.bucket, dst.key, src.path, **kwargs)
        except BaseException as e:
            kept = getattr(e, "kept_upload", None)
            if isinstance(kept, KeptUpload):
                with self.lock:
                    self.kept.append(kept)
            raise
        if info.bytes_reused:
            with self.lock:
                self.outcome.stored += info.bytes_reused
        return info.size or 0

    def _download(
        self, job: Job, src: RemotePath, dst: LocalPath, done: Callable[[int], None]
    ) -> int | None:
        """The object to a file; None when the file is done only once its batch gives it
        its final name (``done`` is called then, and never if that fails)."""
        move = self.opts.move
        # A device or FIFO at the name is written into by Client.download, never
        # renamed over (a named pipe another program reads, /dev/null as root).
        if job.listed and job.size <= SMALL_OBJECT and not is_stream_file(dst.path):
            self.check()

            def named(size: int) -> None:
                # mv: the object goes only once its file is on disk under its final name.
                if move:
                    self.remove_source(job)
                done(size)

            n = download_small(
                self.client, src.bucket, src.key, dst.path, job.mtime, self.batch, named
            )
            if self.progress is not None:
                self.progress.add(n)
            return None
        make_folder(dst.path, src.bucket, src.key)
        result = self.client.download(
            src.bucket,
            src.key,
            dst.path,
            parallel=self.opts.parallel,
            progress=self.callback(),
            part_size=self.opts.part_size or None,
        )
        mtime = job.mtime or result.info.last_modified
        # A file takes the object's date; a device or FIFO written into keeps its own.
        if mtime is not None and os.path.isfile(dst.path):
            ts = mtime.timestamp()
            os.utime(dst.path, (ts, ts))
        size = result.info.size or 0
        with self.lock:
            self.outcome.reused += size - result.bytes_fetched
        if move:
            self.remove_source(job)
        return size

    def _copy_fields(self, src: RemotePath) -> dict[str, Any]:
        """What a server-side copy stores besides the bytes: the ACL and storage class
        given, and under the REPLACE directive exactly the fields given (no metadata if
        none; a Content-Type guessed from the source's name unless given or
        ``--no-guess-mime-type``, as aws s3 cp does); under COPY the source's."""
        o = self.opts
        fields: dict[str, Any] = {}
        if o.acl:
            fields["acl"] = o.acl
        if o.storage_class:
            fields["storage_class"] = o.storage_class
        if o.replace_fields:
            fields["metadata"] = o.metadata or {}
            guessed = mimetypes.guess_type(src.key)[0] if o.guess_mime_type else None
            if o.content_type or guessed:
                fields["content_type"] = o.content_type or guessed
            for name in ("cache_control", "content_encoding"):
                if getattr(o, name):
                    fields[name] = getattr(o, name)
        return fields

    def remove_source(self, job: Job) -> None:
        """``mv``: the source of a finished, verified copy goes."""
        src = job.src
        if isinstance(src, RemotePath):
            self.client.delete_object(src.bucket, src.key)
        elif isinstance(src, LocalPath) and not src.is_stdio:
            os.unlink(src.path)

    def run_one(self, job: Job, done: Callable[[int], None]) -> None:
        """Carry out ``job``, then call ``done`` with the bytes moved. With ``mv``, the
        source goes once the copy is verified. A small download is done once its file
        has its final name on disk: ``done`` may come later, from the batch's flush, and
        does not come if that rename fails (the batch keeps the failure)."""
        n = self._carry_out(job, done)
        if n is None:
            return
        if self.opts.move and job.kind in ("upload", "copy"):
            self.remove_source(job)
        done(n)

    def _carry_out(self, job: Job, done: Callable[[int], None]) -> int | None:
        c = self.client
        self.check()
        src, dst = job.src, job.dst
        if job.kind == "delete":
            if isinstance(dst, RemotePath):
                c.delete_object(dst.bucket, dst.key)
            else:
                if job.root is None or not inside(job.root, dst.path):
                    raise CliError(
                        f"not deleting {dst.path}: a symlinked directory leads there from "
                        f"outside {job.root}",
                        EXIT_FAILED,
                    )
                os.unlink(dst.path)  # a symlink itself is removed, never its target
            return 0
        if job.kind == "upload":
            assert isinstance(src, LocalPath)
            assert isinstance(dst, RemotePath)
            return self._upload(src, dst) or job.size
        if job.kind == "stdin":
            assert isinstance(dst, RemotePath)
            total = 0
            stdin = cast(io.BufferedReader, sys.stdin.buffer)
            buf = bytearray(STREAM_CHUNK)
            view = memoryview(buf)
            with c.open_write(dst.bucket, dst.key, **self.write_options(writer=True)) as w:
                while n := stdin.readinto(view):
                    self.check()
                    w.write(view[:n])
                    total += n
            return total
        if job.kind == "download":
            assert isinstance(src, RemotePath)
            assert isinstance(dst, LocalPath)
            return self._download(job, src, dst, done)
        if job.kind == "stdout":
            assert isinstance(src, RemotePath)
            return stream_to_stdout(c, src, 0, None, self.check)
        assert job.kind == "copy"
        assert isinstance(src, RemotePath)
        assert isinstance(dst, RemotePath)
        before = c.head_object(src.bucket, src.key) if self.opts.move else None
        size = job.size or ((before or c.head_object(src.bucket, src.key)).size or 0)
        fields = self._copy_fields(src)
        threshold = self.opts.multipart_threshold
        single = min(threshold if threshold is not None else MAX_SINGLE_COPY, MAX_SINGLE_COPY)
        copied: ObjectInfo | None = None  # as a HEAD of the copy describes it
        if size <= single:
            c.copy_object(src.bucket, src.key, dst.bucket, dst.key, **fields)
        else:
            # Parts the server copies (UploadPartCopy), pinned to the source's ETag; the
            # progress callback stops them at Ctrl-C (the upload is aborted).
            copied = c.copy(
                src.bucket,
                src.key,
                dst.bucket,
                dst.key,
                multipart_threshold=0,
                part_size=self.opts.part_size,
                parallel=self.opts.parallel,
                progress=self.callback() if self.progress is not None else self._checking,
                **fields,
            )
        if before is not None:
            _check_copy(before, copied or c.head_object(dst.bucket, dst.key))
        if self.progress is not None and size <= single:
            self.progress.add(size)  # the parts of a larger copy were counted as they went
        return size


def _check_copy(src: ObjectInfo, dst: ObjectInfo) -> None:
    """Before ``mv`` deletes an object it copied: the copy has its size, and the same
    value for every checksum both store (a single-part ETag is an MD5 of the bytes)."""
    same = src.size == dst.size
    for algo, value in src.checksums.items():
        other = dst.checksums.get(algo)
        if other is not None and "-" not in value and "-" not in other:
            same = same and value == other
    etags = (src.etag or "", dst.etag or "")
    if all(e and "-" not in e for e in etags):
        same = same and etags[0] == etags[1]
    if not same:
        raise errors.IntegrityError(
            f"the copy differs from its source (size {src.size} vs {dst.size}): "
            f"s3://{src.bucket}/{src.key} is kept",
            bucket=src.bucket,
            key=src.key,
        )


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
