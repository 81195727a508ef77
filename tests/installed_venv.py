"""objsdk as a user installs it: one regular install of this checkout, for the first-contact
checks (tests/test_first_contact.py) to run in subprocesses.

The venv is what ``make demo`` makes: ``python -m venv``, then a non-editable
``pip install '<checkout>[fsspec]'`` with the dependencies resolved by pip, as any user's
install is (pip's own cache and ``PIP_FIND_LINKS`` serve what they hold). The ``fsspec``
extra is the one the checks need; ``numpy`` is left out on purpose, so the hints a user
without it meets are shown for real. Nothing of the checkout is on the venv's path: the
subprocesses run with ``PYTHONPATH`` unset, in an empty working directory.

pip builds from a copy of ``pyproject.toml``, ``README.md`` and ``objsdk/`` in a
temporary folder, so no ``build/`` or ``*.egg-info`` lands in the checkout and two runs
never build in the same folder. The venv lives in objsdk's cache
(``objsdk.testing.gobuild.cache_dir()``) under ``venv/installed-<hash>``, the hash taken
over those files, the recipe and the Python version: an unchanged checkout (a fresh clone
of the same commit included) reuses it, a changed one builds a new one beside it, and the
venvs of other hashes that no run holds are removed. Runs serialise on a file lock while
one builds, and hold it shared while they use the venv. Building takes about 8 s with
pip's cache warm (``.complete`` records the time it took).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
import venv
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import pytest

from objsdk.testing.gobuild import cache_dir

CLONE = Path(__file__).resolve().parents[1]
# What pip reads to build the wheel.
SOURCES = ("pyproject.toml", "README.md", "objsdk")
EXTRAS = "fsspec"
# Changes with the way the venv is built, so a new recipe builds a new venv.
RECIPE = f"1: venv, pip install '<copy>[{EXTRAS}]'"


def source_files() -> list[Path]:
    """The files the install is built from (no caches, no compiled files)."""
    files: list[Path] = []
    for name in SOURCES:
        path = CLONE / name
        if path.is_dir():
            files.extend(
                p
                for p in path.rglob("*")
                if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
            )
        else:
            files.append(path)
    return sorted(files)


def digest() -> str:
    h = hashlib.sha256(f"{RECIPE}\n{sys.version_info[:2]}\n".encode())
    for path in source_files():
        h.update(path.relative_to(CLONE).as_posix().encode() + b"\0")
        h.update(path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def lock_path(path: Path) -> Path:
    return path.parent / f".{path.name}.lock"


def build(path: Path) -> float:
    """Make the venv at ``path`` and install the checkout into it; the seconds it took."""
    start = time.monotonic()
    shutil.rmtree(path, ignore_errors=True)  # an install that was interrupted
    venv.EnvBuilder(with_pip=True).create(path)
    with tempfile.TemporaryDirectory(prefix="objsdk-install-") as tmp:
        for name in SOURCES:
            src = CLONE / name
            if src.is_dir():
                shutil.copytree(src, Path(tmp) / name, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                shutil.copy2(src, Path(tmp) / name)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        done = subprocess.run(
            [str(path / "bin" / "python"), "-m", "pip", "install", "--quiet", f"{tmp}[{EXTRAS}]"],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
    if done.returncode:
        raise RuntimeError(f"pip install of the checkout failed:\n{done.stdout}{done.stderr}")
    return time.monotonic() - start


def prune(keep: Path) -> list[Path]:
    """Remove the venvs of other checkouts beside ``keep`` that no run holds."""
    removed = []
    for other in sorted(keep.parent.glob("installed-*")):
        if other == keep or not other.is_dir():
            continue
        with open(lock_path(other), "a") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # another run is building it or testing with it
            shutil.rmtree(other, ignore_errors=True)
            lock_path(other).unlink(missing_ok=True)
            removed.append(other)
    return removed


@dataclass(frozen=True)
class Installed:
    """A venv holding a regular install of this checkout."""

    root: Path

    @property
    def python(self) -> Path:
        return self.root / "bin" / "python"

    def script(self, name: str) -> Path:
        """A console script the install made (``objsdk``)."""
        return self.root / "bin" / name

    def env(self, home: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """A user's environment: no ``PYTHONPATH`` (nothing of the checkout), no
        ``AWS_*`` and no ``OBJSDK_*`` of the test run, ``HOME`` at ``home``, the venv's
        scripts first on ``PATH``, then ``extra``. Not an EC2 instance: the credential
        chain never asks the instance metadata service (nothing leaves this machine)."""
        env = {
            k: v
            for k, v in os.environ.items()
            if k != "PYTHONPATH" and not k.startswith(("AWS_", "OBJSDK_"))
        }
        env["HOME"] = str(home)
        env["AWS_EC2_METADATA_DISABLED"] = "true"
        env["PATH"] = f"{self.root / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        env.update(extra or {})
        return env

    def run(
        self,
        args: Sequence[str | Path],
        *,
        cwd: Path,
        env: Mapping[str, str] | None = None,
        stdin: bytes = b"",
        timeout: float = 120,
    ) -> subprocess.CompletedProcess[str]:
        """``args`` in a subprocess, in ``cwd``, with ``env`` (see :meth:`env`)."""
        return subprocess.run(
            [str(a) for a in args],
            input=stdin.decode(),
            capture_output=True,
            text=True,
            cwd=cwd,
            env=dict(env) if env is not None else self.env(cwd),
            timeout=timeout,
            check=False,
        )


def _hold(lock: IO[str], path: Path) -> None:
    """Hold ``lock`` shared (the venv in use: no other run prunes it), building the venv
    first, under the lock held exclusively, unless it is complete."""
    done = path / ".complete"
    fcntl.flock(lock, fcntl.LOCK_SH)
    if done.exists():
        return
    # Not atomic (the shared lock is dropped first), so two runs waiting here cannot
    # deadlock; the second finds the venv complete.
    fcntl.flock(lock, fcntl.LOCK_EX)
    if not done.exists():
        took = build(path)
        done.write_text(f"built in {took:.1f} s\n")
    fcntl.flock(lock, fcntl.LOCK_SH)


@pytest.fixture(scope="session")
def installed() -> Iterator[Installed]:
    """One regular install of this checkout for the whole session (and later sessions
    while the sources are unchanged)."""
    path = cache_dir() / "venv" / f"installed-{digest()}"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path(path), "a") as lock:
        _hold(lock, path)
        prune(path)
        yield Installed(path)
