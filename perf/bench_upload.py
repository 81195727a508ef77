"""Uploads of one large file: objsdk's routes against the limit and the usual clients.

Single PUT (baseline: the limit, a bare socket that writes a presigned PUT's head and
``socket.sendfile``s the file):
  bare socket + sendfile         no library at all; what the server can take
  objsdk upload (single PUT)     ``upload(..., multipart_threshold=size + 1)``: sendfile,
                                 plus a CRC32C of the file over an mmap
  requests.put(data=file)        ``requests.put(presigned_url, data=open(f, "rb"))``
Multipart (baseline: boto3):
  boto3 upload_file              default TransferConfig (8 MiB parts, 10 threads)
  objsdk upload (multipart, 4)   16 MiB parts, ``parallel=4``, part CRC32Cs combined

Client CPU is this process's user+sys seconds (all threads), per GiB uploaded.

``--baseline-python PY`` measures instead whether a change of the library made an upload
slower: ``upload()`` of the file at its defaults, each run in a fresh child process of
either Python (this one, and ``PY``: e.g. a venv with the previous commit installed),
alternating which goes first, after a warm-up round; each child reports the wall time
and its own CPU time of the upload alone. Targets: this install >= 0.9x the baseline on
loopback, >= 0.95x on ``wan``.

``--profile`` puts the clients behind a Toxiproxy network profile
(objsdk.bench.profiles: ``wan`` is ~25 MB/s per connection and 20 ms).

    python perf/bench_upload.py [--size-mib 1024] [--runs 5] [--json out.json]
                                [--profile loopback|lan|wan|flaky-wan]
                                [--baseline-python PY]
"""

from __future__ import annotations

import http.client
import os
import socket
import subprocess
import sys
import tempfile
from argparse import Namespace
from pathlib import Path
from urllib.parse import urlsplit

import requests
from common import (
    GiB,
    MiB,
    Result,
    Server,
    interleave,
    parser,
    profile_endpoint,
    profile_option,
    random_file,
    report,
    server,
    side_by_side,
    side_by_side_table,
    verdict_line,
    write_json,
)

BUCKET = "objsdk-perf"
# The least this install must reach against the baseline (new/old throughput), by profile.
BASELINE_TARGETS = {"loopback": 0.9, "wan": 0.95}

# One upload of a file at the defaults, in a process of its own (either install).
CHILD = r"""
import json, os, sys, time
from objsdk import Client

bucket, key, path = sys.argv[1:4]
env = os.environ
client = Client(env["AWS_ENDPOINT_URL"], env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"])
cpu0, t0 = time.process_time(), time.perf_counter()
client.upload(bucket, key, path)
print(json.dumps({"wall": time.perf_counter() - t0, "cpu": time.process_time() - cpu0}))
"""
UPLOAD_CASE = "upload() of a file, defaults"


def bare_sendfile_put(url: str, path: Path, size: int) -> int:
    """PUT the file to a presigned URL: one head, then sendfile(2) of the whole body."""
    parts = urlsplit(url)
    head = (
        f"PUT {parts.path}?{parts.query} HTTP/1.1\r\nHost: {parts.netloc}\r\n"
        f"Content-Length: {size}\r\n\r\n"
    ).encode()
    address = (parts.hostname or "", parts.port or 80)
    with socket.create_connection(address) as sock, path.open("rb") as f:
        sock.sendall(head)
        sock.sendfile(f)
        resp = http.client.HTTPResponse(sock, method="PUT")
        try:
            resp.begin()
            resp.read()
            assert resp.status == 200, resp.status
        finally:
            resp.close()
    return size


def cpu_per_gib(r: Result) -> float:
    return r.cpu_median / (r.nbytes / GiB)


def cpu_report(
    section: dict[str, object], results: dict[str, Result], targets: dict[str, tuple[str, float]]
) -> None:
    """Print client CPU s/GiB per variant and check ``name <= ratio x against``."""
    print(f"{'variant':<32} {'client cpu s/GiB':>17}")
    for r in results.values():
        print(f"{r.name:<32} {cpu_per_gib(r):>17.3f}")
    verdicts = []
    for name, (against, maximum) in targets.items():
        ratio = cpu_per_gib(results[name]) / cpu_per_gib(results[against])
        ok = ratio <= maximum
        verdicts.append(
            {"variant": name, "against": against, "cpu_ratio": round(ratio, 3), "max": maximum}
        )
        print(
            f"target: {name} cpu <= {maximum}x {against}: {ratio:.2f}x {'PASS' if ok else 'MISS'}"
        )
    section["cpu_s_per_gib"] = {r.name: round(cpu_per_gib(r), 4) for r in results.values()}
    section["cpu_targets"] = verdicts


