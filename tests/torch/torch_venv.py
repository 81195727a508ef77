"""The venv tests/torch/ runs in: torch and torchdata, kept out of the clone and reused.

``python tests/torch/torch_venv.py [pytest args]`` (what ``make test-torch`` runs) makes sure the
venv exists, then runs pytest in it on this clone. The venv lives in objsdk's cache
(``objsdk.testing.gobuild.cache_dir()``, where MinIO is built: ``~/.cache/objsdk``) under
``venv/torch-<hash>``, the hash taken over the requirement lines (the ``torch`` extra, the
runtime dependencies and the test runner's, from this clone's pyproject.toml as installed
in the main venv) and the Python version. Same lines, same venv: a fresh clone reuses it;
changed lines build a new one beside it, and the venvs of other lines that no run is
using are removed (a run holds a shared lock on its venv while its tests run), so the
cache keeps one venv, not one per change. objsdk is never installed into it: pytest runs
with ``PYTHONPATH`` set to the clone, so the venv holds nothing of any clone. Concurrent
runs serialise on a file lock, and a venv whose install did not finish is rebuilt.

The Linux wheel of torch on PyPI is the CUDA build: ``libtorch.so`` links against CUDA's
runtime, cuBLAS, cuDNN, NCCL and the rest, so ``import torch`` fails without the nvidia-*
wheels even on a CPU-only machine (``pip install --no-deps torch``: "libcudart.so.13:
cannot open shared object file"). Only ``triton`` (a GPU kernel compiler, 1 GB, imported
only when compiling for a GPU) is left out: torch goes in with ``--no-deps``, then every
other dependency its metadata names. Measured with torch 2.15 on Python 3.11: 4.66 GB
instead of 5.7 GB; 90 s to build with pip's cache warm, 155 s for the full set.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.metadata
import os
import shutil
import subprocess
import sys
import time
import venv
from pathlib import Path

CLONE = Path(__file__).resolve().parents[2]
# From the dev extra: what running tests/torch/ needs besides torch.
TEST_RUNNER = ("pytest", "pytest-timeout", "hypothesis", "numpy")
# Torch's dependencies not installed (see the module docstring).
LEFT_OUT = ("triton",)
# Changes with the way the venv is built, so a new recipe builds a new venv.
RECIPE = "3: torch --no-deps, then its dependencies but triton"


# Run in the new venv: torch's and torchdata's requirements for this platform, one a
# line, but those named in argv (torch itself: asking pip for it again pulls in all of
# its dependencies).
_TORCH_DEPS = """
import importlib.metadata, sys
from packaging.requirements import Requirement
for dist in ("torch", "torchdata"):
    for line in importlib.metadata.requires(dist) or []:
        req = Requirement(line)
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        if req.name not in sys.argv[1:]:
            print(str(req).split(";")[0].replace(" ", ""))
"""


def requirements() -> list[str]:
    """objsdk's runtime dependencies, its ``torch`` extra and the test runner's."""
    lines: list[str] = []
    for req in importlib.metadata.requires("objsdk") or []:
        spec, _, marker = req.partition(";")
        marker = marker.replace(" ", "").replace("'", '"')
        name = spec.strip().split("[")[0]
        for sep in "<>=!~ ":
            name = name.split(sep)[0]
        if (
            not marker
            or marker == 'extra=="torch"'
            or (marker == 'extra=="dev"' and name.lower() in TEST_RUNNER)
        ):
            lines.append(spec.strip())
    if not any(line.startswith("torch") for line in lines):
        raise SystemExit("objsdk has no 'torch' extra: reinstall the main venv (make)")
    return sorted(set(lines))


def venv_dir(lines: list[str]) -> Path:
    sys.path.insert(0, str(CLONE))
    from objsdk.testing.gobuild import cache_dir

    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    digest = hashlib.sha256("\n".join([RECIPE, version, *lines]).encode()).hexdigest()[:16]
    return cache_dir() / "venv" / f"torch-{digest}"


def ensure(path: Path, lines: list[str]) -> Path:
    """The venv's python, building the venv first if it is missing or unfinished."""
    python = path / "bin" / "python"
    done = path / ".complete"
    if done.exists():
        return python
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path(path), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if done.exists():
            return python
        shutil.rmtree(path, ignore_errors=True)  # an install that was interrupted
        start = time.monotonic()
        print(f"building the torch venv {path} (once per requirement set)", flush=True)
        venv.EnvBuilder(with_pip=True).create(path)
        pip = [str(python), "-m", "pip", "--disable-pip-version-check"]
        torch = [line for line in lines if line.startswith(("torch", "torchdata"))]
        rest = [line for line in lines if line not in torch]
        subprocess.run([*pip, "install", "--quiet", *rest], check=True)
        subprocess.run([*pip, "install", "--quiet", "--no-deps", *torch], check=True)
        deps = subprocess.run(
            [str(python), "-c", _TORCH_DEPS, "torch", "torchdata", *LEFT_OUT],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.split()
        # pip reports the left-out triton as a conflict on stderr: shown only on failure.
        done_deps = subprocess.run(
            [*pip, "install", "--quiet", *deps], capture_output=True, text=True
        )
        if done_deps.returncode:
            sys.stderr.write(done_deps.stdout + done_deps.stderr)
            raise SystemExit(f"installing torch's dependencies failed in {path}")
        took = time.monotonic() - start
        size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())
        done.write_text("\n".join(lines) + "\n")
        print(f"torch venv built in {took:.0f} s, {size / 1e9:.2f} GB", flush=True)
    return python


def lock_path(path: Path) -> Path:
    return path.parent / f".{path.name}.lock"


def prune(keep: Path) -> list[Path]:
    """Remove the torch venvs beside ``keep`` that no run holds; return them."""
    removed = []
    for other in sorted(keep.parent.glob("torch-*")):
        if other == keep or not other.is_dir():
            continue
        with open(lock_path(other), "a") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # another run is building it or testing in it
            shutil.rmtree(other, ignore_errors=True)
            lock_path(other).unlink(missing_ok=True)
            removed.append(other)
    return removed


def main(argv: list[str]) -> int:
    lines = requirements()
    path = venv_dir(lines)
    python = ensure(path, lines)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(CLONE), env.get("PYTHONPATH")]))
    args = argv or ["-q", "tests/torch"]
    with open(lock_path(path), "a") as held:
        fcntl.flock(held, fcntl.LOCK_SH)  # in use: no other run prunes it meanwhile
        for old in prune(path):
            print(f"removed the torch venv of other requirements: {old}", flush=True)
        return subprocess.run([str(python), "-m", "pytest", *args], cwd=CLONE, env=env).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
