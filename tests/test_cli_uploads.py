"""The command line and uploads kept to resume: ``cp``, ``mv`` and ``sync`` of a file go on
from the parts an interrupted run stored (``--no-resume``: start over), and ``objsdk
uploads ls`` / ``objsdk uploads abort`` show and remove the multipart uploads in progress.
The console script runs in a subprocess; the interrupted runs are library calls in this
process, made with the command's home directory, so both keep their records in one place.
"""

from __future__ import annotations

import mimetypes
import os
import re
import shlex
import time
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import Run, env, multipart_uploads, run
from s3_helpers import boto3_client

import objsdk
from objsdk import Client
from objsdk.testing.faultproxy import Action, FaultProxy

__all__ = ["env", "run"]  # fixtures, used by name

pytestmark = pytest.mark.integration

MiB = 1 << 20
PART = 5 * MiB
SIZE = 8 * PART
PARTS = ["--part-size", "5MiB", "--multipart-threshold", "5MiB"]


@pytest.fixture
def same_home(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """This process keeps its upload records where the command does."""
    monkeypatch.setenv("HOME", env["HOME"])
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    if "XDG_CACHE_HOME" in env:
        monkeypatch.setenv("XDG_CACHE_HOME", env["XDG_CACHE_HOME"])


def records(env: dict[str, str]) -> list[Path]:
    cache = Path(env.get("XDG_CACHE_HOME") or Path(env["HOME"]) / ".cache")
    return sorted((cache / "objsdk" / "uploads").glob("*.json"))


def interrupted(client: Client, bucket: str, key: str, path: Path) -> str:
    """Upload ``path`` as the command would (its guessed Content-Type) until three of its
    eight parts are stored, then stop it as Ctrl-C does: the upload id kept."""

    def stop(done: int, total: Any) -> None:
        if done >= 3 * PART:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt) as caught:
        client.upload(
            bucket, key, path, part_size=PART, multipart_threshold=PART, parallel=2,
            progress=stop, content_type=mimetypes.guess_type(path.name)[0],
        )  # fmt: skip
    return str(caught.value.kept_upload.upload_id)  # type: ignore[attr-defined]


@pytest.mark.parametrize("command", ["cp", "mv", "sync"])
def test_cp_mv_and_sync_of_a_file_resume_the_upload_an_interrupted_run_left(
    run: Run, env: dict[str, str], same_home: None, client: Client, s3_server: Any,
    bucket: str, tmp_path: Path, command: str,
) -> None:  # fmt: skip
    (tmp_path / "dir").mkdir()
    path = tmp_path / "dir" / "f.bin"
    data = os.urandom(SIZE)
    path.write_bytes(data)
    interrupted(client, bucket, "p/f.bin", path)
    args = {
        "cp": ["cp", "dir/f.bin", f"s3://{bucket}/p/f.bin"],
        "mv": ["mv", "dir/f.bin", f"s3://{bucket}/p/f.bin"],
        "sync": ["sync", "dir", f"s3://{bucket}/p/"],
    }[command]
    res = run(*args, *PARTS)
    assert res.code == 0, res.err
    assert re.search(r"[\d.]+ MiB of it already stored", res.err), res.err
    assert client.get_object(bucket, "p/f.bin") == data
    assert multipart_uploads(s3_server, bucket) == []
    assert records(env) == []
    assert path.exists() == (command != "mv")


def test_a_rerun_with_json_counts_the_bytes_already_stored(
    run: Run, same_home: None, client: Client, bucket: str, tmp_path: Path
) -> None:
    path = tmp_path / "f.bin"
    path.write_bytes(os.urandom(SIZE))
    interrupted(client, bucket, "k", path)
    res = run("--json", "cp", "f.bin", f"s3://{bucket}/k", *PARTS)
    assert res.code == 0, res.err
    summary = res.json_lines()[-1]
    assert summary["bytes"] == SIZE
    assert 3 * PART <= summary["bytes_reused"] < SIZE


