"""What the command-line tests share: the console script run in a subprocess against the
local MinIO, with a clean environment, and helpers to build and compare trees."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from s3_helpers import boto3_client
from user_env import without_aws

from objsdk import Client

SCRIPT = Path(sys.executable).parent / "objsdk"
COMMAND = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "objsdk.cli"]


@dataclass
class Result:
    code: int
    raw: bytes
    err: str

    @property
    def out(self) -> str:
        return self.raw.decode(errors="replace")

    def json_lines(self) -> list[Any]:
        return [json.loads(line) for line in self.out.splitlines() if line.strip()]


Run = Callable[..., Result]


def clean_env(home: Path) -> dict[str, str]:
    env = without_aws()
    env["HOME"] = str(home)  # no ~/.aws of the machine's user
    return env


@pytest.fixture
def env(s3_server: Any, tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir()
    return {
        **clean_env(home),
        "AWS_ENDPOINT_URL": s3_server.endpoint,
        "AWS_ACCESS_KEY_ID": s3_server.access_key,
        "AWS_SECRET_ACCESS_KEY": s3_server.secret_key,
    }


@pytest.fixture
def cli_env(s3_server: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The session's service in this process's AWS_* variables, for main() in-process."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_server.endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3_server.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3_server.secret_key)


@pytest.fixture
def run(env: dict[str, str], tmp_path: Path) -> Run:
    def run(*args: str, stdin: bytes = b"", extra_env: dict[str, str] | None = None) -> Result:
        proc = subprocess.run(
            [*COMMAND, *args],
            input=stdin,
            capture_output=True,
            env={**env, **(extra_env or {})},
            cwd=tmp_path,
            timeout=60,
            check=False,
        )
        return Result(proc.returncode, proc.stdout, proc.stderr.decode())

    return run


def tree(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def make_tree(root: Path) -> dict[str, bytes]:
    files = {
        "a.txt": b"alpha\n",
        "sub/b.bin": os.urandom(300_000),
        "sub/deeper/c.txt": b"gamma",
        "space name.txt": b"spaced",
    }
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return files


def keys(client: Client, bucket: str, prefix: str = "") -> list[str]:
    return sorted(e.key for e in client.list_objects(bucket, prefix=prefix))


def multipart_uploads(s3_server: Any, bucket: str) -> list[str]:
    s3 = boto3_client(s3_server)
    return [u["Key"] for u in s3.list_multipart_uploads(Bucket=bucket).get("Uploads", [])]


def parts_stored(s3_server: Any, bucket: str, key: str) -> int:
    """How many parts the uploads of ``key`` in progress hold."""
    s3 = boto3_client(s3_server)
    count = 0
    for up in s3.list_multipart_uploads(Bucket=bucket, Prefix=key).get("Uploads", []):
        if up["Key"] == key:
            answer = s3.list_parts(Bucket=bucket, Key=key, UploadId=up["UploadId"])
            count += len(answer.get("Parts", []))
    return count


def as_at_a_terminal() -> None:
    # Ctrl-C at a terminal: SIGINT at its default. A runner that starts the suite in the
    # background (sh's `cmd &`) has it ignored, and children inherit that.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def wait_for(cond: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)
