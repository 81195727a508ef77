"""Extract a remote tar archive as it streams, through a connection that keeps breaking.

    .venv/bin/python examples/extract_remote_tar.py

Starts a local MinIO and a Toxiproxy in front of it that cuts every connection after
4 MiB, uploads a tar of 16 files, then runs the data engineer's one-liner
``tarfile.open(fileobj=..., mode="r|*").extractall()`` on an ObjectFile: every cut is
resumed from the next undelivered byte, pinned to the object's ETag.
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
import tarfile
import tempfile
from pathlib import Path

from objsdk import Client, LocalMinio
from objsdk.testing.toxiproxy import Toxiproxy


def main() -> None:
    logging.basicConfig(level=logging.ERROR)  # each resume logs a warning
    files = {f"data/{i:02d}.bin": os.urandom(1 << 20) for i in range(16)}
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    with LocalMinio() as minio, minio.client() as client, Toxiproxy() as toxiproxy:
        client.create_bucket("archives")
        client.put_object("archives", "files.tar", archive.getvalue())
        proxy = toxiproxy.create_proxy("minio", f"127.0.0.1:{minio.port}")
        proxy.add_toxic("limit_data", bytes=4 << 20)
        with (
            Client(proxy.endpoint, minio.access_key, minio.secret_key) as flaky,
            tempfile.TemporaryDirectory() as out,
            flaky.open("archives", "files.tar") as f,
            tarfile.open(fileobj=f, mode="r|*") as tar,
        ):
            tar.extractall(out, filter="data")
            same = all(
                hashlib.sha256((Path(out) / n).read_bytes()).digest() == hashlib.sha256(d).digest()
                for n, d in files.items()
            )
            print(f"extracted {len(files)} files, all byte-identical: {same}")
            print(f"resumes: {f.stats.resumes}, requests: {f.stats.requests}")
        assert same


if __name__ == "__main__":
    main()
