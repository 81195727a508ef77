"""Downloads of objects of 1 GiB and more, at the defaults, verified.

The parts of a download hash their own bytes and their CRCs are combined into the
object's; a combination over a range of 512 MiB or more once came out wrong (the
x^(2^k) table wrapped at k = 32, which holds for zlib's polynomial only), so
``download()`` at its defaults raised IntegrityError on correct 1 GiB files. Each way
the parts of a download can be planned is run here on a 1 GiB object, and every CRC the
parts combine to is compared with a second pass over the bytes received.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator

import pytest

from objsdk import Client
from objsdk._core.adaptive import Adaptive
from objsdk._core.checksums import RangeCrc, crc_function
from objsdk._io.shared_level import SharedLevel
from objsdk.bench.profiles import Toxic

# MinIO only, as tests/test_transfers_large.py: the combine under test is the client's,
# and a second service holding 1 GiB objects in memory (moto) proves nothing more; it
# took 4.5 of the moto pass's 8 minutes.
pytestmark = [pytest.mark.integration, pytest.mark.minio_only]

MiB = 1 << 20
GiB = 1 << 30
SIZE = GiB + 12_345  # not a whole number of parts
BUCKET = "large-downloads"
KEY = "one-gib.bin"
# A network profile fast enough that 1 GiB takes seconds: ~400 MB/s per connection and
# 1 ms each way.
FAST_LAN = (
    Toxic("latency_downstream", "latency", "downstream", {"latency": 1, "jitter": 0}),
    Toxic("bandwidth_downstream", "bandwidth", "downstream", {"rate": 400_000}),
)


@pytest.fixture(scope="module")
def big(client: Client) -> Iterator[str]:
    """A 1 GiB object written by objsdk at its defaults (a full-object CRC32C); yields
    the SHA-256 of its bytes."""
    data = os.urandom(SIZE)
    digest = hashlib.sha256(data).hexdigest()
    client.create_bucket(BUCKET)
    client.upload(BUCKET, KEY, data)
    del data
    yield digest
    client.delete_objects(BUCKET, [e.key for e in client.list_objects(BUCKET)])
    client.delete_bucket(BUCKET)


@pytest.fixture
def combined(monkeypatch) -> list[tuple[str, int]]:
    """Every (algorithm, value) a RangeCrc combined its ranges to in this test."""
    seen: list[tuple[str, int]] = []
    value = RangeCrc.value

    def spy(self: RangeCrc, size: int) -> int:
        result = value(self, size)
        seen.append((self.algorithm, result))
        return result

    monkeypatch.setattr(RangeCrc, "value", spy)
    return seen


@pytest.fixture
def lan_client(local_minio, minio_proxy) -> Iterator[Client]:
    for toxic in FAST_LAN:
        minio_proxy.add_toxic(toxic.type, name=toxic.name, stream=toxic.stream, **toxic.attributes)
    with Client(minio_proxy.endpoint, local_minio.access_key, local_minio.secret_key) as c:
        yield c


def second_pass(data: memoryview | bytes | bytearray, algorithm: str) -> int:
    crc, fn = 0, crc_function(algorithm)
    view = memoryview(data)
    for at in range(0, len(view), 64 * MiB):
        crc = fn(view[at : at + 64 * MiB], crc)
    return crc


def file_pass(path: os.PathLike[str] | str, algorithm: str) -> tuple[int, str]:
    crc, fn, sha = 0, crc_function(algorithm), hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(64 * MiB):
            crc = fn(chunk, crc)
            sha.update(chunk)
    return crc, sha.hexdigest()


def assert_combined_as_second_pass(combined: list[tuple[str, int]], crc: int) -> None:
    assert combined, "the download combined no part CRCs"
    assert all(algorithm == "crc32c" for algorithm, _ in combined)
    assert [value for _, value in combined] == [crc] * len(combined)


# -- at the defaults, loopback and a network profile ----------------------------------------


def test_download_to_a_path_at_defaults_verifies_1_gib(client, big, tmp_path, combined):
    dest = tmp_path / "one-gib.bin"
    result = client.download(BUCKET, KEY, dest)
    assert result.verified == "crc32c"
    crc, sha = file_pass(dest, "crc32c")
    assert sha == big
    assert_combined_as_second_pass(combined, crc)


def test_get_into_at_defaults_verifies_1_gib(client, big, combined):
    buf = bytearray(SIZE)
    assert client.get_into(BUCKET, KEY, buf) == SIZE
    assert hashlib.sha256(buf).hexdigest() == big
    assert_combined_as_second_pass(combined, second_pass(buf, "crc32c"))


@pytest.mark.faults
def test_download_to_a_path_at_defaults_verifies_1_gib_through_a_lan(
    lan_client, big, tmp_path, combined
):
    dest = tmp_path / "one-gib.bin"
    assert lan_client.download(BUCKET, KEY, dest).verified == "crc32c"
    crc, sha = file_pass(dest, "crc32c")
    assert sha == big
    assert_combined_as_second_pass(combined, crc)


@pytest.mark.faults
def test_get_into_at_defaults_verifies_1_gib_through_a_lan(lan_client, big, combined):
    buf = bytearray(SIZE)
    assert lan_client.get_into(BUCKET, KEY, buf) == SIZE
    assert hashlib.sha256(buf).hexdigest() == big
    assert_combined_as_second_pass(combined, second_pass(buf, "crc32c"))


# -- every way parts are planned -----------------------------------------------------------


def test_fixed_parts_combine_to_the_crc_of_a_second_pass(client, big, combined):
    buf = bytearray(SIZE)
    result = client.download(BUCKET, KEY, buf, parallel=4, part_size=16 * MiB)
    assert result.parts_fetched == 65
    assert_combined_as_second_pass(combined, second_pass(buf, "crc32c"))


def test_adaptive_parts_combine_to_the_crc_of_a_second_pass(client, big, combined):
    buf = bytearray(SIZE)
    assert client.download(BUCKET, KEY, buf).verified == "crc32c"
    assert_combined_as_second_pass(combined, second_pass(buf, "crc32c"))


def test_runs_of_parts_combine_to_the_crc_of_a_second_pass(client, big, combined, monkeypatch):
    # A level that stays at one stream while it measures: the parts go as runs of 1, 1,
    # 2, 4 ... 32 parts, the last one 512 MiB long (what loopback did at the defaults).
    def one_stream(cls, parallel, **_):
        return SharedLevel(Adaptive(cap=16, window=1 << 62), cpu=None)

    monkeypatch.setattr(SharedLevel, "unless", classmethod(one_stream))
    buf = bytearray(SIZE)
    result = client.download(BUCKET, KEY, buf)
    assert (result.parallel, result.verified) == (1, "crc32c")
    assert_combined_as_second_pass(combined, second_pass(buf, "crc32c"))


@pytest.mark.faults
def test_parts_cut_and_resumed_combine_to_the_crc_of_a_second_pass(
    local_minio, minio_proxy, big, tmp_path, combined
):
    # Every connection is cut after 200 MiB: each part (or run) is taken up again from
    # where its stream broke, and its CRC goes on from there.
    minio_proxy.add_toxic("limit_data", bytes=200 * MiB)
    with Client(minio_proxy.endpoint, local_minio.access_key, local_minio.secret_key) as c:
        dest = tmp_path / "one-gib.bin"
        assert c.download(BUCKET, KEY, dest, max_resume=20).verified == "crc32c"
    crc, sha = file_pass(dest, "crc32c")
    assert sha == big
    assert_combined_as_second_pass(combined, crc)


def test_parts_resumed_from_a_record_combine_to_the_crc_of_a_second_pass(
    client, big, tmp_path, combined
):
    class Stop(Exception):
        pass

    def stop_past_600_mib(done: int, total: int | None) -> None:
        if done > 600 * MiB:
            raise Stop

    dest = tmp_path / "one-gib.bin"
    with pytest.raises(Stop):
        client.download(BUCKET, KEY, dest, parallel=2, progress=stop_past_600_mib)
    result = client.download(BUCKET, KEY, dest, parallel=2)
    assert result.parts_reused > 30
    assert result.verified == "crc32c"
    crc, sha = file_pass(dest, "crc32c")
    assert sha == big
    assert_combined_as_second_pass(combined, crc)