def test_no_resume_starts_over_and_aborts_the_upload_an_earlier_run_left(
    run: Run, env: dict[str, str], same_home: None, client: Client, s3_server: Any,
    bucket: str, tmp_path: Path,
) -> None:  # fmt: skip
    path = tmp_path / "f.bin"
    data = os.urandom(SIZE)
    path.write_bytes(data)
    interrupted(client, bucket, "k", path)
    res = run("cp", "f.bin", f"s3://{bucket}/k", "--no-resume", *PARTS)
    assert res.code == 0, res.err
    assert "already stored" not in res.err
    assert client.get_object(bucket, "k") == data
    assert multipart_uploads(s3_server, bucket) == []
    assert records(env) == []


# -- uploads ls, uploads abort ------------------------------------------------------------------


def test_uploads_ls_lists_each_upload_and_the_file_a_rerun_here_resumes_it_from(
    run: Run, same_home: None, client: Client, s3_server: Any, bucket: str, tmp_path: Path
) -> None:
    path = tmp_path / "f.bin"
    path.write_bytes(os.urandom(SIZE))
    mine = interrupted(client, bucket, "logs/a", path)
    # Another writer's upload: no record here.
    theirs = boto3_client(s3_server).create_multipart_upload(Bucket=bucket, Key="logs/b")
    other = theirs["UploadId"]
    res = run("uploads", "ls", f"s3://{bucket}/logs/")
    assert res.code == 0, res.err
    lines = res.out.splitlines()
    assert len(lines) == 2
    (a,) = [line for line in lines if line.endswith(f"(resumes from {path})")]
    assert mine in a
    assert " logs/a " in a
    (b,) = [line for line in lines if other in line]
    assert b.endswith(" logs/b")
    listed = run("--json", "uploads", "ls", f"s3://{bucket}/logs/").json_lines()
    by_key = {entry["key"]: entry for entry in listed}
    assert by_key["logs/a"]["upload_id"] == mine
    assert by_key["logs/a"]["resumes_from"] == str(path)
    assert by_key["logs/b"]["resumes_from"] is None
    assert run("uploads", "ls", f"s3://{bucket}/other/").out == ""


def test_uploads_abort_needs_older_than_or_all(run: Run, bucket: str) -> None:
    res = run("uploads", "abort", f"s3://{bucket}/")
    assert res.code == 252
    assert "--older-than" in res.err
    assert "--all" in res.err
    bad = run("uploads", "abort", f"s3://{bucket}/", "--older-than", "soon")
    assert bad.code == 252
    assert "not a duration" in bad.err


def test_uploads_abort_all_under_a_prefix_after_a_dry_run(
    run: Run, env: dict[str, str], same_home: None, client: Client, s3_server: Any,
    bucket: str, tmp_path: Path,
) -> None:  # fmt: skip
    path = tmp_path / "f.bin"
    path.write_bytes(os.urandom(SIZE))
    mine = interrupted(client, bucket, "logs/a", path)
    boto3_client(s3_server).create_multipart_upload(Bucket=bucket, Key="keep/b")
    dry = run("uploads", "abort", f"s3://{bucket}/logs/", "--all", "--dry-run")
    assert dry.code == 0, dry.err
    assert f"(dryrun) abort: s3://{bucket}/logs/a (upload id {mine})" in dry.out
    assert sorted(multipart_uploads(s3_server, bucket)) == ["keep/b", "logs/a"]
    res = run("--json", "uploads", "abort", f"s3://{bucket}/logs/", "--all")
    assert res.code == 0, res.err
    assert [(e["key"], e["upload_id"]) for e in res.json_lines()] == [("logs/a", mine)]
    assert multipart_uploads(s3_server, bucket) == ["keep/b"]
    assert records(env) == []  # the record of the aborted upload went with it
    run("uploads", "abort", f"s3://{bucket}/", "--all")
    assert multipart_uploads(s3_server, bucket) == []


