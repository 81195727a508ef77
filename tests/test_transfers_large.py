"""Reads, uploads and copies of 1 GiB and more, at the defaults, on loopback and a network
profile.

Plans change with the size (part sizes, adaptive levels, runs of parts), so every public
transfer runs here once at a size users have, with nothing set: reads through
``open()`` are verified end to end against the object's stored CRC32C, and uploads
store the full-object CRC32C of the file's bytes (computed here in a second pass).
Downloads and ``get_into`` at this size: tests/test_download_large.py.
"""

from __future__ import annotations

import base64
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_helpers import COMMAND, env
from s3_helpers import boto3_client

from objsdk import Client
from objsdk._core.checksums import crc_function
from objsdk.bench.profiles import Toxic

# MinIO only: a second service holding 1 GiB objects in memory (moto) proves nothing more.
__all__ = ["env"]  # fixture, used by name

pytestmark = [pytest.mark.integration, pytest.mark.minio_only]

MiB = 1 << 20
SIZE = (1 << 30) + 54_321  # not a whole number of parts
BUCKET = "large-transfers"
# ~400 MB/s per connection and 1 ms each way: a LAN on which 1 GiB takes seconds.
FAST_LAN = (
    Toxic("latency_downstream", "latency", "downstream", {"latency": 1, "jitter": 0}),
    Toxic("bandwidth_downstream", "bandwidth", "downstream", {"rate": 400_000}),
    Toxic("bandwidth_upstream", "bandwidth", "upstream", {"rate": 400_000}),
)


def crc32c_b64(path: Path) -> str:
    crc, fn = 0, crc_function("crc32c")
    with open(path, "rb") as f:
        while chunk := f.read(64 * MiB):
            crc = fn(chunk, crc)
    return base64.b64encode(crc.to_bytes(4, "big")).decode()


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """A file of SIZE random bytes and its CRC32C (base64, as S3 states it)."""
    path = tmp_path_factory.mktemp("large") / "source.bin"
    block = os.urandom(8 * MiB)
    with open(path, "wb") as f:
        left = SIZE
        while left:
            n = min(left, len(block))
            f.write(block[:n])
            left -= n
            block = block[1:] + block[:1]  # no two blocks alike
    yield path, crc32c_b64(path)
    path.unlink()


@pytest.fixture(scope="module")
def bucket_of_large(client: Client) -> Iterator[str]:
    client.create_bucket(BUCKET)
    yield BUCKET
    client.delete_objects(BUCKET, [e.key for e in client.list_objects(BUCKET)])
    client.delete_bucket(BUCKET)


@pytest.fixture(scope="module")
def stored(client: Client, bucket_of_large: str, source: tuple[Path, str]) -> str:
    """The source uploaded once as "read.bin"; its CRC32C."""
    path, crc = source
    client.upload(BUCKET, "read.bin", path)
    return crc


@pytest.fixture
def lan_client(local_minio, minio_proxy) -> Iterator[Client]:
    for toxic in FAST_LAN:
        minio_proxy.add_toxic(toxic.type, name=toxic.name, stream=toxic.stream, **toxic.attributes)
    with Client(minio_proxy.endpoint, local_minio.access_key, local_minio.secret_key) as c:
        yield c


@pytest.fixture(params=["loopback", "lan"])
def any_client(request: pytest.FixtureRequest, client: Client) -> Client:
    if request.param == "loopback":
        return client
    return request.getfixturevalue("lan_client")


def assert_stored_as(client: Client, key: str, crc: str) -> None:
    info = client.head_object(BUCKET, key)
    assert info.size == SIZE
    assert info.checksums.get("crc32c") == crc, info.checksums


def test_upload_of_a_file_at_defaults_stores_its_full_crc32c(
    any_client, bucket_of_large, source
) -> None:
    path, crc = source
    any_client.upload(BUCKET, "uploaded.bin", path)
    assert_stored_as(any_client, "uploaded.bin", crc)


def test_open_write_at_defaults_stores_the_full_crc32c(any_client, bucket_of_large, source) -> None:
    path, crc = source
    with open(path, "rb") as f, any_client.open_write(BUCKET, "written.bin") as w:
        while chunk := f.read(3 * MiB + 17):  # pieces that are not part-aligned
            w.write(chunk)
    assert_stored_as(any_client, "written.bin", crc)


def test_open_readinto_at_defaults_is_verified_whole(any_client, stored) -> None:
    crc = stored
    fn, value, total = crc_function("crc32c"), 0, 0
    buf = bytearray(MiB)
    with any_client.open(BUCKET, "read.bin") as f:
        while n := f.readinto(buf):
            value = fn(memoryview(buf)[:n], value)
            total += n
        assert f.stats.verified == "crc32c", f.stats
    assert total == SIZE
    assert base64.b64encode(value.to_bytes(4, "big")).decode() == crc


