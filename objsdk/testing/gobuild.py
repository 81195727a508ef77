"""Build the Go servers objsdk tests against (MinIO, Toxiproxy) once, and cache them.

Binaries land in ``<cache>/bin/<name>-<version>/<exe>``, where ``<cache>`` is
``$OBJSDK_CACHE_DIR``, else ``$XDG_CACHE_HOME/objsdk``, else ``~/.cache/objsdk``.
``OBJSDK_MINIO_BINARY`` and ``OBJSDK_TOXIPROXY_BINARY`` name existing binaries instead.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from objsdk.errors import LocalMinioError

__all__ = [
    "MINIO_MODULE",
    "MINIO_VERSION",
    "TOXIPROXY_MODULE",
    "TOXIPROXY_VERSION",
    "cache_dir",
    "find_go",
    "go_binary",
    "minio_binary",
    "toxiproxy_binary",
]

MINIO_MODULE = "github.com/minio/minio"
MINIO_VERSION = "v0.0.0-20260212201848-7aac2a2c5b7c"
TOXIPROXY_MODULE = "github.com/Shopify/toxiproxy/v2/cmd/server"
TOXIPROXY_VERSION = "v2.12.0"

# Where the official installers put Go; checked when `go` is not on PATH, because
# IDEs and CI steps often run with a PATH that lacks it.
GO_FALLBACKS: tuple[str, ...] = ("/usr/local/go/bin/go",)

_TAIL_LINES = 30


def cache_dir() -> Path:
    """The objsdk cache directory (not created)."""
    explicit = os.environ.get("OBJSDK_CACHE_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "objsdk"


def find_go() -> str | None:
    """Path of the ``go`` command, or None when no Go toolchain is installed."""
    found = shutil.which("go")
    if found:
        return found
    for candidate in GO_FALLBACKS:
        if os.access(candidate, os.X_OK):
            return candidate
    return None


def go_binary(name: str, module: str, version: str, *, exe: str) -> Path:
    """Path of ``exe`` from ``go install module@version``, building it on first use.

    Concurrent callers (pytest-xdist workers, parallel scripts) serialise on a file
    lock, so the build runs once; later calls return the cached path without Go.
    """
    bin_root = cache_dir() / "bin"
    folder = f"{name}-{re.sub(r'[^A-Za-z0-9._-]', '_', version)}"
    binary = bin_root / folder / exe
    if _is_executable(binary):
        return binary
    bin_root.mkdir(parents=True, exist_ok=True)
    with open(bin_root / f".{folder}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        # Whoever held the lock before us may have finished the build.
        if not _is_executable(binary):
            _build(name, module, version, exe, bin_root / folder)
    return binary


def minio_binary() -> Path:
    """The MinIO server binary: ``$OBJSDK_MINIO_BINARY`` or a cached build."""
    return _override("OBJSDK_MINIO_BINARY") or go_binary(
        "minio", MINIO_MODULE, MINIO_VERSION, exe="minio"
    )


def toxiproxy_binary() -> Path:
    """The Toxiproxy server binary: ``$OBJSDK_TOXIPROXY_BINARY`` or a cached build."""
    return _override("OBJSDK_TOXIPROXY_BINARY") or go_binary(
        "toxiproxy", TOXIPROXY_MODULE, TOXIPROXY_VERSION, exe="server"
    )


def _override(variable: str) -> Path | None:
    value = os.environ.get(variable)
    if not value:
        return None
    path = Path(value)
    if not _is_executable(path):
        raise LocalMinioError(f"{variable}={value} is not an executable file")
    return path


def _is_executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def _build(name: str, module: str, version: str, exe: str, target: Path) -> None:
    go = find_go()
    if go is None:
        raise LocalMinioError(
            "Go toolchain not found: install Go >= 1.24 or set OBJSDK_MINIO_BINARY"
        )
    print(
        f"objsdk: building {name} {version} with {go} (one-time, a few minutes)...",
        file=sys.stderr,
        flush=True,
    )
    # Build into a private folder and rename it into place, so no reader ever sees a
    # half-written binary, even if this process dies mid-build.
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    try:
        env = {**os.environ, "GOBIN": str(staging)}
        result = subprocess.run(
            [go, "install", f"{module}@{version}"],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            check=False,
        )
        if result.returncode != 0 or not _is_executable(staging / exe):
            outcome = (
                f"exited with code {result.returncode}"
                if result.returncode
                else f"did not produce {exe}"
            )
            tail = "\n".join(result.stdout.splitlines()[-_TAIL_LINES:])
            raise LocalMinioError(
                f"building {name} failed: go install {module}@{version} {outcome}:\n{tail}"
            )
        staging.chmod(0o755)  # mkdtemp made it private; the cache is not secret
        if target.exists():  # a leftover without the binary (deleted by hand?)
            shutil.rmtree(target)
        os.rename(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
