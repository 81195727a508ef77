"""Reads through fsspec: ``objsdk://`` (ObjsdkFileSystem) vs ``s3://`` (s3fs) on one object.

Variants (each reads the whole object, the way pandas and pyarrow do):
  s3fs open().read(1 MiB)        ``S3FileSystem.open(rb)`` in a loop of 1 MiB reads
  objsdk open().read(1 MiB)      ``ObjsdkFileSystem.open(rb)``, the same loop
  s3fs cat_file                  the whole object in one call
  objsdk cat_file                the same
Target: objsdk's open().read at least 2x s3fs's (issue 28), median of --runs.

Then random access, on each ``--profile`` (loopback, lan, wan: per-connection Toxiproxy
toxics, objsdk.bench.profiles): ``pyarrow.parquet.read_table`` of 3 columns of 20 from
a Parquet file of 400,000 rows in 8 row groups (~46 MB), through each filesystem; the
new TCP connections each read opened are counted beside the time.

    python perf/bench_fsspec.py [--size-mib 64] [--runs 5] [--profile wan ...]
                                [--files 1000] [--quick] [--json out.json]

Then many small files (``--files``, 1,000 of 4 KiB by default): ``put`` of a local tree,
``get`` of it back, ``cat`` of its files (a glob) and ``copy`` of it to another prefix
(``recursive=True``) through each filesystem, the destination removed and the page
cache flushed (``sync``) before every run, outside the timing; and ``cat`` of as many
on each other ``--profile``, where every request waits for the network.

``--quick`` checks the script end to end (8 MiB, one run): its numbers mean nothing.
"""

from __future__ import annotations

import io
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

from common import MiB, interleave, parser, report, server, upload_random, write_json

BUCKET = "objsdk-perf"


def main() -> None:
    p = parser(__doc__ or "")
    p.add_argument("--size-mib", type=int, default=64)
    p.add_argument("--quick", action="store_true", help="8 MiB, one run: a smoke test")
    p.add_argument(
        "--profile",
        action="append",
        default=None,
        help="network profile(s) of the Parquet reads (default: loopback and wan)",
    )
    p.add_argument("--files", type=int, default=1000, help="small files put and got (1000)")
    args = p.parse_args()
    size_mib, runs = (8, 1) if args.quick else (args.size_mib, args.runs)
    key = f"fsspec-{size_mib}m"
    try:
        import s3fs
    except ImportError:
        raise SystemExit("s3fs is not installed: pip install -e '.[perf]'") from None
    from objsdk.filesystem import ObjsdkFileSystem

    with server() as srv:
        srv.scratch_bucket(BUCKET)
        upload_random(srv.client, BUCKET, key, size_mib * MiB)
        options = {"key": srv.access_key, "secret": srv.secret_key, "skip_instance_cache": True}
        theirs = s3fs.S3FileSystem(
            endpoint_url=srv.endpoint, client_kwargs={"region_name": "us-east-1"}, **options
        )
        ours = ObjsdkFileSystem(endpoint_url=srv.endpoint, **options)
        path = f"{BUCKET}/{key}"

        def loop(fs: object) -> int:
            n = 0
            with fs.open(path, "rb") as f:  # type: ignore[attr-defined]
                while chunk := f.read(MiB):
                    n += len(chunk)
            return n

        results = interleave(
            {
                "s3fs open().read(1 MiB)": lambda: loop(theirs),
                "objsdk open().read(1 MiB)": lambda: loop(ours),
                "s3fs cat_file": lambda: len(theirs.cat_file(path)),
                "objsdk cat_file": lambda: len(ours.cat_file(path)),
            },
            runs,
            warmup=not args.quick,
        )
        for r in results.values():
            if r.nbytes != size_mib * MiB:
                raise SystemExit(f"{r.name} read {r.nbytes} bytes, not {size_mib * MiB}")
        section = report(
            f"fsspec reads of a {size_mib} MiB object, {runs} runs",
            results,
            "s3fs open().read(1 MiB)",
            targets={"objsdk open().read(1 MiB)": ("s3fs open().read(1 MiB)", 2.0)},
        )
        sections = [section]
        files = 20 if args.quick else args.files
        for name in args.profile or ["loopback", "wan"]:
            sections.append(parquet_columns(srv, name, runs, quick=args.quick))
            if name != "loopback":  # on loopback: with the other small-file calls below
                sections.append(cat_on(srv, name, files, runs, quick=args.quick))
        sections += many_files(theirs, ours, files, runs, args.quick)
        write_json(args.json, sections)


