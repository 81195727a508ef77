"""objsdk end to end on a MinIO it starts itself.

Builds MinIO and Toxiproxy once (cached), starts them on free loopback ports with
throw-away data, then: creates a bucket, uploads bytes and a streamed file, lists,
downloads and verifies; then streams a tar archive through ``ObjectFile`` into
``tarfile`` while the network connection is cut every 8 MiB, and checks that every
extracted file is byte-identical to its source. Run with ``make demo``.
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
import re
import tarfile
import tempfile
import time
from pathlib import Path

from objsdk import Client, LocalMinio, NoSuchKey
from objsdk.testing import gobuild
from objsdk.testing.toxiproxy import Toxiproxy


def announce_builds() -> None:
    """Say so before a server is built from source (once, into objsdk's cache), so the
    wait that follows is not a mystery."""
    builds = (
        ("MinIO", "OBJSDK_MINIO_BINARY", "minio", gobuild.MINIO_VERSION, "minio"),
        ("Toxiproxy", "OBJSDK_TOXIPROXY_BINARY", "toxiproxy", gobuild.TOXIPROXY_VERSION, "server"),
    )
    for label, variable, name, version, exe in builds:
        if os.environ.get(variable):
            continue
        folder = gobuild.cache_dir() / "bin" / f"{name}-{re.sub(r'[^A-Za-z0-9._-]', '_', version)}"
        if not (folder / exe).is_file():
            print(
                f"building {label} once into {folder.parent} "
                f"({variable}=<a {label} binary of yours> skips this)...",
                flush=True,
            )


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def build_tar(members: int = 48) -> tuple[bytes, dict[str, str]]:
    """A tar of ``members`` random files (about 1 MiB each) and their SHA-256s."""
    buf, digests = io.BytesIO(), {}
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for i in range(members):
            data = os.urandom((1 << 20) + 4099 * i)
            info = tarfile.TarInfo(f"shard/{i:03d}.bin")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
            digests[info.name] = sha256(data)
    return buf.getvalue(), digests


def tar_through_faults(minio: LocalMinio, client: Client) -> None:
    """Extract a remote tar while the connection is cut every 8 MiB; verify every file."""
    blob, digests = build_tar()
    client.put_object("demo", "shards.tar", blob)
    print(f"put shards.tar ({len(blob) >> 20} MiB, {len(digests)} members)")
    with Toxiproxy() as toxiproxy:
        proxy = toxiproxy.create_proxy("minio", f"127.0.0.1:{minio.port}")
        proxy.add_toxic("limit_data", bytes=8 << 20)  # every connection dies after 8 MiB
        print(f"fault injected: connections through {proxy.endpoint} are cut every 8 MiB")
        with (
            Client(proxy.endpoint, minio.access_key, minio.secret_key) as flaky,
            tempfile.TemporaryDirectory() as out,
            flaky.open("demo", "shards.tar") as f,
            tarfile.open(fileobj=f, mode="r|*") as tar,
        ):
            tar.extractall(out, filter="data")
            stats = f.stats
            bad = [
                name for name, d in digests.items() if sha256((Path(out) / name).read_bytes()) != d
            ]
    assert not bad, f"corrupted members: {bad}"
    print(
        f"extracted {len(digests)} members through the cuts: all byte-identical "
        f"(sha256); {stats.resumes} resumes, {stats.requests} requests, "
        f"{stats.bytes_discarded} bytes discarded, {stats.bytes_delivered} delivered"
    )


def main() -> None:
    # Each resume logs a warning; the demo summarises them instead.
    logging.basicConfig(level=logging.ERROR)
    announce_builds()
    t0 = time.monotonic()
    with LocalMinio() as minio, minio.client() as client:
        print(f"MinIO ready at {minio.endpoint} in {time.monotonic() - t0:.1f} s")
        client.create_bucket("demo")
        print("created bucket 'demo'")

        small = os.urandom(1024 * 1024)
        client.put_object("demo", "data/small.bin", small, content_type="application/octet-stream")
        print(f"put data/small.bin ({len(small)} bytes from memory, sent without a copy)")

        with tempfile.TemporaryFile() as f:
            chunk = os.urandom(1024 * 1024)
            digest = hashlib.sha256()
            for _ in range(32):
                f.write(chunk)
                digest.update(chunk)
            f.seek(0)
            info = client.put_object("demo", "data/streamed file.bin", f)
            print(f"put 'data/streamed file.bin' ({info.size} bytes streamed from a file)")

        awkward = "räksmörgås/100% #1 + ? & = ~.txt"
        client.put_object("demo", awkward, b"hello", metadata={"origin": "demo"})
        print(f"put {awkward!r}")

        listing = list(client.list_objects("demo", prefix="data/"))
        print(f"listed {len(listing)} objects under data/: {[e.key for e in listing]}")

        assert client.get_object("demo", "data/small.bin") == small
        streamed = client.get_object("demo", "data/streamed file.bin")
        assert sha256(streamed) == digest.hexdigest()
        assert client.get_object("demo", awkward) == b"hello"
        assert client.get_object("demo", "data/small.bin", offset=10, length=5) == small[10:15]
        print("downloaded and verified every object (sha256 match, ranged read match)")

        head = client.head_object("demo", awkward)
        print(f"head {awkward!r}: size={head.size} etag={head.etag} metadata={dict(head.metadata)}")

        tar_through_faults(minio, client)

        failures = client.delete_objects("demo", [e.key for e in client.list_objects("demo")])
        assert not failures
        try:
            client.get_object("demo", "data/small.bin")
        except NoSuchKey as e:
            print(f"after delete: {e}")
        client.delete_bucket("demo")
        print("deleted everything")
    print(f"MinIO stopped, data dir removed; demo OK in {time.monotonic() - t0:.1f} s")


if __name__ == "__main__":
    main()
