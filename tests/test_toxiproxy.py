"""Toxiproxy in front of the local MinIO: forwarding and the faults the SDK tests use."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from objsdk.testing.local_minio import LocalMinio
from objsdk.testing.supervisor import http_ok
from objsdk.testing.toxiproxy import Proxy, Toxiproxy, ToxiproxyError

pytestmark = [pytest.mark.integration, pytest.mark.faults]

HEALTH = b"GET /minio/health/live HTTP/1.1\r\nHost: minio\r\nConnection: close\r\n\r\n"


def exchange(proxy: Proxy) -> bytes:
    """Send a health check through the proxy; everything received until EOF."""
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as sock:
        sock.sendall(HEALTH)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
        return received


def test_proxy_listens_on_a_real_loopback_port(minio_proxy: Proxy) -> None:
    assert minio_proxy.listen.startswith("127.0.0.1:")
    assert minio_proxy.port != 0
    assert minio_proxy.endpoint == f"http://{minio_proxy.listen}"


def test_proxy_forwards_to_minio_health_endpoint(minio_proxy: Proxy) -> None:
    assert http_ok(f"{minio_proxy.endpoint}/minio/health/live")


def test_limit_data_cuts_the_connection_after_that_many_bytes(minio_proxy: Proxy) -> None:
    full = exchange(minio_proxy)
    minio_proxy.add_toxic("limit_data", bytes=50)

    cut = exchange(minio_proxy)

    assert len(full) > 50
    assert cut == full[:50]


def test_reset_peer_resets_the_connection(minio_proxy: Proxy) -> None:
    minio_proxy.add_toxic("reset_peer", timeout=0)

    with pytest.raises(ConnectionResetError):
        exchange(minio_proxy)


def test_timeout_toxic_lets_no_data_through(minio_proxy: Proxy) -> None:
    minio_proxy.add_toxic("timeout", timeout=200)

    assert exchange(minio_proxy) == b""


def test_add_toxic_returns_its_name_and_remove_toxic_restores_traffic(
    minio_proxy: Proxy,
) -> None:
    name = minio_proxy.add_toxic("limit_data", bytes=10)
    assert name == "limit_data_downstream"

    minio_proxy.remove_toxic(name)

    assert minio_proxy.toxics() == []
    assert http_ok(f"{minio_proxy.endpoint}/minio/health/live")


def test_toxic_attributes_can_be_updated(minio_proxy: Proxy) -> None:
    name = minio_proxy.add_toxic("latency", name="slow", latency=100)

    minio_proxy.update_toxic(name, latency=5)

    assert minio_proxy.toxics()[0]["attributes"]["latency"] == 5


def test_disabled_proxy_refuses_connections_until_enabled(minio_proxy: Proxy) -> None:
    minio_proxy.disable()

    assert not minio_proxy.enabled
    with pytest.raises(ConnectionRefusedError):
        exchange(minio_proxy)

    minio_proxy.enable()
    assert exchange(minio_proxy).startswith(b"HTTP/1.1 200")


def test_reset_removes_toxics_and_enables(minio_proxy: Proxy) -> None:
    minio_proxy.add_toxic("bandwidth", rate=1)
    minio_proxy.add_toxic("slicer", stream="upstream", average_size=10, size_variation=5, delay=1)
    minio_proxy.disable()

    minio_proxy.reset()

    assert minio_proxy.toxics() == []
    assert minio_proxy.enabled
    assert exchange(minio_proxy).startswith(b"HTTP/1.1 200")


def test_api_errors_raise_toxiproxy_error_with_status(minio_proxy: Proxy) -> None:
    with pytest.raises(ToxiproxyError, match="invalid toxic type") as info:
        minio_proxy.add_toxic("no-such-toxic")

    assert info.value.status == 400


def test_deleted_proxy_is_gone_and_delete_is_idempotent(
    toxiproxy: Toxiproxy, local_minio: LocalMinio
) -> None:
    proxy = toxiproxy.create_proxy("short-lived", f"127.0.0.1:{local_minio.port}")

    proxy.delete()
    proxy.delete()

    assert "short-lived" not in toxiproxy.proxies()
    with pytest.raises(ToxiproxyError, match="proxy not found"):
        toxiproxy.get_proxy("short-lived")


def test_stopped_toxiproxy_leaves_no_process() -> None:
    server = Toxiproxy().start()
    pid = server.pid
    assert pid is not None

    server.stop()

    assert not Path(f"/proc/{pid}").exists()
    assert server.pid is None
    server.stop()  # idempotent
