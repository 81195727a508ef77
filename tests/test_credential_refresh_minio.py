"""Credentials that expire while a client works: refreshed before they expire, and after
an ``ExpiredToken`` answer, against MinIO behind a proxy that refuses every request
signed with credentials past the expiry their source declared (MinIO's own last 15
minutes; the emulators declare seconds)."""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from objsdk import Client, Credentials
from objsdk.testing import LocalMinio
from objsdk.testing.credential_servers import ContainerCredentialsServer
from objsdk.testing.faultproxy import FaultProxy
from objsdk.testing.temporary_credentials import TemporaryCredentials

pytestmark = pytest.mark.minio_only

MiB = 1 << 20


@pytest.fixture
def proxied(local_minio: LocalMinio) -> Callable[[float], tuple[TemporaryCredentials, FaultProxy]]:
    """``make(lifetime)``: credentials declared to last ``lifetime`` s, and a proxy in
    front of MinIO that refuses them past it."""
    proxies: list[FaultProxy] = []

    def make(lifetime: float) -> tuple[TemporaryCredentials, FaultProxy]:
        keys = TemporaryCredentials.of(local_minio, lifetime=lifetime)
        proxy = FaultProxy(local_minio.endpoint, refuse=keys.refuse).start()
        proxies.append(proxy)
        return keys, proxy

    yield make  # type: ignore[misc]
    for proxy in proxies:
        proxy.stop()


def _lying(keys: TemporaryCredentials) -> Callable[[], Credentials]:
    """A credentials function whose sets say they last an hour (the proxy knows
    better): the client refreshes only when told ``ExpiredToken``."""

    def fetch() -> Credentials:
        issued = keys.issue()
        later = datetime.now(timezone.utc) + timedelta(hours=1)
        return Credentials(issued.access_key, issued.secret_key, issued.session_token, later)

    return fetch


@pytest.mark.parametrize("method", ["GET", "HEAD", "PUT"])
def test_a_request_answered_expired_token_refreshes_and_succeeds(
    proxied: Callable[[float], tuple[TemporaryCredentials, FaultProxy]],
    local_minio: LocalMinio,
    bucket: str,
    method: str,
) -> None:
    keys, proxy = proxied(1.5)
    with local_minio.client() as root:
        root.put_object(bucket, "k", b"payload")
    with Client(proxy.endpoint, credentials=_lying(keys)) as client:
        assert client.get_object(bucket, "k") == b"payload"
        first = client.credentials
        time.sleep(1.6)
        if method == "GET":
            assert client.get_object(bucket, "k") == b"payload"
        elif method == "HEAD":  # no body to say ExpiredToken
            assert client.head_object(bucket, "k").size == 7
        else:
            client.put_object(bucket, "k2", b"after the expiry")
        assert keys.refused == 1
        assert client.credentials != first
        assert len(keys.issued) == 2


def test_an_object_file_opened_before_the_expiry_keeps_seeking_after_it(
    proxied: Callable[[float], tuple[TemporaryCredentials, FaultProxy]],
    local_minio: LocalMinio,
    bucket: str,
) -> None:
    keys, proxy = proxied(3)
    data = os.urandom(3 * MiB)
    with local_minio.client() as root:
        root.put_object(bucket, "big", data)
    with (
        Client(proxy.endpoint, credentials=keys.issue) as client,
        client.open(bucket, "big", readahead=0) as f,
    ):
        assert f.read(1000) == data[:1000]
        time.sleep(3.2)  # past the first set's expiry
        f.seek(2 * MiB)
        assert f.read(1000) == data[2 * MiB : 2 * MiB + 1000]
        f.seek(10)
        assert f.read(MiB) == data[10 : 10 + MiB]
    assert len(keys.issued) >= 2
    assert keys.refused == 0  # refreshed before they expired, never told


