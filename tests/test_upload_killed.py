"""An upload of a file killed with SIGKILL at a third, then run again: ``objsdk cp`` and a
``Client.upload`` child process, each of a 384 MiB file, killed once the record of the
upload holds a third of the file (the proxy sees a part stored before the killed run
writes its line, so parts in flight at the kill may be sent again: at the defaults up
to 16 parts of 16 MiB). The re-run finds the record the
killed run left, asks ListParts what is stored, and sends only the rest: the object is
the file, byte for byte and verified; the re-run's request bodies (counted by the fault
proxy every request goes through) are at most 75 % of the file; no multipart upload is
left. A file changed between the kill and the re-run ends as the new file.

A Complete answered 503 for as long as the first run lives makes sure it is killed
before it could finish, however fast the machine.
"""

from __future__ import annotations

import os
import sys
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
from objsdk.testing import S3Features
from objsdk.testing.faultproxy import FaultProxy

__all__ = ["proxy"]  # fixture, used by name

pytestmark = pytest.mark.integration

MiB = 1 << 20
BIG = 384 * MiB


@pytest.fixture(scope="module")
def big_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 384 MiB file of random bytes."""
    path = tmp_path_factory.mktemp("big") / "big.bin"
    random_file(path, BIG)
    return path


# -- 384 MiB, killed at a third ------------------------------------------------------------------


@pytest.mark.minio_only
def test_objsdk_cp_killed_at_a_third_resumes_and_sends_at_most_three_quarters(
    s3_server: Any, client: Client, s3_features: S3Features, bucket: str, proxy: FaultProxy,
    big_file: Path, tmp_path: Path,
) -> None:  # fmt: skip
    path = big_file
    env = child_env(s3_server, proxy.endpoint, tmp_path)
    command = [*COMMAND, "cp", str(path), f"s3://{bucket}/big"]
    at_kill, sent = run_killed_then_again(
        command, env, proxy, BIG, tmp_path, done=lambda: recorded(env)
    )
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
    env = child_env(s3_server, proxy.endpoint, tmp_path)
    command = [sys.executable, "-c", UPLOAD, bucket, "big", str(path), "{}"]
    at_kill, sent = run_killed_then_again(
        command, env, proxy, BIG, tmp_path, done=lambda: recorded(env)
    )
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
    env = child_env(s3_server, proxy.endpoint, tmp_path)
    command = [sys.executable, "-c", UPLOAD, bucket, "k", str(path), SMALL_OPTIONS]
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
    env = child_env(s3_server, proxy.endpoint, tmp_path)
    command = [sys.executable, "-c", UPLOAD, bucket, "k", str(path), SMALL_OPTIONS]

    def rewrite_the_first_part() -> None:
        with open(path, "r+b") as f:  # same size, new bytes where part 1 was stored
            f.write(os.urandom(1000))

    run_killed_then_again(command, env, proxy, SMALL, tmp_path, rewrite_the_first_part)
    assert_stored_and_verified(client, s3_features, bucket, "k", path)
    assert multipart_uploads(s3_server, bucket) == []
