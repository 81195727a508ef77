"""An upload of a 1 GiB file at the defaults killed with SIGKILL at a third, then run
again: on loopback (``objsdk cp``) and through a network profile (``Client.upload``,
Toxiproxy's ``lan``: 100 MB/s per connection and 1 ms). The object is the file, byte
for byte and verified; the re-run's request bodies (counted by the fault proxy every
request goes through) are at most 75 % of the file; no multipart upload is left.

At the defaults 1 GiB goes as a 1 MiB probe part and 64 parts of 16 MiB, up to 16 at a
time: up to 256 MiB in flight. The fault proxy sees a part's 200 before the killed
process has recorded the part, so a part stored in flight at the kill may be sent again:
killed once the proxy had seen a third stored, up to 256 of those 341 MiB could be sent
again (92 % of the file). So these runs are killed once the record holds a third: the
re-run reuses every part recorded and sends at most the other two thirds, whatever was
in flight.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import COMMAND, multipart_uploads
from killed_upload_helpers import (
    UPLOAD,
    assert_stored_and_verified,
    child_env,
    proxy,
    random_file,
    recorded,
    run_killed_then_again,
)

from objsdk import Client
from objsdk.bench.profiles import PROFILES, proxied_endpoint
from objsdk.testing import S3Features
from objsdk.testing.faultproxy import FaultProxy
from objsdk.testing.toxiproxy import Toxiproxy

__all__ = ["proxy"]  # fixture, used by name

# MinIO only: a second service holding 1 GiB objects in memory (moto) proves nothing more.
pytestmark = [pytest.mark.integration, pytest.mark.minio_only]

MiB = 1 << 20
SIZE = 1 << 30
# What the re-run sends beside the parts: the Complete's list of 65 parts.
COMPLETE = MiB


@pytest.fixture(scope="module")
def gib_file(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, tuple[str, int]]]:
    """A 1 GiB file of random bytes, and its SHA-256 and CRC32C."""
    path = tmp_path_factory.mktemp("gib") / "gib.bin"
    found = random_file(path, SIZE)
    yield path, found
    path.unlink()


def killed_at_a_third_and_run_again(
    command: list[str], env: dict[str, str], proxy: FaultProxy, cwd: Path
) -> None:
    """Run ``command`` until its record holds a third of the file, SIGKILL it, and run
    it again: the re-run sends only the parts the record did not hold."""
    at_kill, sent = run_killed_then_again(
        command, env, proxy, SIZE, cwd, done=lambda: recorded(env)
    )
    assert at_kill >= SIZE // 3
    assert sent <= SIZE - at_kill + COMPLETE, "a part the record held was sent again"
    assert sent <= 0.75 * SIZE, f"the re-run sent {sent / SIZE:.0%} of the file"


def test_objsdk_cp_of_1_gib_killed_at_a_third_resumes_on_loopback(
    s3_server: Any, client: Client, s3_features: S3Features, bucket: str, proxy: FaultProxy,
    gib_file: tuple[Path, tuple[str, int]], tmp_path: Path,
) -> None:  # fmt: skip
    path, digests = gib_file
    env = child_env(s3_server, proxy.endpoint, tmp_path)
    command = [*COMMAND, "cp", str(path), f"s3://{bucket}/gib"]
    killed_at_a_third_and_run_again(command, env, proxy, tmp_path)
    assert_stored_and_verified(client, s3_features, bucket, "gib", path, digests)
    assert multipart_uploads(s3_server, bucket) == []


@pytest.mark.faults
def test_client_upload_of_1_gib_killed_at_a_third_resumes_through_a_lan(
    s3_server: Any, client: Client, s3_features: S3Features, bucket: str, proxy: FaultProxy,
    toxiproxy: Toxiproxy, gib_file: tuple[Path, tuple[str, int]], tmp_path: Path,
) -> None:  # fmt: skip
    path, digests = gib_file
    # The client, the lan's toxics, the proxy that counts, the service.
    with proxied_endpoint(proxy.endpoint, PROFILES["lan"], toxiproxy) as lan:
        env = child_env(s3_server, lan, tmp_path)
        command = [sys.executable, "-c", UPLOAD, bucket, "gib", str(path), "{}"]
        killed_at_a_third_and_run_again(command, env, proxy, tmp_path)
    assert_stored_and_verified(client, s3_features, bucket, "gib", path, digests)
    assert multipart_uploads(s3_server, bucket) == []
