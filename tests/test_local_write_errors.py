"""Every way objsdk writes a local file says what ``download()`` and ``cp`` say when it
cannot (docs/errors.md, "Local writes"): a fault of the path itself (a file where a
folder should be, no permission) is Python's own error naming the path the caller
gave; a filesystem that will not take the file (read-only, full) is a
``LocalWriteError`` naming the object and that path; never the name of a hidden
temporary file (``.objsdk-*.tmp``), never a traceback.

* A destination that refuses to be replaced (an immutable file): the rename of the
  finished temporary file over it fails, and that is told of the destination alone.
* A download into a device node the system will not open: Python's PermissionError.
* ``objsdk extract``, into a read-only or full filesystem, or where a file stands.
* The fsspec filesystem's ``get``/``get_file``: the folder to make under a file, or on
  a read-only filesystem.
"""

from __future__ import annotations

import errno
import io
import os
import subprocess
import tarfile
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import COMMAND, env
from local_fs_helpers import SMALL_DIR, immutable, nodev_dir, read_only_dir, small_dir

import objsdk
from objsdk import Client
from objsdk._transfer.smallfile import SMALL_OBJECT
from objsdk.filesystem import ObjsdkFileSystem

__all__ = ["env", "nodev_dir", "read_only_dir", "small_dir"]  # fixtures, used by name

pytestmark = pytest.mark.integration

MiB = 1 << 20


def _cli(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*COMMAND, *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=60
    )


def _said_plainly(proc: subprocess.CompletedProcess[str]) -> None:
    """No traceback, no temporary file's name, no Python exception class."""
    assert "Traceback" not in proc.stderr, proc.stderr
    assert ".objsdk-" not in proc.stderr, proc.stderr
    assert "Error:" not in proc.stderr, proc.stderr
    assert "Error(" not in proc.stderr, proc.stderr


