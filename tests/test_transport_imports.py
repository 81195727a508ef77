"""requests is loaded only when a transport first streams an answer or sends a file body:
a program (the command line above all) that lists, heads, gets into memory, puts bytes
and deletes never pays for importing it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from typing import Any

import pytest

pytestmark = pytest.mark.integration


def _run(s3_server: Any, body: str) -> dict[str, Any]:
    script = textwrap.dedent(
        """
        import json, sys
        from objsdk import Client

        def loaded():
            return "requests" in sys.modules

        seen = {"at import": loaded()}
        client = Client.from_env()
        """
    ) + textwrap.dedent(body)
    out = subprocess.run(
        [sys.executable, "-c", script + "\nprint(json.dumps(seen))\n"],
        env={**os.environ, **s3_server.env()},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def test_requests_stays_unloaded_by_requests_answered_whole(s3_server, bucket):
    seen = _run(
        s3_server,
        f"""
        client.put_object({bucket!r}, "small", b"x" * 4096)
        client.head_object({bucket!r}, "small")
        assert client.get_object({bucket!r}, "small") == b"x" * 4096
        list(client.list_objects({bucket!r}))
        client.delete_object({bucket!r}, "small")
        seen["after whole answers"] = loaded()
        """,
    )
    assert seen == {"at import": False, "after whole answers": False}


def test_a_streamed_read_and_a_file_body_load_it_and_work(s3_server, bucket, tmp_path):
    path = tmp_path / "file.bin"
    path.write_bytes(os.urandom(256 << 10))
    seen = _run(
        s3_server,
        f"""
        client.put_object({bucket!r}, "streamed", b"y" * (1 << 20))
        with client.open({bucket!r}, "streamed", readahead=0) as f:
            assert f.read() == b"y" * (1 << 20)
        seen["after a streamed read"] = loaded()
        client.upload({bucket!r}, "file", {str(path)!r}, multipart_threshold=1 << 30)
        seen["file stored"] = client.get_object({bucket!r}, "file") == open(
            {str(path)!r}, "rb"
        ).read()
        """,
    )
    assert seen == {"at import": False, "after a streamed read": True, "file stored": True}


def test_xml_bodies_do_not_load_the_url_opener(s3_server, bucket):
    # xml.sax.saxutils imports urllib.request (with tempfile and shutil) for an escape
    # objsdk writes itself; a program that lists, puts, tags and deletes never needs it.
    seen = _run(
        s3_server,
        f"""
        seen["opener at import"] = "urllib.request" in sys.modules
        client.put_object({bucket!r}, "a&b", b"x")
        client.put_object_tags({bucket!r}, "a&b", {{"k": "v w"}})
        with client.open_write({bucket!r}, "parts", part_size=5 << 20) as w:
            w.write(b"z" * (6 << 20))
        assert client.delete_objects({bucket!r}, ["a&b", "parts"]) == []
        seen["opener after XML bodies"] = "urllib.request" in sys.modules
        """,
    )
    assert seen == {
        "at import": False,
        "opener at import": False,
        "opener after XML bodies": False,
    }
