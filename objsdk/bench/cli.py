"""The command line: ``python -m objsdk.bench`` (also ``perf/run.py``)."""

from __future__ import annotations

import argparse
import contextlib
import datetime
import importlib.util
import logging
import shlex
import shutil
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from objsdk._extras import needs_extra
from objsdk.bench import downloads, resume, seqread, sweep, tarx, uploads, zerocopy
from objsdk.bench.context import Context, Options, scratch_dir
from objsdk.bench.machine import describe
from objsdk.bench.output import markdown, markdown_table, plot, write_csv
from objsdk.bench.peers import PEERS
from objsdk.bench.profiles import PROFILES, Profile
from objsdk.bench.runner import Group, GroupResult, MiB, run_group
from objsdk.bench.target import open_target

if TYPE_CHECKING:
    from objsdk._core.client_config import ClientConfig

__all__ = ["BENCHMARKS", "QUICK", "main", "parse_args"]

PerProfile = Callable[[Context, Profile], Iterator[Group]]

#: Benchmark name -> its groups for one profile (None: runs once, off the network).
BENCHMARKS: dict[str, PerProfile | None] = {
    "read": seqread.groups,
    "tar": tarx.groups,
    "resume": resume.groups,
    "upload": uploads.groups,
    "download": downloads.groups,
    "sweep": sweep.groups,
    "zerocopy": None,
}

#: What --quick changes (each still overridable by its own flag).
QUICK = {
    "profiles": ["loopback", "lan"],
    "sizes_mib": [32.0],
    "runs": 3,
    "sweep": [1, 4],
    "peers": ["curl", "requests", "boto3"],
    "tar_members_mib": [1.0],
}
FULL = {
    "profiles": list(PROFILES),
    "sizes_mib": [256.0],
    "runs": 5,
    "sweep": [1, 2, 4, 8, 16],
    "peers": list(PEERS),
    "tar_members_mib": [1.0, 10.0, 100.0],
    "tar_totals_mib": [256.0, 1024.0],
    "cuts_mib": [16.0, 64.0, 256.0],
}


def _names(choices: Sequence[str]) -> Callable[[str], list[str]]:
    def parse(text: str) -> list[str]:
        names = [n.strip() for n in text.split(",") if n.strip()]
        unknown = [n for n in names if n not in choices]
        if unknown or not names:
            raise argparse.ArgumentTypeError(
                f"unknown {', '.join(unknown) or 'empty list'}; choose from {', '.join(choices)}"
            )
        return names

    return parse


def _numbers(kind: Callable[[str], float]) -> Callable[[str], list[float]]:
    def parse(text: str) -> list[float]:
        try:
            values = [kind(x) for x in text.split(",") if x.strip()]
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected comma-separated numbers: {text!r}"
            ) from None
        if not values or any(v <= 0 for v in values):
            raise argparse.ArgumentTypeError(f"expected positive numbers: {text!r}")
        return values

    return parse


# The command the suite's usage names, unless its caller is another (``objsdk bench``).
PROG = "python -m objsdk.bench"


