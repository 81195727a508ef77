"""Shared fixtures: a client and throw-away buckets on the session's S3 service.

The service is ``s3_server`` (objsdk.testing.pytest_plugin): the local MinIO by default,
the local moto server with ``--s3-server=moto``, or any endpoint named by
``OBJSDK_TEST_ENDPOINT`` (see docs/compatibility.md, "Running the suite against a
service").
"""

from __future__ import annotations

import fcntl
import os
import socket
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest

from objsdk import Client
from objsdk.testing import S3Features


@pytest.fixture(scope="session", autouse=True)
def no_instance_metadata() -> Iterator[None]:
    """The suite sends nothing beyond this machine: a client that finds no keys never asks
    the EC2 instance metadata service (169.254.169.254) in any test or subprocess. The
    tests of that source point it at their loopback emulator instead."""
    saved = os.environ.get("AWS_EC2_METADATA_DISABLED")
    os.environ["AWS_EC2_METADATA_DISABLED"] = "true"
    yield
    if saved is None:
        os.environ.pop("AWS_EC2_METADATA_DISABLED", None)
    else:
        os.environ["AWS_EC2_METADATA_DISABLED"] = saved


@pytest.fixture(scope="session", autouse=True)
def credentials_in_environment(s3_server: Any) -> Iterator[None]:
    """The session service's keys in the environment, as a deployment would set them: a
    Client pickled into a worker process (without its secret, the default) finds them
    there."""
    names = {
        "AWS_ACCESS_KEY_ID": s3_server.access_key,
        "AWS_SECRET_ACCESS_KEY": s3_server.secret_key,
    }
    saved = {name: os.environ.get(name) for name in names}
    os.environ.update(names)
    yield
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture(scope="session")
def client(s3_server: Any) -> Iterator[Client]:
    """A client for the session's service (shared: Client is thread-safe)."""
    with s3_server.client() as c:
        yield c


@pytest.fixture(scope="session")
def s3_features(s3_server: Any) -> S3Features:
    """Where the session's service differs from others (objsdk.testing.features)."""
    features: S3Features = s3_server.features
    return features


@pytest.fixture
def fresh_bucket_name() -> str:
    """A bucket name no one uses, starting with ``OBJSDK_TEST_BUCKET_PREFIX`` (``t-``)."""
    return os.environ.get("OBJSDK_TEST_BUCKET_PREFIX", "t-") + os.urandom(6).hex()


@pytest.fixture
def bucket(client: Client, fresh_bucket_name: str) -> Iterator[str]:
    """A new empty bucket, emptied and removed after the test."""
    client.create_bucket(fresh_bucket_name)
    yield fresh_bucket_name
    keys = [e.key for e in client.list_objects(fresh_bucket_name)]
    client.delete_objects(fresh_bucket_name, keys)
    client.delete_bucket(fresh_bucket_name)


@pytest.fixture
def unused_port() -> int:
    """A loopback port nothing listens on (bound, read, released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


pytest_plugins = ["objsdk.testing.pytest_plugin"]


# objsdk.shm.sweep() removes the blocks of dead creators machine-wide, and make test runs
# two suites at once: a sweep in one would remove the block another's sweep test has
# just left behind on purpose. Every test that may sweep (load_shared sweeps first)
# holds this lock shared; the sweep test holds it alone (``shm_sweep_alone``).
_SWEEPERS = {"test_shm.py", "test_docs_snippets.py", "test_examples.py"}
_SWEEP_LOCK = os.path.join(tempfile.gettempdir(), "objsdk-tests-shm-sweep.lock")


def _sweep_lock(mode: int) -> Iterator[None]:
    with open(_SWEEP_LOCK, "a") as f:
        fcntl.flock(f, mode)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@pytest.fixture(autouse=True)
def _shm_sweep_shared(request: pytest.FixtureRequest) -> Iterator[None]:
    if request.path.name not in _SWEEPERS or "shm_sweep_alone" in request.fixturenames:
        yield
        return
    yield from _sweep_lock(fcntl.LOCK_SH)


@pytest.fixture
def shm_sweep_alone() -> Iterator[None]:
    """No other test that may sweep shared memory runs meanwhile, in any process."""
    yield from _sweep_lock(fcntl.LOCK_EX)
