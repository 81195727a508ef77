"""Fetching parts of one pinned object version into place: the engine under
:func:`~objsdk._transfer.download.download` and ``get_into``.

Each part is a :class:`~objsdk._io.range_reader.RangeReader` window pinned to the
version HEAD described (ETag, or Last-Modified when there is no strong ETag; size;
version id), run on a :class:`~objsdk._io.pool.PartPool`. Bytes go straight into place:
``readinto`` on slices of a caller's buffer, or ``readinto`` a small per-part buffer and
``os.pwrite`` at the part's offset in a file.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence

from objsdk import errors
from objsdk._core.adaptive import Preset
from objsdk._core.checksums import RangeCrc
from objsdk._core.parts import Part
from objsdk._core.pin import VersionPin
from objsdk._core.sizes import ADAPTIVE_CAP, MiB
from objsdk._io.pool import PartPool
from objsdk._io.range_reader import RangeIgnored, RangeReader
from objsdk._io.shared_level import InFlight, SharedLevel
from objsdk._transfer.progress import ProgressTracker
from objsdk._transfer.writeback import Writeback
from objsdk._transport.base import Transport
from objsdk.errors import drop_frame_locals
from objsdk.models import ObjectInfo

__all__ = [
    "FILE_STEP",
    "STEP",
    "Sink",
    "drop_frame_locals",
    "fetch_parts",
    "into_buffer",
    "into_file",
]

# Bytes per readinto call into a caller's buffer: how often progress is reported and
# cancellation noticed.
STEP = 1 * MiB
# The buffer a file download receives into before pwrite. Small enough to still be in the
# CPU cache when pwrite copies it out: on a 2-vCPU VM (2 MiB L2 per core), 256 KiB took
# 40 % less CPU than 1 MiB and a third of what 4 MiB took for the same 1 GiB download.
FILE_STEP = 256 * 1024
# The most one ranged GET of consecutive parts covers where connections share the parts:
# the parts left are shared out again at least this often, at one request per 128 MiB.
MAX_RUN = 128 * MiB


# A first request that waits for its first bytes longer than EXPENSIVE times what its
# part's bytes then take costs more than it carries: parts in parallel, one request each,
# would pay that wait many times over. moto's server reads the whole object for every
# range (0.3 s before the first byte of a 16 MiB part of a 512 MiB object, whose bytes
# then take 0.01 s; 22 requests and 7.2 s where one stream takes 0.6 s). The level then
# holds at one stream, which reads the rest in one request. Where a stream is slower
# than its answer is slow (a network, not the server, sets the pace: 0.05 s against
# 0.67 s on the `wan` profile, 0.003 s against 0.02 s on loopback) nothing changes.
EXPENSIVE = 4


# Writes one part: receives from ``r`` (a RangeReader window positioned at part.start)
# into place; calls ``tick(n)`` after every n bytes (progress, and a chance to cancel).
Sink = Callable[[RangeReader, Part, Callable[[int], None]], None]


def into_buffer(view: memoryview, base: int, crcs: RangeCrc | None = None) -> Sink:
    """Parts land in ``view``, whose first byte is object offset ``base``; with
    ``crcs``, each part's CRC is added to it, hashed as its bytes land."""

    def write(f: RangeReader, part: Part, tick: Callable[[int], None]) -> None:
        hasher = _PartCrc(crcs, part.start)
        with view[part.start - base : part.stop - base] as target:
            n = 0
            while n < len(target):
                with target[n : n + hasher.room(part.start + n, STEP)] as step:
                    k = f.readinto(step)  # straight from the socket into the caller's memory
                    if hasher.crcs is not None:
                        with step[:k] as got:
                            hasher.update(got)
                if k == 0:
                    raise _ended_early(f, part.start + n)
                n += k
                tick(k)
        hasher.flush()

    return write


class _PartCrc:
    """The CRC of the bytes of one part as they land, added to ``crcs`` as a range at
    the part's end and at every cut of ``crcs`` inside it."""

    def __init__(self, crcs: RangeCrc | None, start: int) -> None:
        self.crcs = crcs
        self.start = self.pos = start
        self.value = 0
        self._crc = crcs.crc if crcs is not None else None
        self._cut = crcs.next_cut(start) if crcs is not None else None

    def room(self, pos: int, n: int) -> int:
        """How many of ``n`` bytes from ``pos`` to receive next: up to the next cut."""
        return n if self._cut is None else min(n, self._cut - pos)

    def update(self, data: memoryview) -> None:
        assert self._crc is not None
        self.value = self._crc(data, self.value)
        self.pos += len(data)
        if self.pos == self._cut:
            self.flush()

    def flush(self) -> None:
        if self.crcs is not None and self.pos > self.start:
            self.crcs.add(self.start, self.pos, self.value)
            self.start, self.value = self.pos, 0
            self._cut = self.crcs.next_cut(self.pos)


