"""The CPU a client shares with a server on the same host.

A server on this host (MinIO on a laptop or a CI box, or a proxy in front of one)
spends its CPU on every stream the client opens, from the same cores. A level's first
step weighs the whole machine there (docs/design.md, "Adaptive parallelism"):
:func:`server_on_this_host` says whether that is the case, :func:`busy_seconds` how
much CPU the machine has spent so far, and :func:`host_cores` on how many CPUs.
"""

from __future__ import annotations

import contextlib
import functools
import ipaddress
import os
import socket
from urllib.parse import urlsplit

__all__ = ["busy_seconds", "host_cores", "measurable", "server_on_this_host"]

_STAT = "/proc/stat"
# proc(5): the first line of /proc/stat counts, over every CPU, user, nice, system,
# idle, iowait, irq, softirq and steal time (then guest times, already in user/nice).
_IDLE, _IOWAIT, _COUNTED = 3, 4, 8


@functools.lru_cache(maxsize=64)
def server_on_this_host(url: str) -> bool:
    """Whether the endpoint ``url`` resolves to an address of this machine: a loopback
    address, or one this machine would send from to reach it (a UDP ``connect``
    chooses the route and sends nothing). False when that cannot be told (a name that
    does not resolve here, a server behind a NAT or in a VM)."""
    host = urlsplit(url).hostname
    if not host:
        return False
    try:
        found = socket.getaddrinfo(host, None, type=socket.SOCK_DGRAM)
    except (OSError, UnicodeError):
        return False
    for family, _, _, _, sockaddr in found:
        address = str(sockaddr[0])
        with contextlib.suppress(ValueError):
            if ipaddress.ip_address(address.split("%")[0]).is_loopback:
                return True
        with contextlib.suppress(OSError), socket.socket(family, socket.SOCK_DGRAM) as probe:
            probe.connect((address, 9, *sockaddr[2:]))
            if probe.getsockname()[0] == address:
                return True
    return False


def busy_seconds() -> float | None:
    """CPU seconds the whole machine has spent busy (every process, every CPU: all but
    idle and I/O wait) since it started; None where the system does not say (no
    ``/proc/stat``)."""
    try:
        with open(_STAT, "rb") as stat:
            fields = stat.readline().split()[1 : 1 + _COUNTED]
        ticks = [int(f) for f in fields]
    except (OSError, ValueError):
        return None
    if len(ticks) < _COUNTED:
        return None
    return (sum(ticks) - ticks[_IDLE] - ticks[_IOWAIT]) / _ticks_per_second()


@functools.cache
def measurable() -> bool:
    """Whether :func:`busy_seconds` tells anything here (asked once per process: a
    reader is opened per object, and reading ``/proc/stat`` costs tens of µs)."""
    return busy_seconds() is not None


@functools.cache
def host_cores() -> int:
    """The CPUs :func:`busy_seconds` counts: every CPU of the machine (asked once:
    ``os.cpu_count`` costs microseconds)."""
    return max(1, os.cpu_count() or 1)


@functools.cache
def _ticks_per_second() -> int:
    return int(os.sysconf("SC_CLK_TCK")) if hasattr(os, "sysconf") else 100
