"""A machine whose clock is 20 minutes off, against MinIO: the client runs under
``faketime`` (its wall clock shifted, its monotonic clock left alone), the server on the
true time. Every refusal says the clock is off, by how much and which way, HEAD-first
paths (``head_object``, ``download``, ``cp`` down) included, whose 403 has no text of its
own; the command line does not send the user to check credentials that are right."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from faketime_helpers import ensure_faketime

from objsdk.testing import LocalMinio

pytestmark = pytest.mark.integration

_CALLS = """
import json, sys
import objsdk
bucket, key, dest = sys.argv[1:]
client = objsdk.Client.from_env()
calls = {
    "head_object": lambda: client.head_object(bucket, key),
    "download": lambda: client.download(bucket, key, dest),
    "get_object": lambda: client.get_object(bucket, key),
    "list_objects": lambda: list(client.list_objects(bucket)),
}
said = {}
for name, call in calls.items():
    try:
        call()
        said[name] = None
    except objsdk.S3Error as e:
        skew = None if e.clock_skew is None else e.clock_skew.total_seconds()
        said[name] = {"error": type(e).__name__, "message": str(e), "skew": skew}
print(json.dumps(said))
"""


@pytest.fixture
def skewed_env(local_minio: LocalMinio, tmp_path: Path) -> dict[str, str]:
    """The environment of a client on ``local_minio``, under a faketime'd clock whose
    monotonic clock is true (timeouts and backoff are not shifted)."""
    ensure_faketime()
    home = tmp_path / "home"
    home.mkdir()
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith("AWS_")},
        **local_minio.env(),
        "HOME": str(home),
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
    }


@pytest.fixture
def object_on_minio(local_minio: LocalMinio) -> tuple[str, str]:
    bucket = "skew-" + os.urandom(4).hex()
    with local_minio.client() as client:
        client.create_bucket(bucket)
        client.put_object(bucket, "k", b"data")
    return bucket, "k"


@pytest.mark.parametrize(("shift", "way"), [("+20m", "ahead of"), ("-20m", "behind")])
def test_every_refusal_says_the_clock_is_20_minutes_off_and_which_way(
    skewed_env: dict[str, str],
    object_on_minio: tuple[str, str],
    tmp_path: Path,
    shift: str,
    way: str,
) -> None:
    # Before: head_object and download said "AccessDenied (HTTP 403)" and nothing more.
    bucket, key = object_on_minio
    proc = subprocess.run(
        ["faketime", "-f", shift, sys.executable, "-c", _CALLS, bucket, key, str(tmp_path / "d")],
        env=skewed_env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    said = json.loads(proc.stdout)
    sign = 1 if way == "ahead of" else -1
    for call, error in said.items():
        assert error is not None, call
        assert error["error"] == "AccessDenied", error
        assert f"this machine's clock is 20 minutes {way} the server's" in error["message"], error
        assert abs(error["skew"] - sign * 20 * 60) < 60, error
    assert not (tmp_path / "d").exists()


def test_cli_cp_down_with_the_clock_off_says_so_not_to_check_the_credentials(
    skewed_env: dict[str, str], object_on_minio: tuple[str, str], tmp_path: Path
) -> None:
    bucket, key = object_on_minio
    dest = tmp_path / "d"
    argv = ["faketime", "-f", "+20m", sys.executable, "-m", "objsdk.cli"]
    proc = subprocess.run(
        [*argv, "cp", f"s3://{bucket}/{key}", str(dest)],
        env=skewed_env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 254, proc.stderr
    assert "this machine's clock is 20 minutes ahead of the server's" in proc.stderr
    assert "check the credentials" not in proc.stderr
    assert "Traceback" not in proc.stderr