@pytest.mark.needs_feature("dates_uploads")
def test_uploads_abort_older_than_spares_an_upload_begun_since(
    run: Run, s3_server: Any, bucket: str
) -> None:
    boto3_client(s3_server).create_multipart_upload(Bucket=bucket, Key="live")
    res = run("uploads", "abort", f"s3://{bucket}/", "--older-than", "1h")
    assert res.code == 0, res.err
    assert "aborted 0 multipart uploads" in res.err
    assert multipart_uploads(s3_server, bucket) == ["live"]
    time.sleep(1.1)  # the server's Date is in whole seconds
    assert run("uploads", "abort", f"s3://{bucket}/", "--older-than", "0s").code == 0
    assert multipart_uploads(s3_server, bucket) == []


def test_uploads_ls_json_of_an_empty_bucket_prints_nothing(run: Run, bucket: str) -> None:
    res = run("--json", "uploads", "ls", f"s3://{bucket}")
    assert (res.code, res.out) == (0, ""), res.err


# -- a key that begins other keys, one upload of one key --------------------------------------

#: What other writers' keys add to a key ``k``: ``k`` itself, and keys that ``s3://bucket/k``
#: names as a prefix.
OTHER_KEYS = ("", "2", ".tmp", "/part")


def discarding_command(message: str) -> list[str]:
    """The arguments of the one command ``message`` says discards the upload it names,
    as a shell splits them."""
    (command,) = re.findall(r"`objsdk (uploads abort [^`]*)` discards it", message)
    return shlex.split(command)


def other_writers(s3_server: Any, bucket: str, key: str = "k") -> set[tuple[str, str]]:
    """Start another client's uploads of ``key`` and of keys that begin with it
    (OTHER_KEYS): their (key, upload id)."""
    s3 = boto3_client(s3_server)
    keys = [key + more for more in OTHER_KEYS]
    return {(k, s3.create_multipart_upload(Bucket=bucket, Key=k)["UploadId"]) for k in keys}


def in_progress(client: Client, bucket: str) -> set[tuple[str, str]]:
    return {(up.key, up.upload_id) for up in client.list_multipart_uploads(bucket)}


def test_uploads_ls_of_a_key_lists_every_upload_whose_key_begins_with_it_by_its_key(
    run: Run, s3_server: Any, bucket: str
) -> None:
    """``s3://b/k`` is a prefix, on every service: the uploads of ``k2``, ``k.tmp`` and
    ``k/part`` are listed with those of ``k``, each line ending with its own key."""
    theirs = other_writers(s3_server, bucket)
    res = run("uploads", "ls", f"s3://{bucket}/k")
    assert res.code == 0, res.err
    listed = {(line.split()[-1], line.split()[-2]) for line in res.out.splitlines()}
    assert listed == theirs


def test_uploads_ls_exact_key_lists_the_uploads_of_that_key_only(
    run: Run, s3_server: Any, bucket: str
) -> None:
    theirs = other_writers(s3_server, bucket)
    res = run("uploads", "ls", f"s3://{bucket}/k", "--exact-key")
    assert res.code == 0, res.err
    (line,) = res.out.splitlines()
    ((_, one),) = [(k, u) for k, u in theirs if k == "k"]
    assert line.endswith(f" {one} k")


def test_uploads_abort_exact_key_all_aborts_the_uploads_of_that_key_only(
    run: Run, client: Client, s3_server: Any, bucket: str
) -> None:
    theirs = other_writers(s3_server, bucket)
    second = boto3_client(s3_server).create_multipart_upload(Bucket=bucket, Key="k")
    of_k = {(k, u) for k, u in theirs if k == "k"} | {("k", second["UploadId"])}
    res = run("--json", "uploads", "abort", f"s3://{bucket}/k", "--exact-key", "--all")
    assert res.code == 0, res.err
    assert {(e["key"], e["upload_id"]) for e in res.json_lines()} == of_k
    assert in_progress(client, bucket) == theirs - of_k
    assert run("uploads", "ls", f"s3://{bucket}/", "--exact-key").code == 252


