"""Sharing a big NumPy array with worker processes, and loading it from a bucket.

Part 1, the comparison of "Sharing big NumPy arrays across python processes" (Luis Sena) on
this box: a float64 array of ``--mib`` MiB, 2 worker processes (a fresh fork pool each run,
as the article counts pool start-up) each summing half of it, given the array as:
  pickle IPC            the halves pickled to the workers
  copy-on-write fork    a module global set before the pool forks
  RawArray              ``multiprocessing.RawArray`` handed to the pool's initializer
  np.memmap /dev/shm    a file in /dev/shm, mapped by each worker
  SharedMemory          ``multiprocessing.shared_memory``, attached by name
  objsdk.shm            ``load_shared`` from the bucket, ``SharedArray.attach`` by name

Part 2, loading the same array (stored as .npy) from the bucket:
  download() -> bytearray   ``client.download(bucket, key, bytearray(size))``
  load_shared               ``objsdk.shm.load_shared(client, bucket, key)``
plus the peak RSS (VmHWM) of a fresh process that does only the load_shared. Each load is
freed in the untimed settle step before the next run (freeing is not loading).

    python perf/bench_shm.py [--mib 512] [--runs 5] [--json out.json]
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import shared_memory
from pathlib import Path
from typing import Any

import numpy as np
from common import MiB, interleave, parser, report, server, write_json

from objsdk.shm import SharedArray, load_shared

BUCKET = "objsdk-perf"
FORK = multiprocessing.get_context("fork")

ARRAY: Any = None  # copy-on-write: set before the pool forks
RAW: Any = None  # RawArray: set by the pool's initializer


def _halves(n: int) -> list[tuple[int, int]]:
    return [(0, n // 2), (n // 2, n)]


def sum_given(part: Any) -> float:
    return float(part.sum())


def sum_global(lo: int, hi: int) -> float:
    return float(ARRAY[lo:hi].sum())


def init_raw(raw: Any) -> None:
    global RAW
    RAW = raw


def sum_raw(lo: int, hi: int) -> float:
    return float(np.frombuffer(RAW, dtype=np.float64)[lo:hi].sum())


def sum_memmap(path: str, n: int, lo: int, hi: int) -> float:
    a = np.memmap(path, dtype=np.float64, mode="r", shape=(n,))
    return float(a[lo:hi].sum())


def sum_shared_memory(name: str, n: int, lo: int, hi: int) -> float:
    # Forked workers share the parent's resource tracker, where the name is already
    # registered: attaching registers it again (a no-op), nothing to undo.
    block = shared_memory.SharedMemory(name=name)
    try:
        a = np.ndarray((n,), dtype=np.float64, buffer=block.buf)
        total = float(a[lo:hi].sum())
        del a
        return total
    finally:
        block.close()


def sum_objsdk(name: str, lo: int, hi: int) -> float:
    shared = SharedArray.attach(name)
    return float(shared.array[lo:hi].sum())


def pool_sum(
    submit: Callable[[ProcessPoolExecutor, int, int], Any],
    n: int,
    initializer: Callable[..., None] | None = None,
    initargs: tuple[Any, ...] = (),
) -> float:
    with ProcessPoolExecutor(
        2, mp_context=FORK, initializer=initializer, initargs=initargs
    ) as pool:
        futures = [submit(pool, lo, hi) for lo, hi in _halves(n)]
        return sum(f.result() for f in futures)


RSS_SCRIPT = """
import json, sys
from objsdk import Client
from objsdk.shm import load_shared

def status_kib(field):
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1])

client = Client.from_env()
client.head_object({bucket!r}, {key!r})
base = status_kib("VmRSS")
with load_shared(client, {bucket!r}, {key!r}) as shared:
    nbytes = shared.nbytes
    peak = status_kib("VmHWM")
