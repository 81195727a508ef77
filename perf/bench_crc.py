"""CPU cost of the CRC libraries objsdk could verify with, on this machine's CPU.

For each installed library, CPU seconds per GiB (median of ``--runs``), two ways:
  in cache   one 256 KiB chunk hashed again and again: what verifying a read costs
             (each chunk is hashed right after it landed, while it is in the CPU cache)
  in RAM     a 256 MiB buffer hashed 256 KiB at a time (memory-bound: a second pass)
The libraries objsdk uses are marked; the choice and the numbers measured so far are
in docs/design.md ("Libraries, chosen by measuring").

    python perf/bench_crc.py [--runs 5]
"""

from __future__ import annotations

import argparse
import importlib
import os
import statistics
import time
import zlib
from collections.abc import Callable
from typing import Any

CHUNK = 256 * 1024
USED = {("CRC32", "deflate"), ("CRC32C", "fastcrc"), ("CRC64NVME", "awscrt")}


def candidates() -> dict[str, dict[str, Callable[[Any], object] | str]]:
    """algorithm -> library -> its CRC function, or why it cannot be measured."""

    def load(module: str, build: Callable[[Any], Callable[[Any], object]]) -> Any:
        try:
            return build(importlib.import_module(module))
        except ImportError:
            return "not installed (pip install -e '.[perf]')"

    return {
        "CRC32": {
            "deflate": load("deflate", lambda m: m.crc32),
            "isal": load("isal.isal_zlib", lambda m: m.crc32),
            "zlib-ng": load("zlib_ng.zlib_ng", lambda m: m.crc32),
            "zlib": zlib.crc32,
            "awscrt": load("awscrt.checksums", lambda m: m.crc32),
            "anycrc": load("anycrc", lambda m: m.Model("CRC32-ISO-HDLC").calc),
        },
        "CRC32C": {
            "fastcrc": load("fastcrc", lambda m: lambda b: m.crc32.iscsi(b, 0)),
            "crc32c": load("crc32c", lambda m: m.crc32c),
            "awscrt": load("awscrt.checksums", lambda m: m.crc32c),
            "anycrc": load("anycrc", lambda m: m.Model("CRC32-ISCSI").calc),
            # Reads only bytes: every chunk would be copied first (not counted here).
            "google-crc32c (bytes)": load("google_crc32c", lambda m: lambda b: m.value(bytes(b))),
        },
        "CRC64NVME": {
            "awscrt": load("awscrt.checksums", lambda m: m.crc64nvme),
            "anycrc": load("anycrc", lambda m: m.Model("CRC64-NVME").calc),
        },
    }


def cpu_per_gib(fn: Callable[[Any], object], views: list[memoryview], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.process_time()
        for view in views:
            fn(view)
        times.append(time.process_time() - start)
    return statistics.median(times) * (1 << 30) / (len(views) * CHUNK)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--runs", type=int, default=5)
    args = p.parse_args()
    data = memoryview(bytearray(os.urandom(256 << 20)))
    in_cache = [data[:CHUNK]] * 1024
    in_ram = [data[i : i + CHUNK] for i in range(0, len(data), CHUNK)]
    print(f"{'algorithm':10} {'library':24} {'in cache':>9} {'in RAM':>9}  CPU-s/GiB")
    for algorithm, libraries in candidates().items():
        for name, fn in libraries.items():
            mark = " (objsdk)" if (algorithm, name) in USED else ""
            if isinstance(fn, str):
                print(f"{algorithm:10} {name:24} {fn}")
                continue
            cache = cpu_per_gib(fn, in_cache, args.runs)
            ram = cpu_per_gib(fn, in_ram, args.runs)
            print(f"{algorithm:10} {name:24} {cache:9.3f} {ram:9.3f}{mark}")


if __name__ == "__main__":
    main()
