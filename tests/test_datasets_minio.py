"""ShardDataset against a real MinIO: delivery, faults, errors, splits across processes,
fork/spawn safety and mid-epoch resume in a new process."""

from __future__ import annotations

import json
import multiprocessing
import os
import pickle
import re
import socket
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from datasets_helpers import expected_samples, make_shard, make_tar

from objsdk import Client, ConnectError, ResumeLimitError
from objsdk.datasets import ShardDataset, ShardError, default_decoders
from objsdk.errors import InvalidArgument

pytestmark = pytest.mark.integration

N_SHARDS = 20
PER_SHARD = 50
SHARDS = f"shard-{{000..{N_SHARDS - 1:03d}}}.tar"


@pytest.fixture(scope="module")
def shard_bucket(client: Client) -> Iterator[str]:
    """20 shards x 50 samples (jpg ~5-7 KB, cls, json): about 6 MB in all."""
    name = "ds-" + os.urandom(4).hex()
    client.create_bucket(name)
    for s in range(N_SHARDS):
        client.put_object(name, f"train/shard-{s:03d}.tar", make_shard(s, PER_SHARD))
    client.put_object(name, "train/README.txt", b"not a shard")
    yield name
    client.delete_objects(name, [e.key for e in client.list_objects(name)])
    client.delete_bucket(name)


def spec(bucket: str) -> str:
    return f"{bucket}/train/{SHARDS}"


def keys_of(ds: ShardDataset) -> list[str]:
    return [s["__key__"] for s in ds]


def test_prefix_lists_the_tar_objects_under_it_in_key_order(client, shard_bucket):
    ds = ShardDataset(client, f"{shard_bucket}/train/")
    assert [s.key for s in ds.shards] == [f"train/shard-{i:03d}.tar" for i in range(N_SHARDS)]


def test_brace_pattern_names_the_same_shards_as_the_prefix(client, shard_bucket):
    assert (
        ShardDataset(client, spec(shard_bucket)).shards
        == ShardDataset(client, f"{shard_bucket}/train/").shards
    )


def test_a_key_pattern_lists_the_objects_it_matches_in_key_order(client, shard_bucket):
    # The habit of fsspec and s5cmd users: "train/*.tar". Braces still expand first.
    assert ShardDataset(client, f"s3://{shard_bucket}/train/*.tar").shards == (
        ShardDataset(client, f"{shard_bucket}/train/").shards
    )
    assert [s.key for s in ShardDataset(client, f"{shard_bucket}/train/shard-01[05]*").shards] == [
        "train/shard-010.tar",
        "train/shard-015.tar",
    ]
    braces = ShardDataset(client, f"{shard_bucket}/train/{{README,shard-000}}*")
    assert [s.key for s in braces.shards] == ["train/README.txt", "train/shard-000.tar"]
    with pytest.raises(InvalidArgument, match=r"no objects match the shard pattern '.*/val/\*'"):
        ShardDataset(client, f"{shard_bucket}/val/*")


def test_a_key_pattern_never_takes_the_index_beside_the_shards_for_a_shard(client, bucket):
    from objsdk.datasets import build_index

    for s in range(2):
        client.put_object(bucket, f"d/shard-{s}.tar", make_shard(s, 3))
    build_index(client, f"{bucket}/d/")
    ds = ShardDataset(client, f"{bucket}/d/*")
    assert [s.key for s in ds.shards] == ["d/shard-0.tar", "d/shard-1.tar"]
    assert len(keys_of(ds)) == 6


def test_a_spec_without_a_star_names_its_key_exactly_brackets_included(client, shard_bucket):
    # "shard-00[1].tar" is a key of its own, never "shard-001.tar".
    ds = ShardDataset(client, f"{shard_bucket}/train/shard-00[1].tar")
    assert [s.key for s in ds.shards] == ["train/shard-00[1].tar"]


