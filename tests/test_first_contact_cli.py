"""The aws CLI's flags a new user reaches for first, with the aws CLI's semantics: the
console script of a regular install (tests/installed_venv.py) in a subprocess, against a
real server."""

from __future__ import annotations

import base64
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import Result
from installed_venv import Installed, installed
from s3_helpers import boto3_client

from objsdk import Client
from objsdk.testing import LocalMinio

__all__ = ["installed"]  # fixtures, used by name

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parent.parent


def objsdk(installed: Installed, server: Any, cwd: Path, *args: str, stdin: bytes = b"") -> Result:
    """The installed ``objsdk`` command with ``args``, configured for ``server`` through
    the environment as a user's shell would be."""
    env = installed.env(
        cwd,
        {
            "AWS_ENDPOINT_URL": server.endpoint,
            "AWS_ACCESS_KEY_ID": server.access_key,
            "AWS_SECRET_ACCESS_KEY": server.secret_key,
        },
    )
    done = subprocess.run(
        [str(installed.script("objsdk")), *args],
        input=stdin,
        capture_output=True,
        cwd=cwd,
        env=env,
        timeout=120,
        check=False,
    )
    return Result(done.returncode, done.stdout, done.stderr.decode())


# -- ls --page-size: keys per request, not a limit on the output ---------------------------------


def listing_requests(debug_log: str, bucket: str) -> int:
    """The ListObjects requests in ``--debug``'s log (one ``GET <bucket>/`` each)."""
    return len(re.findall(rf" GET {re.escape(bucket)}/ -> 200$", debug_log, re.M))


def test_ls_page_size_sets_the_keys_per_request_and_lists_them_all(
    installed: Installed, s3_server: Any, client: Client, bucket: str, tmp_path: Path
) -> None:
    names = [f"k{i}" for i in range(5)]
    for name in names:
        client.put_object(bucket, name, b"x")

    paged = objsdk(
        installed, s3_server, tmp_path, "--debug", "ls", "--page-size", "2", f"s3://{bucket}/"
    )
    whole = objsdk(installed, s3_server, tmp_path, "--debug", "ls", f"s3://{bucket}/")

    assert paged.code == 0, paged.err
    assert [line.split()[-1] for line in paged.out.splitlines()] == names
    assert paged.out == whole.out
    assert listing_requests(paged.err, bucket) == 3  # 2 + 2 + 1 keys
    assert listing_requests(whole.err, bucket) == 1


@pytest.mark.parametrize("size", ["0", "1001", "two"])
def test_ls_page_size_outside_1_to_1000_is_refused_naming_the_flag(
    installed: Installed, s3_server: Any, bucket: str, tmp_path: Path, size: str
) -> None:
    res = objsdk(installed, s3_server, tmp_path, "ls", "--page-size", size, f"s3://{bucket}/")

    assert res.code == 252
    assert "--page-size" in res.err


# -- --output json: refused, naming --json -------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["--output", "json", "ls"],
        ["ls", "s3://b", "--output", "json"],
        ["ls", "--output=json", "s3://b"],
    ],
)
def test_output_json_is_refused_with_the_flag_that_does_it(
    installed: Installed, s3_server: Any, tmp_path: Path, args: list[str]
) -> None:
    res = objsdk(installed, s3_server, tmp_path, *args)

    assert (res.code, res.out) == (252, "")
    assert res.err == "objsdk: error: --output json is not supported; use --json\n"


# -- cp --sse: what aws s3 cp --sse stores ------------------------------------------------------

KMS_KEY = "objsdk-cli-key"


@pytest.fixture(scope="module")
def kms_minio() -> Iterator[LocalMinio]:
    """A MinIO with a KMS key, which SSE-S3 and SSE-KMS need (docs/objects.md)."""
    secret = f"{KMS_KEY}:{base64.b64encode(os.urandom(32)).decode()}"
    with LocalMinio(kms_secret_key=secret) as minio:
        yield minio


