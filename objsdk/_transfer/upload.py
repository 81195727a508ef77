"""``upload``: a file, buffer or stream to one object, by the cheapest safe route.

Below ``multipart_threshold`` (and S3's 5 GiB single-PUT limit) one PUT; above it, a
multipart upload (:class:`~objsdk._transfer.multipart.MultipartSession`) with
``parallel`` parts in flight. How each kind of source is read, sent and checked (a
buffer sliced, a regular file by sendfile(2) or ``os.preadv``, a stream in order) is
its strategy's, in :mod:`objsdk._transfer.sources`; this module picks the route and
plans the parts. A failure, an exception from ``progress`` or a ``KeyboardInterrupt``
aborts the upload, so no parts are left behind, and is re-raised; except that an upload
of a path in parts is resumable (:mod:`objsdk._transfer.upload_resume`): one that stops
for a reason a later run can get past is kept for it, and a later run of the same
upload sends only the parts not stored yet.

Every route stores a full-object CRC32C (``x-amz-checksum-crc32c``, "Checking object
integrity" in the S3 user guide), which the server checks on arrival and
:class:`~objsdk.ObjectFile` checks again on a full read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import IO

from objsdk._core.addressing import check_bucket, check_count, check_key
from objsdk._core.checksums import encode_crc32c
from objsdk._core.object_headers import object_headers, upload_info
from objsdk._core.parts import (
    Part,
    adaptive_upload_part_size,
    plan_upload,
    plan_upload_probed,
    upload_part_size,
)
from objsdk._core.sizes import ADAPTIVE_PART_SIZE, ADAPTIVE_PROBE, DEFAULT_MULTIPART_THRESHOLD
from objsdk._s3.objects import put_bytes
from objsdk._transfer.multipart import MultipartSession
from objsdk._transfer.progress import Progress, ProgressTracker
from objsdk._transfer.sources import (
    Send,
    Source,
    UploadSource,
    open_source,
    parts_until_the_end,
)
from objsdk._transfer.upload_plan import CutMemory, UploadPlan
from objsdk._transfer.upload_resume import Resumed, UploadKeeper, keeping
from objsdk._transport.base import Transport
from objsdk._transport.retry import counting_failures
from objsdk.models import ObjectInfo, UploadInfo

__all__ = ["UploadSource", "upload"]


def upload(
    transport: Transport,
    bucket: str,
    key: str,
    source: UploadSource,
    *,
    part_size: int | None = None,
    parallel: int | None = None,
    content_type: str | None = None,
    metadata: Mapping[str, str] | None = None,
    progress: Progress | None = None,
    multipart_threshold: int = DEFAULT_MULTIPART_THRESHOLD,
    cut_memory: CutMemory | None = None,
    extra_headers: Mapping[str, str] | None = None,
    resume: bool | None = None,
) -> UploadInfo:
    """Store ``source`` under ``key``: one PUT below ``multipart_threshold``, else a
    multipart upload of ``part_size`` parts, ``parallel`` at a time (``None``, the
    default: one at first, more while the aggregate rate keeps rising; unless
    ``part_size`` is given, from a file or memory a 1 MiB last part sent first, alone,
    then whole rounds of 16 parts of 8 to 16 MiB where the object holds them, from a
    stream parts of 8 MiB; a fixed ``parallel`` defaults to 16 MiB parts).

    ``source`` is a path, a binary file object (read from its position to its end,
    and left at its end), or bytes-like data. ``progress(done, total)`` follows the
    contract of :mod:`objsdk._transfer.progress`, called in the calling thread;
    ``total`` is None while the size of a stream is unknown. The object is sent with a
    full-object CRC32C, reported in ``checksums["crc32c"]`` once the service's answer
    confirms it stored it (never merely because it was sent). Keep ``parallel`` within
    the client's ``max_pool_connections`` so connections are reused.

    An adaptive upload whose part's connection breaks sends the parts it has not
    handed out yet in parts of 5 MiB, and so does the next one given the same
    ``cut_memory`` (see :mod:`objsdk._transfer.upload_plan`). The answer tells how many
    parts there were, how many were in flight at the end, and how often a broken
    connection made a part (or the PUT) go again. ``cache_control``,
    ``content_encoding`` and ``storage_class`` are stored with the object.

    ``resume`` (None: True) applies to a path uploaded in parts: the upload is recorded
    as its parts are stored, kept when it stops for a reason a later run can get past,
    and the same call later goes on from the parts stored (see
    :mod:`objsdk._transfer.upload_resume`); another such upload of the same file to the
    same key meanwhile raises :class:`~objsdk.UploadLockedError`. ``resume=False``
    aborts an earlier run's upload and starts over, and aborts on any failure.
    """
    check_bucket(bucket)
    check_key(key)
    # extra_headers (Cache-Control, storage class...) go with the PUT or the Create.
    headers = {**object_headers(bucket, key, content_type, metadata), **(extra_headers or {})}
    if parallel is not None:
        check_count("parallel", parallel, 1, bucket, key)
    check_count("multipart_threshold", multipart_threshold, 0, bucket, key)
    # Adaptive with parts of our choosing: from files and memory a small probe part
    # first, then parts sized by the object (_upload_multipart); from a stream 8 MiB,
    # so that the level has parts to climb with.
    probed = parallel is None and part_size is None
    given_part_size = part_size
    if part_size is not None:
        upload_part_size(None, part_size)  # refuses sizes outside S3's limits
    elif parallel is None:
        part_size = ADAPTIVE_PART_SIZE
    job = _Job(transport, bucket, key, headers, content_type, dict(metadata or {}), parallel)
    # The part size of a stream whose size is known only once it ends.
    stream_part_size = upload_part_size(size=None, part_size=part_size)
    with open_source(source, bucket, key) as src, counting_failures() as failures:
        size = src.size
        tracker = ProgressTracker(progress, size)
        if src.one_put(multipart_threshold, stream_part_size):
            info = _put_single(job, src, tracker)
        elif size is None:
            info = _upload_unsized(job, src, stream_part_size, tracker)
        else:
            with keeping(
                transport, bucket, key, source, src, headers, resume=resume is not False
            ) as keeper:
                resumed = keeper.resume_point(size, given_part_size) if keeper else None
                info = _upload_multipart(
                    job, src, size, part_size, probed, tracker, cut_memory, keeper, resumed
                )
        tracker.finish(info.size or 0)
        if isinstance(info, UploadInfo):
            return info
        return UploadInfo.of(info, parts=1, parallel=1, cuts=failures.count)  # one PUT


@dataclass
class _Job:
    """The object an upload stores, and how: the :class:`~objsdk._transfer.sources.Target`
    of a source's one PUT, or the maker of its multipart session."""

    transport: Transport
    bucket: str
    key: str
    headers: dict[str, str]
    content_type: str | None
    metadata: dict[str, str]
    parallel: int | None

    def put_bytes(self, data: memoryview) -> ObjectInfo:
        info = put_bytes(
            self.transport,
            self.bucket,
            self.key,
            data,
            headers=self.headers,
            content_type=self.content_type,
            metadata=self.metadata,
        )
        if not info.checksums:
            return info
        return replace(info, checksum_type=info.checksum_type or "FULL_OBJECT")

    def put_file(
        self, file: IO[bytes], offset: int, count: int, crc: int, progress: Callable[[int], None]
    ) -> ObjectInfo:
        answer = self.transport.send_file(
            self.bucket,
            self.key,
            file,
            offset=offset,
            count=count,
            headers={**self.headers, "x-amz-checksum-crc32c": encode_crc32c(crc)},
            progress=progress,
        )
        return upload_info(self.bucket, self.key, count, answer, self.content_type, self.metadata)

    def session(
        self,
        tracker: ProgressTracker,
        part_size: int,
        probe: int | None = None,
        on_cut: Callable[[], None] | None = None,
    ) -> MultipartSession:
        return MultipartSession(
            self.transport,
            self.bucket,
            self.key,
            headers=self.headers,
            content_type=self.content_type,
            metadata=self.metadata,
            parallel=self.parallel,
            part_size=part_size,
            progress=tracker,
            probe=probe,
            on_cut=on_cut,
        )


