"""The same workloads through two installs of objsdk, interleaved in one run.

Measures whether a change of the library made it slower: every case runs in a fresh
child process of either Python (this venv's, and ``--baseline-python``'s, e.g. a venv
with the previous commit installed), against one local MinIO, alternating which goes
first. Each child reports its wall time and its own CPU time for the timed part only.

    .venv/bin/python perf/bench_compare.py --baseline-python ../base/.venv/bin/python --runs 5

Cases use only the public API, so both installs run the very same code path names:
``read(1 MiB)`` and ``readinto(1 MiB)`` on one stream (``readahead=0``), ``read`` with
each install's defaults, ``tar r|*`` extraction, ``download`` to a file (4 parts in
flight), ``get_into`` a bytearray, ``upload`` (single PUT by sendfile and 4-way
multipart) and ``open_write``; and the client CPU per small request: 400 sequential
4 KiB ``get_object``, ``head_object`` and ``put_object`` calls on a warm client. Asked
for the small requests only (``--cases "GET 4 KiB" HEAD "PUT 4 KiB"``), it stores only
their objects and prints only their table.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tarfile
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import MiB, server, side_by_side, side_by_side_table

BUCKET = "bench-compare"

CHILD = r"""
import json, os, sys, tarfile, tempfile, time
from objsdk import Client

case, bucket, size, scratch = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
SMALL = ("GET 4 KiB", "HEAD", "PUT 4 KiB")
SMALL_COUNT = 400
env = os.environ
client = Client(env["AWS_ENDPOINT_URL"], env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"])
MiB = 1 << 20


def run():
    if case == "read(1 MiB)":
        with client.open(bucket, "data", readahead=0) as f:
            while f.read(MiB):
                pass
    elif case == "readinto(1 MiB)":
        buf = bytearray(MiB)
        with client.open(bucket, "data", readahead=0) as f:
            while f.readinto(buf):
                pass
    elif case == "read(1 MiB), defaults":
        with client.open(bucket, "data") as f:
            while f.read(MiB):
                pass
    elif case == "tar r|* extract":
        with tempfile.TemporaryDirectory(dir=scratch) as out:
            with client.open(bucket, "data.tar") as f, tarfile.open(fileobj=f, mode="r|*") as t:
                t.extractall(out, filter="data")
    elif case == "download(parallel=4)":
        dest = os.path.join(scratch, "dl.bin")
        client.download(bucket, "data", dest, parallel=4)
        os.unlink(dest)
    elif case == "get_into(parallel=4)":
        client.get_into(bucket, "data", bytearray(size), parallel=4)
    elif case == "upload single PUT":
        client.upload(bucket, "up1", os.path.join(scratch, "src.bin"), multipart_threshold=size + 1)
    elif case == "upload multipart(4)":
        client.upload(bucket, "up2", os.path.join(scratch, "src.bin"), parallel=4)
    elif case in SMALL:
        call = {
            "GET 4 KiB": lambda i: client.get_object(bucket, f"small/{i}"),
            "HEAD": lambda i: client.head_object(bucket, f"small/{i}"),
            "PUT 4 KiB": lambda i: client.put_object(bucket, f"small/{i}", body),
        }[case]
        body = os.urandom(4096)
        for i in range(20):  # warm: connections made, modules loaded
            call(i)
        global cpu0, t0
        cpu0, t0 = time.process_time(), time.perf_counter()
        for i in range(SMALL_COUNT):
            call(i)
    elif case == "open_write":
        block = os.urandom(MiB)
        with client.open_write(bucket, "up3") as w:
            for _ in range(size // MiB):
                w.write(block)
    else:
        raise SystemExit("unknown case " + case)


cpu0, t0 = time.process_time(), time.perf_counter()
run()
print(json.dumps({"wall": time.perf_counter() - t0, "cpu": time.process_time() - cpu0}))
"""

CASES = [
    "read(1 MiB)",
    "readinto(1 MiB)",
    "read(1 MiB), defaults",
    "tar r|* extract",
    "download(parallel=4)",
    "get_into(parallel=4)",
    "upload single PUT",
    "upload multipart(4)",
    "open_write",
    "GET 4 KiB",
    "HEAD",
    "PUT 4 KiB",
]
SMALL = ("GET 4 KiB", "HEAD", "PUT 4 KiB")
SMALL_COUNT = 400  # as in CHILD


def make_tar(size: int) -> bytes:
    """A tar of 10 MiB members adding up to about ``size`` bytes."""
    import io

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for i in range(max(1, size // (10 * MiB))):
            data = os.urandom(10 * MiB)
            info = tarfile.TarInfo(f"m/{i:04d}.bin")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--baseline-python", required=True, help="the python of the baseline venv")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--size-mib", type=int, default=256)
    ap.add_argument("--cases", nargs="*", default=CASES)
    args = ap.parse_args()
    size = args.size_mib * MiB
    pythons = {"old": args.baseline_python, "new": sys.executable}
    large = [c for c in args.cases if c not in SMALL]
    small = [c for c in args.cases if c in SMALL]
    with server() as srv, tempfile.TemporaryDirectory(dir="/dev/shm") as scratch:
        client = srv.client
        srv.scratch_bucket(BUCKET)
        if large:  # the small requests' objects are all they need
            client.upload(BUCKET, "data", os.urandom(size))
            client.upload(BUCKET, "data.tar", make_tar(size))
            Path(scratch, "src.bin").write_bytes(os.urandom(size))
        for i in range(SMALL_COUNT):
            client.put_object(BUCKET, f"small/{i}", os.urandom(4096))
        env = {**os.environ, **srv.env()}
        results = side_by_side(
            pythons,
            CHILD,
            args.cases,
            lambda case: [case, BUCKET, str(size), scratch],
            args.runs,
            env,
            scratch,
        )
    if large:
        side_by_side_table(results, large, args.size_mib, args.runs)
    if small:
        print(f"\nclient CPU per request, median of {args.runs} runs of {SMALL_COUNT}\n")
        print("| request | old us | new us | new/old |")
        print("| --- | ---: | ---: | ---: |")
        for case in small:
            old, new = (
                statistics.median(r["cpu"] for r in results[(case, who)]) / SMALL_COUNT * 1e6
                for who in ("old", "new")
            )
            print(f"| {case} | {old:.0f} | {new:.0f} | {new / old:.2f}x |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
