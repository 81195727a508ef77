"""Checksum dialects, on a fake S3 behind a MockTransport: with ``when_required`` no
request carries an ``x-amz-checksum-*`` header; with no setting, a service that refuses
them works after one refused request, remembered for the client's life; where the
settings come from (arguments, environment, ~/.aws/config)."""

from __future__ import annotations

import hashlib
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

import pytest
import responses

import objsdk
from objsdk import Client
from objsdk._core.config import ConfigError
from objsdk._transport.dialect import ChecksumDialect
from objsdk._transport.http import HTTPTransport
from objsdk._transport.mock import MockResponse, MockTransport, Request

EP = "http://s3.test"
MiB = 1 << 20
PART = 5 * MiB

REFUSAL = (
    "<Error><Code>InvalidArgument</Code><Message>Unsupported header '{name}' received for "
    "this API call.</Message></Error>"
)


def checksum_headers(request: Request) -> list[str]:
    return sorted(n for n in request.headers if n.lower().startswith("x-amz-checksum"))


class FakeS3:
    """Enough of S3 for put, upload (one PUT, multipart), HEAD and GET, with ETags that
    are MD5s. ``refuse``: answer any ``x-amz-checksum-*`` request header with 400
    InvalidArgument "Unsupported header", as Backblaze B2 and older gateways do."""

    def __init__(self, *, refuse: bool = False) -> None:
        self.refuse = refuse
        self.objects: dict[str, bytes] = {}
        self.uploads: dict[str, dict[int, bytes]] = {}
        self.refusals = 0

    def __call__(self, request: Request) -> MockResponse:
        parts = urlsplit(request.url)
        key = unquote(parts.path.split("/", 2)[2]) if parts.path.count("/") > 1 else ""
        query = {k: v[0] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        named = checksum_headers(request)
        if self.refuse and named:
            self.refusals += 1
            body = REFUSAL.format(name=named[0]).encode()
            return MockResponse(400, {}, b"" if request.method == "HEAD" else body)
        method = request.method
        if method == "PUT" and "uploadId" in query:
            self.uploads[query["uploadId"]][int(query["partNumber"])] = request.body
            return MockResponse(200, {"ETag": _md5(request.body)})
        if method == "PUT":
            self.objects[key] = request.body
            return MockResponse(200, {"ETag": _md5(request.body)})
        if method == "POST" and "uploads" in query:
            upload_id = f"U{len(self.uploads) + 1}"
            self.uploads[upload_id] = {}
            return MockResponse(200, {}, f"<R><UploadId>{upload_id}</UploadId></R>".encode())
        if method == "POST" and "uploadId" in query:
            stored = self.uploads.pop(query["uploadId"])
            doc = ET.fromstring(request.body)
            if list(doc.iter("ChecksumCRC32C")):
                return MockResponse(400, {}, b"<Error><Code>InvalidPart</Code></Error>")
            numbers = [int(e.text or 0) for e in doc.iter("PartNumber")]
            self.objects[key] = b"".join(stored[n] for n in numbers)
            return MockResponse(200, {}, b'<R><ETag>"e-2"</ETag></R>')
        if method == "DELETE":
            self.uploads.pop(query.get("uploadId", ""), None)
            return MockResponse(204)
        data = self.objects.get(key)
        if data is None:
            return MockResponse(404, {}, b"<Error><Code>NoSuchKey</Code></Error>")
        headers = {"ETag": _md5(data), "Last-Modified": "Wed, 01 Jan 2025 00:00:00 GMT"}
        if method == "HEAD":
            return MockResponse(200, {**headers, "Content-Length": str(len(data))})
        wanted = request.headers.get("Range") or request.headers.get("range")
        if wanted:
            m = re.fullmatch(r"bytes=(\d+)-(\d*)", wanted)
            assert m is not None
            start, end = int(m[1]), int(m[2]) if m[2] else len(data) - 1
            end = min(end, len(data) - 1)
            headers["Content-Range"] = f"bytes {start}-{end}/{len(data)}"
            return MockResponse(206, headers, data[start : end + 1])
        return MockResponse(200, headers, data)


def _md5(data: bytes) -> str:
    return f'"{hashlib.md5(data).hexdigest()}"'


def _every_operation(client: Client, tmp_path: Path) -> None:
    """put, head, get, read, upload (one PUT of a file, multipart), a writer, download."""
    small, large = b"x" * 1000, bytes(range(256)) * (2 * PART // 256 + 7)
    path = tmp_path / "src"
    path.write_bytes(small)
    assert client.put_object("b", "small", small).checksums == {}
    assert client.head_object("b", "small").size == 1000
    assert client.get_object("b", "small") == small
    with client.open("b", "small") as f:
        assert f.read() == small
    assert client.upload("b", "file", path).checksums == {}
    info = client.upload("b", "large", large, part_size=PART, multipart_threshold=PART)
    assert info.checksums == {}
    with client.open_write("b", "written", part_size=PART, parallel=2) as w:
        w.write(large)
    assert w.info is not None
    assert w.info.checksums == {}
    client.download("b", "large", tmp_path / "out")
    assert (tmp_path / "out").read_bytes() == large


def test_when_required_sends_no_checksum_header_anywhere(tmp_path: Path) -> None:
    s3 = FakeS3()
    transport = MockTransport(s3, dialect=ChecksumDialect("when_required", "when_required"))
    _every_operation(Client(EP, transport=transport), tmp_path)
    assert [checksum_headers(r) for r in transport.requests if checksum_headers(r)] == []
    assert s3.objects["written"] == s3.objects["large"]


def test_with_no_setting_a_service_that_refuses_checksum_headers_just_works(
    tmp_path: Path,
) -> None:
    s3 = FakeS3(refuse=True)
    transport = MockTransport(s3)
    _every_operation(Client(EP, transport=transport), tmp_path)
    # One refusal for the request checksums, one (a HEAD's) for x-amz-checksum-mode;
    # every request after them carried none.
    assert s3.refusals == 2
    last_refused = max(i for i, r in enumerate(transport.requests) if checksum_headers(r))
    assert last_refused < len(transport.requests) // 4
    assert not transport.dialect.sends
    assert not transport.dialect.asks


def test_a_refused_checksum_header_is_retried_once_without_it() -> None:
    s3 = FakeS3(refuse=True)
    transport = MockTransport(s3)
    Client(EP, transport=transport).put_object("b", "k", b"data")
    first, second = transport.requests
    assert checksum_headers(first) == ["x-amz-checksum-crc32c"]
    assert checksum_headers(second) == []
    assert s3.objects["k"] == b"data"


def test_with_when_supported_set_a_refusal_is_reported_not_worked_around() -> None:
    transport = MockTransport(FakeS3(refuse=True), dialect=ChecksumDialect("when_supported"))
    with pytest.raises(objsdk.S3Error, match="Unsupported header"):
        Client(EP, transport=transport).put_object("b", "k", b"data")
    assert len(transport.requests) == 1


@pytest.mark.parametrize(
    ("code", "message"),
    [
        ("BadDigest", "The Content-MD5 or checksum value you specified did not match"),
        (
            "XAmzContentChecksumMismatch",
            "The provided 'x-amz-checksum' header does not match what was computed.",
        ),
        ("InvalidRequest", "Value for x-amz-checksum-crc32c header does not match the data"),
    ],
)
def test_a_checksum_mismatch_is_never_taken_for_a_refused_header(code: str, message: str) -> None:
    answer = f"<Error><Code>{code}</Code><Message>{message}</Message></Error>".encode()
    transport = MockTransport(lambda request: MockResponse(400, {}, answer))
    with pytest.raises(objsdk.S3Error, match=code):
        Client(EP, transport=transport).put_object("b", "k", b"data")
    assert len(transport.requests) == 1
    assert transport.dialect.sends


def test_a_refused_mode_header_leaves_request_checksums_on() -> None:
    s3 = FakeS3()
    s3.objects["k"] = b"abc"

    def handler(request: Request) -> MockResponse:
        if "x-amz-checksum-mode" in request.headers:
            return MockResponse(400, {}, REFUSAL.format(name="x-amz-checksum-mode").encode())
        return s3(request)

    transport = MockTransport(handler)
    with Client(EP, transport=transport).open("b", "k", readahead=0) as f:
        assert f.read() == b"abc"
    assert (transport.dialect.sends, transport.dialect.asks) == (True, False)


def test_a_head_refused_without_a_body_is_retried_without_the_mode_and_remembered(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def handler(request: Request) -> MockResponse:
        if "x-amz-checksum-mode" in request.headers:
            return MockResponse(400)
        return MockResponse(200, {"ETag": '"e"', "Content-Length": "3"})

    transport = MockTransport(handler)
    client = Client(EP, transport=transport)
    assert client.head_object("b", "k").size == 3
    assert client.head_object("b", "k").size == 3
    heads = [r for r in transport.requests if r.key == "k"]
    assert [bool(checksum_headers(r)) for r in heads] == [True, False, False]
    # A bare 400 may also be a region's refusal: the bucket's region is asked once.
    assert [(r.method, r.key) for r in transport.requests if r.key is None] == [("HEAD", None)]
    assert caplog.text.count("sending without checksum headers from now on") == 1


def test_a_head_answered_400_twice_is_not_remembered_nor_said_to_be(
    caplog: pytest.LogCaptureFixture,
) -> None:
    transport = MockTransport(lambda request: MockResponse(400))
    with pytest.raises(objsdk.S3Error):
        Client(EP, transport=transport).head_object("b", "k")
    assert transport.dialect.asks
    assert "checksum" not in caplog.text


def test_a_head_refused_for_another_reason_leaves_checksums_on_and_says_nothing_of_them(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A bad bucket name (MinIO names the code of a bodiless answer in a header): the HEAD
    # sent again without x-amz-checksum-mode is refused too, so nothing was learned,
    # and no warning may say that checksum headers are off from now on.
    transport = MockTransport(
        lambda request: MockResponse(400, {"x-minio-error-code": "InvalidBucketName"})
    )
    client = Client(EP, transport=transport)
    with pytest.raises(objsdk.S3Error) as info:
        client.head_object("Bad_Bucket", "k")
    assert info.value.code == "InvalidBucketName"
    assert transport.dialect.asks
    assert "checksum" not in caplog.text


# -- the settings reach the wire through Client (requests and urllib3) --------------------


@responses.activate
def test_client_arguments_set_the_dialect_of_its_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    # Every request through requests' adapter, where responses answers it.
    monkeypatch.setattr(HTTPTransport, "wire_requests", False)
    responses.put(f"{EP}/b/k", headers={"ETag": '"e"'})
    responses.head(f"{EP}/b/k", headers={"Content-Length": "4"})
    with Client(
        EP,
        "AK",
        "SK",
        request_checksum_calculation="when_required",
        response_checksum_validation="WHEN_REQUIRED",
    ) as client:
        client.put_object("b", "k", b"data")
        client.head_object("b", "k")
    for call in responses.calls:
        assert not [n for n in call.request.headers if n.lower().startswith("x-amz-checksum")]


def test_a_wrong_setting_is_refused_naming_it() -> None:
    with pytest.raises(objsdk.InvalidArgument, match="request_checksum_calculation"):
        Client(EP, request_checksum_calculation="never")


def test_settings_for_a_given_transport_belong_to_it() -> None:
    with pytest.raises(objsdk.InvalidArgument, match="dialect"):
        Client(EP, transport=MockTransport(FakeS3()), request_checksum_calculation="when_required")


ENV = {"AWS_ENDPOINT_URL": EP, "AWS_ACCESS_KEY_ID": "A", "AWS_SECRET_ACCESS_KEY": "S"}


def _from_env(tmp_path: Path, config: str = "", **env: str) -> Client:
    (tmp_path / ".aws").mkdir(exist_ok=True)
    (tmp_path / ".aws" / "config").write_text(config)
    return Client.from_env({**ENV, "HOME": str(tmp_path), **env})


def _dialect(client: Client) -> tuple[str | None, str | None]:
    d = client.transport.dialect
    return d.request_checksum_calculation, d.response_checksum_validation


def test_from_env_reads_the_checksum_variables(tmp_path: Path) -> None:
    client = _from_env(
        tmp_path,
        AWS_REQUEST_CHECKSUM_CALCULATION="when_required",
        AWS_RESPONSE_CHECKSUM_VALIDATION="when_supported",
    )
    assert _dialect(client) == ("when_required", "when_supported")


def test_from_env_reads_the_checksum_settings_of_the_profile(tmp_path: Path) -> None:
    config = (
        "[default]\nrequest_checksum_calculation = when_required\n"
        "response_checksum_validation = when_required\n"
    )
    assert _dialect(_from_env(tmp_path, config)) == ("when_required", "when_required")


def test_the_environment_wins_over_the_profile_and_arguments_over_both(tmp_path: Path) -> None:
    config = "[default]\nrequest_checksum_calculation = when_required\n"
    env = {"AWS_REQUEST_CHECKSUM_CALCULATION": "when_supported"}
    assert _dialect(_from_env(tmp_path, config, **env))[0] == "when_supported"
    (tmp_path / ".aws" / "config").write_text(config)
    client = Client.from_env(
        {**ENV, "HOME": str(tmp_path)}, request_checksum_calculation="when_supported"
    )
    assert _dialect(client)[0] == "when_supported"


def test_no_setting_anywhere_leaves_the_dialect_to_learn(tmp_path: Path) -> None:
    assert _dialect(_from_env(tmp_path)) == (None, None)


def test_a_wrong_checksum_variable_is_an_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="AWS_REQUEST_CHECKSUM_CALCULATION"):
        _from_env(tmp_path, AWS_REQUEST_CHECKSUM_CALCULATION="sometimes")


# -- AWS_MAX_ATTEMPTS and AWS_RETRY_MODE -------------------------------------------------


def _retries(client: Client) -> int:
    total = client.transport.retry.total  # type: ignore[attr-defined]
    assert isinstance(total, int)
    return total


def test_from_env_honours_aws_max_attempts(tmp_path: Path) -> None:
    assert _retries(_from_env(tmp_path, AWS_MAX_ATTEMPTS="3")) == 2


def test_from_env_honours_max_attempts_of_the_profile(tmp_path: Path) -> None:
    assert _retries(_from_env(tmp_path, "[default]\nmax_attempts = 2\n")) == 1


def test_the_standard_retry_mode_makes_three_attempts(tmp_path: Path) -> None:
    assert _retries(_from_env(tmp_path, AWS_RETRY_MODE="standard")) == 2
    assert _retries(_from_env(tmp_path, AWS_RETRY_MODE="standard", AWS_MAX_ATTEMPTS="7")) == 6


def test_retries_given_to_from_env_win_over_aws_max_attempts(tmp_path: Path) -> None:
    (tmp_path / ".aws").mkdir()
    client = Client.from_env({**ENV, "HOME": str(tmp_path), "AWS_MAX_ATTEMPTS": "3"}, retries=1)
    assert _retries(client) == 1


def test_without_max_attempts_from_env_keeps_five_retries(tmp_path: Path) -> None:
    assert _retries(_from_env(tmp_path)) == 5


@pytest.mark.parametrize("value", ["0", "x", "-1"])
def test_a_wrong_max_attempts_is_an_error_naming_it(tmp_path: Path, value: str) -> None:
    with pytest.raises(ConfigError, match="AWS_MAX_ATTEMPTS"):
        _from_env(tmp_path, AWS_MAX_ATTEMPTS=value)


def test_a_wrong_retry_mode_is_an_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="AWS_RETRY_MODE"):
        _from_env(tmp_path, AWS_RETRY_MODE="eager")


def test_parts_from_memory_sent_without_checksums_sign_their_sha256() -> None:
    s3 = FakeS3()
    transport = MockTransport(s3, dialect=ChecksumDialect("when_required"))
    data = bytes(range(256)) * (2 * PART // 256 + 3)
    Client(EP, transport=transport).upload("b", "k", data, part_size=PART, multipart_threshold=PART)
    parts = [r for r in transport.requests if "partNumber=" in r.url]
    assert len(parts) == 3
    for request in parts:
        assert request.headers["x-amz-content-sha256"] == hashlib.sha256(request.body).hexdigest()
    assert s3.objects["k"] == data


def test_a_pickled_client_keeps_its_checksum_settings() -> None:
    import pickle

    client = Client(EP, request_checksum_calculation="when_required")
    copy = pickle.loads(pickle.dumps(client))
    assert _dialect(copy) == ("when_required", None)