def _tar(members: dict[str, bytes | None]) -> bytes:
    """A tar archive of ``members`` (None: a directory)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            if data is None:
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


@pytest.fixture
def fs(s3_server: Any) -> ObjsdkFileSystem:
    return ObjsdkFileSystem(
        endpoint_url=s3_server.endpoint,
        key=s3_server.access_key,
        secret=s3_server.secret_key,
        skip_instance_cache=True,
    )


# -- a destination that refuses to be replaced ---------------------------------------------


@pytest.mark.parametrize("size", [5, 3 * MiB], ids=["one-part", "parts"])
def test_a_download_over_a_file_that_refuses_to_be_replaced_names_that_file(
    client: Client, bucket: str, tmp_path: Path, size: int
) -> None:
    # Before: PermissionError naming the hidden temporary file, then the destination.
    client.put_object(bucket, "k", os.urandom(size))
    dest = tmp_path / "k"
    dest.write_bytes(b"old")
    with immutable(dest), pytest.raises(PermissionError) as info:
        client.download(bucket, "k", dest, part_size=MiB)
    assert (info.value.errno, info.value.filename) == (errno.EPERM, str(dest))
    assert info.value.filename2 is None
    assert dest.read_bytes() == b"old"


@pytest.mark.parametrize("recursive", [False, True], ids=["cp", "cp -r"])
def test_cli_cp_over_a_file_that_refuses_to_be_replaced_names_that_file(
    env: dict[str, str], client: Client, bucket: str, tmp_path: Path, recursive: bool
) -> None:
    client.put_object(bucket, "d/k", b"new")
    (tmp_path / "out").mkdir()
    dest = tmp_path / "out" / "k"
    dest.write_bytes(b"old")
    args = ["-r", f"s3://{bucket}/d/", "out/"] if recursive else [f"s3://{bucket}/d/k", "out/k"]
    with immutable(dest):
        proc = _cli(env, tmp_path, "cp", *args)
        assert proc.returncode == (1 if recursive else 255), proc.stderr
        assert "Operation not permitted: out/k\n" in proc.stderr, proc.stderr
        _said_plainly(proc)
    assert dest.read_bytes() == b"old"


def test_fs_get_over_a_file_that_refuses_to_be_replaced_names_that_file(
    fs: ObjsdkFileSystem, client: Client, bucket: str, tmp_path: Path
) -> None:
    # Before: PermissionError naming the temporary file first, then the destination.
    client.put_object(bucket, "k", b"new")
    dest = tmp_path / "k"
    dest.write_bytes(b"old")
    with immutable(dest), pytest.raises(PermissionError) as info:
        fs.get(f"{bucket}/k", str(dest))
    assert (info.value.errno, info.value.filename) == (errno.EPERM, str(dest))
    assert info.value.filename2 is None
    assert sorted(os.listdir(tmp_path)) == ["k"]


# -- a device node that cannot be opened ---------------------------------------------------


def test_a_device_the_system_will_not_open_is_python_s_permission_error_naming_it(
    env: dict[str, str], client: Client, bucket: str, nodev_dir: Path, tmp_path: Path
) -> None:
    # Before: LocalWriteError ("cannot write ..."), which is for a filesystem that will
    # not take the bytes, not for a path the caller may not open.
    client.put_object(bucket, "k", b"data")
    device = nodev_dir / "null"
    with pytest.raises(PermissionError) as info:
        client.download(bucket, "k", device)
    assert not isinstance(info.value, objsdk.LocalWriteError)
    assert (info.value.errno, info.value.filename) == (errno.EACCES, str(device))
    proc = _cli(env, tmp_path, "cp", f"s3://{bucket}/k", str(device))
    assert proc.returncode == 255, proc.stderr
    assert proc.stderr == f"objsdk: error: Permission denied: {device}\n"


# -- objsdk extract ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("members", "dest", "named"),
    [
        ({"a.txt": b"a"}, "", "a.txt"),
        ({"d/": None, "d/a.txt": b"a"}, "", "d"),
        ({"a.txt": b"a"}, "out", "out"),
    ],
    ids=["a file into it", "a folder into it", "into a folder to make"],
)
def test_extract_to_a_read_only_filesystem_names_the_archive_and_what_it_could_not_write(
    env: dict[str, str],
    client: Client,
    bucket: str,
    read_only_dir: Path,
    tmp_path: Path,
    members: dict[str, bytes | None],
    dest: str,
    named: str,
) -> None:
    # Before: "OSError: [Errno 30] Read-only file system: '.../.objsdk-<hex>.tmp'".
    client.put_object(bucket, "t.tar", _tar(members))
    proc = _cli(env, tmp_path, "extract", f"s3://{bucket}/t.tar", f"{read_only_dir}/{dest}")
    assert proc.returncode == 1, proc.stderr
    said = f"cannot write s3://{bucket}/t.tar to {read_only_dir}/{named}: Read-only file system"
    assert said in proc.stderr, proc.stderr
    _said_plainly(proc)


def test_extract_to_a_full_disk_names_the_member_and_leaves_no_temporary_file(
    env: dict[str, str], client: Client, bucket: str, small_dir: Path, tmp_path: Path
) -> None:
    # Before: "OSError: [Errno 28] No space left on device", naming nothing.
    big = os.urandom(SMALL_DIR + MiB)
    client.put_object(bucket, "t.tar", _tar({"small.txt": b"s", "big.bin": big}))
    proc = _cli(env, tmp_path, "extract", f"s3://{bucket}/t.tar", str(small_dir))
    assert proc.returncode == 1, proc.stderr
    said = f"cannot write s3://{bucket}/t.tar to {small_dir}/big.bin: No space left on device"
    assert said in proc.stderr, proc.stderr
    _said_plainly(proc)
    assert sorted(os.listdir(small_dir)) == ["small.txt"]


@pytest.mark.parametrize("dest", ["a-file", "a-file/out"], ids=["is a file", "under a file"])
def test_extract_where_a_file_stands_says_that_path_is_not_a_directory(
    env: dict[str, str], client: Client, bucket: str, tmp_path: Path, dest: str
) -> None:
    # Before: "FileExistsError: [Errno 17] File exists: '.../a-file'".
    client.put_object(bucket, "t.tar", _tar({"a.txt": b"a"}))
    (tmp_path / "a-file").write_bytes(b"")
    proc = _cli(env, tmp_path, "extract", f"s3://{bucket}/t.tar", str(tmp_path / dest))
    assert proc.returncode == 255, proc.stderr
    assert f"objsdk: error: Not a directory: {tmp_path / dest}\n" == proc.stderr
    assert (tmp_path / "a-file").read_bytes() == b""


def test_extract_over_a_file_that_refuses_to_be_replaced_names_that_file(
    env: dict[str, str], client: Client, bucket: str, tmp_path: Path
) -> None:
    # Before: "PermissionError: [Errno 1] Operation not permitted: '.../.objsdk-<hex>.tmp'
    # -> '.../out/a.txt'".
    client.put_object(bucket, "t.tar", _tar({"a.txt": b"new"}))
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "a.txt").write_bytes(b"old")
    with immutable(tmp_path / "out" / "a.txt"):
        proc = _cli(env, tmp_path, "extract", f"s3://{bucket}/t.tar", "out")
        assert proc.returncode == 255, proc.stderr
        assert proc.stderr == "objsdk: error: Operation not permitted: out/a.txt\n"
        assert sorted(os.listdir(tmp_path / "out")) == ["a.txt"]
    assert (tmp_path / "out" / "a.txt").read_bytes() == b"old"


# -- folders the fsspec filesystem makes ---------------------------------------------------


# A file fetched by one GET and renamed with its batch (get), one larger than that
# (get), and one asked for alone (get_file).
WAYS = {
    "get": (5, "get"),
    "get, larger than one GET": (SMALL_OBJECT + 1, "get"),
    "get_file": (5, "get_file"),
}


@pytest.mark.parametrize("way", WAYS)
def test_fs_get_under_a_file_is_not_a_directory_error_naming_it(
    fs: ObjsdkFileSystem, client: Client, bucket: str, tmp_path: Path, way: str
) -> None:
    # Before (get of a large file, get_file): FileExistsError, as os.makedirs says it.
    size, method = WAYS[way]
    client.put_object(bucket, "k", os.urandom(size))
    (tmp_path / "a-file").write_bytes(b"")
    with pytest.raises(NotADirectoryError) as info:
        getattr(fs, method)(f"{bucket}/k", str(tmp_path / "a-file" / "k"))
    assert info.value.errno == errno.ENOTDIR
    assert info.value.filename == str(tmp_path / "a-file")
    assert sorted(os.listdir(tmp_path)) == ["a-file"]


@pytest.mark.parametrize("under", ["", "sub/"], ids=["into it", "into a folder to make"])
@pytest.mark.parametrize("way", WAYS)
def test_fs_get_to_a_read_only_filesystem_is_a_local_write_error_naming_the_file(
    fs: ObjsdkFileSystem, client: Client, bucket: str, read_only_dir: Path, way: str, under: str
) -> None:
    # Before (a folder to make): OSError(EROFS), as os.makedirs says it, naming the folder.
    size, method = WAYS[way]
    client.put_object(bucket, "k", os.urandom(size))
    dest = f"{read_only_dir}/{under}k"
    with pytest.raises(objsdk.LocalWriteError) as info:
        getattr(fs, method)(f"{bucket}/k", dest)
    err = info.value
    assert (err.errno, err.filename, err.bucket, err.key) == (errno.EROFS, dest, bucket, "k")
    assert str(err) == f"cannot write s3://{bucket}/k to {dest}: Read-only file system"


def test_fs_get_of_a_directory_onto_a_file_is_not_a_directory_error_naming_it(
    fs: ObjsdkFileSystem, client: Client, bucket: str, tmp_path: Path
) -> None:
    # Before: FileExistsError, as os.makedirs says it.
    client.put_object(bucket, "d/sub/k", b"k")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "sub").write_bytes(b"")
    with pytest.raises(NotADirectoryError) as info:
        fs.get(f"{bucket}/d/", str(tmp_path / "out") + "/", recursive=True)
    assert (info.value.errno, info.value.filename) == (errno.ENOTDIR, str(tmp_path / "out" / "sub"))
