"""What the results were measured on, printed and saved with them."""

from __future__ import annotations

import datetime
import os
import platform
import subprocess
import sys
from pathlib import Path

import objsdk

__all__ = ["describe", "memory_total", "minio_version_of_pid"]


def memory_total() -> str:
    """Total memory from /proc/meminfo, e.g. ``23.5 GiB`` (``unknown`` elsewhere)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return f"{int(line.split()[1]) / (1 << 20):.1f} GiB"
    except OSError:
        pass
    return "unknown"


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def minio_version_of_pid(pid: int | None) -> str:
    """``minio --version`` of the binary a running local MinIO was started from."""
    if pid is None:
        return "unknown"
    try:
        binary = os.readlink(f"/proc/{pid}/exe")
        out = subprocess.run(
            [binary, "--version"], capture_output=True, text=True, timeout=30, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    first = out.stdout.strip().splitlines()
    version = first[0].removeprefix("minio version ").strip() if first else "unknown"
    if "DEVELOPMENT" in version:
        # Built from source with `go install`: the directory names the module version.
        version += f", built from {Path(binary).parent.name}"
    return version


def describe(*, server: str, minio_version: str, toxiproxy_version: str | None) -> dict[str, str]:
    """Cores, memory, Python, MinIO, objsdk and Toxiproxy versions, and the date."""
    return {
        "date (UTC)": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M"),
        "cores": str(os.cpu_count() or "unknown"),
        "cpu": cpu_model(),
        "memory": memory_total(),
        "os": f"{platform.system()} {platform.release()}",
        "python": f"{platform.python_implementation()} {sys.version.split()[0]}",
        "objsdk": objsdk.__version__,
        "server": server,
        "minio": minio_version,
        "toxiproxy": toxiproxy_version or "not used",
    }
