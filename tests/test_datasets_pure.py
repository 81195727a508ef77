"""The dataset's pure logic: shard names, WebDataset grouping, split planning, shuffle."""

from __future__ import annotations

import io
import random
import tarfile
from collections import Counter

import pytest
from datasets_helpers import make_tar

from objsdk.datasets import ShardError, Slot, expand_braces, plan_shards, split_key
from objsdk.datasets.shards import Shard, parse_shard, resolve_shards
from objsdk.datasets.shuffle import ShuffleBuffer, shuffled
from objsdk.datasets.split import even_order, rank_from_env, split_quota
from objsdk.datasets.tar import group_samples, iter_members
from objsdk.errors import InvalidArgument

# -- shard names -------------------------------------------------------------------------


def test_brace_range_keeps_zero_padding():
    assert expand_braces("b/s-{000..002}.tar") == ["b/s-000.tar", "b/s-001.tar", "b/s-002.tar"]


def test_brace_list_and_several_groups_multiply_in_order():
    assert expand_braces("{a,b}-{1..2}") == ["a-1", "a-2", "b-1", "b-2"]


def test_pattern_without_braces_is_itself():
    assert expand_braces("b/one.tar") == ["b/one.tar"]


@pytest.mark.parametrize("bad", ["b/{1..", "b/1}", "b/{x}", "b/{3..1}", "b/{{1..2}}"])
def test_malformed_brace_pattern_is_refused_naming_it(bad):
    with pytest.raises(InvalidArgument, match="pattern"):
        expand_braces(bad)


def test_shard_spec_splits_bucket_from_key_and_accepts_s3_scheme():
    assert parse_shard("s3://bkt/train/a.tar") == Shard("bkt", "train/a.tar")
    assert str(parse_shard("bkt/a.tar")) == "bkt/a.tar"


def test_shard_spec_without_key_is_refused():
    with pytest.raises(InvalidArgument, match="'bkt'"):
        parse_shard("bkt")


def test_resolve_expands_every_spec_of_a_list_in_order():
    shards = resolve_shards(None, ["b/x-{0..1}.tar", "c/y.tar"])
    assert [str(s) for s in shards] == ["b/x-0.tar", "b/x-1.tar", "c/y.tar"]


# -- WebDataset key rule -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("000123.jpg", ("000123", "jpg")),
        ("dir/000123.seg.PNG", ("dir/000123", "seg.png")),
        ("a.b/c.d.e", ("a.b/c", "d.e")),
        ("noext", None),
        ("dir.x/noext", None),
    ],
)
def test_key_is_directory_plus_base_name_up_to_first_dot(path, expected):
    assert split_key(path) == expected


def samples_of(data: bytes, start: int = 0) -> list:
    return list(group_samples(iter_members(io.BytesIO(data), "b/s.tar", start), "b/s.tar"))


def test_consecutive_members_with_one_key_form_one_sample():
    data = make_tar([("a.jpg", b"1"), ("a.cls", b"2"), ("b.jpg", b"3"), ("a.txt", b"4")])
    got = [(s.key, s.fields) for s in samples_of(data)]
    assert got == [("a", {"jpg": b"1", "cls": b"2"}), ("b", {"jpg": b"3"}), ("a", {"txt": b"4"})]


def test_meta_members_and_directories_are_skipped():
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        d = tarfile.TarInfo("dir")
        d.type = tarfile.DIRTYPE
        tar.addfile(d)
        for name in ("__meta__", "x.jpg"):
            info = tarfile.TarInfo(name)
            info.size = 1
            tar.addfile(info, io.BytesIO(b"z"))
    assert [s.key for s in samples_of(buf.getvalue())] == ["x"]


def test_duplicate_suffix_in_a_sample_names_shard_and_member():
    data = make_tar([("a.jpg", b"1"), ("a.JPG", b"2")])
    with pytest.raises(ShardError, match=r"duplicate suffix 'jpg'.*'b/s.tar'.*'a.JPG'"):
        samples_of(data)


def test_sample_end_is_where_the_next_sample_starts_so_reading_can_resume_there():
    data = make_tar([(f"{i}.bin", bytes([i]) * (700 + i)) for i in range(5)])
    samples = samples_of(data)
    resumed = samples_of(data, samples[1].end)
    assert [s.key for s in resumed] == ["2", "3", "4"]
    assert [s.fields for s in resumed] == [s.fields for s in samples[2:]]


def test_long_names_need_pax_headers_and_still_resume_at_member_offsets():
    long = "d" * 150
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for i in range(3):
            info = tarfile.TarInfo(f"{long}/{i}.txt")
            info.size = 3
            tar.addfile(info, io.BytesIO(b"abc"))
    samples = samples_of(buf.getvalue())
    assert [s.key for s in samples] == [f"{long}/{i}" for i in range(3)]
    assert [s.key for s in samples_of(buf.getvalue(), samples[0].end)] == [f"{long}/1", f"{long}/2"]


@pytest.mark.parametrize("fmt", [tarfile.GNU_FORMAT, tarfile.PAX_FORMAT, tarfile.USTAR_FORMAT])
def test_members_match_what_tarfile_reads_in_every_format(fmt):
    names = [f"{'n' * 90}/{'m' * 60}.{i}.txt" for i in range(3)] + ["short.bin"]
    if fmt == tarfile.USTAR_FORMAT:
        names[:3] = [f"{'n' * 90}/{i}.txt" for i in range(3)]
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as tar:
        for i, name in enumerate(names):
            info = tarfile.TarInfo(name)
            info.size = 100 * i + 1
            tar.addfile(info, io.BytesIO(bytes([i]) * info.size))
    buf.seek(0)
    with tarfile.open(fileobj=buf) as tar:
        expected = [(m.name, m.offset, tar.extractfile(m).read()) for m in tar]
    got = [(m.name, m.offset, m.data) for m in iter_members(io.BytesIO(buf.getvalue()), "s")]
    assert got == expected