# -- one PUT ----------------------------------------------------------------------------


def _put_single(job: _Job, src: Source, tracker: ProgressTracker) -> ObjectInfo:
    return src.put(job, tracker)


# -- multipart --------------------------------------------------------------------------


def _upload_multipart(
    job: _Job,
    src: Source,
    size: int,
    part_size: int | None,
    probed: bool,
    tracker: ProgressTracker,
    cut_memory: CutMemory | None = None,
    keeper: UploadKeeper | None = None,
    resumed: Resumed | None = None,
) -> UploadInfo:
    probe: int | None = None
    plan: UploadPlan | None = None
    if resumed is not None:
        # The parts an earlier run did not store, planned around those it did.
        rest = resumed.todo
        longest = max([p.length for p in rest] + [p.length for _, _, p in resumed.kept])
        send = src.sender(rest, longest, direct=job.transport.direct_file_bodies)
        expected = len(rest) + len(resumed.kept)
        return _multipart(
            job, send, tracker, src, part_size=longest, expected=expected, size=size,
            keeper=keeper, resumed=resumed,
        )  # fmt: skip
    if probed and src.any_order and part_size is not None:
        # Files and memory are read in any order: the small last part goes first.
        part_size = adaptive_upload_part_size(size, ADAPTIVE_PROBE)
        parts = plan_upload_probed(size, part_size, ADAPTIVE_PROBE)
        if parts[0].index != 0:
            probe = parts[0].length
            plan = UploadPlan(parts[0], parts[1:], cut_memory)
    else:
        parts = plan_upload(size, part_size)
    longest = max(p.length for p in parts)
    todo: Iterable[Part] = parts if plan is None else plan
    send = src.sender(todo, longest, direct=job.transport.direct_file_bodies)
    if plan is None:
        return _multipart(
            job, send, tracker, src, part_size=longest, expected=len(parts), size=size,
            keeper=keeper,
        )  # fmt: skip
    try:  # the plan's count is known at the end; its parts must cover the object
        return _multipart(
            job, send, tracker, src, part_size=longest, size=size, probe=probe, on_cut=plan.cut,
            keeper=keeper,
        )  # fmt: skip
    finally:
        plan.finish()