def build_parser(prog: str = PROG) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog,
        description="objsdk's perf suite: objsdk and its peers on named network profiles.",
        epilog="Results go to OUTPUT/runs.csv, results.md and *.png. See docs/perf-suite.md.",
    )
    p.add_argument("--quick", action="store_true", help="a small run (under 3 minutes)")
    p.add_argument(
        "--benchmarks",
        type=_names(list(BENCHMARKS)),
        help=f"comma-separated, default all: {','.join(BENCHMARKS)}",
    )
    p.add_argument(
        "--profiles",
        type=_names(list(PROFILES)),
        help=f"comma-separated, default all: {','.join(PROFILES)}",
    )
    p.add_argument(
        "--peers",
        type=_names(list(PEERS)),
        help=f"comma-separated, default all installed: {','.join(PEERS)}",
    )
    p.add_argument(
        "--sizes",
        dest="sizes_mib",
        type=_numbers(float),
        metavar="MIB,...",
        help="object sizes in MiB (default 256; quick 32)",
    )
    p.add_argument("--runs", type=int, help="timed runs per case (default 5; quick 3)")
    p.add_argument(
        "--sweep",
        type=_numbers(int),
        metavar="N,...",
        help="parallel/readahead settings of the sweep (default 1,2,4,8,16)",
    )
    p.add_argument(
        "--tar-totals",
        dest="tar_totals_mib",
        type=_numbers(float),
        metavar="MIB,...",
        help="tar sizes in MiB (default 256,1024; quick: --sizes)",
    )
    p.add_argument(
        "--tar-members",
        dest="tar_members_mib",
        type=_numbers(float),
        metavar="MIB,...",
        help="tar member sizes in MiB (default 1,10,100)",
    )
    p.add_argument(
        "--cuts",
        dest="cuts_mib",
        type=_numbers(float),
        metavar="MIB,...",
        help="resume: cut connections every N MiB (default 16,64,256; quick: size/4)",
    )
    p.add_argument("--output", type=Path, help="directory (default bench-results/<UTC time>)")
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    p.add_argument(
        "--no-warmup",
        dest="warmup",
        action="store_false",
        help="skip the untimed warm-up run of every case",
    )
    p.add_argument(
        "--endpoint",
        help="your S3 endpoint (default AWS_ENDPOINT_URL, else a local MinIO started for the run)",
    )
    p.add_argument("--access-key", help="default AWS_ACCESS_KEY_ID")
    p.add_argument("--secret-key", help="default AWS_SECRET_ACCESS_KEY (prefer the variable)")
    p.add_argument("--region", help="default AWS_REGION, else us-east-1")
    p.add_argument("--list", action="store_true", help="list benchmarks and profiles, and exit")
    return p


