"""What objsdk reports about an object is what the service keeps, on every service the
suite runs against (MinIO, moto, a named endpoint)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from objsdk import Client
from objsdk.testing import S3Features

pytestmark = pytest.mark.integration

ITEM_6 = (
    "issue 24 item 6: upload() of a file claims the CRC32C objsdk sent with its single PUT "
    "(sendfile), which moto does not keep"
)


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
    s3_features: S3Features,
    request: pytest.FixtureRequest,
) -> None:
    if not s3_features.stores_put_checksum:
        request.applymarker(pytest.mark.xfail(strict=True, reason=ITEM_6))
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
