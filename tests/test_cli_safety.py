"""The command line at the edges of the local filesystem and of the process: signals,
symlinks, archives that try to write outside their destination, coarse server clocks.
Each test runs the console script in a subprocess against the local MinIO."""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import re
import shlex
import signal
import stat
import subprocess
import tarfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import (
    COMMAND,
    Run,
    env,
    keys,
    multipart_uploads,
    parts_stored,
    run,
    tree,
    wait_for,
)

from objsdk import Client, ObjectSummary

__all__ = ["env", "run"]  # fixtures, used by name

pytestmark = pytest.mark.integration


# -- SIGTERM and SIGHUP ----------------------------------------------------------------------


def _default_signals() -> None:
    # A terminal's or a service manager's child: the suite itself may run under nohup(1),
    # whose ignored SIGHUP the child would inherit (and, rightly, keep).
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def test_sigterm_during_file_upload_keeps_it_exits_143_and_says_how_to_resume_it(
    env: dict[str, str], local_minio: Any, minio_proxy: Any, client: Client, bucket: str,
    tmp_path: Path,
) -> None:  # fmt: skip
    data = os.urandom(12 << 20)
    (tmp_path / "big.bin").write_bytes(data)
    minio_proxy.add_toxic("bandwidth", stream="upstream", rate=4096)  # 4 MB/s
    command = [*COMMAND, "cp", "big.bin", f"s3://{bucket}/big", "--part-size", "5MiB",
               "--multipart-threshold", "5MiB", "--parallel", "1"]  # fmt: skip
    proxied = {**env, "AWS_ENDPOINT_URL": minio_proxy.endpoint}
    proc = subprocess.Popen(
        command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=proxied
    )
    wait_for(lambda: parts_stored(local_minio, bucket, "big") >= 1, "a part stored")
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 143, err
    text = err.decode()
    assert "interrupted (SIGTERM)" in text
    assert f"of {tmp_path / 'big.bin'} to s3://{bucket}/big is kept" in text
    assert "running the same command again resumes it" in text
    assert "Traceback" not in text
    assert multipart_uploads(local_minio, bucket) == ["big"]
    # The command it names to discard it aborts that one upload, not all under big.
    (kept,) = client.list_multipart_uploads(bucket)
    named = f"objsdk uploads abort s3://{bucket}/big --upload-id {shlex.quote(kept.upload_id)}"
    assert f"`{named}` discards it" in text
    # The same command again, through the same endpoint, sends the rest.
    again = subprocess.run(command, cwd=tmp_path, capture_output=True, env=proxied, timeout=60)
    assert again.returncode == 0, again.stderr
    assert b"of it already stored" in again.stderr
    assert client.get_object(bucket, "big") == data
    assert multipart_uploads(local_minio, bucket) == []


