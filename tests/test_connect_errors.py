"""What a new user sees when the endpoint is wrong: the error names the endpoint URL it
could not connect to (as aws: 'Could not connect to the endpoint URL: "http://host:port/
bucket/key"'), never a query or a signature; a host name that does not resolve fails at
once, after one attempt, naming the host; an ``https://`` endpoint that speaks plain
HTTP says that is the likely cause. Whichever way the request went: objsdk's own
connections, requests' adapter, or a file body sent by ``sendfile``."""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import objsdk
from objsdk import Client
from objsdk._transport.http import HTTPTransport
from objsdk.testing import LocalMinio

AK, SK = "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
MiB = 1 << 20


@pytest.fixture
def a_file(tmp_path: Path) -> Path:
    """A regular file large enough to be sent as a file body (by sendfile)."""
    path = tmp_path / "f.bin"
    path.write_bytes(os.urandom(MiB))
    return path


def _calls(client: Client, a_file: Path) -> dict[str, tuple[Callable[[], object], str]]:
    """One call down each way a request goes out, and the path of its URL."""
    return {
        "an answer read whole": (lambda: client.get_object("bkt", "dir/k"), "/bkt/dir/k"),
        "a file body": (lambda: client.upload("bkt", "dir/k", a_file), "/bkt/dir/k"),
        "a query": (lambda: list(client.list_objects("bkt", prefix="dir/")), "/bkt"),
    }


@pytest.fixture(params=[True, False], ids=["wire", "requests"])
def wire(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Requests whose answer is read whole go over objsdk's own connections, or all
    through requests' adapter."""
    monkeypatch.setattr(HTTPTransport, "wire_requests", request.param)
    return bool(request.param)


def test_a_refused_connection_names_the_endpoint_url_without_a_query(
    unused_port: int, a_file: Path, wire: bool
) -> None:
    endpoint = f"http://127.0.0.1:{unused_port}"
    with Client(endpoint, AK, SK, retries=0) as client:
        for way, (call, path) in _calls(client, a_file).items():
            with pytest.raises(objsdk.ConnectError) as info:
                call()
            said = str(info.value)
            assert f'at the endpoint URL "{endpoint}{path}" (' in said, (way, said)
            assert "ConnectionRefusedError" in said, (way, said)
            assert "?" not in said, (way, said)
            assert AK not in said, (way, said)


class _Resolver:
    """``socket.getaddrinfo``, counting the lookups of one host name (the system's
    resolver answers them, and every other name as it would)."""

    def __init__(self, host: str) -> None:
        self.host = host
        self.lookups = 0
        self._real = socket.getaddrinfo

    def __call__(self, host: Any, *args: Any, **kwargs: Any) -> Any:
        if host == self.host:
            self.lookups += 1
        return self._real(host, *args, **kwargs)


@pytest.fixture
def resolver(monkeypatch: pytest.MonkeyPatch) -> _Resolver:
    counting = _Resolver("no-such-host.invalid")  # RFC 6761: never resolves
    try:
        socket.getaddrinfo(counting.host, 9000)
    except socket.gaierror:
        pass
    else:  # pragma: no cover - a resolver that answers for every name
        pytest.skip(f"this machine's resolver answers for {counting.host}")
    monkeypatch.setattr(socket, "getaddrinfo", counting)
    return counting


def test_a_host_name_that_does_not_resolve_fails_after_one_attempt_naming_the_host(
    resolver: _Resolver, a_file: Path, wire: bool, caplog: pytest.LogCaptureFixture
) -> None:
    # Before: retried 5 times (with backoff), each time the same answer.
    endpoint = f"http://{resolver.host}:9000"
    with Client(endpoint, AK, SK, retries=5) as client:
        for way, (call, path) in _calls(client, a_file).items():
            resolver.lookups = 0
            with (
                caplog.at_level(logging.WARNING, "objsdk"),
                pytest.raises(objsdk.ConnectError) as info,
            ):
                call()
            assert resolver.lookups == 1, way
            said = str(info.value)
            assert f'at the endpoint URL "{endpoint}{path}" (' in said, (way, said)
            assert f"the host name {resolver.host!r} could not be resolved" in said, (way, said)
    assert not [r for r in caplog.records if "retrying" in r.getMessage()]


def test_a_connect_error_of_a_known_host_is_still_retried(
    unused_port: int, caplog: pytest.LogCaptureFixture
) -> None:
    # Only the name lookup is final: a refused connection may be a server restarting.
    with (
        Client(f"http://127.0.0.1:{unused_port}", AK, SK, retries=2) as client,
        caplog.at_level(logging.WARNING, "objsdk"),
        pytest.raises(objsdk.ConnectError),
    ):
        client.get_object("bkt", "k")
    assert len([r for r in caplog.records if "retrying" in r.getMessage()]) == 2


def test_an_https_endpoint_that_speaks_plain_http_says_it_is_likely_http(
    local_minio: LocalMinio, a_file: Path, wire: bool
) -> None:
    port = local_minio.endpoint.rsplit(":", 1)[1]
    with Client(f"https://127.0.0.1:{port}", AK, SK) as client:
        for way, (call, path) in _calls(client, a_file).items():
            with pytest.raises(objsdk.ConnectError) as info:
                call()
            said = str(info.value)
            assert f'TLS error at the endpoint URL "https://127.0.0.1:{port}{path}"' in said
            assert "the endpoint most likely answered plain HTTP to the TLS handshake" in said
            assert f'is it "http://127.0.0.1:{port}"?' in said, (way, said)


_PANDAS_SCRIPT = """
import sys
import pandas as pd
options = {"endpoint_url": sys.argv[1], "key": "AKIDEXAMPLE", "secret": "not-a-secret"}
pd.read_csv("objsdk://bkt/weather.csv", storage_options=options)
"""


@pytest.mark.parametrize("host", ["127.0.0.1", "no-such-host.invalid"])
def test_a_pandas_script_with_a_wrong_endpoint_ends_naming_it(
    unused_port: int, tmp_path: Path, host: str
) -> None:
    endpoint = f"http://{host}:{unused_port}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    proc = subprocess.run(
        [sys.executable, "-c", _PANDAS_SCRIPT, endpoint],
        env={**env, "HOME": str(tmp_path), "AWS_MAX_ATTEMPTS": "1"},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("objsdk.errors.ConnectError: head_object: cannot reach the server")
    assert f'at the endpoint URL "{endpoint}/bkt/weather.csv"' in last, last
    assert "not-a-secret" not in proc.stderr
