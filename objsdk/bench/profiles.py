"""Named network profiles: Toxiproxy toxics in front of the object store.

Every profile but ``loopback`` puts a Toxiproxy proxy between the clients and the
server and installs these toxics on it (Toxiproxy applies each toxic to every
connection separately, so the rates below are *per connection*):

============ ======================= ========== ============ ==============================
profile      toxic name              type       stream       attributes
============ ======================= ========== ============ ==============================
loopback     (no proxy)
lan          latency_downstream      latency    downstream   latency=1 (ms), jitter=0
lan          bandwidth_downstream    bandwidth  downstream   rate=100000 (KB/s = 100 MB/s)
lan          bandwidth_upstream      bandwidth  upstream     rate=100000
wan          latency_downstream      latency    downstream   latency=20, jitter=0
wan          bandwidth_downstream    bandwidth  downstream   rate=25000 (25 MB/s)
wan          bandwidth_upstream      bandwidth  upstream     rate=25000
flaky-wan    (the three wan toxics)
flaky-wan    cut_downstream          limit_data downstream   bytes=33554432 (32 MiB)
flaky-wan    cut_upstream            limit_data upstream     bytes=33554432
============ ======================= ========== ============ ==============================

Toxiproxy's ``rate`` is in KB/s of 1000 bytes. The latency toxic delays every chunk
of a response by the given time without limiting throughput; on the downstream only,
it adds the whole round trip to each request/response exchange. ``limit_data`` closes
a connection once that many bytes have passed in its direction; its count is kept per
connection, so every connection is cut after 32 MiB of response body (downloads,
reads) or of request body (uploads), and the reconnection starts a fresh count.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from objsdk.testing.toxiproxy import Toxiproxy

__all__ = ["PROFILES", "Profile", "Toxic", "cut_every", "proxied_endpoint", "shaped"]

MiB = 1 << 20


@dataclass(frozen=True)
class Toxic:
    """One Toxiproxy toxic: its name, type, stream and attributes."""

    name: str
    type: str
    stream: str
    attributes: Mapping[str, int] = field(default_factory=dict)

    def describe(self) -> str:
        attrs = ", ".join(f"{k}={v}" for k, v in self.attributes.items())
        return f"{self.name}: {self.type} on {self.stream} ({attrs})"


@dataclass(frozen=True)
class Profile:
    """A named network: ``proxied`` False means clients talk to the server directly."""

    name: str
    description: str
    toxics: tuple[Toxic, ...] = ()
    proxied: bool = True

    def describe(self) -> str:
        if not self.proxied:
            return f"{self.name}: {self.description}"
        lines = [f"{self.name}: {self.description}"]
        lines += [f"  {t.describe()}" for t in self.toxics]
        return "\n".join(lines)


def shaped(rate_kb_s: int, latency_ms: int) -> tuple[Toxic, ...]:
    """Per-connection bandwidth both ways, and ``latency_ms`` added to each response."""
    return (
        Toxic("latency_downstream", "latency", "downstream", {"latency": latency_ms, "jitter": 0}),
        Toxic("bandwidth_downstream", "bandwidth", "downstream", {"rate": rate_kb_s}),
        Toxic("bandwidth_upstream", "bandwidth", "upstream", {"rate": rate_kb_s}),
    )


def cut_every(nbytes: int) -> tuple[Toxic, ...]:
    """Close every connection after ``nbytes`` in either direction."""
    return (
        Toxic("cut_downstream", "limit_data", "downstream", {"bytes": nbytes}),
        Toxic("cut_upstream", "limit_data", "upstream", {"bytes": nbytes}),
    )


PROFILES: dict[str, Profile] = {
    p.name: p
    for p in (
        Profile("loopback", "no proxy: the clients talk to the server directly", proxied=False),
        Profile("lan", "~100 MB/s per connection, 1 ms", shaped(100_000, 1)),
        Profile("wan", "~25 MB/s per connection, 20 ms", shaped(25_000, 20)),
        Profile(
            "flaky-wan",
            "wan, and every connection cut after 32 MiB",
            shaped(25_000, 20) + cut_every(32 * MiB),
        ),
    )
}


@contextlib.contextmanager
def proxied_endpoint(
    endpoint: str,
    profile: Profile,
    toxiproxy: Toxiproxy | None,
    extra: Sequence[Toxic] = (),
) -> Iterator[str]:
    """The endpoint to use for ``profile``: the server's own for ``loopback`` (unless
    ``extra`` toxics are asked for), else a new proxy with the toxics, deleted after."""
    toxics = (*profile.toxics, *extra)
    if not profile.proxied and not extra:
        yield endpoint
        return
    if toxiproxy is None:
        raise ValueError(f"profile {profile.name!r} needs Toxiproxy, which is not running")
    url = urlsplit(endpoint)
    if url.scheme != "http":
        raise ValueError(
            f"profile {profile.name!r} proxies plain TCP and needs an http:// endpoint, "
            f"got a {url.scheme}:// one"
        )
    proxy = toxiproxy.create_proxy(
        f"objsdk-bench-{profile.name}-{uuid.uuid4().hex[:8]}", url.netloc
    )
    try:
        for t in toxics:
            proxy.add_toxic(t.type, stream=t.stream, name=t.name, **t.attributes)
        yield proxy.endpoint
    finally:
        proxy.delete()