def against_baseline(srv: Server, endpoint: str, path: Path, args: Namespace) -> dict[str, object]:
    """``upload()`` of ``path`` at its defaults by this install and by
    ``args.baseline_python``'s, side by side (see the module)."""
    pythons = {"old": args.baseline_python, "new": sys.executable}
    env = {**os.environ, **srv.env(), "AWS_ENDPOINT_URL": endpoint}
    with tempfile.TemporaryDirectory(prefix="objsdk-perf-") as cwd:
        for who, python in pythons.items():
            found = subprocess.run(
                [python, "-c", "import objsdk; print(objsdk.__file__)"],
                env=env, cwd=cwd, capture_output=True, text=True, check=True,
            )  # fmt: skip
            print(f"{who}: {python}, objsdk from {found.stdout.strip()}")
        results = side_by_side(
            pythons,
            CHILD,
            [UPLOAD_CASE],
            lambda _: [BUCKET, "up-defaults", str(path)],
            args.runs,
            env,
            cwd,
        )
    ratio, rows = side_by_side_table(results, [UPLOAD_CASE], args.size_mib, args.runs)
    section: dict[str, object] = {
        "title": f"upload() of {args.size_mib} MiB at its defaults against the baseline, "
        f"{args.profile}",
        "rows": rows,
    }
    target = BASELINE_TARGETS.get(args.profile)
    if target is not None:
        print(verdict_line(f"this install on {args.profile}", "the baseline", ratio, target))
        section["target"] = target
    return section


def main() -> None:
    p = parser(__doc__ or "")
    p.add_argument("--size-mib", type=int, default=1024)
    profile_option(p)
    p.add_argument(
        "--baseline-python",
        help="measure upload() at its defaults against this Python's install of objsdk",
    )
    args = p.parse_args()
    size = args.size_mib * MiB
    path = random_file(size)
    try:
        with server() as srv, profile_endpoint(srv.endpoint, args.profile) as url:
            srv.scratch_bucket(BUCKET)
            if args.baseline_python:
                write_json(args.json, [against_baseline(srv, url, path, args)])
                return
            shaped = Server(url, srv.access_key, srv.secret_key)  # through the profile's proxy
            client = shaped.client
            session = requests.Session()
            s3 = shaped.boto3()

            def bare() -> int:
                return bare_sendfile_put(client.presign("PUT", BUCKET, "up-bare"), path, size)

            def objsdk_single() -> int:
                info = client.upload(BUCKET, "up-single", path, multipart_threshold=size + 1)
                assert "-" not in (info.etag or "-"), info.etag  # one PUT, not parts
                return info.size or 0

            def requests_put() -> int:
                url = client.presign("PUT", BUCKET, "up-requests")
                with path.open("rb") as f, session.put(url, data=f, timeout=600) as r:
                    r.raise_for_status()
                return size

            def objsdk_multipart() -> int:
                info = client.upload(BUCKET, "up-multipart", path, parallel=4)
                return info.size or 0

            def boto3_upload() -> int:
                s3.upload_file(str(path), BUCKET, "up-boto3")
                return size

            single = interleave(
                {
                    "bare socket + sendfile": bare,
                    "objsdk upload (single PUT)": objsdk_single,
                    "requests.put(data=file)": requests_put,
                },
                args.runs,
            )
            multi = interleave(
                {
                    "boto3 upload_file": boto3_upload,
                    "objsdk upload (multipart, 4)": objsdk_multipart,
                },
                args.runs,
            )
            for r in [*single.values(), *multi.values()]:
                assert r.nbytes == size, (r.name, r.nbytes)
            first = report(
                f"Single PUT of {args.size_mib} MiB",
                single,
                "bare socket + sendfile",
                targets={"objsdk upload (single PUT)": ("bare socket + sendfile", 0.95)},
            )
            cpu_report(
                first,
                single,
                {"objsdk upload (single PUT)": ("requests.put(data=file)", 0.5)},
            )
            second = report(
                f"Multipart upload of {args.size_mib} MiB",
                multi,
                "boto3 upload_file",
                targets={"objsdk upload (multipart, 4)": ("boto3 upload_file", 1.0)},
            )
            cpu_report(
                second,
                multi,
                {"objsdk upload (multipart, 4)": ("boto3 upload_file", 0.3)},
            )
            session.close()
            s3.close()
            write_json(args.json, [first, second])
    finally:
        path.unlink()


if __name__ == "__main__":
    main()
