"""Read-ahead a node can afford: the level carried from shard to shard comes down as well
as up, and the DataLoader workers of one process share a connection budget."""

from __future__ import annotations

import itertools
import threading
import time

import pytest
from datasets_helpers import make_shard

from objsdk.datasets import ShardDataset, reader
from objsdk.datasets.reader import REPROBE_EVERY, REPROBE_SECONDS, carried_level
from objsdk.errors import InvalidArgument


def test_first_shard_adapts_then_the_level_is_carried_and_probed_again():
    assert carried_level(None, 0, 16) is None
    assert carried_level(8, 1, 16) == 8
    assert carried_level(8, REPROBE_EVERY, 16) is None  # probed again: it may come down
    assert carried_level(1, REPROBE_EVERY + 1, 16) == 1


def test_the_carried_level_stays_within_the_workers_share_of_the_budget():
    assert carried_level(16, 1, 16 // 4) == 4


def test_a_probe_comes_no_sooner_than_reprobe_seconds_after_the_last():
    assert carried_level(8, REPROBE_EVERY, 16, since_probe=REPROBE_SECONDS / 2) == 8
    assert carried_level(8, REPROBE_EVERY, 16, since_probe=REPROBE_SECONDS) is None
    assert carried_level(None, 1, 16, since_probe=0.0) is None  # nothing learned yet


@pytest.fixture
def minutes_apart(monkeypatch):
    """Each reading of the probes' clock is a minute after the one before: every
    REPROBE_EVERY-th shard probes."""
    ticks = itertools.count(0.0, 60.0)
    monkeypatch.setattr(reader, "_now", lambda: next(ticks))


@pytest.fixture
def still_clock(monkeypatch):
    """The probes' clock does not move: no shard is read REPROBE_SECONDS after a probe."""
    monkeypatch.setattr(reader, "_now", lambda: 0.0)


@pytest.fixture
def four_shards(client, bucket) -> str:
    for s in range(4):
        client.put_object(bucket, f"r/s-{s}.tar", make_shard(s, 30, size=20_000))
    return f"{bucket}/r/s-{{0..3}}.tar"


def test_a_worker_reads_with_at_most_its_share_of_the_connection_budget(client, four_shards):
    levels = []
    for worker in range(4):
        ds = ShardDataset(
            client, four_shards, readahead=12, part_size=64 << 10, worker=worker, num_workers=4
        )
        assert sum(1 for _ in ds) == 30
        levels += [r.stats.readahead for r in ds.reads]
    assert levels
    assert max(levels) <= 16 // 4


def test_the_budget_is_an_argument(client, four_shards):
    ds = ShardDataset(
        client,
        four_shards,
        readahead=12,
        part_size=64 << 10,
        connections=2,
        worker=0,
        num_workers=2,
    )
    list(ds)
    assert max(r.stats.readahead for r in ds.reads) <= 1
    with pytest.raises(InvalidArgument, match="connections"):
        ShardDataset(client, four_shards, connections=0)


class Climbing:
    """An adaptive shard reader whose level settles once ``settles_after`` bytes have
    been read (never, if None) at the level the reader runs at."""

    def __init__(self, f, settles_after: int | None) -> None:
        self._f, self._after, self._read = f, settles_after, 0

    def __getattr__(self, attr):
        return getattr(self._f, attr)

    @property
    def readahead_settled(self) -> int | None:
        if not self._f.closed:
            self._read = self._f.tell()
        after = self._after
        return self._f.readahead if after is not None and self._read >= after else None

    def wait_readahead_settled(self, timeout: float | None = None) -> int | None:
        # As ObjectFile's: waits (from another thread) until the climb settles.
        deadline = None if timeout is None else time.monotonic() + timeout
        while (level := self.readahead_settled) is None and not self._f.closed:
            if deadline is not None and time.monotonic() >= deadline:
                break
            time.sleep(0.001)
        return level


def one_worker_reads(client, shards, monkeypatch, climbs, epochs=1):
    """Read ``shards`` for ``epochs`` as one worker; the n-th shard opened adaptive
    climbs as ``climbs[n]`` says: (bytes after which it settles or None, its level).
    Returns the level asked for each shard opened, and where the first shard's reader
    was (position, size) when the second was opened (None if it had been closed)."""
    asked: list[int | None] = []
    readers: list[Climbing] = []
    second_opened_at: list[tuple[int, int] | None] = []
    real_open = client.open

    def open_climbing(bucket, key, *, readahead=None, **kwargs):
        asked.append(readahead)
        if len(asked) == 2:
            first = readers[0]._f
            second_opened_at.append(None if first.closed else (first.tell(), first.size))
        if readahead is not None:
            return real_open(bucket, key, readahead=readahead, **kwargs)
        settles_after, level = climbs[len(readers)]
        readers.append(Climbing(real_open(bucket, key, readahead=level, **kwargs), settles_after))
        return readers[-1]

    monkeypatch.setattr(client, "open", open_climbing)
    ds = ShardDataset(
        client, shards, shuffle_shards=False, part_size=64 << 10, worker=0, num_workers=1
    )
    for epoch in range(epochs):
        ds.set_epoch(epoch)
        assert sum(1 for _ in ds) == 4 * 30
    return asked, second_opened_at[0]


def test_the_next_shard_waits_for_the_climb_and_starts_at_its_level(
    client, four_shards, monkeypatch
):
    # The first shard's climb settles at 3 a sixth of the way through (30 x 20 kB).
    asked, (pos, size) = one_worker_reads(client, four_shards, monkeypatch, [(100_000, 3)])
    # The next shard is opened (prefetched) once the first settled, at its level; so is
    # every later one (a REPROBE_EVERY-th shard would climb again).
    assert asked == [None, 3, 3, 3]
    assert 100_000 <= pos < size // 2


def test_the_next_shard_opens_as_the_climb_settles_while_the_reader_waits(
    client, four_shards, monkeypatch
):
    # On a slow link the reading thread waits a part's time for the next bytes just as
    # the climb settles (all of a shard's parts handed out): the next shard must not
    # wait for the next sample to be opened at the level found.
    settled = threading.Event()
    asked: list[int | None] = []
    real_open = client.open

    class Settling(Climbing):
        @property
        def readahead_settled(self) -> int | None:
            return 3 if settled.is_set() else None

        def wait_readahead_settled(self, timeout: float | None = None) -> int | None:
            settled.wait(timeout)
            return self.readahead_settled

    def open_settling(bucket, key, *, readahead=None, **kwargs):
        asked.append(readahead)
        f = real_open(bucket, key, readahead=3 if readahead is None else readahead, **kwargs)
        return Settling(f, None) if readahead is None else f

    monkeypatch.setattr(client, "open", open_settling)
    ds = ShardDataset(
        client, four_shards, shuffle_shards=False, part_size=64 << 10, worker=0, num_workers=1
    )
    samples = iter(ds)
    next(samples)
    time.sleep(0.1)
    assert asked == [None]  # climbing: the next shard waits for its level
    settled.set()  # no sample is taken meanwhile
    deadline = time.monotonic() + 5
    while len(asked) < 2 and time.monotonic() < deadline:
        time.sleep(0.005)
    assert asked == [None, 3]
    assert sum(1 for _ in samples) == 4 * 30 - 1
    assert asked == [None, 3, 3, 3]


def test_a_first_climb_that_does_not_settle_lets_the_next_shard_open_half_way(
    client, four_shards, monkeypatch
):
    asked, (pos, size) = one_worker_reads(client, four_shards, monkeypatch, [(None, 3)])
    # Half way through the first shard, whose level still climbs, the next is opened at
    # the level the climb has reached: with nothing learned before, better than one
    # stream again.
    assert asked == [None, 3, 3, 3]
    assert size // 2 <= pos < size


def test_a_later_climb_that_does_not_settle_teaches_nothing(
    client, four_shards, monkeypatch, minutes_apart
):
    # Epoch 0's first shard settles at 3; the next probe (the REPROBE_EVERY-th shard,
    # epoch 1's first) jumps to 16 and is read before its step is judged.
    assert REPROBE_EVERY == 4
    asked, _ = one_worker_reads(
        client, four_shards, monkeypatch, [(100_000, 3), (None, 16)], epochs=2
    )
    assert asked == [None, 3, 3, 3, None, 3, 3, 3]


def test_a_persistent_worker_starts_its_next_epoch_at_the_level_it_learned(
    client, four_shards, monkeypatch, minutes_apart
):
    # The adaptive reader settles at 3 parts wherever it is asked to adapt.
    asked: list[int | None] = []
    real_open = client.open

    def open_settling_at_3(*args, readahead=None, **kwargs):
        asked.append(readahead)
        return real_open(*args, readahead=3 if readahead is None else readahead, **kwargs)

    monkeypatch.setattr(client, "open", open_settling_at_3)
    ds = ShardDataset(
        client, four_shards, shuffle_shards=False, part_size=64 << 10, worker=0, num_workers=2
    )
    for epoch in range(3):
        ds.set_epoch(epoch)
        assert sum(1 for _ in ds) == 2 * 30
    # Two shards an epoch. The first epoch adapts on its first shard (which settles at
    # once here, so the second starts at its level); the next epoch starts at the level
    # learned, not from one stream again; the third probes again (the worker's
    # REPROBE_EVERY-th shard), and its second shard keeps the level.
    assert REPROBE_EVERY == 4
    assert asked == [None, 3, 3, 3, None, 3]
    assert [r.stats.readahead for r in ds.reads] == [3] * 6


def test_shards_read_fast_are_not_probed_again_within_reprobe_seconds(
    client, four_shards, monkeypatch, still_clock
):
    # The first shard settles at 3; the REPROBE_EVERY-th shard (epoch 1's first) comes
    # less than REPROBE_SECONDS after that probe, so it keeps the level too.
    asked, _ = one_worker_reads(client, four_shards, monkeypatch, [(100_000, 3)], epochs=2)
    assert asked == [None, 3, 3, 3, 3, 3, 3, 3]
