"""ShardDataset: samples from WebDataset tar shards in a bucket, resumable mid-epoch."""

from __future__ import annotations

import collections
import logging
import os
import pickle
import random
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from objsdk import Client, ObjectFile, ReadStats
from objsdk.errors import InvalidArgument

from .decode import Decoder, decoder_for, normalise_decoders
from .errors import ShardError
from .shards import Shard, resolve_shards
from .shuffle import ShuffleBuffer, shuffled
from .split import Slot, normalise_even, plan_shards, rank_from_env, split_quota
from .tar import RawSample, group_samples, iter_members

if TYPE_CHECKING:
    _Base = object
else:  # a torch IterableDataset when torch is there; never imported by `import objsdk`
    try:
        from torch.utils.data import IterableDataset as _Base
    except ImportError:
        _Base = object

__all__ = ["OnError", "ShardDataset", "ShardRead"]

log = logging.getLogger("objsdk.datasets")

OnError = str | Callable[[ShardError], bool]
STATE_VERSION = 1
DEFAULT_PART_SIZE = 4 << 20


@dataclass
class ShardRead:
    """One pass of a reader over a shard: where it started and what it cost."""

    shard: str
    offset: int
    stats: ReadStats


def _torch_rank() -> tuple[int, int] | None:
    try:
        import torch.distributed as dist  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return None
    if dist.is_available() and dist.is_initialized():
        return int(dist.get_rank()), int(dist.get_world_size())
    return None


def _torch_worker() -> tuple[int, int] | None:
    try:
        from torch.utils.data import (  # type: ignore[import-not-found,unused-ignore]
            get_worker_info,
        )
    except ImportError:
        return None
    info = get_worker_info()
    if info is None:
        return None
    return int(info.id), int(info.num_workers)