@pytest.fixture
def kms_bucket(kms_minio: LocalMinio) -> Iterator[str]:
    name = "sse-" + os.urandom(6).hex()
    with kms_minio.client() as c:
        c.create_bucket(name)
        yield name
        c.delete_objects(name, [e.key for e in c.list_objects(name)])
        c.delete_bucket(name)


@pytest.mark.parametrize(
    ("flags", "kind"),
    [
        (["--sse", "AES256"], "AES256"),
        (["--sse", "aws:kms", "--sse-kms-key-id", KMS_KEY], "aws:kms"),
    ],
    ids=["SSE-S3", "SSE-KMS"],
)
def test_cp_sse_stores_uploads_streams_and_copies_encrypted_as_aws_s3_cp_does(
    installed: Installed,
    kms_minio: LocalMinio,
    kms_bucket: str,
    tmp_path: Path,
    flags: list[str],
    kind: str,
) -> None:
    (tmp_path / "report.csv").write_bytes(b"a,b\n1,2\n")
    with kms_minio.client() as plain:
        plain.put_object(kms_bucket, "plain.csv", b"stored without encryption")
    s3 = f"s3://{kms_bucket}"

    for args, stdin in (
        (["report.csv", f"{s3}/file.csv"], b""),
        (["-", f"{s3}/stream.csv"], b"from standard input"),
        ([f"{s3}/plain.csv", f"{s3}/copy.csv"], b""),
    ):
        res = objsdk(installed, kms_minio, tmp_path, "cp", *flags, *args, stdin=stdin)
        assert res.code == 0, res.err

    heads = {
        key: boto3_client(kms_minio).head_object(Bucket=kms_bucket, Key=key)
        for key in ("file.csv", "stream.csv", "copy.csv", "plain.csv")
    }
    assert {k: h.get("ServerSideEncryption") for k, h in heads.items()} == {
        "file.csv": kind,
        "stream.csv": kind,
        "copy.csv": kind,
        "plain.csv": None,
    }
    if kind == "aws:kms":
        assert all(heads[k]["SSEKMSKeyId"].endswith(KMS_KEY) for k in ("file.csv", "copy.csv"))


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--sse", "AES128"], "--sse: invalid choice: 'AES128'"),
        (["--sse-kms-key-id", KMS_KEY], "--sse-kms-key-id needs --sse aws:kms"),
        (["--sse", "AES256", "--sse-kms-key-id", KMS_KEY], "--sse-kms-key-id needs --sse aws:kms"),
    ],
)
def test_cp_sse_flags_that_do_not_fit_are_refused_by_name(
    installed: Installed,
    kms_minio: LocalMinio,
    kms_bucket: str,
    tmp_path: Path,
    flags: list[str],
    message: str,
) -> None:
    (tmp_path / "a.txt").write_bytes(b"a")

    res = objsdk(installed, kms_minio, tmp_path, "cp", *flags, "a.txt", f"s3://{kms_bucket}/a")

    assert res.code == 252
    assert message in res.err
    with kms_minio.client() as c:
        assert list(c.list_objects(kms_bucket)) == []


# -- docs/cli.md: a section for every command ---------------------------------------------------


def test_cli_docs_have_a_section_for_every_command_and_the_aws_flags(
    installed: Installed, tmp_path: Path
) -> None:
    usage = installed.run([installed.script("objsdk"), "--help"], cwd=tmp_path).stdout
    # Under "positional arguments:", a line per command: "    ls    list buckets...".
    listed = usage.split("positional arguments:\n")[1].split("\n\n")[0]
    commands = set(re.findall(r"^    (\w+) ", listed, re.M))
    docs = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    sections = re.findall(r"^### `(\w+)", docs, re.M) + re.findall(r"^### .*, `(\w+)", docs, re.M)

    assert "index" in commands
    assert sorted(commands - set(sections)) == []
    for flag in ("--sse AES256\\|aws:kms", "--sse-kms-key-id", "--page-size", "--output json"):
        assert flag in docs, flag
