"""The tar reader of objsdk.datasets on untrusted bytes: any bytes in a shard give samples
or a ShardError, within bounded time and memory (never a hang, never another exception)."""

from __future__ import annotations

import io
import tarfile
import tracemalloc

import pytest
from datasets_helpers import make_tar
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from objsdk.datasets import ShardError
from objsdk.datasets.tar import group_samples, iter_members

SHARD = "b/s.tar"


def header(name: bytes, size: bytes, kind: bytes, *, magic: bytes = b"ustar\x0000") -> bytes:
    """A 512-byte tar header with these raw fields and a valid checksum."""
    h = bytearray(512)
    h[0 : len(name[:100])] = name[:100]
    h[100:108] = b"0000644\0"
    h[124 : 124 + len(size[:12])] = size[:12]
    h[156:157] = kind[:1]
    h[257 : 257 + len(magic[:8])] = magic[:8]
    h[148:156] = b" " * 8
    h[148:156] = b"%06o\0 " % sum(h)
    return bytes(h)


def padded(data: bytes) -> bytes:
    return data + b"\0" * (-len(data) % 512)


def pax_member(records: bytes, name: bytes = b"x.txt", data: bytes = b"hello") -> bytes:
    """A pax extended header with ``records`` followed by a regular member."""
    return (
        header(b"PaxHeader/x", b"%011o" % len(records), b"x")
        + padded(records)
        + header(name, b"%011o" % len(data), b"0")
        + padded(data)
    )


def record(key: str, value: bytes) -> bytes:
    """One pax record with its length framing it right."""
    body = b" " + key.encode() + b"=" + value + b"\n"
    n = len(body) + 1
    while len(str(n)) + len(body) != n:
        n += 1
    return str(n).encode() + body


def read_all(data: bytes) -> list[str]:
    """Sample keys of ``data`` read as a shard, or ShardError."""
    return [s.key for s in group_samples(iter_members(io.BytesIO(data), SHARD), SHARD)]


@pytest.mark.timeout(10)
def test_a_zero_length_pax_record_is_an_error_not_an_endless_loop():
    with pytest.raises(ShardError, match="pax record") as e:
        read_all(pax_member(b"0 path=x\n"))
    assert e.value.shard == SHARD


@pytest.mark.timeout(10)
@pytest.mark.parametrize(
    "records",
    [b"99 path=x\n", b"8 path=x\n", b"12 path=x\n\0", b"abc path=x\n", b"-5 path=x\n"],
)
def test_a_pax_record_whose_length_does_not_frame_it_is_a_shard_error(records):
    with pytest.raises(ShardError, match="pax record"):
        read_all(pax_member(records))


@pytest.mark.parametrize("size", [b"abc", b"-1", b"", b"1e3", b"\xff"])
def test_a_non_numeric_pax_size_is_a_shard_error_naming_the_member(size):
    with pytest.raises(ShardError, match="bad pax size") as e:
        read_all(pax_member(record("size", size)))
    assert e.value.member == "x.txt"


def test_a_negative_base256_size_is_a_shard_error_not_a_read_of_everything():
    negative = b"\xff" * 12  # base-256 with the sign bit set: -1
    data = header(b"a.txt", negative, b"0") + b"\1" * 4096
    with pytest.raises(ShardError, match="bad size field"):
        read_all(data)


def test_a_size_beyond_the_shard_is_cut_short_without_allocating_it():
    # 2^61 bytes claimed in base-256 by a 1 KiB shard.
    huge = b"\x80" + (1 << 61).to_bytes(11, "big")
    tracemalloc.start()
    try:
        with pytest.raises(ShardError, match="cut short"):
            read_all(header(b"a.txt", huge, b"0") + b"\1" * 512)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20


def test_well_formed_pax_records_still_give_long_names():
    name = "d/" + "n" * 150 + ".txt"
    assert read_all(pax_member(record("path", name.encode()))) == [name[: -len(".txt")]]


# -- properties ----------------------------------------------------------------------------

KINDS = [b"0", b"\0", b"5", b"x", b"g", b"L", b"K", b"S", b"7", b"1", b"2", b"Z"]


@st.composite
def size_fields(draw: st.DrawFn) -> bytes:
    return draw(
        st.one_of(
            st.integers(0, 3000).map(lambda n: b"%011o" % n),
            st.binary(max_size=12),
            st.sampled_from([b"\xff" * 12, b"\x80" + b"\xff" * 11, b"7" * 11, b"-1"]),
        )
    )


@st.composite
def pax_records(draw: st.DrawFn) -> bytes:
    out = b""
    for _ in range(draw(st.integers(0, 4))):
        key = draw(st.sampled_from([b"path", b"size", b"linkpath", b"mtime", b"x"]))
        value = draw(st.one_of(st.binary(max_size=20), st.integers(-5, 5000).map(b"%d".__mod__)))
        good = record(key.decode(), value)
        length = draw(st.one_of(st.none(), st.integers(0, 60)))
        out += good if length is None else str(length).encode() + b" " + good.partition(b" ")[2]
    return out


@st.composite
def blocks(draw: st.DrawFn) -> bytes:
    """Headers with valid checksums and arbitrary fields, pax records, data and junk."""
    out = b""
    for _ in range(draw(st.integers(1, 6))):
        choice = draw(st.integers(0, 3))
        if choice == 0:
            out += draw(st.binary(max_size=1100))
        elif choice == 1:
            out += pax_member(draw(pax_records()), draw(st.binary(min_size=1, max_size=30)))
        else:
            name = draw(st.one_of(st.binary(max_size=100), st.sampled_from([b"k.a", b"k.b"])))
            kind = draw(st.sampled_from(KINDS))
            magic = draw(st.sampled_from([b"ustar\x0000", b"ustar  \0", b""]))
            out += header(name, draw(size_fields()), kind, magic=magic)
            out += draw(st.binary(max_size=1100))
    return out


def outcome(data: bytes) -> list[str] | ShardError:
    try:
        return read_all(data)
    except ShardError as e:
        error = e
    assert error.shard == SHARD
    return error


@pytest.mark.timeout(120)
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=4096))
def test_arbitrary_bytes_give_samples_or_a_shard_error(data):
    outcome(data)


@pytest.mark.timeout(120)
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(blocks())
def test_tar_shaped_bytes_give_samples_or_a_shard_error(data):
    outcome(data)


@pytest.mark.timeout(120)
@settings(max_examples=200, deadline=None)
@given(st.data())
def test_any_corruption_of_a_real_shard_gives_samples_or_a_shard_error(data):
    shard = make_tar([(f"k{i}.txt", b"v" * (i * 300)) for i in range(4)])
    shard = bytearray(shard)
    for _ in range(data.draw(st.integers(1, 8))):
        at = data.draw(st.integers(0, len(shard) - 1))
        shard[at] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(shard)))
    outcome(bytes(shard[:cut]))


def test_tarfile_agrees_on_the_samples_of_valid_pax_shards():
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for i in range(3):
            info = tarfile.TarInfo(f"{'p' * 120}{i}.bin")
            info.size = i
            info.pax_headers = {"comment": "é"}
            tar.addfile(info, io.BytesIO(b"z" * i))
    assert read_all(buf.getvalue()) == [f"{'p' * 120}{i}" for i in range(3)]


def test_a_size_too_large_to_seek_past_is_a_shard_error():
    # Found by the property above: a directory member claiming 2^80 bytes.
    data = header(b"d/", b"\x80\x01" + b"\0" * 10, b"5") + b"\0" * 1024
    with pytest.raises(ShardError, match="bad size field"):
        read_all(data)