def parse_args(argv: Sequence[str], prog: str = PROG) -> tuple[argparse.Namespace, Options]:
    """The parsed flags and the resulting :class:`Options` (quick defaults applied)."""
    parser = build_parser(prog)
    args = parser.parse_args(list(argv))
    defaults = {**FULL, **QUICK} if args.quick else FULL
    for name, value in defaults.items():
        if getattr(args, name, None) is None:
            setattr(args, name, value)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    sizes = [int(s * MiB) for s in args.sizes_mib]
    if args.quick:
        args.tar_totals_mib = args.tar_totals_mib if "tar_totals_mib" in _given(argv) else []
        tar_totals = [int(t * MiB) for t in args.tar_totals_mib] or [min(sizes)]
        cuts = (
            [int(c * MiB) for c in args.cuts_mib]
            if "cuts_mib" in _given(argv)
            else [max(1, min(sizes) // 4)]
        )
    else:
        tar_totals = [int(t * MiB) for t in args.tar_totals_mib]
        cuts = [int(c * MiB) for c in args.cuts_mib]
    options = Options(
        benchmarks=args.benchmarks or list(BENCHMARKS),
        profiles=args.profiles,
        sizes=sizes,
        runs=args.runs,
        sweep=sorted(set(args.sweep)),
        peers=args.peers,
        tar_totals=tar_totals,
        tar_members=[int(m * MiB) for m in args.tar_members_mib],
        cuts=cuts,
        quick=args.quick,
        warmup=args.warmup,
    )
    return args, options


def _given(argv: Sequence[str]) -> set[str]:
    flags = {"--tar-totals": "tar_totals_mib", "--cuts": "cuts_mib"}
    return {dest for a in argv for flag, dest in flags.items() if a.split("=")[0] == flag}


def redacted(argv: Sequence[str]) -> str:
    """The command line with the values of credential flags hidden."""
    out: list[str] = []
    hide = False
    for a in argv:
        if hide:
            out.append("***")
            hide = False
        elif a in ("--secret-key", "--access-key"):
            out.append(a)
            hide = True
        elif a.startswith(("--secret-key=", "--access-key=")):
            out.append(a.split("=")[0] + "=***")
        else:
            out.append(a)
    return shlex.join(["python", "-m", "objsdk.bench", *out])


def list_all() -> None:
    print("benchmarks:")
    for name in BENCHMARKS:
        print(f"  {name}")
    print("profiles:")
    for profile in PROFILES.values():
        print("  " + profile.describe().replace("\n", "\n  "))
    print("peers: " + ", ".join(PEERS))


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def run_suite(
    args: argparse.Namespace,
    options: Options,
    command: str,
    config: ClientConfig | None = None,
) -> list[GroupResult]:
    output: Path = args.output or Path("bench-results") / datetime.datetime.now(
        datetime.timezone.utc
    ).strftime("%Y%m%d-%H%M%S")
    output.mkdir(parents=True, exist_ok=True)
    needs_proxy = any(PROFILES[p].proxied for p in options.profiles) or (
        "resume" in options.benchmarks
    )
    results: list[GroupResult] = []
    # Resumes and retries are expected on the cutting profiles: the tables count them.
    logging.getLogger("objsdk").setLevel(logging.ERROR)
    with contextlib.ExitStack() as stack:
        target = stack.enter_context(
            open_target(args.endpoint, args.access_key, args.secret_key, args.region, config=config)
        )
        toxiproxy = None
        if needs_proxy:
            from objsdk.testing import Toxiproxy

            toxiproxy = stack.enter_context(Toxiproxy())
        work = scratch_dir()
        stack.callback(shutil.rmtree, work, True)
        ctx = Context(options, target, toxiproxy, work)
        machine = describe(
            server=target.description,
            minio_version=target.minio_version,
            toxiproxy_version=toxiproxy.version() if toxiproxy is not None else None,
        )
        _log("\n".join(f"{k}: {v}" for k, v in machine.items()))
        _log(f"bucket: {target.bucket}\n")
        started = time.monotonic()
        for name in options.benchmarks:
            per_profile = BENCHMARKS[name]
            if per_profile is None:
                sources: Iterator[Group] = zerocopy.groups(ctx)
            else:
                sources = _chain(per_profile(ctx, PROFILES[p]) for p in options.profiles)
            for group in sources:
                _log(f"[{time.monotonic() - started:6.0f}s] {group.title} ...")
                result = run_group(group, options.runs, warmup=options.warmup, log=_log)
                results.append(result)
                print(markdown_table(result), flush=True)
        _log(f"all done in {time.monotonic() - started:.0f} s")
    notes = list(ctx.notes)
    write_csv(output / "runs.csv", results)
    plots: list[str] = []
    if args.no_plots:
        pass
    elif importlib.util.find_spec("matplotlib") is None:
        notes.append(needs_extra("plots skipped: matplotlib is not installed", "perf"))
    else:
        plots = plot(output, results)
    (output / "results.md").write_text(markdown(machine, command, results, notes, plots))
    for n in notes:
        _log(f"note: {n}")
    _log(f"results: {output}/results.md, {output}/runs.csv" + (", *.png" if plots else ""))
    return results


def _chain(iterators: Iterator[Iterator[Group]]) -> Iterator[Group]:
    for it in iterators:
        yield from it


def main(
    argv: Sequence[str] | None = None,
    *,
    config: ClientConfig | None = None,
    prog: str | None = None,
) -> int:
    """Run the suite with these arguments (default ``sys.argv[1:]``); the exit status.
    ``config`` gives what the flags do not (see :func:`~objsdk.bench.target.open_target`);
    ``prog`` is the command its usage and errors name (default :data:`PROG`)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args, options = parse_args(argv, prog or PROG)
    except SystemExit as exc:  # --help, or a bad flag (argparse printed why)
        return exc.code if isinstance(exc.code, int) else 2
    if args.list:
        list_all()
        return 0
    try:
        results = run_suite(args, options, redacted(argv), config)
    except ValueError as exc:
        print(f"objsdk.bench: {exc}", file=sys.stderr)
        return 2
    return 0 if results and all(r.results for r in results) else 1
