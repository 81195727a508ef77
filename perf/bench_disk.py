"""The disk's floor under a durable download: writing N MiB from memory to a file, flushed
as objsdk's downloads flush (``fdatasync`` in the background every 32 MiB, then once at
the end), against the same bytes left in the page cache. No network, no server.

A download that is on disk when it returns cannot finish before the first row; a tool
that does not flush (s5cmd) is bounded by the second. Run it on the filesystem you
download to (``--dir``). Each run starts after ``sync``, right after the previous run's
file was removed.

The third row is the second after ``--idle`` seconds of rest instead (default 6). On a
VM whose balloon reports free memory to the host (``/sys/module/page_reporting``), the
pages freed by the removal are handed back meanwhile, and writing into new page-cache
pages then costs the host's faults: a run's speed depends on how long the machine rested
before it.

    python perf/bench_disk.py [--runs 5] [--size-mib 1024] [--dir /tmp] [--idle 6]
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time

from common import MiB, parser, write_json

from objsdk._transfer.writeback import Writeback, sync_data

CHUNK = 8 * MiB


def write_file(path: str, size: int, *, durable: bool) -> float:
    """Seconds to write ``size`` random bytes to ``path`` (durably, or to the page cache)."""
    block = os.urandom(CHUNK)
    start = time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        writeback = Writeback(fd) if durable else None
        left = size
        while left:
            n = os.write(fd, block[: min(left, CHUNK)])
            left -= n
            if writeback is not None:
                writeback.wrote(n)
        if writeback is not None:
            writeback.sync()
            writeback.close()
            sync_data(fd)
    finally:
        os.close(fd)
    return time.perf_counter() - start


def main() -> None:
    p = parser(__doc__.split("\n")[0])
    p.add_argument("--size-mib", type=int, default=1024)
    p.add_argument("--dir", default=tempfile.gettempdir(), help="where the file is written")
    p.add_argument("--idle", type=float, default=6.0, help="rest before the third row (s)")
    args = p.parse_args()
    size = args.size_mib * MiB
    path = os.path.join(args.dir, f"objsdk-bench-disk-{os.getpid()}.bin")
    variants = {
        "durable (objsdk's flushing)": (True, 0.0),
        "page cache only": (False, 0.0),
        f"page cache only, after {args.idle:g} s idle": (False, args.idle),
    }
    times: dict[str, list[float]] = {label: [] for label in variants}
    labels = list(variants)
    try:
        for run in range(args.runs):
            for label in labels[run % 3 :] + labels[: run % 3]:
                durable, idle = variants[label]
                if os.path.exists(path):
                    os.unlink(path)
                os.sync()
                time.sleep(idle)
                times[label].append(write_file(path, size, durable=durable))
    finally:
        if os.path.exists(path):
            os.unlink(path)
    print(f"{args.size_mib} MiB from memory to {args.dir}, {args.runs} runs, interleaved")
    rows = []
    for label in labels:
        runs = times[label]
        print(
            f"{label:<40} median {statistics.median(runs):.2f} s"
            f"  ({', '.join(f'{t:.2f}' for t in runs)})"
        )
        rows.append({"variant": label, "median_s": statistics.median(runs), "runs_s": runs})
    write_json(args.json, [{"title": f"{args.size_mib} MiB to {args.dir}", "rows": rows}])


if __name__ == "__main__":
    main()
