"""Shared benchmark machinery: a server to measure against, interleaved runs, ratios.

Every benchmark runs each variant ``--runs`` times, interleaved (A B C, B C A, C A B,
...) so slow drift of the machine hits all variants alike, and reports the median
throughput of each and its ratio to the baseline measured in the same run.

Server: the local MinIO objsdk builds and starts (default), or your own S3 endpoint
when ``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID`` and ``AWS_SECRET_ACCESS_KEY`` are set.
On your endpoint a benchmark writes only into buckets it creates itself
(:meth:`Server.scratch_bucket`), and removes them with everything in them when it ends,
also when it fails or is interrupted.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from objsdk import Client, LocalMinio
from objsdk.bench.profiles import PROFILES, proxied_endpoint
from objsdk.bench.target import remove_bucket
from objsdk.testing import Toxiproxy

MiB = 1 << 20
GiB = 1 << 30


@dataclass
class Server:
    """Where the benchmark talks to: endpoint and credentials, plus a client."""

    endpoint: str
    access_key: str
    secret_key: str
    minio: LocalMinio | None = None
    client: Client = field(init=False)
    made: list[str] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        self.client = Client(self.endpoint, self.access_key, self.secret_key)

    def boto3(self) -> Any:
        """A boto3 S3 client for the same server (the comparison baseline)."""
        import boto3
        import botocore.config

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
            region_name="us-east-1",
            config=botocore.config.Config(s3={"addressing_style": "path"}),
        )

    def scratch_bucket(self, bucket: str) -> None:
        """Make ``bucket`` the benchmark's own. On the local MinIO (started for this run)
        it is created if missing. On your endpoint it must not exist yet: the benchmark
        creates it, and removes it with its contents at the end, so it never writes into,
        or deletes from, a bucket it did not make."""
        if self.minio is not None:
            if not self.client.bucket_exists(bucket):
                self.client.create_bucket(bucket)
            return
        if self.client.bucket_exists(bucket):
            raise SystemExit(
                f"bucket {bucket!r} already exists at {self.endpoint}: the benchmark writes "
                "into a bucket of its own and removes it when it ends, so it does not use "
                f"one that is there. Remove it (objsdk rm --recursive s3://{bucket}/ && "
                f"objsdk rb s3://{bucket}) if an earlier run left it, or unset "
                "AWS_ENDPOINT_URL to measure a local MinIO."
            )
        self.client.create_bucket(bucket)
        self.made.append(bucket)

    def remove_scratch(self) -> None:
        """Remove the buckets :meth:`scratch_bucket` made, with everything in them."""
        while self.made:
            bucket = self.made.pop()
            try:
                remove_bucket(self.client, bucket)
            except Exception as exc:  # reported; the next bucket is still removed
                print(f"could not remove bucket {bucket}: {exc}", file=sys.stderr)

    def env(self) -> dict[str, str]:
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
        }


@contextlib.contextmanager
def server() -> Iterator[Server]:
    """Your endpoint from AWS_* variables, else a local MinIO for the duration."""
    endpoint = os.environ.get("AWS_ENDPOINT_URL")
    if endpoint:
        env = os.environ
        yours = Server(endpoint, env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"])
        try:
            yield yours
        finally:
            yours.remove_scratch()
        return
    with LocalMinio() as minio:
        yield Server(minio.endpoint, minio.access_key, minio.secret_key, minio)


def profile_option(p: argparse.ArgumentParser, default: str = "loopback") -> None:
    """``--profile``: the network profile (objsdk.bench.profiles) between the clients
    and the server; see :func:`profile_endpoint`."""
    p.add_argument(
        "--profile",
        choices=sorted(PROFILES),
        default=default,
        help=f"the network between the clients and the server (Toxiproxy; default {default})",
    )


@contextlib.contextmanager
def profile_endpoint(endpoint: str, name: str) -> Iterator[str]:
    """The endpoint through which to reach ``endpoint`` on the network profile ``name``:
    ``endpoint`` itself on loopback, else a Toxiproxy (started for the duration) with
    the profile's toxics."""
    profile = PROFILES[name]
    print(f"profile: {profile.name} ({profile.description})")
    with contextlib.ExitStack() as stack:
        toxiproxy = stack.enter_context(Toxiproxy()) if profile.proxied else None
        yield stack.enter_context(proxied_endpoint(endpoint, profile, toxiproxy))


def random_file(size: int, directory: str | None = None) -> Path:
    """A temp file of ``size`` incompressible bytes (the caller deletes it)."""
    fd, name = tempfile.mkstemp(prefix="objsdk-perf-", dir=directory)
    block = os.urandom(8 * MiB)
    with os.fdopen(fd, "wb") as f:
        left = size
        while left:
            n = min(left, len(block))
            f.write(block[:n])
            left -= n
            block = block[1:] + block[:1]  # no two blocks alike
    return Path(name)


