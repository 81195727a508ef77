"""The per-feature benchmarks in ``perf/``: on an operator's own endpoint they write only
into a bucket they create, and leave the server as they found it, also when they fail;
and the ones issue targets are measured with run end to end in their quick modes, so
they never rot."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from user_env import without_aws

from objsdk import Client
from objsdk.testing import LocalMinio

pytestmark = pytest.mark.integration

PERF = Path(__file__).resolve().parent.parent / "perf"
BUCKET = "bench-requests"  # perf/bench_requests.py's


def perf_env(endpoint: LocalMinio | None) -> dict[str, str]:
    """The environment of a perf script: ``endpoint`` as your own server, else none (the
    script starts its own MinIO)."""
    env = without_aws()
    if endpoint is not None:
        env.update(
            AWS_ENDPOINT_URL=endpoint.endpoint,
            AWS_ACCESS_KEY_ID=endpoint.access_key,
            AWS_SECRET_ACCESS_KEY=endpoint.secret_key,
        )
    return env


def run_perf_script(
    *argv: str, endpoint: LocalMinio | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """``python perf/<argv>`` against ``endpoint`` as your own server, else the local
    MinIO the script starts for itself."""
    return subprocess.run(
        [sys.executable, *argv],
        cwd=PERF,
        env=perf_env(endpoint),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def run_bench_requests(minio: LocalMinio) -> subprocess.CompletedProcess[str]:
    return run_perf_script(
        "bench_requests.py", "--runs=1", "--objects=3", "--clients=objsdk", endpoint=minio
    )


def test_a_benchmark_on_your_endpoint_removes_the_bucket_it_made(
    local_minio: LocalMinio, client: Client
) -> None:
    proc = run_bench_requests(local_minio)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "| objsdk |" in proc.stdout  # it did send its requests
    assert not client.bucket_exists(BUCKET)


def test_a_benchmark_refuses_a_bucket_that_is_already_there(
    local_minio: LocalMinio, client: Client
) -> None:
    client.create_bucket(BUCKET)
    try:
        client.put_object(BUCKET, "theirs", b"not the benchmark's")
        proc = run_bench_requests(local_minio)
        assert proc.returncode != 0
        assert f"bucket {BUCKET!r} already exists at {local_minio.endpoint}" in proc.stderr
        assert [o.key for o in client.list_objects(BUCKET)] == ["theirs"]
    finally:
        client.delete_objects(BUCKET, [o.key for o in client.list_objects(BUCKET)])
        client.delete_bucket(BUCKET)


def test_bench_cli_quick_mode_runs_every_workload(tmp_path: Path) -> None:
    out = tmp_path / "cli.json"
    proc = run_perf_script("bench_cli.py", "--quick", "--no-peers", "--json", str(out), timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    sections = json.loads(out.read_text())["sections"]
    tools = {s["title"]: [row["tool"] for row in s["rows"]] for s in sections}
    # Python's own floor runs beside the many-file downloads only.
    assert tools["100 x 4 KiB down"] == tools["10 x 1 MiB down"] == ["objsdk", "python floor"]
    assert tools["100 x 4 KiB up"] == tools["1 x 32 MiB down"] == ["objsdk"]
    titles = [section["title"] for section in sections]
    assert titles == [
        "100 x 4 KiB up",
        "100 x 4 KiB down",
        "10 x 1 MiB up",
        "10 x 1 MiB down",
        "1 x 32 MiB up",
        "1 x 32 MiB down",
        "tar of 32 MiB (8 members) extracted",
    ]


def test_bench_fsspec_quick_mode_runs_and_checks_the_target(tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    proc = run_perf_script("bench_fsspec.py", "--quick", "--json", str(out), timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "target: objsdk open().read(1 MiB) >= 2.0x s3fs open().read(1 MiB)" in proc.stdout
    sections = json.loads(out.read_text())["sections"]
    parquet = [s for s in sections if s["title"].startswith("Parquet, 3 of 20 columns")]
    assert [s["title"].split(", ")[2] for s in parquet] == ["loopback", "wan"]
    for section in parquet:
        assert set(section["new_connections"]) == {"s3fs", "objsdk"}
    many = [s["title"] for s in sections if "files of 4 KiB" in s["title"]]
    assert many == ["cat of 20 files of 4 KiB, wan, 1 runs"] + [
        f"{verb} of 20 files of 4 KiB, 1 runs" for verb in ("put", "get", "cat", "copy")
    ]


def test_bench_lines_runs_every_variant_on_a_small_object(local_minio: LocalMinio) -> None:
    proc = run_perf_script(
        "bench_lines.py", "--lines=2000", "--runs=1", endpoint=local_minio, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    for variant in ("ObjectFile lines", "ObjectFile.iter_lines()", "ObjectFile.read(10 KiB)"):
        assert variant in proc.stdout


def test_bench_download_runs_every_variant_and_states_each_target(
    local_minio: LocalMinio,
) -> None:
    proc = run_perf_script(
        "bench_download.py", "--size-mib=8", "--runs=1", "--peers=obstore",
        endpoint=local_minio, timeout=240,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    for variant in ("download(parallel=1)", "download() at its defaults", "boto3 download_file"):
        assert variant in proc.stdout
    assert "target: download() at its defaults >= 1.0x boto3 download_file" in proc.stdout
    # obstore is measured where it is installed (the perf extra), else named as skipped.
    assert "obstore stream to a file" in proc.stdout or "obstore: skipped" in proc.stdout


def test_bench_upload_measures_an_upload_at_the_defaults_beside_a_baseline_install(
    local_minio: LocalMinio,
) -> None:
    # The baseline here is this very install: the script must run each side in its own
    # process, name what each imports, and state the profile's target.
    proc = run_perf_script(
        "bench_upload.py", "--size-mib=8", "--runs=1", f"--baseline-python={sys.executable}",
        "--profile=wan", endpoint=local_minio, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "| upload() of a file, defaults |" in proc.stdout
    assert proc.stdout.count("objsdk from ") == 2
    assert "target: this install on wan >= 0.95x the baseline: " in proc.stdout


def test_bench_copy_runs_every_route(local_minio: LocalMinio, client: Client) -> None:
    proc = run_perf_script("bench_copy.py", "--quick", endpoint=local_minio, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for variant in ("one CopyObject", "parts, server-copied", "streamed via client"):
        assert variant in proc.stdout
    assert not client.bucket_exists("objsdk-perf-copy")


def test_paced_read_reads_the_bytes_it_is_asked_for_at_its_rate(
    local_minio: LocalMinio, client: Client
) -> None:
    # The DataLoader section's ceiling with the server busy is only as good as this load.
    client.create_bucket("paced")
    client.put_object("paced", "a", os.urandom(3 << 20))
    client.put_object("paced", "b", os.urandom(2 << 20))
    proc = subprocess.Popen(
        [sys.executable, str(PERF / "paced_read.py"), "paced", "a", "b"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=perf_env(local_minio),
    )
    assert proc.stdin is not None
    assert proc.stdout is not None

    def say(line: str) -> str:
        assert proc.stdin is not None
        assert proc.stdout is not None
        proc.stdin.write(line + "\n")
        proc.stdin.flush()
        return proc.stdout.readline().strip()

    try:
        # All of it, across both objects and round again, and not a byte more.
        assert say(f"{1e9} {7 << 20}") == "started"
        time.sleep(1.0)
        read, cpu = say("stop").split()
        assert (int(read), float(cpu) >= 0) == (7 << 20, True)
        # Paced: 4 MB/s for about half a second is 4 MiB at most (the first chunk at once).
        assert say(f"{4e6} {1 << 30}") == "started"
        time.sleep(0.5)
        assert 0 < int(say("stop").split()[0]) <= 2 * (4 << 20)
    finally:
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0
        proc.stdout.close()
