"""Uploads of a file: one PUT, multipart, and the peers' uploads at their defaults.

objsdk ``upload(path)`` as one PUT (the baseline; ``multipart_threshold`` above the
size), as a multipart upload (``multipart_threshold=0``) and at its defaults (one PUT
below 64 MiB, multipart above), against ``boto3.upload_file``, minio-py
``fput_object``, s3fs ``put_file``, smart_open writes, ``obstore.put``, ``requests``
PUT and ``curl -T`` on presigned URLs. Each run writes a new key; the source file is
in the work directory (in /dev/shm when there is one). The CPU column is the point:
it is what an upload costs the client per GiB.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator

from objsdk.bench.context import Context
from objsdk.bench.output import size_label
from objsdk.bench.profiles import Profile, proxied_endpoint
from objsdk.bench.runner import Case, Group, baseline_or_first
from objsdk.bench.target import random_file

NAME = "upload"
BASELINE = "objsdk: upload(path), one PUT"


def groups(ctx: Context, profile: Profile) -> Iterator[Group]:
    for size in ctx.options.sizes:
        yield from _sized(ctx, profile, size)


def _sized(ctx: Context, profile: Profile, size: int) -> Iterator[Group]:
    bucket = ctx.target.bucket
    source = random_file(ctx.work / f"upload-{size}.bin", size)
    try:
        with proxied_endpoint(ctx.target.endpoint, profile, ctx.toxiproxy) as endpoint:
            client = ctx.target.client(endpoint)
            keys: list[str] = []

            def key() -> str:
                keys.append(ctx.unique_key("upload"))
                return keys[-1]

            def objsdk_upload(threshold: int | None) -> int:
                if threshold is None:
                    info = client.upload(bucket, key(), source)
                else:
                    info = client.upload(bucket, key(), source, multipart_threshold=threshold)
                return info.size if info.size is not None else size

            def peer_upload(peer_upload: functools.partial[int]) -> int:
                return peer_upload(key())

            def settle() -> None:
                # The previous run's object is not needed; keep the bucket small.
                if keys:
                    ctx.target.client().delete_objects(bucket, keys)
                    keys.clear()

            cases = [
                Case("objsdk", "upload(path), one PUT", lambda: objsdk_upload(size + 1), size),
                Case("objsdk", "upload(path), multipart", lambda: objsdk_upload(0), size),
                Case("objsdk", "upload(path)", lambda: objsdk_upload(None), size),
            ]
            for peer in ctx.peers(endpoint):
                if peer.upload is not None:
                    run = functools.partial(peer_upload, functools.partial(peer.upload, source))
                    cases.append(Case(peer.name, "upload file", run, size))
            yield Group(
                NAME,
                profile.name,
                f"Upload of {size_label(size)}, {profile.name}",
                cases,
                baseline_or_first(cases, BASELINE),
                size=size,
                settle=settle,
            )
    finally:
        source.unlink()
