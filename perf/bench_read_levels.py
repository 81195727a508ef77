"""One object read at fixed read-ahead levels and at the defaults: does parallelism pay here?

``client.open(readahead=N).read(1 MiB)`` over the whole object for N in 0 (one stream),
2, 3, 4 and 8 parts, and at the defaults (adaptive), interleaved, median of ``--runs``;
wall time, MB/s and the process's CPU seconds for each, against one stream. On a
server that shares the client's cores one stream is the server's limit and more parts
are slower; through a network that limits each connection, parts pay.

    python perf/bench_read_levels.py [--size-mib 64] [--runs 9]
"""

from __future__ import annotations

from collections.abc import Callable

from common import MiB, interleave, parser, report, server, upload_random

from objsdk import Client

BUCKET = "objsdk-perf"
LEVELS: dict[str, int | None] = {"defaults": None, "1 stream": 0, "2": 2, "3": 3, "4": 4, "8": 8}


def reader(client: Client, key: str, size: int, readahead: int | None) -> Callable[[], int]:
    """One whole read of ``key`` by ``read(1 MiB)`` at ``readahead``; its byte count."""

    def run() -> int:
        n = 0
        with client.open(BUCKET, key, readahead=readahead) as f:
            while chunk := f.read(MiB):
                n += len(chunk)
        if n != size:
            raise SystemExit(f"readahead={readahead}: read {n} bytes, not {size}")
        return n

    return run


def main() -> None:
    p = parser(__doc__ or "")
    p.add_argument("--size-mib", type=int, default=64)
    args = p.parse_args()
    size = args.size_mib * MiB
    key = f"read-levels-{args.size_mib}m"
    with server() as srv:
        client = srv.client
        srv.scratch_bucket(BUCKET)
        upload_random(client, BUCKET, key, size)
        variants = {name: reader(client, key, size, n) for name, n in LEVELS.items()}
        results = interleave(variants, args.runs)
        report(f"open().read(1 MiB) of {args.size_mib} MiB, {args.runs} runs", results, "1 stream")


if __name__ == "__main__":
    main()
