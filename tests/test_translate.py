"""requests/urllib3/socket failures become objsdk errors by one table: each exception
takes the entry of the most specific class it is, whatever the table's order, and the
result is raised from the original with a message that names no URL."""

from __future__ import annotations

import builtins
import http.client
import socket
import ssl

import pytest
import requests
import requests.exceptions as rq
import urllib3.exceptions as u3

from objsdk import errors
from objsdk._transport import translate as translate_module
from objsdk._transport.answer_head import HeadTooLarge
from objsdk._transport.translate import translate, translate_errors

WHERE = " (bucket 'b', key 'k')"


def _bare(cls: type[BaseException]) -> BaseException:
    """An instance without its ``__init__`` (the libraries' constructors want pools,
    connections and URLs; the mapping looks only at the class)."""
    return cls.__new__(cls)


def _library_exceptions() -> list[type[BaseException]]:
    """Every exception class requests, urllib3, http.client, ssl, socket and Python
    define (but exception groups, which need their arguments), in a stable order."""
    modules = [builtins, http.client, socket, ssl, rq, u3]
    found = set()
    for module in modules:
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, BaseException):
                try:
                    _bare(value)
                except TypeError:
                    continue
                found.add(value)
    return sorted(found, key=lambda c: (c.__module__, c.__qualname__))


REACH = "cannot reach the server"
BROKEN = "connection broken"


@pytest.mark.parametrize(
    ("raised", "error", "message"),
    [
        # A ConnectTimeoutError in urllib3, but refused is not a timeout.
        (u3.NewConnectionError, errors.ConnectError, f"{REACH} (NewConnectionError)"),
        (u3.NameResolutionError, errors.ConnectError, f"{REACH} (NameResolutionError)"),
        (rq.ConnectTimeout, errors.Timeout, "connect timed out"),
        (u3.ConnectTimeoutError, errors.Timeout, "connect timed out"),
        (rq.ReadTimeout, errors.Timeout, "read timed out"),
        (u3.ReadTimeoutError, errors.Timeout, "read timed out"),
        (TimeoutError, errors.Timeout, "read timed out"),
        (BlockingIOError, errors.Timeout, "read timed out"),
        (rq.SSLError, errors.ConnectError, "TLS error (SSLError)"),
        (u3.SSLError, errors.ConnectError, "TLS error (SSLError)"),
        (rq.ChunkedEncodingError, errors.ProtocolError, f"{BROKEN} (ChunkedEncodingError)"),
        (rq.ContentDecodingError, errors.ProtocolError, f"{BROKEN} (ContentDecodingError)"),
        (u3.ProtocolError, errors.ProtocolError, f"{BROKEN} (ProtocolError)"),
        (u3.DecodeError, errors.ProtocolError, f"{BROKEN} (DecodeError)"),
        (u3.IncompleteRead, errors.ProtocolError, f"{BROKEN} (IncompleteRead)"),
        (http.client.HTTPException, errors.ProtocolError, f"{BROKEN} (HTTPException)"),
        (http.client.IncompleteRead, errors.ProtocolError, f"{BROKEN} (IncompleteRead)"),
        # A ConnectionResetError too, but the server was reached: the connection broke.
        (http.client.RemoteDisconnected, errors.ProtocolError, f"{BROKEN} (RemoteDisconnected)"),
        (rq.ConnectionError, errors.ConnectError, f"{REACH} (ConnectionError)"),
        (rq.ProxyError, errors.ConnectError, f"{REACH} (ProxyError)"),
        (ConnectionError, errors.ConnectError, f"{REACH} (ConnectionError)"),
        (ConnectionRefusedError, errors.ConnectError, f"{REACH} (ConnectionRefusedError)"),
        (ConnectionResetError, errors.ConnectError, f"{REACH} (ConnectionResetError)"),
        (BrokenPipeError, errors.ConnectError, f"{REACH} (BrokenPipeError)"),
        (OSError, errors.ProtocolError, f"{BROKEN} (OSError)"),
        (ssl.SSLError, errors.ProtocolError, f"{BROKEN} (SSLError)"),
        (socket.gaierror, errors.ProtocolError, f"{BROKEN} (gaierror)"),
        (rq.Timeout, errors.ProtocolError, f"{BROKEN} (Timeout)"),
        (rq.RetryError, errors.ProtocolError, f"{BROKEN} (RetryError)"),
        (u3.MaxRetryError, errors.TransportError, "request failed (MaxRetryError)"),
        (u3.TimeoutError, errors.TransportError, "request failed (TimeoutError)"),
        (u3.ProxyError, errors.TransportError, "request failed (ProxyError)"),
        (ValueError, errors.TransportError, "request failed (ValueError)"),
    ],
    ids=lambda v: v.__qualname__ if isinstance(v, type) else "",
)
def test_each_failure_becomes_the_objsdk_error_of_its_most_specific_class(raised, error, message):
    err = translate(_bare(raised), "read", "b", "k")
    assert type(err) is error
    assert str(err) == f"read: {message}{WHERE}"
    assert (err.operation, err.bucket, err.key) == ("read", "b", "k")


