"""A lost CreateMultipartUpload reply is cleaned up on the server's clock, not the client's.

When the reply to CreateMultipartUpload is lost and the request is retried, the first
attempt may have created an upload nobody holds the id of. The client lists the key's
uploads and aborts the one its lost attempt left, choosing it by the server's clock (the
listing's ``Date`` less the time since the first attempt), never by its own: a client
clock minutes off (inside SigV4's 15-minute window, so every request still succeeds) must
neither leave that upload behind nor abort another writer's upload of the same key.

The client runs in a subprocess under ``faketime`` (libfaketime, with the monotonic clock
left alone), against the session MinIO through the fault proxy, which lets the first
Create reach MinIO and replaces its reply by a 503.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from typing import Any

import pytest
from s3_helpers import boto3_client

from objsdk import Client
from objsdk.testing import LocalMinio
from objsdk.testing.faultproxy import Action, FaultProxy, Rule

pytestmark = pytest.mark.integration

MiB = 1 << 20
PART = 5 * MiB  # S3's smallest part
SKEW = 5 * 60  # seconds: well inside the 15 minutes SigV4 allows
DATA = bytes(range(256)) * ((PART + MiB) // 256)

# Runs under faketime: uploads DATA through the proxy with `upload` or `open_write`, and
# prints the wall clock it saw, so the test knows the fake took effect. libfaketime
# (0.9.10) moves the absolute CLOCK_MONOTONIC deadline that time.sleep hands to
# clock_nanosleep by the fake offset even when told to leave the monotonic clock alone,
# and the kernel refuses it (EINVAL): the retry backoff sleeps with select instead.
SCRIPT = f"""
import select, sys, time

time.sleep = lambda seconds: select.select([], [], [], max(0.0, seconds)) and None

from objsdk import Client, default_retry

endpoint, access, secret, bucket, key, writer = sys.argv[1:]
data = bytes(range(256)) * (({PART} + (1 << 20)) // 256)
retry = default_retry(5).new(backoff_factor=0.005, backoff_max=0.05)
with Client(endpoint, access, secret, retries=retry) as c:
    if writer == "upload":
        c.upload(bucket, key, data, part_size={PART}, multipart_threshold={PART})
    else:
        with c.open_write(bucket, key, part_size={PART}) as w:
            w.write(data)
print(time.time())
"""

_INSTALL_LOCK = os.path.join(tempfile.gettempdir(), "objsdk-tests-faketime.lock")


def _install_faketime() -> None:
    """``apt-get install faketime``, with fresh package lists if the first try fails."""
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    apt = ["apt-get", "-o", "DPkg::Lock::Timeout=300", "install", "-y", "-q", "faketime"]
    if subprocess.run(apt, env=env, capture_output=True).returncode == 0:
        return
    # The package lists may be missing or stale: fetch them and try again.
    subprocess.run(["apt-get", "update", "-q"], env=env, capture_output=True)
    done = subprocess.run(apt, env=env, capture_output=True, text=True)
    assert done.returncode == 0, f"apt-get install faketime failed:\n{done.stderr}"


@pytest.fixture(scope="session")
def faketime() -> str:
    """The ``faketime`` command, installed from Debian's ``faketime`` package if missing
    (under a lock: two test runs may install at once)."""
    if not shutil.which("faketime"):
        if os.geteuid() != 0:
            pytest.skip("faketime is not installed and installing it needs root")
        with open(_INSTALL_LOCK, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not shutil.which("faketime"):
                _install_faketime()
    found = shutil.which("faketime")
    assert found, "the faketime package installed no faketime command"
    return found


@pytest.fixture(scope="module")
def s3(local_minio: LocalMinio) -> Any:
    """boto3 straight to MinIO: the other writer, and an independent view of uploads."""
    return boto3_client(local_minio)


def _uploads(s3: Any, bucket: str) -> list[tuple[str, str]]:
    """Multipart uploads in ``bucket`` neither completed nor aborted: (key, upload id)."""
    answer = s3.list_multipart_uploads(Bucket=bucket)
    return [(u["Key"], u["UploadId"]) for u in answer.get("Uploads", [])]


@pytest.fixture
def bucket(client: Client, s3: Any, fresh_bucket_name: str) -> Iterator[str]:
    client.create_bucket(fresh_bucket_name)
    yield fresh_bucket_name
    for key, upload_id in _uploads(s3, fresh_bucket_name):
        s3.abort_multipart_upload(Bucket=fresh_bucket_name, Key=key, UploadId=upload_id)
    keys = [o.key for o in client.list_objects(fresh_bucket_name)]
    client.delete_objects(fresh_bucket_name, keys)
    client.delete_bucket(fresh_bucket_name)


@pytest.fixture
def lost_create(local_minio: LocalMinio) -> Iterator[tuple[FaultProxy, Rule]]:
    """A fault proxy before MinIO whose first CreateMultipartUpload reaches MinIO and
    answers 503: an upload exists that the client never hears of."""
    with FaultProxy(
        local_minio.endpoint, access_key=local_minio.access_key, secret_key=local_minio.secret_key
    ) as proxy:
        rule = proxy.add_rule(
            Action.ERROR_AFTER_FORWARD, status=503, method="POST", query=["uploads"]
        )
        yield proxy, rule


def _write_under_skew(
    faketime: str,
    skew: int,
    lost_create: tuple[FaultProxy, Rule],
    minio: LocalMinio,
    bucket: str,
    key: str,
    writer: str,
) -> None:
    """Run SCRIPT with the wall clock ``skew`` seconds off; check the clock was off."""
    proxy, rule = lost_create
    env = {**os.environ, "FAKETIME_DONT_FAKE_MONOTONIC": "1"}
    args = [proxy.endpoint, minio.access_key, minio.secret_key, bucket, key, writer]
    offset = f"{skew:+d}s"
    done = subprocess.run(
        [faketime, "-f", offset, sys.executable, "-c", SCRIPT, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    seen = float(done.stdout.split()[-1])
    assert abs(seen - time.time() - skew) < 30, "faketime did not move the client's clock"
    assert rule.hits == 1  # the first Create's reply was lost: an upload was left


@pytest.mark.parametrize("writer", ["upload", "open_write"])
def test_a_client_clock_ahead_still_aborts_the_upload_its_lost_create_left(
    faketime: str,
    lost_create: tuple[FaultProxy, Rule],
    local_minio: LocalMinio,
    client: Client,
    s3: Any,
    bucket: str,
    writer: str,
) -> None:
    _write_under_skew(faketime, SKEW, lost_create, local_minio, bucket, "k", writer)
    assert client.get_object(bucket, "k") == DATA
    assert _uploads(s3, bucket) == []


@pytest.mark.parametrize("writer", ["upload", "open_write"])
def test_a_client_clock_behind_aborts_its_own_lost_upload_and_not_another_writers(
    faketime: str,
    lost_create: tuple[FaultProxy, Rule],
    local_minio: LocalMinio,
    client: Client,
    s3: Any,
    bucket: str,
    writer: str,
) -> None:
    other = s3.create_multipart_upload(Bucket=bucket, Key="k")["UploadId"]
    time.sleep(3)  # another writer of the same key started 3 s before this client
    _write_under_skew(faketime, -SKEW, lost_create, local_minio, bucket, "k", writer)
    assert client.get_object(bucket, "k") == DATA
    assert _uploads(s3, bucket) == [("k", other)]
