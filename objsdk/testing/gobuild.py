"""Build the Go servers objsdk tests against (MinIO, Toxiproxy) once, and cache them.

Binaries land in ``<cache>/bin/<name>-<version>/<exe>``, where ``<cache>`` is
``$OBJSDK_CACHE_DIR``, else ``$XDG_CACHE_HOME/objsdk``, else ``~/.cache/objsdk``.
``OBJSDK_MINIO_BINARY`` and ``OBJSDK_TOXIPROXY_BINARY`` name existing binaries instead.

A build from cold caches takes minutes (MinIO's: about 10 on 2 cores), so it says so when
it starts and then, every :data:`PROGRESS_EVERY` seconds, how long it has run and how many
packages ``go install -v`` has compiled: on standard error, the only output of objsdk's
own, since a terminal silent for that long looks hung.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from pathlib import Path
from typing import IO

from objsdk.errors import LocalMinioError

__all__ = [
    "MINIO_MODULE",
    "MINIO_VERSION",
    "PROGRESS_EVERY",
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

# Seconds between two lines saying a build is still going.
PROGRESS_EVERY = 20.0

_TAIL_LINES = 30
# What `go install -v` prints for each package it compiles: its import path alone.
_PACKAGE_LINE = re.compile(r"[\w.~+-]+(/[\w.~+-]+)*")


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


def go_binary(
    name: str,
    module: str,
    version: str,
    *,
    exe: str,
    takes: str = "a few minutes",
    packages: int | None = None,
) -> Path:
    """Path of ``exe`` from ``go install module@version``, building it on first use.

    Concurrent callers (pytest-xdist workers, parallel scripts) serialise on a file
    lock, so the build runs once; later calls return the cached path without Go.
    ``takes`` (how long a build from cold caches takes) and ``packages`` (about how many
    packages it compiles) are what the build's notice and progress lines say.
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
            _build(name, module, version, exe, bin_root / folder, takes, packages)
    return binary


def minio_binary() -> Path:
    """The MinIO server binary: ``$OBJSDK_MINIO_BINARY`` or a cached build."""
    # Measured from cold caches: 9.5 minutes on 2 cores; `go list -deps` counts 1,301
    # packages, the standard library's included.
    return _override("OBJSDK_MINIO_BINARY") or go_binary(
        "minio",
        MINIO_MODULE,
        MINIO_VERSION,
        exe="minio",
        takes="about 10 minutes on 2 cores",
        packages=1300,
    )


def toxiproxy_binary() -> Path:
    """The Toxiproxy server binary: ``$OBJSDK_TOXIPROXY_BINARY`` or a cached build."""
    # Measured with Go's build cache empty: 50 s on 2 cores, 266 packages.
    return _override("OBJSDK_TOXIPROXY_BINARY") or go_binary(
        "toxiproxy",
        TOXIPROXY_MODULE,
        TOXIPROXY_VERSION,
        exe="server",
        takes="about a minute on 2 cores",
        packages=270,
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


def _say(message: str) -> None:
    print(f"objsdk: {message}", file=sys.stderr, flush=True)


def _duration(seconds: float) -> str:
    whole = int(seconds)
    return f"{whole // 60} min {whole % 60:02d} s" if whole >= 60 else f"{whole} s"


class _GoOutput:
    """What ``go install -v`` prints, read as it comes: the packages compiled so far
    (counted) and the tail of everything else (the errors of a failed build)."""

    def __init__(self, stream: IO[str]) -> None:
        self.compiled = 0
        self.tail: deque[str] = deque(maxlen=_TAIL_LINES)
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            line = line.rstrip("\n")
            if _PACKAGE_LINE.fullmatch(line):
                self.compiled += 1
            else:
                self.tail.append(line)

    def join(self) -> None:
        self._thread.join()


def _run_go_install(
    command: list[str], env: dict[str, str], name: str, packages: int | None
) -> tuple[int, _GoOutput]:
    """Run ``command`` (a ``go install -v``), saying every :data:`PROGRESS_EVERY` seconds
    that it is still going; its exit code and output."""
    started = time.monotonic()
    proc = subprocess.Popen(
        command,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
    )
    assert proc.stdout is not None
    output = _GoOutput(proc.stdout)
    in_all = f" (about {packages:,} in all)" if packages else ""
    try:
        while True:
            try:
                code = proc.wait(timeout=PROGRESS_EVERY)
                break
            except subprocess.TimeoutExpired:
                _say(
                    f"still building {name}: {_duration(time.monotonic() - started)}, "
                    f"{output.compiled} packages compiled{in_all}"
                )
    except BaseException:  # interrupted: leave no go process behind
        proc.kill()
        proc.wait()
        raise
    output.join()
    proc.stdout.close()
    return code, output


def _build(
    name: str,
    module: str,
    version: str,
    exe: str,
    target: Path,
    takes: str,
    packages: int | None,
) -> None:
    go = find_go()
    if go is None:
        raise LocalMinioError(
            "Go toolchain not found: install Go >= 1.24 or set OBJSDK_MINIO_BINARY"
        )
    _say(
        f"building {name} {version} with {go} (one-time: {takes}; a line every "
        f"{PROGRESS_EVERY:.0f} s says how far it is)..."
    )
    # Build into a private folder and rename it into place, so no reader ever sees a
    # half-written binary, even if this process dies mid-build.
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    try:
        env = {**os.environ, "GOBIN": str(staging)}
        # -v: each package's import path as it is compiled, which the progress counts.
        code, output = _run_go_install(
            [go, "install", "-v", f"{module}@{version}"], env, name, packages
        )
        if code != 0 or not _is_executable(staging / exe):
            outcome = f"exited with code {code}" if code else f"did not produce {exe}"
            tail = "\n".join(output.tail)
            raise LocalMinioError(
                f"building {name} failed: go install {module}@{version} {outcome}:\n{tail}"
            )
        staging.chmod(0o755)  # mkdtemp made it private; the cache is not secret
        if target.exists():  # a leftover without the binary (deleted by hand?)
            shutil.rmtree(target)
        os.rename(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