def test_an_objsdk_error_is_returned_as_it_is():
    original = errors.IntegrityError("crc mismatch", bucket="b", key="k", offset=0)
    assert translate(original, "read", "other", "other") is original


def test_the_table_s_order_does_not_change_any_mapping(monkeypatch):
    before = {c: _outcome(c) for c in _library_exceptions()}
    monkeypatch.setattr(translate_module, "_MAP", dict(reversed(translate_module._MAP.items())))
    after = {c: _outcome(c) for c in _library_exceptions()}
    assert after == before


def test_every_library_exception_maps_as_the_isinstance_ladder_before_the_table_did():
    changed = [
        (c.__qualname__, _outcome(c), ladder)
        for c in _library_exceptions()
        if _outcome(c) != (ladder := _as_the_ladder_did(c))
    ]
    assert changed == []


def _outcome(cls: type[BaseException]) -> tuple[type[errors.ObjsdkError], str]:
    err = translate(_bare(cls), "op", "b", "k")
    return type(err), str(err)


def _as_the_ladder_did(cls: type[BaseException]) -> tuple[type[errors.ObjsdkError], str]:
    """translate() as it was before the table (an isinstance ladder whose order
    mattered), kept as the reference the table must agree with."""
    e = _bare(cls)
    cause = translate_module._cause(e)
    ladder: list[tuple[tuple[type[BaseException], ...], type[errors.TransportError], str]] = [
        ((u3.NewConnectionError,), errors.ConnectError, f"{REACH} ({cause})"),
        ((rq.ConnectTimeout, u3.ConnectTimeoutError), errors.Timeout, "connect timed out"),
        (
            (rq.ReadTimeout, u3.ReadTimeoutError, TimeoutError, BlockingIOError),
            errors.Timeout,
            "read timed out",
        ),
        ((rq.SSLError, u3.SSLError), errors.ConnectError, f"TLS error ({cause})"),
        (
            (
                rq.ChunkedEncodingError,
                rq.ContentDecodingError,
                u3.ProtocolError,
                u3.DecodeError,
                http.client.HTTPException,
            ),
            errors.ProtocolError,
            f"{BROKEN} ({cause})",
        ),
        ((rq.ConnectionError, ConnectionError), errors.ConnectError, f"{REACH} ({cause})"),
        ((OSError,), errors.ProtocolError, f"{BROKEN} ({cause})"),
    ]
    error, message = errors.TransportError, f"request failed ({cls.__name__})"
    for classes, mapped, text in ladder:
        if isinstance(e, classes):
            error, message = mapped, text
            break
    return error, str(error(message, operation="op", bucket="b", key="k"))


def test_the_message_names_the_innermost_failure_and_never_the_url():
    url = "/b/k?X-Amz-Signature=0123456789abcdef&X-Amz-Credential=AKIDEXAMPLE"
    refused = u3.NewConnectionError(None, f"refused connecting for {url}")  # type: ignore[arg-type]
    wrapped = rq.ConnectionError(u3.MaxRetryError(None, url, reason=refused))  # type: ignore[arg-type]
    err = translate(wrapped, "get_object", "b", "k")
    assert type(err) is errors.ConnectError
    assert str(err) == f"get_object: cannot reach the server (NewConnectionError){WHERE}"
    assert "Signature" not in str(err)
    assert "AKID" not in str(err)


