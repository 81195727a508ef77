"""Downloads to a path: where the bytes wait, and who may write them.

* No object key can produce the name of another download's temp file or record, so
  ``cp -r`` of a prefix holding ``y`` beside ``y.objsdk-download`` (and the like) writes
  each object to its own file.
* A record proves which bucket, key, version and destination it belongs to.
* A download that opened the temp file just as another finished with it never rewrites
  the finished file.
* Final names of up to 255 bytes (NAME_MAX) download, and resume.
* A destination that can never take the object (a longer name, a NUL, a trailing
  separator) is refused before anything is fetched, naming it; nothing is left behind.
* A symbolic link at the destination is replaced, its target left as it was.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import COMMAND, env
from local_fs_helpers import read_only_dir
from user_env import without_aws

import objsdk
from objsdk import Client, InvalidArgument
from objsdk._transfer import download_file as download_module
from objsdk._transfer.download_state import DownloadState, download_paths, save_state

__all__ = ["env", "read_only_dir"]  # fixtures, used by name

pytestmark = pytest.mark.integration

MiB = 1 << 20
CLI = [sys.executable, "-m", "objsdk.cli"]


class Interrupted(Exception):
    pass


def interrupt_after(limit: int):
    def progress(done: int, total: int | None) -> None:
        if done > limit:
            raise Interrupted

    return progress


# -- names no key can produce --------------------------------------------------------------


def test_cp_r_of_keys_named_like_temp_files_and_records_writes_each_object_to_its_own_file(
    client: Client, bucket: str, local_minio, tmp_path: Path
) -> None:
    objects = {"col/y": os.urandom(3 * MiB)}
    # Every name a download's temp file or record had or might have beside out/y.
    for name in (
        "y.objsdk-download",
        "y.objsdk-download.json",
        ".y.objsdk-download",
        ".y.objsdk-download.json",
        ".y.objsdk-0000000000000000",
        ".y.objsdk-0000000000000000.json",
    ):
        objects[f"col/{name}"] = os.urandom(40)
    record = {"format": 2, "bucket": bucket, "key": "col/y", "etag": None, "done": [[0, 0]]}
    objects["col/y.objsdk-download.json"] = json.dumps(record).encode()
    for key, data in objects.items():
        client.put_object(bucket, key, data)
    home = tmp_path / "home"
    home.mkdir()
    env = {
        **without_aws(),
        "HOME": str(home),
        "AWS_ENDPOINT_URL": local_minio.endpoint,
        "AWS_ACCESS_KEY_ID": local_minio.access_key,
        "AWS_SECRET_ACCESS_KEY": local_minio.secret_key,
    }
    out = tmp_path / "out"
    for _ in range(3):  # the interleaving of four jobs varies from run to run
        proc = subprocess.run(
            [*CLI, "cp", "-r", f"s3://{bucket}/col/", str(out), "--jobs", "4"],
            env=env,
            capture_output=True,
            timeout=120,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr.decode()
        for key, data in objects.items():
            assert (out / key.removeprefix("col/")).read_bytes() == data, key
        assert sorted(os.listdir(out)) == sorted(k.removeprefix("col/") for k in objects)


def test_the_temp_name_cannot_be_worked_out_from_the_destination_alone(
    tmp_path: Path, monkeypatch
) -> None:
    # The tag is keyed by a random key kept per user: another key, another name.
    dest = str(tmp_path / "y")
    mine = download_paths(dest)
    monkeypatch.setattr("objsdk._transfer.download_state._download_key", lambda: os.urandom(32))
    theirs = download_paths(dest)
    assert mine != theirs
    for name in (*mine, *theirs):
        assert os.path.dirname(name) == str(tmp_path)
        assert os.path.basename(name).startswith(".y.objsdk-")


def test_a_record_for_another_destination_is_not_trusted(
    client: Client, bucket: str, tmp_path: Path
) -> None:
    data = os.urandom(4 * MiB)
    client.put_object(bucket, "k", data)
    info = client.head_object(bucket, "k")
    dest = tmp_path / "k"
    temp, record = download_paths(str(dest))
    # A temp file of the right size full of zeros, and a record that claims every part
    # of it for this object, but for another destination.
    Path(temp).write_bytes(bytes(len(data)))
    claim = DownloadState(
        bucket,
        "k",
        info.etag,
        info.version_id,
        len(data),
        MiB,
        str(tmp_path / "other"),
        frozenset(range(4)),
    )
    save_state(record, claim)
    result = client.download(bucket, "k", dest, part_size=MiB)
    assert result.parts_reused == 0
    assert dest.read_bytes() == data


# -- the lock ------------------------------------------------------------------------------


def test_a_download_that_opened_the_temp_file_as_another_finished_leaves_the_file_whole(
    client: Client, bucket: str, tmp_path: Path, monkeypatch
) -> None:
    data = os.urandom(8 * MiB)
    client.put_object(bucket, "k", data)
    dest = tmp_path / "k"
    second_opened, first_done = threading.Event(), threading.Event()
    real_lock, real_fetch = download_module._lock, download_module.fetch_parts
    failures: list[BaseException] = []

    def lock(fd, path, info):
        if threading.current_thread().name == "second":
            second_opened.set()  # it has opened the temp file: now let the first finish
            assert first_done.wait(30)
        return real_lock(fd, path, info)

    def second() -> None:
        try:
            client.download(
                bucket, "k", dest, parallel=1, part_size=MiB, progress=interrupt_after(MiB)
            )
        except Interrupted:
            pass
        except BaseException as e:  # pragma: no cover - reported below
            failures.append(e)

    def fetch_then_let_the_second_open(*args, **kwargs):
        used = real_fetch(*args, **kwargs)
        if threading.current_thread().name != "second":
            threading.Thread(target=second, name="second").start()
            assert second_opened.wait(30)
        return used

    monkeypatch.setattr(download_module, "_lock", lock)
    monkeypatch.setattr(download_module, "fetch_parts", fetch_then_let_the_second_open)
    client.download(bucket, "k", dest, parallel=1, part_size=MiB)
    first_done.set()
    for t in threading.enumerate():
        if t.name == "second":
            t.join(60)
    assert not failures
    # The second download stopped after one part of its own temp file; the first's
    # finished file was never rewritten in place.
    assert dest.read_bytes() == data


# -- long names ------------------------------------------------------------------------------


@pytest.mark.parametrize("length", [240, 250, 255])
def test_final_names_up_to_255_bytes_download(
    client: Client, bucket: str, tmp_path: Path, length: int, s3_features: Any
) -> None:
    name = "n" * (length - 4) + ".bin"
    data = os.urandom(3 * MiB)
    client.put_object(bucket, f"dir/{name}", data)
    dest = tmp_path / name
    result = client.download(bucket, f"dir/{name}", dest, part_size=MiB)
    assert dest.read_bytes() == data
    # moto keeps no checksum sent with a single PUT (docs/compatibility.md).
    assert result.verified == ("crc32c" if s3_features.stores_put_checksum else None)
    assert os.listdir(tmp_path) == [name]


def test_a_255_byte_name_resumes_after_an_interruption(
    client: Client, bucket: str, tmp_path: Path
) -> None:
    name = "é" * 126 + "xyz"  # 255 bytes in UTF-8: a cut must not split a character
    assert len(name.encode()) == 255
    data = os.urandom(4 * MiB)
    client.put_object(bucket, "k", data)
    dest = tmp_path / name
    with pytest.raises(Interrupted):
        client.download(bucket, "k", dest, parallel=1, part_size=MiB, progress=interrupt_after(MiB))
    assert not dest.exists()
    result = client.download(bucket, "k", dest, parallel=1, part_size=MiB)
    assert result.parts_reused >= 1
    assert dest.read_bytes() == data
    assert os.listdir(tmp_path) == [name]


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("n" * 256, "its file name is 256 bytes, and its directory allows 255"),
        ("é" * 128, "its file name is 256 bytes"),
        ("sub/", "ends with a separator: name the file, such as '{tmp}/sub/k'"),
        ("a\0b", "holds a NUL character"),
    ],
    ids=["256 bytes", "256 bytes of UTF-8", "trailing separator", "NUL"],
)
def test_a_destination_that_cannot_take_the_object_is_refused_before_any_byte_is_fetched(
    client: Client, bucket: str, tmp_path: Path, name: str, says: str
) -> None:
    # Before: the whole object was fetched into the temp file, then the rename failed
    # (ENAMETOOLONG, ENOTDIR) with a bare OSError, leaving temp file and record behind.
    client.put_object(bucket, "k", b"x" * MiB)
    fetched: list[int] = []
    with pytest.raises(InvalidArgument) as info:
        client.download(bucket, "k", f"{tmp_path}/{name}", progress=lambda d, t: fetched.append(d))
    assert says.format(tmp=tmp_path) in str(info.value)
    assert "(bucket " in str(info.value)
    assert fetched == []
    assert os.listdir(tmp_path) == []


def test_the_key_is_kept_per_user_and_a_cache_that_cannot_hold_it_still_gives_names(
    tmp_path: Path, monkeypatch
) -> None:
    from objsdk._transfer import download_state

    monkeypatch.setattr(download_state, "_keys", {})
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    first = download_paths("/data/y")
    assert (tmp_path / "cache" / "objsdk" / "download-key").stat().st_mode & 0o077 == 0
    monkeypatch.setattr(download_state, "_keys", {})
    assert download_paths("/data/y") == first  # the same key, read back: resumable
    (tmp_path / "blocked").write_text("a file, not a directory")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "blocked"))
    temp, record = download_paths("/data/y")  # a key for this process only
    assert temp.startswith("/data/.y.objsdk-")
    assert record == temp + ".json"


# -- symbolic links ------------------------------------------------------------------------


@pytest.mark.parametrize("size", [5, 40 * MiB], ids=["one-part", "parts"])
def test_a_symlink_at_dest_is_replaced_and_its_target_left_as_it_was(
    client: Client, bucket: str, tmp_path: Path, size: int
) -> None:
    data = os.urandom(size)
    client.put_object(bucket, "k", data)
    target = tmp_path / "target"
    target.write_bytes(b"the target's own bytes")
    link = tmp_path / "link"
    link.symlink_to(target)
    # As aws s3 cp and mv do: the finished temp file is renamed over the link itself.
    client.download(bucket, "k", link)
    assert not link.is_symlink()
    assert link.read_bytes() == data
    assert target.read_bytes() == b"the target's own bytes"
    # A link on the way to dest is followed, as in any path.
    (tmp_path / "real").mkdir()
    (tmp_path / "via").symlink_to(tmp_path / "real")
    client.download(bucket, "k", tmp_path / "via" / "f")
    assert (tmp_path / "real" / "f").read_bytes() == data


# -- destinations that are not there, or cannot be written ---------------------------------


@pytest.mark.parametrize("size", [5, 3 * MiB], ids=["one-part", "parts"])
@pytest.mark.parametrize(
    ("where", "error"),
    [("missing/dest", FileNotFoundError), ("a-file/dest", NotADirectoryError)],
    ids=["missing folder", "parent is a file"],
)
def test_a_destination_whose_folder_is_not_there_is_python_s_own_error_naming_it(
    client: Client, bucket: str, tmp_path: Path, size: int, where: str, error: type[OSError]
) -> None:
    # Before: InvalidArgument (a ValueError) naming the hidden temp file.
    client.put_object(bucket, "k", os.urandom(size))
    (tmp_path / "a-file").write_bytes(b"")
    dest = tmp_path / where
    with pytest.raises(error) as info:
        client.download(bucket, "k", dest, part_size=MiB)
    assert not isinstance(info.value, ValueError)
    assert info.value.filename == str(dest)  # the path the caller named, not the temp's
    assert sorted(os.listdir(tmp_path)) == ["a-file"]


@pytest.mark.parametrize("size", [5, 3 * MiB], ids=["one-part", "parts"])
def test_a_destination_on_a_read_only_filesystem_is_a_local_write_error_with_its_errno(
    client: Client, bucket: str, read_only_dir: Path, size: int
) -> None:
    client.put_object(bucket, "k", os.urandom(size))
    dest = read_only_dir / "dest"
    with pytest.raises(objsdk.LocalWriteError) as info:
        client.download(bucket, "k", dest, part_size=MiB)
    err = info.value
    assert err.errno == errno.EROFS
    assert err.filename == str(dest)
    assert str(err) == f"cannot write s3://{bucket}/k to {dest}: Read-only file system"
    assert not isinstance(err, ValueError)


def _cp(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*COMMAND, "cp", *args], capture_output=True, text=True, env=env, timeout=60
    )


@pytest.mark.parametrize(
    ("recursive", "under"),
    [(False, ""), (False, "sub/"), (True, ""), (True, "sub/")],
    ids=["cp", "cp into a folder to make", "cp -r", "cp -r into a folder to make"],
)
def test_cli_cp_under_a_file_says_that_path_is_not_a_directory(
    env: dict[str, str], client: Client, bucket: str, tmp_path: Path, recursive: bool, under: str
) -> None:
    # Before: "FileExistsError: [Errno 17] File exists" (cp), and a NotADirectoryError
    # naming the hidden temporary file (cp -r, the small-object path).
    client.put_object(bucket, "d/k", b"data")
    (tmp_path / "a-file").write_bytes(b"")
    folder = f"{tmp_path}/a-file/{under}"
    args = (
        ["-r", f"s3://{bucket}/d/", folder] if recursive else [f"s3://{bucket}/d/k", folder + "k"]
    )
    proc = _cp(env, *args)
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    assert f"Not a directory: {tmp_path}/a-file" in proc.stderr, proc.stderr
    assert ".objsdk-" not in proc.stderr, proc.stderr
    assert "Error:" not in proc.stderr, proc.stderr
    assert sorted(os.listdir(tmp_path)) == ["a-file", "home"]


@pytest.mark.parametrize(
    ("recursive", "under"),
    [(False, ""), (False, "sub/"), (True, ""), (True, "sub/")],
    ids=["cp", "cp into a folder to make", "cp -r", "cp -r into a folder to make"],
)
def test_cli_cp_to_a_read_only_filesystem_names_the_object_and_its_destination(
    env: dict[str, str],
    client: Client,
    bucket: str,
    read_only_dir: Path,
    recursive: bool,
    under: str,
) -> None:
    # Before (cp -r): "OSError: [Errno 30] Read-only file system" naming a temporary file.
    client.put_object(bucket, "d/k", b"data")
    dest = f"{read_only_dir}/{under}k"
    args = (
        ["-r", f"s3://{bucket}/d/", f"{read_only_dir}/{under}"]
        if recursive
        else [
            f"s3://{bucket}/d/k",
            dest,
        ]
    )
    proc = _cp(env, *args)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    said = f"cannot write s3://{bucket}/d/k to {dest}: Read-only file system"
    assert said in proc.stderr, proc.stderr
