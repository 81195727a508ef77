"""Sample indexes: ShardWriter, build_index and `objsdk index`, and ShardDataset's split
by sample (same count on every rank) and resume by seeking to the next sample."""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
import tarfile
from collections import Counter

import pytest
from datasets_helpers import make_shard

from objsdk import Client, ObjectChangedError
from objsdk.datasets import (
    INDEX_NAME,
    ShardDataset,
    ShardError,
    ShardIndex,
    ShardWriter,
    build_index,
    load_index,
)
from objsdk.datasets.shards import Shard
from objsdk.datasets.split import Slot, plan_samples
from objsdk.errors import InvalidArgument

UNEVEN = [40] * 6 + [23]  # 263 samples: the last shard is short


# -- plan by sample (pure) -------------------------------------------------------------------


def coverage(counts, world, workers, even, epoch=0):
    seen: Counter[tuple[int, int]] = Counter()
    per_rank = []
    for r in range(world):
        n = 0
        for w in range(workers):
            for seg in plan_samples(counts, Slot(r, world, w, workers), epoch=epoch, even=even):
                for i in range(seg.first, seg.first + seg.samples):
                    seen[seg.shard, i] += 1
                n += seg.samples
        per_rank.append(n)
    return per_rank, seen


@pytest.mark.parametrize(("world", "workers"), [(2, 1), (2, 3), (3, 4), (8, 2)])
def test_wrap_gives_every_rank_the_same_count_repeating_at_most_world_minus_one(world, workers):
    per_rank, seen = coverage(UNEVEN, world, workers, "wrap")
    assert len(set(per_rank)) == 1
    assert set(seen) == {(s, i) for s, n in enumerate(UNEVEN) for i in range(n)}
    assert sum(seen.values()) - sum(UNEVEN) <= world - 1


@pytest.mark.parametrize(("world", "workers"), [(2, 1), (3, 4), (8, 2)])
def test_drop_gives_every_rank_the_same_count_leaving_at_most_world_minus_one(world, workers):
    per_rank, seen = coverage(UNEVEN, world, workers, "drop")
    assert len(set(per_rank)) == 1
    assert max(seen.values()) == 1
    assert sum(UNEVEN) - len(seen) <= world - 1


def test_without_even_every_sample_once_and_ranks_differ_by_at_most_one():
    per_rank, seen = coverage(UNEVEN, 3, 2, None)
    assert max(per_rank) - min(per_rank) <= 1
    assert set(seen.values()) == {1}
    assert len(seen) == sum(UNEVEN)


def test_a_worker_reads_consecutive_samples_starting_at_most_one_shard_mid_way():
    segs = plan_samples(UNEVEN, Slot(1, 2, 0, 2), seed=3)
    assert all(seg.first == 0 for seg in segs[1:])


# -- writing and indexing --------------------------------------------------------------------


@pytest.fixture
def uneven(client: Client, bucket: str) -> str:
    """Seven plain tar shards (6 x 40 + 23 samples), not indexed; yields the prefix."""
    for s, n in enumerate(UNEVEN):
        client.put_object(bucket, f"u/shard-{s:03d}.tar", make_shard(s, n, size=300))
    return f"{bucket}/u/"


def keys(ds: ShardDataset) -> list[str]:
    return [s["__key__"] for s in ds]


def test_shard_writer_writes_plain_tars_split_by_count_and_size_and_indexes_them(client, bucket):
    with ShardWriter(client, f"{bucket}/w/shard-%03d.tar", maxcount=10, maxsize=40_000) as w:
        for i in range(25):
            w.write({"__key__": f"k{i:04d}", "bin": os.urandom(3000), "cls": i % 7, "txt": "é"})
    names = sorted(e.key for e in client.list_objects(bucket, prefix="w/"))
    shards = [n for n in names if n.endswith(".tar")]
    assert f"w/{INDEX_NAME}" in names
    assert len(shards) >= 3  # 25 samples at most 10 per shard
    for key in shards:
        with tarfile.open(fileobj=io.BytesIO(client.get_object(bucket, key))) as tar:
            members = tar.getnames()
            assert all(m.rsplit(".", 1)[1] in ("bin", "cls", "txt") for m in members)
        assert client.head_object(bucket, key).size <= 40_000 + 2 * 512
    index = load_index(client, [Shard(bucket, k) for k in shards])
    assert index is not None
    assert sum(e.count for e in index.values()) == 25
    # What the writer recorded is what reading the shards finds.
    rebuilt = build_index(client, [f"{bucket}/{k}" for k in shards], parallel=2)
    assert dict(rebuilt) == dict(index)
    ds = ShardDataset(client, f"{bucket}/w/", shuffle_shards=False)
    assert ds.index is not None
    samples = list(ds)
    assert [s["__key__"] for s in samples] == [f"k{i:04d}" for i in range(25)]
    assert samples[3]["cls"] == b"3"
    assert samples[3]["txt"] == "é".encode()


def test_shard_writer_refuses_keys_webdataset_would_split_and_unknown_values(client, bucket):
    with ShardWriter(client, f"{bucket}/x/s-%d.tar") as w:
        with pytest.raises(InvalidArgument, match="__key__"):
            w.write({"__key__": "a.b", "bin": b"x"})
        with pytest.raises(InvalidArgument, match="'bin'"):
            w.write({"__key__": "a", "bin": 1.5})


def test_a_failed_writer_aborts_the_shard_being_written_and_indexes_the_finished(client, bucket):
    def write_then_fail() -> None:
        with ShardWriter(client, f"{bucket}/f/s-%d.tar", maxcount=2) as w:
            for i in range(3):
                w.write({"__key__": f"k{i}", "bin": b"x"})
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        write_then_fail()
    names = sorted(e.key for e in client.list_objects(bucket, prefix="f/"))
    assert names == [f"f/{INDEX_NAME}", "f/s-0.tar"]


