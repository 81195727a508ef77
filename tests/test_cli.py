"""The ``objsdk`` console script, run in a subprocess against the local MinIO."""

from __future__ import annotations

import hashlib
import io
import json
import os
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

import pytest
import requests
from cli_helpers import (
    COMMAND,
    Run,
    as_at_a_terminal,
    clean_env,
    env,
    keys,
    make_tree,
    multipart_uploads,
    parts_stored,
    run,
    tree,
    wait_for,
)

from objsdk import Client

__all__ = ["env", "run"]  # fixtures, used by name

pytestmark = pytest.mark.integration


# -- buckets and listing ---------------------------------------------------------------------


def test_mb_ls_rb_round_trip(run: Run, client: Client, fresh_bucket_name: str) -> None:
    made = run("mb", f"s3://{fresh_bucket_name}")
    assert made.code == 0, made.err
    assert fresh_bucket_name in run("ls").out
    assert client.bucket_exists(fresh_bucket_name)
    assert run("rb", f"s3://{fresh_bucket_name}").code == 0
    assert not client.bucket_exists(fresh_bucket_name)


def test_rb_force_empties_the_bucket_first(
    run: Run, client: Client, fresh_bucket_name: str
) -> None:
    client.create_bucket(fresh_bucket_name)
    client.put_object(fresh_bucket_name, "x/y", b"1")
    assert run("rb", f"s3://{fresh_bucket_name}").code == 254
    assert run("rb", "--force", f"s3://{fresh_bucket_name}").code == 0
    assert not client.bucket_exists(fresh_bucket_name)


def test_ls_shows_one_level_prefixes_first_and_sizes_in_bytes_as_aws(
    run: Run, client: Client, bucket: str
) -> None:
    client.put_object(bucket, "a-top.bin", b"x" * 2048)
    client.put_object(bucket, "dir/inner.txt", b"y")
    res = run("ls", f"s3://{bucket}")
    assert res.code == 0, res.err
    lines = res.out.splitlines()
    assert lines[0].split() == ["PRE", "dir/"]  # before a-top.bin, though it sorts after
    assert lines[1].endswith(" 2048 a-top.bin")
    assert "inner.txt" not in res.out
    human = run("ls", "--human-readable", "--summarize", f"s3://{bucket}")
    assert human.code == 0, human.err
    assert human.out.splitlines()[1].endswith("2.0 KiB a-top.bin")
    assert "Total Objects: 1" in human.out
    assert "Total Size: 2.0 KiB" in human.out


def test_ls_of_a_prefix_that_matches_nothing_exits_1_as_aws(
    run: Run, client: Client, bucket: str
) -> None:
    # Scripts test for a key with `aws s3 ls s3://b/k`: exit 1 when nothing matches.
    assert run("ls", f"s3://{bucket}").code == 0  # a bucket, even empty
    client.put_object(bucket, "dir/k", b"1")
    for found in ("dir", "dir/", "dir/k", "di", "dir/*"):
        res = run("ls", f"s3://{bucket}/{found}")
        assert res.code == 0, (found, res.err)
        assert res.out
    for missing in ("nothing", "dir/x", "dir/*.gz"):
        res = run("ls", f"s3://{bucket}/{missing}")
        assert (res.code, res.out, res.err) == (1, "", ""), missing
        assert run("ls", "--recursive", f"s3://{bucket}/{missing}").code == 1


def test_ls_recursive_json_lists_every_key(run: Run, client: Client, bucket: str) -> None:
    client.put_object(bucket, "a/b/c", b"123")
    client.put_object(bucket, "d", b"")
    res = run("ls", "--recursive", "--json", f"s3://{bucket}")
    assert res.code == 0, res.err
    entries = res.json_lines()
    assert [(e["key"], e["size"]) for e in entries] == [("a/b/c", 3), ("d", 0)]
    assert all("last_modified" in e and "etag" in e for e in entries)


