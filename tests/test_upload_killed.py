"""An upload of a file killed with SIGKILL at a third, then run again: ``objsdk cp`` and a
``Client.upload`` child process, each of a 384 MiB file. The re-run finds the record the
killed run left, asks ListParts what is stored, and sends only the rest: the object is
the file, byte for byte and verified; the re-run's request bodies (counted by the fault
proxy every request goes through) are at most 75 % of the file; no multipart upload is
left. A file changed between the kill and the re-run ends as the new file.

A Complete answered 503 for as long as the first run lives makes sure it is killed
before it could finish, however fast the machine.
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import COMMAND, clean_env, multipart_uploads

from objsdk import Client
from objsdk._core.checksums import crc32c, encode_crc32c
from objsdk.testing import S3Features
from objsdk.testing.faultproxy import Action, FaultProxy, LoggedRequest

pytestmark = pytest.mark.integration

MiB = 1 << 20
BIG = 384 * MiB

_UPLOAD = """
import sys
from objsdk import Client

with Client.from_env() as client:
    client.upload(sys.argv[1], sys.argv[2], sys.argv[3], **eval(sys.argv[4]))
print("uploaded")
"""


@pytest.fixture(scope="module")
def big_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 384 MiB file of random bytes."""
    path = tmp_path_factory.mktemp("big") / "big.bin"
    with open(path, "wb") as f:
        for _ in range(BIG // (16 * MiB)):
            f.write(os.urandom(16 * MiB))
    return path


@pytest.fixture
def proxy(s3_server: Any) -> Iterator[FaultProxy]:
    with FaultProxy(s3_server.endpoint) as p:
        yield p


def child_env(s3_server: Any, proxy: FaultProxy, tmp_path: Path) -> dict[str, str]:
    """The environment of the killed run and of the re-run: the service through the
    proxy, and a home of their own (where the upload's record is kept)."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return {
        **clean_env(home),
        "AWS_ENDPOINT_URL": proxy.endpoint,
        "AWS_ACCESS_KEY_ID": s3_server.access_key,
        "AWS_SECRET_ACCESS_KEY": s3_server.secret_key,
    }


def stored(proxy: FaultProxy) -> int:
    """The bytes of the parts the service has answered 200 for, as the proxy saw them."""
    return sum(r.request_bytes for r in _parts(proxy.requests(settle=0)) if r.status == 200)


def _parts(log: list[LoggedRequest]) -> list[LoggedRequest]:
    return [r for r in log if r.method == "PUT" and "partNumber" in r.query]


def kill_at(proc: subprocess.Popen[bytes], proxy: FaultProxy, size: int, at: float) -> int:
    """SIGKILL ``proc`` once ``at`` of ``size`` bytes are stored; the bytes stored then."""
    deadline = time.monotonic() + 120
    while (done := stored(proxy)) < size * at:
        if proc.poll() is not None or time.monotonic() > deadline:
            _, err = proc.communicate()
            raise AssertionError(f"the upload ended before {at:.0%} was stored: {err!r}")
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    return done


def run_killed_then_again(
    command: list[str], env: dict[str, str], proxy: FaultProxy, size: int, cwd: Path,
    between: Any = None, at: float = 1 / 3,
) -> tuple[int, int]:  # fmt: skip
    """Run ``command`` until ``at`` (a third) of ``size`` bytes are stored, SIGKILL it,
    (call ``between()``), run it again to the end: the bytes stored at the kill, and the
    request body bytes the re-run sent."""
    # The killed run must not finish first: its Complete is refused for as long as it
    # lives (503 SlowDown, retried).
    proxy.add_rule(Action.SLOW_DOWN, method="POST", query=["uploadId"], times=None)
    proc = subprocess.Popen(command, env=env, cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)  # fmt: skip
    at_kill = kill_at(proc, proxy, size, at)
    assert proc.returncode == -signal.SIGKILL
    if between is not None:
        between()
    proxy.clear_rules()
    # Parts whose bodies the killed run had sent whole are still stored after it died:
    # they are its requests, not the re-run's.
    proxy.requests(settle=30)
    proxy.clear_log()
    again = subprocess.run(command, env=env, cwd=cwd, capture_output=True, timeout=300)
    assert again.returncode == 0, again.stderr.decode()
    sent = sum(r.request_bytes for r in proxy.requests())
    return at_kill, sent


def assert_stored_and_verified(
    client: Client, features: S3Features, bucket: str, key: str, path: Path
) -> None:
    """The object is the file's bytes, read whole through ObjectFile (which checks the
    stored full-object CRC32C), and a service that checks checksums stored the file's."""
    want = hashlib.sha256()
    crc = 0
    with open(path, "rb") as f:
        while chunk := f.read(16 * MiB):
            want.update(chunk)
            crc = crc32c(chunk, crc)
    got = hashlib.sha256()
    with client.open(bucket, key) as obj:
        while chunk := obj.read(16 * MiB):
            got.update(chunk)
    assert got.hexdigest() == want.hexdigest()
    if features.checks_checksums:
        assert client.head_object(bucket, key).checksums["crc32c"] == encode_crc32c(crc)


