"""Whole-object downloads: to a file and into memory.

objsdk ``download(path)`` and ``get_into(bytearray)`` at their defaults and with
``parallel=1`` (the baseline: one stream to a file), against ``boto3.download_file``,
minio-py ``fget_object``, s3fs ``get_file``, obstore's stream written to a file and
``curl -o`` at theirs. Files are written to the work directory (in /dev/shm when there
is one) and removed between runs.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from pathlib import Path

from objsdk.bench.context import Context
from objsdk.bench.output import size_label
from objsdk.bench.profiles import Profile, proxied_endpoint
from objsdk.bench.runner import Case, Group, baseline_or_first

NAME = "download"
BASELINE = "objsdk: download(path), parallel=1"


def groups(ctx: Context, profile: Profile) -> Iterator[Group]:
    for size in ctx.options.sizes:
        yield from _sized(ctx, profile, size)


def _sized(ctx: Context, profile: Profile, size: int) -> Iterator[Group]:
    bucket = ctx.target.bucket
    key = ctx.target.random_object(size, ctx.work)
    dest = ctx.work / "download.bin"
    memory = bytearray(size)
    with proxied_endpoint(ctx.target.endpoint, profile, ctx.toxiproxy) as endpoint:
        client = ctx.target.client(endpoint)

        def to_file(parallel: int | None) -> int:
            if parallel is None:
                client.download(bucket, key, dest)
            else:
                client.download(bucket, key, dest, parallel=parallel)
            return dest.stat().st_size

        def to_memory() -> int:
            return client.get_into(bucket, key, memory)

        cases = [
            Case("objsdk", "download(path), parallel=1", lambda: to_file(1), size),
            Case("objsdk", "download(path)", lambda: to_file(None), size),
            Case("objsdk", "get_into(bytearray)", to_memory, size),
        ]
        for peer in ctx.peers(endpoint):
            if peer.download is not None:
                run = functools.partial(peer.download, key, dest)
                cases.append(Case(peer.name, "download to file", run, size))

        def settle(path: Path = dest) -> None:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()

        yield Group(
            NAME,
            profile.name,
            f"Download of {size_label(size)}, {profile.name}",
            cases,
            baseline_or_first(cases, BASELINE),
            size=size,
            settle=settle,
        )
