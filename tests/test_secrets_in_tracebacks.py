"""No secret in a failed request's traceback, locals included.

Error reporters (Sentry and the like) keep every frame's locals, as
``traceback.TracebackException(..., capture_locals=True)`` formats them. A request that
fails deep in the transport (refused, reset, or refused by the server) must leave
neither the secret key, nor the session token, nor the request's signature anywhere in
that text, on each of the transport's paths: its own connections, requests' streamed
answers, and a file body sent by sendfile.
"""

from __future__ import annotations

import base64
import contextlib
import mmap
import re
import socket
import traceback
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path

import pytest
from rawserver import RawServer, Request, S3Object, http_response, object_reply, reset
from urllib3.util.retry import Retry

import objsdk
from objsdk._core.addressing import Endpoint
from objsdk._core.secret_headers import SecretHeaders
from objsdk._core.signing import Credentials
from objsdk._core.sse import SSEC
from objsdk._transport.dialect import ChecksumDialect
from objsdk._transport.pipeline import Pipeline, SignedRequest
from objsdk._transport.wire import Answer

SECRET = "wJalrXUtnFEMI-K7MDENG-bPxRfiCYSECRETKEY"
TOKEN = "IQoJb3JpZ2luX2VjSESSIONTOKEN0123456789abcdef"
BUCKET, KEY = "bkt", "dir/obj.bin"
SIGNATURE = re.compile(r"Signature=([0-9a-f]{64})")


def formatted(error: BaseException) -> str:
    """The error as a reporter that keeps locals shows it (chained errors too)."""
    text = "".join(traceback.TracebackException.from_exception(error, capture_locals=True).format())
    assert "Traceback" in text
    return text


def assert_no_secret(text: str, signatures: list[str]) -> None:
    assert SECRET not in text
    assert TOKEN not in text
    assert SIGNATURE.search(text) is None
    for signature in signatures:
        assert signature not in text


# -- the read and write paths --------------------------------------------------------------


def get_whole(client: objsdk.Client, tmp_path: Path) -> None:
    client.get_object(BUCKET, KEY)  # read whole, on the transport's own connections


def read_streamed(client: objsdk.Client, tmp_path: Path) -> None:
    with client.open(BUCKET, KEY, readahead=0, max_resume=0) as f:
        f.read()  # a streamed answer, through requests


def upload_file(client: objsdk.Client, tmp_path: Path) -> None:
    path = tmp_path / "small.bin"
    path.write_bytes(b"x" * (256 * 1024))
    client.upload(BUCKET, KEY, path)  # a regular file over plain HTTP: sendfile


def put_file_object(client: objsdk.Client, tmp_path: Path) -> None:
    path = tmp_path / "file.bin"
    path.write_bytes(b"y" * (256 * 1024))
    with path.open("rb") as f:
        client.put_object(BUCKET, KEY, f)  # a file body, through requests


PATHS = [get_whole, read_streamed, upload_file, put_file_object]


# -- the failures ----------------------------------------------------------------------------