def _upload_unsized(job: _Job, src: Source, part_size: int, tracker: ProgressTracker) -> UploadInfo:
    """A stream of unknown size that did not end within its first part: parts of
    ``part_size`` until it ends, counted then."""
    send = src.sender(
        parts_until_the_end(part_size), part_size, direct=job.transport.direct_file_bodies
    )
    return _multipart(job, send, tracker, src, part_size=part_size)


def _multipart(
    job: _Job,
    send: Send,
    tracker: ProgressTracker,
    src: Source,
    *,
    part_size: int,
    expected: int | None = None,
    size: int | None = None,
    probe: int | None = None,
    on_cut: Callable[[], None] | None = None,
    keeper: UploadKeeper | None = None,
    resumed: Resumed | None = None,
) -> UploadInfo:
    """One multipart upload whose parts ``send(session)`` sends; aborted on any failure,
    unless ``keeper`` keeps it to be resumed. ``expected``: how many parts (None: as
    many as were sent); ``size``: the object's (None: the bytes sent); ``resumed``: the
    upload an earlier run left, to go on with."""
    cuts: list[None] = []

    def cut() -> None:  # called by the sending threads (list.append is atomic)
        cuts.append(None)
        if on_cut is not None:
            on_cut()

    session = job.session(tracker, part_size, probe, cut)
    try:
        # Inside: an interruption once the upload exists (even before its workers do)
        # must abort it.
        if resumed is not None:
            session.adopt(resumed.upload_id, resumed.kept)
        else:
            session.start()
        if keeper is not None:
            if resumed is None:
                assert session.upload_id is not None
                assert size is not None
                keeper.started(session.upload_id, size, part_size)
            session.on_stored = keeper.stored
        send(session)
        src.check_unchanged()
        total = size if size is not None else tracker.done
        info = session.complete(expected_parts=expected, size=total)
    except BaseException as e:
        if keeper is not None and keeper.stopped(e, session.upload_id):
            session.stop()  # kept, with its record, for the next run to resume
        else:
            session.abort(e)
        raise
    if keeper is not None:
        keeper.completed()
    level = session.level.current() if session.level is not None else job.parallel or 1
    reused = resumed.reused if resumed is not None else 0
    return UploadInfo.of(
        info, parts=session.parts, parallel=level, cuts=len(cuts), bytes_reused=reused
    )