# -- 384 MiB, killed at a third ------------------------------------------------------------------


@pytest.mark.minio_only
def test_objsdk_cp_killed_at_a_third_resumes_and_sends_at_most_three_quarters(
    s3_server: Any, client: Client, s3_features: S3Features, bucket: str, proxy: FaultProxy,
    big_file: Path, tmp_path: Path,
) -> None:  # fmt: skip
    path = big_file
    env = child_env(s3_server, proxy, tmp_path)
    command = [*COMMAND, "cp", str(path), f"s3://{bucket}/big"]
    at_kill, sent = run_killed_then_again(command, env, proxy, BIG, tmp_path)
    assert at_kill >= BIG // 3
    assert sent <= 0.75 * BIG, f"the re-run sent {sent / BIG:.0%} of the file"
    assert_stored_and_verified(client, s3_features, bucket, "big", path)
    assert multipart_uploads(s3_server, bucket) == []


@pytest.mark.minio_only
def test_client_upload_killed_at_a_third_resumes_and_sends_at_most_three_quarters(
    s3_server: Any, client: Client, s3_features: S3Features, bucket: str, proxy: FaultProxy,
    big_file: Path, tmp_path: Path,
) -> None:  # fmt: skip
    path = big_file
    env = child_env(s3_server, proxy, tmp_path)
    command = [sys.executable, "-c", _UPLOAD, bucket, "big", str(path), "{}"]
    at_kill, sent = run_killed_then_again(command, env, proxy, BIG, tmp_path)
    assert at_kill >= BIG // 3
    assert sent <= 0.75 * BIG, f"the re-run sent {sent / BIG:.0%} of the file"
    assert_stored_and_verified(client, s3_features, bucket, "big", path)
    assert multipart_uploads(s3_server, bucket) == []


# -- on any service: smaller, and a file changed before the re-run --------------------------------

SMALL = 8 * 5 * MiB
SMALL_OPTIONS = "{'part_size': 5 << 20, 'multipart_threshold': 5 << 20, 'parallel': 2}"


def test_a_killed_upload_resumes_on_the_service_and_sends_only_the_rest(
    s3_server: Any, client: Client, s3_features: S3Features, bucket: str, proxy: FaultProxy,
    tmp_path: Path,
) -> None:  # fmt: skip
    path = tmp_path / "f.bin"
    path.write_bytes(os.urandom(SMALL))
    env = child_env(s3_server, proxy, tmp_path)
    command = [sys.executable, "-c", _UPLOAD, bucket, "k", str(path), SMALL_OPTIONS]
    # Killed at two thirds (at least 6 of the 8 parts stored): the proxy sees a part's
    # answer before the killed run writes its line, so up to the 2 parts in flight can be
    # stored but unrecorded, and are sent again; at least 4 are reused.
    at_kill, sent = run_killed_then_again(command, env, proxy, SMALL, tmp_path, at=2 / 3)
    assert at_kill >= 6 * 5 * MiB
    assert sent <= SMALL - (at_kill - 2 * 5 * MiB)  # all but the last parts' lines kept
    assert sent <= 0.75 * SMALL
    assert_stored_and_verified(client, s3_features, bucket, "k", path)
    assert multipart_uploads(s3_server, bucket) == []


def test_a_file_changed_between_the_kill_and_the_rerun_ends_as_the_new_file(
    s3_server: Any, client: Client, s3_features: S3Features, bucket: str, proxy: FaultProxy,
    tmp_path: Path,
) -> None:  # fmt: skip
    path = tmp_path / "f.bin"
    path.write_bytes(os.urandom(SMALL))
    env = child_env(s3_server, proxy, tmp_path)
    command = [sys.executable, "-c", _UPLOAD, bucket, "k", str(path), SMALL_OPTIONS]

    def rewrite_the_first_part() -> None:
        with open(path, "r+b") as f:  # same size, new bytes where part 1 was stored
            f.write(os.urandom(1000))

    run_killed_then_again(command, env, proxy, SMALL, tmp_path, rewrite_the_first_part)
    assert_stored_and_verified(client, s3_features, bucket, "k", path)
    assert multipart_uploads(s3_server, bucket) == []
