"""The aws CLI's flags and commands, with the aws CLI's semantics, run as the console
script in a subprocess against the local MinIO."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import COMMAND, Run, env, keys, run, tree
from s3_helpers import boto3_client, grant_unsigned

from objsdk import Client

__all__ = ["env", "run"]  # fixtures, used by name

pytestmark = pytest.mark.integration


def _files(root: Path, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)


MIXED = {"a.txt": b"a", "b.log": b"bb", "sub/c.txt": b"ccc", "sub/d.log": b"dddd"}


# -- --exclude / --include -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        (["--exclude", "*", "--include", "*.txt"], ["a.txt", "sub/c.txt"]),
        (["--include", "*.txt", "--exclude", "*"], []),  # the last match decides
        (["--exclude", "sub/*"], ["a.txt", "b.log"]),  # * crosses /
        (["--exclude", "*.log", "--include", "sub/d.log"], ["a.txt", "sub/c.txt", "sub/d.log"]),
    ],
)
def test_cp_recursive_applies_exclude_and_include_in_order(
    run: Run, client: Client, bucket: str, tmp_path: Path, filters: list[str], expected: list[str]
) -> None:
    _files(tmp_path / "src", MIXED)
    res = run("cp", "-r", "src", f"s3://{bucket}/up", *filters)
    assert res.code == 0, res.err
    assert keys(client, bucket) == [f"up/{k}" for k in expected]


def test_cp_recursive_down_and_rm_recursive_apply_filters(
    run: Run, client: Client, bucket: str, tmp_path: Path
) -> None:
    for rel, data in MIXED.items():
        client.put_object(bucket, f"p/{rel}", data)
    down = run("cp", "-r", f"s3://{bucket}/p", "out", "--exclude", "*.log")
    assert down.code == 0, down.err
    assert tree(tmp_path / "out") == {"a.txt": b"a", "sub/c.txt": b"ccc"}
    rm = run("rm", "-r", f"s3://{bucket}/p", "--exclude", "*", "--include", "sub/*")
    assert rm.code == 0, rm.err
    assert keys(client, bucket) == ["p/a.txt", "p/b.log"]


def test_sync_delete_leaves_excluded_files_alone(
    run: Run, client: Client, bucket: str, tmp_path: Path
) -> None:
    _files(tmp_path / "src", {"keep.txt": b"k"})
    client.put_object(bucket, "s/stale.txt", b"old")
    client.put_object(bucket, "s/notes.log", b"excluded, so never deleted")
    res = run("sync", "--delete", "src", f"s3://{bucket}/s", "--exclude", "*.log")
    assert res.code == 0, res.err
    assert keys(client, bucket) == ["s/keep.txt", "s/notes.log"]


# -- sync comparisons ------------------------------------------------------------------------


def test_sync_size_only_ignores_times(
    run: Run, client: Client, bucket: str, tmp_path: Path
) -> None:
    _files(tmp_path / "src", {"f.txt": b"AAAA"})
    assert run("sync", "src", f"s3://{bucket}/s").code == 0
    (tmp_path / "src" / "f.txt").write_bytes(b"BBBB")
    future = 4_000_000_000
    os.utime(tmp_path / "src" / "f.txt", (future, future))  # newer than the object
    same_size = run("sync", "--size-only", "src", f"s3://{bucket}/s")
    assert same_size.code == 0, same_size.err
    assert same_size.out == ""
    assert client.get_object(bucket, "s/f.txt") == b"AAAA"
    res = run("sync", "src", f"s3://{bucket}/s")
    assert res.out.strip() == f"upload: src/f.txt to s3://{bucket}/s/f.txt"


def test_sync_exact_timestamps_downloads_a_same_sized_file_of_another_time(
    run: Run, client: Client, bucket: str, tmp_path: Path
) -> None:
    client.put_object(bucket, "d/f.txt", b"remote")
    assert run("sync", f"s3://{bucket}/d", "local").code == 0
    local = tmp_path / "local" / "f.txt"
    local.write_bytes(b"LOCAL!")  # same size, newer than the object
    later = local.stat().st_mtime + 100
    os.utime(local, (later, later))
    assert run("sync", f"s3://{bucket}/d", "local").out == ""
    res = run("sync", "--exact-timestamps", f"s3://{bucket}/d", "local")
    assert res.code == 0, res.err
    assert local.read_bytes() == b"remote"
    assert run("sync", "--exact-timestamps", f"s3://{bucket}/d", "local").out == ""


def test_dryrun_is_an_alias_of_dry_run(
    run: Run, client: Client, bucket: str, tmp_path: Path
) -> None:
    _files(tmp_path / "src", {"f.txt": b"x"})
    res = run("sync", "--dryrun", "src", f"s3://{bucket}/s")
    assert res.code == 0, res.err
    assert res.out.strip() == f"(dryrun) upload: src/f.txt to s3://{bucket}/s/f.txt"
    assert keys(client, bucket) == []


# -- output ----------------------------------------------------------------------------------


def test_only_show_errors_prints_nothing_but_errors(
    run: Run, client: Client, bucket: str, tmp_path: Path
) -> None:
    _files(tmp_path / "src", MIXED)
    res = run("cp", "-r", "--only-show-errors", "src", f"s3://{bucket}/q")
    assert res.code == 0, res.err
    assert res.out == ""
    assert res.err == ""
    assert len(keys(client, bucket)) == 4
    bad = run("cp", "--only-show-errors", f"s3://{bucket}/missing", "x")
    assert bad.code == 254
    assert "NoSuchKey" in bad.err


def test_recursive_copy_ends_with_a_summary_line(run: Run, bucket: str, tmp_path: Path) -> None:
    _files(tmp_path / "src", MIXED)
    res = run("cp", "-r", "src", f"s3://{bucket}/sum")
    assert res.code == 0, res.err
    assert res.out.count("upload: ") == 4
    assert res.err.strip().splitlines()[-1].startswith("transferred 4 files, 10 Bytes in ")


def test_sync_summary_counts_deletions_apart_from_transfers(
    run: Run, client: Client, bucket: str, tmp_path: Path
) -> None:
    _files(tmp_path / "src", {"a.txt": b"abcd"})
    client.put_object(bucket, "d/old1.txt", b"old")
    client.put_object(bucket, "d/old2.txt", b"old")
    res = run("sync", "--delete", "src", f"s3://{bucket}/d")
    assert res.code == 0, res.err
    summary = res.err.strip().splitlines()[-1]
    assert summary.startswith("transferred 1 file, 4 Bytes in "), summary
    assert summary.endswith(", deleted 2 files"), summary
    (tmp_path / "src" / "a.txt").unlink()
    (tmp_path / "src" / "b.txt").write_bytes(b"")
    client.put_object(bucket, "d/b.txt", b"")
    only = run("sync", "--delete", "src", f"s3://{bucket}/d")
    assert only.code == 0, only.err
    assert only.err.strip().splitlines()[-1] == "deleted 1 file"


def test_json_prints_a_line_per_file_and_per_deletion(
    run: Run, client: Client, bucket: str, tmp_path: Path
) -> None:
    _files(tmp_path / "src", {"a.txt": b"a", "b.txt": b"b"})
    client.put_object(bucket, "j/stale.txt", b"old")
    res = run("--json", "sync", "--delete", "src", f"s3://{bucket}/j")
    assert res.code == 0, res.err
    *lines, summary = res.json_lines()
    assert sorted((x["action"], x["dest"]) for x in lines) == [
        ("delete", f"s3://{bucket}/j/stale.txt"),
        ("upload", f"s3://{bucket}/j/a.txt"),
        ("upload", f"s3://{bucket}/j/b.txt"),
    ]
    assert (summary["transferred"], summary["deleted"], summary["bytes"]) == (2, 1, 2)
    rm = run("--json", "rm", "-r", f"s3://{bucket}/j")
    assert sorted(x["dest"] for x in rm.json_lines()) == [
        f"s3://{bucket}/j/a.txt",
        f"s3://{bucket}/j/b.txt",
    ]


def test_json_errors_are_objects_on_stderr(run: Run) -> None:
    res = run("--json", "ls", "s3://no-such-bucket-here")
    assert res.code == 254
    (error,) = [json.loads(line) for line in res.err.splitlines()]
    assert error["code"] == "NoSuchBucket"
    assert error["bucket"] == "no-such-bucket-here"
    assert error["exit_code"] == 254
    assert "no-such-bucket-here" in error["message"]


def test_a_json_error_of_a_listing_names_its_prefix(run: Run) -> None:
    res = run("--json", "ls", "s3://no-such-bucket-here/logs/2024/")
    (error,) = [json.loads(line) for line in res.err.splitlines()]
    assert (error["bucket"], error["prefix"]) == ("no-such-bucket-here", "logs/2024/")
    assert "key" not in error


@pytest.mark.parametrize("option", ["--exclude-all", "--inc"])  # never an abbreviation
def test_an_unknown_option_is_named(run: Run, bucket: str, option: str) -> None:
    res = run("cp", option, "*.tmp", "src", f"s3://{bucket}/")
    assert res.code == 252
    assert f"unknown option {option}" in res.err
    assert res.err.count("\n") == 1


# -- mv --------------------------------------------------------------------------------------


def test_mv_file_to_object_to_object_to_file(
    run: Run, client: Client, bucket: str, tmp_path: Path
) -> None:
    (tmp_path / "m.bin").write_bytes(b"moving")
    up = run("mv", "m.bin", f"s3://{bucket}/a/m.bin")
    assert up.code == 0, up.err
    assert up.out.strip() == f"move: m.bin to s3://{bucket}/a/m.bin"
    assert not (tmp_path / "m.bin").exists()
    across = run("mv", f"s3://{bucket}/a/m.bin", f"s3://{bucket}/b/")
    assert across.code == 0, across.err
    assert keys(client, bucket) == ["b/m.bin"]
    down = run("mv", f"s3://{bucket}/b/m.bin", "back.bin")
    assert down.code == 0, down.err
    assert (tmp_path / "back.bin").read_bytes() == b"moving"
    assert keys(client, bucket) == []


def test_copies_above_the_multipart_threshold_are_copied_by_the_server_in_parts(
    run: Run, client: Client, bucket: str
) -> None:
    data = os.urandom(12 << 20)
    client.put_object(bucket, "big", data, content_type="text/x-big", metadata={"k": "v"})
    parts = ["--multipart-threshold", "5MiB", "--part-size", "5MiB"]
    cp = run("cp", f"s3://{bucket}/big", f"s3://{bucket}/copy", *parts)
    assert cp.code == 0, cp.err
    mv = run("mv", f"s3://{bucket}/copy", f"s3://{bucket}/moved", *parts)
    assert mv.code == 0, mv.err
    assert keys(client, bucket) == ["big", "moved"]
    moved = client.head_object(bucket, "moved")
    # Three parts copied on the server, the source's type and metadata kept.
    assert (moved.etag or "").strip('"').endswith("-3")
    assert (moved.content_type, moved.metadata) == ("text/x-big", {"k": "v"})
    assert client.get_object(bucket, "moved") == data


def test_mv_recursive_moves_a_tree(run: Run, client: Client, bucket: str, tmp_path: Path) -> None:
    _files(tmp_path / "src", MIXED)
    res = run("mv", "-r", "src", f"s3://{bucket}/t")
    assert res.code == 0, res.err
    assert len(keys(client, bucket)) == 4
    assert tree(tmp_path / "src") == {}


@pytest.mark.needs_feature("checks_signatures")
def test_cp_to_a_bucket_it_may_write_to_but_not_list_works_as_with_aws(
    s3_server: Any, env: dict[str, str], client: Client, bucket: str, tmp_path: Path
) -> None:
    # Uploaders are often allowed s3:PutObject alone: HeadBucket needs s3:ListBucket, so
    # asking first whether the bucket exists would fail a copy S3 accepts.
    grant_unsigned(s3_server, bucket, ["s3:PutObject"])
    _files(tmp_path / "src", {"one.txt": b"1", "two.txt": b"2"})
    unsigned = {
        k: v for k, v in env.items() if k not in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")
    }

    def cp(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*COMMAND, "--no-sign-request", "cp", *args], capture_output=True, text=True,
            env=unsigned,
            cwd=tmp_path, timeout=60, check=False,
        )  # fmt: skip

    listing = cp("-r", "src", f"s3://{bucket}/up/")
    assert listing.returncode == 0, listing.stderr
    one = cp("src/one.txt", f"s3://{bucket}/single.txt")
    assert one.returncode == 0, one.stderr
    (tmp_path / "big.bin").write_bytes(os.urandom(6 << 20))
    parts = cp("--multipart-threshold", "5MiB", "--part-size", "5MiB", "big.bin", f"s3://{bucket}/")
    assert parts.returncode == 0, parts.stderr
    assert keys(client, bucket) == ["big.bin", "single.txt", "up/one.txt", "up/two.txt"]
    assert client.get_object(bucket, "big.bin") == (tmp_path / "big.bin").read_bytes()


@pytest.mark.needs_feature("checks_signatures")
def test_ls_of_the_prefix_the_credentials_may_list_works_as_with_aws(
    s3_server: Any, env: dict[str, str], client: Client, bucket: str, tmp_path: Path
) -> None:
    # A home prefix per user: s3:ListBucket with an s3:prefix condition. HeadBucket
    # (s3:ListBucket with no prefix) is refused, so asking it first failed the listing.
    grant_unsigned(s3_server, bucket, ["s3:GetObject"], under="home/", listing=True)
    for key in ("home/a.txt", "home/sub/b.txt", "other/c.txt"):
        client.put_object(bucket, key, b"x")
    unsigned = {
        k: v for k, v in env.items() if k not in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")
    }
    listed = subprocess.run(
        [*COMMAND, "--no-sign-request", "ls", f"s3://{bucket}/home/"], capture_output=True,
        text=True,
        env=unsigned, cwd=tmp_path, timeout=60, check=False,
    )  # fmt: skip
    assert listed.returncode == 0, listed.stderr
    assert [line.split()[-1] for line in listed.stdout.splitlines()] == ["sub/", "a.txt"]


def test_a_missing_destination_bucket_fails_the_copy_once_with_no_such_bucket(
    run: Run, tmp_path: Path
) -> None:
    _files(tmp_path / "src", MIXED)
    many = run("cp", "-r", "src", "s3://no-such-bucket-here/t/")
    assert many.code == 254
    assert many.err.count("NoSuchBucket") == 1  # asked once, up front: not once per file
    one = run("cp", "src/a.txt", "s3://no-such-bucket-here/a.txt")
    assert one.code == 254
    assert "NoSuchBucket" in one.err
    assert "no-such-bucket-here" in one.err
    piped = run("cp", "-", "s3://no-such-bucket-here/s", stdin=b"x" * 100)
    assert piped.code == 254
    assert "NoSuchBucket" in piped.err


@pytest.mark.needs_feature("archives_objects")
def test_archived_objects_are_skipped_with_a_warning_as_aws_skips_them(
    run: Run, s3_server: Any, client: Client, bucket: str, tmp_path: Path
) -> None:
    # A GET or copy of a GLACIER or DEEP_ARCHIVE object fails until it is restored, and
    # a listing cannot say which are: aws s3 leaves them out, warns, and exits 2.
    s3 = boto3_client(s3_server)
    for key, body, storage_class in (
        ("cold/a.txt", b"a", "GLACIER"),
        ("cold/b.txt", b"b", "STANDARD"),
        ("cold/c.txt", b"c", "DEEP_ARCHIVE"),
    ):
        s3.put_object(Bucket=bucket, Key=key, Body=body, StorageClass=storage_class)
    down = run("cp", "-r", f"s3://{bucket}/cold/", "down/")
    assert down.code == 2, down.err
    assert tree(tmp_path / "down") == {"b.txt": b"b"}
    assert f"skipping s3://{bucket}/cold/a.txt: its storage class is GLACIER" in down.err
    assert f"skipping s3://{bucket}/cold/c.txt: its storage class is DEEP_ARCHIVE" in down.err
    quiet = run("cp", "-r", "--ignore-glacier-warnings", f"s3://{bucket}/cold/", "quiet/")
    assert (quiet.code, "skipping" in quiet.err) == (0, False)
    copied = run("sync", f"s3://{bucket}/cold/", f"s3://{bucket}/warm/")
    assert copied.code == 2, copied.err
    assert keys(client, bucket, "warm/") == ["warm/b.txt"]
    # One object named: the service's refusal is the skip (no listing says its class).
    moved = run("mv", f"s3://{bucket}/cold/a.txt", "a.txt")
    assert moved.code == 2, moved.err
    assert "cold/a.txt: it is archived" in moved.err
    assert not (tmp_path / "a.txt").exists()
    assert "cold/a.txt" in keys(client, bucket, "cold/")  # a move that did not copy keeps it
    # Restored, it can be read: --force-glacier-transfer tries every one.
    s3.restore_object(Bucket=bucket, Key="cold/a.txt", RestoreRequest={"Days": 1})
    forced = run("cp", "-r", "--force-glacier-transfer", f"s3://{bucket}/cold/", "forced/")
    assert forced.code == 1  # c.txt is still archived: that one failed
    assert tree(tmp_path / "forced") == {"a.txt": b"a", "b.txt": b"b"}
    assert "InvalidObjectState" in forced.err


def test_mv_keeps_the_source_when_the_copy_fails(run: Run, tmp_path: Path) -> None:
    (tmp_path / "m.bin").write_bytes(b"stay")
    res = run("mv", "m.bin", "s3://no-such-bucket-here/m.bin")
    assert res.code == 254
    assert (tmp_path / "m.bin").read_bytes() == b"stay"


# -- what is stored with uploads -------------------------------------------------------------


def test_content_type_is_guessed_from_the_name_unless_given(
    run: Run, client: Client, bucket: str, tmp_path: Path
) -> None:
    _files(tmp_path / "src", {"page.html": b"<p>", "data.json": b"{}", "x.unknownext": b"?"})
    assert run("cp", "-r", "src", f"s3://{bucket}/g").code == 0
    assert client.head_object(bucket, "g/page.html").content_type == "text/html"
    assert client.head_object(bucket, "g/data.json").content_type == "application/json"
    assert client.head_object(bucket, "g/x.unknownext").content_type != "text/html"
    given = run("cp", "src/page.html", f"s3://{bucket}/t.html", "--content-type", "text/plain")
    assert given.code == 0, given.err
    assert client.head_object(bucket, "t.html").content_type == "text/plain"
    off = run("cp", "src/page.html", f"s3://{bucket}/n.html", "--no-guess-mime-type")
    assert off.code == 0, off.err
    assert client.head_object(bucket, "n.html").content_type != "text/html"


def test_metadata_cache_control_content_encoding_and_storage_class_are_stored(
    run: Run, local_minio: Any, bucket: str, tmp_path: Path
) -> None:
    (tmp_path / "f.txt").write_bytes(b"fields")
    res = run(
        "cp", "f.txt", f"s3://{bucket}/f.txt", "--metadata", "team=ml,run=7",
        "--metadata", '{"stage": "dev"}', "--cache-control", "max-age=60",
        "--content-encoding", "identity", "--storage-class", "REDUCED_REDUNDANCY",
    )  # fmt: skip
    assert res.code == 0, res.err
    head = boto3_client(local_minio).head_object(Bucket=bucket, Key="f.txt")
    assert head["Metadata"] == {"team": "ml", "run": "7", "stage": "dev"}
    assert head["CacheControl"] == "max-age=60"
    assert head["ContentEncoding"] == "identity"
    assert head["StorageClass"] == "REDUCED_REDUNDANCY"


def test_bad_metadata_is_a_bad_argument(run: Run, bucket: str, tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_bytes(b"x")
    res = run("cp", "f.txt", f"s3://{bucket}/f", "--metadata", "novalue")
    assert res.code == 252
    assert "--metadata" in res.err


# -- wildcards -------------------------------------------------------------------------------


def test_wildcards_in_s3_sources_for_cp_ls_and_rm(
    run: Run, client: Client, bucket: str, tmp_path: Path
) -> None:
    for k in ("logs/a.gz", "logs/b.txt", "logs/2024/c.gz", "other/d.gz"):
        client.put_object(bucket, k, k.encode())
    cp = run("cp", f"s3://{bucket}/logs/*.gz", "out/")
    assert cp.code == 0, cp.err
    assert tree(tmp_path / "out") == {"a.gz": b"logs/a.gz", "2024/c.gz": b"logs/2024/c.gz"}
    ls = run("ls", f"s3://{bucket}/logs/*.gz")
    assert ls.code == 0, ls.err
    assert [line.split()[-1] for line in ls.out.splitlines()] == ["logs/2024/c.gz", "logs/a.gz"]
    rm = run("rm", f"s3://{bucket}/logs/?.gz")
    assert rm.code == 0, rm.err
    assert rm.err.splitlines()[-1] == "deleted 1 object, 0 failed"
    assert keys(client, bucket) == ["logs/2024/c.gz", "logs/b.txt", "other/d.gz"]


# -- exit codes (aws-cli v2's) ---------------------------------------------------------------


def test_exit_0_when_everything_was_done(run: Run, bucket: str, tmp_path: Path) -> None:
    _files(tmp_path / "src", {"f": b"1"})
    assert run("cp", "-r", "src", f"s3://{bucket}/").code == 0


def test_exit_1_when_a_transfer_failed_and_the_others_completed(
    run: Run, client: Client, bucket: str, tmp_path: Path
) -> None:
    client.put_object(bucket, "p/ok.txt", b"ok")
    client.put_object(bucket, "p/blocked/x.txt", b"x")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "blocked").write_bytes(b"a file where a folder is needed")
    res = run("cp", "-r", f"s3://{bucket}/p", "out")
    assert res.code == 1, res.err
    assert "blocked/x.txt" in res.err
    assert (tmp_path / "out" / "ok.txt").read_bytes() == b"ok"


def test_exit_2_when_files_were_skipped(
    run: Run, client: Client, bucket: str, tmp_path: Path
) -> None:
    _files(tmp_path / "src", {"f.txt": b"1"})
    os.mkfifo(tmp_path / "src" / "pipe")
    res = run("cp", "-r", "src", f"s3://{bucket}/s")
    assert res.code == 2, res.err
    assert "not a regular file" in res.err
    assert keys(client, bucket) == ["s/f.txt"]


def test_help_lists_mv(env: dict[str, str]) -> None:
    proc = subprocess.run([*COMMAND, "--help"], env=env, capture_output=True, timeout=60)
    assert proc.returncode == 0
    assert b" mv " in proc.stdout


# -- a terminal that stays readable ----------------------------------------------------------


def _on_a_terminal(args: list[str], env: dict[str, str], cwd: Path) -> tuple[int, str]:
    """Run with stdout and stderr on one pseudo-terminal, as at a shell; return the exit
    code and everything the terminal received."""
    import fcntl
    import pty
    import struct
    import termios
    import threading

    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    received = bytearray()

    def drain() -> None:
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:
                return
            if not chunk:
                return
            received.extend(chunk)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        proc = subprocess.run(
            [*COMMAND, *args], cwd=cwd, stdout=follower, stderr=follower, env=env, timeout=60
        )
    finally:
        os.close(follower)
        reader.join(timeout=10)
        os.close(leader)
    # The terminal turns each \n into \r\n; a bare \r is what redraws a bar.
    return proc.returncode, received.decode(errors="replace").replace("\r\n", "\n")


def test_per_file_lines_never_land_inside_the_progress_bar(
    env: dict[str, str], minio_proxy: Any, client: Client, bucket: str, tmp_path: Path
) -> None:
    for i in range(4):
        client.put_object(bucket, f"slow/f{i}.bin", os.urandom(1 << 20))
    minio_proxy.add_toxic("bandwidth", rate=1024)  # ~1 s per file
    proxied = {**env, "AWS_ENDPOINT_URL": minio_proxy.endpoint}
    code, screen = _on_a_terminal(
        ["cp", "-r", f"s3://{bucket}/slow", "out", "--jobs", "2"], proxied, tmp_path
    )
    assert code == 0, screen
    assert "%" in screen  # the bar was drawn
    lines = [line.split("\r")[-1] for line in screen.split("\n") if "download: " in line]
    assert len(lines) == 4
    assert all(line.startswith("download: s3://") for line in lines), lines
    quiet_code, quiet = _on_a_terminal(
        ["cp", "-r", "--no-progress", f"s3://{bucket}/slow", "again", "--jobs", "2"],
        proxied,
        tmp_path,
    )
    assert quiet_code == 0, quiet
    assert "%" not in quiet
    assert quiet.count("download: s3://") == 4


_COPY_KEEPS = "on a server-side copy needs --metadata-directive REPLACE"


_SRC, _DST = "s3://{b}/a", "s3://{b}/c"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["cp", "-", "s3://{b}/k", "--storage-class", "X"], "--storage-class is not supported"),
        (["cp", _SRC, _DST, "--cache-control", "no-cache"], "--cache-control " + _COPY_KEEPS),
        (["cp", _SRC, _DST, "--content-type", "a/b"], "--content-type " + _COPY_KEEPS),
        (["sync", "s3://{b}/", _DST, "--content-encoding", "br"], "--content-encoding "),
        (["cp", _SRC, _DST, "--metadata", "k=v", "--metadata-directive", "COPY"], "--metadata "),
    ],
)  # fmt: skip
def test_a_field_that_cannot_be_stored_is_an_error_not_dropped(
    run: Run, client: Client, bucket: str, args: list[str], message: str
) -> None:
    # A server-side copy under the COPY directive (the default without --metadata)
    # keeps its source's fields: the service would ignore those given, and aws s3 cp
    # drops them without a word.
    client.put_object(bucket, "a", b"a")
    res = run(*(a.format(b=bucket) for a in args), stdin=b"data")
    assert res.code == 252
    assert message in res.err
    assert message.endswith("supported") or _COPY_KEEPS in res.err
    assert keys(client, bucket) == ["a"]


def test_a_copy_stores_the_fields_given_under_replace_and_its_sources_under_copy(
    run: Run, client: Client, bucket: str
) -> None:
    client.put_object(
        bucket, "a.txt", b"fields", content_type="application/x-mine", metadata={"from": "src"},
        cache_control="max-age=1",
    )  # fmt: skip

    def copied(*flags: str) -> Any:
        res = run("cp", f"s3://{bucket}/a.txt", f"s3://{bucket}/b.txt", *flags)
        assert res.code == 0, res.err
        return client.head_object(bucket, "b.txt")

    kept = copied("--storage-class", "STANDARD")  # COPY: the source's fields
    assert (kept.content_type, dict(kept.metadata), kept.cache_control) == (
        "application/x-mine", {"from": "src"}, "max-age=1",
    )  # fmt: skip
    # --metadata implies REPLACE (as aws): the copy has only what is given, and a type
    # guessed from the source's name.
    meta = copied("--metadata", "k=v")
    assert (meta.content_type, dict(meta.metadata), meta.cache_control) == (
        "text/plain",
        {"k": "v"},
        None,
    )
    replaced = copied(
        "--metadata-directive",
        "replace",
        "--content-type",
        "text/html",
        "--cache-control",
        "no-cache",
    )
    assert (replaced.content_type, dict(replaced.metadata), replaced.cache_control) == (
        "text/html",
        {},
        "no-cache",
    )
    # In place: the usual way to fix an object's type.
    res = run(
        "cp",
        f"s3://{bucket}/a.txt",
        f"s3://{bucket}/a.txt",
        "--metadata-directive",
        "REPLACE",
        "--content-type",
        "text/csv",
    )
    assert res.code == 0, res.err
    again = client.head_object(bucket, "a.txt")
    assert (again.content_type, dict(again.metadata)) == ("text/csv", {})
    assert client.get_object(bucket, "a.txt") == b"fields"


def test_sync_from_a_file_or_nothing_says_which(run: Run, bucket: str, tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_bytes(b"x")
    res = run("sync", "f.txt", f"s3://{bucket}/p/")
    assert (res.code, res.err.strip()) == (
        252,
        "objsdk: error: sync needs a local directory: f.txt is not one",
    )
    res = run("sync", "missing", f"s3://{bucket}/p/")
    assert "sync needs a local directory: missing does not exist" in res.err


def test_expected_size_makes_parts_of_standard_input_large_enough(
    run: Run, client: Client, bucket: str, tmp_path: Path
) -> None:
    # 10,000 parts of 16 MiB hold 156 GiB: a larger stream needs larger parts, known
    # before its first byte (aws s3 cp's --expected-size).
    data = os.urandom(40 << 20)
    assert run("cp", "-", f"s3://{bucket}/default", stdin=data).code == 0
    sized = run("cp", "-", f"s3://{bucket}/sized", "--expected-size", "300GiB", stdin=data)
    assert sized.code == 0, sized.err
    assert client.head_object(bucket, "default").etag.endswith('-3"')  # 16 + 16 + 8 MiB
    assert client.head_object(bucket, "sized").etag.endswith('-2"')  # 31 + 9 MiB
    assert client.get_object(bucket, "sized") == data
    (tmp_path / "f").write_bytes(b"x")
    res = run("cp", "f", f"s3://{bucket}/f", "--expected-size", "1GiB")
    assert (res.code, "--expected-size applies to standard input" in res.err) == (252, True)
    res = run("cp", "-", f"s3://{bucket}/huge", "--expected-size", "6TiB", stdin=b"x")
    assert (res.code, "more than an S3 object holds" in res.err) == (252, True)
    assert keys(client, bucket) == ["default", "sized"]


def test_mv_of_an_object_onto_itself_is_refused_and_keeps_it(
    run: Run, client: Client, bucket: str
) -> None:
    # With REPLACE fields the service accepts the copy onto itself; the move would then
    # remove its source: the object.
    client.put_object(bucket, "k", b"keep")
    res = run("mv", f"s3://{bucket}/k", f"s3://{bucket}/k", "--metadata", "a=b")
    assert res.code == 252
    assert "onto itself" in res.err
    assert client.get_object(bucket, "k") == b"keep"
    res = run(
        "mv", "--recursive", f"s3://{bucket}/", f"s3://{bucket}/", "--storage-class", "STANDARD"
    )
    assert res.code == 252
    assert client.get_object(bucket, "k") == b"keep"


def test_json_warnings_are_objects_on_stderr(run: Run, bucket: str, tmp_path: Path) -> None:
    _files(tmp_path / "src", {"f.txt": b"1"})
    os.mkfifo(tmp_path / "src" / "pipe")
    res = run("--json", "cp", "-r", "src", f"s3://{bucket}/w")
    assert res.code == 2, res.err
    (warning,) = [json.loads(line) for line in res.err.splitlines()]
    assert "not a regular file" in warning["warning"]
