"""Multipart uploads: the one engine that drives the five S3 calls
(:mod:`objsdk._transfer.multipart_calls`).

:class:`MultipartSession` is shared by :func:`~objsdk._transfer.upload.upload` (parts
from a file, buffer or stream) and :class:`~objsdk.ObjectWriter` (parts as the caller
writes them): create, send parts in parallel with their CRC32Cs, complete with the
full-object CRC32C, or abort, so no parts are left behind.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import Future
from dataclasses import replace
from typing import IO, TypeVar

from objsdk import errors
from objsdk._core.adaptive import Preset
from objsdk._core.checksums import checksum_headers, crc32c, crc32c_combine, encode_crc32c
from objsdk._core.object_headers import multipart_etag, upload_info
from objsdk._core.parts import Part, covers
from objsdk._core.signing import payload_sha256
from objsdk._core.sizes import ADAPTIVE_CAP
from objsdk._io.pool import PartPool
from objsdk._io.shared_level import InFlight, SharedLevel
from objsdk._s3.head import head_object
from objsdk._transfer.confirm import confirm_completed
from objsdk._transfer.multipart_calls import (
    CompletedPart,
    abort_failed_upload,
    complete_multipart_upload,
    create_multipart_upload,
    upload_part,
    upload_part_from_file,
    with_crc,
)
from objsdk._transfer.progress import ProgressTracker
from objsdk._transport.base import Transport
from objsdk._transport.retry import counting_failures
from objsdk.models import ObjectInfo

__all__ = ["CompletedPart", "MultipartSession"]

log = logging.getLogger("objsdk")
_I = TypeVar("_I")  # what a pool item is: (part, body) or a part of a file

# -- the engine ---------------------------------------------------------------------------


class MultipartSession:
    """One multipart upload of ``bucket/key`` with a full-object CRC32C.

    Parts go out on a :class:`PartPool` of ``parallel`` threads, each with its own
    CRC32C, and the object's CRC32C is combined from theirs (zlib's ``crc32_combine``),
    so every byte is read once. :meth:`complete` checks the parts make up the object;
    :meth:`abort` (after any failure) waits for parts on the wire first, so none lands
    after the abort ("might or might not succeed", AbortMultipartUpload).
    """

    def __init__(
        self,
        transport: Transport,
        bucket: str,
        key: str,
        *,
        headers: Mapping[str, str],
        content_type: str | None,
        metadata: Mapping[str, str],
        parallel: int | None,
        part_size: int,
        progress: ProgressTracker,
        probe: int | None = None,
        on_cut: Callable[[], None] | None = None,
    ) -> None:
        """``part_size``: the parts' usual size; ``probe``: the size of a smaller part
        sent first, alone, to judge one connection by (see plan_upload_probed);
        ``on_cut()``: called when a part's connection breaks, before the part is sent
        again (see counting_failures)."""
        self.transport = transport
        self.content_type = content_type
        self.metadata = dict(metadata)
        self.bucket = bucket
        self.key = key
        self.headers = dict(headers)
        self.parallel = parallel
        self.progress = progress
        self.on_cut = on_cut
        self.upload_id: str | None = None
        self.checksums = True  # whether the service is sent checksums (see start)
        self.pool: PartPool | None = None
        self._done: dict[int, tuple[CompletedPart, int, Part]] = {}
        self._fill: Callable[[Part, memoryview], None] | None = None
        self.completed = False
        self.parts = 0  # how many parts the completed object has
        #: Called by the thread that sent a part, once the service stored it, with the
        #: part, the answer and the CRC32C of its bytes (a resumable upload's record).
        self.on_stored: Callable[[Part, CompletedPart, int], None] | None = None
        # parallel=None: the level follows the aggregate rate (see Preset.upload).
        self.level = SharedLevel.unless(
            parallel, preset=Preset.upload(part_size, probe), begin=False
        )

    def start(self) -> None:
        """CreateMultipartUpload: one CRC32C over the whole object, not a checksum of
        checksums ("Checking object integrity": full object vs composite checksums)."""
        self.upload_id = create_multipart_upload(
            self.transport,
            self.bucket,
            self.key,
            headers={
                **self.headers,
                "x-amz-checksum-algorithm": "CRC32C",
                "x-amz-checksum-type": "FULL_OBJECT",
            },
        )
        self._ready()

    def adopt(self, upload_id: str, stored: Iterable[tuple[CompletedPart, int, Part]]) -> None:
        """Go on with the upload ``upload_id`` an earlier run started instead of
        creating one: its ``stored`` parts (the service's answer, the CRC32C of the
        bytes, the part) are kept as if this session had sent them."""
        self.upload_id = upload_id
        done = 0
        for answer, crc, part in stored:
            self._done[part.number] = (answer, crc, part)
            done += part.length
        if done:
            self.progress.add(done)
        self._ready()

    def _ready(self) -> None:
        # Known once Create is answered: a service that refused the checksum headers
        # then gets none, nor part checksums in Complete's list.
        self.checksums = self.transport.dialect.sends
        workers = ADAPTIVE_CAP if self.parallel is None else self.parallel
        self.pool = PartPool(workers, name="upload", watch=self.transport.watch)

    def _send(self, item: tuple[Part, memoryview]) -> tuple[CompletedPart, int]:
        part, body = item
        assert self.upload_id is not None
        if self._fill is not None:
            self._fill(part, body)  # read by the worker that sends it: reads overlap
        crc = crc32c(body)
        completed = upload_part(
            self.transport,
            self.bucket,
            self.key,
            self.upload_id,
            part,
            body,
            checksum_crc32c=encode_crc32c(crc),
            # A service that is sent no checksum still checks a signed SHA-256.
            payload_hash=None if self.checksums else payload_sha256(body),
        )
        return self._stored(part, completed, crc)

    def _send_from_file(
        self, file: IO[bytes], base: int, crc_of: Callable[[Part], int], part: Part
    ) -> tuple[CompletedPart, int]:
        assert self.upload_id is not None
        crc = crc_of(part)
        completed = upload_part_from_file(
            self.transport,
            self.bucket,
            self.key,
            self.upload_id,
            part,
            file,
            base + part.start,
            checksum_crc32c=encode_crc32c(crc),
        )
        return self._stored(part, completed, crc)

    def _stored(self, part: Part, completed: CompletedPart, crc: int) -> tuple[CompletedPart, int]:
        """The service stored ``part`` (in the thread that sent it)."""
        completed = with_crc(completed, crc)
        if self.on_stored is not None:
            self.on_stored(part, completed, crc)
        return completed, crc

    def record(self, part: Part, result: tuple[CompletedPart, int]) -> None:
        """A part is stored: keep what S3 answered and count its bytes."""
        self._done[part.number] = (result[0], result[1], part)
        self.progress.add(part.length)
        if self.level is not None:
            self.level.observe(part.length)

    def send_all(
        self,
        items: Iterator[tuple[Part, memoryview]],
        release: Callable[[memoryview], None],
        *,
        fill: Callable[[Part, memoryview], None] | None = None,
    ) -> None:
        """Upload ``items`` ``parallel`` at a time, taking the next only when a slot is
        free (so a stream is read no faster than it is sent); ``release(body)`` recycles
        each body once its part is over. With ``fill``, bodies come empty and the
        worker that sends a part first fills it with ``fill(part, body)``."""
        self._fill = fill
        self._run(
            items,
            self._send,
            on_done=lambda item, result: self.record(item[0], result),
            on_release=lambda item: release(item[1]),
        )

    def send_file_parts(
        self, file: IO[bytes], base: int, parts: Iterable[Part], crc_of: Callable[[Part], int]
    ) -> None:
        """Upload ``parts`` straight from ``file`` (offsets from ``base``), each with
        the CRC32C ``crc_of(part)``, computed by the worker that sends it."""
        self._run(parts, lambda part: self._send_from_file(file, base, crc_of, part), self.record)

    def _run(
        self,
        items: Iterable[_I],
        send: Callable[[_I], tuple[CompletedPart, int]],
        on_done: Callable[[_I, tuple[CompletedPart, int]], None],
        on_release: Callable[[_I], None] | None = None,
    ) -> None:
        """Send ``items`` on the pool at the session's level (or ``parallel``)."""
        assert self.pool is not None
        if self.level is not None:
            self.level.begin()
        level = self.level if self.level is not None else self.parallel
        send = _watched(send, self.level, self.on_cut)
        self.pool.run(items, send, level=level, on_done=on_done, on_release=on_release)

    def submit(self, part: Part, body: memoryview) -> Future[tuple[CompletedPart, int]]:
        """Upload one part in the background (the writer's way); it is recorded (and
        counted in progress) by the worker that sends it."""
        assert self.pool is not None
        if self.level is not None:
            self.level.begin()

        def send(item: tuple[Part, memoryview]) -> tuple[CompletedPart, int]:
            result = self._send(item)
            self.record(item[0], result)
            return result

        return self.pool.submit(send, (part, body)).future

    def complete(
        self, *, expected_parts: int | None, size: int, crc: int | None = None
    ) -> ObjectInfo:
        """CompleteMultipartUpload; the object's CRC32C is ``crc`` or combined from the
        parts'. Raises unless the parts, in number order, hold the ``size`` bytes end to
        end (and are ``expected_parts`` many, if given)."""
        assert self.upload_id is not None
        if self.pool is not None:
            self.pool.close()
        numbers = sorted(self._done)
        self.parts = len(numbers)
        want = expected_parts if expected_parts is not None else len(numbers)
        if len(numbers) != want or not covers([d[2] for d in self._done.values()], size):
            raise errors.ProtocolError(
                f"parts {numbers} do not make up the object's {size} bytes ({want} planned)",
                operation="complete_multipart_upload",
                bucket=self.bucket,
                key=self.key,
            )
        if crc is None:
            crc = 0
            for n in numbers:
                _, part_crc, part = self._done[n]
                crc = crc32c_combine(crc, part_crc, part.length)
        value = encode_crc32c(crc)
        parts = [self._done[n][0] for n in numbers]
        if not self.checksums:
            parts = [replace(p, checksum_crc32c=None) for p in parts]
        try:
            # The server recomputes the object's CRC32C and refuses a mismatch.
            answer = complete_multipart_upload(
                self.transport,
                self.bucket,
                self.key,
                self.upload_id,
                parts,
                headers={"x-amz-checksum-crc32c": value, "x-amz-checksum-type": "FULL_OBJECT"},
            )
        except errors.S3Error as e:
            stored = self._already_there(size, value, parts) if e.code == "NoSuchUpload" else None
            if stored is None:
                raise
            answer = {"ETag": stored.etag or "", **checksum_headers(stored.checksums, None)}
            log.warning(
                "complete_multipart_upload: a retry found upload %s completed by an earlier "
                "attempt (bucket %r, key %r)",
                self.upload_id,
                self.bucket,
                self.key,
            )
        self.completed = True
        answer = confirm_completed(self.transport, self.bucket, self.key, value, answer)
        return upload_info(self.bucket, self.key, size, answer, self.content_type, self.metadata)

    def _already_there(self, size: int, crc: str, parts: list[CompletedPart]) -> ObjectInfo | None:
        """The object, if stored with exactly our size and CRC32C (a lost Complete
        reply), or without checksums our parts' multipart ETag."""
        try:
            info = head_object(self.transport, self.bucket, self.key)
        except errors.ObjsdkError:
            return None
        if self.checksums:
            same = info.checksums.get("crc32c") == crc
        else:
            same = info.etag is not None and info.etag == multipart_etag(p.etag for p in parts)
        return info if info.size == size and same else None

    def stop(self) -> None:
        """Stop sending: parts not started never start, parts on the wire are cut, and
        this returns once none is left. The upload stays, with the parts stored."""
        if self.pool is not None:
            self.pool.cancel()
            self.pool.close()

    def abort(self, failure: BaseException | None = None) -> None:
        """Abandon the upload after parts in flight have ended, retrying the abort for
        up to ``ABORT_DEADLINE`` (see :func:`abort_failed_upload`: if it still fails, the
        upload id is logged and named on ``failure``, the error that ended the upload;
        with no ``failure``, the abort's error is raised)."""
        self.stop()
        if self.upload_id is None or self.completed:
            return
        upload_id, self.upload_id = self.upload_id, None
        abort_failed_upload(self.transport, self.bucket, self.key, upload_id, failure)


def _watched(
    send: Callable[[_I], tuple[CompletedPart, int]],
    level: SharedLevel | None,
    on_cut: Callable[[], None] | None,
) -> Callable[[_I], tuple[CompletedPart, int]]:
    """``send``, telling ``level`` when each part starts and ends, and calling
    ``on_cut()`` as soon as a part's connection breaks, before the part goes again."""

    def watched(item: _I) -> tuple[CompletedPart, int]:
        with InFlight(level), counting_failures(on_cut):
            return send(item)

    return watched
