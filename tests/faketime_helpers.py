"""``faketime`` (libfaketime's wrapper, Debian package ``faketime``): runs a program with
its wall clock shifted, so a test can see what a machine whose clock is off sees."""

from __future__ import annotations

import shutil
import subprocess

__all__ = ["ensure_faketime"]


def ensure_faketime() -> str:
    """The path of ``faketime``, installed with apt-get if it is missing (after an
    ``apt-get update`` if the first install fails: a fresh image has no package lists).
    Raises :class:`RuntimeError`, with apt's own words, if it still cannot be had."""
    found = shutil.which("faketime")
    if found is not None:
        return found
    install = ["apt-get", "install", "-y", "-q", "faketime"]
    done = subprocess.run(install, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        subprocess.run(["apt-get", "update", "-q"], capture_output=True, check=False)
        done = subprocess.run(install, capture_output=True, text=True, check=False)
    found = shutil.which("faketime")
    if found is None:
        raise RuntimeError(f"faketime could not be installed: {done.stderr.strip()[-500:]}")
    return found
