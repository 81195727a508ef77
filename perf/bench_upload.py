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

    python perf/bench_upload.py [--size-mib 1024] [--runs 5] [--json out.json]
"""

from __future__ import annotations

import http.client
import socket
from pathlib import Path
from urllib.parse import urlsplit

import requests
from common import (
    GiB,
    MiB,
    Result,
    interleave,
    parser,
    random_file,
    report,
    server,
    write_json,
)

BUCKET = "objsdk-perf"


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


def main() -> None:
    p = parser(__doc__ or "")
    p.add_argument("--size-mib", type=int, default=1024)
    args = p.parse_args()
    size = args.size_mib * MiB
    path = random_file(size)
    try:
        with server() as srv:
            client = srv.client
            srv.scratch_bucket(BUCKET)
            session = requests.Session()
            s3 = srv.boto3()

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
