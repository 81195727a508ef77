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
