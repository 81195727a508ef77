"""The torch venv's cache keeps the venv in use, not one per change of requirements."""

from __future__ import annotations

import fcntl
import importlib.util
from pathlib import Path
from types import ModuleType

HERE = Path(__file__).parent


def torch_venv() -> ModuleType:
    spec = importlib.util.spec_from_file_location("torch_venv", HERE / "torch" / "torch_venv.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_venvs_of_other_requirements_are_removed_unless_a_run_holds_them(tmp_path: Path) -> None:
    tv = torch_venv()
    keep, old, busy = (tmp_path / f"torch-{n}" for n in ("keep", "old", "busy"))
    for venv in (keep, old, busy):
        (venv / "bin").mkdir(parents=True)
    (tmp_path / "other-cache").mkdir()
    with open(tv.lock_path(busy), "a") as held:
        fcntl.flock(held, fcntl.LOCK_SH)  # a run testing in it
        assert tv.prune(keep) == [old]
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")) == [
        "other-cache",
        "torch-busy",
        "torch-keep",
    ]
    assert not tv.lock_path(old).exists()
