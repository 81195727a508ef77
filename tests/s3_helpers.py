"""Helpers the tests share that are not the CLI's: a boto3 client for the session's
service (the other client whose objects objsdk must read), bucket policies for unsigned
callers with narrow rights, and a named pipe's reader."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

MiB = 1 << 20


def boto3_client(server: Any, **config: Any) -> Any:
    """A boto3 S3 client for ``server`` (anything with ``endpoint``, ``access_key`` and
    ``secret_key``: ``s3_server``, ``local_minio``), path-style, with ``config`` as
    further ``botocore.config.Config`` settings."""
    import boto3  # type: ignore[import-untyped,unused-ignore]
    from botocore.config import Config  # type: ignore[import-untyped,unused-ignore]

    return boto3.client(
        "s3",
        endpoint_url=server.endpoint,
        aws_access_key_id=server.access_key,
        aws_secret_access_key=server.secret_key,
        region_name="us-east-1",
        config=Config(s3={"addressing_style": "path"}, **config),
    )


def drain(fifo: Path) -> tuple[threading.Thread, bytearray]:
    """A thread reading the named pipe ``fifo`` to its end, into the returned
    bytearray (join the thread before reading it)."""
    got = bytearray()

    def read() -> None:
        with open(fifo, "rb") as f:
            while chunk := f.read(MiB):
                got.extend(chunk)

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread, got


def grant_unsigned(
    server: Any, bucket: str, object_actions: list[str], *, under: str = "", listing: bool = False
) -> None:
    """A bucket policy letting unsigned requests do ``object_actions`` (``s3:GetObject``...)
    on the keys ``under`` a prefix, and, with ``listing``, list that prefix alone
    (s3:ListBucket with an s3:prefix condition, as per-user home prefixes are granted)."""
    import json

    allow = {"Effect": "Allow", "Principal": {"AWS": ["*"]}}
    statements = [
        {**allow, "Action": object_actions, "Resource": [f"arn:aws:s3:::{bucket}/{under}*"]}
    ]
    if listing:
        statements.append(
            {
                **allow,
                "Action": ["s3:ListBucket"],
                "Resource": [f"arn:aws:s3:::{bucket}"],
                "Condition": {"StringLike": {"s3:prefix": [f"{under}*"]}},
            }
        )
    policy = {"Version": "2012-10-17", "Statement": statements}
    boto3_client(server).put_bucket_policy(Bucket=bucket, Policy=json.dumps(policy))
