"""The argument parser: global options (accepted before or after the command) and commands."""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any, NoReturn

from .._core.metadata import CANNED_ACLS
from .._version import __version__
from .errors import EXIT_BAD_ARGS, CliError
from .filters import FilterAction

__all__ = ["GLOBAL_DEFAULTS", "build_parser", "parse_duration", "parse_size"]

_UNITS = {
    "": 1,
    "b": 1,
    "k": 1000,
    "kb": 1000,
    "kib": 1 << 10,
    "m": 1000**2,
    "mb": 1000**2,
    "mib": 1 << 20,
    "g": 1000**3,
    "gb": 1000**3,
    "gib": 1 << 30,
    "t": 1000**4,
    "tb": 1000**4,
    "tib": 1 << 40,
}


def parse_size(text: str) -> int:
    """``"8MiB"`` -> 8388608; ``"5MB"`` -> 5000000; plain numbers are bytes."""
    m = re.fullmatch(r"\s*(\d+)\s*([a-zA-Z]*)\s*", text)
    if not m or m.group(2).lower() not in _UNITS:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 8MiB, 64MB, 1048576)")
    return int(m.group(1)) * _UNITS[m.group(2).lower()]


_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_duration(text: str) -> timedelta:
    """``"7d"`` -> 7 days; ``"1d12h"``, ``"90m"``, ``"30s"``, ``"2w"``: whole numbers of
    seconds, minutes, hours, days or weeks, one after another."""
    spec = text.strip().lower()
    if not re.fullmatch(r"(\d+\s*[smhdw]\s*)+", spec):
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (e.g. 7d, 12h, 1d12h, 30m)")
    parts = re.findall(r"(\d+)\s*([smhdw])", spec)
    return timedelta(seconds=sum(int(n) * _DURATION_UNITS[u] for n, u in parts))


def _int_at_least(minimum: int, rule: str) -> Callable[[str], int]:
    """An argparse ``type``: a whole number not below ``minimum`` (``rule`` says so)."""

    def parse(text: str) -> int:
        try:
            n = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if n < minimum:
            raise argparse.ArgumentTypeError(f"{rule}, got {n}")
        return n

    return parse


_positive = _int_at_least(1, "must be at least 1")
_non_negative = _int_at_least(0, "must not be negative")


def _page_size(text: str) -> int:
    """``--page-size``: keys per ListObjects request, 1 to 1000 (what S3 returns at most)."""
    n = _positive(text)
    if n > 1000:
        raise argparse.ArgumentTypeError(f"must be at most 1000 (S3's largest page), got {n}")
    return n


class _OutputFormat(argparse.Action):
    """The aws CLI's ``--output json|text|table``, refused naming what objsdk has instead
    (``--json``), so a script written for aws fails with the remedy."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        instead = "use --json" if values == "json" else "objsdk prints text, or JSON with --json"
        raise CliError(f"--output {values} is not supported; {instead}", EXIT_BAD_ARGS)


class _Parser(argparse.ArgumentParser):
    """Bad arguments raise CliError (exit 252) instead of argparse's exit 2, naming the
    option at fault. Options are never abbreviated (``--inc`` is not ``--include``), as
    with the aws CLI: a typo is an error, not another option."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        raise CliError(f"{self.prog}: {message} (see {self.prog.split()[0]} --help)", EXIT_BAD_ARGS)

    def parse_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> argparse.Namespace:
        ns, extras = self.parse_known_args(args, namespace)
        if extras:
            where = f"{self.prog} {ns.command}" if getattr(ns, "command", None) else self.prog
            options = [a for a in extras if a.startswith("-") and a != "-"]
            if options:
                bad = options[0].split("=", 1)[0]
                raise CliError(f"{where}: unknown option {bad} (see {where} --help)", EXIT_BAD_ARGS)
            raise CliError(
                f"{where}: unexpected argument {extras[0]!r} (see {where} --help)", EXIT_BAD_ARGS
            )
        return ns


GLOBAL_DEFAULTS = {
    "endpoint_url": None,
    "region": None,
    "profile": None,
    "quiet": False,
    "json": False,
    "debug": False,
    "no_progress": False,
    "only_show_errors": False,
    "ca_bundle": None,
    "no_verify_ssl": False,
    "no_sign_request": False,
}


