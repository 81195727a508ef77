"""pytest fixtures for a local MinIO and Toxiproxy.

Enable with ``pytest_plugins = ["objsdk.testing.pytest_plugin"]`` in a conftest.py.

* ``local_minio`` (session): a started :class:`~objsdk.testing.local_minio.LocalMinio`.
* ``toxiproxy`` (session): a started :class:`~objsdk.testing.toxiproxy.Toxiproxy`.
* ``minio_proxy`` (function): a fresh :class:`~objsdk.testing.toxiproxy.Proxy` in front
  of ``local_minio``, deleted after the test; point a client at ``minio_proxy.endpoint``.

Under pytest-xdist every worker gets its own servers.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from objsdk.testing.local_minio import LocalMinio
from objsdk.testing.toxiproxy import Proxy, Toxiproxy

__all__ = ["local_minio", "minio_proxy", "toxiproxy"]


@pytest.fixture(scope="session")
def local_minio() -> Iterator[LocalMinio]:
    """A MinIO server shared by the whole test session."""
    with LocalMinio() as minio:
        yield minio


@pytest.fixture(scope="session")
def toxiproxy() -> Iterator[Toxiproxy]:
    """A Toxiproxy server shared by the whole test session."""
    with Toxiproxy() as server:
        yield server


@pytest.fixture
def minio_proxy(local_minio: LocalMinio, toxiproxy: Toxiproxy) -> Iterator[Proxy]:
    """A proxy in front of the session MinIO, without toxics, removed after the test."""
    assert local_minio.port is not None
    proxy = toxiproxy.create_proxy(
        f"minio-{uuid.uuid4().hex[:12]}", upstream=f"{local_minio.host}:{local_minio.port}"
    )
    try:
        yield proxy
    finally:
        proxy.delete()
