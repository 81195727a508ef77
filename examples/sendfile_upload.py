"""A zero-copy upload: the file goes from the page cache to the socket by sendfile(2).

    .venv/bin/python examples/sendfile_upload.py

Uploads the same 256 MiB file three ways against a local MinIO and prints wall time and
this process's CPU time for each: objsdk's single PUT (signed headers, then
``socket.sendfile``), the same with the trick switched off (the body streamed through
requests, 16 KiB at a time through Python), and ``requests.put`` of an open file.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import requests

from objsdk import LocalMinio
from objsdk._transport import private_api

MiB = 1 << 20


def timed(label: str, fn: object) -> None:
    cpu, wall = time.process_time(), time.perf_counter()
    fn()  # type: ignore[operator]
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(f"{label:<40} {wall:6.2f} s wall  {cpu:6.2f} s CPU")


def main() -> None:
    with LocalMinio() as minio, minio.client() as client, tempfile.TemporaryDirectory() as tmp:
        client.create_bucket("uploads")
        path = Path(tmp) / "file.bin"
        path.write_bytes(os.urandom(256 * MiB))
        size = path.stat().st_size
        one_put = size + 1  # below the multipart threshold: one PUT

        def put(key: str) -> None:
            client.upload("uploads", key, path, multipart_threshold=one_put)

        timed("objsdk upload (sendfile)", lambda: put("a"))
        private_api.CHECKOUT = False  # what happens without the trick: streamed by requests
        try:
            timed(
                "objsdk upload (streamed, no sendfile)", lambda: client.upload("uploads", "b", path)
            )
        finally:
            private_api.CHECKOUT = True
        url = client.presign("PUT", "uploads", "c")

        def plain_put() -> None:
            with path.open("rb") as f:
                requests.put(url, data=f, headers={"Content-Length": str(size)}, timeout=60)

        timed("requests.put of the open file", plain_put)


if __name__ == "__main__":
    main()
