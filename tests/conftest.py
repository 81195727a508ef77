"""Shared fixtures: a client and throw-away buckets on the session's local MinIO."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator

import pytest

from objsdk import Client


@pytest.fixture(scope="session", autouse=True)
def credentials_in_environment(local_minio) -> Iterator[None]:
    """The session MinIO's keys in the environment, as a deployment would set them: a
    Client pickled into a worker process (without its secret, the default) finds them
    there."""
    names = {
        "AWS_ACCESS_KEY_ID": local_minio.access_key,
        "AWS_SECRET_ACCESS_KEY": local_minio.secret_key,
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
def client(local_minio) -> Iterator[Client]:
    """A client for the session's MinIO (shared: Client is thread-safe)."""
    with local_minio.client() as c:
        yield c


@pytest.fixture
def fresh_bucket_name() -> str:
    return "t-" + os.urandom(6).hex()


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