def test_uploads_abort_upload_id_names_one_upload_of_one_key(
    run: Run, client: Client, s3_server: Any, bucket: str
) -> None:
    """As ``aws s3api abort-multipart-upload --key K --upload-id ID``: that upload and
    nothing else, not another upload of the key nor one of a key that begins with it; an
    upload id the key has no upload in progress of is an error naming both."""
    theirs = other_writers(s3_server, bucket)
    ((_, one),) = [(k, u) for k, u in theirs if k == "k"]
    prefix = run("uploads", "abort", f"s3://{bucket}/", "--upload-id", one)
    assert prefix.code == 252
    assert "key" in prefix.err
    both = run("uploads", "abort", f"s3://{bucket}/k", "--upload-id", one, "--all")
    assert both.code == 252
    wrong_key = run("uploads", "abort", f"s3://{bucket}/k2", "--upload-id", one)
    assert wrong_key.code == 254
    assert f"s3://{bucket}/k2" in wrong_key.err
    assert one in wrong_key.err
    dry = run("uploads", "abort", f"s3://{bucket}/k", "--upload-id", one, "--dry-run")
    assert dry.out.splitlines() == [f"(dryrun) abort: s3://{bucket}/k (upload id {one})"]
    assert in_progress(client, bucket) == theirs
    res = run("uploads", "abort", f"s3://{bucket}/k", "--upload-id", one)
    assert res.code == 0, res.err
    assert in_progress(client, bucket) == theirs - {("k", one)}


@pytest.mark.parametrize("key", ["k", "a dir/it's $HOME;*"], ids=["plain", "shell-special"])
def test_the_command_a_kept_uploads_error_names_discards_that_upload_and_no_other(
    run: Run, env: dict[str, str], same_home: None, client: Client, s3_server: Any,
    bucket: str, tmp_path: Path, key: str,
) -> None:  # fmt: skip
    """The command is taken from the error's message as a shell would split it, and run:
    another writer's uploads of keys that begin with the kept upload's key, and of that
    key itself, are left in progress."""
    path = tmp_path / "f.bin"
    path.write_bytes(os.urandom(SIZE))

    def stop(done: int, total: Any) -> None:
        if done >= 3 * PART:
            raise objsdk.Cancelled("stopped")

    with pytest.raises(objsdk.Cancelled) as caught:
        client.upload(bucket, key, path, part_size=PART, multipart_threshold=PART,
                      parallel=2, progress=stop)  # fmt: skip
    mine = caught.value.kept_upload.upload_id  # type: ignore[attr-defined]
    theirs = other_writers(s3_server, bucket, key)
    res = run(*discarding_command(str(caught.value)))
    assert res.code == 0, res.err
    assert res.out.splitlines() == [f"abort: s3://{bucket}/{key} (upload id {mine})"]
    assert in_progress(client, bucket) == theirs
    assert records(env) == []


def test_a_cp_that_stops_and_keeps_its_upload_names_the_command_that_discards_only_it(
    run: Run, env: dict[str, str], client: Client, s3_server: Any, bucket: str,
    tmp_path: Path,
) -> None:  # fmt: skip
    """As the error's message says it on the command line: the command is taken from it
    and run with the same settings."""
    (tmp_path / "f.bin").write_bytes(os.urandom(SIZE))
    with FaultProxy(s3_server.endpoint) as proxy:
        settings = {"AWS_ENDPOINT_URL": proxy.endpoint, "AWS_MAX_ATTEMPTS": "1"}
        # Part 5 is refused with 500 InternalError, past the one attempt allowed.
        proxy.add_rule(Action.ERROR, method="PUT", query={"partNumber": "5"}, times=None)
        stopped = run("cp", "f.bin", f"s3://{bucket}/k", *PARTS, "--parallel", "1",
                      extra_env=settings)  # fmt: skip
        assert stopped.code == 254, stopped.err
        ((_, mine),) = in_progress(client, bucket)
        assert "running the same command again resumes it" in stopped.err
        proxy.clear_rules()
        theirs = other_writers(s3_server, bucket)
        res = run(*discarding_command(stopped.err), extra_env=settings)
    assert res.code == 0, res.err
    assert res.out.splitlines() == [f"abort: s3://{bucket}/k (upload id {mine})"]
    assert in_progress(client, bucket) == theirs
    assert records(env) == []
