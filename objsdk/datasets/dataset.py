"""ShardDataset: samples from WebDataset tar shards in a bucket, resumable mid-epoch."""

from __future__ import annotations

import collections
import logging
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from objsdk import Client
from objsdk._core.client_config import ClientConfig
from objsdk.errors import ConnectError, CredentialsError, InvalidArgument, S3Error

from .decode import Decoder, normalise_decoders
from .errors import ShardError
from .index import ShardIndex, index_from_spec, load_index
from .reader import ShardRead, SlotReader
from .shards import Shard, resolve_shards
from .shared import SecretBox, SharedState, spawning
from .split import Slot, normalise_even, rank_from_env

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
# 3: every slot pins the shards it stands in to the version it read (ETag, version id).
STATE_VERSION = 3
DEFAULT_PART_SIZE = 4 << 20
# How long a shard's stream may go without progress before the read fails: a training
# job would rather wait out an outage of a minute or two than die.
DEFAULT_MAX_STALL = 180.0
# Connections to the endpoint a process's DataLoader workers read shards with, in all.
DEFAULT_CONNECTIONS = 16


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

    ``shards``: ``bucket/key`` strings, a prefix ending in ``/``, a key pattern holding
    ``*`` (``bucket/train/*.tar``) or a brace pattern
    (``bucket/train/shard-{000000..000099}.tar``); see :mod:`objsdk.datasets.shards`.
    Each sample is a dict with
    ``__key__``, ``__shard__`` and one entry per member suffix (bytes unless ``decode``
    maps that suffix to a callable).

    Every shard goes to exactly one (rank, worker) per epoch; the order comes from
    ``(seed, epoch)`` (see :meth:`set_epoch`). Rank and world size come from
    ``torch.distributed`` when initialised, else ``rank``/``world_size``, else the
    ``RANK``/``WORLD_SIZE`` variables, else 0/1; the worker from ``worker``/
    ``num_workers``, else torch's ``get_worker_info()``, else 0/1.

    ``index``: the sample index of the shards (see :mod:`objsdk.datasets.index`). By
    default (None) it is looked for beside the shards; ``False`` does without, ``True``
    requires it, a ``"bucket/key"`` or a :class:`ShardIndex` names it. With an index the
    split is by sample: ``even`` (``True`` = ``"wrap"``: at most world size - 1 samples
    read twice; ``"drop"``: at most that many unread; ``False``: counts differ by one)
    gives every rank the same number of samples, and ``samples_per_rank`` is ignored.
    Without one the split is by shard: ``even`` gives every rank the same number of
    *shards*, ``samples_per_rank`` makes every rank yield exactly that many samples
    (stopping early or reading its shards again), and a multi-rank job logs a warning
    once. ``on_error``: ``"raise"``,
    ``"skip"`` (log, count in :attr:`skipped`, go on with the next shard; but an endpoint
    that cannot be reached, or credentials the service refuses, stop the epoch: every
    shard would fail alike) or a callable taking the :class:`ShardError` and returning
    True to skip.

    While a shard is read, the next one is opened and its first part fetched in the
    background. ``readahead`` is passed to :meth:`Client.open` for every shard: ``None``
    (the default) is the client's adaptive read-ahead (one stream, then more parallel
    ``part_size`` parts while the rate keeps rising; each shard's ``stats.readahead`` in
    :attr:`reads` tells what it chose; once a shard has climbed to N parts, the shards a
    worker opens after it start at the level it ended at, also in its next epoch when
    the worker persists, and every fourth shard adapts again, so the level comes down as
    well as up); an int fixes the number of parallel
    parts (0: one stream per shard). ``connections`` (default 16) is the budget of
    connections to the endpoint shared by the DataLoader workers of one process: each
    worker's fixed or carried level is at most ``connections // num_workers``.

    ``max_stall``: seconds a shard's stream may go without progress, resuming, before
    the read fails with a :class:`ShardError` (default :data:`DEFAULT_MAX_STALL`, 180 s,
    which outlasts a one-minute outage); None falls back to the client's ``max_resume``
    count (about 30 s).

    Every argument after ``shards`` is keyword-only; the defaults:

    ======================  ===============  ============================================
    argument                default          what the default does
    ======================  ===============  ============================================
    ``shuffle_shards``      ``True``         each epoch reads the shards in an order
                                             drawn from ``(seed, epoch)``; False: as given
    ``shuffle_buffer``      ``0``            no sample shuffle buffer (N: one of N)
    ``shuffle_initial``     ``None``         the buffer fills to ``shuffle_buffer`` first
    ``seed``                ``0``            the seed of every random draw
    ``decode``              ``None``         fields stay bytes (:func:`default_decoders`)
    ``on_error``            ``"raise"``      a shard that cannot be read stops the epoch
    ``even``                ``True``         every rank gets as many samples (an index)
                                             or shards (none): ``"wrap"``
    ``samples_per_rank``    ``None``         no quota of samples per rank
    ``readahead``           ``None``         the client's adaptive read-ahead
    ``part_size``           ``4 << 20``      4 MiB parts for read-ahead
    ``rank``                ``None``         torch.distributed, else ``RANK``, else 0
    ``world_size``          ``None``         torch.distributed, else ``WORLD_SIZE``, else 1
    ``worker``              ``None``         torch's ``get_worker_info()``, else 0
    ``num_workers``         ``None``         torch's ``get_worker_info()``, else 1
    ``index``               ``None``         the index beside the shards, if there is one
    ``max_stall``           ``180.0``        a stream may stall for 3 minutes
    ``connections``         ``16``           connections shared by a process's workers
    ======================  ===============  ============================================
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
        index: ShardIndex | str | bool | None = None,
        max_stall: float | None = DEFAULT_MAX_STALL,
        connections: int = DEFAULT_CONNECTIONS,
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
        if connections < 1:
            raise InvalidArgument(f"connections must be >= 1, got {connections}")
        if max_stall is not None and not max_stall > 0:
            raise InvalidArgument(f"max_stall must be > 0 seconds or None, got {max_stall!r}")
        if (rank is None) != (world_size is None):
            raise InvalidArgument("give both rank and world_size, or neither")
        if (worker is None) != (num_workers is None):
            raise InvalidArgument("give both worker and num_workers, or neither")
        self.client = client
        self.shards: list[Shard] = resolve_shards(client, shards)
        #: the sample index in use (None: split by shard)
        self.index: ShardIndex | None = _resolve_index(client, self.shards, index)
        self._warned = False
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
        self.max_stall = max_stall
        self.connections = connections
        self._rank = None if rank is None or world_size is None else (rank, world_size)
        self._worker = None if worker is None or num_workers is None else (worker, num_workers)
        if self._rank is not None:
            Slot(rank=self._rank[0], world_size=self._rank[1])
        if self._worker is not None:
            Slot(worker=self._worker[0], num_workers=self._worker[1])
        self._shared = SharedState()
        # (rank, world size) of the process that owns the dataset, carried into workers.
        self._rank_owner: tuple[int, int] | None = None
        # Made now, not while a worker is being started: the pickler that starts it
        # knows only the shared-memory types that existed when it was created.
        self._secret_box = _secret_box(client)
        #: recent passes over shards in this process, with the reader's statistics
        self.reads: collections.deque[ShardRead] = collections.deque(maxlen=4096)
        self._pending: dict[str, dict[str, Any]] = {}
        self._readers: dict[str, SlotReader] = {}
        self._pid = os.getpid()

    def __repr__(self) -> str:
        return (
            f"ShardDataset({len(self.shards)} shards, epoch={self.epoch}, seed={self.seed}, "
            f"shuffle_buffer={self.shuffle_buffer})"
        )

    # -- processes -----------------------------------------------------------------------

    @property
    def epoch(self) -> int:
        """The epoch the next iteration reads (shared with DataLoader workers)."""
        return self._shared.epoch

    @property
    def skipped(self) -> int:
        """Shard errors skipped (``on_error="skip"`` or a callable) in this process and
        in the DataLoader workers reading this dataset."""
        return self._shared.skipped

    def __getstate__(self) -> dict[str, Any]:
        # Loaded state travels to worker processes; the progress of iterators that ran
        # here does not (each process reads its own slot from its own start).
        state = dict(self.__dict__)
        state["_readers"] = {}
        state["reads"] = collections.deque(maxlen=4096)
        if _torch_worker() is None:
            # Rank and world size are worked out here, in the process that owns the
            # dataset: a spawned worker has no process group to ask.
            state["_rank_owner"] = _torch_rank() or self._rank or self._rank_owner
        if spawning() and self._secret_box is not None:
            # A worker being started: its client gets the secret through shared memory,
            # never through the pickle (see SecretBox).
            state["client"] = None
            state["_client_config"] = self.client.config.shared()
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        shared = state.pop("_client_config", None)
        self.__dict__.update(state)
        if shared is not None:
            box = self._secret_box
            shared["secret_key"], shared["session_token"] = (
                box.open() if box is not None else (None, None)
            )
            self.client = Client.from_config(ClientConfig.restored(shared))
        self._pid = os.getpid()

    def _own_client(self) -> Client:
        """The client, rebuilt once in every new process: a forked child must not use
        the connections it inherited. Its credentials come along (a forked child holds
        them in memory already)."""
        if os.getpid() != self._pid:
            self.client = Client.from_config(self.client.config)
            self._readers = {}
            self._pid = os.getpid()
        return self.client

    def set_worker(self, worker: int, num_workers: int) -> None:
        """Read as worker ``worker`` of ``num_workers`` (instead of asking torch)."""
        Slot(worker=worker, num_workers=num_workers)
        self._worker = (worker, num_workers)

    def slot(self) -> Slot:
        """The (rank, worker) this process reads as, right now."""
        # Never guessed in a worker: a spawned one has no process group, so it uses what
        # the process owning the dataset worked out (carried in by the pickle).
        rank = _torch_rank() or self._rank or self._rank_owner or rank_from_env()
        worker = self._worker or _torch_worker() or (0, 1)
        return Slot(rank=rank[0], world_size=rank[1], worker=worker[0], num_workers=worker[1])

    # -- epochs and state ----------------------------------------------------------------

    def set_epoch(self, epoch: int) -> None:
        """Use the shard order and shuffle of ``epoch`` (derived from ``(seed, epoch)``)."""
        if epoch < 0:
            raise InvalidArgument(f"epoch must be >= 0, got {epoch}")
        self._shared.set_epoch(epoch, explicit=True)

    def state_dict(self) -> dict[str, Any]:
        """Where every (rank, worker) that read in this process stands, plus what was
        loaded for the others: shard order, shard, byte offset of the next tar member,
        the shuffle buffer (as offsets) and its random state, and the version (ETag, and
        version id on a versioned bucket) of each shard whose samples are still to come
        from what was read: the shard being read and those with samples in the buffer.
        Plain Python data.

        Raises :class:`~objsdk.errors.InvalidArgument` in a process whose DataLoader
        workers read this epoch: their progress is not visible here, and a state without
        it would replay the epoch (use torchdata's ``StatefulDataLoader``, which asks
        every worker)."""
        if (
            _torch_worker() is None
            and self._shared.workers_read(self.epoch)
            and not any(r.epoch == self.epoch for r in self._readers.values())
        ):
            raise InvalidArgument(
                f"ShardDataset.state_dict(): DataLoader workers read epoch {self.epoch} "
                "of this dataset and this process cannot see where they stand; loading "
                "this state would replay the epoch. Take the state through torchdata's "
                "StatefulDataLoader (it asks every worker), or at an epoch boundary call "
                "set_epoch() instead of saving a state"
            )
        slots = {k: v for k, v in self._pending.items() if v.get("epoch") == self.epoch}
        for key, reader in self._readers.items():
            # A resumed pass that has not taken its loaded state over stands where that
            # state does, which is still loaded (and in ``slots``).
            if reader.epoch == self.epoch and not reader.resuming:
                slots[key] = reader.state()
        return {
            "version": STATE_VERSION,
            "seed": self.seed,
            "epoch": self.epoch,
            "n_shards": len(self.shards),
            "split": self._split,
            "slots": slots,
        }

    @property
    def _split(self) -> str:
        return "shard" if self.index is None else "sample"

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue from ``state``: the next iteration of each (rank, worker) resumes
        where that one stood (several processes' state dicts may be merged by updating
        ``"slots"``). The state's epoch becomes this dataset's, unless :meth:`set_epoch`
        chose one: then that epoch wins, and slots saved in another epoch are ignored
        (a state saved at the end of epoch 0 and ``set_epoch(1)`` read all of epoch 1,
        in whichever order the two calls come).

        A resumed epoch never mixes two versions of a shard: a shard it stood in mid-way
        (or has samples of in the shuffle buffer) is read in the version the state saved
        (pinned by ``If-Match`` on its ETag, and by its version id when the bucket keeps
        versions, which then reads on even after the shard was replaced). A shard
        replaced since is a :class:`ShardError` naming it and both ETags (``__cause__``
        an :class:`~objsdk.ObjectChangedError`) before any of its samples is given out,
        through ``on_error`` (``"skip"`` goes on without the rest of it). Shards the
        epoch had not started are read as they are now. A state saved by an objsdk that
        recorded no versions (state version 2 or older) is refused.

        The state stays loaded until the iteration resuming a (rank, worker) has given out
        a sample or ended. One that fails before (a shard refused as replaced, an
        unreachable endpoint) leaves it loaded, and :meth:`state_dict` returns it: the
        next iteration resumes from it again (or is refused again), and never reads the
        epoch from its start, which would give out again the samples read before the
        state was saved. :meth:`set_epoch` with another epoch leaves it behind; to read
        its epoch from the start, use a dataset that loaded no state."""
        version = state.get("version")
        if isinstance(version, int) and version < STATE_VERSION:
            raise InvalidArgument(_older_state(f"this state (version {version})"))
        if version != STATE_VERSION:
            raise InvalidArgument(f"unknown state version {version!r}")
        slots = state.get("slots")
        if not isinstance(slots, Mapping):
            raise InvalidArgument("state has no 'slots' table")
        for key, slot in slots.items():
            if isinstance(slot, Mapping) and "pins" not in slot:  # merged from an older one
                raise InvalidArgument(_older_state(f"the state of slot {key}"))
        if state.get("seed") != self.seed or state.get("n_shards") != len(self.shards):
            raise InvalidArgument(
                f"state is for seed {state.get('seed')!r} and {state.get('n_shards')!r} "
                f"shards; this dataset has seed {self.seed} and {len(self.shards)} shards"
            )
        if state.get("split") != self._split:
            raise InvalidArgument(
                f"state was saved splitting by {state.get('split')!r}; this dataset splits "
                f"by {self._split!r} (it {'has no' if self.index is None else 'has a'} "
                "sample index): give both the same index= to resume"
            )
        if not self._shared.explicit:
            self._shared.set_epoch(int(state["epoch"]), explicit=False)
        self._pending = {str(k): dict(v) for k, v in slots.items()}
        self._readers = {}

    # -- iteration -----------------------------------------------------------------------

    def __iter__(self) -> Iterator[dict[str, Any]]:
        client = self._own_client()
        slot = self.slot()
        # The loaded state stays loaded until this pass takes it over (SlotReader): a
        # pass that fails before that leaves it for the next iteration to resume again.
        pending = self._pending.get(slot.key)
        if pending is not None and pending.get("epoch") != self.epoch:
            del self._pending[slot.key]  # saved in another epoch: left behind
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
        if _torch_worker() is not None:
            self._shared.worker_reads(self.epoch)
        if self.index is None and slot.world_size > 1 and slot.key == "0/0" and not self._warned:
            self._warned = True
            log.warning(
                "ShardDataset: %d ranks and no sample index beside the shards: the split "
                "is by shard, so ranks whose shards hold different numbers of samples run "
                "out at different steps and a collective (all_reduce) waits forever. "
                "Index the shards once (objsdk index s3://bucket/prefix/, or "
                "objsdk.datasets.build_index) to split by sample",
                slot.world_size,
            )
        reader = SlotReader(self, client, slot, pending)
        self._readers[slot.key] = reader
        return reader.samples()

    def _release(self, key: str, state: Mapping[str, Any]) -> None:
        """The pass of slot ``key`` took over ``state``, loaded for it: unload it (unless
        another state was loaded since)."""
        if self._pending.get(key) is state:
            del self._pending[key]

    def _handle(self, error: ShardError) -> None:
        """Apply ``on_error``: return to skip, raise to stop. ``"skip"`` stops too where
        the error is not the shard's (:func:`_client_wide`)."""
        if self.on_error == "raise" or (self.on_error == "skip" and _client_wide(error)):
            raise error
        if callable(self.on_error) and not self.on_error(error):
            raise error
        worker = _torch_worker()
        self._shared.count_skip(None if worker is None else worker[0])
        log.warning("skipped: %s", error)


# S3 error codes that refuse the client's credentials, not one object: every shard
# would be refused alike.
_REFUSED_CREDENTIALS = frozenset(
    {
        "SignatureDoesNotMatch",
        "InvalidAccessKeyId",
        "InvalidToken",
        "ExpiredToken",
        "InvalidSecurity",
        "RequestTimeTooSkewed",
    }
)


def _client_wide(error: ShardError) -> bool:
    """Whether the shard's read failed because the endpoint cannot be reached or the
    service refuses the client's credentials: true of every shard alike, so skipping
    would read an epoch of nothing, each shard after its retries. A read that stalled
    past ``max_stall`` (:class:`~objsdk.ResumeLimitError`, whatever its last failure)
    is the shard's: the budget the dataset was given to wait for it is spent."""
    cause = error.__cause__
    if isinstance(cause, (ConnectError, CredentialsError)):
        return True
    return isinstance(cause, S3Error) and cause.code in _REFUSED_CREDENTIALS


def _resolve_index(
    client: Client, shards: list[Shard], index: ShardIndex | str | bool | None
) -> ShardIndex | None:
    if index is False:
        return None
    if index is None or index is True:
        try:
            found = load_index(client, shards)
        except S3Error as e:  # no access to an index is having none, unless one is required
            if index is True:
                raise
            log.debug("no sample index: %s", e)
            found = None
        if found is None and index is True:
            raise InvalidArgument(
                f"index=True but no complete sample index beside the shards ({shards[0]}, "
                "...): build one with objsdk index s3://bucket/prefix/"
            )
        return found
    if isinstance(index, str):
        index = index_from_spec(client, index)
    if not isinstance(index, ShardIndex):
        raise InvalidArgument(
            f"index must be None, a bool, 'bucket/key' or a ShardIndex, got {index!r}"
        )
    missing = [str(s) for s in shards if str(s) not in index]
    if missing:
        raise InvalidArgument(f"the index lacks {len(missing)} shards, first {missing[0]}")
    return index


def _older_state(what: str) -> str:
    return (
        f"{what} was saved by an older objsdk without shard ETags; resuming it could mix "
        "versions of a shard: start the epoch again (set_epoch, without load_state_dict)"
    )


def _secret_box(client: Client) -> SecretBox | None:
    """The client's secret in shared memory, when pickling leaves it out."""
    config = client.config
    if config.secret_key is None or config.pickle_credentials:
        return None
    return SecretBox(config.secret_key, config.session_token)
