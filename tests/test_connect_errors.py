"""What a new user sees when the endpoint is wrong: the error names the endpoint URL it
could not connect to (as aws: 'Could not connect to the endpoint URL: "http://host:port/
bucket/key"'), never a query or a signature; a host name that does not resolve fails at
once, after one attempt, naming the host; an ``https://`` endpoint that speaks plain
HTTP says that is the likely cause. Whichever way the request went: objsdk's own
connections, requests' adapter, or a file body sent by ``sendfile``; and whichever call
made it: a read through a resuming reader (``open().read()``, ``get_into``) fails as
``get_object`` does, after the transport's own connect retries, not after a resume loop
multiplied them."""

from __future__ import annotations

import logging
import os
import pickle
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from rawserver import RawServer, Request, S3Object, object_reply, reset

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
        # One stream: the adaptive read-ahead would look the host up once more, to tell
        # whether the server runs on this machine (a lookup, not an attempt).
        "a stream read": (lambda: client.open("bkt", "dir/k", readahead=0).read(), "/bkt/dir/k"),
        "a read into a buffer": (
            lambda: client.get_into("bkt", "dir/k", bytearray(1000)),
            "/bkt/dir/k",
        ),
        "a download": (lambda: client.download("bkt", "dir/k", bytearray(1000)), "/bkt/dir/k"),
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


def test_a_read_that_cannot_connect_is_retried_by_the_transport_alone(
    unused_port: int, caplog: pytest.LogCaptureFixture
) -> None:
    # Before: each of the reader's 7 GETs (6 resumes, with backoff) was itself tried 3
    # times: 21 attempts, and ResumeLimitError instead of the ConnectError.
    endpoint = f"http://127.0.0.1:{unused_port}"
    with (
        Client(endpoint, AK, SK, retries=2) as client,
        client.open("bkt", "dir/k") as f,
        caplog.at_level(logging.WARNING, "objsdk"),
        pytest.raises(objsdk.ConnectError) as info,
    ):
        f.read()
    assert info.value.endpoint == f"{endpoint}/bkt/dir/k"
    assert info.value.reason == "Connection refused"
    said = [r.getMessage() for r in caplog.records]
    assert len([m for m in said if "retrying" in m]) == 2, said
    assert not [m for m in said if "resuming" in m], said
    assert (f.stats.requests, f.stats.resumes) == (1, 0)


def test_a_file_told_its_endpoint_answers_resumes_through_a_refused_connection(
    unused_port: int,
) -> None:
    # As a dataset's later shards: a refused connection is then an outage (a server
    # restarting), resumed up to max_resume; a pickled copy keeps that.
    endpoint = f"http://127.0.0.1:{unused_port}"
    with Client(endpoint, AK, SK, retries=0, pickle_credentials=True) as client:
        f = client.open("bkt", "dir/k", readahead=0, max_resume=1)
        f.reached = True
        for each in (f, pickle.loads(pickle.dumps(f))):
            with each, pytest.raises(objsdk.ResumeLimitError) as info:
                each.read()
            assert isinstance(info.value.__cause__, objsdk.ConnectError)
            assert (each.stats.requests, each.stats.resumes) == (2, 1)


@pytest.mark.parametrize(
    "read",
    [
        lambda c: c.open("bkt", "dir/k").read(),
        lambda c: c.open("bkt", "dir/k", readahead=0).read(1),
        lambda c: c.get_into("bkt", "dir/k", bytearray(1000)),
        lambda c: c.get_into("bkt", "dir/k", bytearray(3 * MiB), part_size=MiB),
        lambda c: c.download("bkt", "dir/k", bytearray(1000)),
        lambda c: c.get_object("bkt", "dir/k"),
    ],
    ids=["open-read", "open-one-stream", "get_into", "get_into-parts", "download", "get_object"],
)
def test_every_read_from_a_port_nothing_listens_on_fails_within_seconds_naming_it(
    unused_port: int, read: Callable[[Client], object]
) -> None:
    # The default retries (5, backoff from 0.1 s: about 3 s in all); before, a read
    # through a resuming reader took about 35 s and ended in ResumeLimitError.
    endpoint = f"http://127.0.0.1:{unused_port}"
    with Client(endpoint, AK, SK) as client:
        started = time.monotonic()
        with pytest.raises(objsdk.ConnectError) as info:
            read(client)
        elapsed = time.monotonic() - started
    assert info.value.endpoint == f"{endpoint}/bkt/dir/k"
    assert elapsed < 5


def test_a_first_read_whose_connection_the_server_resets_is_resumed() -> None:
    # The server was reached: it accepted the connection, then reset it before answering
    # (requests reports that as a ConnectError too, "Connection aborted"). Not a failure
    # to connect: the reader resumes, as after any broken stream.
    data = os.urandom(MiB)

    def reset_the_first(request: Request, conn: socket.socket) -> None:
        if request.index == 0:
            reset(conn)
        else:
            object_reply(request, S3Object(data)).send(conn)

    with (
        RawServer(reset_the_first) as server,
        Client(server.url, AK, SK, retries=0) as client,
        client.open("bkt", "dir/k", readahead=0) as f,
    ):
        assert f.read() == data
        assert f.stats.resumes == 1


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
