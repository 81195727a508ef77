"""s3fs's own test module passes against ObjsdkFileSystem, except the tests skipped with
a reason in tests/s3fs_suite/run.py (docs/fsspec.md lists both)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

RUN = Path(__file__).resolve().parent / "s3fs_suite" / "run.py"


@pytest.mark.timeout(900)
def test_s3fs_test_module_passes_through_the_adapter(tmp_path: Path) -> None:
    out = tmp_path / "outcomes.json"
    proc = subprocess.run(
        [sys.executable, str(RUN), "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=880,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    outcomes = json.loads(out.read_text())
    failed = {name: message for name, (outcome, message) in outcomes.items() if outcome == "failed"}
    assert failed == {}
    assert sum(outcome == "passed" for outcome, _ in outcomes.values()) >= 120
