"""Reads through fsspec: ``objsdk://`` (ObjsdkFileSystem) vs ``s3://`` (s3fs) on one object.

Variants (each reads the whole object, the way pandas and pyarrow do):
  s3fs open().read(1 MiB)        ``S3FileSystem.open(rb)`` in a loop of 1 MiB reads
  objsdk open().read(1 MiB)      ``ObjsdkFileSystem.open(rb)``, the same loop
  s3fs cat_file                  the whole object in one call
  objsdk cat_file                the same
Target: objsdk's open().read at least 2x s3fs's (issue 28), median of --runs.

    python perf/bench_fsspec.py [--size-mib 64] [--runs 5] [--quick] [--json out.json]

``--quick`` checks the script end to end (8 MiB, one run): its numbers mean nothing.
"""

from __future__ import annotations

from common import MiB, interleave, parser, report, server, upload_random, write_json

BUCKET = "objsdk-perf"


def main() -> None:
    p = parser(__doc__ or "")
    p.add_argument("--size-mib", type=int, default=64)
    p.add_argument("--quick", action="store_true", help="8 MiB, one run: a smoke test")
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
        write_json(args.json, [section])


if __name__ == "__main__":
    main()