def test_every_sample_is_delivered_once_with_its_bytes(client, shard_bucket):
    expected = expected_samples(N_SHARDS, PER_SHARD)
    got = {}
    for s in ShardDataset(client, spec(shard_bucket), seed=1):
        assert s["__key__"] not in got
        assert s["__shard__"] == f"{shard_bucket}/train/shard-{s['__key__'][1:4]}.tar"
        got[s["__key__"]] = s["jpg"]
        assert set(s) == {"__key__", "__shard__", "jpg", "cls", "json"}
    assert got == expected


def test_decoders_turn_fields_into_values(client, shard_bucket):
    ds = ShardDataset(client, f"{shard_bucket}/train/shard-003.tar", decode=default_decoders())
    first = next(iter(ds))
    assert first["json"] == {"shard": 3, "i": 0}
    assert first["cls"] == 0
    assert isinstance(first["jpg"], bytes)


def test_connection_cut_every_256_kib_still_delivers_every_sample(
    local_minio, minio_proxy, shard_bucket
):
    # Shards are ~300 KB: every connection breaks inside a shard.
    minio_proxy.add_toxic("limit_data", bytes=256 << 10)
    with Client(
        minio_proxy.endpoint, local_minio.access_key, local_minio.secret_key, timeout=(2, 5)
    ) as proxied:
        ds = ShardDataset(proxied, spec(shard_bucket), seed=2)
        got = {s["__key__"]: s["jpg"] for s in ds}
        assert got == expected_samples(N_SHARDS, PER_SHARD)
        assert sum(r.stats.resumes for r in ds.reads) >= 1


def test_epochs_differ_with_shuffle_and_same_seed_repeats(client, shard_bucket):
    ds = ShardDataset(client, spec(shard_bucket), seed=5, shuffle_buffer=30)
    first = keys_of(ds)
    ds.set_epoch(1)
    second = keys_of(ds)
    again = ShardDataset(client, spec(shard_bucket), seed=5, shuffle_buffer=30)
    assert sorted(first) == sorted(second)
    assert first != second
    assert keys_of(again) == first


def test_shuffle_buffer_mixes_samples_across_shards(client, shard_bucket):
    ds = ShardDataset(client, spec(shard_bucket), shuffle_shards=False, shuffle_buffer=100)
    first_50 = keys_of(ds)[:PER_SHARD]
    assert len({k[:4] for k in first_50}) > 1


# -- errors ------------------------------------------------------------------------------------