def test_translate_errors_raises_the_objsdk_error_from_the_original_without_its_request():
    original = rq.ReadTimeout(
        "read timed out", request=requests.Request("GET", "http://x/").prepare()
    )
    with pytest.raises(errors.Timeout) as info, translate_errors("get_object", "b", "k"):
        raise original
    assert info.value.__cause__ is original
    assert original.request is None  # it holds the caller's body buffer


def test_translate_errors_lets_objsdk_errors_and_other_bugs_through_unchanged():
    mine = errors.SourceChangedError("the file shrank")
    with pytest.raises(errors.SourceChangedError) as info, translate_errors("put_object", "b", "k"):
        raise mine
    assert info.value is mine
    with pytest.raises(KeyError), translate_errors("put_object", "b", "k"):
        raise KeyError("a bug, not a network failure")


def test_an_untrusted_certificate_says_how_to_trust_it():
    import ssl

    inner = ssl.SSLCertVerificationError(1, "certificate verify failed")
    outer = u3.SSLError(inner)
    outer.__cause__ = inner
    err = translate(outer, "op", "b", "k")
    assert isinstance(err, errors.ConnectError)
    assert "TLS error (SSLCertVerificationError)" in str(err)
    assert "not trusted" in str(err)
    assert "AWS_CA_BUNDLE" in str(err)
    # Other TLS failures are reported as they are.
    assert "AWS_CA_BUNDLE" not in str(translate(u3.SSLError("wrong version"), "op", "b", "k"))


# -- what a failure to connect says of where it went ---------------------------------------

SIGNED_URL = (
    "http://user:pw@s3.test:9000/b/k?X-Amz-Algorithm=AWS4-HMAC-SHA256"
    "&X-Amz-Credential=AKIDEXAMPLE%2F20250101%2Fus-east-1%2Fs3%2Faws4_request"
    "&X-Amz-Signature=0123456789abcdef"
)


def _caused(outer: BaseException, inner: BaseException) -> BaseException:
    outer.__cause__ = inner
    return outer


@pytest.mark.parametrize(
    ("raised", "says"),
    [
        (
            _caused(u3.NewConnectionError(None, "refused"), ConnectionRefusedError(111, "x")),  # type: ignore[arg-type]
            'cannot reach the server at the endpoint URL "http://s3.test:9000/b/k" '
            "(ConnectionRefusedError)",
        ),
        (
            u3.ConnectTimeoutError(None, "timed out"),
            'connect timed out at the endpoint URL "http://s3.test:9000/b/k"',
        ),
        (
            _caused(u3.SSLError("bad"), ssl.SSLError(1, "[SSL] internal error")),
            'TLS error at the endpoint URL "http://s3.test:9000/b/k" (SSLError)',
        ),
    ],
    ids=["refused", "connect timeout", "TLS"],
)
def test_a_failure_to_connect_names_the_endpoint_url_but_never_its_query_or_user_info(
    raised: BaseException, says: str
) -> None:
    # As aws: 'Could not connect to the endpoint URL: "http://host:port/bucket/key"'.
    err = translate(raised, "get_object", "b", "k", SIGNED_URL)
    assert str(err) == f"get_object: {says}{WHERE}"
    for secret in ("Signature", "Credential", "AKID", "user", "pw", "?"):
        assert secret not in str(err)


def test_a_broken_connection_or_read_timeout_names_no_url() -> None:
    # The server was reached: the operation, bucket and key say what broke.
    for raised in (u3.ProtocolError("reset"), u3.ReadTimeoutError(None, "", "slow")):  # type: ignore[arg-type]
        assert "http" not in str(translate(raised, "get_object", "b", "k", SIGNED_URL))


@pytest.mark.parametrize(
    ("url", "named"),
    [
        ("http://h:9000/b/k?uploadId=1&partNumber=2", "http://h:9000/b/k"),
        ("https://h/", "https://h/"),
        ("https://h", "https://h/"),
        ("http://[::1]:9000/b", "http://[::1]:9000/b"),
        ("http://a:s@h:1/b/k#frag", "http://h:1/b/k"),
        ("http://h:9000/b/a%20b", "http://h:9000/b/a%20b"),
    ],
)
def test_the_endpoint_url_is_scheme_host_port_and_path(url: str, named: str) -> None:
    assert translate_module.endpoint_url(url) == named