def into_file(fd: int, crcs: RangeCrc | None, writeback: Writeback | None) -> Sink:
    """Parts land in the open file ``fd`` at their offsets; with ``crcs``, each part's
    CRC is added to it, hashed from the receive buffer. ``writeback`` (if any) flushes
    the file in the background as parts are written; a part is durable once it hands
    the part on (the caller reports it written: :meth:`Writeback.written`).

    Why pwrite from a small buffer and not readinto on an mmap of the file, which saves
    a copy: on a 2-vCPU VM, 1 GiB with 4 parts in flight and a flush per part took a
    median 1.02 s and 0.62 s of CPU this way, against 1.45 s and 0.89 s through a shared
    mapping (a page fault per 4 KiB page costs more than copying a buffer that is still
    in the CPU cache). Also, a full disk is then an OSError, not a SIGBUS that kills the
    process.
    """

    def write(f: RangeReader, part: Part, tick: Callable[[int], None]) -> None:
        hasher = _PartCrc(crcs, part.start)
        with memoryview(bytearray(min(FILE_STEP, part.length))) as buf:
            pos = part.start
            while pos < part.stop:
                k = f.readinto(buf[: hasher.room(pos, part.stop - pos)])
                if k == 0:
                    raise _ended_early(f, pos)
                if hasher.crcs is not None:
                    hasher.update(buf[:k])
                _pwrite_all(fd, buf[:k], pos)
                pos += k
                if writeback is not None:
                    writeback.wrote(k)
                tick(k)
        hasher.flush()

    return write


def _pwrite_all(fd: int, data: memoryview, offset: int) -> None:
    while data:
        n = os.pwrite(fd, data, offset)
        data, offset = data[n:], offset + n


def _ended_early(f: RangeReader, offset: int) -> errors.ProtocolError:
    # Cannot happen with a pinned size unless the server misbehaves; never spin on it.
    return errors.ProtocolError(
        f"object ended at offset {offset}, before the pinned size",
        operation="download",
        bucket=f.bucket,
        key=f.key,
    )


def fetch_parts(
    transport: Transport,
    info: ObjectInfo,
    parts: Sequence[Part],
    sink: Sink,
    parallel: int | None,
    max_resume: int,
    progress: ProgressTracker,
    on_done: Callable[[Part], None] | None = None,
    on_start: Callable[[Mapping[str, str]], None] | None = None,
) -> int:
    """Fetch ``parts`` on a :class:`PartPool` of up to ``parallel`` threads (one part: in
    the caller's thread), each through a :class:`RangeReader` window pinned to
    ``info``'s ETag, size and version; return the number of parts that were in flight
    at the end. ``on_start`` gets the headers of the answer for byte 0, if a part starts
    there (with the stored checksums: GET may state ``x-amz-checksum-type`` where HEAD
    did not).

    ``parallel=None`` adapts (:class:`~objsdk._core.adaptive.Preset.download`): one
    part at a time first, more while the aggregate rate keeps rising, up to
    ``ADAPTIVE_CAP``.

    The first failure stops the rest (see :class:`PartPool`), and every thread has ended
    before this raises. An :class:`~objsdk.ObjectChangedError` wins over other failures
    (the caller must then start over). A server that ignores ``Range`` is noticed at
    the first part that would have to skip bytes, and the parts not done yet are then
    read through one stream instead (in O(N) bytes, not O(N²)).
    """
    if not parts:
        return 0
    pin = VersionPin.of(info)
    if not pin.pinned:
        # Nothing ties parts to one version: one stream, which refuses to resume unpinned.
        parts = [Part(parts[0].index, parts[0].start, parts[-1].stop)]
    if len(parts) == 1:
        # One part runs in the caller's thread: a pool would start a thread for it, which
        # cost more client CPU than the GET itself for a small object (docs/perf.md,
        # "Downloads of small objects").
        _one_stream(
            transport,
            info,
            pin,
            parts,
            sink,
            max_resume,
            progress,
            progress.done,
            on_done,
            on_start,
        )
        return 1
    finished: set[int] = set()
    start = progress.done
    level = SharedLevel.unless(parallel, preset=Preset.download(), endpoint=transport.endpoint.url)
    workers = min(ADAPTIVE_CAP if parallel is None else parallel, len(parts))
    cost = _RequestCost(level) if level is not None and len(parts) > 1 else None
    try:
        with PartPool(workers, name="download", watch=transport.watch) as pool:

            def fetch(run: Sequence[Part]) -> None:
                # One ranged GET for a run of consecutive parts.
                end = run[-1].stop
                reader = _window(
                    transport, info, pin, end, max_resume, pool.cancelled, on_start=on_start
                )
                # The first request is timed (see EXPENSIVE), until its first part ends.
                timed = cost if run[0].index == parts[0].index else None
                asked = time.monotonic()
                with InFlight(level) as flight:

                    def tick(n: int) -> None:
                        if timed is not None:
                            timed.first_bytes(asked)
                        progress.add(n)
                        flight.observe(n)
                        if pool.cancelled.is_set():
                            raise errors.Cancelled("download cancelled: another part failed")

                    try:
                        for part in run:  # each part done as the stream passes its end
                            reader.seek(part.start)
                            sink(reader, part, tick)
                            if timed is not None:
                                timed.first_part_done(part)
                                timed = None
                            finished.add(part.index)
                            if on_done is not None:
                                on_done(part)
                    except BaseException as e:
                        drop_frame_locals(e)
                        raise
                    finally:
                        reader.close()

            pool.run(
                _runs(parts, level, workers),
                fetch,
                level=level if level is not None else parallel,
                prefer=(errors.ObjectChangedError,),
            )
    except RangeIgnored:
        rest = [p for p in parts if p.index not in finished]
        base = start + sum(p.length for p in parts if p.index in finished)
        _one_stream(transport, info, pin, rest, sink, max_resume, progress, base, on_done, on_start)
        return 1
    return level.current() if level is not None else workers


