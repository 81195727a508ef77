"""One function per command: ``(ctx, args) -> exit code``."""

from __future__ import annotations

import argparse
import os
import warnings
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from objsdk import SSEKMS, SSES3, ObjectSummary, Prefix, errors

from .._core.sizes import MAX_OBJECT_SIZE
from .._core.wildcards import has_wildcard
from .errors import EXIT_BAD_ARGS, EXIT_BAD_CONFIG, EXIT_FAILED, EXIT_OK, CliError
from .extract import cmd_extract
from .filters import Filters
from .jobs import PARALLEL_PER_FILE, Job, Outcome, PlanOptions, TransferOptions
from .listing import list_objects
from .output import Output, counted, format_time, human_size
from .paths import RemotePath, parse_remote
from .plan import plan_cp
from .run import check_dest_bucket, run_jobs
from .sync import plan_sync
from .transfer import stream_to_stdout
from .uploads import cmd_uploads

if TYPE_CHECKING:
    from objsdk import Client

    from .._core.client_config import ClientConfig
    from .._core.config import ResolvedConfig

__all__ = ["COMMANDS", "Context"]


class Context:
    """What every command needs: parsed global options, output, and a lazy client."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.out = Output(
            json_mode=args.json,
            quiet=args.quiet,
            no_progress=args.no_progress,
            only_errors=args.only_show_errors,
        )
        self._client: Client | None = None

    def config(self) -> ResolvedConfig:
        """The settings the flags, the environment and the AWS files give (no endpoint
        needed)."""
        from .._core.config import resolve_config

        return resolve_config(
            os.environ,
            endpoint=self.args.endpoint_url,
            region=self.args.region,
            profile=self.args.profile,
            resolve_credentials=not self.args.no_sign_request,
        )

    def client_config(self) -> ClientConfig:
        """The configuration of this run's client (ConfigError without an endpoint)."""
        from .._core.client_config import resolve_client_config

        # One pool for every transfer of the run: a connection for each file in
        # flight and each of its parts, so none is opened and dropped per request.
        jobs = getattr(self.args, "jobs", 1)
        parallel = getattr(self.args, "parallel", None) or PARALLEL_PER_FILE
        return resolve_client_config(
            os.environ,
            endpoint=self.args.endpoint_url,
            region=self.args.region,
            profile=self.args.profile,
            max_pool_connections=max(16, jobs * parallel),
            verify=self._verify(),
            sse=self._sse(),
            anonymous=self.args.no_sign_request,
        )

    def _sse(self) -> SSES3 | SSEKMS | None:
        """The encryption of the objects this run writes, as aws s3 cp's ``--sse`` and
        ``--sse-kms-key-id`` say (None: the bucket's default)."""
        kind = getattr(self.args, "sse", None)
        key_id = getattr(self.args, "sse_kms_key_id", None)
        if key_id is not None and kind != "aws:kms":
            raise CliError("--sse-kms-key-id needs --sse aws:kms", EXIT_BAD_ARGS)
        if kind == "AES256":
            return SSES3()
        if kind == "aws:kms":
            return SSEKMS(key_id)
        return None

    def _verify(self) -> bool | str | None:
        """What checks TLS certificates, as aws's --no-verify-ssl and --ca-bundle say
        (None: AWS_CA_BUNDLE, the profile's ca_bundle, else the system's CAs)."""
        if self.args.no_verify_ssl:
            if self.args.ca_bundle:
                raise CliError(
                    "--no-verify-ssl and --ca-bundle contradict each other", EXIT_BAD_ARGS
                )
            self.out.warn("--no-verify-ssl: the endpoint's TLS certificate is not checked")
            # Said once above; urllib3 would say it again for every request.
            warnings.filterwarnings("ignore", message="Unverified HTTPS request")
            return False
        given: str | None = self.args.ca_bundle
        if given is not None:
            path = os.path.expanduser(given)
            if not os.path.isfile(path):
                raise CliError(f"--ca-bundle {given!r}: no such file", EXIT_BAD_ARGS)
            return path
        return None

    def client(self) -> Client:
        if self._client is None:
            from objsdk import Client

            self._client = Client.from_config(self.client_config())
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()


