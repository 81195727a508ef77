"""objsdk through the fault proxy, one missing server feature at a time.

Each fault of :mod:`objsdk.testing.faultproxy` stands for a real service: one that ignores
Range or If-Match, stores no checksums, rejects checksum headers (Backblaze B2), has ETags
that are not MD5s (GCS, R2, SSE-KMS), throttles POSTs (AWS on bulk deletes), or hands
over a corrupted byte. The tests say what objsdk does there; docs/compatibility.md lists
the same table.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from user_env import without_aws

import objsdk
from objsdk import Client
from objsdk.testing import LocalMinio
from objsdk.testing.faultproxy import Action, FaultProxy

pytestmark = pytest.mark.integration

MIB = 1 << 20


@pytest.fixture
def proxy(local_minio: LocalMinio) -> Iterator[FaultProxy]:
    with FaultProxy(
        local_minio.endpoint, access_key=local_minio.access_key, secret_key=local_minio.secret_key
    ) as p:
        yield p


def through(proxy: FaultProxy, local_minio: LocalMinio, **kwargs: Any) -> Client:
    """A client for MinIO through the proxy (the default retries, unless given)."""
    return Client(proxy.endpoint, local_minio.access_key, local_minio.secret_key, **kwargs)


@pytest.fixture
def via(proxy: FaultProxy, local_minio: LocalMinio) -> Iterator[Client]:
    with through(proxy, local_minio) as c:
        yield c


# -- Range ignored -------------------------------------------------------------------------


def test_range_ignored_reads_downloads_and_get_object_are_still_right(
    via: Client, client: Client, proxy: FaultProxy, bucket: str, tmp_path: Path
) -> None:
    data = os.urandom(3 * MIB + 17)
    client.put_object(bucket, "k", data)
    proxy.add_rule(Action.IGNORE_RANGE, method="GET", times=None)
    assert via.get_object(bucket, "k", offset=MIB, length=100) == data[MIB : MIB + 100]
    with via.open(bucket, "k", readahead=0) as f:
        f.seek(2 * MIB)
        assert f.read(1000) == data[2 * MIB : 2 * MIB + 1000]
    via.download(bucket, "k", tmp_path / "out", part_size=MIB)
    assert (tmp_path / "out").read_bytes() == data


# -- If-Match ignored ----------------------------------------------------------------------


def test_if_match_ignored_a_replaced_object_is_still_caught_by_its_etag(
    via: Client, client: Client, proxy: FaultProxy, bucket: str
) -> None:
    data = os.urandom(2 * MIB)
    client.put_object(bucket, "k", data)
    proxy.add_rule(Action.IGNORE_IF_MATCH, method="GET", times=None)
    with via.open(bucket, "k", readahead=0, chunk_size=64 * 1024) as f:
        assert f.read(10) == data[:10]
        client.put_object(bucket, "k", os.urandom(2 * MIB))
        f.seek(MIB + 512 * 1024)  # far: a new GET, whose If-Match the server never sees
        with pytest.raises(objsdk.ObjectChangedError):
            f.read(10)


def test_if_match_ignored_a_shorter_replacement_is_object_changed_at_once(
    via: Client, client: Client, proxy: FaultProxy, bucket: str
) -> None:
    """Issue 24 item 4: the 416 for an offset inside the pinned size is a change, not a
    break to retry until ResumeLimitError."""
    data = os.urandom(2 * MIB)
    client.put_object(bucket, "k", data)
    proxy.add_rule(Action.IGNORE_IF_MATCH, method="GET", times=None)
    with via.open(bucket, "k", readahead=0, chunk_size=64 * 1024) as f:
        assert f.read(10) == data[:10]
        client.put_object(bucket, "k", b"short")
        f.seek(MIB)
        with pytest.raises(objsdk.ObjectChangedError):
            f.read(10)
        assert f.stats.resumes == 0


# -- checksums stripped --------------------------------------------------------------------


def test_checksums_stripped_reads_and_downloads_work_unverified(
    via: Client, client: Client, proxy: FaultProxy, bucket: str, tmp_path: Path
) -> None:
    data = os.urandom(MIB + 5)
    client.put_object(bucket, "k", data)
    proxy.add_rule(Action.STRIP_CHECKSUMS, times=None)
    assert via.head_object(bucket, "k").checksums == {}
    with via.open(bucket, "k") as f:
        assert f.read() == data
    via.download(bucket, "k", tmp_path / "out")
    assert (tmp_path / "out").read_bytes() == data


def test_an_upload_whose_answer_confirms_no_checksum_claims_none(
    via: Client, proxy: FaultProxy, bucket: str
) -> None:
    # (moto answers a PUT with the checksum it was sent, and then keeps none: issue 24
    # item 6, which this proxy cannot show.)
    proxy.add_rule(Action.STRIP_CHECKSUMS, times=None)
    assert via.put_object(bucket, "small", b"data").checksums == {}
    assert via.upload(bucket, "file", os.urandom(1000)).checksums == {}


# -- ETags that are not MD5s ---------------------------------------------------------------


def test_non_md5_etags_pin_reads_and_downloads_like_any_etag(
    via: Client, client: Client, proxy: FaultProxy, bucket: str, tmp_path: Path
) -> None:
    data = os.urandom(3 * MIB)
    client.put_object(bucket, "k", data)
    proxy.add_rule(Action.NON_MD5_ETAG, times=None)
    info = via.head_object(bucket, "k")
    assert info.etag is not None
    assert info.etag.startswith('"nomd5-')
    with via.open(bucket, "k", readahead=0, chunk_size=64 * 1024) as f:
        assert f.read(10) == data[:10]
        f.seek(2 * MIB)  # a new GET, with If-Match on the rewritten ETag
        assert f.read() == data[2 * MIB :]
        assert f.etag == info.etag
    via.download(bucket, "k", tmp_path / "out", part_size=MIB)
    assert (tmp_path / "out").read_bytes() == data


# -- 503 on POSTs --------------------------------------------------------------------------


def test_503_on_create_and_complete_multipart_upload_is_retried(
    via: Client, client: Client, proxy: FaultProxy, bucket: str
) -> None:
    data = os.urandom(11 * MIB)
    create = proxy.add_rule(Action.SLOW_DOWN, method="POST", query=["uploads"], times=2)
    complete = proxy.add_rule(Action.SLOW_DOWN, method="POST", query=["uploadId"], times=2)
    info = via.upload(bucket, "k", data, part_size=5 * MIB, multipart_threshold=5 * MIB)
    assert info.parts == 3
    assert (create.hits, complete.hits) == (2, 2)
    assert client.get_object(bucket, "k") == data


@pytest.mark.parametrize("times", [1, 3])
def test_delete_objects_is_retried_after_503_on_its_post(
    via: Client, client: Client, proxy: FaultProxy, bucket: str, times: int
) -> None:
    for i in range(5):
        client.put_object(bucket, f"k{i}", b"x")
    rule = proxy.add_rule(Action.SLOW_DOWN, method="POST", query=["delete"], times=times)
    assert via.delete_objects(bucket, [f"k{i}" for i in range(5)]) == []
    assert rule.hits == times
    assert list(client.list_objects(bucket)) == []


# -- one flipped byte ----------------------------------------------------------------------


def test_a_flipped_byte_in_a_verified_read_is_an_integrity_error(
    via: Client, client: Client, proxy: FaultProxy, bucket: str
) -> None:
    data = os.urandom(MIB)
    client.put_object(bucket, "k", data)  # stored with objsdk's CRC32C
    proxy.add_rule(Action.FLIP_BYTE, method="GET", after=1234)
    with via.open(bucket, "k") as f, pytest.raises(objsdk.IntegrityError):
        f.read()


# -- checksum headers rejected (Backblaze B2) ----------------------------------------------


@pytest.fixture(params=["when_required", "unset"])
def b2_like(
    request: pytest.FixtureRequest, proxy: FaultProxy, local_minio: LocalMinio
) -> dict[str, str]:
    """The environment of a process that talks to a service rejecting checksum headers:
    with the boto3 settings that turn them off, or with no setting at all."""
    proxy.add_rule(Action.REJECT_CHECKSUM_HEADERS, times=None)
    env = {
        "AWS_ENDPOINT_URL": proxy.endpoint,
        "AWS_ACCESS_KEY_ID": local_minio.access_key,
        "AWS_SECRET_ACCESS_KEY": local_minio.secret_key,
        "AWS_REGION": "us-east-1",
    }
    if request.param == "when_required":
        env["AWS_REQUEST_CHECKSUM_CALCULATION"] = "when_required"
        env["AWS_RESPONSE_CHECKSUM_VALIDATION"] = "when_required"
    return env


@pytest.fixture
def b2_client(b2_like: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Iterator[Client]:
    for name, value in b2_like.items():
        monkeypatch.setenv(name, value)
    with Client.from_env() as c:
        yield c


def test_rejected_checksum_headers_put_head_and_read_work(
    b2_client: Client, client: Client, bucket: str
) -> None:
    data = os.urandom(300_000)
    b2_client.put_object(bucket, "k", data)
    assert b2_client.head_object(bucket, "k").size == len(data)
    with b2_client.open(bucket, "k") as f:
        assert f.read() == data
    assert client.get_object(bucket, "k") == data


def test_rejected_checksum_headers_multipart_upload_and_download_work(
    b2_client: Client, client: Client, bucket: str, tmp_path: Path
) -> None:
    data = os.urandom(11 * MIB)
    b2_client.upload(bucket, "k", data, part_size=5 * MIB, multipart_threshold=5 * MIB)
    assert client.get_object(bucket, "k") == data
    b2_client.download(bucket, "k", tmp_path / "out", part_size=MIB)
    assert (tmp_path / "out").read_bytes() == data


def test_rejected_checksum_headers_cli_cp_works(
    b2_like: dict[str, str], client: Client, bucket: str, tmp_path: Path
) -> None:
    src = tmp_path / "src.bin"
    src.write_bytes(os.urandom(200_000))
    home = tmp_path / "home"
    home.mkdir()
    env = without_aws()
    env.update(b2_like, HOME=str(home))
    for args in (
        [str(src), f"s3://{bucket}/k"],
        [f"s3://{bucket}/k", str(tmp_path / "back.bin")],
    ):
        proc = subprocess.run(
            [sys.executable, "-m", "objsdk.cli", "cp", *args],
            env=env,
            capture_output=True,
            timeout=60,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr.decode()
    assert (tmp_path / "back.bin").read_bytes() == src.read_bytes()


def test_rejected_checksum_headers_fsspec_works(
    b2_like: dict[str, str], monkeypatch: pytest.MonkeyPatch, bucket: str
) -> None:
    pytest.importorskip("fsspec")
    from objsdk.filesystem import ObjsdkFileSystem

    for name, value in b2_like.items():
        monkeypatch.setenv(name, value)
    fs = ObjsdkFileSystem(skip_instance_cache=True)
    data = os.urandom(100_000)
    with fs.open(f"{bucket}/k", "wb") as f:
        f.write(data)
    assert fs.info(f"{bucket}/k")["size"] == len(data)
    assert fs.cat_file(f"{bucket}/k") == data
    with fs.open(f"{bucket}/k", "rb") as f:
        assert f.read() == data
