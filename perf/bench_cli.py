"""The command line against the usual ones: ``objsdk cp --recursive`` up and down for
many small files and some medium ones, and one large file each way, interleaved with
``s5cmd`` and ``aws s3`` on the same server.

Workloads (full mode; ``--quick`` shrinks them to check the script runs):
  2,000 x 4 KiB up / down         many small files: per-file cost dominates
  200 x 1 MiB up / down           medium files: per-file cost and bandwidth
  1 x 1 GiB up / down             one large file: bandwidth and parallel parts
  a 256 MiB tar extracted         ``objsdk extract`` against ``s5cmd cat | tar -x`` and
                                  ``aws s3 cp - | tar -x`` (64 members of 4 MiB)

Peers: ``s5cmd`` (built from its Go module on first use, like MinIO; skipped when no Go
toolchain is found) and ``aws s3`` (when ``aws`` is on PATH). Many-file downloads also
run perf/python_floor.py, the least a Python process does for them (standard library,
presigned URLs, no checksum and no fsync): what Python itself costs, in the same run.
Each tool is a fresh process per run, run ``--runs`` times in rotating order; the table
shows the median wall time, the median CPU of the child process (user + sys) and the
speed relative to s5cmd.
``--profile`` puts the tools behind a Toxiproxy network profile (objsdk.bench.profiles:
``wan`` is ~25 MB/s per connection and 20 ms), where parts in flight decide the speed.

Downloads go to a fresh directory on the same filesystem, removed between runs; before
each run, untimed, ``sync`` puts what earlier runs and the server wrote on disk, so no
tool's flush pays for another's writes, and only then the last run's files are removed,
so every tool starts the same time after their memory was freed (see
``bench_disk.py`` for why that matters on a VM).

    python perf/bench_cli.py [--runs 5] [--quick] [--jobs N] [--parallel N]
                             [--only small|medium|large]
                             [--profile loopback|lan|wan|flaky-wan] [--json out.json]
"""

from __future__ import annotations

import contextlib
import functools
import io
import os
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from common import MiB, parser, s5cmd_binary, server, write_json

from objsdk import Client
from objsdk.bench.profiles import PROFILES, proxied_endpoint
from objsdk.testing import Toxiproxy

BUCKET = "objsdk-perf-cli"


@dataclass
class Timing:
    name: str
    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)


# The many-file downloads' floor for any Python tool (perf/python_floor.py).
FLOOR = "python floor"


def objsdk_command() -> list[str]:
    script = Path(sys.executable).parent / "objsdk"
    return [str(script)] if script.exists() else [sys.executable, "-m", "objsdk.cli"]


def byte_compile_objsdk() -> None:
    """Compile objsdk's modules once, as installing a wheel does. From a clone (an
    editable install) with PYTHONDONTWRITEBYTECODE set, every objsdk process would
    compile all of them again: 0.3 s of CPU per run on the EPYC VM that no installed
    copy pays."""
    import compileall

    import objsdk

    compileall.compile_dir(os.path.dirname(objsdk.__file__), quiet=1)


def run_child(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Run one command; return its wall seconds and its CPU seconds (user + sys)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}): {proc.stderr[-2000:]!r}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def make_files(root: Path, count: int, size: int) -> None:
    root.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        (root / f"f{i:05d}.bin").write_bytes(os.urandom(size))


def clear_before_run(out: Path) -> None:
    """Before each run, untimed: the disk caught up, then the last run's files removed."""
    # Every run starts with nothing waiting for the disk: the data the tools (and MinIO)
    # wrote before is flushed here, not by the next run's own flush (objsdk's is durable
    # when cp returns; a syncfs or fsync would otherwise pay for the previous tool's
    # writes).
    os.sync()
    # Then the last run's files go, just before the next run: every tool starts as soon
    # after freeing the same memory. A VM that hands free memory back to its host makes
    # new page-cache pages cost up to ten times more a few seconds after
    # (perf/bench_disk.py); removed before the sync, the files of a tool that leaves its
    # writes to the kernel (s5cmd, aws) freed their pages seconds before the next tool ran.
    shutil.rmtree(out, ignore_errors=True)


def interleaved(
    commands: dict[str, Callable[[], list[str]]],
    env: dict[str, str],
    runs: int,
    settle: Callable[[], None],
) -> dict[str, Timing]:
    names = list(commands)
    timings = {n: Timing(n) for n in names}
    for r in range(runs + 1):  # the first round warms caches and is not counted
        for n in names[r % len(names) :] + names[: r % len(names)]:
            settle()
            wall, cpu = run_child(commands[n](), env)
            if r:
                timings[n].wall.append(wall)
                timings[n].cpu.append(cpu)
    settle()
    return timings