print(json.dumps({{"base_kib": base, "peak_kib": peak, "bytes": nbytes}}))
"""


def peak_rss(env: dict[str, str], key: str) -> dict[str, int]:
    script = textwrap.dedent(RSS_SCRIPT.format(bucket=BUCKET, key=key))
    out = subprocess.run(
        [sys.executable, "-c", script],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=True,
    )
    return dict(json.loads(out.stdout))


def main() -> None:
    global ARRAY
    p = parser(__doc__ or "")
    p.add_argument("--mib", type=int, default=512)
    p.add_argument("--only-load", action="store_true", help="skip part 1")
    args = p.parse_args()
    n = args.mib * MiB // 8
    key = f"shm-{args.mib}m.npy"
    ARRAY = np.random.default_rng(0).random(n)
    expected = float(ARRAY.sum())
    size = ARRAY.nbytes
    sections = []
    tmp = Path(tempfile.mkdtemp(prefix="objsdk-perf-shm-", dir="/dev/shm"))
    raw_path = tmp / "array.f64"
    ARRAY.tofile(raw_path)
    npy_path = tmp / "array.npy"
    np.save(npy_path, ARRAY)
    raw = multiprocessing.RawArray("d", n)
    np.frombuffer(raw, dtype=np.float64)[:] = ARRAY
    block = shared_memory.SharedMemory(create=True, size=size)
    np.ndarray((n,), dtype=np.float64, buffer=block.buf)[:] = ARRAY
    try:
        with server() as srv:
            client = srv.client
            srv.scratch_bucket(BUCKET)
            client.upload(BUCKET, key, npy_path)
            npy_path.unlink()
            with load_shared(client, BUCKET, key) as shared:
                variants: dict[str, Callable[[], float]] = {
                    "pickle IPC": lambda: pool_sum(
                        lambda pool, lo, hi: pool.submit(sum_given, ARRAY[lo:hi]), n
                    ),
                    "copy-on-write fork": lambda: pool_sum(
                        lambda pool, lo, hi: pool.submit(sum_global, lo, hi), n
                    ),
                    "RawArray": lambda: pool_sum(
                        lambda pool, lo, hi: pool.submit(sum_raw, lo, hi), n, init_raw, (raw,)
                    ),
                    "np.memmap /dev/shm": lambda: pool_sum(
                        lambda pool, lo, hi: pool.submit(sum_memmap, str(raw_path), n, lo, hi), n
                    ),
                    "SharedMemory": lambda: pool_sum(
                        lambda pool, lo, hi: pool.submit(sum_shared_memory, block.name, n, lo, hi),
                        n,
                    ),
                    "objsdk.shm": lambda: pool_sum(
                        lambda pool, lo, hi: pool.submit(sum_objsdk, shared.name, lo, hi), n
                    ),
                }

                def checked(fn: Callable[[], float]) -> Callable[[], int]:
                    def go() -> int:
                        total = fn()
                        assert abs(total - expected) <= 1e-6 * abs(expected), (total, expected)
                        return size

                    return go

                if not args.only_load:
                    results = interleave({k: checked(v) for k, v in variants.items()}, args.runs)
                    sections.append(
                        report(
                            f"2 worker processes summing halves of a {args.mib} MiB float64 "
                            "array (fresh fork pool per run)",
                            results,
                            "pickle IPC",
                        )
                    )

            # Each load's result is kept until the next run's untimed settle(): freeing
            # 512 MiB (munmap of the bytearray, truncating the tmpfs block) is not loading.
            held: list[Any] = []

            def release() -> None:
                for h in held:
                    if isinstance(h, SharedArray):
                        h.close()
                held.clear()

            def download() -> int:
                buf = bytearray(size + 128)
                held.append(buf)
                return client.download(BUCKET, key, buf).bytes_fetched

            def load() -> int:
                shared = load_shared(client, BUCKET, key)
                held.append(shared)
                return shared.nbytes

            loads = interleave(
                {"download() -> bytearray": download, "load_shared": load},
                args.runs,
                settle=release,
            )
            section = report(
                f"loading the {args.mib} MiB .npy from the bucket",
                loads,
                "download() -> bytearray",
                targets={"load_shared": ("download() -> bytearray", 0.9)},
            )
            rss = peak_rss(srv.env(), key)
            limit = size + 64 * MiB
            peak = rss["peak_kib"] * 1024
            print(
                f"peak RSS of a process loading with load_shared: {peak / MiB:.0f} MiB "
                f"(at start {rss['base_kib'] / 1024:.0f} MiB; array {size / MiB:.0f} MiB); "
                f"target <= array + 64 MiB: {'PASS' if peak <= limit else 'MISS'}"
            )
            section["peak_rss"] = {**rss, "limit_bytes": limit}
            sections.append(section)
        write_json(args.json, sections)
    finally:
        block.close()
        block.unlink()
        with contextlib.suppress(OSError):
            raw_path.unlink()
        with contextlib.suppress(OSError):
            npy_path.unlink()
        tmp.rmdir()


if __name__ == "__main__":
    main()