def _transfer_options(
    args: argparse.Namespace, files: int, *, move: bool = False
) -> TransferOptions:
    """The options of a run of ``files`` transfers. Without ``--parallel``, a run of one
    file adapts its parts to the network as the library does by default; a run of
    several gives each ``PARALLEL_PER_FILE``."""
    parallel = args.parallel
    if parallel is None and files != 1:
        parallel = PARALLEL_PER_FILE
    return TransferOptions(
        parallel=parallel,
        jobs=args.jobs,
        part_size=args.part_size,
        multipart_threshold=getattr(args, "multipart_threshold", None),
        content_type=getattr(args, "content_type", None),
        guess_mime_type=getattr(args, "guess_mime_type", True),
        metadata=getattr(args, "metadata", None),
        cache_control=getattr(args, "cache_control", None),
        content_encoding=getattr(args, "content_encoding", None),
        storage_class=getattr(args, "storage_class", None),
        acl=getattr(args, "acl", None),
        replace_fields=_replaces_fields(args),
        expected_size=getattr(args, "expected_size", None),
        move=move,
        archived=getattr(args, "archived", "warn"),
        resume=getattr(args, "resume", True),
    )


def _replaces_fields(args: argparse.Namespace) -> bool:
    """Whether copies store the fields given instead of their source's: REPLACE, as
    ``--metadata-directive`` says or, without it, when ``--metadata`` is given (the aws
    CLI's rule)."""
    directive = getattr(args, "metadata_directive", None)
    if directive is None:
        return getattr(args, "metadata", None) is not None
    return bool(directive == "REPLACE")


def plan_options(args: argparse.Namespace) -> PlanOptions:
    """Which files and objects a command takes, from its flags (absent ones: defaults)."""
    follow = getattr(args, "follow_symlinks", None)
    return PlanOptions(
        symlinks="files" if follow is None else ("all" if follow else "none"),
        filters=Filters(tuple(getattr(args, "filters", None) or ())),
        checksum=getattr(args, "checksum", False),
        delete=getattr(args, "delete", False),
        size_only=getattr(args, "size_only", False),
        exact_timestamps=getattr(args, "exact_timestamps", False),
        archived=getattr(args, "archived", "warn"),
    )


# -- listing and buckets -------------------------------------------------------------------


def cmd_ls(ctx: Context, args: argparse.Namespace) -> int:
    """Buckets, or one level under a prefix with its ``PRE`` lines first (as the aws
    CLI), or every key (``--recursive``, or a key with wildcards)."""
    client, out = ctx.client(), ctx.out
    size = human_size if args.human_readable else str
    if not args.path:
        for b in client.list_buckets():
            out.line(f"{format_time(b.creation_date)} {b.name}")
            out.json({"bucket": b.name, "creation_date": b.creation_date})
        return EXIT_OK
    where = parse_remote(args.path)
    # No HEAD of the bucket first: the listing says NoSuchBucket itself, and HEAD needs
    # s3:ListBucket on the whole bucket, which credentials limited to a prefix (an
    # s3:prefix condition) do not have.
    count = total = 0
    objects: Iterable[tuple[str, ObjectSummary | Prefix]]
    if has_wildcard(where.key):
        objects = ((s.key, s) for _rel, s in list_objects(client, where, page_size=args.page_size))
    else:
        objects = _ls_entries(client, where, args.recursive, args.page_size)
    matched = False
    for name, entry in objects:
        matched = True
        if isinstance(entry, Prefix):
            out.line(f"{'PRE':>30} {name}")
            out.json({"prefix": entry.prefix})
            continue
        count += 1
        total += entry.size
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
        out.line("")
        out.line(f"Total Objects: {count}")
        out.line(f"   Total Size: {size(total)}")
        out.json({"total_objects": count, "total_size": total})
    # As the aws CLI: a prefix that matches nothing exits 1 (scripts test a key with
    # `ls s3://b/k`); a bucket listed whole exits 0 even when it is empty.
    return EXIT_FAILED if where.key and not matched else EXIT_OK