def report(title: str, timings: dict[str, Timing], nbytes: int) -> dict[str, object]:
    base = statistics.median(timings["s5cmd"].wall) if "s5cmd" in timings else None
    print(f"\n## {title}")
    print(f"{'tool':<12} {'median s':>9} {'MB/s':>8} {'child cpu s':>12} {'vs s5cmd':>9}")
    rows = []
    for t in timings.values():
        wall, cpu = statistics.median(t.wall), statistics.median(t.cpu)
        ratio = base / wall if base else float("nan")
        shown = f"{ratio:>8.2f}x" if base else f"{'-':>9}"
        print(f"{t.name:<12} {wall:>9.3f} {nbytes / wall / 1e6:>8.1f} {cpu:>12.3f} {shown}")
        rows.append(
            {
                "tool": t.name,
                "median_s": round(wall, 4),
                "cpu_s": round(cpu, 4),
                "vs_s5cmd": round(ratio, 3) if base else None,
                "runs_s": [round(w, 4) for w in t.wall],
            }
        )
    return {"title": title, "bytes": nbytes, "rows": rows}


def main() -> None:
    p = parser(__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="small workloads, to check it runs")
    p.add_argument("--jobs", type=int, default=None, help="objsdk --jobs (default: its own)")
    p.add_argument(
        "--parallel", type=int, default=None, help="objsdk --parallel (default: its own)"
    )
    p.add_argument("--big-mib", type=int, default=None, help="the large file's size")
    p.add_argument("--no-peers", action="store_true", help="objsdk alone")
    p.add_argument(
        "--profile",
        choices=sorted(PROFILES),
        default="loopback",
        help="the network between the tools and the server (Toxiproxy; default loopback)",
    )
    p.add_argument(
        "--only",
        choices=("small", "medium", "large", "archive"),
        action="append",
        help="run only these workloads (repeatable; default: all four)",
    )
    args = p.parse_args()
    runs = 1 if args.quick and args.runs == 5 else args.runs
    small_n, medium_n = (100, 10) if args.quick else (2000, 200)
    big = (args.big_mib or (32 if args.quick else 1024)) * MiB
    everything = {
        "small": (f"{small_n} x 4 KiB", small_n, 4096),
        "medium": (f"{medium_n} x 1 MiB", medium_n, MiB),
        "large": (f"1 x {big // MiB} MiB", 1, big),
    }
    chosen = args.only or [*everything, "archive"]
    workloads = [everything[w] for w in chosen if w in everything]
    byte_compile_objsdk()
    s5 = None if args.no_peers else s5cmd_binary()
    aws = None if args.no_peers else shutil.which("aws")
    print(f"objsdk: {' '.join(objsdk_command())}")
    if args.no_peers:
        print("peers: not run (--no-peers)")
    else:
        print(f"s5cmd: {s5 or 'not available (no Go toolchain)'}; aws: {aws or 'not installed'}")
    profile = PROFILES[args.profile]
    print(f"profile: {profile.name} ({profile.description})")
    sections = []
    with contextlib.ExitStack() as stack:
        srv = stack.enter_context(server())
        tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="objsdk-bench-cli-"))
        toxiproxy = stack.enter_context(Toxiproxy()) if profile.proxied else None
        url = stack.enter_context(proxied_endpoint(srv.endpoint, profile, toxiproxy))
        srv.scratch_bucket(BUCKET)
        env = {
            **os.environ,
            **srv.env(),
            "AWS_ENDPOINT_URL": url,  # the tools go through the profile's proxy
            "AWS_REGION": "us-east-1",
            "AWS_MAX_ATTEMPTS": "3",
        }
        jobs = ["--jobs", str(args.jobs)] if args.jobs else []
        if args.parallel:
            jobs += ["--parallel", str(args.parallel)]
        for title, count, size in workloads:
            src = Path(tmp) / f"src-{count}-{size}"
            make_files(src, count, size)
            data = f"s3://{BUCKET}/{count}x{size}/data/"
            subprocess.run(
                [*objsdk_command(), "cp", "-r", "-q", str(src), data], env=env, check=True
            )
            out = Path(tmp) / "out"

            clear = functools.partial(clear_before_run, out)

            up: dict[str, Callable[[], list[str]]] = {}
            down: dict[str, Callable[[], list[str]]] = {}
            dest = f"s3://{BUCKET}/{count}x{size}"
            up["objsdk"] = lambda src=src, dest=dest: [
                *objsdk_command(), "cp", "-r", "-q", *jobs, str(src), f"{dest}/objsdk/",
            ]  # fmt: skip
            down["objsdk"] = lambda data=data, out=out: [
                *objsdk_command(), "cp", "-r", "-q", *jobs, data, str(out),
            ]  # fmt: skip
            if s5:
                up["s5cmd"] = lambda src=src, dest=dest: [
                    s5, "--endpoint-url", url, "cp", f"{src}/*", f"{dest}/s5cmd/",
                ]  # fmt: skip
                down["s5cmd"] = lambda data=data, out=out: [
                    s5, "--endpoint-url", url, "cp", f"{data}*", f"{out}/",
                ]  # fmt: skip
            if aws:
                up["aws"] = lambda src=src, dest=dest: [
                    aws, "s3", "cp", "--recursive", "--only-show-errors", "--endpoint-url", url,
                    str(src), f"{dest}/aws/",
                ]  # fmt: skip
                down["aws"] = lambda data=data, out=out: [
                    aws, "s3", "cp", "--recursive", "--only-show-errors", "--endpoint-url", url,
                    data, str(out),
                ]  # fmt: skip
            if count > 1:
                urls = Path(tmp) / f"urls-{count}-{size}"
                signer = Client(url, srv.access_key, srv.secret_key)
                keys = [f"{count}x{size}/data/{p.name}" for p in sorted(src.iterdir())]
                urls.write_text("\n".join(signer.presign("GET", BUCKET, k) for k in keys))
                down[FLOOR] = lambda urls=urls, out=out: [
                    sys.executable, str(Path(__file__).with_name("python_floor.py")),
                    str(urls), str(out),
                ]  # fmt: skip
            nbytes = count * size
            sections.append(report(f"{title} up", interleaved(up, env, runs, clear), nbytes))
            sections.append(report(f"{title} down", interleaved(down, env, runs, clear), nbytes))
            shutil.rmtree(src)
        if "archive" in chosen:
            members, member_size = (8, 4 * MiB) if args.quick else (64, 4 * MiB)
            sections.append(
                archive_section(Path(tmp), env, url, s5, aws, members, member_size, runs)
            )
    write_json(args.json, sections)


