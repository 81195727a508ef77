"""Server-side encryption (SSE-S3, SSE-KMS, SSE-C) through the public client, against a
MinIO with a KMS key (MINIO_KMS_SECRET_KEY, which SSE-S3 and SSE-KMS need) over TLS
(which SSE-C needs)."""

from __future__ import annotations

import base64
import os
import pickle
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from objsdk import SSE, SSEC, SSEKMS, SSES3, AccessDenied, Client, InvalidArgument, S3Error
from objsdk.testing.local_minio import LocalMinio

pytestmark = pytest.mark.integration

KMS_KEY = "objsdk-test-key"
DATA = os.urandom((11 << 20) + 12345)  # three 5 MiB parts


@pytest.fixture(scope="module")
def kms_minio() -> Iterator[LocalMinio]:
    secret = f"{KMS_KEY}:{base64.b64encode(os.urandom(32)).decode()}"
    with LocalMinio(tls=True, kms_secret_key=secret) as minio:
        yield minio


def _client(minio: LocalMinio, sse: SSE | None = None) -> Client:
    return minio.client(sse=sse, verify=str(minio.ca_bundle))


def _stored_encryption(minio: LocalMinio, bucket: str, key: str, sse: SSE) -> dict[str, str]:
    # HEAD through a client with the same setting (SSE-C's HEAD needs the key).
    resp = _client(minio, sse).transport.request("HEAD", operation="head", bucket=bucket, key=key)
    return {k.lower(): v for k, v in resp.headers.items() if "encryption" in k.lower()}


@pytest.fixture
def sse_bucket(kms_minio: LocalMinio) -> Iterator[str]:
    name = "s-" + os.urandom(6).hex()
    plain = _client(kms_minio)
    plain.create_bucket(name)
    yield name
    plain.delete_objects(name, [e.key for e in plain.list_objects(name)])
    plain.delete_bucket(name)


@pytest.mark.parametrize(
    ("sse", "expected"),
    [
        (SSES3(), {"x-amz-server-side-encryption": "AES256"}),
        (SSEKMS(KMS_KEY), {"x-amz-server-side-encryption": "aws:kms"}),
    ],
    ids=["SSE-S3", "SSE-KMS"],
)
def test_every_write_path_stores_encrypted_objects_that_read_back(
    kms_minio: LocalMinio, sse_bucket: str, sse: SSE, expected: dict[str, str], tmp_path: Path
) -> None:
    client = _client(kms_minio, sse)
    client.upload(sse_bucket, "multipart", DATA, multipart_threshold=5 << 20, part_size=5 << 20)
    client.put_object(sse_bucket, "put", b"small")
    with client.open_write(sse_bucket, "writer", part_size=5 << 20) as w:
        w.write(DATA)
    client.copy_object(sse_bucket, "put", sse_bucket, "copy")
    client.copy(sse_bucket, "writer", sse_bucket, "parts", multipart_threshold=0, part_size=5 << 20)
    for key in ("multipart", "put", "writer", "copy", "parts"):
        stored = _stored_encryption(kms_minio, sse_bucket, key, sse)
        assert expected.items() <= stored.items(), key
    plain = _client(kms_minio)  # SSE-S3/KMS objects read without any header
    assert plain.get_object(sse_bucket, "put") == b"small"
    with plain.open(sse_bucket, "writer", readahead=2, part_size=1 << 20) as f:
        assert f.read() == DATA
    plain.download(sse_bucket, "multipart", tmp_path / "d", parallel=3, part_size=5 << 20)
    assert (tmp_path / "d").read_bytes() == DATA


