"""Peak memory of the adaptive defaults against the bytes they keep in flight.

Each operation runs with its defaults (no ``readahead=`` / ``parallel=``) in a fresh
subprocess against a network profile (``wan`` by default: Toxiproxy in front of the local
MinIO, so the level climbs to 16 parts). The subprocess reports its resident set after
imports and set-up (``VmRSS``) and its peak (``VmHWM``, this address space's own peak;
``ru_maxrss`` would carry the parent's across fork and exec). The growth is compared with
the bytes the operation keeps in flight at the level it chose:

* read: ``readinto`` a reused 1 MiB buffer; read-ahead part buffers, at most
  ``level + 1`` of ``part_size``;
* download to a path: a 256 KiB receive buffer per part in flight;
* get_into a bytearray: the bytes land in the caller's buffer, allocated and touched
  before the base is taken, so nothing else is in flight;
* upload of a file: over plain http its parts go from the file by sendfile, so only
  each sending thread's 1 MiB buffer for reading a part's CRC32C (16 at most).

The target is growth <= bytes in flight + 64 MiB. Run:
``.venv/bin/python perf/bench_rss.py [--profile wan] [--size-mib 256] [--runs 3]``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

from objsdk import Client
from objsdk.bench.profiles import PROFILES, proxied_endpoint
from objsdk.testing.local_minio import LocalMinio
from objsdk.testing.toxiproxy import Toxiproxy

MiB = 1 << 20
BUCKET = "objsdk-rss"

SCRIPT = """
import json, os, sys
from objsdk import Client
from objsdk._core.sizes import DEFAULT_READAHEAD_PART_SIZE
from objsdk._transfer.download_engine import FILE_STEP

def kib(field):
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1])

op, bucket, key, path, size = sys.argv[1:6]
size = int(size)
client = Client.from_env()
client.head_object(bucket, key)
memory = None
if op == "get_into":
    memory = bytearray(size)
    for i in range(0, size, 4096):
        memory[i] = 1  # touched page by page: part of the base, not of the growth
buf = bytearray(1 << 20)
base = kib("VmRSS")
if op == "read":
    with client.open(bucket, key) as f:
        while f.readinto(buf):
            pass
        level = f.stats.readahead
    flight = (level + 1) * DEFAULT_READAHEAD_PART_SIZE if level else 0
elif op == "download":
    level = client.download(bucket, key, path).parallel
    flight = level * FILE_STEP
elif op == "get_into":
    client.get_into(bucket, key, memory)
    level, flight = None, 0
else:
    client.upload(bucket, key + "-up", path)
    level = None
    flight = 16 * (1 << 20)  # one CRC32C read buffer per sending thread
print(json.dumps({"base_kib": base, "peak_kib": kib("VmHWM"), "level": level,
                  "flight": flight}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default="wan", choices=sorted(PROFILES))
    ap.add_argument("--size-mib", type=int, default=256)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    size = args.size_mib * MiB
    profile = PROFILES[args.profile]
    with contextlib.ExitStack() as stack:
        minio = stack.enter_context(LocalMinio())
        proxy = stack.enter_context(Toxiproxy()) if profile.proxied else None
        work = Path(tempfile.mkdtemp(dir="/dev/shm" if os.path.isdir("/dev/shm") else None))
        stack.callback(shutil.rmtree, work, True)
        source = work / "source.bin"
        source.write_bytes(os.urandom(size))
        with minio.client() as c:
            c.create_bucket(BUCKET)
            c.upload(BUCKET, "obj", source)
        endpoint = stack.enter_context(proxied_endpoint(minio.endpoint, profile, proxy))
        env = {**os.environ, **minio.env(), "AWS_ENDPOINT_URL": endpoint}
        print(f"peak RSS growth, {args.size_mib} MiB on {profile.name}, {args.runs} runs each")
        print("| operation | level | bytes in flight, MiB | growth, MiB (median) | max | bound |")
        print("|---|---:|---:|---:|---:|---|")
        for op in ("read", "download", "get_into", "upload"):
            results = []
            for _ in range(args.runs):
                path = work / ("dest.bin" if op == "download" else "source.bin")
                out = subprocess.run(
                    [
                        sys.executable,
                        "-c",
                        textwrap.dedent(SCRIPT),
                        op,
                        BUCKET,
                        "obj",
                        str(path),
                        str(size),
                    ],
                    env=env,
                    capture_output=True,
                    text=True,
                    check=True,
                )
                results.append(json.loads(out.stdout))
                if op == "download":
                    path.unlink()
            growth = [(r["peak_kib"] - r["base_kib"]) / 1024 for r in results]
            flight = max(r["flight"] for r in results) / MiB
            worst = max(growth)
            ok = "met" if worst <= flight + 64 else "MISSED"
            levels = sorted({str(r["level"]) for r in results})
            print(
                f"| {op} | {'/'.join(levels)} | {flight:.0f} | {statistics.median(growth):.0f} "
                f"| {worst:.0f} | {ok} (<= {flight + 64:.0f}) |"
            )
        with Client(minio.endpoint, minio.access_key, minio.secret_key) as c:
            c.delete_objects(BUCKET, ["obj", "obj-up"])
            c.delete_bucket(BUCKET)


if __name__ == "__main__":
    main()
