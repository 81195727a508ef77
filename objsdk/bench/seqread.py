"""Sequential read of one object, start to end, by every client.

objsdk through :class:`~objsdk.ObjectFile` at its defaults (``read(1 MiB)``,
``readinto`` of a reused 1 MiB buffer, and ``read`` with CRC32C verification off), the
baseline ``requests`` raw stream, and every installed peer. The object was uploaded by
objsdk, so it carries a CRC32C that ObjectFile verifies by default: the CPU column shows
what verification costs next to ``requests``, which verifies nothing.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator

from objsdk.bench.context import Context
from objsdk.bench.output import size_label
from objsdk.bench.profiles import Profile, proxied_endpoint
from objsdk.bench.runner import Case, Group, MiB, baseline_or_first

NAME = "read"
BASELINE = "requests: raw.read(1 MiB)"


def groups(ctx: Context, profile: Profile) -> Iterator[Group]:
    for size in ctx.options.sizes:
        yield from _sized(ctx, profile, size)


def _sized(ctx: Context, profile: Profile, size: int) -> Iterator[Group]:
    bucket = ctx.target.bucket
    key = ctx.target.random_object(size, ctx.work)
    with proxied_endpoint(ctx.target.endpoint, profile, ctx.toxiproxy) as endpoint:
        client = ctx.target.client(endpoint)
        buf = bytearray(MiB)

        def read(verify: bool = True) -> int:
            n = 0
            with client.open(bucket, key, verify=verify) as f:
                while chunk := f.read(MiB):
                    n += len(chunk)
            return n

        def readinto() -> int:
            n = 0
            with client.open(bucket, key) as f:
                while k := f.readinto(buf):
                    n += k
            return n

        cases = [
            Case("objsdk", "read(1 MiB)", read, size),
            Case("objsdk", "readinto(1 MiB)", readinto, size),
            Case("objsdk", "read(1 MiB), verify=False", lambda: read(False), size),
        ]
        for peer in ctx.peers(endpoint):
            if peer.read is not None:
                variant = "raw.read(1 MiB)" if peer.name == "requests" else "read"
                cases.append(Case(peer.name, variant, functools.partial(peer.read, key), size))
        yield Group(
            NAME,
            profile.name,
            f"Sequential read of {size_label(size)}, {profile.name}",
            cases,
            baseline_or_first(cases, BASELINE),
            size=size,
        )
