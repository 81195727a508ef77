"""LocalMoto: moto's S3 server on a loopback port, crash-safe like LocalMinio; the suite's
choice of service (s3_server) and the features each one declares."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from objsdk.testing import LocalMoto, S3Endpoint, S3EndpointError, S3Features
from objsdk.testing.features import AWS, MOTO, features_from_env

REPO = Path(__file__).resolve().parents[1]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def eventually(condition: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_repr_never_shows_the_secret_key() -> None:
    moto = LocalMoto(secret_key="s3cr3t-value")
    assert "s3cr3t-value" not in repr(moto)
    assert "unstarted" in repr(moto)


@pytest.mark.integration
def test_a_started_moto_serves_s3_on_loopback_and_stops_without_a_trace() -> None:
    with LocalMoto() as moto, moto.client() as client:
        assert moto.endpoint.startswith("http://127.0.0.1:")
        client.create_bucket("moto-lifecycle")
        client.put_object("moto-lifecycle", "k", b"value")
        assert client.get_object("moto-lifecycle", "k") == b"value"
        assert moto.env()["AWS_ENDPOINT_URL"] == moto.endpoint
        pid = moto.pid
        assert pid is not None
    assert moto.pid is None
    assert eventually(lambda: not alive(pid))


@pytest.mark.integration
def test_moto_vanishes_when_its_owner_is_killed() -> None:
    owner = (
        "import os, signal\n"
        "from objsdk.testing import LocalMoto\n"
        "moto = LocalMoto().start()\n"
        "print(moto.pid, flush=True)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    result = subprocess.run(
        [sys.executable, "-c", owner], env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == -signal.SIGKILL, result.stderr
    assert eventually(lambda: not alive(int(result.stdout.split()[0])))


def test_an_endpoint_is_read_from_the_environment_with_aws_fallbacks() -> None:
    env = {
        "OBJSDK_TEST_ENDPOINT": "https://s3.example.com/",
        "AWS_ACCESS_KEY_ID": "AKID",
        "AWS_SECRET_ACCESS_KEY": "very-secret",
        "OBJSDK_TEST_REGION": "eu-west-1",
        "OBJSDK_TEST_FEATURES": "stores_put_checksum=0, keep_alive=0",
    }
    endpoint = S3Endpoint.from_env(env)
    assert (endpoint.endpoint, endpoint.access_key, endpoint.region) == (
        "https://s3.example.com",
        "AKID",
        "eu-west-1",
    )
    assert endpoint.features == S3Features(
        stores_put_checksum=False, refuses_own_bucket=False, keep_alive=False
    )
    assert "very-secret" not in repr(endpoint)
    assert endpoint.env()["AWS_REGION"] == "eu-west-1"


def test_an_endpoint_without_keys_is_a_clear_error() -> None:
    with pytest.raises(S3EndpointError, match="OBJSDK_TEST_ACCESS_KEY"):
        S3Endpoint.from_env({"OBJSDK_TEST_ENDPOINT": "https://s3.example.com"})
    with pytest.raises(S3EndpointError, match="OBJSDK_TEST_ENDPOINT is not set"):
        S3Endpoint.from_env({})


def test_unknown_features_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match="'fast=1'"):
        features_from_env(AWS, {"OBJSDK_TEST_FEATURES": "fast=1"})
    assert features_from_env(MOTO, {}) is MOTO


@pytest.mark.integration
def test_the_suite_talks_to_the_chosen_service(s3_server, client) -> None:  # type: ignore[no-untyped-def]
    assert client.endpoint.url.rstrip("/") == s3_server.endpoint
    assert os.environ["AWS_ACCESS_KEY_ID"] == s3_server.access_key
