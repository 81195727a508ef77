"""A bucket in another region than the client's, for real: a MinIO whose site region is
eu-west-1 refuses requests signed for us-east-1 (400 AuthorizationHeaderMalformed, the
region in its body and in ``x-amz-bucket-region``), as S3 does. A client, the command
line and fsspec, all configured for us-east-1, read and write it anyway: the first
request to the bucket is signed again for eu-west-1, and every later one is signed for
it at once (counted through the fault proxy, which also plays AWS's 301 and 307 and a
HEAD's bodiless 400).
"""

from __future__ import annotations

import multiprocessing
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from cli_helpers import COMMAND, clean_env

from objsdk import Client
from objsdk.testing import LocalMinio
from objsdk.testing.faultproxy import Action, FaultProxy

pytestmark = [pytest.mark.integration, pytest.mark.minio_only]

MIB = 1 << 20
REGION = "eu-west-1"


@pytest.fixture(scope="module")
def eu_minio() -> Iterator[LocalMinio]:
    with LocalMinio(region=REGION) as minio:
        yield minio


@pytest.fixture
def eu_bucket(eu_minio: LocalMinio) -> Iterator[str]:
    name = "t-" + os.urandom(6).hex()
    with eu_minio.client() as owner:  # signs for the server's region
        owner.create_bucket(name)
        owner.put_object(name, "k", b"stored in eu-west-1")
        yield name
        owner.delete_objects(name, [e.key for e in owner.list_objects(name)])
        owner.delete_bucket(name)


@pytest.fixture
def proxy(eu_minio: LocalMinio) -> Iterator[FaultProxy]:
    with FaultProxy(
        eu_minio.endpoint, access_key=eu_minio.access_key, secret_key=eu_minio.secret_key
    ) as p:
        yield p


@pytest.fixture
def east(proxy: FaultProxy, eu_minio: LocalMinio) -> Iterator[Client]:
    """A client for us-east-1, through the proxy, without retries."""
    with Client(
        proxy.endpoint, eu_minio.access_key, eu_minio.secret_key, region="us-east-1", retries=0
    ) as c:
        yield c


def _statuses(proxy: FaultProxy) -> list[int | None]:
    return [r.status for r in proxy.requests()]


def test_the_server_refuses_a_request_signed_for_us_east_1(
    eu_minio: LocalMinio, eu_bucket: str
) -> None:
    from objsdk._core.signing import Credentials, sign_request
    from objsdk._transport.pipeline import utc_now

    url = f"{eu_minio.endpoint}/{eu_bucket}/k"
    credentials = Credentials(eu_minio.access_key, eu_minio.secret_key)
    headers = sign_request(
        "GET", url, {}, credentials=credentials, region="us-east-1", now=utc_now()
    )
    answer = requests.get(url, headers=headers, timeout=10)
    assert answer.status_code == 400
    assert "AuthorizationHeaderMalformed" in answer.text
    assert answer.headers["x-amz-bucket-region"] == REGION


def _put(c: Client, bucket: str, tmp: Path) -> None:
    c.put_object(bucket, "new", b"put")
    assert c.get_object(bucket, "new") == b"put"


def _get(c: Client, bucket: str, tmp: Path) -> None:
    assert c.get_object(bucket, "k") == b"stored in eu-west-1"


def _head(c: Client, bucket: str, tmp: Path) -> None:
    assert c.head_object(bucket, "k").size == len(b"stored in eu-west-1")


def _list(c: Client, bucket: str, tmp: Path) -> None:
    assert "k" in [e.key for e in c.list_objects(bucket)]


def _open_read(c: Client, bucket: str, tmp: Path) -> None:
    with c.open(bucket, "k") as f:
        assert f.read() == b"stored in eu-west-1"
        f.seek(7)
        assert f.read(2) == b"in"


def _download(c: Client, bucket: str, tmp: Path) -> None:
    c.download(bucket, "k", str(tmp / "got"))
    assert (tmp / "got").read_bytes() == b"stored in eu-west-1"


def _upload_file(c: Client, bucket: str, tmp: Path) -> None:
    # One PUT of a regular file over plain HTTP: its body goes by sendfile.
    path = tmp / "small"
    path.write_bytes(os.urandom(100_000))
    c.upload(bucket, "small", str(path))
    assert c.get_object(bucket, "small") == path.read_bytes()


def _upload_multipart(c: Client, bucket: str, tmp: Path) -> None:
    path = tmp / "big"
    path.write_bytes(os.urandom(11 * MIB))
    info = c.upload(bucket, "big", str(path), part_size=5 * MIB, multipart_threshold=5 * MIB)
    assert info.parts == 3
    assert c.get_object(bucket, "big") == path.read_bytes()


def _presign(c: Client, bucket: str, tmp: Path) -> None:
    # Nothing was sent to this bucket before: the URL's region is asked once.
    got = requests.get(c.presign("GET", bucket, "k", expires=60), timeout=10)
    assert (got.status_code, got.content) == (200, b"stored in eu-west-1")
    put = requests.put(c.presign("PUT", bucket, "presigned", expires=60), data=b"p", timeout=10)
    assert put.status_code == 200
    assert c.get_object(bucket, "presigned") == b"p"


OPERATIONS: dict[str, Callable[[Client, str, Path], None]] = {
    "put_object": _put,
    "get_object": _get,
    "head_object": _head,
    "list_objects": _list,
    "open_read": _open_read,
    "download": _download,
    "upload_file": _upload_file,
    "upload_multipart": _upload_multipart,
    "presign": _presign,
}


