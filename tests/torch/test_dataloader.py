"""ShardDataset in torch's DataLoader: every sample once per epoch with 0, 2 and 4
workers, fork, spawn and forkserver, persistent or not; set_epoch reaches persistent
workers; errors and skip counts cross the worker boundary; credentials reach workers."""

from __future__ import annotations

import pytest
import torch
from conftest import N_SHARDS, PER_SHARD, all_keys, fill
from torch.utils.data import DataLoader

from objsdk import Client
from objsdk.datasets import ShardDataset, ShardError
from objsdk.errors import InvalidArgument

# Four workers on a 2-core machine: torch warns, and the test means it.
pytestmark = pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning")

# Each axis covered without the full product (3 x 3 x 2 costs minutes of worker starts).
MATRIX = [
    (0, None, False),
    (2, "fork", False),
    (2, "spawn", True),
    (4, "forkserver", True),
    (4, "fork", True),
    (2, "forkserver", False),
]


def loader(ds: ShardDataset, workers: int, context: str | None, persistent: bool) -> DataLoader:
    return DataLoader(
        ds,
        batch_size=None,
        num_workers=workers,
        multiprocessing_context=context if workers else None,
        persistent_workers=persistent,
        timeout=120 if workers else 0,
    )


@pytest.mark.parametrize(("workers", "context", "persistent"), MATRIX)
def test_every_sample_once_per_epoch_and_epochs_differ(
    client, shards, workers, context, persistent
):
    ds = ShardDataset(client, shards, seed=5, shuffle_buffer=10)
    dl = loader(ds, workers, context, persistent)
    orders = []
    for epoch in range(3):
        ds.set_epoch(epoch)
        keys = [s["__key__"] for s in dl]
        assert sorted(keys) == all_keys(), f"epoch {epoch}"
        orders.append(keys)
    # set_epoch reaches the workers, persistent ones too: each epoch has its own order,
    # and the order of an epoch is the one the dataset alone gives for it.
    assert len({tuple(o) for o in orders}) == 3
    if workers == 0:
        ds.set_epoch(1)
        assert [s["__key__"] for s in ds] == orders[1]


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_set_epoch_reaches_persistent_workers(client, shards, context):
    ds = ShardDataset(client, shards, seed=1)
    dl = loader(ds, 2, context, True)
    ds.set_epoch(0)
    first = [s["__key__"] for s in dl]
    ds.set_epoch(1)
    second = [s["__key__"] for s in dl]
    assert sorted(first) == sorted(second) == all_keys()
    assert first != second


@pytest.fixture
def damaged(client, bucket) -> str:
    fill(client, bucket, "d/", [PER_SHARD] * 4)
    good = bytes(client.get_object(bucket, "d/shard-002.tar"))
    client.put_object(bucket, "d/shard-002.tar", good[: len(good) // 2 + 100])  # mid-member
    return f"{bucket}/d/shard-{{000..003}}.tar"


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_a_shard_error_in_a_worker_reaches_the_loop_as_a_shard_error(client, damaged, context):
    ds = ShardDataset(client, damaged, shuffle_shards=False)
    with pytest.raises(ShardError) as e:
        for _ in loader(ds, 2, context, False):
            pass
    assert e.value.shard == damaged.split("/")[0] + "/d/shard-002.tar"
    assert e.value.member is not None
    assert e.value.offset is not None


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_shards_skipped_in_workers_are_counted_in_the_main_process(client, damaged, context):
    ds = ShardDataset(client, damaged, shuffle_shards=False, on_error="skip")
    keys = [s["__key__"] for s in loader(ds, 2, context, False)]
    assert ds.skipped == 1
    assert len(keys) < 4 * PER_SHARD
    assert {k[:4] for k in keys} == {"s000", "s001", "s002", "s003"}


def test_state_dict_in_the_main_process_refuses_when_workers_read(client, shards):
    ds = ShardDataset(client, shards)
    it = iter(loader(ds, 2, "fork", False))
    for _ in range(30):
        next(it)
    with pytest.raises(InvalidArgument, match="StatefulDataLoader"):
        ds.state_dict()
    del it


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_a_client_with_explicit_keys_works_in_workers_without_aws_variables(
    local_minio, shards, monkeypatch, context
):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", "/nonexistent")
    client = Client(local_minio.endpoint, local_minio.access_key, local_minio.secret_key)
    ds = ShardDataset(client, shards)
    assert sorted(s["__key__"] for s in loader(ds, 2, context, False)) == all_keys()


def test_under_torch_the_dataset_is_an_iterable_dataset(client, shards):
    assert isinstance(ShardDataset(client, shards), torch.utils.data.IterableDataset)


def test_samples_collate_into_batches(client, shards):
    ds = ShardDataset(client, shards, decode={"cls": int})
    dl = DataLoader(ds, batch_size=16, num_workers=2, collate_fn=None)
    total = 0
    for batch in dl:
        assert isinstance(batch["cls"], torch.Tensor)
        total += len(batch["__key__"])
    assert total == N_SHARDS * PER_SHARD
