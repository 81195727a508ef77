"""A large download killed with SIGKILL, then run again: it resumes where it stopped.

    .venv/bin/python examples/resumable_download.py

Starts a local MinIO with a 128 MiB object, runs ``client.download()`` to a file in a
child process, kills the child (SIGKILL: no cleanup of any kind) once some parts are on
disk, then calls the same download again. The second call fetches only the parts the
first one had not made durable, and the file is byte-identical.
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from objsdk import LocalMinio

MiB = 1 << 20
CHILD = """
import sys
from objsdk import Client
client = Client.from_env()
client.download("big", "object.bin", sys.argv[1], parallel=2, part_size=8 << 20)
"""


def main() -> None:
    data = os.urandom(128 * MiB)
    with LocalMinio() as minio, minio.client() as client, tempfile.TemporaryDirectory() as tmp:
        client.create_bucket("big")
        client.upload("big", "object.bin", data)
        dest = Path(tmp) / "object.bin"
        env = {**os.environ, **minio.env()}
        child = subprocess.Popen([sys.executable, "-c", CHILD, str(dest)], env=env)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and child.poll() is None:
            # The hidden temp file and its record beside dest: .object.bin.objsdk-<tag>[.json]
            if len(list(dest.parent.glob(f".{dest.name}.objsdk-*"))) >= 2:
                time.sleep(0.3)  # let a few parts become durable
                break
            time.sleep(0.01)
        if child.poll() is None:
            child.send_signal(signal.SIGKILL)
            child.wait()
            print(
                f"killed the first download (exit {child.returncode}); {dest.name} absent: "
                f"{not dest.exists()}"
            )
        result = client.download("big", "object.bin", dest, parallel=2, part_size=8 << 20)
        print(
            f"second call: {result.parts_reused} parts reused from disk, "
            f"{result.parts_fetched} fetched ({result.bytes_fetched >> 20} MiB)"
        )
        same = hashlib.sha256(dest.read_bytes()).digest() == hashlib.sha256(data).digest()
        print(f"byte-identical: {same}")
        assert same


if __name__ == "__main__":
    main()
