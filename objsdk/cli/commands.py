"""One function per command: ``(ctx, args) -> exit code``."""

from __future__ import annotations

import argparse
import os
import sys
import tarfile
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from objsdk import ObjectSummary, Prefix, errors

from .errors import EXIT_BAD_ARGS, EXIT_BAD_CONFIG, EXIT_FAILED, EXIT_OK, CliError
from .jobs import Outcome, TransferOptions
from .output import Output, format_time, human_size
from .paths import parse_remote
from .plan import plan_cp
from .sync import plan_sync
from .transfer import check_dest_bucket, run_jobs, stream_to_stdout

if TYPE_CHECKING:
    from objsdk import Client

    from .._core.config import ResolvedConfig

__all__ = ["COMMANDS", "Context"]


class Context:
    """What every command needs: parsed global options, output, and a lazy client."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.out = Output(json_mode=args.json, quiet=args.quiet)
        self._client: Client | None = None

    def config(self) -> ResolvedConfig:
        from .._core.config import resolve_config

        return resolve_config(
            os.environ,
            endpoint=self.args.endpoint_url,
            region=self.args.region,
            profile=self.args.profile,
        )

    def client(self) -> Client:
        if self._client is None:
            from objsdk import Client

            from .._core.config import ConfigError

            cfg = self.config()
            if not cfg.endpoint:
                raise ConfigError(
                    "no endpoint: pass --endpoint-url, set AWS_ENDPOINT_URL, or put "
                    f"endpoint_url in profile {cfg.profile!r} of ~/.aws/config"
                )
            kwargs = cfg.client_kwargs()
            attempts = os.environ.get("AWS_MAX_ATTEMPTS")
            if attempts:
                # The aws CLI's setting: total attempts, so retries are one fewer.
                if not attempts.isdigit() or int(attempts) < 1:
                    raise ConfigError(f"AWS_MAX_ATTEMPTS must be a number >= 1, got {attempts!r}")
                kwargs["retries"] = int(attempts) - 1
            self._client = Client(cfg.endpoint, **kwargs)  # type: ignore[arg-type]
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()


def _transfer_options(args: argparse.Namespace) -> TransferOptions:
    return TransferOptions(
        parallel=args.parallel,
        jobs=args.jobs,
        part_size=args.part_size,
        multipart_threshold=getattr(args, "multipart_threshold", None),
        content_type=getattr(args, "content_type", None),
    )


# -- listing and buckets -------------------------------------------------------------------


def cmd_ls(ctx: Context, args: argparse.Namespace) -> int:
    client, out = ctx.client(), ctx.out
    size = (lambda n: str(n)) if args.bytes else human_size
    if not args.path:
        for b in client.list_buckets():
            out.line(f"{format_time(b.creation_date)} {b.name}")
            out.json({"bucket": b.name, "creation_date": b.creation_date})
        return EXIT_OK
    where = parse_remote(args.path)
    if not client.bucket_exists(where.bucket):
        raise errors.NoSuchBucket(
            404, "NoSuchBucket", "The specified bucket does not exist", bucket=where.bucket
        )
    delimiter = None if args.recursive else "/"
    count = total = 0
    for entry in client.list_objects(where.bucket, prefix=where.key, delimiter=delimiter):
        if isinstance(entry, Prefix):
            shown = entry.prefix[len(_dir_of(where.key)) :]
            out.line(f"{'PRE':>30} {shown}")
            out.json({"prefix": entry.prefix})
            continue
        assert isinstance(entry, ObjectSummary)
        count += 1
        total += entry.size
        name = entry.key if args.recursive else entry.key[len(_dir_of(where.key)) :]
        out.line(f"{format_time(entry.last_modified)} {size(entry.size):>10} {name}")
        out.json(
            {
                "key": entry.key,
                "size": entry.size,
                "etag": entry.etag,
                "last_modified": entry.last_modified,
            }
        )
    if args.summarize:
        out.line(f"\nTotal Objects: {count}\n   Total Size: {size(total)}")
    return EXIT_OK


def _dir_of(key: str) -> str:
    """The part of a listing prefix up to its last ``/`` (names are shown relative to it)."""
    return key[: key.rfind("/") + 1]


def cmd_mb(ctx: Context, args: argparse.Namespace) -> int:
    where = parse_remote(args.bucket)
    if where.key:
        raise CliError(f"mb takes a bucket (s3://bucket), got {args.bucket!r}", EXIT_BAD_ARGS)
    ctx.client().create_bucket(where.bucket)
    ctx.out.note(f"make_bucket: {where.bucket}")
    ctx.out.json({"make_bucket": where.bucket})
    return EXIT_OK


def cmd_rb(ctx: Context, args: argparse.Namespace) -> int:
    where = parse_remote(args.bucket)
    if where.key:
        raise CliError(f"rb takes a bucket (s3://bucket), got {args.bucket!r}", EXIT_BAD_ARGS)
    client = ctx.client()
    if args.force:
        keys = [e.key for e in client.list_objects(where.bucket) if isinstance(e, ObjectSummary)]
        failed = client.delete_objects(where.bucket, keys)
        for f in failed:
            print(f"delete failed: s3://{where.bucket}/{f.key}: {f.code}", file=sys.stderr)
        if failed:
            return EXIT_FAILED
    client.delete_bucket(where.bucket)
    ctx.out.note(f"remove_bucket: {where.bucket}")
    ctx.out.json({"remove_bucket": where.bucket})
    return EXIT_OK


# -- objects -------------------------------------------------------------------------------


def cmd_cp(ctx: Context, args: argparse.Namespace) -> int:
    client, outcome = ctx.client(), Outcome()
    jobs = plan_cp(
        client, args.source, args.dest, recursive=args.recursive, out=ctx.out, outcome=outcome
    )
    if not args.dry_run:
        check_dest_bucket(client, jobs)
    if args.recursive and not jobs and not outcome.skipped:
        ctx.out.warn(f"nothing to copy under {args.source}")
    return run_jobs(
        client,
        jobs,
        _transfer_options(args),
        ctx.out,
        outcome,
        dry_run=args.dry_run,
        single=not args.recursive,
    )


def cmd_sync(ctx: Context, args: argparse.Namespace) -> int:
    client, outcome = ctx.client(), Outcome()
    jobs = plan_sync(
        client,
        args.source,
        args.dest,
        checksum=args.checksum,
        delete=args.delete,
        out=ctx.out,
        outcome=outcome,
    )
    if not args.dry_run:
        check_dest_bucket(client, jobs)
    return run_jobs(client, jobs, _transfer_options(args), ctx.out, outcome, dry_run=args.dry_run)


def cmd_cat(ctx: Context, args: argparse.Namespace) -> int:
    where = parse_remote(args.path)
    if where.is_prefix:
        raise CliError(f"cat needs an object, got the prefix {where}", EXIT_BAD_ARGS)
    if args.offset < 0 or (args.length is not None and args.length < 0):
        raise CliError("--offset and --length must not be negative", EXIT_BAD_ARGS)
    stream_to_stdout(ctx.client(), where, args.offset, args.length)
    return EXIT_OK


def cmd_rm(ctx: Context, args: argparse.Namespace) -> int:
    where = parse_remote(args.path)
    client, out = ctx.client(), ctx.out
    if not args.recursive:
        if where.is_prefix:
            raise CliError(f"{where} is a prefix (use --recursive)", EXIT_BAD_ARGS)
        if args.dry_run:
            out.note(f"(dryrun) delete: {where}")
        else:
            client.delete_object(where.bucket, where.key)
            out.note(f"delete: {where}")
        out.json({"deleted": 0 if args.dry_run else 1, "dryrun": args.dry_run})
        return EXIT_OK
    prefix = where.as_prefix().key if where.key else ""
    keys = [
        e.key
        for e in client.list_objects(where.bucket, prefix=prefix)
        if isinstance(e, ObjectSummary)
    ]
    if args.dry_run:
        for k in keys:
            out.note(f"(dryrun) delete: s3://{where.bucket}/{k}")
        out.json({"deleted": 0, "planned": len(keys), "dryrun": True})
        return EXIT_OK
    failed = client.delete_objects(where.bucket, keys)
    bad = {f.key for f in failed}
    for k in keys:
        if k not in bad:
            out.note(f"delete: s3://{where.bucket}/{k}")
    for f in failed:
        print(f"delete failed: s3://{where.bucket}/{f.key}: {f.code}", file=sys.stderr)
    out.json({"deleted": len(keys) - len(failed), "failed": len(failed), "dryrun": False})
    return EXIT_FAILED if failed else EXIT_OK


def cmd_stat(ctx: Context, args: argparse.Namespace) -> int:
    where = parse_remote(args.path)
    client, out = ctx.client(), ctx.out
    if not where.key:
        if not client.bucket_exists(where.bucket):
            raise errors.NoSuchBucket(
                404, "NoSuchBucket", "The specified bucket does not exist", bucket=where.bucket
            )
        out.line(f"Bucket: {where.bucket}")
        out.json({"bucket": where.bucket, "exists": True})
        return EXIT_OK
    info = client.head_object(where.bucket, where.key)
    record: dict[str, Any] = {
        "bucket": info.bucket,
        "key": info.key,
        "size": info.size,
        "etag": info.etag,
        "last_modified": info.last_modified,
        "content_type": info.content_type,
        "metadata": dict(info.metadata),
        "version_id": info.version_id,
        "checksums": dict(info.checksums),
        "checksum_type": info.checksum_type,
    }
    out.json(record)
    out.line(f"Name      : {where}")
    size = info.size or 0
    out.line(f"Size      : {size} ({human_size(size)})")
    out.line(f"ETag      : {info.etag}")
    out.line(f"Modified  : {format_time(info.last_modified)}")
    out.line(f"Type      : {info.content_type}")
    if info.version_id:
        out.line(f"Version   : {info.version_id}")
    for algo, value in sorted(info.checksums.items()):
        out.line(
            f"Checksum  : {algo} {value}"
            + (f" ({info.checksum_type})" if info.checksum_type else "")
        )
    for k, v in sorted(info.metadata.items()):
        out.line(f"Metadata  : {k}={v}")
    return EXIT_OK


def cmd_presign(ctx: Context, args: argparse.Namespace) -> int:
    where = parse_remote(args.path)
    if where.is_prefix:
        raise CliError(f"presign needs an object, got the prefix {where}", EXIT_BAD_ARGS)
    url = ctx.client().presign(args.method, where.bucket, where.key, expires=args.expires_in)
    # The URL is the output the user asked for; it is printed, never logged.
    if ctx.out.json_mode:
        ctx.out.json({"url": url, "expires_in": args.expires_in, "method": args.method.upper()})
    else:
        print(url)
    return EXIT_OK


def cmd_extract(ctx: Context, args: argparse.Namespace) -> int:
    where = parse_remote(args.source)
    if where.is_prefix:
        raise CliError(f"extract needs a tar object, got the prefix {where}", EXIT_BAD_ARGS)
    if not hasattr(tarfile, "data_filter"):
        raise CliError(
            "extract needs tarfile's 'data' filter (Python 3.10.12+, 3.11.4+ or 3.12+)",
            EXIT_BAD_CONFIG,
        )
    dest = args.dest
    os.makedirs(dest, exist_ok=True)
    client = ctx.client()
    size = client.head_object(where.bucket, where.key).size or 0
    members = 0
    with (
        ctx.out.progress(size, "extract") as progress,
        client.open(where.bucket, where.key, readahead=args.readahead) as f,
        tarfile.open(fileobj=f, mode="r|*") as tar,
    ):
        seen = 0
        for member in tar:
            tar.extract(member, dest, filter="data")
            members += 1
            pos = f.tell()
            progress.add(pos - seen)
            seen = pos
        stats = f.stats
    ctx.out.note(f"extract: {where} to {dest} ({members} members)")
    ctx.out.json(
        {
            "source": str(where),
            "dest": dest,
            "members": members,
            "bytes": stats.bytes_delivered,
            "resumes": stats.resumes,
        }
    )
    return EXIT_OK


def cmd_bench(ctx: Context, args: argparse.Namespace) -> int:
    import importlib

    try:
        bench = importlib.import_module("objsdk.bench")
    except ImportError as e:
        raise CliError(
            f"the benchmark suite (objsdk.bench) is not available in this installation: {e}",
            EXIT_BAD_CONFIG,
        ) from None
    cfg = ctx.config()
    # The suite reads the same environment variables; hand it what the chain resolved.
    for name, value in (
        ("AWS_ENDPOINT_URL", cfg.endpoint),
        ("AWS_ACCESS_KEY_ID", cfg.access_key),
        ("AWS_SECRET_ACCESS_KEY", cfg.secret_key),
        ("AWS_SESSION_TOKEN", cfg.session_token),
        ("AWS_REGION", cfg.region),
    ):
        if value:
            os.environ[name] = value
    argv = list(args.bench_args)
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if "--quick" not in argv and not args.full:
        argv.insert(0, "--quick")
    main: Callable[[list[str]], int] = bench.main
    return int(main(argv))


def cmd_index(ctx: Context, args: argparse.Namespace) -> int:
    from objsdk.datasets.index import index_command

    return index_command(ctx.client(), args.path, parallel=args.jobs, note=ctx.out.note)


COMMANDS: dict[str, Callable[[Context, argparse.Namespace], int]] = {
    "ls": cmd_ls,
    "mb": cmd_mb,
    "rb": cmd_rb,
    "cp": cmd_cp,
    "sync": cmd_sync,
    "cat": cmd_cat,
    "rm": cmd_rm,
    "stat": cmd_stat,
    "presign": cmd_presign,
    "extract": cmd_extract,
    "bench": cmd_bench,
    "index": cmd_index,
}