def upload_random(client: Client, bucket: str, key: str, size: int) -> None:
    """Upload ``size`` random bytes under ``key`` unless an object of that size is there."""
    with contextlib.suppress(Exception):
        if client.head_object(bucket, key).size == size:
            return
    path = random_file(size)
    try:
        with path.open("rb") as f:
            client.put_object(bucket, key, f)
    finally:
        path.unlink()


@dataclass
class Result:
    name: str
    seconds: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)  # this process's user+sys seconds
    nbytes: int = 0
    extra: dict[str, float] = field(default_factory=dict)

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    @property
    def cpu_median(self) -> float:
        return statistics.median(self.cpu)

    @property
    def mb_per_s(self) -> float:
        return self.nbytes / self.median / 1e6


def interleave(
    variants: dict[str, Callable[[], int]],
    runs: int,
    *,
    warmup: bool = True,
    settle: Callable[[], None] | None = None,
) -> dict[str, Result]:
    """Time each variant ``runs`` times in rotating order; each returns bytes moved.

    CPU is this process's, plus that of the child processes it waited for during the
    run (a tool run as a command). ``settle()``, if given, runs untimed before every
    run and once at the end (for example to flush the previous run's writes to disk).
    """
    names = list(variants)
    results = {n: Result(n) for n in names}
    if warmup:
        for n in names:
            if settle is not None:
                settle()
            variants[n]()
    for r in range(runs):
        order = names[r % len(names) :] + names[: r % len(names)]
        for n in order:
            if settle is not None:
                settle()
            c0, k0, t0 = time.process_time(), _children_cpu(), time.perf_counter()
            results[n].nbytes = variants[n]()
            results[n].seconds.append(time.perf_counter() - t0)
            results[n].cpu.append(time.process_time() - c0 + _children_cpu() - k0)
    if settle is not None:
        settle()
    return results