def test_sigterm_during_file_upload_with_no_resume_aborts_it_and_exits_143(
    env: dict[str, str], local_minio: Any, minio_proxy: Any, client: Client, bucket: str,
    tmp_path: Path,
) -> None:  # fmt: skip
    (tmp_path / "big.bin").write_bytes(os.urandom(12 << 20))
    minio_proxy.add_toxic("bandwidth", stream="upstream", rate=4096)  # 4 MB/s
    proc = subprocess.Popen(
        [*COMMAND, "cp", "big.bin", f"s3://{bucket}/big", "--part-size", "5MiB",
         "--multipart-threshold", "5MiB", "--parallel", "1", "--no-resume"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={**env, "AWS_ENDPOINT_URL": minio_proxy.endpoint},
    )  # fmt: skip
    wait_for(lambda: multipart_uploads(local_minio, bucket) == ["big"], "the upload")
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 143, err
    assert b"interrupted (SIGTERM)" in err
    assert b"Traceback" not in err
    assert multipart_uploads(local_minio, bucket) == []
    assert keys(client, bucket) == []


def test_sighup_during_streamed_upload_aborts_the_multipart_upload_and_exits_129(
    env: dict[str, str], local_minio: Any, client: Client, bucket: str
) -> None:
    proc = subprocess.Popen(
        [*COMMAND, "cp", "-", f"s3://{bucket}/stream", "--part-size", "5MiB"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
        preexec_fn=_default_signals,
    )  # fmt: skip
    assert proc.stdin is not None
    proc.stdin.write(os.urandom(11 << 20))  # two parts go out, then it waits for more
    proc.stdin.flush()
    wait_for(lambda: multipart_uploads(local_minio, bucket) == ["stream"], "the upload")
    proc.send_signal(signal.SIGHUP)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 129, err
    assert multipart_uploads(local_minio, bucket) == []
    assert keys(client, bucket) == []


def _ignore_sighup() -> None:
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # what nohup(1) does


def test_sighup_ignored_by_the_parent_stays_ignored(
    env: dict[str, str], local_minio: Any, client: Client, bucket: str
) -> None:
    proc = subprocess.Popen(
        [*COMMAND, "cp", "-", f"s3://{bucket}/nohup", "--part-size", "5MiB"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
        preexec_fn=_ignore_sighup,
    )  # fmt: skip
    assert proc.stdin is not None
    data = os.urandom(11 << 20)
    proc.stdin.write(data)
    proc.stdin.flush()
    wait_for(lambda: multipart_uploads(local_minio, bucket) == ["nohup"], "the upload")
    proc.send_signal(signal.SIGHUP)
    _, err = proc.communicate(timeout=30)  # closes stdin: the upload completes
    assert proc.returncode == 0, err
    assert client.get_object(bucket, "nohup") == data


def test_sigterm_during_download_leaves_no_partial_file_and_the_rerun_resumes(
    env: dict[str, str], minio_proxy: Any, client: Client, bucket: str, tmp_path: Path
) -> None:
    data = os.urandom(6 << 20)
    client.put_object(bucket, "d.bin", data)
    minio_proxy.add_toxic("bandwidth", rate=512)  # the object cannot arrive before ~4 s
    proc = subprocess.Popen(
        [*COMMAND, "cp", f"s3://{bucket}/d.bin", "d.bin", "--part-size", "1MiB"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={**env, "AWS_ENDPOINT_URL": minio_proxy.endpoint},
    )  # fmt: skip
    wait_for(lambda: any(tmp_path.glob(".d.bin.objsdk-*")), "the download to start")
    time.sleep(2.7)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 143, err
    assert not (tmp_path / "d.bin").exists()  # nothing under the final name
    again = subprocess.run(
        [*COMMAND, "--json", "cp", f"s3://{bucket}/d.bin", "d.bin", "--part-size", "1MiB"],
        cwd=tmp_path, capture_output=True, env=env, timeout=60,
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    summary = json.loads(again.stdout.splitlines()[-1])
    assert summary["bytes_reused"] > 0  # the parts fetched before the signal were kept
    assert hashlib.sha256((tmp_path / "d.bin").read_bytes()).digest() == (
        hashlib.sha256(data).digest()
    )


def test_a_rerun_says_how_much_of_an_interrupted_download_it_found_on_disk(
    run: Run,
    env: dict[str, str],
    client: Client,
    bucket: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    data = os.urandom(6 << 20)
    client.put_object(bucket, "d.bin", data)
    # This process finds the temp file the command will (the same download key).
    monkeypatch.setenv("HOME", env["HOME"])
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    if "XDG_CACHE_HOME" in env:
        monkeypatch.setenv("XDG_CACHE_HOME", env["XDG_CACHE_HOME"])

    class Stop(Exception):
        pass

    def stop(done: int, total: int) -> None:
        if done >= 3 << 20:
            raise Stop

    with pytest.raises(Stop):
        client.download(
            bucket, "d.bin", tmp_path / "d.bin", parallel=1, part_size=1 << 20, progress=stop
        )
    res = run("cp", f"s3://{bucket}/d.bin", "d.bin", "--part-size", "1MiB")
    assert res.code == 0, res.err
    assert re.search(r"resumed: 6\.0 MiB, [23]\.0 MiB of it already on disk", res.err), res.err
    assert (tmp_path / "d.bin").read_bytes() == data
    several = run("cp", "-r", f"s3://{bucket}/", "again")
    assert "already on disk" not in several.err  # nothing was interrupted this time


# -- symlinks in local walks -----------------------------------------------------------------


def test_sync_delete_never_deletes_through_a_symlinked_directory(
    run: Run, client: Client, bucket: str, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious.txt").write_bytes(b"keep me")
    (outside / "also.txt").write_bytes(b"and me")
    dst = tmp_path / "dst"
    dst.mkdir()
    (dst / "shared").symlink_to("../outside")
    client.put_object(bucket, "p/x.txt", b"x")
    res = run("sync", "--delete", f"s3://{bucket}/p", "dst")
    assert res.code == 0, res.err
    assert tree(outside) == {"precious.txt": b"keep me", "also.txt": b"and me"}
    assert (dst / "x.txt").read_bytes() == b"x"
    assert (dst / "shared").is_symlink()


def test_sync_delete_removes_a_symlinked_file_not_its_target(
    run: Run, client: Client, bucket: str, tmp_path: Path
) -> None:
    (tmp_path / "target.txt").write_bytes(b"target")
    dst = tmp_path / "dst"
    dst.mkdir()
    (dst / "link.txt").symlink_to("../target.txt")
    client.put_object(bucket, "p/x.txt", b"x")
    res = run("sync", "--delete", f"s3://{bucket}/p", "dst")
    assert res.code == 0, res.err
    assert not (dst / "link.txt").is_symlink()
    assert (tmp_path / "target.txt").read_bytes() == b"target"


def _tree_with_links(root: Path) -> None:
    (root / "sub").mkdir(parents=True)
    (root / "top.txt").write_bytes(b"top")
    (root / "sub" / "inner.txt").write_bytes(b"inner")
    other = root.parent / "other"
    other.mkdir()
    (other / "far.txt").write_bytes(b"far")
    (root / "linked").symlink_to("../other")
    (root / "file-link.txt").symlink_to("top.txt")


def test_recursive_upload_crosses_symlinked_directories_only_when_asked(
    run: Run, client: Client, bucket: str, tmp_path: Path
) -> None:
    _tree_with_links(tmp_path / "src")
    default = run("cp", "-r", "src", f"s3://{bucket}/d")
    assert default.code == 0, default.err
    assert keys(client, bucket, "d/") == ["d/file-link.txt", "d/sub/inner.txt", "d/top.txt"]
    assert "symlinked directory" in default.err
    follow = run("cp", "-r", "--follow-symlinks", "src", f"s3://{bucket}/f")
    assert follow.code == 0, follow.err
    assert keys(client, bucket, "f/") == [
        "f/file-link.txt", "f/linked/far.txt", "f/sub/inner.txt", "f/top.txt",
    ]  # fmt: skip
    none = run("sync", "--no-follow-symlinks", "src", f"s3://{bucket}/n")
    assert none.code == 0, none.err
    assert keys(client, bucket, "n/") == ["n/sub/inner.txt", "n/top.txt"]


@pytest.mark.parametrize("follow", [[], ["--follow-symlinks"]])
def test_symlink_loops_end_and_each_file_goes_once(
    run: Run, client: Client, bucket: str, tmp_path: Path, follow: list[str]
) -> None:
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "f.txt").write_bytes(b"f")
    (src / "sub" / "g.txt").write_bytes(b"g")
    (src / "a").symlink_to(".")
    (src / "b").symlink_to(".")
    (src / "sub" / "up").symlink_to("..")
    res = run("cp", "-r", *follow, "src", f"s3://{bucket}/l")
    assert res.code == 0, res.err
    assert keys(client, bucket) == ["l/f.txt", "l/sub/g.txt"]
    again = run("sync", *follow, "src", f"s3://{bucket}/l")
    assert again.code == 0, again.err
    assert "upload:" not in again.out


# -- extract ---------------------------------------------------------------------------------


def _realpath_limit_archive(dest: Path) -> bytes:
    """CVE-2025-4517's layout: nested folders of long names reached through one-letter
    symlinks, so the path as written fits in PATH_MAX but not once the links expand; a
    last link past the limit goes up to the destination's parent, and members written
    through it land there."""
    steps = "abcdefghijklmnop"
    path_max = os.pathconf(dest.parent, "PC_PATH_MAX")
    component = "d" * ((path_max - len(str(dest)) - 1) // (len(steps) + 1))
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:

        def add(name: str, **kw: Any) -> None:
            info = tarfile.TarInfo(name)
            data = kw.pop("content", None)
            for k, v in kw.items():
                setattr(info, k, v)
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)

        path = ""
        for step in steps:
            add(os.path.join(path, component), type=tarfile.DIRTYPE, mode=0o777)
            add(os.path.join(path, step), type=tarfile.SYMTYPE, linkname=component)
            path = os.path.join(path, component)
        linkpath = os.path.join(*steps, "l" * 254)
        add(linkpath, type=tarfile.SYMTYPE, linkname=os.path.join(*[".."] * len(steps)))
        add("escape", type=tarfile.SYMTYPE, linkname=os.path.join(linkpath, ".."))
        add("flaglink", type=tarfile.LNKTYPE, linkname=os.path.join("escape", "flag"))
        add("flaglink", content=b"overwritten")
        add("escape/newfile", content=b"new")
    return buf.getvalue()


def test_extract_refuses_the_realpath_limit_layout_on_any_python(
    run: Run, client: Client, bucket: str, tmp_path: Path
) -> None:
    work = tmp_path / "w"
    work.mkdir()
    (work / "flag").write_bytes(b"original")
    client.put_object(bucket, "evil.tar", _realpath_limit_archive(work / "out"))
    res = run("extract", f"s3://{bucket}/evil.tar", "w/out")
    assert res.code == 1, res.err
    assert "Traceback" not in res.err
    assert "refusing" in res.err
    assert (work / "flag").read_bytes() == b"original"
    assert sorted(p.name for p in work.iterdir()) == ["flag", "out"]


def _archive(members: list[tarfile.TarInfo], contents: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for info in members:
            data = contents.get(info.name)
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


def _link(name: str, target: str, kind: bytes = tarfile.SYMTYPE) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = target
    return info


@pytest.mark.parametrize(
    "members",
    [
        [_link("up", ".."), tarfile.TarInfo("up/x.txt")],
        [_link("abs", "/tmp"), tarfile.TarInfo("abs/x.txt")],
        [tarfile.TarInfo("/abs/x.txt")],
        [_link("y", "z/.."), _link("z", "."), tarfile.TarInfo("y/x.txt")],
    ],
    ids=["dotdot-link", "absolute-link", "absolute-name", "link-resolved-later"],
)
def test_extract_refuses_every_way_out_of_dest(
    run: Run, client: Client, bucket: str, tmp_path: Path, members: list[tarfile.TarInfo]
) -> None:
    work = tmp_path / "w"
    work.mkdir()
    client.put_object(bucket, "t.tar", _archive(members, {"up/x.txt": b"!", "y/x.txt": b"!"}))
    res = run("extract", f"s3://{bucket}/t.tar", "w/out")
    assert res.code == 1, res.err
    assert "refusing" in res.err
    assert sorted(p.name for p in work.iterdir()) == ["out"]
    assert not any(p.name == "x.txt" for p in work.rglob("*"))


def test_extract_keeps_links_that_stay_inside(
    run: Run, client: Client, bucket: str, tmp_path: Path
) -> None:
    members = [
        tarfile.TarInfo("d/a.txt"),
        _link("d/same.txt", "a.txt"),
        _link("top", "d"),
        _link("hard.txt", "d/a.txt", tarfile.LNKTYPE),
    ]
    client.put_object(bucket, "ok.tar", _archive(members, {"d/a.txt": b"a"}))
    res = run("extract", f"s3://{bucket}/ok.tar", "out")
    assert res.code == 0, res.err
    out = tmp_path / "out"
    assert (out / "top" / "same.txt").read_bytes() == b"a"
    assert (out / "hard.txt").read_bytes() == b"a"


# -- sync against whole-second clocks --------------------------------------------------------


def test_sync_up_compares_times_to_the_whole_second(
    run: Run, client: Client, bucket: str, tmp_path: Path
) -> None:
    # AWS, moto, SeaweedFS and s3rver keep LastModified in whole seconds: a file changed
    # in the second of its upload looks newer than the object to the sub-second clock.
    src = tmp_path / "src"
    src.mkdir()
    (src / "f.txt").write_bytes(b"same")
    assert run("sync", "src", f"s3://{bucket}/s").code == 0
    stored = client.head_object(bucket, "s/f.txt").last_modified
    assert stored is not None
    late_in_that_second = math.floor(stored.timestamp()) + 0.999
    os.utime(src / "f.txt", (late_in_that_second, late_in_that_second))
    again = run("sync", "src", f"s3://{bucket}/s")
    assert again.code == 0, again.err
    assert again.out == ""


# -- many small files ------------------------------------------------------------------------


def test_sigkill_during_many_small_downloads_leaves_no_partial_file_under_a_final_name(
    env: dict[str, str], minio_proxy: Any, client: Client, bucket: str, tmp_path: Path
) -> None:
    objects = {f"many/f{i:02d}.bin": os.urandom(64 << 10) for i in range(40)}
    for key, data in objects.items():
        client.put_object(bucket, key, data)
    minio_proxy.add_toxic("bandwidth", rate=256)  # 256 kB/s a connection: ~0.25 s a file
    proc = subprocess.Popen(
        [*COMMAND, "cp", "-r", f"s3://{bucket}/many", "out", "--jobs", "4"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={**env, "AWS_ENDPOINT_URL": minio_proxy.endpoint},
    )  # fmt: skip
    wait_for(lambda: any((tmp_path / "out").glob(".objsdk-*.tmp")), "the first temporary file")
    time.sleep(1.0)
    proc.kill()
    proc.communicate(timeout=30)
    names = sorted(p.name for p in (tmp_path / "out").iterdir())
    finals = [n for n in names if not n.startswith(".objsdk-")]
    assert len(finals) < len(objects)  # killed mid-run
    for name in finals:
        assert (tmp_path / "out" / name).read_bytes() == objects[f"many/{name}"]
    assert all(n.endswith(".tmp") for n in names if n.startswith(".objsdk-"))
    assert not any(n.endswith(".json") for n in names)  # no resume records for these


def test_small_downloads_keep_the_object_dates_and_leave_no_temporary_files(
    run: Run, client: Client, bucket: str, tmp_path: Path
) -> None:
    for i in range(300):  # more than one batch
        client.put_object(bucket, f"d/{i:03d}", str(i).encode())
    res = run("cp", "-r", f"s3://{bucket}/d", "out")
    assert res.code == 0, res.err
    out = tmp_path / "out"
    assert sorted(p.name for p in out.iterdir()) == [f"{i:03d}" for i in range(300)]
    assert (out / "123").read_bytes() == b"123"
    (listed,) = [e for e in client.list_objects(bucket, prefix="d/123")]
    assert isinstance(listed, ObjectSummary)
    assert listed.last_modified is not None
    assert abs((out / "123").stat().st_mtime - listed.last_modified.timestamp()) < 1e-3


def test_a_recursive_download_writes_into_a_fifo_at_a_file_name_never_over_it(
    run: Run, client: Client, bucket: str, tmp_path: Path
) -> None:
    # As cp and aws s3 cp write into a FIFO or a device: renaming over it would replace
    # a named pipe another program reads (or, as root, a device) with a regular file.
    client.put_object(bucket, "p/a.txt", b"a")
    client.put_object(bucket, "p/pipe", b"through the pipe")
    (tmp_path / "out").mkdir()
    fifo = tmp_path / "out" / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    res = run("cp", "-r", f"s3://{bucket}/p", "out")
    reader.join(timeout=10)
    assert res.code == 0, res.err
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
    assert got == [b"through the pipe"]
    assert (tmp_path / "out" / "a.txt").read_bytes() == b"a"
    assert not list((tmp_path / "out").glob(".objsdk-*"))


def test_mv_deletes_an_object_only_once_its_file_has_its_final_name(
    env: dict[str, str], minio_proxy: Any, client: Client, bucket: str, tmp_path: Path
) -> None:
    objects = {f"mv/f{i:02d}.bin": os.urandom(64 << 10) for i in range(40)}
    for key, data in objects.items():
        client.put_object(bucket, key, data)
    minio_proxy.add_toxic("bandwidth", rate=256)  # ~0.25 s a file
    proc = subprocess.Popen(
        [*COMMAND, "mv", "-r", f"s3://{bucket}/mv", "out", "--jobs", "4"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={**env, "AWS_ENDPOINT_URL": minio_proxy.endpoint},
    )  # fmt: skip
    wait_for(lambda: any((tmp_path / "out").glob(".objsdk-*.tmp")), "the first temporary file")
    time.sleep(1.5)
    proc.kill()
    proc.communicate(timeout=30)
    for key in set(objects) - set(keys(client, bucket)):  # moved: the file must be there
        assert (tmp_path / "out" / key.split("/")[1]).read_bytes() == objects[key]
    done = subprocess.run(
        [*COMMAND, "mv", "-r", f"s3://{bucket}/mv", "out"], cwd=tmp_path, env=env,
        capture_output=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert keys(client, bucket) == []
    assert tree(tmp_path / "out") == {k.split("/")[1]: v for k, v in objects.items()} | {
        p.name: p.read_bytes() for p in (tmp_path / "out").glob(".objsdk-*.tmp")
    }


def test_downloads_never_write_through_a_symlinked_directory_unless_asked(
    run: Run, client: Client, bucket: str, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    dst = tmp_path / "dst"
    dst.mkdir()
    (dst / "shared").symlink_to("../outside")
    client.put_object(bucket, "p/shared/x.txt", b"x")
    client.put_object(bucket, "p/y.txt", b"y")
    for command in ("cp", "sync"):
        res = run(command, *(["-r"] if command == "cp" else []), f"s3://{bucket}/p", "dst")
        assert res.code == 2, res.err
        assert "symlinked directory" in res.err
        assert list(outside.iterdir()) == []
        assert (dst / "y.txt").read_bytes() == b"y"
    asked = run("cp", "-r", "--follow-symlinks", f"s3://{bucket}/p", "dst")
    assert asked.code == 0, asked.err
    assert (outside / "x.txt").read_bytes() == b"x"


@pytest.mark.parametrize("size", [0, 5, 300_000])
def test_small_downloads_are_verified_and_a_mismatch_leaves_no_file(
    env: dict[str, str], local_minio: Any, client: Client, bucket: str, tmp_path: Path, size: int
) -> None:
    from objsdk.testing.faultproxy import Action, FaultProxy

    client.put_object(bucket, "v/good.bin", os.urandom(size) or b"g")
    client.put_object(bucket, "v/bad.bin", os.urandom(size) or b"b")
    with FaultProxy(local_minio.endpoint) as proxy:
        # The checksum the answer carries no longer matches its bytes.
        proxy.add_rule(
            Action.SET_HEADERS, method="GET", path=r"/v/bad\.bin$", times=None,
            headers={"x-amz-checksum-crc32c": "AAAAAA=="},
        )  # fmt: skip
        res = subprocess.run(
            [*COMMAND, "cp", "-r", f"s3://{bucket}/v", "out"], cwd=tmp_path,
            env={**env, "AWS_ENDPOINT_URL": proxy.endpoint}, capture_output=True, timeout=60,
        )  # fmt: skip
    assert res.returncode == 1, res.stderr
    assert b"bad.bin" in res.stderr
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["good.bin"]


def test_sigterm_during_extract_leaves_no_partial_member_under_its_name(
    env: dict[str, str], minio_proxy: Any, client: Client, bucket: str, tmp_path: Path
) -> None:
    big = os.urandom(6 << 20)
    client.put_object(bucket, "a.tar", _archive([tarfile.TarInfo("big.bin")], {"big.bin": big}))
    minio_proxy.add_toxic("bandwidth", rate=1024)  # ~6 s for the member
    proc = subprocess.Popen(
        [*COMMAND, "extract", f"s3://{bucket}/a.tar", "out", "--readahead", "0"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={**env, "AWS_ENDPOINT_URL": minio_proxy.endpoint},
    )  # fmt: skip
    out = tmp_path / "out"
    wait_for(lambda: out.is_dir() and any(out.iterdir()), "the member to start")
    time.sleep(1.0)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 143, err
    assert list(out.iterdir()) == []  # neither big.bin cut short nor its temporary file
    again = subprocess.run(
        [*COMMAND, "extract", f"s3://{bucket}/a.tar", "out"], cwd=tmp_path, env=env,
        capture_output=True, timeout=60,
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert (out / "big.bin").read_bytes() == big
