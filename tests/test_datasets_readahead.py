"""Read-ahead a node can afford: the level carried from shard to shard comes down as well
as up, and the DataLoader workers of one process share a connection budget."""

from __future__ import annotations

import pytest
from datasets_helpers import make_shard

from objsdk.datasets import ShardDataset
from objsdk.datasets.reader import REPROBE_EVERY, carried_level
from objsdk.errors import InvalidArgument


def test_first_shard_adapts_then_the_level_is_carried_and_probed_again():
    assert carried_level(None, 0, 16) is None
    assert carried_level(8, 1, 16) == 8
    assert carried_level(8, REPROBE_EVERY, 16) is None  # probed again: it may come down
    assert carried_level(1, REPROBE_EVERY + 1, 16) == 1


def test_the_carried_level_stays_within_the_workers_share_of_the_budget():
    assert carried_level(16, 1, 16 // 4) == 4


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


def test_within_an_epoch_later_shards_start_at_the_level_the_first_learned(
    client, four_shards, monkeypatch
):
    # The adaptive reader settles at 3 parts wherever it is asked to adapt.
    asked: list[int | None] = []
    real_open = client.open

    def open_settling_at_3(*args, readahead=None, **kwargs):
        asked.append(readahead)
        return real_open(*args, readahead=3 if readahead is None else readahead, **kwargs)

    monkeypatch.setattr(client, "open", open_settling_at_3)
    ds = ShardDataset(
        client, four_shards, shuffle_shards=False, part_size=64 << 10, worker=0, num_workers=1
    )
    assert sum(1 for _ in ds) == 4 * 30
    # The second shard is opened (a prefetch) while the first still adapts, so it adapts
    # too; each later shard is opened once an adaptive one has closed, and starts at the
    # level it settled at, though the shard opened just before it (prefetched) is still
    # being read.
    assert asked == [None, None, 3, 3]


def test_a_persistent_worker_starts_its_next_epoch_at_the_level_it_learned(
    client, four_shards, monkeypatch
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
    # Two shards an epoch. The first epoch adapts on both (the second is opened, as a
    # prefetch, before the first has settled); the next epoch starts at the level they
    # learned; the third probes again (the worker's REPROBE_EVERY-th shard), and its
    # second shard keeps the level while that probe runs.
    assert REPROBE_EVERY == 4
    assert asked == [None, None, 3, 3, None, 3]
    assert [r.stats.readahead for r in ds.reads] == [3] * 6
