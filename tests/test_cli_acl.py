"""``--acl``: the canned ACL reaches every write a command makes (an upload, a stream
from standard input, a server-side copy), as ``aws s3 cp --acl`` sends it; a download
has nothing to take it and ignores it, as aws does; a name that is not a canned ACL is
an argument error.
(That the library sends it as ``x-amz-acl`` is in tests/test_client_requests.py.)"""

from __future__ import annotations

import io
import sys
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import cli_env  # noqa: F401 - a fixture

from objsdk import Client
from objsdk.cli import main

pytestmark = pytest.mark.integration


@pytest.fixture
def acl_seen(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[Any]]:
    """The ``acl`` each write was called with (None: none given)."""
    seen: dict[str, list[Any]] = {"upload": [], "open_write": [], "copy_object": []}
    for name in seen:
        real = getattr(Client, name)

        def spy(self: Client, *args: Any, _real: Any = real, _name: str = name, **kw: Any) -> Any:
            seen[_name].append(kw.get("acl"))
            return _real(self, *args, **kw)

        monkeypatch.setattr(Client, name, spy)
    return seen


@pytest.mark.usefixtures("cli_env")
def test_acl_goes_with_uploads_streams_and_copies(
    bucket: str, tmp_path: Path, acl_seen: dict[str, list[Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    src = tmp_path / "f.txt"
    src.write_bytes(b"data")
    acl = ["--acl", "bucket-owner-full-control"]
    assert main(["cp", "-q", *acl, str(src), f"s3://{bucket}/up"]) == 0
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"piped")))
    assert main(["cp", "-q", *acl, "-", f"s3://{bucket}/piped"]) == 0
    assert main(["cp", "-q", *acl, f"s3://{bucket}/up", f"s3://{bucket}/copy"]) == 0
    assert main(["cp", "-q", str(src), f"s3://{bucket}/plain"]) == 0
    assert acl_seen == {
        "upload": ["bucket-owner-full-control", None],
        "open_write": ["bucket-owner-full-control"],
        "copy_object": ["bucket-owner-full-control"],
    }


@pytest.mark.usefixtures("cli_env")
def test_acl_on_a_download_is_ignored_and_one_not_canned_is_an_argument_error(
    bucket: str, tmp_path: Path, client: Client, capsys: pytest.CaptureFixture[str]
) -> None:
    client.put_object(bucket, "k", b"x")
    assert main(["cp", "-q", "--acl", "private", f"s3://{bucket}/k", str(tmp_path / "k")]) == 0
    assert (tmp_path / "k").read_bytes() == b"x"
    assert main(["cp", "--acl", "public", str(tmp_path / "k"), f"s3://{bucket}/k"]) == 252
    assert "invalid choice: 'public'" in capsys.readouterr().err
