"""Streaming tar extraction, the shape of the AIStore ObjectFile table.

``tarfile.open(fileobj=..., mode="r|*").extractall()`` of a tar of ``total`` bytes made
of members of 1, 10 and 100 MiB (256 MiB and 1 GiB totals by default), read from:

* ``requests``: the bare ``response.raw`` of a presigned GET (the baseline),
* ``objsdk``: ``client.open(bucket, key)`` at its defaults,
* ``local``: the same tar from a local file in /dev/shm, the ceiling.

Members are extracted into a fresh directory in the work directory (in /dev/shm when
there is one), removed after each run.
"""

from __future__ import annotations

import io
import os
import shutil
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from objsdk.bench.context import Context
from objsdk.bench.output import size_label
from objsdk.bench.profiles import Profile, proxied_endpoint
from objsdk.bench.runner import Case, Group

NAME = "tar"
BASELINE = "requests: response.raw"


def build_tar(path: Path, total: int, member: int) -> int:
    """Write a tar of ``total // member`` random members of ``member`` bytes."""
    count = max(1, total // member)
    block = os.urandom(member)
    with tarfile.open(path, "w") as tar:
        for i in range(count):
            info = tarfile.TarInfo(f"shard/{i:05d}.bin")
            info.size = member
            data = i.to_bytes(8, "little") + block[8:]
            tar.addfile(info, io.BytesIO(data))
    return count * member


def extract(fileobj: Any, work: Path) -> int:
    """Extract a streamed tar into a fresh directory; return the member bytes written."""
    out = Path(tempfile.mkdtemp(prefix="x-", dir=work))
    try:
        with tarfile.open(fileobj=fileobj, mode="r|*") as tar:
            if hasattr(tarfile, "data_filter"):  # Python 3.10.12+, 3.11.4+
                tar.extractall(out, filter="data")
            else:
                tar.extractall(out)
        return sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    finally:
        shutil.rmtree(out)


def groups(ctx: Context, profile: Profile) -> Iterator[Group]:
    for total in ctx.options.tar_totals:
        for member in ctx.options.tar_members:
            if member <= total:
                yield from _sized(ctx, profile, total, member)


def _sized(ctx: Context, profile: Profile, total: int, member: int) -> Iterator[Group]:
    import requests

    bucket = ctx.target.bucket
    local = ctx.work / f"bench-{total}-{member}.tar"
    nbytes = build_tar(local, total, member)
    key = ctx.unique_key("tar")
    ctx.target.client().upload(bucket, key, local)
    try:
        with proxied_endpoint(ctx.target.endpoint, profile, ctx.toxiproxy) as endpoint:
            client = ctx.target.client(endpoint)
            session = requests.Session()
            session.trust_env = False

            def from_raw() -> int:
                url = client.presign("GET", bucket, key)
                with session.get(url, stream=True, timeout=300) as r:
                    r.raise_for_status()
                    return extract(r.raw, ctx.work)

            def from_objectfile() -> int:
                with client.open(bucket, key) as f:
                    return extract(f, ctx.work)

            def from_local(path: Path = local) -> int:
                with path.open("rb") as f:
                    return extract(f, ctx.work)

            count = nbytes // member
            yield Group(
                NAME,
                profile.name,
                f"tar r|* extraction, {size_label(total)} total, {count} x "
                f"{size_label(member)} members, {profile.name}",
                [
                    Case("requests", "response.raw", from_raw, nbytes),
                    Case("objsdk", "ObjectFile", from_objectfile, nbytes),
                    Case("local", "file in /dev/shm", from_local, nbytes),
                ],
                BASELINE,
                size=total,
            )
    finally:
        local.unlink()
        ctx.target.client().delete_object(bucket, key)
