"""Local destinations that refuse to be written, whoever asks (root included): a
filesystem mounted read-only, a device node on a filesystem mounted ``nodev``, a file
marked immutable. Each needs root (``mount``, ``mknod``, ``chattr``); a test that uses
one is skipped where it cannot be made."""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

__all__ = ["SMALL_DIR", "immutable", "nodev_dir", "read_only_dir", "small_dir"]

SMALL_DIR = 1 << 20  # the bytes each filesystem made here holds


@contextlib.contextmanager
def _tmpfs(path: Path, options: str) -> Iterator[Path]:
    path.mkdir()
    try:
        mounted = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"{options},size={SMALL_DIR}", "tmpfs", str(path)],
            capture_output=True,
            text=True,
        )
    except FileNotFoundError:
        pytest.skip("no mount command: cannot make the filesystem")
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs -o {options} (needs root): {mounted.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


@pytest.fixture
def read_only_dir(tmp_path: Path) -> Iterator[Path]:
    """A folder on a filesystem mounted read-only (a tmpfs, ``-o ro``): nothing can be
    created in it, whoever asks (root included)."""
    with _tmpfs(tmp_path / "ro", "ro") as path:
        yield path


@pytest.fixture
def small_dir(tmp_path: Path) -> Iterator[Path]:
    """A folder on a filesystem of :data:`SMALL_DIR` bytes (a tmpfs): a larger file
    fills it (ENOSPC)."""
    with _tmpfs(tmp_path / "small", "rw") as path:
        yield path


@pytest.fixture
def nodev_dir(tmp_path: Path) -> Iterator[Path]:
    """A folder on a filesystem mounted ``nodev`` holding ``null``, a device node like
    ``/dev/null`` (character device 1, 3): opening it is refused (EACCES), root
    included."""
    with _tmpfs(tmp_path / "nodev", "nodev") as path:
        try:
            os.mknod(path / "null", 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        except PermissionError:
            pytest.skip("cannot make a device node (needs CAP_MKNOD)")
        yield path


@contextlib.contextmanager
def immutable(path: Path) -> Iterator[Path]:
    """``path`` (a file) marked immutable (``chattr +i``) for the block: nothing may
    replace it, rename over it or remove it (EPERM), root included."""
    chattr = shutil.which("chattr")
    if chattr is None:
        pytest.skip("no chattr: cannot mark a file immutable")
    marked = subprocess.run([chattr, "+i", str(path)], capture_output=True, text=True)
    if marked.returncode != 0:
        pytest.skip(f"cannot mark a file immutable here: {marked.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run([chattr, "-i", str(path)], capture_output=True)
