"""How a file's multipart parts are sent: from the file by sendfile, or through buffers.

Over plain http, ``upload(path)`` sends each part of a regular file with
``socket.sendfile`` after reading it once for its CRC32C through a 1 MiB buffer. Over
TLS it cannot (TLS must see the bytes), so each part is read into a part buffer (an
anonymous memory map) and sent from there. This benchmark forces the buffered route
on plain http too, so the two differ only in how a part reaches the socket, and runs
both interleaved in one process at ``parallel`` 1, 4, 16 and the adaptive default.

Client CPU is this process's user+sys seconds (all threads), per GiB uploaded.

    python perf/bench_upload_parts.py [--size-mib 256] [--runs 7] [--json out.json]
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from common import (
    GiB,
    MiB,
    Result,
    interleave,
    parser,
    random_file,
    server,
    write_json,
)

from objsdk._transport.http import HTTPTransport

BUCKET = "objsdk-perf"


@contextlib.contextmanager
def buffered_parts() -> Iterator[None]:
    """Parts of a file go through part buffers, as they do over TLS."""
    direct = HTTPTransport.direct_file_bodies
    HTTPTransport.direct_file_bodies = property(lambda self: False)  # type: ignore[method-assign,assignment]
    try:
        yield
    finally:
        HTTPTransport.direct_file_bodies = direct  # type: ignore[method-assign]


def main() -> None:
    p = parser(__doc__ or "")
    p.add_argument("--size-mib", type=int, default=256)
    args = p.parse_args()
    size = args.size_mib * MiB
    path = random_file(size)
    try:
        with server() as srv:
            client = srv.client
            srv.scratch_bucket(BUCKET)
            written: list[str] = []

            def variant(parallel: int | None, buffered: bool) -> Callable[[], int]:
                def run() -> int:
                    written.append(f"parts-{len(written)}")
                    # parallel=None is the default: the adaptive level.
                    with buffered_parts() if buffered else contextlib.nullcontext():
                        info = client.upload(
                            BUCKET, written[-1], path, parallel=parallel, multipart_threshold=0
                        )
                    return info.size or 0

                return run

            def settle() -> None:
                if written:
                    client.delete_objects(BUCKET, written)
                    written.clear()

            variants = {}
            for parallel in (1, 4, 16, None):
                label = "defaults" if parallel is None else f"parallel={parallel}"
                variants[f"{label}, sendfile"] = variant(parallel, False)
                variants[f"{label}, buffers"] = variant(parallel, True)
            results = interleave(variants, args.runs, settle=settle)
            print(f"\n## Multipart upload of {args.size_mib} MiB from a file, two part routes")
            print(f"{'variant':<26} {'MiB/s':>7} {'min':>6} {'max':>6} {'cpu s/GiB':>10}")
            rows = []
            for r in results.values():
                assert r.nbytes == size, (r.name, r.nbytes)
                rates = [size / MiB / s for s in r.seconds]
                cpu = r.cpu_median / (size / GiB)
                print(
                    f"{r.name:<26} {size / MiB / r.median:>7.0f} {min(rates):>6.0f} "
                    f"{max(rates):>6.0f} {cpu:>10.2f}"
                )
                rows.append(_row(r, size, cpu))
            write_json(args.json, [{"title": "upload part routes", "rows": rows}])
    finally:
        path.unlink()


def _row(r: Result, size: int, cpu: float) -> dict[str, object]:
    return {
        "variant": r.name,
        "mib_per_s": round(size / MiB / r.median, 1),
        "cpu_s_per_gib": round(cpu, 3),
        "runs_s": [round(s, 4) for s in r.seconds],
    }


if __name__ == "__main__":
    main()
