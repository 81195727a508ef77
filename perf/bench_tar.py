"""Streaming tar extraction: ``tarfile.open(fileobj=..., mode="r|*").extractall()``.

A tar of 256 members of 1 MiB each is extracted to a fresh temp dir (in /dev/shm when
it exists, so the disk does not blur the comparison) from:
  response.raw            the bare urllib3 stream of a plain ``requests`` GET (baseline)
  ObjectFile              ``client.open(bucket, key)``
  local copy in /dev/shm  the same tar read from a local file in memory

    python perf/bench_tar.py [--members 256] [--runs 5] [--json out.json]
"""

from __future__ import annotations

import io
import os
import shutil
import tarfile
import tempfile
from pathlib import Path

import requests
from common import MiB, interleave, parser, report, server, write_json

BUCKET = "objsdk-perf"
SHM = "/dev/shm" if os.path.isdir("/dev/shm") else None


def build_tar(members: int, member_size: int) -> Path:
    """The benchmark tar, written to /dev/shm (or the temp dir)."""
    fd, name = tempfile.mkstemp(prefix="objsdk-perf-", suffix=".tar", dir=SHM)
    with os.fdopen(fd, "wb") as f, tarfile.open(fileobj=f, mode="w") as tar:
        for i in range(members):
            info = tarfile.TarInfo(f"shard/{i:05d}.bin")
            info.size = member_size
            tar.addfile(info, io.BytesIO(os.urandom(member_size)))
    return Path(name)


def extract(fileobj: object) -> int:
    """Extract a streamed tar into a fresh dir; return the bytes of member data."""
    out = tempfile.mkdtemp(prefix="objsdk-perf-x-", dir=SHM)
    try:
        with tarfile.open(fileobj=fileobj, mode="r|*") as tar:  # type: ignore[call-overload]
            tar.extractall(out, filter="data")
        return sum(p.stat().st_size for p in Path(out).rglob("*") if p.is_file())
    finally:
        shutil.rmtree(out)


def main() -> None:
    p = parser(__doc__ or "")
    p.add_argument("--members", type=int, default=256)
    p.add_argument("--member-mib", type=int, default=1)
    args = p.parse_args()
    local = build_tar(args.members, args.member_mib * MiB)
    key = f"tar-{args.members}x{args.member_mib}m.tar"
    try:
        with server() as srv:
            client = srv.client
            srv.scratch_bucket(BUCKET)
            with local.open("rb") as f:
                client.put_object(BUCKET, key, f)
            session = requests.Session()

            def from_response_raw() -> int:
                url = client.presign("GET", BUCKET, key)
                with session.get(url, stream=True, timeout=60) as r:
                    r.raise_for_status()
                    return extract(r.raw)

            def from_objectfile() -> int:
                with client.open(BUCKET, key) as f:
                    return extract(f)

            def from_local_copy() -> int:
                with local.open("rb") as f:
                    return extract(f)

            results = interleave(
                {
                    "response.raw": from_response_raw,
                    "ObjectFile": from_objectfile,
                    "local copy in /dev/shm": from_local_copy,
                },
                args.runs,
            )
            expected = args.members * args.member_mib * MiB
            for r in results.values():
                assert r.nbytes == expected, (r.name, r.nbytes)
            section = report(
                f"tarfile r|* extraction of {args.members} x {args.member_mib} MiB",
                results,
                "response.raw",
                targets={
                    "ObjectFile": ("response.raw", 1.5),
                },
            )
            shm = results["local copy in /dev/shm"].median / results["ObjectFile"].median
            print(
                f"target: ObjectFile >= 0.8x local copy in /dev/shm: {shm:.2f}x "
                f"{'PASS' if shm >= 0.8 else 'MISS'}"
            )
            section["objectfile_vs_local"] = round(shm, 3)
            write_json(args.json, [section])
    finally:
        local.unlink()


if __name__ == "__main__":
    main()