@pytest.mark.parametrize("operation", sorted(OPERATIONS))
def test_a_us_east_1_client_works_on_a_bucket_in_eu_west_1_and_is_refused_once(
    operation: str, east: Client, proxy: FaultProxy, eu_bucket: str, tmp_path: Path
) -> None:
    OPERATIONS[operation](east, eu_bucket, tmp_path)
    statuses = _statuses(proxy)
    assert statuses[0] == 400  # the first request, signed for us-east-1
    assert len(statuses) > 1
    assert all(s is not None and s < 300 for s in statuses[1:]), statuses


def test_the_second_request_to_the_bucket_is_signed_for_its_region_at_once(
    east: Client, proxy: FaultProxy, eu_bucket: str, tmp_path: Path
) -> None:
    _get(east, eu_bucket, tmp_path)
    assert _statuses(proxy) == [400, 200]
    for operation in OPERATIONS.values():
        operation(east, eu_bucket, tmp_path)
    assert _statuses(proxy).count(400) == 1


def test_a_forked_child_keeps_the_region_its_parent_learned(
    east: Client, proxy: FaultProxy, eu_bucket: str
) -> None:
    _get(east, eu_bucket, Path("."))
    context = multiprocessing.get_context("fork")
    child = context.Process(target=_get, args=(east, eu_bucket, Path(".")))
    child.start()
    child.join(60)
    assert child.exitcode == 0
    assert _statuses(proxy) == [400, 200, 200]


@pytest.mark.parametrize(
    ("status", "code"), [(301, "PermanentRedirect"), (307, "TemporaryRedirect")]
)
def test_a_redirect_naming_the_region_in_its_header_is_followed(
    status: int, code: str, east: Client, proxy: FaultProxy, eu_bucket: str
) -> None:
    proxy.add_rule(
        Action.ERROR,
        method="GET",
        status=status,
        code=code,
        headers={"x-amz-bucket-region": REGION},
    )
    assert east.get_object(eu_bucket, "k") == b"stored in eu-west-1"
    assert east.get_object(eu_bucket, "k") == b"stored in eu-west-1"
    assert _statuses(proxy) == [status, 200, 200]


def test_a_heads_bodiless_400_naming_no_region_asks_the_buckets_region(
    east: Client, proxy: FaultProxy, eu_bucket: str
) -> None:
    # The object's HEAD is refused with nothing but a 400; the bucket's HEAD (the
    # question) reaches MinIO, whose answer names the region.
    proxy.add_rule(Action.ERROR, method="HEAD", path=r"/k$", status=400, code="BadRequest")
    assert east.head_object(eu_bucket, "k").size == len(b"stored in eu-west-1")
    assert [(r.method, r.path.rsplit("/", 1)[-1], r.status) for r in proxy.requests()] == [
        ("HEAD", "k", 400),
        ("HEAD", eu_bucket, 400),
        ("HEAD", "k", 200),
    ]


def _run_cli(eu_minio: LocalMinio, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **clean_env(home),
        "AWS_ENDPOINT_URL": eu_minio.endpoint,
        "AWS_ACCESS_KEY_ID": eu_minio.access_key,
        "AWS_SECRET_ACCESS_KEY": eu_minio.secret_key,
        "AWS_REGION": "us-east-1",
    }
    return subprocess.run(
        [*COMMAND, *args], capture_output=True, text=True, env=env, timeout=120, check=False
    )


def test_the_cli_configured_for_us_east_1_lists_and_copies_a_bucket_in_eu_west_1(
    eu_minio: LocalMinio, eu_bucket: str, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    listed = _run_cli(eu_minio, home, "ls", f"s3://{eu_bucket}/")
    assert listed.returncode == 0, listed.stderr
    assert "k" in listed.stdout.split()
    got = _run_cli(eu_minio, home, "cp", f"s3://{eu_bucket}/k", str(tmp_path / "k"))
    assert got.returncode == 0, got.stderr
    assert (tmp_path / "k").read_bytes() == b"stored in eu-west-1"
    (tmp_path / "up").write_bytes(os.urandom(7 * MIB))
    sent = _run_cli(eu_minio, home, "cp", str(tmp_path / "up"), f"s3://{eu_bucket}/up")
    assert sent.returncode == 0, sent.stderr
    with eu_minio.client() as owner:
        assert owner.get_object(eu_bucket, "up") == (tmp_path / "up").read_bytes()


def test_fsspec_configured_for_us_east_1_reads_and_writes_a_bucket_in_eu_west_1(
    eu_minio: LocalMinio, eu_bucket: str
) -> None:
    fsspec = pytest.importorskip("fsspec")
    options: dict[str, Any] = {
        "endpoint_url": eu_minio.endpoint,
        "key": eu_minio.access_key,
        "secret": eu_minio.secret_key,
        "region": "us-east-1",
        "skip_instance_cache": True,
    }
    with fsspec.open(f"objsdk://{eu_bucket}/k", **options) as f:
        assert f.read() == b"stored in eu-west-1"
    with fsspec.open(f"objsdk://{eu_bucket}/written", "wb", **options) as w:
        w.write(b"from fsspec")
    fs = fsspec.filesystem("objsdk", **options)
    assert sorted(p.rsplit("/", 1)[-1] for p in fs.ls(eu_bucket)) == ["k", "written"]
    assert fs.cat_file(f"{eu_bucket}/written") == b"from fsspec"
