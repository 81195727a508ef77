"""The parallelism sweep: objsdk at fixed settings against its defaults.

For each operation, on each profile, objsdk runs with ``parallel=N`` (``download``,
``get_into``, ``upload``) or ``readahead=N`` (sequential ``readinto`` of an
:class:`~objsdk.ObjectFile`) for every N of the sweep (1, 2, 4, 8, 16 by default), and
once with no such argument at all: whatever the library's defaults choose. Reads also
get ``readahead=0``, one stream, the baseline of the read group; for the other
operations the baseline is ``parallel=1``. The fixed points make the scaling curve
(connections vs MiB/s); the defaults are drawn across it.

Uploads use ``multipart_threshold=0`` for the fixed points (parallelism needs parts)
and nothing but the file for the defaults.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

from objsdk import Client
from objsdk.bench.context import Context
from objsdk.bench.output import size_label
from objsdk.bench.profiles import Profile, proxied_endpoint
from objsdk.bench.runner import Case, Group, MiB
from objsdk.bench.target import random_file

NAME = "sweep"
OPERATIONS = ("read", "download", "get_into", "upload")


def _reader(client: Client, bucket: str, key: str, readahead: int | None) -> Callable[[], int]:
    buf = bytearray(MiB)

    def run() -> int:
        n = 0
        f = (
            client.open(bucket, key)
            if readahead is None
            else client.open(bucket, key, readahead=readahead)
        )
        with f:
            while k := f.readinto(buf):
                n += k
        return n

    return run


def groups(ctx: Context, profile: Profile) -> Iterator[Group]:
    for size in ctx.options.sizes:
        yield from _sized(ctx, profile, size)


def _sized(ctx: Context, profile: Profile, size: int) -> Iterator[Group]:
    bucket = ctx.target.bucket
    sweep = ctx.options.sweep
    key = ctx.target.random_object(size, ctx.work)
    dest = ctx.work / "sweep.bin"
    source = random_file(ctx.work / f"sweep-up-{size}.bin", size)
    try:
        with proxied_endpoint(ctx.target.endpoint, profile, ctx.toxiproxy) as endpoint:
            client = ctx.target.client(endpoint)
            title = f"{size_label(size)}, {profile.name}"

            # read
            cases = [Case("objsdk", "readahead=0", _reader(client, bucket, key, 0), size, 1)]
            cases += [
                Case("objsdk", f"readahead={n}", _reader(client, bucket, key, n), size, n)
                for n in sweep
            ]
            cases.append(Case("objsdk", "defaults", _reader(client, bucket, key, None), size))
            yield Group(
                NAME,
                profile.name,
                f"read (readinto), {title}",
                cases,
                "objsdk: readahead=0",
                size=size,
            )

            # download to a file
            def download(parallel: int | None) -> int:
                if parallel is None:
                    client.download(bucket, key, dest)
                else:
                    client.download(bucket, key, dest, parallel=parallel)
                return dest.stat().st_size

            def remove(path: Path = dest) -> None:
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()

            yield Group(
                NAME,
                profile.name,
                f"download(path), {title}",
                _fixed_and_defaults(sweep, download, size),
                _base(sweep),
                size=size,
                settle=remove,
            )

            # get_into a bytearray
            memory = bytearray(size)

            def get_into(parallel: int | None) -> int:
                if parallel is None:
                    return client.get_into(bucket, key, memory)
                return client.get_into(bucket, key, memory, parallel=parallel)

            yield Group(
                NAME,
                profile.name,
                f"get_into(bytearray), {title}",
                _fixed_and_defaults(sweep, get_into, size),
                _base(sweep),
                size=size,
            )

            # upload a file
            written: list[str] = []

            def upload(parallel: int | None) -> int:
                written.append(ctx.unique_key("sweep-upload"))
                if parallel is None:
                    client.upload(bucket, written[-1], source)
                else:
                    client.upload(
                        bucket, written[-1], source, parallel=parallel, multipart_threshold=0
                    )
                return size

            def clean() -> None:
                if written:
                    ctx.target.client().delete_objects(bucket, written)
                    written.clear()

            yield Group(
                NAME,
                profile.name,
                f"upload(path), {title}",
                _fixed_and_defaults(sweep, upload, size),
                _base(sweep),
                size=size,
                settle=clean,
            )
    finally:
        source.unlink()


def _base(sweep: list[int]) -> str:
    return f"objsdk: parallel={sweep[0]}" if sweep else "objsdk: defaults"


def _fixed_and_defaults(sweep: list[int], op: Callable[[int | None], int], size: int) -> list[Case]:
    cases = [Case("objsdk", f"parallel={n}", _bind(op, n), size, n) for n in sweep]
    cases.append(Case("objsdk", "defaults", _bind(op, None), size))
    return cases


def _bind(op: Callable[[int | None], int], n: int | None) -> Callable[[], int]:
    return lambda: op(n)