def test_a_name_that_does_not_resolve_names_the_host_and_the_resolver_s_words() -> None:
    unresolved = socket.gaierror(socket.EAI_NONAME, "Name or service not known")
    raised = _caused(u3.NameResolutionError("no-such-host.invalid", None, unresolved), unresolved)  # type: ignore[arg-type]
    err = translate(raised, "list_buckets", None, None, "http://no-such-host.invalid:9000/")
    assert type(err) is errors.ConnectError
    assert str(err) == (
        "list_buckets: cannot reach the server at the endpoint URL "
        '"http://no-such-host.invalid:9000/" (gaierror); '
        "the host name 'no-such-host.invalid' could not be resolved "
        "(Name or service not known)"
    )


@pytest.mark.parametrize(
    "openssl_says",
    [
        "[SSL: WRONG_VERSION_NUMBER] wrong version number (_ssl.c:1006)",  # OpenSSL 1.1 to 3.1
        "[SSL] record layer failure (_ssl.c:1000)",  # OpenSSL 3.2 on
    ],
)
def test_a_tls_handshake_answered_in_plain_http_says_the_endpoint_is_likely_http(
    openssl_says: str,
) -> None:
    raised = _caused(u3.SSLError("handshake"), ssl.SSLError(1, openssl_says))
    err = translate(raised, "list_buckets", None, None, "https://127.0.0.1:9000/")
    assert str(err) == (
        'list_buckets: TLS error at the endpoint URL "https://127.0.0.1:9000/" (SSLError); '
        "the endpoint most likely answered plain HTTP to the TLS handshake: "
        'is it "http://127.0.0.1:9000"?'
    )


@pytest.mark.parametrize(
    "broke",
    [
        http.client.RemoteDisconnected("Remote end closed connection without response"),
        ConnectionResetError(104, "Connection reset by peer"),
        http.client.IncompleteRead(b"", 10),
    ],
    ids=lambda e: type(e).__name__,
)
def test_an_answer_that_broke_through_requests_is_a_protocol_error_as_on_the_wire(
    broke: Exception,
) -> None:
    """requests raises its ConnectionError around urllib3's ProtocolError for a request
    or answer that broke on a connection already made: the server was reached, so it is
    the ProtocolError the wire raises for the same failure, never "cannot reach"."""
    aborted = u3.ProtocolError("Connection aborted.", broke)
    aborted.__context__ = broke  # urllib3 raises it while handling the failure
    through_requests = translate(rq.ConnectionError(aborted), "get_object", "b", "k", SIGNED_URL)
    wire = _caused(u3.ProtocolError("Connection broken", broke), broke)  # raised from it
    on_the_wire = translate(wire, "get_object", "b", "k")
    assert type(through_requests) is type(on_the_wire) is errors.ProtocolError
    assert str(through_requests) == str(on_the_wire)
    assert str(on_the_wire) == f"get_object: {BROKEN} ({type(broke).__name__}){WHERE}"


@pytest.mark.parametrize(
    ("refused", "says"),
    [
        (HeadTooLarge("more than 256 header fields"), "more than 256 header fields"),
        (
            http.client.LineTooLong("header line"),
            "got more than 65536 bytes when reading header line",
        ),
        (http.client.HTTPException("got more than 100 headers"), "got more than 100 headers"),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, BaseException) else "",
)
def test_an_answer_past_a_bound_says_which_on_either_path(refused: Exception, says: str) -> None:
    """objsdk's refusal of a head past a bound (on the wire, or of interim answers
    through requests) and http.client's (through requests) say which bound, in their
    own words, which hold no URL."""
    wire = _caused(u3.ProtocolError("Connection broken", refused), refused)
    aborted = u3.ProtocolError("Connection aborted.", refused)
    aborted.__context__ = refused
    for raised in (wire, rq.ConnectionError(aborted)):
        err = translate(raised, "get_object", "b", "k", SIGNED_URL)
        assert type(err) is errors.ProtocolError
        assert str(err) == f"get_object: answer past a bound ({says}){WHERE}"