def test_open_read_at_defaults_is_verified_whole(any_client, stored) -> None:
    crc = stored
    fn, value, total = crc_function("crc32c"), 0, 0
    with any_client.open(BUCKET, "read.bin") as f:
        while chunk := f.read(MiB):
            value = fn(chunk, value)
            total += len(chunk)
        assert f.stats.verified == "crc32c", f.stats
    assert total == SIZE
    assert base64.b64encode(value.to_bytes(4, "big")).decode() == crc


def test_copy_at_defaults_and_in_parts_keeps_every_byte(any_client, stored) -> None:
    crc = stored
    # At the defaults, 1 GiB is one CopyObject; in parts, 256 MiB ones the server copies.
    any_client.copy(BUCKET, "read.bin", BUCKET, "copied.bin")
    any_client.copy(BUCKET, "read.bin", BUCKET, "copied-in-parts.bin", multipart_threshold=0)
    assert (any_client.head_object(BUCKET, "copied-in-parts.bin").etag or "").endswith('-5"')
    for key in ("copied.bin", "copied-in-parts.bin"):
        fn, value, total = crc_function("crc32c"), 0, 0
        buf = bytearray(8 * MiB)
        with any_client.open(BUCKET, key) as f:
            while n := f.readinto(buf):
                value = fn(memoryview(buf)[:n], value)
                total += n
        assert total == SIZE, key
        assert base64.b64encode(value.to_bytes(4, "big")).decode() == crc, key


# -- the tools built on the client: the command line and fsspec, on loopback ---------------


def test_cli_cp_up_and_down_at_defaults_keeps_every_byte(
    client, bucket_of_large, source, env, tmp_path
) -> None:
    path, crc = source
    up = subprocess.run(
        [*COMMAND, "cp", str(path), f"s3://{BUCKET}/cli.bin"], env=env, capture_output=True
    )
    assert up.returncode == 0, up.stderr
    assert_stored_as(client, "cli.bin", crc)
    dest = tmp_path / "cli-down.bin"
    down = subprocess.run(
        [*COMMAND, "cp", f"s3://{BUCKET}/cli.bin", str(dest)], env=env, capture_output=True
    )
    assert down.returncode == 0, down.stderr
    assert crc32c_b64(dest) == crc


def test_fsspec_put_file_and_get_file_at_defaults_keep_every_byte(
    client, bucket_of_large, source, s3_server, tmp_path
) -> None:
    fsspec = pytest.importorskip("fsspec")
    path, crc = source
    fs = fsspec.filesystem(
        "objsdk",
        endpoint_url=s3_server.endpoint,
        key=s3_server.access_key,
        secret=s3_server.secret_key,
        skip_instance_cache=True,
    )
    fs.put_file(str(path), f"{BUCKET}/fs.bin")
    assert_stored_as(client, "fs.bin", crc)
    dest = tmp_path / "fs-down.bin"
    fs.get_file(f"{BUCKET}/fs.bin", str(dest))
    assert crc32c_b64(dest) == crc


# -- objects another client wrote: boto3 at its defaults (CRC32), and CRC64NVME -----------


@pytest.fixture(scope="module", params=["CRC32", "CRC64NVME"])
def written_by_boto3(
    request: pytest.FixtureRequest, s3_server, bucket_of_large, source
) -> tuple[str, str]:
    """The source put by boto3 in one PUT (its default CRC32, or CRC64NVME); the key
    and the algorithm S3 stores."""
    s3 = boto3_client(s3_server)
    path, _ = source
    key = f"boto3-{request.param.lower()}.bin"
    extra = {} if request.param == "CRC32" else {"ChecksumAlgorithm": request.param}
    with open(path, "rb") as f:
        s3.put_object(Bucket=BUCKET, Key=key, Body=f, **extra)
    return key, request.param.lower()


def test_download_and_open_at_defaults_verify_what_boto3_wrote(
    client, written_by_boto3, source, tmp_path
) -> None:
    key, algorithm = written_by_boto3
    _, crc = source
    assert algorithm in client.head_object(BUCKET, key).checksums
    result = client.download(BUCKET, key, tmp_path / "b.bin")
    assert result.verified == algorithm
    assert crc32c_b64(tmp_path / "b.bin") == crc
    (tmp_path / "b.bin").unlink()
    buf = bytearray(MiB)
    total = 0
    with client.open(BUCKET, key) as f:
        while n := f.readinto(buf):
            total += n
        assert f.stats.verified == algorithm, f.stats
    assert total == SIZE