def test_member_cut_short_names_the_member():
    data = make_tar([("a.jpg", b"x" * 5000), ("b.jpg", b"y" * 5000)])
    with pytest.raises(ShardError, match=r"cut short.*'b.jpg'"):
        samples_of(data[:8000])


def test_corrupt_header_after_a_member_is_an_error_not_the_end():
    data = bytearray(make_tar([("a.jpg", b"x" * 100), ("b.jpg", b"y" * 100)]))
    data[1024 + 100] ^= 0xFF  # inside the second header: its checksum no longer matches
    with pytest.raises(ShardError, match=r"bad tar header after member 'a.jpg'"):
        samples_of(bytes(data))


def test_garbage_is_not_a_tar():
    with pytest.raises(ShardError, match="not a tar"):
        samples_of(b"hello world" * 100)


# -- split ---------------------------------------------------------------------------------


def slots(world: int, workers: int) -> list[Slot]:
    return [Slot(r, world, w, workers) for r in range(world) for w in range(workers)]


def test_two_ranks_three_workers_cover_every_shard_exactly_once():
    for epoch in range(3):
        got = Counter(
            i for s in slots(2, 3) for i in plan_shards(20, s, seed=1, epoch=epoch, even=None)
        )
        assert got == Counter(range(20))


def test_epochs_differ_with_shuffle_and_same_seed_gives_same_order():
    slot = Slot(0, 2, 1, 3)
    assert plan_shards(50, slot, seed=3, epoch=0) == plan_shards(50, slot, seed=3, epoch=0)
    assert plan_shards(50, slot, seed=3, epoch=0) != plan_shards(50, slot, seed=3, epoch=1)
    assert plan_shards(50, slot, seed=3, epoch=0) != plan_shards(50, slot, seed=4, epoch=0)


def test_without_shuffle_ranks_take_strided_shards():
    assert plan_shards(6, Slot(1, 2), shuffle=False) == [1, 3, 5]


def test_even_wrap_gives_every_rank_the_same_number_of_shards_reading_each_at_least_once():
    order = even_order(list(range(7)), 3, "wrap")
    assert len(order) == 9
    assert set(order) == set(range(7))
    counts = [len(plan_shards(7, Slot(r, 3), even="wrap")) for r in range(3)]
    assert counts == [3, 3, 3]


def test_even_drop_leaves_out_the_remainder():
    counts = [len(plan_shards(7, Slot(r, 3), even="drop")) for r in range(3)]
    assert counts == [2, 2, 2]


def test_quota_shares_differ_by_at_most_one_and_sum_to_the_total():
    shares = [split_quota(10, 3, w) for w in range(3)]
    assert shares == [4, 3, 3]


def test_slot_out_of_range_is_refused():
    with pytest.raises(InvalidArgument, match="rank"):
        Slot(2, 2)
    with pytest.raises(InvalidArgument, match="worker"):
        Slot(0, 1, 3, 3)


def test_rank_and_world_size_come_from_the_environment():
    assert rank_from_env({"RANK": "3", "WORLD_SIZE": "4"}) == (3, 4)
    assert rank_from_env({}) == (0, 1)


# -- shuffle buffer --------------------------------------------------------------------------


def test_shuffle_buffer_gives_a_permutation_and_is_deterministic():
    def run(seed: int) -> list[int]:
        return list(shuffled(iter(range(200)), ShuffleBuffer(20, 5, random.Random(seed))))

    assert sorted(run(1)) == list(range(200))
    assert run(1) == run(1)
    assert run(1) != run(2)
    assert run(1) != list(range(200))


def test_nothing_comes_out_of_the_buffer_before_the_initial_fill():
    seen: list[int] = []

    def source():
        for i in range(100):
            seen.append(i)
            yield i

    out = shuffled(source(), ShuffleBuffer(50, 30, random.Random(0)))
    first = next(out)
    assert len(seen) >= 30
    assert first < len(seen)


def test_size_zero_buffer_passes_items_through_in_order():
    assert list(shuffled(iter(range(5)), ShuffleBuffer(0, 0, random.Random(0)))) == [0, 1, 2, 3, 4]


# -- decoders ------------------------------------------------------------------------------


def test_default_decoders_read_npy_json_txt_and_cls():
    np = pytest.importorskip("numpy")
    from objsdk.datasets import default_decoders

    buf = io.BytesIO()
    np.save(buf, np.arange(6).reshape(2, 3))
    d = default_decoders()
    assert d["npy"](buf.getvalue()).tolist() == [[0, 1, 2], [3, 4, 5]]
    assert d["json"](b'{"a": [1]}') == {"a": [1]}
    assert d["txt"]("héllo".encode()) == "héllo"
    assert d["cls"](b" 7\n") == 7


def test_a_decoder_is_found_by_the_last_extension_of_a_compound_suffix():
    from objsdk.datasets.decode import decoder_for, normalise_decoders

    decoders = normalise_decoders({".PNG": len})
    assert decoder_for(decoders, "seg.png") is len
    assert decoder_for(decoders, "jpg") is None


def test_decode_must_map_suffixes_to_callables():
    from objsdk.datasets.decode import normalise_decoders

    with pytest.raises(InvalidArgument, match="'json'"):
        normalise_decoders({"json": "not callable"})
