"""The server under test and the suite's own bucket.

By default a local MinIO is started for the run. Given an endpoint (flags or
``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_REGION``),
the suite creates one bucket with a unique name there, and at the end deletes the
objects it wrote in it and the bucket: nothing else on the server is touched.
"""

from __future__ import annotations

import contextlib
import os
import sys
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from objsdk import Client, ObjectSummary
from objsdk._core.client_config import ClientConfig
from objsdk.bench.machine import minio_version_of_pid
from objsdk.testing import LocalMinio

__all__ = ["Target", "open_target", "remove_bucket"]


@dataclass
class Target:
    """Endpoint, credentials and bucket; ``client(endpoint)`` for a profile's proxy."""

    endpoint: str
    access_key: str
    secret_key: str = field(repr=False)
    region: str
    bucket: str
    description: str
    minio_version: str
    _objects: dict[tuple[str, int], str] = field(default_factory=dict, repr=False)

    def client(self, endpoint: str | None = None) -> Client:
        return Client(
            endpoint or self.endpoint, self.access_key, self.secret_key, region=self.region
        )

    def random_object(self, size: int, work: Path) -> str:
        """The key of an object of ``size`` random bytes (uploaded once, directly)."""
        key = self._objects.get(("random", size))
        if key is None:
            key = f"random-{size}"
            path = random_file(work / f"{key}.bin", size)
            try:
                self.client().upload(self.bucket, key, path)
            finally:
                path.unlink()
            self._objects[("random", size)] = key
        return key


def random_file(path: Path, size: int) -> Path:
    """``size`` incompressible bytes at ``path`` (no two 8 MiB blocks alike)."""
    block = bytearray(os.urandom(8 << 20))
    with path.open("wb") as f:
        left = size
        counter = 0
        while left:
            counter += 1
            block[:8] = counter.to_bytes(8, "little")
            n = min(left, len(block))
            f.write(memoryview(block)[:n])
            left -= n
    return path


def remove_bucket(client: Client, bucket: str) -> None:
    """Delete every object in ``bucket``, then the bucket."""
    # Without a delimiter the listing has objects only.
    client.delete_objects(
        bucket, [o.key for o in client.list_objects(bucket) if isinstance(o, ObjectSummary)]
    )
    client.delete_bucket(bucket)


@contextlib.contextmanager
def open_target(
    endpoint: str | None = None,
    access_key: str | None = None,
    secret_key: str | None = None,
    region: str | None = None,
    environ: Mapping[str, str] | None = None,
    *,
    config: ClientConfig | None = None,
) -> Iterator[Target]:
    """A target for the run: the given endpoint (else ``config``'s, else
    ``AWS_ENDPOINT_URL``), or a local MinIO started for the duration; with a fresh bucket,
    removed at the end. What the arguments leave out comes from ``config`` if given, else
    from ``environ``."""
    env = os.environ if environ is None else environ
    if config is not None:
        endpoint = endpoint or config.endpoint
        access_key = access_key or config.access_key
        secret_key = secret_key or config.secret_key
        region = region or config.region
    endpoint = endpoint or env.get("AWS_ENDPOINT_URL")
    region = region or env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or "us-east-1"
    bucket = f"objsdk-bench-{uuid.uuid4().hex[:12]}"
    with contextlib.ExitStack() as stack:
        if endpoint:
            access_key = access_key or env.get("AWS_ACCESS_KEY_ID")
            secret_key = secret_key or env.get("AWS_SECRET_ACCESS_KEY")
            if not access_key or not secret_key:
                raise ValueError(
                    f"endpoint {endpoint} needs credentials: set AWS_ACCESS_KEY_ID and "
                    "AWS_SECRET_ACCESS_KEY (or --access-key/--secret-key)"
                )
            target = Target(
                endpoint,
                access_key,
                secret_key,
                region,
                bucket,
                f"your endpoint {endpoint}",
                "unknown (not started by the suite)",
            )
        else:
            minio = stack.enter_context(LocalMinio())
            target = Target(
                minio.endpoint,
                minio.access_key,
                minio.secret_key,
                region,
                bucket,
                "local MinIO started by the suite",
                minio_version_of_pid(minio.pid),
            )
        client = target.client()
        client.create_bucket(bucket)
        try:
            yield target
        finally:
            try:
                remove_bucket(client, bucket)
            except Exception as exc:
                print(f"could not remove bucket {bucket}: {exc}", file=sys.stderr)
