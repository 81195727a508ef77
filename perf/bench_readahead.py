"""Parallel read-ahead: ObjectFile with ``readahead=N`` against the single stream.

1. Sequential read of a 1 GiB object with readinto(1 MiB): ``readahead=N`` vs none.
2. ``tarfile`` streaming extraction of 256 x 1 MiB members with read-ahead vs the same
   tar read from a local copy in /dev/shm.
3. Peak RSS of the 1 GiB read-ahead read, in a fresh process, against the bound
   ``max(N + 1, 4) x part_size + 32 MiB``.

    python perf/bench_readahead.py [--size-mib 1024] [--readahead 4] [--part-mib 8] [--runs 5]
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from bench_tar import build_tar, extract
from common import MiB, interleave, parser, report, server, upload_random, write_json

BUCKET = "objsdk-perf"


def main() -> None:
    p = parser(__doc__ or "")
    p.add_argument("--size-mib", type=int, default=1024)
    p.add_argument("--readahead", type=int, default=4)
    p.add_argument("--part-mib", type=int, default=8)
    args = p.parse_args()
    size = args.size_mib * MiB
    part = args.part_mib * MiB
    key = f"seq-{args.size_mib}m"
    sections = []
    with server() as srv:
        client = srv.client
        srv.scratch_bucket(BUCKET)
        upload_random(client, BUCKET, key, size)
        buf = bytearray(MiB)

        def read(readahead: int) -> int:
            n = 0
            with client.open(BUCKET, key, readahead=readahead, part_size=part) as f:
                while k := f.readinto(buf):
                    n += k
            return n

        results = interleave(
            {
                "single stream": lambda: read(0),
                f"readahead={args.readahead}": lambda: read(args.readahead),
            },
            args.runs,
        )
        sections.append(
            report(
                f"Sequential read of {args.size_mib} MiB with readinto(1 MiB), "
                f"parts of {args.part_mib} MiB",
                results,
                "single stream",
                targets={f"readahead={args.readahead}": ("single stream", 1.4)},
            )
        )

        local = build_tar(256, MiB)
        try:
            with local.open("rb") as f:
                client.put_object(BUCKET, "tar-256x1m.tar", f)

            def tar_remote(readahead: int) -> int:
                with client.open(
                    BUCKET, "tar-256x1m.tar", readahead=readahead, part_size=part
                ) as f:
                    return extract(f)

            def tar_local() -> int:
                with local.open("rb") as f:
                    return extract(f)

            results = interleave(
                {
                    "local copy in /dev/shm": tar_local,
                    "ObjectFile": lambda: tar_remote(0),
                    f"ObjectFile readahead={args.readahead}": lambda: tar_remote(args.readahead),
                },
                args.runs,
            )
            sections.append(
                report(
                    "tarfile r|* extraction of 256 x 1 MiB",
                    results,
                    "local copy in /dev/shm",
                    targets={
                        f"ObjectFile readahead={args.readahead}": ("local copy in /dev/shm", 0.9)
                    },
                )
            )
        finally:
            local.unlink()

        rss = peak_rss(srv.env(), key, args.readahead, part)
        grown = (rss["peak_kib"] - rss["base_kib"]) / 1024
        bound = max(args.readahead + 1, 4) * args.part_mib + 32
        print(
            f"\npeak RSS of the read-ahead read: +{grown:.1f} MiB "
            f"(bound {bound} MiB): {'PASS' if grown <= bound else 'MISS'}"
        )
        sections.append({"peak_rss_mib_above_baseline": round(grown, 1), "bound_mib": bound})
    write_json(args.json, sections)


RSS_SCRIPT = """
import json
from objsdk import Client

def status_kib(field):
    # VmHWM is this address space's peak; ru_maxrss would carry the
    # parent's peak across fork and exec.
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1])

client = Client.from_env()
client.head_object({bucket!r}, {key!r})
base = status_kib("VmRSS")
buf = bytearray(1 << 20)
with client.open({bucket!r}, {key!r}, readahead={readahead}, part_size={part}) as f:
    while f.readinto(buf):
        pass
peak = status_kib("VmHWM")
print(json.dumps({{"base_kib": base, "peak_kib": peak}}))
"""


def peak_rss(env: dict[str, str], key: str, readahead: int, part: int) -> dict[str, int]:
    script = textwrap.dedent(
        RSS_SCRIPT.format(bucket=BUCKET, key=key, readahead=readahead, part=part)
    )
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
    )
    result: dict[str, int] = json.loads(out.stdout)
    return result


if __name__ == "__main__":
    main()