def test_names_with_control_characters_print_escaped_one_line_each_and_exact_in_json(
    run: Run, client: Client, bucket: str, tmp_path: Path, s3_features: Any
) -> None:
    # A key is anyone's string: printed raw, ESC sequences rewrite the user's screen,
    # CR overwrites the line, LF forges a second entry.
    lf = "\n" if s3_features.stores_line_feed_keys else ""
    odd = ["d/clear\x1b[2J", "d/over\rwrite", f"d/two{lf}lines", "d/rlo\u202etxt.exe"]
    for key in [*odd, "d/plain"]:
        client.put_object(bucket, key, b"x")
    listing = run("ls", f"s3://{bucket}/d/")
    down = run("cp", "--recursive", f"s3://{bucket}/d/", "down/")
    gone = run("rm", "--recursive", "--dryrun", f"s3://{bucket}/d/")
    for res in (listing, down, gone):
        assert res.code == 0, res.err
        # splitlines() also splits at CR and the other line boundaries a terminal obeys
        assert all(line.isprintable() for line in res.out.splitlines())
        assert len(res.out.splitlines()) == 5
    assert listing.out.splitlines()[0].endswith(" clear\\x1b[2J")
    assert "over\\rwrite" in down.out
    assert "rlo\\u202etxt.exe" in gone.out
    assert sorted(p.name for p in (tmp_path / "down").iterdir()) == sorted(
        k.removeprefix("d/") for k in [*odd, "d/plain"]
    )
    exact = run("ls", "--recursive", "--json", f"s3://{bucket}/d/").json_lines()
    assert sorted(e["key"] for e in exact) == sorted([*odd, "d/plain"])


# -- cp --------------------------------------------------------------------------------------


def test_cp_file_up_and_down_round_trips(run: Run, bucket: str, tmp_path: Path) -> None:
    data = os.urandom(1_000_000)
    (tmp_path / "src.bin").write_bytes(data)
    assert run("cp", "src.bin", f"s3://{bucket}/dir/").code == 0  # key = basename
    down = run("cp", f"s3://{bucket}/dir/src.bin", "back.bin")
    assert down.code == 0, down.err
    assert (tmp_path / "back.bin").read_bytes() == data
    assert "download: s3://" in down.out


def test_cp_multipart_upload_with_small_parts(
    run: Run, client: Client, bucket: str, tmp_path: Path
) -> None:
    data = os.urandom(11 << 20)
    (tmp_path / "big.bin").write_bytes(data)
    res = run(
        "cp", "big.bin", f"s3://{bucket}/big.bin", "--multipart-threshold", "5MiB",
        "--part-size", "5MiB", "--parallel", "3",
    )  # fmt: skip
    assert res.code == 0, res.err
    assert client.get_object(bucket, "big.bin") == data
    assert "-" in (client.head_object(bucket, "big.bin").etag or "")  # a multipart ETag


def test_cp_recursive_up_and_down_keeps_the_tree(
    run: Run, client: Client, bucket: str, tmp_path: Path
) -> None:
    files = make_tree(tmp_path / "src")
    up = run("cp", "--recursive", "src", f"s3://{bucket}/pre", "--jobs", "3")
    assert up.code == 0, up.err
    assert keys(client, bucket) == sorted(f"pre/{k}" for k in files)
    down = run("cp", "-r", f"s3://{bucket}/pre", "dst")
    assert down.code == 0, down.err
    assert tree(tmp_path / "dst") == files


def test_cp_recursive_down_onto_a_directory_of_the_same_name_fails_that_file_only(
    run: Run, client: Client, bucket: str, tmp_path: Path
) -> None:
    client.put_object(bucket, "pre/a", b"a")
    client.put_object(bucket, "pre/b", b"b")
    (tmp_path / "dst" / "a").mkdir(parents=True)
    (tmp_path / "dst" / "a" / "mine").write_bytes(b"keep")
    res = run("cp", "-r", f"s3://{bucket}/pre", "dst")
    assert res.code == 1
    assert res.err.splitlines() == [
        f"download: s3://{bucket}/pre/a to {os.path.join('dst', 'a')} failed: "
        f"a directory is there: {os.path.join('dst', 'a')}",
        res.err.splitlines()[-1],
    ]
    assert res.err.splitlines()[-1].startswith("transferred 1 file, 1 Byte in ")
    # The file that failed is never also reported as downloaded (it was, on stdout and
    # in --json, before the rename found the directory).
    assert res.out.splitlines() == [f"download: s3://{bucket}/pre/b to {os.path.join('dst', 'b')}"]
    assert (tmp_path / "dst" / "b").read_bytes() == b"b"
    assert (tmp_path / "dst" / "a" / "mine").read_bytes() == b"keep"
    assert sorted(p.name for p in (tmp_path / "dst").iterdir()) == ["a", "b"]  # no temporaries
    as_json = run("--json", "cp", "-r", f"s3://{bucket}/pre", "dst")
    assert as_json.code == 1
    *done, summary = as_json.json_lines()
    assert [d["source"] for d in done] == [f"s3://{bucket}/pre/b"]
    assert (summary["transferred"], summary["failed"]) == (1, 1)


def test_cp_stdin_to_object_and_object_to_stdout(run: Run, bucket: str) -> None:
    data = os.urandom(200_000)
    assert run("cp", "-", f"s3://{bucket}/piped", stdin=data).code == 0
    assert run("cp", f"s3://{bucket}/piped", "-").raw == data


