"""What objsdk reports about an object is what the service keeps, on every service the
suite runs against (MinIO, moto, a named endpoint)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from objsdk import Client

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("size", [0, 1000])
def test_put_object_claims_only_the_checksums_the_service_keeps(
    client: Client, bucket: str, size: int
) -> None:
    info = client.put_object(bucket, "k", os.urandom(size))
    assert info.checksums == client.head_object(bucket, "k").checksums


@pytest.mark.parametrize("size", [0, 1000])
def test_a_single_put_upload_of_a_file_claims_only_the_checksums_the_service_keeps(
    client: Client,
    bucket: str,
    size: int,
    tmp_path: Path,
) -> None:
    path = tmp_path / "src"
    path.write_bytes(os.urandom(size))
    info = client.upload(bucket, "k", path)
    assert info.parts == 1
    assert info.checksums == client.head_object(bucket, "k").checksums


def test_a_multipart_upload_claims_the_checksum_the_service_keeps(
    client: Client, bucket: str
) -> None:
    data = os.urandom(11 << 20)
    info = client.upload(bucket, "k", data, part_size=5 << 20, multipart_threshold=5 << 20)
    head = client.head_object(bucket, "k")
    assert info.parts == 3
    assert head.checksums.get("crc32c") == info.checksums.get("crc32c")
    assert client.get_object(bucket, "k") == data
