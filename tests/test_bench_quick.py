"""The perf suite's quick mode, end to end, so the suite never rots.

Runs ``python -m objsdk.bench --quick`` with tiny objects in a subprocess: it starts its
own MinIO and Toxiproxy, measures every benchmark on the quick profiles, and writes its
CSV, Markdown and (with matplotlib installed) PNG plots.
"""

from __future__ import annotations

import csv
import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from objsdk.bench.cli import BENCHMARKS, QUICK
from objsdk.bench.output import CSV_FIELDS

pytestmark = pytest.mark.integration

SIZE_MIB = 4


@pytest.fixture(scope="module")
def quick_run(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, subprocess.CompletedProcess[str]]:
    out = tmp_path_factory.mktemp("bench")
    # The suite must start its own MinIO, not pick up an endpoint from the environment.
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "objsdk.bench",
            "--quick",
            "--sizes",
            str(SIZE_MIB),
            "--output",
            str(out),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=170,
        check=False,
    )
    return out, proc


def test_quick_mode_succeeds(quick_run: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    _, proc = quick_run
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_quick_mode_prints_the_machine(
    quick_run: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    _, proc = quick_run
    for field in ("cores:", "memory:", "python:", "minio:", "objsdk:"):
        assert field in proc.stderr


def test_quick_mode_writes_every_run_to_csv(
    quick_run: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    out, _ = quick_run
    with (out / "runs.csv").open(newline="") as f:
        reader = csv.DictReader(f)
        assert tuple(reader.fieldnames or ()) == CSV_FIELDS
        rows = list(reader)
    assert {r["benchmark"] for r in rows} == set(BENCHMARKS)
    assert {r["profile"] for r in rows} == {*QUICK["profiles"], "local"}
    for r in rows:
        assert float(r["seconds"]) > 0
        assert int(r["bytes"]) > 0
        assert float(r["mib_per_s"]) > 0
        assert float(r["cpu_seconds"]) >= 0
    # Every case ran the quick mode's 3 timed runs.
    per_case: dict[tuple[str, ...], int] = {}
    for r in rows:
        key = (r["group"], r["client"], r["variant"])
        per_case[key] = per_case.get(key, 0) + 1
    assert set(per_case.values()) == {QUICK["runs"]}


def test_quick_mode_writes_a_markdown_table_per_group(
    quick_run: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    out, _ = quick_run
    text = (out / "results.md").read_text()
    assert text.startswith("# objsdk perf suite results")
    assert "Command: `python -m objsdk.bench --quick" in text
    for bench in BENCHMARKS:
        assert f"## {bench} (" in text
    tables = [line for line in text.splitlines() if line.startswith("| ") and "|---" not in line]
    rows = [t for t in tables if t.count("|") == 9]
    assert len(rows) > 20
    assert text.count("(baseline)") >= 10


@pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None, reason="no matplotlib")
def test_quick_mode_draws_throughput_and_scaling_plots(
    quick_run: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    out, _ = quick_run
    pngs = sorted(p.name for p in out.glob("*.png"))
    assert f"throughput-read-{SIZE_MIB}MiB.png" in pngs
    for profile in QUICK["profiles"]:
        assert f"scaling-{profile}-{SIZE_MIB}MiB.png" in pngs
    for name in pngs:
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_against_an_endpoint_it_only_touches_its_own_bucket(
    local_minio: Any, tmp_path: Path
) -> None:
    client = local_minio.client()
    mine = "keep-" + os.urandom(4).hex()
    client.create_bucket(mine)
    client.put_object(mine, "precious", b"do not touch")
    before = {b.name for b in client.list_buckets()}
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(local_minio.env())
    try:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "objsdk.bench",
                "--benchmarks",
                "read",
                "--profiles",
                "loopback",
                "--sizes",
                "1",
                "--runs",
                "1",
                "--peers",
                "requests",
                "--no-plots",
                "--output",
                str(tmp_path),
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert f"your endpoint {local_minio.endpoint}" in proc.stderr
        assert {b.name for b in client.list_buckets()} == before
        assert client.get_object(mine, "precious") == b"do not touch"
        assert local_minio.secret_key not in proc.stderr + proc.stdout
        assert local_minio.secret_key not in (tmp_path / "results.md").read_text()
    finally:
        client.delete_object(mine, "precious")
        client.delete_bucket(mine)