def test_sse_c_objects_are_written_and_read_only_with_their_key(
    kms_minio: LocalMinio, sse_bucket: str, tmp_path: Path
) -> None:
    key = os.urandom(32)
    client = _client(kms_minio, SSEC(key))
    client.upload(sse_bucket, "multipart", DATA, multipart_threshold=5 << 20, part_size=5 << 20)
    with client.open_write(sse_bucket, "writer", part_size=5 << 20) as w:
        w.write(DATA)
    assert "x-amz-server-side-encryption-customer-algorithm" in _stored_encryption(
        kms_minio, sse_bucket, "writer", SSEC(key)
    )
    # Every read path sends the key: ranged GETs, parallel read-ahead, parallel download.
    assert client.get_object(sse_bucket, "multipart", offset=5, length=100) == DATA[5:105]
    with client.open(sse_bucket, "writer", readahead=3, part_size=1 << 20) as f:
        assert f.read() == DATA
    client.download(sse_bucket, "multipart", tmp_path / "d", parallel=3, part_size=5 << 20)
    assert (tmp_path / "d").read_bytes() == DATA
    client.copy_object(sse_bucket, "writer", sse_bucket, "copy")
    assert client.head_object(sse_bucket, "copy").size == len(DATA)
    # Parts the server copies name the source's key and the upload's.
    client.copy(sse_bucket, "writer", sse_bucket, "parts", multipart_threshold=0, part_size=5 << 20)
    assert client.get_object(sse_bucket, "parts") == DATA

    with pytest.raises(S3Error):
        _client(kms_minio).get_object(sse_bucket, "writer", length=10)  # no key
    with pytest.raises((AccessDenied, S3Error)) as wrong:
        _client(kms_minio, SSEC(os.urandom(32))).get_object(sse_bucket, "writer", length=10)
    assert base64.b64encode(key).decode() not in str(wrong.value)


def test_the_sse_c_key_is_not_in_the_client_pickle(kms_minio: LocalMinio) -> None:
    key = os.urandom(32)
    # Not even with the credentials: SSE-C's key is never pickled.
    client = kms_minio.client(
        sse=SSEC(key), verify=str(kms_minio.ca_bundle), pickle_credentials=True
    )
    blob = pickle.dumps(client)
    assert key not in blob
    assert base64.b64encode(key) not in blob
    copy: Any = pickle.loads(blob)
    assert repr(copy.config.sse) == "SSEC(key=<not pickled>)"
    with pytest.raises(InvalidArgument, match="never pickled"):
        copy.get_object("any-bucket", "k")


@pytest.mark.parametrize(
    "extra",
    [
        {"ServerSideEncryption": "AES256"},
        {"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": KMS_KEY},
        {"SSECustomerAlgorithm": "AES256", "SSECustomerKey": os.urandom(32)},
    ],
    ids=["SSE-S3", "SSE-KMS", "SSE-C"],
)
def test_fsspec_s3_additional_kwargs_encrypt_what_pandas_writes(
    kms_minio: LocalMinio, sse_bucket: str, extra: dict[str, Any]
) -> None:
    import pandas as pd

    from objsdk.filesystem import ObjsdkFileSystem

    options = {
        "endpoint_url": kms_minio.endpoint,
        "key": kms_minio.access_key,
        "secret": kms_minio.secret_key,
        "client_kwargs": {"verify": str(kms_minio.ca_bundle)},
        "s3_additional_kwargs": extra,
        "skip_instance_cache": True,
    }
    frame = pd.DataFrame({"x": range(1000)})
    frame.to_csv(f"objsdk://{sse_bucket}/f.csv", index=False, storage_options=options)
    back = pd.read_csv(f"objsdk://{sse_bucket}/f.csv", storage_options=options)
    pd.testing.assert_frame_equal(back, frame)
    fs = ObjsdkFileSystem(**options)
    sse = fs.client.config.sse
    stored = _stored_encryption(kms_minio, sse_bucket, "f.csv", sse)
    assert stored, "the object is stored encrypted"
    if "SSECustomerKey" in extra:
        key = base64.b64encode(extra["SSECustomerKey"]).decode()
        assert key.encode() not in pickle.dumps(fs)
        assert extra["SSECustomerKey"] not in pickle.dumps(fs)
        assert key not in fs.to_json()