def test_cp_between_buckets_copies_server_side(run: Run, client: Client, bucket: str) -> None:
    client.put_object(bucket, "orig", b"payload")
    res = run("cp", f"s3://{bucket}/orig", f"s3://{bucket}/copies/")
    assert res.code == 0, res.err
    assert client.get_object(bucket, "copies/orig") == b"payload"


def test_cp_json_prints_a_summary(run: Run, bucket: str, tmp_path: Path) -> None:
    make_tree(tmp_path / "src")
    res = run("--json", "cp", "-r", "src", f"s3://{bucket}/")
    assert res.code == 0, res.err
    *files, summary = res.json_lines()
    assert sorted(f["source"] for f in files) == sorted(f"src/{k}" for k in tree(tmp_path / "src"))
    assert all(f["action"] == "upload" and f["bytes"] >= 0 for f in files)
    assert summary["transferred"] == 4
    assert summary["failed"] == 0
    assert summary["bytes"] == sum(len(v) for v in tree(tmp_path / "src").values())


def test_a_small_download_is_reported_only_once_its_file_has_its_name(
    client: Client, bucket: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Keys "d/a" and "d/a/b" both listed (AWS and moto list both; MinIO keeps the second
    # out of its listings): one job's file and the other's folder want the same name.
    # The first job's temporary file waits for its batch; the second makes the folder;
    # the first's rename then fails, and that job must be reported as failed only.
    from objsdk.cli.jobs import Job, Outcome, TransferOptions
    from objsdk.cli.output import Output
    from objsdk.cli.paths import LocalPath, RemotePath
    from objsdk.cli.run import run_jobs

    client.put_object(bucket, "x", b"1")
    client.put_object(bucket, "y", b"22")
    out = tmp_path / "out"
    jobs = [
        Job("download", RemotePath(bucket, "x"), LocalPath(str(out / "a")), 1, listed=True),
        Job("download", RemotePath(bucket, "y"), LocalPath(str(out / "a" / "b")), 2, listed=True),
    ]
    outcome = Outcome()
    code = run_jobs(
        client, jobs, TransferOptions(jobs=1), Output(json_mode=True, quiet=False), outcome
    )
    printed = capsys.readouterr()
    lines = [json.loads(line) for line in printed.out.splitlines()]
    assert code == 1
    assert [line.get("source") for line in lines if "source" in line] == [f"s3://{bucket}/y"]
    assert lines[-1]["transferred"] == 1
    assert lines[-1]["failed"] == 1
    assert lines[-1]["bytes"] == 2
    assert (outcome.done, outcome.failed, outcome.bytes) == (1, 1, 2)
    assert (out / "a" / "b").read_bytes() == b"22"
    assert "a directory is there" in printed.err


def test_a_small_download_to_a_name_too_long_fails_naming_it_before_the_get(
    client: Client, bucket: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Keys on AWS and moto may have a 300-byte last segment; Linux file names stop at 255.
    from objsdk.cli.jobs import Job, Outcome, TransferOptions
    from objsdk.cli.output import Output
    from objsdk.cli.paths import LocalPath, RemotePath
    from objsdk.cli.run import run_jobs

    client.put_object(bucket, "x", b"1")
    dest = tmp_path / ("n" * 300)
    jobs = [Job("download", RemotePath(bucket, "x"), LocalPath(str(dest)), 1, listed=True)]
    out = Output(json_mode=False, quiet=False)
    code = run_jobs(client, jobs, TransferOptions(jobs=1), out, Outcome())
    err = capsys.readouterr().err
    assert code == 1
    assert "its file name is 300 bytes, and its directory allows 255" in err
    assert ".objsdk-" not in err  # not a temporary file's rename
    assert list(tmp_path.iterdir()) == []


def test_download_leaves_no_temporary_files(
    run: Run, client: Client, bucket: str, tmp_path: Path
) -> None:
    client.put_object(bucket, "k", os.urandom(100_000))
    assert run("cp", f"s3://{bucket}/k", "out/k").code == 0
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["k"]


# -- sync ------------------------------------------------------------------------------------


def test_sync_up_copies_only_what_changed(
    run: Run, client: Client, bucket: str, tmp_path: Path
) -> None:
    src = tmp_path / "src"
    make_tree(src)
    first = run("sync", "src", f"s3://{bucket}/s")
    assert first.code == 0, first.err
    assert first.out.count("upload:") == 4
    assert run("sync", "src", f"s3://{bucket}/s").out == ""
    (src / "a.txt").write_bytes(b"changed and longer\n")
    again = run("sync", "src", f"s3://{bucket}/s")
    assert again.out.splitlines() == [f"upload: src/a.txt to s3://{bucket}/s/a.txt"]
    assert client.get_object(bucket, "s/a.txt") == b"changed and longer\n"


def test_sync_dry_run_and_delete(run: Run, client: Client, bucket: str, tmp_path: Path) -> None:
    make_tree(tmp_path / "src")
    client.put_object(bucket, "s/stale.txt", b"old")
    dry = run("sync", "--delete", "--dry-run", "src", f"s3://{bucket}/s")
    assert dry.code == 0, dry.err
    assert f"(dryrun) delete: s3://{bucket}/s/stale.txt" in dry.out
    assert keys(client, bucket) == ["s/stale.txt"]
    assert run("sync", "--delete", "src", f"s3://{bucket}/s").code == 0
    assert "s/stale.txt" not in keys(client, bucket)
    assert len(keys(client, bucket)) == 4


def test_sync_down_then_nothing_to_do(
    run: Run, client: Client, bucket: str, tmp_path: Path
) -> None:
    client.put_object(bucket, "d/x.txt", b"x")
    client.put_object(bucket, "d/y/z.txt", b"zz")
    assert run("sync", f"s3://{bucket}/d", "local").code == 0
    assert tree(tmp_path / "local") == {"x.txt": b"x", "y/z.txt": b"zz"}
    assert run("sync", f"s3://{bucket}/d", "local").out == ""


def test_sync_checksum_catches_same_size_change_with_older_mtime(
    run: Run, client: Client, bucket: str, tmp_path: Path
) -> None:
    src = tmp_path / "src"
    src.mkdir()
    f = src / "f.txt"
    f.write_bytes(b"AAAA")
    assert run("sync", "src", f"s3://{bucket}/c").code == 0
    f.write_bytes(b"BBBB")
    os.utime(f, (1_000_000_000, 1_000_000_000))  # older than the object: size+time says same
    assert run("sync", "src", f"s3://{bucket}/c").out == ""
    res = run("sync", "--checksum", "src", f"s3://{bucket}/c")
    assert res.out.strip() == f"upload: src/f.txt to s3://{bucket}/c/f.txt"
    assert client.get_object(bucket, "c/f.txt") == b"BBBB"
    assert run("sync", "--checksum", "src", f"s3://{bucket}/c").out == ""


# -- cat, rm, stat, presign, extract ---------------------------------------------------------


def test_cat_streams_a_range(run: Run, client: Client, bucket: str) -> None:
    data = bytes(range(256)) * 1000
    client.put_object(bucket, "r", data)
    assert run("cat", f"s3://{bucket}/r").raw == data
    assert (
        run("cat", f"s3://{bucket}/r", "--offset", "1000", "--length", "77").raw
        == (data[1000:1077])
    )
    assert run("cat", f"s3://{bucket}/r", "--offset", "255990").raw == data[255990:]


def test_rm_single_and_recursive_with_dry_run(run: Run, client: Client, bucket: str) -> None:
    for k in ("keep", "dir/a", "dir/b/c"):
        client.put_object(bucket, k, b"1")
    assert run("rm", f"s3://{bucket}/keep").code == 0
    dry = run("rm", "--recursive", "--dry-run", f"s3://{bucket}/dir")
    assert dry.out.count("(dryrun) delete:") == 2
    assert keys(client, bucket) == ["dir/a", "dir/b/c"]
    assert run("rm", "-r", f"s3://{bucket}/dir").code == 0
    assert keys(client, bucket) == []


def test_rm_recursive_deletes_folder_markers_too_as_aws(
    run: Run, client: Client, bucket: str
) -> None:
    # Consoles and tools store "folders" as empty keys ending in "/": one left behind
    # keeps the folder in every listing.
    for key in ("cm/", "cm/a", "cm/sub/", "cm/sub/deeper/", "keep/"):
        client.put_object(bucket, key, b"")
    res = run("rm", "--recursive", f"s3://{bucket}/cm")
    assert res.code == 0, res.err
    assert keys(client, bucket) == ["keep/"]
    assert "deleted 4 objects, 0 failed" in res.err


def test_cp_and_mv_recursive_between_prefixes_carry_folder_markers(
    run: Run, client: Client, bucket: str
) -> None:
    for key in ("src/", "src/a", "src/empty/"):
        client.put_object(bucket, key, b"" if key.endswith("/") else b"a")
    assert run("cp", "--recursive", f"s3://{bucket}/src", f"s3://{bucket}/copy").code == 0
    assert run("mv", "--recursive", f"s3://{bucket}/src", f"s3://{bucket}/moved/").code == 0
    assert keys(client, bucket) == [
        "copy/", "copy/a", "copy/empty/", "moved/", "moved/a", "moved/empty/",
    ]  # fmt: skip
    # To a bucket's root, the prefix's own marker has nowhere to go: it is left out.
    other = f"{bucket}-root"
    client.create_bucket(other)
    try:
        assert run("cp", "--recursive", f"s3://{bucket}/copy", f"s3://{other}").code == 0
        assert keys(client, other) == ["a", "empty/"]
    finally:
        client.delete_objects(other, ["a", "empty/"])
        client.delete_bucket(other)


def test_rm_of_a_prefix_needs_recursive(run: Run, bucket: str) -> None:
    res = run("rm", f"s3://{bucket}/dir/")
    assert res.code == 252
    assert "--recursive" in res.err


def test_stat_json_reports_size_etag_checksum_and_metadata(
    run: Run, client: Client, bucket: str, s3_features: Any
) -> None:
    client.put_object(bucket, "s", b"hello", content_type="text/plain", metadata={"team": "ml"})
    res = run("stat", "--json", f"s3://{bucket}/s")
    assert res.code == 0, res.err
    (info,) = res.json_lines()
    assert info["size"] == 5
    assert info["content_type"] == "text/plain"
    assert info["metadata"] == {"team": "ml"}
    # moto keeps no checksum sent with a single PUT (docs/compatibility.md).
    assert ("crc32c" in info["checksums"]) == s3_features.stores_put_checksum
    assert info["etag"] == client.head_object(bucket, "s").etag


def test_presign_prints_a_working_url(run: Run, client: Client, bucket: str) -> None:
    client.put_object(bucket, "p", b"presigned!")
    res = run("presign", f"s3://{bucket}/p", "--expires-in", "60")
    assert res.code == 0, res.err
    assert requests.get(res.out.strip(), timeout=10).content == b"presigned!"


def _tar(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_extract_unpacks_a_remote_tar(
    run: Run, client: Client, bucket: str, tmp_path: Path
) -> None:
    members = {"a.txt": b"a", "d/b.bin": os.urandom(70_000)}
    client.put_object(bucket, "t.tar.gz", _tar(members))
    res = run("extract", f"s3://{bucket}/t.tar.gz", "out")
    assert res.code == 0, res.err
    assert tree(tmp_path / "out") == members


def test_extract_refuses_members_outside_the_destination(
    run: Run, client: Client, bucket: str, tmp_path: Path
) -> None:
    client.put_object(bucket, "evil.tar.gz", _tar({"../evil.txt": b"x"}))
    res = run("extract", f"s3://{bucket}/evil.tar.gz", "out")
    assert res.code != 0
    assert "Traceback" not in res.err
    assert not (tmp_path / "evil.txt").exists()


# -- errors and configuration ----------------------------------------------------------------


def test_missing_bucket_is_a_service_error_254(run: Run) -> None:
    res = run("ls", "s3://no-such-bucket-here")
    assert res.code == 254
    assert res.err.count("\n") == 1
    assert "NoSuchBucket" in res.err
    assert "Traceback" not in res.err


def test_missing_key_is_a_service_error_254(run: Run, bucket: str) -> None:
    res = run("cp", f"s3://{bucket}/nope", "x")
    assert res.code == 254
    assert "NoSuchKey" in res.err


def test_missing_local_file_is_a_bad_argument_252(run: Run, bucket: str) -> None:
    res = run("cp", "nope.txt", f"s3://{bucket}/")
    assert res.code == 252
    assert "nope.txt" in res.err


@pytest.mark.parametrize(
    "args",
    [["ls", "http://host/b"], ["cp", "a", "b"], ["ls", "s3://"], ["cp", "--bogus", "a", "s3://b/"]],
)
def test_bad_arguments_exit_252_with_one_line(run: Run, args: list[str]) -> None:
    res = run(*args)
    assert res.code == 252
    assert res.err.count("\n") == 1
    assert "Traceback" not in res.err


def test_unreachable_endpoint_exits_255_with_one_line_naming_the_url_as_aws(
    run: Run, unused_port: int
) -> None:
    # As aws: 'Could not connect to the endpoint URL: "http://127.0.0.1:9/"', and why.
    endpoint = f"http://127.0.0.1:{unused_port}"
    res = run("ls", extra_env={"AWS_ENDPOINT_URL": endpoint, "AWS_MAX_ATTEMPTS": "1"})
    assert res.code == 255
    assert res.err == (
        f'objsdk: error: Could not connect to the endpoint URL: "{endpoint}/": Connection refused\n'
    )
    key = run(
        "stat", "s3://bkt/dir/k", extra_env={"AWS_ENDPOINT_URL": endpoint, "AWS_MAX_ATTEMPTS": "1"}
    )
    assert key.code == 255
    assert key.err == (
        f'objsdk: error: Could not connect to the endpoint URL: "{endpoint}/bkt/dir/k": '
        "Connection refused\n"
    )


def test_streaming_from_an_unreachable_endpoint_exits_255_with_the_same_line(
    run: Run, unused_port: int
) -> None:
    # cp to standard output reads through a resuming reader: its first GET, which cannot
    # connect, is the endpoint not reached (before: resumed for ~36 s, then exit 1 and
    # a ReadError line).
    endpoint = f"http://127.0.0.1:{unused_port}"
    res = run(
        "cp",
        "s3://bkt/dir/k",
        "-",
        extra_env={"AWS_ENDPOINT_URL": endpoint, "AWS_MAX_ATTEMPTS": "1"},
    )
    assert res.code == 255
    assert res.err == (
        f'objsdk: error: Could not connect to the endpoint URL: "{endpoint}/bkt/dir/k": '
        "Connection refused\n"
    )
    assert res.raw == b""


def test_a_host_name_that_does_not_resolve_is_named_on_the_one_line(run: Run) -> None:
    endpoint = "http://no-such-host.invalid:9000"  # RFC 6761: never resolves
    res = run("ls", "s3://bkt/", extra_env={"AWS_ENDPOINT_URL": endpoint})
    assert res.code == 255
    assert res.err.startswith(
        f'objsdk: error: Could not connect to the endpoint URL: "{endpoint}/bkt": '
        "the host name 'no-such-host.invalid' could not be resolved ("
    ), res.err
    assert res.err.count("\n") == 1


def test_a_retry_is_told_as_a_warning_line_or_a_json_warning(run: Run, unused_port: int) -> None:
    endpoint = f"http://127.0.0.1:{unused_port}"
    unreachable = {"AWS_ENDPOINT_URL": endpoint, "AWS_MAX_ATTEMPTS": "2"}
    res = run("ls", extra_env=unreachable)
    assert res.code == 255
    first, last = res.err.splitlines()
    assert first.startswith("warning: list_buckets: cannot reach the server")
    assert first.endswith("; retrying in 0.00 s (retry 1)")
    said = f'Could not connect to the endpoint URL: "{endpoint}/": Connection refused'
    assert last == f"objsdk: error: {said}"
    res = run("--json", "ls", extra_env=unreachable)
    warning, error = (json.loads(line) for line in res.err.splitlines())
    assert warning["warning"].startswith("list_buckets: cannot reach the server")
    assert error["exit_code"] == 255
    assert error["message"] == said


@pytest.mark.needs_feature("checks_signatures")
def test_bad_credentials_exit_254_without_showing_the_secret(run: Run) -> None:
    res = run("ls", extra_env={"AWS_SECRET_ACCESS_KEY": "wrong-secret-value"})
    assert res.code == 254
    assert "credentials" in res.err
    assert "wrong-secret-value" not in res.err + res.out


def test_a_setting_the_endpoint_cannot_honour_is_a_configuration_error_253(run: Run) -> None:
    # Without an endpoint the CLI would use AWS S3's FIPS endpoint; with a custom one,
    # FIPS cannot be had, and nothing is sent.
    res = run("ls", extra_env={"AWS_USE_FIPS_ENDPOINT": "true"})
    assert res.code == 253
    assert "AWS_USE_FIPS_ENDPOINT" in res.err


def test_debug_shows_the_traceback(run: Run) -> None:
    res = run("--debug", "ls", "s3://no-such-bucket-here")
    assert res.code == 254
    assert "Traceback" in res.err


def test_shared_files_configure_endpoint_and_credentials(
    s3_server: Any, tmp_path: Path, bucket: str
) -> None:
    home = tmp_path / "h"
    (home / ".aws").mkdir(parents=True)
    (home / ".aws" / "credentials").write_text(
        f"[dev]\naws_access_key_id = {s3_server.access_key}\n"
        f"aws_secret_access_key = {s3_server.secret_key}\n"
    )
    (home / ".aws" / "config").write_text(
        f"[profile dev]\nendpoint_url = {s3_server.endpoint}\nregion = us-east-1\n"
    )
    env = clean_env(home)
    ok = subprocess.run([*COMMAND, "--profile", "dev", "ls"], env=env, capture_output=True)
    assert ok.returncode == 0, ok.stderr
    assert bucket in ok.stdout.decode()
    via_env = subprocess.run(
        [*COMMAND, "ls"], env={**env, "AWS_PROFILE": "dev"}, capture_output=True
    )
    assert via_env.returncode == 0
    missing = subprocess.run([*COMMAND, "--profile", "ghost", "ls"], env=env, capture_output=True)
    assert missing.returncode == 253
    assert b"'ghost'" in missing.stderr


def test_debug_logs_never_show_the_secret(run: Run, env: dict[str, str], bucket: str) -> None:
    res = run("--debug", "cp", "-", f"s3://{bucket}/dbg", stdin=b"x" * 1000)
    assert res.code == 0, res.err
    assert "DEBUG" in res.err
    assert env["AWS_SECRET_ACCESS_KEY"] not in res.err + res.out


def test_python_dash_m_runs_the_same_program(env: dict[str, str]) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "objsdk.cli", "ls"], env=env, capture_output=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr


def test_progress_bar_on_a_terminal(
    env: dict[str, str], minio_proxy: Any, client: Client, bucket: str, tmp_path: Path
) -> None:
    import pty

    client.put_object(bucket, "slow.bin", os.urandom(3 << 20))
    minio_proxy.add_toxic("bandwidth", rate=1024)  # ~1.5 s per 1 MiB part
    leader, follower = pty.openpty()
    try:
        proc = subprocess.run(
            [*COMMAND, "cp", f"s3://{bucket}/slow.bin", "slow.bin", "--part-size", "1MiB"],
            cwd=tmp_path, stdout=follower, stderr=subprocess.PIPE, timeout=60,
            env={**env, "AWS_ENDPOINT_URL": minio_proxy.endpoint},
        )  # fmt: skip
    finally:
        os.close(follower)
        os.close(leader)
    assert proc.returncode == 0, proc.stderr
    assert b"download" in proc.stderr  # tqdm's bar, described by the transfer
    assert b"B/s" in proc.stderr or b"MB" in proc.stderr or b"%" in proc.stderr


def test_no_progress_bar_when_quiet_or_not_a_terminal(
    run: Run, client: Client, bucket: str
) -> None:
    client.put_object(bucket, "k", os.urandom(1 << 20))
    res = run("cp", f"s3://{bucket}/k", "k")
    assert "%" not in res.err


# -- interruption ----------------------------------------------------------------------------


def test_sigint_during_streamed_upload_aborts_the_multipart_upload(
    env: dict[str, str], s3_server: Any, client: Client, bucket: str
) -> None:
    proc = subprocess.Popen(
        [*COMMAND, "cp", "-", f"s3://{bucket}/stream", "--part-size", "5MiB"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        preexec_fn=as_at_a_terminal,
    )
    assert proc.stdin is not None
    proc.stdin.write(os.urandom(11 << 20))  # two full parts go out, then it waits for more
    proc.stdin.flush()
    wait_for(lambda: multipart_uploads(s3_server, bucket) == ["stream"], "the upload")
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130
    assert b"interrupted" in err
    assert b"Traceback" not in err
    assert multipart_uploads(s3_server, bucket) == []
    assert keys(client, bucket) == []


def test_sigint_during_file_upload_keeps_it_and_the_same_command_completes_it(
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
        command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=proxied,
        preexec_fn=as_at_a_terminal,
    )  # fmt: skip
    wait_for(lambda: parts_stored(local_minio, bucket, "big") >= 1, "a part stored")
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert b"running the same command again resumes it" in err
    assert multipart_uploads(local_minio, bucket) == ["big"]
    assert keys(client, bucket) == []
    again = subprocess.run(command, cwd=tmp_path, capture_output=True, env=proxied, timeout=60)
    assert again.returncode == 0, again.stderr
    assert client.get_object(bucket, "big") == data
    assert multipart_uploads(local_minio, bucket) == []


def test_sigint_during_file_upload_with_no_resume_leaves_no_orphan_parts(
    env: dict[str, str], local_minio: Any, minio_proxy: Any, client: Client, bucket: str,
    tmp_path: Path,
) -> None:  # fmt: skip
    (tmp_path / "big.bin").write_bytes(os.urandom(12 << 20))
    minio_proxy.add_toxic("bandwidth", stream="upstream", rate=4096)  # 4 MB/s
    proc = subprocess.Popen(
        [*COMMAND, "cp", "big.bin", f"s3://{bucket}/big", "--part-size", "5MiB",
         "--multipart-threshold", "5MiB", "--parallel", "1", "--no-resume"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={**env, "AWS_ENDPOINT_URL": minio_proxy.endpoint}, preexec_fn=as_at_a_terminal,
    )  # fmt: skip
    wait_for(lambda: multipart_uploads(local_minio, bucket) == ["big"], "the upload")
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert multipart_uploads(local_minio, bucket) == []
    assert keys(client, bucket) == []


def test_sigint_during_recursive_upload_keeps_each_upload_and_the_rerun_completes_them(
    env: dict[str, str], local_minio: Any, minio_proxy: Any, client: Client, bucket: str,
    tmp_path: Path,
) -> None:  # fmt: skip
    files = {f"f{i}.bin": os.urandom(11 << 20) for i in range(4)}
    for name, data in files.items():
        (tmp_path / "tree" / name).parent.mkdir(exist_ok=True)
        (tmp_path / "tree" / name).write_bytes(data)
    minio_proxy.add_toxic("bandwidth", stream="upstream", rate=8192)  # 8 MB/s
    command = [*COMMAND, "cp", "-r", "tree", f"s3://{bucket}/t", "--jobs", "2", "--parallel",
               "1", "--part-size", "5MiB", "--multipart-threshold", "5MiB"]  # fmt: skip
    proxied = {**env, "AWS_ENDPOINT_URL": minio_proxy.endpoint}
    proc = subprocess.Popen(
        command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=proxied,
        preexec_fn=as_at_a_terminal,
    )  # fmt: skip
    wait_for(lambda: len(multipart_uploads(local_minio, bucket)) == 2, "two uploads")
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    kept = sorted(multipart_uploads(local_minio, bucket))
    assert len(kept) == 2
    for key in kept:  # each one named, with what to do about it
        assert f"to s3://{bucket}/{key} is kept".encode() in err
    again = subprocess.run(command, cwd=tmp_path, capture_output=True, env=proxied, timeout=60)
    assert again.returncode == 0, again.stderr
    for name, data in files.items():
        assert client.get_object(bucket, f"t/{name}") == data
    assert multipart_uploads(local_minio, bucket) == []


def test_sigint_during_recursive_upload_with_no_resume_aborts_every_multipart_upload(
    env: dict[str, str], local_minio: Any, minio_proxy: Any, bucket: str, tmp_path: Path
) -> None:
    for i in range(4):
        (tmp_path / "tree" / f"f{i}.bin").parent.mkdir(exist_ok=True)
        (tmp_path / "tree" / f"f{i}.bin").write_bytes(os.urandom(11 << 20))
    minio_proxy.add_toxic("bandwidth", stream="upstream", rate=8192)  # 8 MB/s
    proc = subprocess.Popen(
        [*COMMAND, "cp", "-r", "tree", f"s3://{bucket}/t", "--jobs", "2", "--parallel", "1",
         "--part-size", "5MiB", "--multipart-threshold", "5MiB", "--no-resume"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={**env, "AWS_ENDPOINT_URL": minio_proxy.endpoint}, preexec_fn=as_at_a_terminal,
    )  # fmt: skip
    wait_for(lambda: len(multipart_uploads(local_minio, bucket)) == 2, "two uploads")
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert multipart_uploads(local_minio, bucket) == []


def test_sigint_during_download_then_rerun_completes(
    env: dict[str, str], minio_proxy: Any, client: Client, bucket: str, tmp_path: Path
) -> None:
    data = os.urandom(6 << 20)
    client.put_object(bucket, "d.bin", data)
    # 512 kB/s per connection: the first 4 parallel 1 MiB parts land after ~2 s, the
    # whole object cannot arrive before ~4 s.
    minio_proxy.add_toxic("bandwidth", rate=512)
    proxied = {**env, "AWS_ENDPOINT_URL": minio_proxy.endpoint}
    proc = subprocess.Popen(
        [*COMMAND, "cp", f"s3://{bucket}/d.bin", "d.bin", "--part-size", "1MiB"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=proxied,
        preexec_fn=as_at_a_terminal,
    )  # fmt: skip
    wait_for(lambda: any(tmp_path.glob(".d.bin.objsdk-*")), "the download to start")
    time.sleep(2.7)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert not (tmp_path / "d.bin").exists()  # nothing under the final name
    # The rerun goes straight to MinIO: Toxiproxy can hang removing a bandwidth toxic
    # whose connections were cut mid-transfer (Shopify/toxiproxy#558).
    again = subprocess.run(
        [*COMMAND, "--json", "cp", f"s3://{bucket}/d.bin", "d.bin", "--part-size", "1MiB"],
        cwd=tmp_path, capture_output=True, env=env, timeout=60,
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    summary = json.loads(again.stdout.splitlines()[-1])
    assert summary["bytes"] == len(data)
    assert summary["bytes_reused"] > 0  # the parts fetched before the kill were kept
    assert hashlib.sha256((tmp_path / "d.bin").read_bytes()).digest() == (
        hashlib.sha256(data).digest()
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.bin", "home"]