def _global_options() -> _Parser:
    g = _Parser(add_help=False)
    group = g.add_argument_group("global options")
    # SUPPRESS: an option given before the command is not reset by the command's parser.
    s = argparse.SUPPRESS
    group.add_argument("--endpoint-url", default=s, help="S3 endpoint (else AWS_ENDPOINT_URL...)")
    group.add_argument("--region", default=s, help="region (else AWS_REGION...)")
    group.add_argument("--profile", default=s, help="profile in ~/.aws (else AWS_PROFILE)")
    group.add_argument("-q", "--quiet", action="store_true", default=s, help="no progress output")
    group.add_argument("--no-progress", action="store_true", default=s, help="no progress bar")
    group.add_argument(
        "--only-show-errors", action="store_true", default=s, help="print errors and warnings only"
    )
    group.add_argument(
        "--ca-bundle",
        default=s,
        metavar="PATH",
        help="CA bundle that checks the endpoint's TLS certificate (else AWS_CA_BUNDLE...)",
    )
    group.add_argument(
        "--no-verify-ssl",
        action="store_true",
        default=s,
        help="do not check the endpoint's TLS certificate (a warning says so)",
    )
    group.add_argument(
        "--no-sign-request",
        action="store_true",
        default=s,
        help="send unsigned requests (public buckets); no credentials are looked for",
    )
    group.add_argument("--json", action="store_true", default=s, help="JSON output")
    group.add_argument("--output", action=_OutputFormat, default=s, help=s)
    group.add_argument("--debug", action="store_true", default=s, help="log and show tracebacks")
    return g


def _transfer_options(p: argparse.ArgumentParser, *, threshold: bool = True) -> None:
    p.add_argument(
        "--parallel",
        type=_positive,
        default=None,
        help="parts in flight per large file (one file: adapts to the network; several: 4)",
    )
    p.add_argument("--jobs", type=_positive, default=16, help="files in flight at once (16)")
    p.add_argument("--part-size", type=parse_size, default=None, help="multipart part size")
    if threshold:
        p.add_argument(
            "--multipart-threshold",
            type=parse_size,
            default=None,
            help="files at least this big are uploaded in parts (default 64MiB)",
        )
    p.add_argument(
        "--no-resume",
        dest="resume",
        action="store_false",
        help="uploads of files start over (and abort what an earlier run left) instead of "
        "resuming; any failure then aborts them",
    )
    _dry_run(p)
    _object_fields(p)


def _exact_key(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--exact-key",
        action="store_true",
        help="the path is one whole key, not a prefix: only that key's uploads",
    )


def _dry_run(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--dry-run",
        "--dryrun",
        dest="dry_run",
        action="store_true",
        help="print what would be done",
    )


def _metadata(text: str) -> dict[str, str]:
    """``k=v[,k2=v2...]`` or a JSON object, as the aws CLI's ``--metadata``."""
    text = text.strip()
    if text.startswith("{"):
        try:
            value = json.loads(text)
        except ValueError as e:
            raise argparse.ArgumentTypeError(f"not a JSON object: {e}") from None
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            raise argparse.ArgumentTypeError('a JSON object of strings, e.g. {"k": "v"}')
        return {str(k): v for k, v in value.items()}
    pairs: dict[str, str] = {}
    for item in text.split(","):
        k, eq, v = item.partition("=")
        if not eq or not k.strip():
            raise argparse.ArgumentTypeError(f"expected KEY=VALUE[,KEY=VALUE...], got {text!r}")
        pairs[k.strip()] = v
    return pairs


class _MergeMetadata(argparse.Action):
    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        merged = dict(getattr(namespace, self.dest, None) or {})
        merged.update(values)
        setattr(namespace, self.dest, merged)


def _object_fields(p: argparse.ArgumentParser) -> None:
    """What is stored with uploaded objects."""
    p.add_argument(
        "--content-type", default=None, help="Content-Type (default: guessed from the name)"
    )
    p.add_argument(
        "--no-guess-mime-type",
        dest="guess_mime_type",
        action="store_false",
        help="no Content-Type guessed from file names",
    )
    p.add_argument(
        "--metadata",
        type=_metadata,
        action=_MergeMetadata,
        default=None,
        metavar="K=V[,K=V]",
        help="user metadata (x-amz-meta-*); repeatable, or a JSON object",
    )
    p.add_argument("--cache-control", default=None, help="Cache-Control stored with objects")
    p.add_argument("--content-encoding", default=None, help="Content-Encoding stored with objects")
    p.add_argument(
        "--storage-class", default=None, help="storage class (STANDARD, STANDARD_IA, GLACIER...)"
    )
    p.add_argument(
        "--metadata-directive",
        type=str.upper,
        choices=("COPY", "REPLACE"),
        default=None,
        help="server-side copies: COPY keeps the source's type, metadata and headers (the "
        "default), REPLACE stores only those given (implied by --metadata), as aws s3 cp",
    )
    p.add_argument(
        "--acl",
        default=None,
        choices=CANNED_ACLS,
        help="canned ACL for uploads and copies (bucket-owner-full-control...)",
    )
    p.add_argument(
        "--sse",
        default=None,
        choices=("AES256", "aws:kms"),
        help="server-side encryption of the objects written, as aws s3 cp: AES256 (keys "
        "the service manages) or aws:kms (a KMS key)",
    )
    p.add_argument(
        "--sse-kms-key-id",
        default=None,
        metavar="KEY_ID",
        help="the KMS key of --sse aws:kms (default: the service's)",
    )