def _children_cpu() -> float:
    """User + system seconds of the child processes waited for so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def side_by_side(
    pythons: Mapping[str, str],
    code: str,
    cases: Sequence[str],
    argv: Callable[[str], list[str]],
    runs: int,
    env: Mapping[str, str],
    cwd: str,
) -> dict[tuple[str, str], list[dict[str, float]]]:
    """Each case through each install of objsdk: ``python -c code *argv(case)`` in a
    fresh child process of each of ``pythons`` (name: interpreter) in turn, ``runs``
    rounds after an uncounted warm-up round, the order rotating every round so that
    each goes first as often. The child prints ``{"wall": s, "cpu": s}`` of its timed
    part (its own CPU, all threads); these are returned by (case, name)."""
    names = list(pythons)
    results: dict[tuple[str, str], list[dict[str, float]]] = {}
    for run in range(runs + 1):  # the first round warms up and is not counted
        for case in cases:
            order = names[run % len(names) :] + names[: run % len(names)]
            for who in order:
                out = subprocess.run(
                    [pythons[who], "-c", code, *argv(case)],
                    env=dict(env),
                    # Not the checkout: `python -c` puts the working directory first
                    # on sys.path, which would make the baseline import this tree.
                    cwd=cwd,
                    capture_output=True,
                    text=True,
                )
                if out.returncode:
                    raise SystemExit(f"{who} {case!r} failed:\n{out.stderr}")
                if run:
                    results.setdefault((case, who), []).append(json.loads(out.stdout))
    return results


def side_by_side_table(
    results: dict[tuple[str, str], list[dict[str, float]]],
    cases: Sequence[str],
    size_mib: int,
    runs: int,
) -> tuple[float, list[dict[str, object]]]:
    """Print the median throughput and CPU per GiB of each case for ``old`` and ``new``
    (:func:`side_by_side`'s names) as a Markdown table; the lowest new/old throughput
    ratio, and the rows (for --json)."""
    gib = size_mib / 1024
    print(f"\n{size_mib} MiB, median of {runs} interleaved runs (after a warm-up)\n")
    print("| case | old MiB/s | new MiB/s | new/old | old CPU-s/GiB | new CPU-s/GiB |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    worst = float("inf")
    rows: list[dict[str, object]] = []
    for case in cases:
        row = {}
        for who in ("old", "new"):
            timed = results[(case, who)]
            wall = statistics.median(r["wall"] for r in timed)
            cpu = statistics.median(r["cpu"] for r in timed)
            row[who] = (size_mib / wall, cpu / gib)
        ratio = row["new"][0] / row["old"][0]
        worst = min(worst, ratio)
        print(
            f"| {case} | {row['old'][0]:.0f} | {row['new'][0]:.0f} | {ratio:.2f}x "
            f"| {row['old'][1]:.2f} | {row['new'][1]:.2f} |"
        )
        rows.append(
            {
                "case": case,
                "ratio": round(ratio, 3),
                **{
                    f"{who}_{what}": value
                    for who in ("old", "new")
                    for what, value in (
                        ("mib_per_s", round(row[who][0], 1)),
                        ("cpu_s_per_gib", round(row[who][1], 3)),
                        ("runs_s", [round(r["wall"], 3) for r in results[(case, who)]]),
                    )
                },
            }
        )
    print(f"\nlowest new/old ratio: {worst:.2f}x")
    return worst, rows


def report(
    title: str,
    results: dict[str, Result],
    baseline: str,
    targets: dict[str, tuple[str, float]] | None = None,
) -> dict[str, object]:
    """Print a table of medians and ratios; return it as a dict (for --json)."""
    base = results[baseline].median
    print(f"\n## {title}")
    print(
        f"{'variant':<32} {'median s':>9} {'MB/s':>7} {'client cpu s':>13} {'vs ' + baseline:>26}"
    )
    rows = []
    for r in results.values():
        ratio = base / r.median
        print(
            f"{r.name:<32} {r.median:>9.3f} {r.mb_per_s:>7.0f} {r.cpu_median:>13.3f} "
            f"{ratio:>25.2f}x"
        )
        rows.append(
            {
                "variant": r.name,
                "median_s": round(r.median, 4),
                "mb_per_s": round(r.mb_per_s, 1),
                "ratio": round(ratio, 3),
                "client_cpu_s": round(r.cpu_median, 4),
                "runs_s": [round(s, 4) for s in r.seconds],
            }
        )
    verdicts = [
        verdict(results, name, against, minimum)
        for name, (against, minimum) in (targets or {}).items()
    ]
    return {"title": title, "rows": rows, "targets": verdicts}


def verdict(
    results: dict[str, Result], name: str, against: str, minimum: float
) -> dict[str, object]:
    """Print and return whether ``name`` runs at least ``minimum`` x ``against``."""
    ratio = results[against].median / results[name].median
    print(verdict_line(name, against, ratio, minimum))
    return {"variant": name, "against": against, "ratio": round(ratio, 3), "target": minimum}


def verdict_line(name: str, against: str, ratio: float, minimum: float) -> str:
    """``target: name >= minimum x against: ratio x PASS`` (or MISS)."""
    ok = ratio >= minimum
    return f"target: {name} >= {minimum}x {against}: {ratio:.2f}x {'PASS' if ok else 'MISS'}"


def parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--runs", type=int, default=5, help="timed runs per variant (default 5)")
    p.add_argument("--json", type=Path, help="also write the results here")
    return p


def write_json(path: Path | None, sections: list[dict[str, object]]) -> None:
    if path is not None:
        path.write_text(json.dumps({"argv": sys.argv, "sections": sections}, indent=2))


S5CMD_MODULE = "github.com/peak/s5cmd/v2"
S5CMD_VERSION = "v2.3.0"


def s5cmd_binary() -> str | None:
    """``$OBJSDK_S5CMD_BINARY``, one on PATH, or s5cmd built once from its Go module
    into objsdk's cache beside MinIO; None without a Go toolchain.

    Built from the downloaded module (``go mod download``, then ``go build`` there)
    rather than by ``go install module@version``, which also asks the module proxy for
    the module's version list, and some proxies refuse that list for this module.
    """
    explicit = os.environ.get("OBJSDK_S5CMD_BINARY") or shutil.which("s5cmd")
    if explicit:
        return explicit
    import fcntl
    import json

    from objsdk.testing.gobuild import cache_dir, find_go

    go = find_go()
    target = cache_dir() / "bin" / f"s5cmd-{S5CMD_VERSION}" / "s5cmd"
    if target.is_file():
        return str(target)
    if go is None:
        return None
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent.parent / f".s5cmd-{S5CMD_VERSION}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not target.is_file():
            print(f"building s5cmd {S5CMD_VERSION} once (a minute or two)...", flush=True)
            info = subprocess.run(
                [go, "mod", "download", "-json", f"{S5CMD_MODULE}@{S5CMD_VERSION}"],
                capture_output=True, text=True, check=True,
            )  # fmt: skip
            source = json.loads(info.stdout)["Dir"]
            staging = target.with_name("s5cmd.tmp")
            subprocess.run(
                [go, "build", "-mod=mod", "-buildvcs=false", "-o", str(staging), "."],
                cwd=source, check=True,
            )  # fmt: skip
            staging.replace(target)
    return str(target)