# New TCP connections opened by this process (socket.connect), counted per variant.
_CONNECTS = [0]


@contextmanager
def counting_connections() -> Iterator[None]:
    connect = socket.socket.connect

    def counted(sock: socket.socket, address: Any) -> None:
        _CONNECTS[0] += 1
        connect(sock, address)

    socket.socket.connect = counted  # type: ignore[method-assign]
    try:
        yield
    finally:
        socket.socket.connect = connect  # type: ignore[method-assign]


def parquet_columns(srv: Any, profile: str, runs: int, *, quick: bool) -> dict[str, object]:
    """pyarrow reading 3 of 20 columns through s3fs and objsdk, on ``profile``."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    import s3fs

    from objsdk.bench.profiles import PROFILES, proxied_endpoint
    from objsdk.filesystem import ObjsdkFileSystem
    from objsdk.testing import Toxiproxy

    rows = 50_000 if quick else 400_000
    table = pa.table({f"c{i}": pa.array(range(rows)) for i in range(20)})
    buf = io.BytesIO()
    pq.write_table(table, buf, row_group_size=rows // 8)
    key = f"columns-{rows}.parquet"
    srv.client.put_object(BUCKET, key, buf.getvalue())
    columns = ["c3", "c11", "c17"]
    wanted = table.select(columns)
    chosen = PROFILES[profile]
    with (
        toxiproxy_if(chosen.proxied, Toxiproxy) as toxiproxy,
        proxied_endpoint(srv.endpoint, chosen, toxiproxy) as endpoint,
    ):
        options = {"key": srv.access_key, "secret": srv.secret_key, "skip_instance_cache": True}
        theirs = s3fs.S3FileSystem(
            endpoint_url=endpoint, client_kwargs={"region_name": "us-east-1"}, **options
        )
        ours = ObjsdkFileSystem(endpoint_url=endpoint, **options)
        connects: dict[str, list[int]] = {"s3fs": [], "objsdk": []}

        def columns_of(name: str, fs: Any) -> Callable[[], int]:
            def read() -> int:
                before = _CONNECTS[0]
                got = pq.read_table(f"{BUCKET}/{key}", filesystem=fs, columns=columns)
                connects[name].append(_CONNECTS[0] - before)
                if not got.equals(wanted):
                    raise SystemExit(f"{name} read other columns than were written")
                return int(got.nbytes)

            return read

        with counting_connections():
            results = interleave(
                {
                    "s3fs read_table(3 columns)": columns_of("s3fs", theirs),
                    "objsdk read_table(3 columns)": columns_of("objsdk", ours),
                },
                runs,
                warmup=not quick,
            )
    for name, counts in connects.items():
        print(f"{name}: new connections per read {sorted(counts)}")
    section = report(
        f"Parquet, 3 of 20 columns of {rows} rows ({len(buf.getvalue()) / MiB:.0f} MiB), "
        f"{profile}, {runs} runs",
        results,
        "s3fs read_table(3 columns)",
    )
    section["new_connections"] = {k: sorted(v) for k, v in connects.items()}
    return section


def cat_on(srv: Any, profile: str, count: int, runs: int, *, quick: bool) -> dict[str, object]:
    """``cat`` of ``count`` objects of 4 KiB (a glob) through each filesystem on
    ``profile``, where every request waits for the network."""
    import s3fs

    from objsdk.bench.profiles import PROFILES, proxied_endpoint
    from objsdk.filesystem import ObjsdkFileSystem
    from objsdk.testing import Toxiproxy

    with ThreadPoolExecutor(16) as pool:
        list(
            pool.map(lambda i: srv.client.put_object(BUCKET, f"cat/{i}", bytes(4096)), range(count))
        )
    chosen = PROFILES[profile]
    with (
        toxiproxy_if(chosen.proxied, Toxiproxy) as toxiproxy,
        proxied_endpoint(srv.endpoint, chosen, toxiproxy) as endpoint,
    ):
        options = {"key": srv.access_key, "secret": srv.secret_key, "skip_instance_cache": True}
        fss = {
            "s3fs": s3fs.S3FileSystem(
                endpoint_url=endpoint, client_kwargs={"region_name": "us-east-1"}, **options
            ),
            "objsdk": ObjsdkFileSystem(endpoint_url=endpoint, **options),
        }

        def cat(name: str) -> Callable[[], int]:
            def run() -> int:
                fss[name].invalidate_cache()
                got = fss[name].cat(f"{BUCKET}/cat/*")
                if len(got) != count:
                    raise SystemExit(f"{name} cat returned {len(got)} files, not {count}")
                return count * 4096

            return run

        results = interleave(
            {f"{name} cat(a glob)": cat(name) for name in fss}, runs, warmup=not quick
        )
    return report(
        f"cat of {count} files of 4 KiB, {profile}, {runs} runs", results, "s3fs cat(a glob)"
    )


def many_files(
    theirs: Any, ours: Any, count: int, runs: int, quick: bool
) -> list[dict[str, object]]:
    """``put``, ``get``, ``cat`` (a glob) and ``copy`` of ``count`` files of 4 KiB,
    recursive, through each filesystem."""
    scratch = tempfile.mkdtemp(prefix="objsdk-bench-fsspec-")
    try:
        src = os.path.join(scratch, "src")
        for i in range(count):
            path = os.path.join(src, f"d{i % 10}", f"f{i}.bin")
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(os.urandom(4096))
        fss = {"s3fs": theirs, "objsdk": ours}

        def put(name: str) -> Callable[[], int]:
            def run() -> int:
                # Trailing slashes: the tree's contents, whether or not the prefix exists.
                fss[name].put(src + "/", f"{BUCKET}/many-{name}/", recursive=True)
                return count * 4096

            return run

        def get(name: str) -> Callable[[], int]:
            def run() -> int:
                dest = os.path.join(scratch, f"got-{name}")
                fss[name].get(f"{BUCKET}/many-{name}/", dest + "/", recursive=True)
                got = sum(len(files) for _, _, files in os.walk(dest))
                if got != count:
                    raise SystemExit(f"{name} get wrote {got} files, not {count}")
                return count * 4096

            return run

        def copy(name: str) -> Callable[[], int]:
            def run() -> int:
                fss[name].copy(f"{BUCKET}/many-{name}/", f"{BUCKET}/copy-{name}/", recursive=True)
                return count * 4096

            return run

        def cat(name: str) -> Callable[[], int]:
            def run() -> int:
                got = fss[name].cat(f"{BUCKET}/many-{name}/*/*")
                if len(got) != count or any(len(v) != 4096 for v in got.values()):
                    raise SystemExit(f"{name} cat returned {len(got)} files, not {count}")
                return count * 4096

            return run

        def settle() -> None:
            for name in fss:
                shutil.rmtree(os.path.join(scratch, f"got-{name}"), ignore_errors=True)
                fss[name].invalidate_cache()
            subprocess.run(["sync"], check=False)

        sections = []
        for verb, how, make in (
            ("put", "recursive", put),
            ("get", "recursive", get),
            ("cat", "a glob", cat),
            ("copy", "recursive", copy),
        ):
            results = interleave(
                {f"{name} {verb}({how})": make(name) for name in fss},
                runs,
                warmup=not quick,
                settle=settle,
            )
            sections.append(
                report(
                    f"{verb} of {count} files of 4 KiB, {runs} runs",
                    results,
                    f"s3fs {verb}({how})",
                )
            )
        return sections
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


@contextmanager
def toxiproxy_if(needed: bool, toxiproxy: Any) -> Iterator[Any]:
    """A running Toxiproxy when the profile needs one, else None."""
    if not needed:
        yield None
        return
    with toxiproxy() as running:
        yield running


if __name__ == "__main__":
    main()
