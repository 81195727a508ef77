"""objsdk end to end on a MinIO it starts itself.

Builds MinIO once (cached), starts it on a free loopback port with a throw-away data
dir, then: creates a bucket, uploads bytes and a streamed file, lists, downloads,
verifies every byte, and cleans up. Run with ``make demo``.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import time

from objsdk import LocalMinio, NoSuchKey


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def main() -> None:
    t0 = time.monotonic()
    with LocalMinio() as minio, minio.client() as client:
        print(f"started MinIO at {minio.endpoint} in {time.monotonic() - t0:.1f} s")
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
