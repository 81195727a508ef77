"""A slot's resume state: where one (rank, worker)'s pass over its shards stands, saved
as plain data (:meth:`Resumable.state`), and a pass restored to stand there again.

A state holds the pass's plan, its place in it (the shard it reads, the byte offset of
that shard's next sample, the samples taken from it and given out), its random state, its
shuffle buffer (each sample by shard and offset: restoring reads them again) and its
pins: for the shard it reads and each shard with samples in the buffer, the version
(ETag, version id) those samples came from. A resumed pass reads those shards pinned to
those versions, so it never mixes two versions of a shard: one replaced since is refused
before any of its samples. The loaded state stays loaded in the dataset until the pass
gives out a sample or ends (:attr:`Resumable.resuming`).
"""

from __future__ import annotations

import collections
import random
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from objsdk import Client, ObjectFile
from objsdk._core.pin import VersionPin
from objsdk.errors import InvalidArgument, ObjectChangedError, ObjsdkError

from .errors import ShardError
from .index import shard_changed
from .shards import Shard
from .shuffle import ShuffleBuffer
from .split import Segment, Slot
from .tar import RawSample, group_samples, iter_members

if TYPE_CHECKING:
    from .dataset import ShardDataset

__all__ = ["Resumable"]


class Resumable:
    """The half of a :class:`~objsdk.datasets.reader.SlotReader` that saves and restores
    its pass. The reader sets every attribute named here and reads the shards."""

    ds: ShardDataset
    client: Client
    slot: Slot
    epoch: int
    plan: list[Segment]
    pos: int
    offset: int
    taken: int
    yielded: int
    rng: random.Random
    buffer: ShuffleBuffer[tuple[RawSample, int]]
    _pins: dict[int, VersionPin]
    _resuming: dict[str, Any] | None

    if TYPE_CHECKING:  # the reader's, which reads the shards

        def _shard(self, pos: int) -> Shard: ...

        def _start(self, pos: int) -> int: ...

        def _open(
            self,
            shard: Shard,
            offset: int,
            *,
            one_stream: bool = False,
            pin: VersionPin | None = None,
        ) -> ObjectFile: ...

    def state(self) -> dict[str, Any]:
        """Where this pass stands, as plain data. ``"pins"``: for the shard being read and
        every shard with samples in the shuffle buffer, the version the samples came from
        (``{"<pos>": {"shard", "etag", "version_id"}}``); shards not started are not
        pinned."""
        version, internal, gauss = self.rng.getstate()
        live = self._live()
        return {
            "epoch": self.epoch,
            "world_size": self.slot.world_size,
            "num_workers": self.slot.num_workers,
            "plan": [list(seg) for seg in self.plan],
            "pos": self.pos,
            "offset": self.offset,
            "taken": self.taken,
            "yielded": self.yielded,
            "rng": [version, list(internal), gauss],
            "buffer": [[pos, raw.offset] for raw, pos in self.buffer.items],
            "pins": {
                str(pos): {
                    "shard": str(self._shard(pos)),
                    "etag": pin.etag,
                    "version_id": pin.version_id,
                }
                for pos, pin in sorted(self._pins.items())
                if pos in live
            },
        }

    def _live(self) -> set[int]:
        """The positions whose samples are still to come from a version already read:
        the shard at ``pos`` and those with samples in the shuffle buffer."""
        return {self.pos, *(pos for _, pos in self.buffer.items)}

    def _restore(self, state: Mapping[str, Any]) -> None:
        try:
            plan = [
                Segment(int(i), int(a), None if n is None else int(n)) for i, a, n in state["plan"]
            ]
        except (TypeError, ValueError):
            raise InvalidArgument("state has a malformed plan") from None
        if any(not 0 <= seg.shard < len(self.ds.shards) for seg in plan):
            raise InvalidArgument("state names shards this dataset does not have")
        self.plan = plan
        self.pos = int(state["pos"])
        self.offset = int(state["offset"])
        self.taken = int(state.get("taken", 0))
        self.yielded = int(state["yielded"])
        version, internal, gauss = state["rng"]
        self.rng.setstate((version, tuple(internal), gauss))
        self._pins = self._saved_pins(state["pins"])
        items, skipped = self._refetch([(int(p), int(o)) for p, o in state["buffer"]])
        self.buffer.items = items
        if self.pos in skipped:
            # The shard being read failed and on_error skipped it: all of its rest.
            self.pos, self.offset, self.taken = self.pos + 1, self._start(self.pos + 1), 0

    def _saved_pins(self, saved: Any) -> dict[int, VersionPin]:
        """The versions a saved state pins its shards to, by position in its plan."""
        pins: dict[int, VersionPin] = {}
        names: dict[int, str] = {}
        try:
            for pos, entry in saved.items():
                etag, version_id, name = entry["etag"], entry["version_id"], entry["shard"]
                if not all(isinstance(v, str | None) for v in (etag, version_id)):
                    raise TypeError("etag and version_id must be strings or None")
                pins[int(pos)] = VersionPin(etag=etag, version_id=version_id)
                names[int(pos)] = str(name)
        except (AttributeError, KeyError, TypeError, ValueError):
            raise InvalidArgument("state has malformed shard pins") from None
        for pos, name in names.items():
            if not self.plan or str(self._shard(pos)) != name:
                raise InvalidArgument(
                    f"state pins shard {name!r} at position {pos} of its plan, which reads "
                    "another shard there"
                )
        return pins

    def _refetch(self, refs: list[tuple[int, int]]) -> tuple[list[tuple[RawSample, int]], set[int]]:
        """The buffered samples again, read at their offsets (one reader per shard, pinned
        to the version they came from), and the positions whose shard could not be read
        again (replaced since, or a read that failed) and was skipped by ``on_error``
        (their samples are left out). Every such failure goes through ``on_error``, as a
        :class:`ShardError` naming the shard, like a failure of any other read."""
        found: dict[tuple[int, int], RawSample] = {}
        by_pos: dict[int, list[int]] = collections.defaultdict(list)
        for pos, offset in refs:
            by_pos[pos].append(offset)
        skipped: set[int] = set()
        for pos, offsets in by_pos.items():
            shard = self._shard(pos)
            pin = self._pins.get(pos)
            try:
                with self._open(shard, min(offsets), one_stream=True, pin=pin) as f:
                    for offset in sorted(offsets):
                        samples = group_samples(iter_members(f, str(shard), offset), str(shard))
                        raw = next(samples, None)
                        if raw is None:
                            raise ShardError(
                                "no sample at saved offset", shard=str(shard), offset=offset
                            )
                        found[pos, offset] = raw
            except ShardError as e:  # replaced since, unreadable, no sample there
                self.ds._handle(self._replaced(e, pin, shard))
                skipped.add(pos)
        return [(found[ref], ref[0]) for ref in refs if ref[0] not in skipped], skipped

    def _replaced(self, error: ShardError, pin: VersionPin | None, shard: Shard) -> ShardError:
        """``error`` as the refusal of a shard replaced since the state was saved, when it
        is one: a read pinned to the saved version ``pin`` was refused (412, or an answer
        with another ETag) before any of its samples; else ``error`` itself."""
        cause = error.__cause__
        if pin is None or not isinstance(cause, ObjectChangedError):
            return error
        return shard_changed(
            shard,
            self._etag_now(shard),
            pin.etag,
            since="the state was saved",
            record="saved",
            remedy="resuming would mix two versions of it: start the epoch again, or let "
            "on_error='skip' go on without the rest of it",
            cause=cause,
        )

    def _etag_now(self, shard: Shard) -> str | None:
        """The shard's ETag now, for the message of a refused read (a 412 does not say
        it); None if it cannot be asked."""
        try:
            return self.client.head_object(shard.bucket, shard.key).etag
        except ObjsdkError:
            return None

    @property
    def resuming(self) -> bool:
        """Whether this pass resumes a loaded state it has not taken over yet: it stands
        where that state does, and the state stays loaded in the dataset."""
        return self._resuming is not None

    def _take_over(self) -> None:
        """From now on this pass stands for the slot, not the loaded state it resumed
        (it gave out a sample, or ended): the dataset unloads that state. A pass that
        fails before leaves it loaded, so the next iteration resumes it again instead
        of reading the epoch from its start (giving out again what was read before the
        state was saved)."""
        if self._resuming is not None:
            self.ds._release(self.slot.key, self._resuming)
            self._resuming = None