@pytest.fixture
def damaged(client, bucket) -> str:
    """Shards 0-3, of which 1 is truncated mid-member and 2 is missing."""
    for s in (0, 3):
        client.put_object(bucket, f"d-{s}.tar", make_shard(s, 10))
    whole = make_shard(1, 10)
    client.put_object(bucket, "d-1.tar", whole[: len(whole) // 2 + 100])
    return f"{bucket}/d-{{0..3}}.tar"


def test_truncated_shard_raises_naming_shard_and_member(client, bucket, damaged):
    ds = ShardDataset(client, f"{bucket}/d-1.tar")
    with pytest.raises(ShardError) as info:
        list(ds)
    assert info.value.shard == f"{bucket}/d-1.tar"
    assert info.value.member is not None
    assert info.value.member.startswith("s001/")
    assert repr(info.value.member) in str(info.value)


def test_missing_shard_raises_naming_the_shard(client, bucket, damaged):
    with pytest.raises(ShardError, match=rf"'{bucket}/d-2.tar'") as info:
        list(ShardDataset(client, f"{bucket}/d-2.tar"))
    assert "NoSuchKey" in type(info.value.__cause__).__name__
    assert "reading failed before any member: " in str(info.value)


def test_skip_logs_counts_and_delivers_the_good_shards(client, bucket, damaged, caplog):
    ds = ShardDataset(client, damaged, on_error="skip", shuffle_shards=False)
    keys = keys_of(ds)
    assert ds.skipped == 2
    assert {k[:4] for k in keys} >= {"s000", "s003"}
    assert Counter(k[:4] for k in keys)["s000"] == 10
    assert "d-2.tar" in caplog.text
    assert "d-1.tar" in caplog.text


def test_a_callable_decides_per_error(client, bucket, damaged):
    seen: list[str] = []

    def only_missing(err: ShardError) -> bool:
        seen.append(err.shard)
        return err.shard.endswith("d-2.tar")

    ds = ShardDataset(client, damaged, on_error=only_missing, shuffle_shards=False, even=False)
    with pytest.raises(ShardError, match=r"d-1\.tar"):
        keys_of(ds)
    assert seen == [f"{bucket}/d-1.tar"]


def test_denied_shard_is_a_shard_error(local_minio, bucket, damaged):
    with Client(local_minio.endpoint, local_minio.access_key, "wrong-secret") as bad:
        ds = ShardDataset(bad, f"{bucket}/d-0.tar")
        with pytest.raises(ShardError, match=r"d-0\.tar"):
            list(ds)


def test_skip_does_not_skip_a_service_the_client_cannot_reach():
    """on_error="skip" is for a shard that cannot be read, not for an endpoint nothing
    answers at: that would skip every shard, seconds each, into an empty epoch. The
    first shard's error stops the epoch, its cause the ConnectError."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens once it is closed
    with Client(f"http://127.0.0.1:{port}", "AKID", "SECRET") as dead:
        ds = ShardDataset(dead, [f"b/s{i}.tar" for i in range(3)], on_error="skip", index=False)
        with pytest.raises(ShardError) as info:
            list(ds)
    assert isinstance(info.value.__cause__, ConnectError)
    assert ds.skipped == 0


def test_skip_does_not_skip_credentials_the_service_refuses(local_minio, bucket, damaged):
    """Nor for credentials the service refuses (a wrong secret, an unknown key): every
    shard would be refused alike."""
    with Client(local_minio.endpoint, local_minio.access_key, "wrong-secret") as bad:
        ds = ShardDataset(bad, damaged, on_error="skip", shuffle_shards=False, index=False)
        with pytest.raises(ShardError, match=r"SignatureDoesNotMatch"):
            list(ds)
    assert ds.skipped == 0


# -- splitting across processes ------------------------------------------------------------------


def read_slot(args: tuple[bytes, int, int, int, int, int]) -> list[tuple[str, str]]:
    """In a fresh process: read as rank/worker via RANK/WORLD_SIZE + explicit worker."""
    ds_bytes, rank, world, worker, workers, epoch = args
    os.environ["RANK"], os.environ["WORLD_SIZE"] = str(rank), str(world)
    ds: ShardDataset = pickle.loads(ds_bytes)
    mine = ShardDataset(
        ds.client,
        [str(s) for s in ds.shards],
        seed=ds.seed,
        worker=worker,
        num_workers=workers,
        even=False,
    )
    mine.set_epoch(epoch)
    return [(s["__shard__"], s["__key__"]) for s in mine]


def test_two_ranks_by_three_workers_read_every_shard_exactly_once_per_epoch(client, shard_bucket):
    ds = pickle.dumps(ShardDataset(client, spec(shard_bucket), seed=9))
    jobs = [(ds, r, 2, w, 3, e) for e in (0, 1) for r in (0, 1) for w in range(3)]
    with multiprocessing.get_context("spawn").Pool(3) as pool:
        results = pool.map(read_slot, jobs)
    by_epoch: dict[int, list[list[tuple[str, str]]]] = {0: [], 1: []}
    for job, result in zip(jobs, results, strict=True):
        by_epoch[job[5]].append(result)
    for slots in by_epoch.values():
        shard_owner: dict[str, int] = {}
        for i, result in enumerate(slots):
            for shard, _ in result:
                assert shard_owner.setdefault(shard, i) == i  # one slot per shard
        assert len(shard_owner) == N_SHARDS
        keys = Counter(k for result in slots for _, k in result)
        assert len(keys) == N_SHARDS * PER_SHARD
        assert set(keys.values()) == {1}
    assert by_epoch[0] != by_epoch[1]


def test_even_gives_every_rank_the_same_number_of_samples(client, shard_bucket):
    # 7 shards over 3 ranks: wrap reads 9, so 3 per rank.
    counts = [
        len(
            keys_of(
                ShardDataset(
                    client, f"{shard_bucket}/train/shard-{{000..006}}.tar", rank=r, world_size=3
                )
            )
        )
        for r in range(3)
    ]
    assert counts == [3 * PER_SHARD] * 3


def test_samples_per_rank_equalises_uneven_shards_by_dropping_or_wrapping(client, bucket):
    for s, n in enumerate((3, 9, 4)):
        client.put_object(bucket, f"u-{s}.tar", make_shard(s, n))
    counts = [
        len(
            keys_of(
                ShardDataset(
                    client,
                    f"{bucket}/u-{{0..2}}.tar",
                    rank=r,
                    world_size=2,
                    samples_per_rank=8,
                    worker=w,
                    num_workers=2,
                )
            )
        )
        for r in range(2)
        for w in range(2)
    ]
    assert counts[0] + counts[1] == 8
    assert counts[2] + counts[3] == 8


# -- fork and spawn ------------------------------------------------------------------------------

FORK_SCRIPT = """
import json, multiprocessing, sys
from objsdk import Client, ResumeLimitError
from objsdk.datasets import ShardDataset


def child(ds, worker, out):
    ds.set_worker(worker, 2)
    out.put(sorted(s["__key__"] for s in ds))


if __name__ == "__main__":
    endpoint, access, secret, spec, method = sys.argv[1:6]
    ds = ShardDataset(Client(endpoint, access, secret), spec, seed=3, even=False)
    first = next(iter(ds))  # the parent's pool now holds live connections
    ctx = multiprocessing.get_context(method)
    out = ctx.Queue()
    procs = [ctx.Process(target=child, args=(ds, w, out)) for w in range(2)]
    for p in procs:
        p.start()
    keys = out.get(timeout=60) + out.get(timeout=60)
    for p in procs:
        p.join()
    parent_again = sorted(s["__key__"] for s in ds)  # the parent's connections still work
    print(json.dumps({"children": sorted(keys), "parent": parent_again,
                      "codes": [p.exitcode for p in procs]}))
"""


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_dataset_made_in_the_parent_works_in_child_processes(
    s3_server, shard_bucket, tmp_path, method
):
    script = tmp_path / "fork.py"
    script.write_text(FORK_SCRIPT)
    shards = f"{shard_bucket}/train/shard-{{000..005}}.tar"
    out = subprocess.run(
        [
            sys.executable,
            str(script),
            s3_server.endpoint,
            s3_server.access_key,
            s3_server.secret_key,
            shards,
            method,
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=True,
    )
    result = json.loads(out.stdout)
    assert result["codes"] == [0, 0]
    assert result["children"] == result["parent"]
    assert len(result["children"]) == 6 * PER_SHARD


# -- resume --------------------------------------------------------------------------------------

RESUME_SCRIPT = """
import json, sys
from objsdk import Client, ResumeLimitError
from objsdk.datasets import ShardDataset

endpoint, access, secret, spec, state_path = sys.argv[1:6]
ds = ShardDataset(Client(endpoint, access, secret), spec, seed=11, shuffle_buffer=20)
ds.load_state_dict(json.load(open(state_path)))
keys = [s["__key__"] for s in ds]
reads = [[r.shard, r.offset, r.stats.bytes_delivered] for r in ds.reads]
print(json.dumps({"keys": keys, "reads": reads}))
"""


def test_state_dict_resumes_in_a_new_process_with_the_rest_of_the_epoch(
    client, s3_server, shard_bucket, tmp_path
):
    shards = f"{shard_bucket}/train/shard-{{000..005}}.tar"
    full = keys_of(ShardDataset(client, shards, seed=11, shuffle_buffer=20))
    k = 2 * PER_SHARD + 17
    ds = ShardDataset(client, shards, seed=11, shuffle_buffer=20)
    it = iter(ds)
    head = [next(it)["__key__"] for _ in range(k)]
    state = ds.state_dict()
    it.close()
    assert head == full[:k]
    (tmp_path / "state.json").write_text(json.dumps(state))
    script = tmp_path / "resume.py"
    script.write_text(RESUME_SCRIPT)
    out = subprocess.run(
        [
            sys.executable,
            str(script),
            s3_server.endpoint,
            s3_server.access_key,
            s3_server.secret_key,
            shards,
            str(tmp_path / "state.json"),
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=True,
    )
    result = json.loads(out.stdout)
    assert result["keys"] == full[k:]
    # The shard being read when the state was saved is picked up at a member offset,
    # never again from byte 0.
    slot = state["slots"]["0/0"]
    current = str(ds.shards[slot["plan"][slot["pos"]][0]])  # [shard, first, samples]
    assert slot["offset"] > 0
    reads_of_current = [r for r in result["reads"] if r[0] == current]
    assert reads_of_current
    assert all(offset > 0 for _, offset, _ in reads_of_current)
    assert [offset for _, offset, _ in reads_of_current][-1] == slot["offset"]
    size = client.head_object(shard_bucket, current.split("/", 1)[1]).size
    assert reads_of_current[-1][2] <= size - slot["offset"]


def test_state_dict_is_plain_data(client, shard_bucket):
    ds = ShardDataset(client, spec(shard_bucket), shuffle_buffer=5)
    it = iter(ds)
    next(it)
    json.dumps(ds.state_dict())
    it.close()


def test_state_of_another_dataset_is_refused_naming_the_difference(client, shard_bucket):
    ds = ShardDataset(client, spec(shard_bucket), seed=1)
    other = ShardDataset(client, spec(shard_bucket), seed=2)
    with pytest.raises(ValueError, match="seed 1"):
        other.load_state_dict(ds.state_dict())


def test_pickled_dataset_carries_no_credentials_in_its_repr(client, shard_bucket, s3_server):
    ds = ShardDataset(client, spec(shard_bucket))
    assert s3_server.secret_key not in repr(ds)
    assert isinstance(pickle.loads(pickle.dumps(ds)), ShardDataset)


def test_a_pickled_dataset_holds_no_secret_even_with_explicit_keys(local_minio, shard_bucket):
    client = Client(local_minio.endpoint, local_minio.access_key, local_minio.secret_key)
    data = pickle.dumps(ShardDataset(client, spec(shard_bucket)))
    assert local_minio.secret_key.encode() not in data


def test_import_objsdk_does_not_import_the_datasets_or_numpy():
    code = "import sys, objsdk; print('objsdk.datasets' in sys.modules, 'numpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_empty_tar_shard_gives_no_samples(client, bucket):
    client.put_object(bucket, "empty.tar", make_tar([]))
    assert keys_of(ShardDataset(client, f"{bucket}/empty.tar")) == []


def test_state_saved_with_other_worker_counts_is_refused(client, shard_bucket):
    ds = ShardDataset(client, spec(shard_bucket))
    it = iter(ds)
    next(it)
    state = ds.state_dict()
    it.close()
    other = ShardDataset(client, spec(shard_bucket), worker=0, num_workers=2)
    other.load_state_dict(state)
    with pytest.raises(ValueError, match="num_workers=1"):
        iter(other)


def test_readahead_zero_reads_every_shard_with_one_request(client, shard_bucket):
    ds = ShardDataset(client, spec(shard_bucket), readahead=0)
    assert sum(1 for _ in ds) == N_SHARDS * PER_SHARD
    assert all(r.stats.requests == 1 for r in ds.reads)


def test_fixed_readahead_reads_every_shard_with_that_many_parallel_parts(client, shard_bucket):
    shards = f"{shard_bucket}/train/shard-{{000..003}}.tar"
    ds = ShardDataset(client, shards, shuffle_shards=False, readahead=3, part_size=64 << 10)
    got = {s["__key__"]: s["jpg"] for s in ds}
    expected = expected_samples(N_SHARDS, PER_SHARD)
    assert got == {k: v for k, v in expected.items() if k < "s004"}
    assert [r.stats.readahead for r in ds.reads] == [3] * 4
    assert all(r.stats.requests > 2 for r in ds.reads)  # HEAD and a stream, then the parts


def test_default_readahead_is_the_clients_adaptive_one_and_delivers_every_sample(
    local_minio, minio_proxy, bucket
):
    # Two shards of 16 samples of 1 MiB behind a proxy that caps every connection at
    # 8 MB/s: one stream is slow, so the client's read-ahead climbs to parallel parts.
    size, per_shard = 1 << 20, 16
    for s in range(2):
        local_minio.client().put_object(bucket, f"big-{s}.tar", make_shard(s, per_shard, size))
    minio_proxy.add_toxic("bandwidth", rate=8000)  # KB/s per connection
    with Client(minio_proxy.endpoint, local_minio.access_key, local_minio.secret_key) as slow:
        ds = ShardDataset(slow, f"{bucket}/big-{{0..1}}.tar", shuffle_shards=False)
        assert ds.readahead is None
        got = {s["__key__"]: s["jpg"] for s in ds}
    assert got == expected_samples(2, per_shard, size)
    assert [r.shard for r in ds.reads] == [f"{bucket}/big-0.tar", f"{bucket}/big-1.tar"]
    assert all(r.stats.readahead > 1 for r in ds.reads)  # the level the client chose
    assert all(r.stats.requests > 2 for r in ds.reads)


@pytest.mark.parametrize("readahead", ["auto", "6", -1, 2.5, True])
def test_readahead_other_than_none_or_a_count_is_refused(client, shard_bucket, readahead):
    with pytest.raises(
        InvalidArgument, match=r"readahead must be None .* got " + re.escape(repr(readahead))
    ):
        ShardDataset(client, spec(shard_bucket), readahead=readahead)


def test_a_sample_that_fails_to_decode_names_its_member_and_skip_drops_only_it(client, bucket):
    members = [("a.json", b"{}"), ("b.json", b"{not json"), ("c.json", b"[1]")]
    client.put_object(bucket, "j.tar", make_tar(members))
    with pytest.raises(ShardError, match=r"'b\.json'"):
        list(ShardDataset(client, f"{bucket}/j.tar", decode=default_decoders()))
    ds = ShardDataset(client, f"{bucket}/j.tar", decode=default_decoders(), on_error="skip")
    assert [(s["__key__"], s["json"]) for s in ds] == [("a", {}), ("c", [1])]
    assert ds.skipped == 1


def test_states_of_several_workers_merge_and_each_worker_resumes_its_own(client, shard_bucket):
    shards = f"{shard_bucket}/train/shard-{{000..007}}.tar"

    def dataset(worker: int) -> ShardDataset:
        return ShardDataset(client, shards, seed=4, shuffle_buffer=8, worker=worker, num_workers=2)

    full = {w: keys_of(dataset(w)) for w in (0, 1)}
    merged: dict = {}
    for w, k in ((0, 30), (1, 75)):
        ds = dataset(w)
        it = iter(ds)
        assert [next(it)["__key__"] for _ in range(k)] == full[w][:k]
        state = ds.state_dict()
        it.close()
        merged = {**state, "slots": {**merged.get("slots", {}), **state["slots"]}}
    assert set(merged["slots"]) == {"0/0", "0/1"}
    for w, k in ((0, 30), (1, 75)):
        ds = dataset(w)
        ds.load_state_dict(merged)
        assert keys_of(ds) == full[w][k:]


def saved_in_shard_0(
    client: Client, bucket: str, buffer: int
) -> tuple[list[str], list[str], list[str], dict[str, Any]]:
    """Two shards of 10 samples in ``bucket``; their keys, the keys of an uninterrupted
    epoch, its first 3 (shard 0 part read, part in the shuffle buffer) and the state
    saved then (through JSON)."""
    shards = []
    for s in range(2):
        client.put_object(bucket, f"s-{s}.tar", make_shard(s, 10))
        shards.append(f"{bucket}/s-{s}.tar")
    full = keys_of(ShardDataset(client, shards, shuffle_shards=False, shuffle_buffer=buffer))
    ds = ShardDataset(client, shards, shuffle_shards=False, shuffle_buffer=buffer)
    it = iter(ds)
    head = [next(it)["__key__"] for _ in range(3)]
    state = json.loads(json.dumps(ds.state_dict()))
    it.close()
    assert head == full[:3]
    return shards, full, head, state


@pytest.mark.parametrize("buffer", [0, 4])
def test_a_resume_cut_off_as_it_starts_resumes_from_the_state_when_iterated_again(
    local_minio, minio_proxy, bucket, client, buffer
):
    """The endpoint is down as the resumed epoch starts: a ShardError naming the shard.
    The state stays loaded, so once the endpoint is back the next iteration gives
    exactly the rest of the epoch, not the epoch from its start."""
    shards, full, head, state = saved_in_shard_0(client, bucket, buffer)
    with Client(
        minio_proxy.endpoint, local_minio.access_key, local_minio.secret_key, retries=0
    ) as proxied:
        ds = ShardDataset(proxied, shards, shuffle_shards=False, shuffle_buffer=buffer, max_stall=1)
        ds.load_state_dict(state)
        minio_proxy.disable()
        with pytest.raises(ShardError) as info:
            list(ds)
        assert info.value.shard == shards[0]
        minio_proxy.enable()
        assert head + keys_of(ds) == full


def test_a_buffer_that_cannot_be_read_again_on_resume_is_skipped_and_counted_with_skip(
    local_minio, minio_proxy, bucket, client
):
    """The endpoint is down while the resumed epoch reads its shuffle buffer again (the
    samples of shard 0, which it stands in): on_error="skip" skips shard 0, its buffered
    samples and its rest, as one skip, and goes on with shard 1 once the endpoint is
    back."""
    shards, _, _, state = saved_in_shard_0(client, bucket, 4)
    with Client(
        minio_proxy.endpoint, local_minio.access_key, local_minio.secret_key, retries=0
    ) as proxied:
        ds = ShardDataset(
            proxied, shards, shuffle_shards=False, shuffle_buffer=4, max_stall=1, on_error="skip"
        )
        ds.load_state_dict(state)
        minio_proxy.disable()
        it = iter(ds)  # reads the buffer again
        minio_proxy.enable()
        rest = [s["__key__"] for s in it]
    assert ds.skipped == 1
    assert sorted(rest) == [f"s001/{i:06d}" for i in range(10)]


def test_a_buffer_that_cannot_be_read_again_on_resume_reaches_on_error_naming_the_shard(
    local_minio, minio_proxy, bucket, client
):
    """The same failure, given to an on_error callable that does not skip it: a
    ShardError naming shard 0, the read's own error as its cause, raised by iter()."""
    shards, _, _, state = saved_in_shard_0(client, bucket, 4)
    seen: list[ShardError] = []

    def keep_going(error: ShardError) -> bool:
        seen.append(error)
        return False

    with Client(
        minio_proxy.endpoint, local_minio.access_key, local_minio.secret_key, retries=0
    ) as proxied:
        ds = ShardDataset(
            proxied,
            shards,
            shuffle_shards=False,
            shuffle_buffer=4,
            max_stall=1,
            on_error=keep_going,
        )
        ds.load_state_dict(state)
        minio_proxy.disable()
        with pytest.raises(ShardError) as info:
            iter(ds)
    assert seen == [info.value]
    assert info.value.shard == shards[0]
    assert isinstance(info.value.__cause__, ResumeLimitError)
    assert ds.skipped == 0