def refused() -> Iterator[tuple[str, list[str]]]:
    """An endpoint where nothing listens: the connection is refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    yield f"http://127.0.0.1:{port}", []


def signatures_of(server: RawServer) -> list[str]:
    found = [SIGNATURE.search(r.headers.get("Authorization", "")) for r in server.requests]
    return [m.group(1) for m in found if m is not None]


@contextlib.contextmanager
def serving(handler: Callable[[Request, socket.socket], None]) -> Iterator[tuple[str, list[str]]]:
    signatures: list[str] = []
    with RawServer(handler) as server:
        yield server.url, signatures
        signatures += signatures_of(server)
        assert signatures  # the request reached the server, signed


def reset_after_the_request(request: Request, conn: socket.socket) -> None:
    reset(conn)


def refused_by_the_server(request: Request, conn: socket.socket) -> None:
    """S3's SignatureDoesNotMatch, which echoes the request: its canonical form (the
    session token among the signed headers) and the signature it carried."""
    headers = "\n".join(f"{k.lower()}:{v}" for k, v in request.headers.items())
    body = (
        "<Error><Code>SignatureDoesNotMatch</Code><Message>The request signature we "
        "calculated does not match the signature you provided.</Message>"
        f"<CanonicalRequest>{request.method}\n{request.path}\n{headers}</CanonicalRequest>"
        f"<SignatureProvided>{request.headers.get('Authorization', '')}</SignatureProvided>"
        "<RequestId>0</RequestId></Error>"
    ).encode()
    conn.sendall(http_response(403, {"Content-Type": "application/xml"}, body))


FAILURES: dict[str, Callable[[], contextlib.AbstractContextManager[tuple[str, list[str]]]]] = {
    "refused": contextlib.contextmanager(refused),
    "reset": lambda: serving(reset_after_the_request),
    "signature-refused": lambda: serving(refused_by_the_server),
}


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("failure", list(FAILURES))
def test_a_failed_request_leaves_no_secret_in_its_traceback_locals(
    tmp_path: Path, failure: str, path: Callable[[objsdk.Client, Path], None]
) -> None:
    with FAILURES[failure]() as (url, signatures):
        client = objsdk.Client(url, "AKIDEXAMPLE", SECRET, session_token=TOKEN, retries=0)
        with client, pytest.raises(objsdk.ObjsdkError) as info:
            path(client, tmp_path)
        text = formatted(info.value)  # before this frame knows the signatures sent
    assert_no_secret(text, signatures)


# -- what holds the credentials shows none of them ---------------------------------------------

SSE_KEY = bytes(range(32))


def signed_request() -> SignedRequest:
    """A GET signed as the client signs it, with a session token and an SSE-C key."""
    pipeline = Pipeline(
        Endpoint.parse("https://s3.example.com"),
        Credentials("AKIDEXAMPLE", SECRET, TOKEN),
        "us-east-1",
        Retry(0),
        clock=lambda: datetime(2024, 1, 1, tzinfo=timezone.utc),
    ).with_sse(SSEC(SSE_KEY))
    url = pipeline.url(BUCKET, KEY, [])
    headers = pipeline.headers("GET", KEY, [], {"Accept-Encoding": "identity"})
    return pipeline.sign("GET", url, headers, "UNSIGNED-PAYLOAD")


def assert_shows_no_credential(text: str) -> None:
    assert_no_secret(text, [])
    assert base64.b64encode(SSE_KEY).decode() not in text


def test_a_signed_request_and_its_headers_show_no_credential() -> None:
    request = signed_request()
    for shown in (repr(request), repr(request.headers), str(request.headers), f"{request}"):
        assert_shows_no_credential(shown)
    assert "<hidden>" in repr(request.headers)
    assert "'x-amz-content-sha256': 'UNSIGNED-PAYLOAD'" in repr(request.headers)  # no secret


def test_signed_headers_are_the_mapping_that_is_sent() -> None:
    headers = signed_request().headers
    assert isinstance(headers, dict)
    assert headers["x-amz-security-token"] == TOKEN
    assert SIGNATURE.search(headers["Authorization"])
    assert (
        headers["x-amz-server-side-encryption-customer-key"] == base64.b64encode(SSE_KEY).decode()
    )
    assert dict(headers) == {name: headers[name] for name in headers}


def test_secret_headers_hide_their_values_whatever_the_case_of_their_names() -> None:
    headers = SecretHeaders({"AUTHORIZATION": "a", "X-Amz-Security-Token": "t", "Range": "r"})
    assert repr(headers) == (
        "SecretHeaders({'AUTHORIZATION': '<hidden>', 'X-Amz-Security-Token': '<hidden>', "
        "'Range': 'r'})"
    )


def test_the_headers_a_refused_checksum_retry_resends_show_no_credential() -> None:
    request = signed_request()
    headers = SecretHeaders({**request.headers, "x-amz-checksum-crc32c": "AAAAAA=="})
    refusal = objsdk.errors.s3_error(400, "InvalidRequest", "x-amz-checksum-crc32c is unsupported")
    resend = ChecksumDialect().retry_without(refusal, headers, "PUT")
    assert resend is not None
    assert resend["x-amz-security-token"] == TOKEN
    assert_shows_no_credential(repr(resend))


def test_a_whole_answer_does_not_show_its_body() -> None:
    """An error body may echo the signed request (SignatureDoesNotMatch)."""
    answer = Answer(403, {}, f"<SignatureProvided>{TOKEN}</SignatureProvided>".encode())
    assert TOKEN not in repr(answer)


# -- a request made while the caller handles an exception of its own -----------------------


def get_into_buffer(client: objsdk.Client, tmp_path: Path) -> None:
    mm = mmap.mmap(-1, 1024)
    try:
        client.get_into(BUCKET, KEY, mm)  # a closed range read into the buffer
    finally:
        mm.close()  # BufferError, in place of objsdk's error, if that held a view of it


def _callers_own_code() -> None:
    marker = "keep-me"  # noqa: F841 - a local the caller's debugger or reporter shows
    raise ValueError("the caller's own failure")


@pytest.mark.parametrize(
    ("path", "failure"),
    # A refused connection, retried once; a read into a buffer, which resumes a refused
    # connection for long, on a refusal by the server.
    [*((path, "refused") for path in PATHS), (get_into_buffer, "signature-refused")],
)
def test_a_request_failing_in_the_callers_except_block_leaves_the_callers_frames_whole(
    tmp_path: Path, path: Callable[[objsdk.Client, Path], None], failure: str
) -> None:
    """objsdk clears the locals of the frames its own failure came through, never those
    of the exception the caller was handling when it called objsdk (chained to objsdk's
    error as its context): the caller's debugger still shows the caller's variables."""
    retried = objsdk.default_retry(1).new(backoff_factor=0.005, backoff_max=0.01)
    with FAILURES[failure]() as (url, signatures):
        client = objsdk.Client(url, "AKIDEXAMPLE", SECRET, session_token=TOKEN, retries=retried)
        with client:
            try:
                _callers_own_code()
            except ValueError as own:
                handled = own
                with pytest.raises(objsdk.ObjsdkError) as info:
                    path(client, tmp_path)
        text = formatted(info.value)  # before this frame knows the signatures sent
    chain: list[BaseException] = []
    e: BaseException | None = info.value
    while e is not None and e not in chain:
        chain.append(e)
        e = e.__cause__ or e.__context__
    assert handled in chain  # the caller's exception is what objsdk's failure happened in
    frames = [frame for frame, _ in traceback.walk_tb(handled.__traceback__)]
    assert frames[-1].f_code.co_name == "_callers_own_code"
    assert frames[-1].f_locals.get("marker") == "keep-me"
    assert "ValueError" not in str(info.value)  # the cause named is objsdk's failure's
    assert "caller's own" not in str(getattr(info.value, "reason", ""))
    assert "keep-me" in text
    assert_no_secret(text, signatures)


def _callers_own_lookup() -> None:
    raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")


def test_a_request_made_while_the_caller_handles_a_failed_lookup_is_still_retried() -> None:
    """The caller's own unresolved host name is not objsdk's: objsdk's connection reset
    once is retried as any is, not refused as a host name that did not resolve."""
    obj = S3Object(b"payload")

    def reset_once(request: Request, conn: socket.socket) -> None:
        if request.index == 0:
            reset(conn)
        else:
            object_reply(request, obj).send(conn)

    retried = objsdk.default_retry(2).new(backoff_factor=0.005, backoff_max=0.01)
    with RawServer(reset_once) as server:
        client = objsdk.Client(server.url, "AKIDEXAMPLE", SECRET, retries=retried)
        with client:
            try:
                _callers_own_lookup()
            except socket.gaierror:
                assert client.get_object(BUCKET, KEY) == b"payload"
        assert len(server.requests) == 2
