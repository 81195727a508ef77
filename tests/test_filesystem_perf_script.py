"""perf/bench_fsspec.py (objsdk:// vs s3fs reads) runs end to end in its quick mode, so
the benchmark the issue's speed target is measured with never rots."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

PERF = Path(__file__).resolve().parent.parent / "perf"


def test_bench_fsspec_quick_mode_runs_and_checks_the_target(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}  # its own MinIO
    proc = subprocess.run(
        [sys.executable, "bench_fsspec.py", "--quick", "--json", str(tmp_path / "out.json")],
        cwd=PERF,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "target: objsdk open().read(1 MiB) >= 2.0x s3fs open().read(1 MiB)" in proc.stdout
    assert (tmp_path / "out.json").exists()
