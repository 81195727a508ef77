"""Sequential reads of one large object: ObjectFile vs a plain requests stream.

Variants (each reads the whole object):
  requests raw.read(1 MiB)       the baseline: ``requests.get(stream=True).raw.read``
  ObjectFile.read(1 MiB)         ``client.open(...).read(1 MiB)`` in a loop
  ObjectFile.readinto(1 MiB buf) one reused 1 MiB bytearray
  read, CRC32C verified          read(1 MiB) of a copy stored with a CRC32C, verified
  read, verify=False             the same copy, verification off
Then the peak RSS of streaming the object with read(1 MiB), in a fresh process.

    python perf/bench_read.py [--size-mib 1024] [--runs 5] [--json out.json]
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import requests
from common import MiB, interleave, parser, report, server, upload_random, write_json

BUCKET = "objsdk-perf"


def main() -> None:
    p = parser(__doc__ or "")
    p.add_argument("--size-mib", type=int, default=1024)
    args = p.parse_args()
    size = args.size_mib * MiB
    key = f"seq-{args.size_mib}m"
    with server() as srv:
        client = srv.client
        srv.scratch_bucket(BUCKET)
        upload_random(client, BUCKET, key, size)
        checked = f"{key}-crc32c"
        if checked not in {e.key for e in client.list_objects(BUCKET, prefix=checked)}:
            # put_object of bytes stores a CRC32C with the object.
            client.put_object(BUCKET, checked, client.get_object(BUCKET, key))
        session = requests.Session()

        def raw_read() -> int:
            url = client.presign("GET", BUCKET, key)
            n = 0
            with session.get(url, stream=True, timeout=60) as r:
                r.raise_for_status()
                while chunk := r.raw.read(MiB):
                    n += len(chunk)
            return n

        def objectfile_read() -> int:
            n = 0
            with client.open(BUCKET, key) as f:
                while chunk := f.read(MiB):
                    n += len(chunk)
            return n

        buf = bytearray(MiB)

        def objectfile_readinto() -> int:
            n = 0
            with client.open(BUCKET, key) as f:
                while k := f.readinto(buf):
                    n += k
            return n

        def read_checked(verify: bool) -> int:
            n = 0
            with client.open(BUCKET, checked, verify=verify) as f:
                while chunk := f.read(MiB):
                    n += len(chunk)
                if verify:
                    assert f._hashed == size, "the stored checksum was not verified"
            return n

        results = interleave(
            {
                "requests raw.read(1 MiB)": raw_read,
                "ObjectFile.read(1 MiB)": objectfile_read,
                "ObjectFile.readinto(1 MiB buf)": objectfile_readinto,
                "read, CRC32C verified": lambda: read_checked(True),
                "read, verify=False": lambda: read_checked(False),
            },
            args.runs,
        )
        for r in results.values():
            assert r.nbytes == size, (r.name, r.nbytes)
        section = report(
            f"Sequential read of {args.size_mib} MiB",
            results,
            "requests raw.read(1 MiB)",
            targets={
                "ObjectFile.read(1 MiB)": ("requests raw.read(1 MiB)", 0.95),
                "ObjectFile.readinto(1 MiB buf)": ("requests raw.read(1 MiB)", 1.0),
                "read, CRC32C verified": ("read, verify=False", 0.9),
            },
        )
        rss = peak_rss(srv.env(), key)
        grown = (rss["peak_kib"] - rss["base_kib"]) / 1024
        print(f"peak RSS streaming {args.size_mib} MiB with read(1 MiB): +{grown:.1f} MiB")
        print(f"target: <= 64 MiB above baseline: {'PASS' if grown <= 64 else 'MISS'}")
        section["peak_rss_mib_above_baseline"] = round(grown, 1)
        write_json(args.json, [section])


RSS_SCRIPT = """
import json, sys
from objsdk import Client

def status_kib(field):
    # VmHWM is this address space's peak; ru_maxrss would carry the
    # parent's peak across fork and exec.
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1])

client = Client.from_env()
client.head_object({bucket!r}, {key!r})  # imports and connection pool warmed up
base = status_kib("VmRSS")
n = 0
with client.open({bucket!r}, {key!r}) as f:
    while chunk := f.read(1 << 20):
        n += len(chunk)
peak = status_kib("VmHWM")
print(json.dumps({{"base_kib": base, "peak_kib": peak, "bytes": n}}))
"""


def peak_rss(env: dict[str, str], key: str) -> dict[str, int]:
    script = textwrap.dedent(RSS_SCRIPT.format(bucket=BUCKET, key=key))
    out = subprocess.run(
        [sys.executable, "-c", script],
        env={**env, "PATH": ""},
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, int] = json.loads(out.stdout)
    return result


if __name__ == "__main__":
    main()
