"""An upload of a file in a child process, killed with SIGKILL part way and run again:
the child's environment, the moment of the kill, the bytes the re-run sends (counted
by a :class:`~objsdk.testing.faultproxy.FaultProxy` every request goes through), and
the check that the object stored is the file."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import clean_env

from objsdk import Client
from objsdk._core.checksums import crc32c, encode_crc32c
from objsdk._core.upload_record import parse_record
from objsdk.testing import S3Features
from objsdk.testing.faultproxy import Action, FaultProxy, LoggedRequest

__all__ = [
    "UPLOAD",
    "assert_stored_and_verified",
    "child_env",
    "digests",
    "proxy",
    "random_file",
    "recorded",
    "run_killed_then_again",
    "stored",
]

MiB = 1 << 20

#: ``python -c UPLOAD bucket key path OPTIONS``: ``Client.upload`` in a process of its own,
#: OPTIONS a dict literal of keyword arguments.
UPLOAD = """
import sys
from objsdk import Client

with Client.from_env() as client:
    client.upload(sys.argv[1], sys.argv[2], sys.argv[3], **eval(sys.argv[4]))
print("uploaded")
"""


@pytest.fixture
def proxy(s3_server: Any) -> Iterator[FaultProxy]:
    """A fault proxy in front of the service, with no rules: it logs every request."""
    with FaultProxy(s3_server.endpoint) as p:
        yield p


def random_file(path: Path, size: int) -> tuple[str, int]:
    """Write ``size`` random bytes to ``path`` (16 MiB at a time, no hole); their SHA-256
    (hex) and CRC32C, computed as they are written."""
    sha, crc = hashlib.sha256(), 0
    with open(path, "wb") as f:
        left = size
        while left:
            chunk = os.urandom(min(left, 16 * MiB))
            f.write(chunk)
            sha.update(chunk)
            crc = crc32c(chunk, crc)
            left -= len(chunk)
    return sha.hexdigest(), crc


def digests(path: Path) -> tuple[str, int]:
    """The SHA-256 (hex) and CRC32C of the file at ``path``."""
    sha, crc = hashlib.sha256(), 0
    with open(path, "rb") as f:
        while chunk := f.read(16 * MiB):
            sha.update(chunk)
            crc = crc32c(chunk, crc)
    return sha.hexdigest(), crc


def child_env(s3_server: Any, endpoint: str, tmp_path: Path) -> dict[str, str]:
    """The environment of the killed run and of the re-run: the service at ``endpoint``
    (the proxy), and a home of their own (where the upload's record is kept)."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return {
        **clean_env(home),
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": s3_server.access_key,
        "AWS_SECRET_ACCESS_KEY": s3_server.secret_key,
    }


def stored(proxy: FaultProxy) -> int:
    """The bytes of the parts the service has answered 200 for, as the proxy saw them."""
    return sum(r.request_bytes for r in _parts(proxy.requests(settle=0)) if r.status == 200)


def recorded(env: Mapping[str, str]) -> int:
    """The bytes of the parts the upload records in the home of ``env`` hold: the parts
    a re-run reuses. (The proxy sees a part's 200 before the sending process has written
    the part's line, so parts stored in flight at a kill may be sent again.)"""
    cache = env.get("XDG_CACHE_HOME") or os.path.join(env["HOME"], ".cache")
    total = 0
    for record in Path(cache, "objsdk", "uploads").glob("*.json"):
        try:
            found = parse_record(record.read_bytes())
        except FileNotFoundError:  # replaced or removed meanwhile
            continue
        if found is not None:
            total += sum(part.size for part in found[1].values())
    return total


def _parts(log: list[LoggedRequest]) -> list[LoggedRequest]:
    return [r for r in log if r.method == "PUT" and "partNumber" in r.query]


def kill_at(proc: subprocess.Popen[bytes], done: Callable[[], int], size: int, at: float) -> int:
    """SIGKILL ``proc`` once ``done()`` says ``at`` of ``size`` bytes are stored; what
    ``done()`` said then."""
    deadline = time.monotonic() + 120
    while (now := done()) < size * at:
        if proc.poll() is not None or time.monotonic() > deadline:
            _, err = proc.communicate()
            raise AssertionError(f"the upload ended before {at:.0%} was stored: {err!r}")
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    return now


def run_killed_then_again(
    command: list[str], env: dict[str, str], proxy: FaultProxy, size: int, cwd: Path,
    between: Callable[[], None] | None = None, at: float = 1 / 3,
    done: Callable[[], int] | None = None,
) -> tuple[int, int]:  # fmt: skip
    """Run ``command`` until ``at`` (a third) of ``size`` bytes are stored, SIGKILL it,
    (call ``between()``), run it again to the end: the bytes stored at the kill, and the
    request body bytes the re-run sent. What counts as stored is ``done()``: the parts the
    proxy saw stored (the default), or, say, the parts recorded (:func:`recorded`)."""
    # The killed run must not finish first: its Complete is refused for as long as it
    # lives (503 SlowDown, retried).
    proxy.add_rule(Action.SLOW_DOWN, method="POST", query=["uploadId"], times=None)
    proc = subprocess.Popen(command, env=env, cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)  # fmt: skip
    at_kill = kill_at(proc, done or (lambda: stored(proxy)), size, at)
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
    client: Client, features: S3Features, bucket: str, key: str, path: Path,
    file_digests: tuple[str, int] | None = None,
) -> None:  # fmt: skip
    """The object is the file's bytes, read whole through ObjectFile (which checks the
    stored full-object CRC32C), and a service that checks checksums stored the file's.
    ``file_digests``: the file's :func:`digests` if known (else they are computed)."""
    want, crc = file_digests or digests(path)
    got = hashlib.sha256()
    with client.open(bucket, key) as obj:
        while chunk := obj.read(16 * MiB):
            got.update(chunk)
    assert got.hexdigest() == want
    if features.checks_checksums:
        assert client.head_object(bucket, key).checksums["crc32c"] == encode_crc32c(crc)