class _RequestCost:
    """How long the first request waited for its first bytes against how long its first
    part's bytes then took; holds a level still at one stream where the wait is
    :data:`EXPENSIVE` times the larger (see there)."""

    def __init__(self, level: SharedLevel) -> None:
        self._level = level
        self._waited: float | None = None
        self._since = 0.0

    def first_bytes(self, asked: float) -> None:
        if self._waited is None:
            self._since = time.monotonic()
            self._waited = self._since - asked

    def first_part_done(self, part: Part) -> None:
        if self._waited is None or part.length < MiB:
            return  # too few bytes to time
        took = time.monotonic() - self._since
        if self._waited > EXPENSIVE * took and self._level.current() == 1:
            self._level.hold()


def _runs(
    parts: Sequence[Part], level: SharedLevel | None, workers: int
) -> Iterator[Sequence[Part]]:
    """The parts to request, as runs of consecutive parts (one ranged GET each; each
    part is done, and may be recorded, as the stream passes its end).

    * Fixed parallelism of ``workers``, or settled at level L: a 1/``workers`` (1/L)
      share of the parts left (guided self-scheduling). Requests shrink as the end
      nears, so the connections finish together instead of the last few parts running
      alone, and one connection reads the rest in one request instead of paying a
      request per part.
    * Climbing, one part in flight: as many parts as were taken before (at least one),
      so a fast stream does not pay a request per part while it is measured, and the
      request in flight when the level rises is never more than what was read before.
    * Climbing, more in flight: one part per request, so new levels find parts to run.

    Where connections share the parts, a run ends by ``MAX_RUN`` bytes, so the parts
    left are shared out again at least that often: a connection that slows down holds
    no more than that while the others run out of work. One connection reads the rest
    in one request (a server may charge per request: moto's reads the whole object for
    each range, 0.8 s a request for a 1 GiB object).

    The level holds once the last run is handed out: ``parallel`` in the result is then
    the parts that were running, not a level judged on parts it did not start.
    """
    i = 0
    while i < len(parts):
        connections = workers if level is None else level.current()
        if level is None or level.settled:
            take = max(1, (len(parts) - i) // connections)
        elif connections == 1:
            take = max(1, i)
        else:
            take = 1
        # One connection has nobody to share with: its run goes on to the end.
        most = MAX_RUN if connections > 1 else None
        j = i + 1
        while (
            j < len(parts)
            and j - i < take
            and parts[j].start == parts[j - 1].stop
            and (most is None or parts[j].stop - parts[i].start <= most)
        ):
            j += 1
        if level is not None and j == len(parts):
            level.hold()  # what is in flight now runs to the end, whatever the level
        yield parts[i:j]
        i = j


def _window(
    transport: Transport,
    info: ObjectInfo,
    pin: VersionPin,
    end: int,
    max_resume: int,
    cancel: threading.Event | None = None,
    *,
    strict_range: bool = True,
    on_start: Callable[[Mapping[str, str]], None] | None = None,
) -> RangeReader:
    """A reader of ``info``'s object up to ``end``, tied to the version HEAD described."""
    return RangeReader(
        transport,
        info.bucket,
        info.key,
        pin=pin,
        end=end,
        max_resume=max_resume,
        cancel=cancel,
        strict_range=strict_range,
        checksum_mode=on_start is not None,
        on_start=on_start,
    )


def _one_stream(
    transport: Transport,
    info: ObjectInfo,
    pin: VersionPin,
    parts: Sequence[Part],
    sink: Sink,
    max_resume: int,
    progress: ProgressTracker,
    base: int,
    on_done: Callable[[Part], None] | None,
    on_start: Callable[[Mapping[str, str]], None] | None,
) -> None:
    """``parts``, in order, through one pinned stream (a server that ignores Range).
    Progress goes on from ``base`` bytes (abandoned parts were counted already, so it
    holds still until the new stream passes them)."""
    if not parts:
        return
    fetched = 0

    def tick(n: int) -> None:
        nonlocal fetched
        fetched += n
        progress.reached(base + fetched)

    reader = _window(
        transport, info, pin, parts[-1].stop, max_resume, strict_range=False, on_start=on_start
    )
    try:
        for part in parts:
            reader.seek(part.start)
            sink(reader, part, tick)
            if on_done is not None:
                on_done(part)
    except BaseException as e:
        drop_frame_locals(e)
        raise
    finally:
        reader.close()