def _ls_entries(
    client: Client, where: RemotePath, recursive: bool, page_size: int
) -> Iterator[tuple[str, ObjectSummary | Prefix]]:
    """(name shown, entry) of one level: in each page of the listing (``page_size``
    entries, ``--page-size``) its prefixes first (the PRE lines), then its objects, as the
    aws CLI prints them, holding one page's objects at a time so memory stays bounded on
    huge levels; with ``recursive``, every object under the prefix."""
    base = _dir_of(where.key)
    listing = client.list_objects(
        where.bucket, prefix=where.key, delimiter=None if recursive else "/", page_size=page_size
    )
    held: list[ObjectSummary] = []
    for entries, entry in enumerate(listing, 1):
        if isinstance(entry, Prefix):
            yield entry.prefix[len(base) :], entry
        elif recursive:
            yield entry.key, entry
        else:
            held.append(entry)  # after the page's PRE lines, as the aws CLI prints them
        if entries % page_size == 0:
            yield from ((e.key[len(base) :], e) for e in held)
            held.clear()
    yield from ((e.key[len(base) :], e) for e in held)


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
            ctx.out.error(
                f"delete failed: s3://{where.bucket}/{f.key}: {f.code}",
                {"code": f.code, "bucket": where.bucket, "key": f.key},
            )
        if failed:
            return EXIT_FAILED
    client.delete_bucket(where.bucket)
    ctx.out.note(f"remove_bucket: {where.bucket}")
    ctx.out.json({"remove_bucket": where.bucket})
    return EXIT_OK


# -- objects -------------------------------------------------------------------------------


def cmd_cp(ctx: Context, args: argparse.Namespace, *, move: bool = False) -> int:
    client, outcome = ctx.client(), Outcome()
    jobs = plan_cp(
        client,
        args.source,
        args.dest,
        recursive=args.recursive,
        out=ctx.out,
        outcome=outcome,
        opts=plan_options(args),
    )
    if move and any(j.kind in ("stdin", "stdout") for j in jobs):
        raise CliError("mv works on files and objects, not standard streams", EXIT_BAD_ARGS)
    if move:
        for job in jobs:
            # A copy onto itself that the service accepts (a new storage class, REPLACE
            # fields) would be followed by the removal of its source: the object itself.
            if job.kind == "copy" and job.src == job.dst:
                raise CliError(f"cannot move {job.src} onto itself", EXIT_BAD_ARGS)
    _check_fields_apply(args, jobs)
    _check_expected_size(args, jobs)
    if not args.dry_run:
        check_dest_bucket(client, jobs)
    many = args.recursive or len(jobs) != 1
    if many and not jobs and not outcome.skipped:
        ctx.out.warn(f"nothing to {'move' if move else 'copy'} under {args.source}")
    return run_jobs(
        client,
        jobs,
        _transfer_options(args, len(jobs), move=move),
        ctx.out,
        outcome,
        dry_run=args.dry_run,
        single=not many,
    )


# What each kind of job can store with an object: a stream from standard input goes
# through the writer, which takes a Content-Type, metadata and an ACL only. A server-side
# copy takes them all, the fields (type, metadata, headers) only with the REPLACE
# directive: under COPY the service keeps the source's and would ignore them.
_FIELDS = {
    "--content-type": ("content_type", ("upload", "stdin", "copy"), True),
    "--metadata": ("metadata", ("upload", "stdin", "copy"), True),
    "--cache-control": ("cache_control", ("upload", "copy"), True),
    "--content-encoding": ("content_encoding", ("upload", "copy"), True),
    "--storage-class": ("storage_class", ("upload", "copy"), False),
    "--acl": ("acl", ("upload", "stdin", "copy"), False),
}


def _check_fields_apply(args: argparse.Namespace, jobs: list[Job]) -> None:
    """A field given for objects that cannot take it is an error, not silently dropped
    (downloads have nothing to store it on, as with the aws CLI, and are left alone)."""
    replace = _replaces_fields(args)
    for flag, (name, kinds, is_field) in _FIELDS.items():
        if getattr(args, name, None) is None:
            continue
        for job in jobs:
            if job.kind in ("copy", "stdin") and job.kind not in kinds:
                raise CliError(f"{flag} is not supported for standard input", EXIT_BAD_ARGS)
            if job.kind == "copy" and is_field and not replace:
                raise CliError(
                    f"{flag} on a server-side copy needs --metadata-directive REPLACE "
                    "(with COPY the copy keeps its source's type, metadata and headers)",
                    EXIT_BAD_ARGS,
                )


def _check_expected_size(args: argparse.Namespace, jobs: list[Job]) -> None:
    """``--expected-size`` sizes the parts of a stream from standard input; files and
    objects have a size of their own."""
    size = getattr(args, "expected_size", None)
    if size is None:
        return
    if not any(job.kind == "stdin" for job in jobs):
        raise CliError("--expected-size applies to standard input (cp - s3://...)", EXIT_BAD_ARGS)
    if size > MAX_OBJECT_SIZE:
        raise CliError(
            f"--expected-size {size} is more than an S3 object holds ({MAX_OBJECT_SIZE} bytes)",
            EXIT_BAD_ARGS,
        )