def _filter_options(p: argparse.ArgumentParser) -> None:
    """``--exclude``/``--include``, kept in the order given (the last match decides)."""
    for flag, what in (("--exclude", "leave out"), ("--include", "take back")):
        p.add_argument(
            flag,
            action=FilterAction,
            dest="filters",
            metavar="PATTERN",
            default=None,
            help=f"{what} paths matching PATTERN (relative to the source; * crosses /)",
        )


def _one_of(
    p: argparse.ArgumentParser, dest: str, default: object, *flags: tuple[str, object, str]
) -> None:
    """Flags of which at most one may be given, each setting ``dest`` to its value."""
    group = p.add_mutually_exclusive_group()
    for flag, value, help_text in flags:
        group.add_argument(
            flag, dest=dest, action="store_const", const=value, default=default, help=help_text
        )


def _selection_options(p: argparse.ArgumentParser) -> None:
    """Which local files and objects a recursive command takes."""
    _one_of(
        p,
        "follow_symlinks",
        None,
        (
            "--follow-symlinks",
            True,
            "cross symlinked local directories (each once); default: links to files only",
        ),
        ("--no-follow-symlinks", False, "leave every local symlink out"),
    )


def _archive_options(p: argparse.ArgumentParser) -> None:
    """What downloads and copies do with objects in GLACIER or DEEP_ARCHIVE, as aws."""
    _one_of(
        p,
        "archived",
        "warn",
        (
            "--force-glacier-transfer",
            "force",
            "download or copy objects in GLACIER or DEEP_ARCHIVE too (restored ones; "
            "default: skipped with a warning, exit 2)",
        ),
        (
            "--ignore-glacier-warnings",
            "ignore",
            "skip objects in GLACIER or DEEP_ARCHIVE without a warning or exit 2",
        ),
    )


