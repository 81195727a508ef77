"""One object read at fixed read-ahead levels and at the defaults: does parallelism pay here?

``client.open(readahead=N).read(1 MiB)`` over the whole object for N in 0 (one stream),
2, 3, 4 and 8 parts, and at the defaults (adaptive), interleaved, median of ``--runs``;
wall time, MB/s and the process's CPU seconds for each. On a server that shares the
client's cores one stream is the server's limit and more parts are slower; through a
network that limits each connection, parts pay.

    python perf/bench_read_levels.py [--size-mib 64] [--runs 9]
"""

from __future__ import annotations

import statistics
import time

from common import MiB, ensure_bucket, parser, server, upload_random

BUCKET = "objsdk-perf"
LEVELS: dict[str, int | None] = {"defaults": None, "1 stream": 0, "2": 2, "3": 3, "4": 4, "8": 8}


def main() -> None:
    p = parser(__doc__ or "")
    p.add_argument("--size-mib", type=int, default=64)
    args = p.parse_args()
    size = args.size_mib * MiB
    key = f"read-levels-{args.size_mib}m"
    with server() as srv:
        client = srv.client
        ensure_bucket(client, BUCKET)
        upload_random(client, BUCKET, key, size)
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in LEVELS}
        for run in range(args.runs + 1):  # the first run warms up
            for name, readahead in LEVELS.items():
                wall, cpu = time.perf_counter(), time.process_time()
                n = 0
                with client.open(BUCKET, key, readahead=readahead) as f:
                    while chunk := f.read(MiB):
                        n += len(chunk)
                if n != size:
                    raise SystemExit(f"{name}: read {n} bytes, not {size}")
                if run:
                    times[name].append((time.perf_counter() - wall, time.process_time() - cpu))
        print(f"## open().read(1 MiB) of {args.size_mib} MiB, {args.runs} runs")
        print(f"{'read-ahead':<12} {'median s':>9} {'MB/s':>7} {'client cpu s':>13}")
        for name, samples in times.items():
            wall = statistics.median(t for t, _ in samples)
            cpu = statistics.median(c for _, c in samples)
            print(f"{name:<12} {wall:9.3f} {size / wall / 1e6:7.0f} {cpu:13.3f}")


if __name__ == "__main__":
    main()