def cmd_mv(ctx: Context, args: argparse.Namespace) -> int:
    return cmd_cp(ctx, args, move=True)


def cmd_sync(ctx: Context, args: argparse.Namespace) -> int:
    client, outcome = ctx.client(), Outcome()
    jobs = plan_sync(
        client,
        args.source,
        args.dest,
        opts=plan_options(args),
        out=ctx.out,
        outcome=outcome,
    )
    _check_fields_apply(args, jobs)
    if not args.dry_run:
        check_dest_bucket(client, jobs)
    options = _transfer_options(args, len(jobs))
    return run_jobs(client, jobs, options, ctx.out, outcome, dry_run=args.dry_run)


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
    if not args.recursive and not has_wildcard(where.key):
        if args.filters:
            raise CliError("--exclude and --include need --recursive", EXIT_BAD_ARGS)
        if where.is_prefix:
            raise CliError(f"{where} is a prefix (use --recursive)", EXIT_BAD_ARGS)
        if args.dry_run:
            out.note(f"(dryrun) delete: {where}")
        else:
            client.delete_object(where.bucket, where.key)
            out.note(f"delete: {where}")
        out.json({"action": "delete", "dest": str(where), "dryrun": args.dry_run})
        return EXIT_OK
    accepts = plan_options(args).filters.accepts
    # Folder markers go too, as with aws s3 rm: a marker left keeps the "folder".
    keys = [s.key for rel, s in list_objects(client, where, markers=True) if accepts(rel)]
    if args.dry_run:
        for k in keys:
            out.note(f"(dryrun) delete: s3://{where.bucket}/{k}")
            out.json({"action": "delete", "dest": f"s3://{where.bucket}/{k}", "dryrun": True})
        return EXIT_OK
    failed = client.delete_objects(where.bucket, keys)
    bad = {f.key for f in failed}
    for k in keys:
        if k not in bad:
            out.note(f"delete: s3://{where.bucket}/{k}")
            out.json({"action": "delete", "dest": f"s3://{where.bucket}/{k}"})
    for f in failed:
        out.error(
            f"delete failed: s3://{where.bucket}/{f.key}: {f.code}",
            {"code": f.code, "bucket": where.bucket, "key": f.key},
        )
    out.summary(f"deleted {counted(len(keys) - len(failed), 'object')}, {len(failed)} failed")
    return EXIT_FAILED if failed else EXIT_OK


def cmd_stat(ctx: Context, args: argparse.Namespace) -> int:
    where = parse_remote(args.path)
    client, out = ctx.client(), ctx.out
    if not where.key:
        if not client.bucket_exists(where.bucket):
            raise errors.s3_error(
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


def cmd_bench(ctx: Context, args: argparse.Namespace) -> int:
    import importlib

    try:
        bench = importlib.import_module("objsdk.bench")
    except ImportError as e:
        raise CliError(
            f"the benchmark suite (objsdk.bench) is not available in this installation: {e}",
            EXIT_BAD_CONFIG,
        ) from None
    # The suite gets the settings the chain resolved (or starts its own MinIO without an
    # endpoint) as a value: the secret never goes into this process's environment.
    config = ctx.client_config() if ctx.config().endpoint else None
    argv = list(args.bench_args)
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if "--quick" not in argv and not args.full:
        argv.insert(0, "--quick")
    main: Callable[..., int] = bench.main
    # Its usage names this command, which runs --quick unless --full is given.
    return int(main(argv, config=config, prog="objsdk bench [--full]"))


def cmd_index(ctx: Context, args: argparse.Namespace) -> int:
    from objsdk.datasets.index import index_command

    return index_command(ctx.client(), args.path, parallel=args.jobs, note=ctx.out.note)


COMMANDS: dict[str, Callable[[Context, argparse.Namespace], int]] = {
    "ls": cmd_ls,
    "mb": cmd_mb,
    "rb": cmd_rb,
    "cp": cmd_cp,
    "mv": cmd_mv,
    "sync": cmd_sync,
    "uploads": cmd_uploads,
    "cat": cmd_cat,
    "rm": cmd_rm,
    "stat": cmd_stat,
    "presign": cmd_presign,
    "extract": cmd_extract,
    "bench": cmd_bench,
    "index": cmd_index,
}
