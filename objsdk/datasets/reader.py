"""One (rank, worker)'s pass over its shards in one epoch: the shard reader behind
:class:`~objsdk.datasets.ShardDataset` (prefetch, read-ahead level, shuffle; its
state: :mod:`.resume`)."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Generator, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from objsdk import Client, ObjectFile, ReadStats
from objsdk._core.pin import VersionPin

from .decode import decoder_for
from .errors import ShardError
from .index import normal_etag, shard_changed
from .resume import Resumable
from .shards import Shard
from .shuffle import ShuffleBuffer, shuffled
from .split import Segment, Slot, plan_samples, plan_shards, split_quota
from .tar import RawSample, group_samples, iter_members

if TYPE_CHECKING:
    from .dataset import ShardDataset

__all__ = [
    "REPROBE_EVERY",
    "REPROBE_SECONDS",
    "ShardRead",
    "SlotReader",
    "carried_level",
]

# Under readahead=None a worker reads its first shard, and every REPROBE_EVERY-th after
# it, with the client's adaptive read-ahead; the shards between start at the level the
# last adaptive one settled at. So the level follows the network down as well as up.
REPROBE_EVERY = 4
# ...but no sooner than REPROBE_SECONDS after the last probe began: a probe climbs from
# one stream again, which costs a fast network tenths of a second each time (a sixth of
# the time of four 52 MB shards at 150 MB/s), while networks change over longer times.
REPROBE_SECONDS = 10.0

# The clock the probes are timed by (tests replace it).
_now = time.monotonic


def carried_level(
    learned: int | None, opened: int, cap: int, since_probe: float | None = None
) -> int | None:
    """The read-ahead for a worker's shard number ``opened`` (from 0) under
    ``readahead=None``: None (adaptive) to probe, else the ``learned`` level within the
    worker's share ``cap`` of the connection budget. ``since_probe``: seconds since the
    last probe began (None: not known, which does not hold a probe back)."""
    if learned is None:
        return None
    if opened % REPROBE_EVERY == 0 and (since_probe is None or since_probe >= REPROBE_SECONDS):
        return None
    return min(learned, cap)


@dataclass
class ShardRead:
    """One pass of a reader over a shard: where it started and what it cost."""

    shard: str
    offset: int
    stats: ReadStats


class SlotReader(Resumable):
    """One (rank, worker)'s pass over its shards in one epoch; its state is saved and
    restored as :class:`~objsdk.datasets.resume.Resumable` says."""

    def __init__(
        self, ds: ShardDataset, client: Client, slot: Slot, state: dict[str, Any] | None
    ) -> None:
        self.ds = ds
        self.client = client
        self.slot = slot
        self.epoch = ds.epoch
        self.plan: list[Segment] = self._plan()
        self.quota = self._quota()
        self.rng = random.Random(f"objsdk-samples/{ds.seed}/{ds.epoch}/{slot.key}")
        self.pos = 0  # index into the plan (beyond it when a quota cycles the shards)
        self.offset = self._start(0)  # byte offset of the next member header at pos
        self.taken = 0  # samples the source took from the segment at pos
        self.yielded = 0
        # The version (ETag, version id) each shard was read in, by position, for the
        # shards whose samples are still to come from that version: the one at ``pos``
        # and those with samples in the shuffle buffer. A resumed pass reads them pinned
        # to it (see state()).
        self._pins: dict[int, VersionPin] = {}
        self.buffer: ShuffleBuffer[tuple[RawSample, int]] = ShuffleBuffer(
            ds.shuffle_buffer, ds.shuffle_initial, self.rng
        )
        self._prefetch: tuple[int, int, Future[ObjectFile]] | None = None
        self._pool: ThreadPoolExecutor | None = None
        # The prefetch may be started by a waiter in the pool (see _prefetch_once): the
        # position it was started (or given up) for, and whether the pass is over.
        self._prefetch_lock = threading.Lock()
        self._prefetch_for: int | None = None
        self._stopped = False
        # With the adaptive default, the most parts a shard's reader climbed to: later
        # shards start there instead of climbing again from one stream each time.
        self._learned: int | None = None
        self._opened = 0  # shards opened for reading by this slot in this process
        self._probed_at: float | None = None  # when the last probe was opened (_now)
        # Shards opened adaptive and not yet closed: the current one and, while it is
        # read, the next (prefetched). Each teaches ``_learned`` its level (_learn).
        self._probes: list[ObjectFile] = []
        self._probes_lock = threading.Lock()  # the prefetch thread may reopen a shard
        # This worker's share of the process's connections to the endpoint.
        self._cap = max(1, ds.connections // slot.num_workers)
        # Whether a shard has given this slot a sample (in this process): from then on a
        # shard that cannot connect is an outage to wait out (max_stall), where the
        # first one's is an endpoint not reached, raised at once (ObjectFile.reached).
        self._reached = False
        previous = ds._readers.get(slot.key)
        if previous is not None:
            self._reached = previous._reached
        if previous is not None and previous._cap == self._cap:
            # The same slot's last epoch in this process (persistent workers, or one
            # process): its level and its count go on, so an epoch starts at the level
            # the last one learned and the probes keep their rhythm across epochs.
            self._learned, self._opened = previous._learned, previous._opened
            self._probed_at = previous._probed_at
        if state is not None:
            self._restore(state)
        # The loaded state this pass resumes, until the pass takes it over (_take_over).
        self._resuming = state

    def _plan(self) -> list[Segment]:
        ds = self.ds
        if ds.index is not None:
            counts = [ds.index[str(s)].count for s in ds.shards]
            return plan_samples(
                counts,
                self.slot,
                seed=ds.seed,
                epoch=ds.epoch,
                shuffle=ds.shuffle_shards,
                even=ds.even,
            )
        plan = plan_shards(
            len(ds.shards),
            self.slot,
            seed=ds.seed,
            epoch=ds.epoch,
            shuffle=ds.shuffle_shards,
            even=ds.even,
        )
        return [Segment(i) for i in plan]

    def _start(self, pos: int) -> int:
        """Byte offset where the segment at ``pos`` starts."""
        if not self.plan:
            return 0
        seg = self.plan[pos % len(self.plan)]
        if seg.first == 0 or self.ds.index is None:
            return 0
        return self.ds.index[str(self.ds.shards[seg.shard])].offsets[seg.first]

    def _quota(self) -> int | None:
        total = self.ds.samples_per_rank
        if total is None or self.ds.index is not None:
            return None
        # Workers of this rank that have shards share the rank's quota.
        rank_shards = plan_shards(
            len(self.ds.shards),
            Slot(rank=self.slot.rank, world_size=self.slot.world_size),
            seed=self.ds.seed,
            epoch=self.ds.epoch,
            shuffle=self.ds.shuffle_shards,
            even=self.ds.even,
        )
        active = min(self.slot.num_workers, len(rank_shards))
        if self.slot.worker >= active:
            return 0
        return split_quota(total, active, self.slot.worker)

    # -- reading ---------------------------------------------------------------------------

    def _shard(self, pos: int) -> Shard:
        return self.ds.shards[self.plan[pos % len(self.plan)].shard]

    def _more(self) -> bool:
        if not self.plan:
            return False
        if self.quota is None:
            return self.pos < len(self.plan)
        return self.yielded < self.quota

    def _open(
        self,
        shard: Shard,
        offset: int,
        *,
        one_stream: bool = False,
        pin: VersionPin | None = None,
    ) -> ObjectFile:
        """A reader of ``shard`` from ``offset``; ``pin``: the version it must read (a
        resumed shard's saved one): every request sends its ETag as ``If-Match`` and its
        version id, so another version is refused by the first answer."""
        readahead = self.ds.readahead
        if readahead is None and not one_stream:
            now = _now()
            since = None if self._probed_at is None else now - self._probed_at
            readahead = carried_level(self._learned, self._opened, self._cap, since)
            self._opened += 1
            if readahead is None:
                self._probed_at = now
        elif readahead is not None:
            readahead = min(readahead, self._cap) if readahead else 0
        if pin is None:
            f = self.client.open(
                shard.bucket,
                shard.key,
                readahead=0 if one_stream else readahead,
                part_size=self.ds.part_size,
                max_stall=self.ds.max_stall,
            )
        else:  # Client.open pins only to what head_object returned
            f = ObjectFile(
                self.client,
                shard.bucket,
                shard.key,
                readahead=0 if one_stream else readahead,
                part_size=self.ds.part_size,
                max_stall=self.ds.max_stall,
                pin=pin,
            )
        if self._reached:
            f.reached = True
        if readahead is None and not one_stream:
            with self._probes_lock:
                self._probes.append(f)
        self.ds.reads.append(ShardRead(str(shard), offset, f.stats))
        return f

    def _start_prefetch(self, pos: int) -> None:
        """Open the shard at ``pos`` from its start and fetch its first part, in the
        background, while the current one is read."""
        if self.quota is None and pos >= len(self.plan):
            return
        start = self._start(pos)
        f = self._open(self._shard(pos), start)

        def first_part() -> ObjectFile:
            try:
                f.seek(start)
                f.peek(1)
            except Exception:  # the reader meets (and reports) the same failure itself
                f.close()
                self._forget(f)
                return self._open(self._shard(pos), start)
            return f

        self._prefetch = (pos, start, self._prefetch_pool().submit(first_part))

    def _prefetch_pool(self) -> ThreadPoolExecutor:
        """Two threads: one opens the next shard, while the other may wait for the
        current shard's level to settle (a wait must not hold an opening back)."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(2, thread_name_prefix="objsdk-shard-prefetch")
        return self._pool

    def _prefetch_once(self, pos: int, settled: ObjectFile | None = None) -> None:
        """Start the prefetch of ``pos`` unless it was started or given up already (the
        reading thread and a waiter may both try); ``settled``: the adaptive shard
        whose level the next shard starts at."""
        with self._prefetch_lock:
            if self._stopped or self._prefetch_for == pos:
                return
            self._prefetch_for = pos
            if settled is not None:
                self._learn(settled)
            self._start_prefetch(pos)

    def _prefetch_when_settled(self, f: ObjectFile, pos: int) -> None:
        """Start the prefetch of ``pos`` from the pool as soon as the adaptive shard
        ``f`` settles: the reading thread may be waiting for one of ``f``'s parts then,
        a shard's time on a slow link, while the level is known."""

        def wait() -> None:
            # The wait ends as the level settles, or as the shard closes (None); the
            # timeout only bounds a pass that ends without closing it.
            while not (self._stopped or f.closed):
                if f.wait_readahead_settled(1.0) is not None:
                    self._prefetch_once(pos, f)
                    return

        self._prefetch_pool().submit(wait)

    def _take(self, pos: int, offset: int, pin: VersionPin | None = None) -> ObjectFile:
        """The reader of the shard at ``pos`` from ``offset``: the prefetched one, or a
        new one (pinned to ``pin``; a pinned shard, resumed, is never the prefetched)."""
        pending, self._prefetch = self._prefetch, None
        if pending is not None:
            p, o, future = pending
            f = future.result()
            if (p, o) == (pos, offset) and pin is None:
                if self._reached:  # opened (in the background) before a sample came
                    f.reached = True
                return f
            f.close()
            self._forget(f)
        return self._open(self._shard(pos), offset, pin=pin)

    def _closed(self, f: ObjectFile) -> None:
        """A shard read to its end or left: if it was opened adaptive, it teaches the
        next shards their level."""
        if self._forget(f):
            self._learn(f)

    def _is_probe(self, f: ObjectFile) -> bool:
        """Whether ``f`` was opened adaptive and is still open."""
        with self._probes_lock:
            return any(p is f for p in self._probes)

    def _settled_or_halfway(self, f: ObjectFile, first: int) -> bool:
        """Whether the adaptive shard ``f`` (read from ``first``) settled or is half
        read; if so, it teaches the next shards their level."""
        if f.readahead_settled is None:
            read = self.offset - first
            # Nothing read yet: the size may not be known, and asking would cost a HEAD.
            if read == 0 or read * 2 < f.size - first:
                return False
        self._learn(f)
        return True

    def _learn(self, f: ObjectFile) -> None:
        """The level the next shards start at, from the adaptive shard ``f``: the level
        it settled at, so the level follows the network both ways. A climb not settled
        yet (a shard read too fast to judge its step, or one fast burst) teaches nothing
        if a level was learned before; with none, where it has climbed to beats one
        stream again."""
        level = f.readahead_settled
        if level is None and self._learned is None:
            level = f.stats.readahead
        if level is not None:
            self._learned = level

    def _forget(self, f: ObjectFile) -> bool:
        """Stop tracking ``f`` as an adaptive shard; whether it was one."""
        with self._probes_lock:
            for i, probe in enumerate(self._probes):
                if probe is f:
                    del self._probes[i]
                    return True
        return False

    def _source(self) -> Generator[tuple[RawSample, int], None, None]:
        """Raw samples in reading order; ``pos``/``offset`` always name what comes next."""
        cycle_start, cycle_yield = self.pos, self.yielded
        while self._more():
            pos, shard = self.pos, self._shard(self.pos)
            name = str(shard)
            count = self.plan[pos % len(self.plan)].samples
            if count is None or self.taken < count:
                yield from self._segment(pos, shard, count)
            self.pos, self.offset, self.taken = pos + 1, self._start(pos + 1), 0
            live = self._live()
            self._pins = {p: pin for p, pin in self._pins.items() if p in live}
            if self.quota is not None and self.pos - cycle_start >= len(self.plan):
                if self.yielded == cycle_yield:
                    raise ShardError(
                        f"no samples in a full pass over {len(self.plan)} shards; cannot "
                        f"yield samples_per_rank={self.ds.samples_per_rank}",
                        shard=name,
                    )
                cycle_start, cycle_yield = self.pos, self.yielded

    def _segment(
        self, pos: int, shard: Shard, count: int | None
    ) -> Generator[tuple[RawSample, int], None, None]:
        """The rest of the segment at ``pos``: from ``offset``, ``count - taken`` samples
        (or to the end of the shard)."""
        name = str(shard)
        # A shard resumed mid-way is read in the version the state saved, or refused.
        pin = self._pins.get(pos)
        f = self._take(pos, self.offset, pin)
        first = self.offset
        read = False  # whether a sample came from f: a refusal of the pin comes before
        try:
            # The next shard is opened, and its first part fetched, in the background.
            # While this shard's adaptive level still climbs, that waits: opened now,
            # the next shard would climb again from one stream; opened once this one
            # settles, it starts at the level this one found. Half way through at most.
            waiting = self._is_probe(f) and not self._settled_or_halfway(f, first)
            if waiting:
                self._prefetch_when_settled(f, pos + 1)
            else:
                self._prefetch_once(pos + 1)
            for raw in group_samples(iter_members(f, name, self.offset), name):
                read = self._reached = True
                self._check_version(f, shard)
                if pos not in self._pins:
                    self._pins[pos] = VersionPin(etag=f.etag, version_id=f.version_id)
                self.offset = raw.end
                self.taken += 1
                if waiting and self._settled_or_halfway(f, first):
                    waiting = False
                    self._prefetch_once(pos + 1)
                yield raw, pos
                if count is not None and self.taken >= count:
                    break
        except ShardError as e:
            self.ds._handle(e if read else self._replaced(e, pin, shard))
        finally:
            with self._prefetch_lock:
                self._prefetch_for = pos + 1  # started, or left to _take
            f.close()
            self._closed(f)

    def _check_version(self, f: ObjectFile, shard: Shard) -> None:
        """With an index, the shard read must be the version the index describes."""
        index = self.ds.index
        if index is None:
            return
        want = index[str(shard)].etag
        got = normal_etag(f.etag)
        if want is not None and got is not None and want != got:
            raise shard_changed(
                shard,
                got,
                want,
                since="its index was built",
                record="index",
                remedy="rebuild the index (objsdk index s3://bucket/prefix/)",
            )

    def samples(self) -> Iterator[dict[str, Any]]:
        source = self._source()
        try:
            if self.quota is None or self.yielded < self.quota:
                for raw, pos in shuffled(source, self.buffer):
                    sample = self._decode(raw, str(self._shard(pos)))
                    if sample is None:
                        continue
                    self.yielded += 1
                    self._take_over()
                    yield sample
                    if self.quota is not None and self.yielded >= self.quota:
                        break
            self._take_over()
        finally:
            source.close()  # closes the shard being read
            self._close()

    def _decode(self, raw: RawSample, shard: str) -> dict[str, Any] | None:
        sample: dict[str, Any] = {"__key__": raw.key, "__shard__": shard}
        for suffix, data in raw.fields.items():
            fn = decoder_for(self.ds.decoders, suffix)
            if fn is None:
                sample[suffix] = data
                continue
            try:
                sample[suffix] = fn(data)
            except Exception as e:
                err = ShardError(
                    f"cannot decode {suffix!r}: {e}",
                    shard=shard,
                    member=raw.members[suffix],
                )
                err.__cause__ = e
                self.ds._handle(err)
                return None
        return sample

    def _close(self) -> None:
        with self._prefetch_lock:
            self._stopped = True  # a waiter in the pool starts nothing from now on
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        pending, self._prefetch = self._prefetch, None
        if pending is not None:
            pending[2].result().close()
