"""The library logs and never prints: a program that configures no logging sees nothing
from objsdk on stderr, whatever goes wrong (retries against a bad endpoint, a 403 on
CreateMultipartUpload), while one that configures logging still gets the warnings.

Each script runs in a fresh interpreter with Python's default warning filters and no
logging set up, catches the error objsdk raises, and must leave stderr empty.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from objsdk.testing import LocalMinio
from objsdk.testing.faultproxy import Action, FaultProxy

MiB = 1 << 20


def _run(script: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``script`` in a fresh interpreter: no logging configured, default warning filters."""
    environ = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}
    return subprocess.run(
        [sys.executable, "-c", script, *args],
        env={**environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


BAD_ENDPOINT = """
import sys
import objsdk

retry = objsdk.default_retry(3).new(backoff_factor=0.01, backoff_max=0.02)
with objsdk.Client(sys.argv[1], "AK", "SK", retries=retry) as client:
    try:
        client.get_object("bucket", "key")
    except objsdk.ConnectError:
        print("ConnectError")
"""


def test_retries_against_a_bad_endpoint_print_nothing_on_stderr(unused_port: int) -> None:
    done = _run(BAD_ENDPOINT, f"http://127.0.0.1:{unused_port}")
    assert done.stdout.split() == ["ConnectError"]
    assert done.stderr == ""


PANDAS_BAD_ENDPOINT = """
import sys
import pandas as pd

options = {"endpoint_url": sys.argv[1], "key": "AK", "secret": "SK"}
try:
    pd.read_csv("objsdk://bucket/table.csv", storage_options=options)
except Exception as e:
    print(type(e).__name__)
"""


def test_a_pandas_read_from_a_bad_endpoint_prints_nothing_on_stderr(unused_port: int) -> None:
    pytest.importorskip("pandas")
    done = _run(PANDAS_BAD_ENDPOINT, f"http://127.0.0.1:{unused_port}", AWS_MAX_ATTEMPTS="3")
    assert done.stdout.split() == ["ConnectError"]
    assert done.stderr == ""


def test_an_application_that_configures_logging_still_gets_the_retry_warnings(
    unused_port: int,
) -> None:
    script = "import logging; logging.basicConfig()\n" + BAD_ENDPOINT
    done = _run(script, f"http://127.0.0.1:{unused_port}")
    assert done.stdout.split() == ["ConnectError"]
    assert "WARNING:objsdk:" in done.stderr
    assert "retrying" in done.stderr


@pytest.fixture
def proxy(local_minio: LocalMinio) -> Iterator[FaultProxy]:
    with FaultProxy(
        local_minio.endpoint, access_key=local_minio.access_key, secret_key=local_minio.secret_key
    ) as p:
        yield p


REFUSED_UPLOAD = """
import sys
import objsdk

endpoint, access, secret, bucket = sys.argv[1:]
with objsdk.Client(endpoint, access, secret) as client:
    for how in ("upload", "open_write"):
        try:
            if how == "upload":
                client.upload(bucket, "k", bytes(6 << 20), multipart_threshold=5 << 20)
            else:
                with client.open_write(bucket, "k", part_size=5 << 20) as w:
                    w.write(bytes(6 << 20))
        except objsdk.AccessDenied:
            print("AccessDenied")
"""


@pytest.mark.integration
def test_a_refused_create_multipart_upload_prints_nothing_and_lists_nothing(
    proxy: FaultProxy, local_minio: LocalMinio, bucket: str
) -> None:
    # A least-privilege policy: neither CreateMultipartUpload nor ListMultipartUploads.
    for method in ("POST", "GET"):
        proxy.add_rule(
            Action.ERROR,
            method=method,
            query=["uploads"],
            status=403,
            code="AccessDenied",
            times=None,
        )
    done = _run(
        REFUSED_UPLOAD, proxy.endpoint, local_minio.access_key, local_minio.secret_key, bucket
    )
    assert done.stdout.split() == ["AccessDenied", "AccessDenied"]
    assert done.stderr == ""
    sent = [(r.method, sorted(r.query)) for r in proxy.requests()]
    assert sent == [("POST", ["uploads"]), ("POST", ["uploads"])]  # no ListMultipartUploads