def test_build_index_stores_it_beside_the_shards_and_a_second_run_reads_nothing(client, uneven):
    read: list[str] = []
    index = build_index(client, uneven, progress=lambda s, e: read.append(s))
    assert [index[s].count for s in sorted(index)] == UNEVEN
    assert len(read) == 7
    bucket = uneven.split("/")[0]
    stored = json.loads(client.get_object(bucket, f"u/{INDEX_NAME}"))
    assert stored["format"] == "objsdk.shard-index"
    assert sorted(stored["shards"]) == [f"shard-{s:03d}.tar" for s in range(7)]
    read.clear()
    build_index(client, uneven, progress=lambda s, e: read.append(s))
    assert read == []
    client.put_object(bucket, "u/shard-002.tar", make_shard(2, 5, size=300))
    again = build_index(client, uneven, progress=lambda s, e: read.append(s))
    assert read == [f"{bucket}/u/shard-002.tar"]
    assert again[f"{bucket}/u/shard-002.tar"].count == 5


def test_objsdk_index_command_indexes_a_prefix(local_minio, uneven):
    env = dict(os.environ, AWS_ENDPOINT_URL=local_minio.endpoint)
    out = subprocess.run(
        [sys.executable, "-m", "objsdk.cli", "index", f"s3://{uneven}"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "263 samples" in out.stdout + out.stderr
    with local_minio.client() as c:
        assert c.head_object(uneven.split("/")[0], f"u/{INDEX_NAME}").size > 0


# -- reading with an index -------------------------------------------------------------------


def per_rank(client, spec, world, workers, **kw) -> list[list[str]]:
    out = []
    for r in range(world):
        got = []
        for w in range(workers):
            ds = ShardDataset(
                client, spec, rank=r, world_size=world, worker=w, num_workers=workers, **kw
            )
            got += keys(ds)
        out.append(got)
    return out


def test_with_an_index_every_rank_reads_the_same_number_of_samples(client, uneven):
    build_index(client, uneven)
    ranks = per_rank(client, uneven, 2, 2, seed=4)
    assert [len(r) for r in ranks] == [132, 132]
    seen = Counter(k for r in ranks for k in r)
    assert len(seen) == 263
    assert sum(seen.values()) - 263 == 1


def test_without_an_index_a_multi_rank_job_warns_once_and_splits_by_shard(client, uneven, caplog):
    caplog.set_level(logging.WARNING, "objsdk.datasets")
    ranks = per_rank(client, uneven, 2, 2, seed=4)
    assert len(ranks[0]) != len(ranks[1])
    warnings = [r for r in caplog.records if "no sample index" in r.getMessage()]
    assert len(warnings) == 1
    assert "objsdk index" in warnings[0].getMessage()


def test_index_false_ignores_an_index_and_index_true_requires_one(client, uneven):
    with pytest.raises(InvalidArgument, match="objsdk index"):
        ShardDataset(client, uneven, index=True)
    build_index(client, uneven)
    assert ShardDataset(client, uneven).index is not None
    assert ShardDataset(client, uneven, index=False).index is None


def test_an_index_lacking_shards_is_refused_naming_one(client, uneven):
    index = build_index(client, uneven)
    partial = ShardIndex(list(index.items())[:3])
    with pytest.raises(InvalidArgument, match="lacks 4 shards"):
        ShardDataset(client, uneven, index=partial)


def test_resume_with_an_index_seeks_to_the_next_sample(client, uneven):
    build_index(client, uneven)
    kw = {"rank": 1, "world_size": 2, "worker": 0, "num_workers": 1, "seed": 9}
    full = keys(ShardDataset(client, uneven, **kw))
    ds = ShardDataset(client, uneven, shuffle_buffer=8, **kw)
    reference = keys(ShardDataset(client, uneven, shuffle_buffer=8, **kw))
    it = iter(ds)
    head = [next(it)["__key__"] for _ in range(50)]
    state = json.loads(json.dumps(ds.state_dict()))
    again = ShardDataset(client, uneven, shuffle_buffer=8, **kw)
    again.load_state_dict(state)
    rest = keys(again)
    assert head + rest == reference
    assert sorted(reference) == sorted(full)
    # The shard being read is opened again at the next sample's offset, not at 0.
    slot = state["slots"]["1/0"]
    current = str(again.shards[slot["plan"][slot["pos"]][0]])
    assert slot["offset"] > 0
    assert any(r.shard == current and r.offset == slot["offset"] for r in again.reads)


def test_a_shard_changed_after_indexing_is_a_shard_error_naming_the_remedy(client, uneven):
    build_index(client, uneven)
    bucket = uneven.split("/")[0]
    client.put_object(bucket, "u/shard-000.tar", make_shard(0, 40, size=301))
    ds = ShardDataset(client, uneven, shuffle_shards=False)
    with pytest.raises(ShardError, match="objsdk index") as e:
        keys(ds)
    assert e.value.shard == f"{bucket}/u/shard-000.tar"
    assert isinstance(e.value.__cause__, ObjectChangedError)


def test_a_state_saved_splitting_by_shard_is_refused_by_an_indexed_dataset(client, uneven):
    plain = ShardDataset(client, uneven, index=False)
    next(iter(plain))
    state = plain.state_dict()
    build_index(client, uneven)
    with pytest.raises(InvalidArgument, match="splitting by 'shard'"):
        ShardDataset(client, uneven).load_state_dict(state)