def build_parser() -> argparse.ArgumentParser:
    common = _global_options()
    parser = _Parser(
        prog="objsdk",
        description="Copy, list and stream objects on S3-compatible storage.",
        parents=[common],
        epilog="Exit codes: 0 ok, 1 a transfer failed, 2 files skipped, 130 interrupted "
        "(143 SIGTERM, 129 SIGHUP), "
        "252 bad arguments, 253 bad configuration, 254 service error, 255 other.",
    )
    parser.add_argument("--version", action="version", version=f"objsdk {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    def add(name: str, help_text: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help_text, description=help_text, parents=[common])

    p = add("ls", "list buckets, or the objects and prefixes under s3://bucket/prefix")
    p.add_argument("path", nargs="?", help="s3://bucket[/prefix]")
    p.add_argument("-r", "--recursive", action="store_true", help="every key, not one level")
    p.add_argument(
        "--human-readable", action="store_true", help="sizes in KiB, MiB... (default: bytes)"
    )
    p.add_argument("--bytes", action="store_true", help=argparse.SUPPRESS)  # the default now
    p.add_argument("--summarize", action="store_true", help="print totals")
    p.add_argument(
        "--page-size",
        type=_page_size,
        default=1000,
        help="keys per ListObjects request, 1 to 1000 (default 1000), as aws s3 ls: every "
        "key is still listed",
    )

    p = add("mb", "make a bucket")
    p.add_argument("bucket", help="s3://bucket")

    p = add("rb", "remove an empty bucket")
    p.add_argument("bucket", help="s3://bucket")
    p.add_argument("--force", action="store_true", help="delete every object first")

    p = add("cp", "copy files and objects (local<->s3, s3->s3, '-' for stdin/stdout)")
    p.add_argument("source")
    p.add_argument("dest")
    p.add_argument("-r", "--recursive", action="store_true", help="a directory or prefix")
    _transfer_options(p)
    _selection_options(p)
    _filter_options(p)
    _archive_options(p)

    p.add_argument(
        "--expected-size",
        type=parse_size,
        default=None,
        metavar="SIZE",
        help="standard input: its size, if near or above 10,000 parts (156 GiB at 16 MiB "
        "parts), so the parts are made large enough, as aws s3 cp takes it",
    )

    p = add("mv", "move: copy, then remove the source once the copy is verified")
    p.add_argument("source")
    p.add_argument("dest")
    p.add_argument("-r", "--recursive", action="store_true", help="a directory or prefix")
    _transfer_options(p)
    _selection_options(p)
    _filter_options(p)
    _archive_options(p)

    p = add("sync", "copy what is new or changed, like 'aws s3 sync'")
    p.add_argument("source")
    p.add_argument("dest")
    p.add_argument("--delete", action="store_true", help="delete what the source lacks")
    p.add_argument(
        "--checksum", action="store_true", help="compare content (CRC32C/MD5), not size+time"
    )
    p.add_argument("--size-only", action="store_true", help="compare sizes only, not times")
    p.add_argument(
        "--exact-timestamps",
        action="store_true",
        help="downloads: a same-sized file whose time differs from the object's is copied",
    )
    _transfer_options(p)
    _selection_options(p)
    _filter_options(p)
    _archive_options(p)

    p = add(
        "uploads",
        "list or abort the multipart uploads in progress (an interrupted upload kept to "
        "resume is one)",
    )
    actions = p.add_subparsers(dest="uploads_command", metavar="ACTION", parser_class=_Parser)
    actions.required = True
    q = actions.add_parser(
        "ls",
        help="list the uploads under s3://bucket[/prefix]",
        description="List the multipart uploads in progress under s3://bucket[/prefix]: "
        "when each began, its upload id, its key, and the file a run on this machine "
        "resumes it from. The path is a prefix: s3://b/k lists the uploads of k2 and k/part "
        "too (--exact-key: of k only).",
        parents=[common],
    )
    q.add_argument("path", help="s3://bucket[/prefix]")
    _exact_key(q)
    q = actions.add_parser(
        "abort",
        help="abort the uploads under s3://bucket[/prefix] (--older-than or --all), or "
        "one upload of s3://bucket/key (--upload-id)",
        description="Abort the multipart uploads in progress under s3://bucket[/prefix] "
        "that began more than --older-than ago (the server's clock), or --all of them, "
        "another writer's live upload included: their stored parts are freed. The path "
        "is a prefix: s3://b/k names the uploads of k2 and k/part too (--exact-key: of k "
        "only). --upload-id ID aborts that one upload of the key s3://bucket/key and "
        "nothing else, as aws s3api abort-multipart-upload --key --upload-id does.",
        parents=[common],
    )
    q.add_argument("path", help="s3://bucket[/prefix], or s3://bucket/key")
    which = q.add_mutually_exclusive_group(required=True)
    which.add_argument(
        "--older-than",
        type=parse_duration,
        metavar="DURATION",
        help="only uploads that began more than this long ago: 7d, 12h, 1d12h, 30m",
    )
    which.add_argument("--all", action="store_true", help="every upload under the prefix")
    which.add_argument(
        "--upload-id",
        metavar="ID",
        help="only this upload of the key s3://bucket/key (whatever its age)",
    )
    _exact_key(q)
    _dry_run(q)

    p = add("cat", "write an object (or a byte range of it) to standard output")
    p.add_argument("path", help="s3://bucket/key")
    p.add_argument("--offset", type=_non_negative, default=0, help="first byte")
    p.add_argument("--length", type=_non_negative, default=None, help="number of bytes")

    p = add("rm", "delete an object, or everything under a prefix")
    p.add_argument("path", help="s3://bucket/key or s3://bucket/prefix/")
    p.add_argument("-r", "--recursive", action="store_true", help="everything under the prefix")
    _dry_run(p)
    _filter_options(p)

    p = add("stat", "show an object's size, ETag, date, type, checksums and metadata")
    p.add_argument("path", help="s3://bucket/key")

    p = add("presign", "print a presigned URL for an object")
    p.add_argument("path", help="s3://bucket/key")
    p.add_argument("--expires-in", type=_positive, default=3600, help="seconds (max 604800)")
    p.add_argument("--method", default="GET", help="HTTP method (GET, PUT...)")

    p = add("extract", "extract a remote tar archive into a local directory, as it streams")
    p.add_argument("source", help="s3://bucket/archive.tar[.gz|.bz2|.xz]")
    p.add_argument("dest", help="local directory")
    p.add_argument(
        "--readahead",
        type=_non_negative,
        default=None,
        help="parts fetched ahead (default: adapts to the network, as Client.open does)",
    )

    p = add("index", "index tar shards by sample for ShardDataset (see docs/datasets.md)")
    p.add_argument("path", help="s3://bucket/prefix/ or a shard pattern")
    p.add_argument("--jobs", type=_positive, default=8, help="shards read at once")

    add(
        "bench",
        "run the performance suite's quick mode against the endpoint; further arguments "
        "go to the suite (--full: the whole suite)",
    )
    return parser
