"""The least a Python process does to download many objects: a floor for any Python CLI.

The standard library only, the presigned URLs handed over ready-made (no signing), 16
threads on keep-alive connections, each body copied to a file of its own: no checksum,
no fsync, no retry, no error handling beyond a status check. perf/bench_cli.py runs it
beside ``objsdk cp`` and s5cmd on its many-file downloads, so what Python itself costs
(starting the interpreter, its threads, its HTTP parsing) is measured in the same run.

    python perf/python_floor.py URLS_FILE DEST_DIR
"""

from __future__ import annotations

import http.client
import os
import shutil
import sys
import threading
from urllib.parse import urlsplit

THREADS = 16


def main() -> None:
    with open(sys.argv[1]) as f:
        urls = f.read().split()
    dest = sys.argv[2]
    os.makedirs(dest, exist_ok=True)
    lock = threading.Lock()
    todo = iter(urls)
    failed: list[str] = []

    def work() -> None:
        conn: http.client.HTTPConnection | None = None
        while True:
            with lock:
                url = next(todo, None)
            if url is None:
                return
            parts = urlsplit(url)
            if conn is None:
                conn = http.client.HTTPConnection(parts.hostname or "", parts.port)
            conn.request("GET", f"{parts.path}?{parts.query}")
            resp = conn.getresponse()
            name = os.path.join(dest, parts.path.rsplit("/", 1)[1])
            with open(name, "wb") as out:
                shutil.copyfileobj(resp, out, 1 << 20)
            if resp.status != 200:
                failed.append(f"{resp.status} {parts.path}")

    threads = [threading.Thread(target=work) for _ in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failed:
        sys.exit(f"{len(failed)} failed, first: {failed[0]}")


if __name__ == "__main__":
    main()
