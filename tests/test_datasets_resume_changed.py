"""A resumed ShardDataset epoch never mixes two versions of a shard: the state records
the version of every shard it stands in, the resumed read is pinned to it, and a shard
replaced since the state was saved is a ShardError before any of its samples is given
out. Shards the epoch had not started are read as they are now."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from datasets_helpers import make_tar, sample_bytes, shard_members

from objsdk import Client, ObjectChangedError
from objsdk.datasets import ShardDataset, ShardError
from objsdk.datasets.index import normal_etag
from objsdk.errors import InvalidArgument

pytestmark = pytest.mark.integration

PER_SHARD = 10


def second_version(shard: int) -> bytes:
    """Shard ``shard`` again, member for member the same names and sizes (so the same
    offsets) but other bytes: the layout a resumed reader cannot tell apart."""
    members = shard_members(shard, PER_SHARD)
    return make_tar([(name, bytes(b ^ 0xFF for b in data)) for name, data in members])


def v1_jpg(shard: int, i: int) -> bytes:
    return sample_bytes(shard, i)


def v2_jpg(shard: int, i: int) -> bytes:
    return bytes(b ^ 0xFF for b in sample_bytes(shard, i))


def which(sample: dict[str, Any]) -> tuple[str, str]:
    """(key, "v1" or "v2") of a delivered sample, from its bytes."""
    shard, i = int(sample["__key__"][1:4]), int(sample["__key__"][5:])
    if sample["jpg"] == v1_jpg(shard, i):
        return sample["__key__"], "v1"
    assert sample["jpg"] == v2_jpg(shard, i)
    return sample["__key__"], "v2"


def write_v1(client: Client, bucket: str) -> list[str]:
    shards = []
    for s in range(2):
        members = shard_members(s, PER_SHARD)
        client.put_object(bucket, f"s-{s}.tar", make_tar(members))
        shards.append(f"{bucket}/s-{s}.tar")
    return shards


def dataset(client: Client, shards: list[str], **kw: Any) -> ShardDataset:
    return ShardDataset(client, shards, shuffle_shards=False, seed=3, **kw)


def saved_after(ds: ShardDataset, n: int) -> tuple[list[tuple[str, str]], dict[str, Any]]:
    """The first ``n`` samples of ``ds``, and its state then (through JSON, as saved)."""
    it = iter(ds)
    head = [which(next(it)) for _ in range(n)]
    state = json.loads(json.dumps(ds.state_dict()))
    it.close()
    return head, state


def etag(client: Client, bucket: str, key: str) -> str:
    found = normal_etag(client.head_object(bucket, key).etag)
    assert found
    return found


@pytest.mark.parametrize("buffer", [0, 4])
def test_a_shard_replaced_after_the_state_was_saved_is_refused_before_any_sample(
    client, bucket, buffer
):
    # Shard 0 is part read (and, with a shuffle buffer, part buffered) when the state is
    # saved; then both shards are replaced by versions of the same layout.
    shards = write_v1(client, bucket)
    head, state = saved_after(dataset(client, shards, shuffle_buffer=buffer), 3)
    assert {k[:4] for k, _ in head} == {"s000"}
    old = etag(client, bucket, "s-0.tar")
    for s in range(2):
        client.put_object(bucket, f"s-{s}.tar", second_version(s))
    new = etag(client, bucket, "s-0.tar")

    again = dataset(client, shards, shuffle_buffer=buffer)
    again.load_state_dict(state)
    delivered: list[tuple[str, str]] = []
    with pytest.raises(ShardError) as info:
        delivered.extend(which(s) for s in again)
    assert delivered == []
    assert info.value.shard == f"{bucket}/s-0.tar"
    assert old in str(info.value)
    assert new in str(info.value)
    assert "changed since the state was saved" in str(info.value)
    assert isinstance(info.value.__cause__, ObjectChangedError)


@pytest.mark.parametrize("buffer", [0, 4])
def test_skip_drops_the_replaced_shard_and_reads_the_shards_not_started_as_they_are_now(
    client, bucket, buffer
):
    shards = write_v1(client, bucket)
    _, state = saved_after(dataset(client, shards, shuffle_buffer=buffer), 3)
    for s in range(2):
        client.put_object(bucket, f"s-{s}.tar", second_version(s))

    again = dataset(client, shards, shuffle_buffer=buffer, on_error="skip")
    again.load_state_dict(state)
    rest = [which(s) for s in again]
    assert again.skipped == 1
    # Nothing more of shard 0 (neither version); shard 1, not started when the state was
    # saved, whole in its current version.
    assert sorted(rest) == [(f"s001/{i:06d}", "v2") for i in range(PER_SHARD)]


def test_a_shard_not_started_when_the_state_was_saved_is_read_as_it_is_now(client, bucket):
    shards = write_v1(client, bucket)
    head, state = saved_after(dataset(client, shards), 7)
    # The state pins the shard it stands in, and only that one.
    pins = state["slots"]["0/0"]["pins"]
    assert [(p["shard"], normal_etag(p["etag"])) for p in pins.values()] == [
        (shards[0], etag(client, bucket, "s-0.tar"))
    ]
    client.put_object(bucket, "s-1.tar", second_version(1))

    again = dataset(client, shards)
    again.load_state_dict(state)
    rest = [which(s) for s in again]
    assert head + rest == [(f"s000/{i:06d}", "v1") for i in range(PER_SHARD)] + [
        (f"s001/{i:06d}", "v2") for i in range(PER_SHARD)
    ]
    assert again.skipped == 0


def test_an_unchanged_resume_gives_exactly_the_rest_of_the_epoch(client, bucket):
    shards = write_v1(client, bucket)
    full = [which(s) for s in dataset(client, shards, shuffle_buffer=4)]
    head, state = saved_after(dataset(client, shards, shuffle_buffer=4), 12)
    again = dataset(client, shards, shuffle_buffer=4)
    again.load_state_dict(state)
    assert head + [which(s) for s in again] == full
    assert {v for _, v in full} == {"v1"}


def test_a_state_saved_without_shard_etags_is_refused_saying_why(client, bucket):
    shards = write_v1(client, bucket)
    _, state = saved_after(dataset(client, shards), 3)
    older = {**state, "version": 2}
    for slot in older["slots"].values():
        del slot["pins"]
    with pytest.raises(InvalidArgument, match="older objsdk without shard ETags") as info:
        dataset(client, shards).load_state_dict(older)
    assert "could mix versions of a shard" in str(info.value)
    assert "start the epoch again" in str(info.value)


@pytest.fixture
def versioned(client: Client, bucket: str) -> Iterator[str]:
    client.set_bucket_versioning(bucket, True)
    yield bucket
    # The bucket fixture deletes current keys only: remove every version first.
    for v in list(client.list_object_versions(bucket)):
        client.delete_object(bucket, v.key, version_id=v.version_id)


def test_on_a_versioned_bucket_the_resumed_epoch_reads_the_versions_it_started_with(
    client, versioned
):
    shards = write_v1(client, versioned)
    head, state = saved_after(dataset(client, shards), 7)
    assert all(p["version_id"] for p in state["slots"]["0/0"]["pins"].values())
    for s in range(2):
        client.put_object(versioned, f"s-{s}.tar", second_version(s))

    again = dataset(client, shards)
    again.load_state_dict(state)
    rest = [which(s) for s in again]
    # The rest of shard 0 from the version the epoch read; shard 1 as it is now.
    assert head + rest == [(f"s000/{i:06d}", "v1") for i in range(PER_SHARD)] + [
        (f"s001/{i:06d}", "v2") for i in range(PER_SHARD)
    ]


@pytest.mark.parametrize("buffer", [0, 4])
def test_a_refused_resume_is_refused_again_by_every_iteration_of_that_epoch(client, bucket, buffer):
    """The loaded state stays in force until an iteration has taken it over: after the
    refusal, iterating again is refused again (never the epoch over from its start, which
    would give out again the samples read before the state was saved), and so is the
    state_dict() the same; set_epoch(1) leaves it behind and reads all of epoch 1."""
    shards = write_v1(client, bucket)
    _, state = saved_after(dataset(client, shards, shuffle_buffer=buffer), 3)
    for s in range(2):
        client.put_object(bucket, f"s-{s}.tar", second_version(s))

    again = dataset(client, shards, shuffle_buffer=buffer)
    again.load_state_dict(state)
    for epoch in (None, None, 0):  # set_epoch(0), as a training loop does, keeps it too
        if epoch is not None:
            again.set_epoch(epoch)
        delivered: list[tuple[str, str]] = []
        with pytest.raises(ShardError, match="changed since the state was saved") as info:
            delivered.extend(which(s) for s in again)
        assert delivered == []
        assert info.value.shard == f"{bucket}/s-0.tar"
        assert again.state_dict()["slots"] == state["slots"]

    again.set_epoch(1)
    assert sorted(which(s) for s in again) == [
        (f"s{s:03d}/{i:06d}", "v2") for s in range(2) for i in range(PER_SHARD)
    ]