class ShardDataset(_Base):
    """Samples from tar shards in WebDataset layout, read with the resilient reader.

    ``shards``: ``bucket/key`` strings, a prefix ending in ``/`` or a brace pattern
    (``bucket/train/shard-{000000..000099}.tar``). Each sample is a dict with
    ``__key__``, ``__shard__`` and one entry per member suffix (bytes unless ``decode``
    maps that suffix to a callable).

    Every shard goes to exactly one (rank, worker) per epoch; the order comes from
    ``(seed, epoch)`` (see :meth:`set_epoch`). Rank and world size come from
    ``torch.distributed`` when initialised, else ``rank``/``world_size``, else the
    ``RANK``/``WORLD_SIZE`` variables, else 0/1; the worker from ``worker``/
    ``num_workers``, else torch's ``get_worker_info()``, else 0/1.

    ``even`` (``True`` = ``"wrap"``, ``"drop"`` or ``False``) gives every rank the same
    number of shards; ``samples_per_rank`` makes every rank yield exactly that many
    samples (stopping early or reading its shards again). ``on_error``: ``"raise"``,
    ``"skip"`` (log, count in :attr:`skipped`, go on with the next shard) or a callable
    taking the :class:`ShardError` and returning True to skip.

    While a shard is read, the next one is opened and its first part fetched in the
    background. ``readahead`` is passed to :meth:`Client.open` for every shard: ``None``
    (the default) is the client's adaptive read-ahead (one stream, then more parallel
    ``part_size`` parts while the rate keeps rising; each shard's ``stats.readahead`` in
    :attr:`reads` tells what it chose; once a shard has climbed to N parts, the shards a
    worker opens after it start at N instead of climbing again); an int fixes the number
    of parallel parts (0: one stream per shard).
    """

    def __init__(
        self,
        client: Client,
        shards: str | Iterable[str],
        *,
        shuffle_shards: bool = True,
        shuffle_buffer: int = 0,
        shuffle_initial: int | None = None,
        seed: int = 0,
        decode: Mapping[str, Decoder] | None = None,
        on_error: OnError = "raise",
        even: bool | str = True,
        samples_per_rank: int | None = None,
        readahead: int | None = None,
        part_size: int = DEFAULT_PART_SIZE,
        rank: int | None = None,
        world_size: int | None = None,
        worker: int | None = None,
        num_workers: int | None = None,
    ) -> None:
        if not isinstance(client, Client):
            raise InvalidArgument(f"client must be an objsdk.Client, got {type(client).__name__}")
        if not (on_error in ("raise", "skip") or callable(on_error)):
            raise InvalidArgument(
                f"on_error must be 'raise', 'skip' or a callable, got {on_error!r}"
            )
        if shuffle_buffer < 0:
            raise InvalidArgument(f"shuffle_buffer must be >= 0, got {shuffle_buffer}")
        if samples_per_rank is not None and samples_per_rank < 0:
            raise InvalidArgument(f"samples_per_rank must be >= 0, got {samples_per_rank}")
        if readahead is not None and (
            isinstance(readahead, bool) or not isinstance(readahead, int) or readahead < 0
        ):
            raise InvalidArgument(
                "readahead must be None (the client's adaptive read-ahead) or an int >= 0 "
                f"(parallel parts; 0 = one stream), got {readahead!r}"
            )
        if part_size < 1:
            raise InvalidArgument(f"part_size must be positive, got {part_size}")
        if (rank is None) != (world_size is None):
            raise InvalidArgument("give both rank and world_size, or neither")
        if (worker is None) != (num_workers is None):
            raise InvalidArgument("give both worker and num_workers, or neither")
        self.client = client
        self.shards: list[Shard] = resolve_shards(client, shards)
        self.shuffle_shards = shuffle_shards
        self.shuffle_buffer = shuffle_buffer
        self.shuffle_initial = shuffle_buffer if shuffle_initial is None else shuffle_initial
        self.seed = seed
        self.decoders = normalise_decoders(decode)
        self.on_error = on_error
        self.even = normalise_even(even)
        self.samples_per_rank = samples_per_rank
        self.readahead = readahead
        self.part_size = part_size
        self._rank = None if rank is None or world_size is None else (rank, world_size)
        self._worker = None if worker is None or num_workers is None else (worker, num_workers)
        if self._rank is not None:
            Slot(rank=self._rank[0], world_size=self._rank[1])
        if self._worker is not None:
            Slot(worker=self._worker[0], num_workers=self._worker[1])
        self.epoch = 0
        #: shard errors skipped in this process (``on_error="skip"`` or a callable)
        self.skipped = 0
        #: recent passes over shards in this process, with the reader's statistics
        self.reads: collections.deque[ShardRead] = collections.deque(maxlen=4096)
        self._pending: dict[str, dict[str, Any]] = {}
        self._readers: dict[str, _SlotReader] = {}
        self._pid = os.getpid()

    def __repr__(self) -> str:
        return (
            f"ShardDataset({len(self.shards)} shards, epoch={self.epoch}, seed={self.seed}, "
            f"shuffle_buffer={self.shuffle_buffer})"
        )

    # -- processes -----------------------------------------------------------------------

    def __getstate__(self) -> dict[str, Any]:
        # Loaded state travels to worker processes; the progress of iterators that ran
        # here does not (each process reads its own slot from its own start).
        state = dict(self.__dict__)
        state["_readers"] = {}
        state["reads"] = collections.deque(maxlen=4096)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._pid = os.getpid()

    def _own_client(self) -> Client:
        """The client, rebuilt once in every new process: a forked child must not use
        the connections it inherited."""
        if os.getpid() != self._pid:
            self.client = pickle.loads(pickle.dumps(self.client))
            self._readers = {}
            self._pid = os.getpid()
        return self.client

    def set_worker(self, worker: int, num_workers: int) -> None:
        """Read as worker ``worker`` of ``num_workers`` (instead of asking torch)."""
        Slot(worker=worker, num_workers=num_workers)
        self._worker = (worker, num_workers)

    def slot(self) -> Slot:
        """The (rank, worker) this process reads as, right now."""
        rank = _torch_rank() or self._rank or rank_from_env()
        worker = self._worker or _torch_worker() or (0, 1)
        return Slot(rank=rank[0], world_size=rank[1], worker=worker[0], num_workers=worker[1])

    # -- epochs and state ----------------------------------------------------------------

    def set_epoch(self, epoch: int) -> None:
        """Use the shard order and shuffle of ``epoch`` (derived from ``(seed, epoch)``)."""
        if epoch < 0:
            raise InvalidArgument(f"epoch must be >= 0, got {epoch}")
        self.epoch = epoch

    def state_dict(self) -> dict[str, Any]:
        """Where every (rank, worker) that read in this process stands, plus what was
        loaded for the others: shard order, shard, byte offset of the next tar member,
        and the shuffle buffer (as offsets) and its random state. Plain Python data."""
        slots = {k: v for k, v in self._pending.items() if v.get("epoch") == self.epoch}
        for key, reader in self._readers.items():
            if reader.epoch == self.epoch:
                slots[key] = reader.state()
        return {
            "version": STATE_VERSION,
            "seed": self.seed,
            "epoch": self.epoch,
            "n_shards": len(self.shards),
            "slots": slots,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue from ``state``: the next iteration of each (rank, worker) resumes
        where that one stood (several processes' state dicts may be merged by updating
        ``"slots"``)."""
        if state.get("version") != STATE_VERSION:
            raise InvalidArgument(f"unknown state version {state.get('version')!r}")
        if state.get("seed") != self.seed or state.get("n_shards") != len(self.shards):
            raise InvalidArgument(
                f"state is for seed {state.get('seed')!r} and {state.get('n_shards')!r} "
                f"shards; this dataset has seed {self.seed} and {len(self.shards)} shards"
            )
        self.epoch = int(state["epoch"])
        self._pending = {str(k): dict(v) for k, v in state["slots"].items()}
        self._readers = {}

    # -- iteration -----------------------------------------------------------------------

    def __iter__(self) -> Iterator[dict[str, Any]]:
        client = self._own_client()
        slot = self.slot()
        pending = self._pending.pop(slot.key, None)
        if pending is not None and pending.get("epoch") != self.epoch:
            pending = None
        if pending is not None and (
            pending.get("world_size"),
            pending.get("num_workers"),
        ) != (slot.world_size, slot.num_workers):
            raise InvalidArgument(
                f"state for slot {slot.key} was saved with world_size="
                f"{pending.get('world_size')} and num_workers={pending.get('num_workers')}; "
                f"this process reads with {slot.world_size} and {slot.num_workers}"
            )
        reader = _SlotReader(self, client, slot, pending)
        self._readers[slot.key] = reader
        return reader.samples()

    def _handle(self, error: ShardError) -> None:
        """Apply ``on_error``: return to skip, raise to stop."""
        if self.on_error == "raise":
            raise error
        if callable(self.on_error) and not self.on_error(error):
            raise error
        self.skipped += 1
        log.warning("skipped: %s", error)


class _SlotReader:
    """One (rank, worker)'s pass over its shards in one epoch."""

    def __init__(
        self, ds: ShardDataset, client: Client, slot: Slot, state: dict[str, Any] | None
    ) -> None:
        self.ds = ds
        self.client = client
        self.slot = slot
        self.epoch = ds.epoch
        self.plan = plan_shards(
            len(ds.shards),
            slot,
            seed=ds.seed,
            epoch=ds.epoch,
            shuffle=ds.shuffle_shards,
            even=ds.even,
        )
        self.quota = self._quota()
        self.rng = random.Random(f"objsdk-samples/{ds.seed}/{ds.epoch}/{slot.key}")
        self.pos = 0  # index into the plan (beyond it when a quota cycles the shards)
        self.offset = 0  # byte offset of the next member header in the shard at pos
        self.yielded = 0
        self.buffer: ShuffleBuffer[tuple[RawSample, int]] = ShuffleBuffer(
            ds.shuffle_buffer, ds.shuffle_initial, self.rng
        )
        self._prefetch: tuple[int, int, Future[ObjectFile]] | None = None
        self._pool: ThreadPoolExecutor | None = None
        # With the adaptive default, the most parts a shard's reader climbed to: later
        # shards start there instead of climbing again from one stream each time.
        self._learned = 0
        if state is not None:
            self._restore(state)

    def _quota(self) -> int | None:
        total = self.ds.samples_per_rank
        if total is None:
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

    # -- state -----------------------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        version, internal, gauss = self.rng.getstate()
        return {
            "epoch": self.epoch,
            "world_size": self.slot.world_size,
            "num_workers": self.slot.num_workers,
            "plan": list(self.plan),
            "pos": self.pos,
            "offset": self.offset,
            "yielded": self.yielded,
            "rng": [version, list(internal), gauss],
            "buffer": [[pos, raw.offset] for raw, pos in self.buffer.items],
        }

    def _restore(self, state: Mapping[str, Any]) -> None:
        plan = [int(i) for i in state["plan"]]
        if any(not 0 <= i < len(self.ds.shards) for i in plan):
            raise InvalidArgument("state names shards this dataset does not have")
        self.plan = plan
        self.pos = int(state["pos"])
        self.offset = int(state["offset"])
        self.yielded = int(state["yielded"])
        version, internal, gauss = state["rng"]
        self.rng.setstate((version, tuple(internal), gauss))
        self.buffer.items = self._refetch([(int(p), int(o)) for p, o in state["buffer"]])

    def _refetch(self, refs: list[tuple[int, int]]) -> list[tuple[RawSample, int]]:
        """The buffered samples again, read at their offsets (one reader per shard)."""
        found: dict[tuple[int, int], RawSample] = {}
        by_pos: dict[int, list[int]] = collections.defaultdict(list)
        for pos, offset in refs:
            by_pos[pos].append(offset)
        for pos, offsets in by_pos.items():
            shard = self._shard(pos)
            with self._open(shard, min(offsets), one_stream=True) as f:
                for offset in sorted(offsets):
                    samples = group_samples(iter_members(f, str(shard), offset), str(shard))
                    raw = next(samples, None)
                    if raw is None:
                        raise ShardError(
                            "no sample at saved offset", shard=str(shard), offset=offset
                        )
                    found[pos, offset] = raw
        return [(found[ref], ref[0]) for ref in refs]

    # -- reading ---------------------------------------------------------------------------

    def _shard(self, pos: int) -> Shard:
        return self.ds.shards[self.plan[pos % len(self.plan)]]

    def _more(self) -> bool:
        if not self.plan:
            return False
        if self.quota is None:
            return self.pos < len(self.plan)
        return self.yielded < self.quota

    def _open(self, shard: Shard, offset: int, *, one_stream: bool = False) -> ObjectFile:
        readahead = self.ds.readahead
        if readahead is None and self._learned:
            readahead = self._learned
        f = self.client.open(
            shard.bucket,
            shard.key,
            readahead=0 if one_stream else readahead,
            part_size=self.ds.part_size,
        )
        self.ds.reads.append(ShardRead(str(shard), offset, f.stats))
        return f

    def _start_prefetch(self, pos: int) -> None:
        """Open the shard at ``pos`` from its start and fetch its first part, in the
        background, while the current one is read."""
        if self.quota is None and pos >= len(self.plan):
            return
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="objsdk-shard-prefetch")
        f = self._open(self._shard(pos), 0)

        def first_part() -> ObjectFile:
            try:
                f.peek(1)
            except Exception:  # the reader meets (and reports) the same failure itself
                f.close()
                return self._open(self._shard(pos), 0)
            return f

        self._prefetch = (pos, 0, self._pool.submit(first_part))

    def _take(self, pos: int, offset: int) -> ObjectFile:
        pending, self._prefetch = self._prefetch, None
        if pending is not None:
            p, o, future = pending
            f = future.result()
            if (p, o) == (pos, offset):
                return f
            f.close()
        return self._open(self._shard(pos), offset)

    def _source(self) -> Generator[tuple[RawSample, int], None, None]:
        """Raw samples in reading order; ``pos``/``offset`` always name what comes next."""
        cycle_start, cycle_yield = self.pos, self.yielded
        while self._more():
            pos, shard = self.pos, self._shard(self.pos)
            name = str(shard)
            f = self._take(pos, self.offset)
            try:
                self._start_prefetch(pos + 1)
                for raw in group_samples(iter_members(f, name, self.offset), name):
                    self.offset = raw.end
                    yield raw, pos
            except ShardError as e:
                self.ds._handle(e)
            finally:
                f.close()
                if self.ds.readahead is None:
                    self._learned = max(self._learned, f.stats.readahead)
            self.pos, self.offset = pos + 1, 0
            if self.quota is not None and self.pos - cycle_start >= len(self.plan):
                if self.yielded == cycle_yield:
                    raise ShardError(
                        f"no samples in a full pass over {len(self.plan)} shards; cannot "
                        f"yield samples_per_rank={self.ds.samples_per_rank}",
                        shard=name,
                    )
                cycle_start, cycle_yield = self.pos, self.yielded

    def samples(self) -> Iterator[dict[str, Any]]:
        source = self._source()
        try:
            if self.quota is not None and self.yielded >= self.quota:
                return
            for raw, pos in shuffled(source, self.buffer):
                sample = self._decode(raw, str(self._shard(pos)))
                if sample is None:
                    continue
                self.yielded += 1
                yield sample
                if self.quota is not None and self.yielded >= self.quota:
                    return
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
        pending, self._prefetch = self._prefetch, None
        if pending is not None:
            pending[2].result().close()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