def archive_section(
    tmp: Path,
    env: dict[str, str],
    url: str,
    s5: str | None,
    aws: str | None,
    members: int,
    member_size: int,
    runs: int,
) -> dict[str, object]:
    """A tar of ``members`` random files extracted as it streams: ``objsdk extract``
    against the peers' stream piped into ``tar -x`` (their CPU includes tar's)."""
    archive = tmp / "archive.tar"
    with tarfile.open(archive, "w") as tar:
        for i in range(members):
            info = tarfile.TarInfo(f"m{i:04d}.bin")
            info.size = member_size
            tar.addfile(info, io.BytesIO(os.urandom(member_size)))
    nbytes = archive.stat().st_size
    key = f"s3://{BUCKET}/archive/{archive.name}"
    subprocess.run([*objsdk_command(), "cp", "-q", str(archive), key], env=env, check=True)
    archive.unlink()
    out = tmp / "extracted"

    clear = functools.partial(clear_before_run, out)

    def piped(stream: str) -> list[str]:
        # pipefail: a failed download fails the run, not only a failed tar
        line = f"mkdir -p {shlex.quote(str(out))} && {stream} | tar -x -C {shlex.quote(str(out))}"
        return ["bash", "-o", "pipefail", "-c", line]

    commands: dict[str, Callable[[], list[str]]] = {
        "objsdk": lambda: [*objsdk_command(), "extract", "-q", key, str(out)]
    }
    if s5:
        stream = shlex.join([s5, "--endpoint-url", url, "cat", key])
        commands["s5cmd"] = lambda: piped(stream)
    if aws:
        stream_aws = shlex.join([aws, "s3", "cp", "--endpoint-url", url, key, "-"])
        commands["aws"] = lambda: piped(stream_aws)
    title = f"tar of {nbytes // MiB} MiB ({members} members) extracted"
    return report(title, interleaved(commands, env, runs, clear), nbytes)


if __name__ == "__main__":
    main()
