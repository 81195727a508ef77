"""pytest fixtures for local S3 servers (MinIO, moto), Toxiproxy, and the suite's choice
of server.

Enable with ``pytest_plugins = ["objsdk.testing.pytest_plugin"]`` in a conftest.py.

* ``s3_server`` (session): the S3 service the server-neutral tests talk to, chosen by
  ``--s3-server`` or ``OBJSDK_TEST_SERVER``: ``minio`` (the default: ``local_minio``),
  ``moto`` (``local_moto``) or ``endpoint`` (an :class:`~objsdk.testing.S3Endpoint` from
  ``OBJSDK_TEST_ENDPOINT`` and friends; setting that variable alone chooses it). Each has
  ``endpoint``, ``access_key``, ``secret_key``, ``region``, ``client()`` and ``env()``.
* ``local_minio`` (session): a started :class:`~objsdk.testing.local_minio.LocalMinio`.
* ``local_moto`` (session): a started :class:`~objsdk.testing.local_moto.LocalMoto`.
* ``toxiproxy`` (session): a started :class:`~objsdk.testing.toxiproxy.Toxiproxy`.
* ``minio_proxy`` (function): a fresh :class:`~objsdk.testing.toxiproxy.Proxy` in front
  of ``local_minio``, deleted after the test; point a client at ``minio_proxy.endpoint``.

A test that needs MinIO itself (its admin side, a restart, Toxiproxy in front of it) says
so by using ``local_minio``, ``minio_proxy`` or ``toxiproxy``, or with the ``minio_only``
marker. When ``s3_server`` is not MinIO, the run is the server-neutral suite: the tests
marked ``integration`` that reach the service through ``s3_server`` and are not
MinIO-only; the rest are deselected (they run in the MinIO run, which is everything). A
test of something only some services do (refusing a wrong signature, say) is marked
``needs_feature("checks_signatures")`` with a field of
:class:`~objsdk.testing.features.S3Features`, and deselected where the service lacks it.

Under pytest-xdist every worker gets its own servers.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from objsdk.testing.endpoint import S3Endpoint
from objsdk.testing.features import S3Features, features_of
from objsdk.testing.local_minio import LocalMinio
from objsdk.testing.local_moto import LocalMoto
from objsdk.testing.toxiproxy import Proxy, Toxiproxy

__all__ = ["local_minio", "local_moto", "minio_proxy", "s3_server", "toxiproxy"]

SERVERS = ("minio", "moto", "endpoint")
#: Fixtures that tie a test to the MinIO server itself.
MINIO_FIXTURES = frozenset({"local_minio", "minio_proxy", "toxiproxy"})


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--s3-server",
        choices=SERVERS,
        default=None,
        help="the S3 service of the server-neutral tests (default: $OBJSDK_TEST_SERVER, "
        "else 'endpoint' if $OBJSDK_TEST_ENDPOINT is set, else 'minio')",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "minio_only: needs MinIO itself; left out when s3_server is another service"
    )
    config.addinivalue_line(
        "markers",
        "needs_feature(name): needs a feature of S3Features; left out where s3_server lacks it",
    )


def server_choice(config: pytest.Config) -> str:
    """Which service ``s3_server`` is: the option, else the environment, else MinIO."""
    chosen = config.getoption("--s3-server", default=None) or os.environ.get("OBJSDK_TEST_SERVER")
    if not chosen:
        chosen = "endpoint" if os.environ.get("OBJSDK_TEST_ENDPOINT") else "minio"
    if chosen not in SERVERS:
        raise pytest.UsageError(f"OBJSDK_TEST_SERVER must be one of {SERVERS}, got {chosen!r}")
    return chosen


def is_minio_only(item: pytest.Item) -> bool:
    fixtures = set(getattr(item, "fixturenames", ()))
    return bool(fixtures & MINIO_FIXTURES) or item.get_closest_marker("minio_only") is not None


def reaches_the_service(item: pytest.Item) -> bool:
    """Does the test use ``s3_server``, directly or through its fixtures (``client``,
    ``bucket``...)? Autouse fixtures do not count: a test that starts servers of its own
    (examples, the perf suite's quick mode) gains nothing from another service."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    todo, seen = list(info.argnames), set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for fixturedef in info.name2fixturedefs.get(name, ()):
            todo.extend(fixturedef.argnames)
    return "s3_server" in seen


def lacks_a_feature(item: pytest.Item, features: S3Features) -> bool:
    for mark in item.iter_markers("needs_feature"):
        for name in mark.args:
            if not hasattr(features, name):
                raise pytest.UsageError(f"{item.nodeid}: needs_feature({name!r}) is unknown")
            if not getattr(features, name):
                return True
    return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    choice = server_choice(config)
    features = features_of(choice)
    keep: list[pytest.Item] = []
    drop: list[pytest.Item] = []
    for item in items:
        if choice == "minio":
            wanted = not lacks_a_feature(item, features)
        else:
            wanted = (
                item.get_closest_marker("integration") is not None
                and reaches_the_service(item)
                and not is_minio_only(item)
                and not lacks_a_feature(item, features)
            )
        (keep if wanted else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest.fixture(scope="session")
def s3_server(request: pytest.FixtureRequest) -> Iterator[Any]:
    """The S3 service of the server-neutral tests (see the module docstring)."""
    chosen = server_choice(request.config)
    if chosen == "minio":
        yield request.getfixturevalue("local_minio")
    elif chosen == "moto":
        yield request.getfixturevalue("local_moto")
    else:
        yield S3Endpoint.from_env()


@pytest.fixture(scope="session")
def local_minio() -> Iterator[LocalMinio]:
    """A MinIO server shared by the whole test session."""
    with LocalMinio() as minio:
        yield minio


@pytest.fixture(scope="session")
def local_moto() -> Iterator[LocalMoto]:
    """A moto S3 server shared by the whole test session."""
    with LocalMoto() as moto:
        yield moto


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