def test_seventy_five_seconds_of_gets_seeks_and_multipart_uploads_across_expiries_all_succeed(
    proxied: Callable[[float], tuple[TemporaryCredentials, FaultProxy]],
    local_minio: LocalMinio,
    bucket: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The acceptance run: credentials from the container endpoint declared to last
    25 s; for 75 s, small GETs, HEADs and PUTs from four threads, seeks on one
    ObjectFile opened at the start, multipart uploads one after another, and one
    multipart upload written slowly from start to end: not one operation fails."""
    keys, proxy = proxied(25)
    token = "container-token-acceptance"
    big = os.urandom(8 * MiB)
    upload = tmp_path / "upload.bin"
    upload.write_bytes(os.urandom(11 * MiB))
    with local_minio.client() as root:
        root.put_object(bucket, "big", big)
        for i in range(20):
            root.put_object(bucket, f"small/{i}", f"object {i}".encode())
    with ContainerCredentialsServer(keys, token=token) as server:
        for name in list(os.environ):
            if name.startswith("AWS_") and name != "AWS_EC2_METADATA_DISABLED":
                monkeypatch.delenv(name)
        monkeypatch.setenv("HOME", str(tmp_path))
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.endpoint)
        monkeypatch.setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", server.url)
        monkeypatch.setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN", token)
        with Client.from_env() as client:
            failures: list[BaseException] = []
            counts: dict[str, int] = {}
            stop = threading.Event()
            deadline = time.monotonic() + 75

            def loop(name: str, step: Callable[[random.Random], None]) -> None:
                rng = random.Random(name)
                while not stop.is_set() and time.monotonic() < deadline:
                    try:
                        step(rng)
                        counts[name] = counts.get(name, 0) + 1
                    except BaseException as e:
                        failures.append(e)
                    time.sleep(0.02)

            def small(rng: random.Random) -> None:
                i = rng.randrange(20)
                action = rng.choice(["get", "get", "head", "put"])
                if action == "get":
                    assert client.get_object(bucket, f"small/{i}") == f"object {i}".encode()
                elif action == "head":
                    client.head_object(bucket, f"small/{i}")
                else:
                    client.put_object(bucket, f"written/{rng.randrange(50)}", b"w" * 100)

            f = client.open(bucket, "big", readahead=0)
            assert f.read(10) == big[:10]

            def seek(rng: random.Random) -> None:
                at = rng.randrange(len(big) - 4096)
                f.seek(at)
                assert f.read(4096) == big[at : at + 4096]
                time.sleep(0.2)

            def multipart(rng: random.Random) -> None:
                key = f"multipart/{rng.randrange(4)}"
                info = client.upload(
                    bucket, key, upload, part_size=5 * MiB, multipart_threshold=5 * MiB
                )
                assert info.size == 11 * MiB
                time.sleep(1)

            writer = client.open_write(bucket, "slow", part_size=5 * MiB)
            written: list[bytes] = []

            def slow(rng: random.Random) -> None:
                chunk = rng.randbytes(5 * MiB)
                writer.write(chunk)
                written.append(chunk)
                stop.wait(min(12.0, max(0.0, deadline - time.monotonic())))

            threads = [threading.Thread(target=loop, args=(f"small-{n}", small)) for n in range(4)]
            threads += [
                threading.Thread(target=loop, args=("seek", seek)),
                threading.Thread(target=loop, args=("multipart", multipart)),
                threading.Thread(target=loop, args=("slow", slow)),
            ]
            for t in threads:
                t.start()
            try:
                for t in threads:
                    t.join(120)
            finally:
                stop.set()
            f.close()
            writer.close()
            assert failures == []
            assert client.get_object(bucket, "slow") == b"".join(written)
    assert sum(counts.values()) > 500
    assert counts["seek"] > 100
    assert counts["multipart"] >= 5
    assert counts["slow"] >= 6
    # 75 s of credentials lasting 25 s, refreshed halfway through their life.
    assert len(keys.issued) >= 5
    # Nothing was ever sent with credentials past their expiry.
    assert keys.refused == 0
