"""The request pipeline against the local MinIO, through the fault proxy where a service's
behaviour is needed that MinIO does not have: retries of idempotent POSTs, checksum
dialects, what an upload reports, and the errors a caller sees."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from refusing_proxy import refusing_proxy

import objsdk
from objsdk import Client
from objsdk._transport.retry import default_retry
from objsdk.testing import LocalMinio
from objsdk.testing.faultproxy import Action, FaultProxy

pytestmark = pytest.mark.integration


@pytest.fixture
def proxy(local_minio: LocalMinio) -> Iterator[FaultProxy]:
    with FaultProxy(
        local_minio.endpoint, access_key=local_minio.access_key, secret_key=local_minio.secret_key
    ) as p:
        yield p


def _fast_retry(total: int = 5) -> Any:
    return default_retry(total).new(backoff_factor=0.005, backoff_max=0.05)


@pytest.fixture
def via(proxy: FaultProxy, local_minio: LocalMinio) -> Iterator[Client]:
    """A client talking to the session MinIO through the fault proxy (5 fast retries)."""
    with Client(
        proxy.endpoint, local_minio.access_key, local_minio.secret_key, retries=_fast_retry()
    ) as c:
        yield c


@pytest.mark.parametrize(("status", "code"), [(503, "SlowDown"), (500, "InternalError")])
def test_delete_objects_survives_a_throttle_and_deletes_every_key(
    via: Client, proxy: FaultProxy, client: Client, bucket: str, status: int, code: str
) -> None:
    keys = [f"k{i}" for i in range(3)]
    for key in keys:
        client.put_object(bucket, key, os.urandom(10))
    rule = proxy.add_rule(
        Action.ERROR, method="POST", query=["delete"], status=status, code=code, times=2
    )
    assert via.delete_objects(bucket, keys) == []
    assert rule.hits == 2
    assert list(client.list_objects(bucket)) == []


@pytest.mark.parametrize("size", [100, 70 << 20])
def test_a_failed_put_from_a_bytesio_buffer_raises_no_such_bucket(
    client: Client, fresh_bucket_name: str, size: int
) -> None:
    # The documented pattern: the buffer is closed while the error is on its way out, and
    # the error is the real one, never BufferError. A server may answer a large body
    # early and close the connection (RFC 9112 §9.6): whether the client then reads that
    # answer depends on the HTTP stack (urllib3 2.0.7 sees the reset, sends again, and
    # ends with ConnectError), so a large body may end either way.
    real = objsdk.NoSuchBucket if size < 1 << 20 else (objsdk.NoSuchBucket, objsdk.ConnectError)
    with pytest.raises(real):
        _from_a_bytesio(client.put_object, fresh_bucket_name, "k", os.urandom(size))
    with pytest.raises(real):
        _from_a_bytesio(client.upload, fresh_bucket_name, "k", os.urandom(size))


def _from_a_bytesio(send: Callable[..., object], bucket: str, key: str, data: bytes) -> None:
    """The documented pattern: the buffer is closed while an error is on its way out."""
    with io.BytesIO() as buf:
        buf.write(data)
        send(bucket, key, buf.getbuffer())


@pytest.mark.parametrize("size", [1000, 12 << 20], ids=["put", "multipart"])
def test_an_upload_reports_the_checksums_the_service_stored(
    client: Client, bucket: str, size: int, s3_features: Any
) -> None:
    info = client.upload(bucket, "k", os.urandom(size), multipart_threshold=8 << 20)
    stored = client.head_object(bucket, "k")
    assert info.checksums == stored.checksums
    # moto keeps no checksum sent with a single PUT; a multipart object's it computes.
    assert bool(info.checksums) == (s3_features.stores_put_checksum or size >= 8 << 20)


def test_a_put_whose_answer_does_not_echo_the_checksum_claims_none(
    via: Client, proxy: FaultProxy, bucket: str, tmp_path: Path
) -> None:
    # As moto and s3rver answer a PUT: no x-amz-checksum-* in the response.
    proxy.add_rule(
        Action.SET_HEADERS, method="PUT", headers={"x-amz-checksum-crc32c": ""}, times=None
    )
    path = tmp_path / "src"
    path.write_bytes(os.urandom(1000))
    for info in (via.put_object(bucket, "k", b"data"), via.upload(bucket, "k", path)):
        assert (info.checksums, info.checksum_type) == ({}, None)


# -- a named profile wins over keys in the environment (botocore's credential chain) -----


def _profile_home(tmp_path: Path, minio: LocalMinio) -> dict[str, str]:
    """An environment whose keys are wrong and whose profile ``dev`` has the right ones."""
    home = tmp_path / "h"
    (home / ".aws").mkdir(parents=True)
    (home / ".aws" / "credentials").write_text(
        f"[dev]\naws_access_key_id = {minio.access_key}\n"
        f"aws_secret_access_key = {minio.secret_key}\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    return {
        **env,
        "HOME": str(home),
        "AWS_ENDPOINT_URL": minio.endpoint,
        "AWS_ACCESS_KEY_ID": "WRONGKEY",
        "AWS_SECRET_ACCESS_KEY": "wrong-secret",
    }


def test_from_env_with_a_named_profile_ignores_keys_in_the_environment(
    local_minio: LocalMinio, tmp_path: Path, bucket: str
) -> None:
    env = _profile_home(tmp_path, local_minio)
    with Client.from_env(env, profile="dev") as c:
        assert c.bucket_exists(bucket)
    with Client.from_env({**env, "AWS_PROFILE": "dev"}) as c, pytest.raises(objsdk.S3Error):
        c.bucket_exists(bucket)  # AWS_PROFILE does not outrank the environment's keys


def test_the_cli_with_profile_ignores_keys_in_the_environment(
    local_minio: LocalMinio, tmp_path: Path, bucket: str
) -> None:
    env = _profile_home(tmp_path, local_minio)
    command = [sys.executable, "-m", "objsdk.cli"]
    ok = subprocess.run([*command, "--profile", "dev", "ls"], env=env, capture_output=True)
    assert ok.returncode == 0, ok.stderr
    assert bucket in ok.stdout.decode()


# -- a service that refuses checksum headers (Backblaze B2, older gateways) --------------


def _everything(c: Client, bucket: str, tmp_path: Path) -> dict[str, bytes]:
    """put, head, get, read, upload (one PUT of a file, multipart), a writer, download,
    copy; returns what was stored under each key."""
    small, large = os.urandom(1000), os.urandom(12 << 20)
    path = tmp_path / "src"
    path.write_bytes(small)
    assert c.put_object(bucket, "put", small).checksums == {}
    assert c.head_object(bucket, "put").size == 1000
    assert c.get_object(bucket, "put") == small
    with c.open(bucket, "put") as f:
        assert f.read() == small
    assert c.upload(bucket, "file", path).checksums == {}
    assert c.upload(bucket, "multi", large, multipart_threshold=8 << 20).checksums == {}
    with c.open_write(bucket, "written", part_size=5 << 20) as w:
        w.write(large)
    c.download(bucket, "multi", tmp_path / "out")
    assert (tmp_path / "out").read_bytes() == large
    into = bytearray(len(large))
    assert c.get_into(bucket, "written", into) == len(large)
    assert into == large
    c.copy_object(bucket, "put", bucket, "copy")
    return {"put": small, "file": small, "multi": large, "written": large, "copy": small}


def test_with_no_setting_a_service_refusing_checksum_headers_just_works(
    local_minio: LocalMinio, client: Client, bucket: str, tmp_path: Path
) -> None:
    with (
        refusing_proxy(local_minio.endpoint) as (endpoint, refusals),
        Client(endpoint, local_minio.access_key, local_minio.secret_key) as c,
    ):
        stored = _everything(c, bucket, tmp_path)
    for key, data in stored.items():
        assert client.get_object(bucket, key) == data
    # Once per direction: the request checksums, then x-amz-checksum-mode.
    assert len(refusals.names) == 2


def test_with_when_required_no_checksum_header_reaches_the_service(
    local_minio: LocalMinio, client: Client, bucket: str, tmp_path: Path
) -> None:
    with (
        refusing_proxy(local_minio.endpoint) as (endpoint, refusals),
        Client(
            endpoint,
            local_minio.access_key,
            local_minio.secret_key,
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
        ) as c,
    ):
        stored = _everything(c, bucket, tmp_path)
    for key, data in stored.items():
        assert client.get_object(bucket, key) == data
    assert refusals.names == []


@pytest.mark.parametrize(
    "settings",
    [
        {},
        {
            "AWS_REQUEST_CHECKSUM_CALCULATION": "when_required",
            "AWS_RESPONSE_CHECKSUM_VALIDATION": "when_required",
        },
    ],
    ids=["no-setting", "when-required"],
)
def test_the_cli_copies_both_ways_through_a_service_refusing_checksum_headers(
    local_minio: LocalMinio, client: Client, bucket: str, tmp_path: Path, settings: dict[str, str]
) -> None:
    src = tmp_path / "src.bin"
    src.write_bytes(os.urandom(9 << 20))
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(
        HOME=str(tmp_path),
        AWS_ACCESS_KEY_ID=local_minio.access_key,
        AWS_SECRET_ACCESS_KEY=local_minio.secret_key,
        **settings,
    )
    cli = [sys.executable, "-m", "objsdk.cli"]
    with refusing_proxy(local_minio.endpoint) as (endpoint, refusals):
        for args in (
            ["cp", str(src), f"s3://{bucket}/k", "--multipart-threshold", str(8 << 20)],
            ["cp", f"s3://{bucket}/k", str(tmp_path / "back.bin")],
        ):
            done = subprocess.run(
                [*cli, "--endpoint-url", endpoint, *args], env=env, capture_output=True
            )
            assert done.returncode == 0, done.stderr
    assert (tmp_path / "back.bin").read_bytes() == src.read_bytes()
    assert client.get_object(bucket, "k") == src.read_bytes()
    # With no setting each process learns once per direction; with when_required, never.
    assert 0 < len(refusals.names) <= 4 if not settings else refusals.names == []


@pytest.mark.parametrize("when_required", [False, True], ids=["no-setting", "when-required"])
def test_fsspec_writes_and_reads_through_a_service_refusing_checksum_headers(
    local_minio: LocalMinio,
    client: Client,
    bucket: str,
    monkeypatch: pytest.MonkeyPatch,
    when_required: bool,
) -> None:
    pytest.importorskip("fsspec")
    from objsdk.filesystem import ObjsdkFileSystem

    if when_required:
        monkeypatch.setenv("AWS_REQUEST_CHECKSUM_CALCULATION", "when_required")
        monkeypatch.setenv("AWS_RESPONSE_CHECKSUM_VALIDATION", "when_required")

    data = os.urandom(6 << 20)
    with refusing_proxy(local_minio.endpoint) as (endpoint, refusals):
        fs = ObjsdkFileSystem(
            endpoint_url=endpoint,
            key=local_minio.access_key,
            secret=local_minio.secret_key,
            skip_instance_cache=True,
        )
        with fs.open(f"{bucket}/f", "wb") as f:
            f.write(data)
        assert fs.cat_file(f"{bucket}/f") == data
        assert fs.info(f"{bucket}/f")["size"] == len(data)
    assert client.get_object(bucket, "f") == data
    assert (refusals.names == []) == when_required
