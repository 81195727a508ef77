"""What verification costs a read: CPU of verified ObjectFile reads against requests.

Three objects of the same size on the server, each carrying one of the CRCs S3 stores:
  crc32      written by boto3 at its defaults (put_object: a full-object CRC32)
  crc32c     written by objsdk (put_object of bytes: a CRC32C)
  crc64nvme  written by boto3 with ChecksumAlgorithm="CRC64NVME"
For each, in one process, ``time.process_time()`` around each case (all threads), the
median of ``--runs`` interleaved runs:
  raw.read           requests' unverified ``get(stream=True).raw.read(1 MiB)`` (baseline)
  readinto           ``client.open().readinto`` a reused 1 MiB buffer, verified
  read               ``client.open().read(1 MiB)``, verified
  readinto unverif.  the same with ``verify=False`` (what verification adds)
  readinto 1 stream  ``readahead=0``, verified and not: verification apart from parts
and the verification alone, in CPU-s/GiB: the object's CRC fed in the 256 KiB chunks
reads receive, as reads feed it (each chunk hashed right after it landed, so in the CPU
cache: one chunk fed again and again), and over the whole object in RAM (memory-bound:
what a second pass would cost). The target is on the first.

Targets: readinto <= 1.0x and read <= 1.2x the CPU of raw.read; verification alone
<= 0.05 CPU-s/GiB.

    python perf/bench_verify.py [--size-mib 256] [--runs 5] [--json out.json] [--quick]
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import requests
from common import MiB, parser, server, write_json

from objsdk._core.checksums import StreamChecksum

BUCKET = "objsdk-perf"
GiB = 1 << 30
CHUNK = 256 * 1024  # what a read receives per network chunk
TARGETS = {"readinto": 1.0, "read": 1.2}
VERIFY_TARGET = 0.05  # CPU-s/GiB


def main() -> None:
    p = parser(__doc__ or "")
    p.add_argument("--size-mib", type=int, default=256)
    p.add_argument("--quick", action="store_true", help="16 MiB, 2 runs: checks it runs")
    args = p.parse_args()
    if args.quick:
        args.size_mib, args.runs = 16, 2
    size = args.size_mib * MiB
    with server() as srv:
        client, s3 = srv.client, srv.boto3()
        srv.scratch_bucket(BUCKET)
        data = _random(size)
        keys = {
            "crc32": f"verify-{args.size_mib}m-boto3-default",
            "crc32c": f"verify-{args.size_mib}m-objsdk",
            "crc64nvme": f"verify-{args.size_mib}m-crc64nvme",
        }
        s3.put_object(Bucket=BUCKET, Key=keys["crc32"], Body=data)
        client.put_object(BUCKET, keys["crc32c"], data)
        s3.put_object(
            Bucket=BUCKET, Key=keys["crc64nvme"], Body=data, ChecksumAlgorithm="CRC64NVME"
        )
        sections = []
        session = requests.Session()
        for algorithm, key in keys.items():
            stored = client.head_object(BUCKET, key).checksums
            if algorithm not in stored:
                raise SystemExit(f"{key}: the server stored {sorted(stored)}, not {algorithm}")
            cases = _cases(client, session, key)
            cpu = _interleaved(cases, args.runs)
            verify_cpu = _verify_in_cache(algorithm, data, args.runs)
            ram_cpu = _verify_alone(algorithm, stored[algorithm], data, args.runs)
            sections.append(_report(algorithm, size, cpu, verify_cpu, ram_cpu))
        write_json(args.json, sections)


def _random(size: int) -> bytes:
    import os

    return os.urandom(size)


def _cases(client, session: requests.Session, key: str) -> dict[str, Callable[[], int]]:
    buf = bytearray(MiB)

    def raw_read() -> int:
        url = client.presign("GET", BUCKET, key)
        n = 0
        with session.get(url, stream=True, timeout=60) as r:
            r.raise_for_status()
            while chunk := r.raw.read(MiB):
                n += len(chunk)
        return n

    def readinto(verify: bool = True, readahead: int | None = None) -> int:
        n = 0
        with client.open(BUCKET, key, verify=verify, readahead=readahead) as f:
            while k := f.readinto(buf):
                n += k
            assert not verify or f.stats.verified, f.stats
        return n

    def read() -> int:
        n = 0
        with client.open(BUCKET, key) as f:
            while chunk := f.read(MiB):
                n += len(chunk)
            assert f.stats.verified, f.stats
        return n

    return {
        "raw.read": raw_read,
        "readinto": readinto,
        "read": read,
        "readinto unverified": lambda: readinto(False),
        # One stream, no read-ahead: what verification costs apart from parallel parts.
        "readinto 1 stream": lambda: readinto(True, 0),
        "readinto 1 stream unv.": lambda: readinto(False, 0),
    }


def _interleaved(cases: dict[str, Callable[[], int]], runs: int) -> dict[str, float]:
    """Median process CPU seconds of each case over ``runs`` rotating runs (after one
    untimed warm-up of each)."""
    names = list(cases)
    for name in names:
        cases[name]()
    cpu: dict[str, list[float]] = {n: [] for n in names}
    for r in range(runs):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            c0 = time.process_time()
            cases[name]()
            cpu[name].append(time.process_time() - c0)
    return {n: statistics.median(v) for n, v in cpu.items()}


def _verify_alone(algorithm: str, stored: str, data: bytes, runs: int) -> float:
    """CPU-s/GiB of checking ``data`` against ``stored`` as reads feed it."""
    view = memoryview(data)
    seconds = []
    for _ in range(max(runs, 3)):
        c0 = time.process_time()
        checksum = StreamChecksum(algorithm, stored)
        for at in range(0, len(view), CHUNK):
            checksum.update(view[at : at + CHUNK])
        assert checksum.matches()
        seconds.append(time.process_time() - c0)
    return statistics.median(seconds) * GiB / len(data)


def _verify_in_cache(algorithm: str, data: bytes, runs: int) -> float:
    """CPU-s/GiB of hashing ``data``'s size as reads do: each chunk while it is in the
    CPU cache (one chunk of ``data``, fed ``len(data) / CHUNK`` times)."""
    chunk = memoryview(data)[:CHUNK]
    seconds = []
    for _ in range(max(runs, 3)):
        c0 = time.process_time()
        checksum = StreamChecksum(algorithm, "")
        for _ in range(len(data) // CHUNK):
            checksum.update(chunk)
        checksum.actual()
        seconds.append(time.process_time() - c0)
    return statistics.median(seconds) * GiB / len(data)


def _report(
    algorithm: str, size: int, cpu: dict[str, float], verify_cpu: float, ram_cpu: float
) -> dict[str, object]:
    base = cpu["raw.read"]
    print(f"\n## {algorithm}: {size // MiB} MiB, CPU seconds (median)")
    print(f"{'case':<22} {'cpu s':>8} {'vs raw.read':>12} {'target':>8}")
    rows = []
    for name, seconds in cpu.items():
        ratio = seconds / base
        target = TARGETS.get(name)
        mark = "" if target is None else f"<= {target}x {'PASS' if ratio <= target else 'MISS'}"
        print(f"{name:<22} {seconds:>8.3f} {ratio:>11.2f}x {mark:>8}")
        rows.append(
            {"case": name, "cpu_s": round(seconds, 4), "ratio": round(ratio, 3), "target": target}
        )
    ok = "PASS" if verify_cpu <= VERIFY_TARGET else "MISS"
    print(f"{'verification alone':<22} {verify_cpu:>8.4f} CPU-s/GiB  <= {VERIFY_TARGET} {ok}")
    print(f"{'  over bytes in RAM':<22} {ram_cpu:>8.4f} CPU-s/GiB")
    return {
        "algorithm": algorithm,
        "size": size,
        "rows": rows,
        "verify_cpu_s_per_gib": round(verify_cpu, 4),
        "verify_in_ram_cpu_s_per_gib": round(ram_cpu, 4),
        "verify_target": VERIFY_TARGET,
    }


if __name__ == "__main__":
    main()
