"""The request pipeline without a network: one signer per attempt, the one retry loop and
its classifier (what is retried, and when a request may be sent again)."""

from __future__ import annotations

import io
import socket
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
import requests
import responses
import urllib3.exceptions

import objsdk
from objsdk import Client, errors
from objsdk._core.addressing import Endpoint
from objsdk._core.signing import Credentials
from objsdk._transport.http import HTTPTransport
from objsdk._transport.mock import MockResponse, MockTransport
from objsdk._transport.pipeline import Pipeline, SignedRequest, network_failure
from objsdk._transport.refusal import keep_retry_after
from objsdk._transport.retry import (
    RetryKind,
    default_retry,
    hearing_throttles,
    next_policy,
    pause,
    retry_kind,
)

EP = "http://s3.test:9000"
SLOW_DOWN = b"<Error><Code>SlowDown</Code><Message>Reduce your rate.</Message></Error>"


@pytest.fixture(autouse=True)
def no_sleep(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    slept: list[float] = []
    monkeypatch.setattr("time.sleep", slept.append)
    return slept


@pytest.fixture
def rsps(monkeypatch: pytest.MonkeyPatch) -> Iterator[responses.RequestsMock]:
    # Every request through requests' adapter, where responses answers it.
    monkeypatch.setattr(HTTPTransport, "wire_requests", False)
    with responses.RequestsMock(assert_all_requests_are_fired=False) as r:
        yield r


def _pipeline(clock: Any = None, retries: int = 3) -> Pipeline:
    kwargs = {"clock": clock} if clock is not None else {}
    return Pipeline(
        Endpoint.parse(EP), Credentials("AK", "SK"), "us-east-1", default_retry(retries), **kwargs
    )


def _slow_down() -> errors.S3Error:
    return errors.SlowDown(503, "SlowDown", operation="op", bucket="b", key="k")


# -- the classifier ---------------------------------------------------------------------


def test_create_multipart_upload_is_retried_after_an_answer_only() -> None:
    assert retry_kind("POST", [("uploads", "")]) is RetryKind.ANSWERED
    policy = default_retry()
    assert next_policy(policy, RetryKind.ANSWERED, status=503) is not None
    broken = urllib3.exceptions.ProtocolError("reset")
    assert next_policy(policy, RetryKind.ANSWERED, failure=broken) is None


def test_a_connect_error_is_retried_for_any_request() -> None:
    refused = urllib3.exceptions.NewConnectionError(None, "refused")  # type: ignore[arg-type]
    for kind in RetryKind:
        assert next_policy(default_retry(), kind, failure=refused) is not None


def test_a_host_name_that_did_not_resolve_is_not_retried_for_any_request() -> None:
    unresolved = socket.gaierror(socket.EAI_NONAME, "Name or service not known")
    on_the_wire = urllib3.exceptions.NewConnectionError(None, "failed")  # type: ignore[arg-type]
    on_the_wire.__cause__ = unresolved  # how objsdk's own connections raise it
    by_urllib3 = urllib3.exceptions.NameResolutionError("h.invalid", None, unresolved)  # type: ignore[arg-type]
    through_requests = requests.exceptions.ConnectionError(
        urllib3.exceptions.MaxRetryError(None, "/", reason=by_urllib3)  # type: ignore[arg-type]
    )
    for original in (on_the_wire, by_urllib3, through_requests, unresolved):
        err = errors.ConnectError("cannot reach the server")
        err.__cause__ = original
        failure = network_failure(err)
        assert failure is not None
        for kind in RetryKind:
            assert next_policy(default_retry(), kind, failure=failure) is None, (original, kind)


def test_a_request_that_may_have_left_is_retried_only_when_always_safe() -> None:
    timeout = urllib3.exceptions.ReadTimeoutError(None, "", "timed out")  # type: ignore[arg-type]
    assert next_policy(default_retry(), RetryKind.ALWAYS, failure=timeout) is not None
    assert next_policy(default_retry(), RetryKind.UNSENT, failure=timeout) is None


def test_client_errors_are_never_retried() -> None:
    for status in (400, 403, 404, 409, 412):
        assert next_policy(default_retry(), RetryKind.ALWAYS, status=status, code="X") is None


def test_a_200_carrying_internal_error_is_retried_and_one_carrying_no_such_upload_is_not() -> None:
    assert next_policy(default_retry(), RetryKind.ALWAYS, status=200, code="InternalError")
    assert next_policy(default_retry(), RetryKind.ALWAYS, status=200, code="NoSuchUpload") is None


def test_retries_stop_when_the_policy_is_spent() -> None:
    policy = default_retry(2)
    for _ in range(2):
        nxt = next_policy(policy, RetryKind.ALWAYS, status=503)
        assert nxt is not None
        policy = nxt
    assert next_policy(policy, RetryKind.ALWAYS, status=503) is None


@pytest.mark.parametrize(
    ("status", "code"),
    [(429, "TooManyRequests"), (429, "HTTP429"), (503, "SlowDown"), (503, "SlowDownWrite")],
)
def test_a_throttling_answer_is_retried_for_every_kind_of_request(status: int, code: str) -> None:
    # A throttling answer is a refusal made before the request was acted on: even a POST
    # that is not safe to repeat, or a reader's GET that runs its own resumes, goes again.
    for kind in RetryKind:
        assert next_policy(default_retry(), kind, status=status, code=code) is not None


@pytest.mark.parametrize(("status", "code"), [(503, "ServiceUnavailable"), (500, "InternalError")])
def test_a_server_error_is_not_retried_for_a_request_that_may_not_be_repeated(
    status: int, code: str
) -> None:
    assert next_policy(default_retry(), RetryKind.UNSENT, status=status, code=code) is None
    assert next_policy(default_retry(), RetryKind.ALWAYS, status=status, code=code) is not None


def test_throttled_retries_wait_from_the_first_on_twice_as_long_each_time_up_to_the_cap() -> None:
    policy = default_retry(9)
    for n in range(9):
        nxt = next_policy(policy, RetryKind.ALWAYS, status=429, code="TooManyRequests")
        assert nxt is not None
        policy = nxt
        step = min(0.5 * 2**n, 20.0)  # 0.5 s, 1 s, 2 s... up to backoff_max
        for _ in range(20):  # half the step fixed, half at random
            assert step / 2 <= pause(policy, throttled=True) <= step


def _answered_once(error: errors.S3Error, retry_after: str | None) -> Any:
    """An attempt answered ``error`` (with ``retry_after``) the first time, then "ok"."""
    calls: list[SignedRequest] = []

    def attempt(request: SignedRequest, body: object) -> str:
        calls.append(request)
        if len(calls) == 1:
            raise keep_retry_after(error, {"Retry-After": retry_after} if retry_after else {})
        return "ok"

    return attempt


NOW = datetime(2025, 3, 4, 12, 0, 0, tzinfo=timezone.utc)


@pytest.mark.parametrize(
    ("retry_after", "seconds"),
    [
        ("7", 7.0),
        ("Tue, 04 Mar 2025 12:00:09 GMT", 9.0),  # an HTTP-date, on the signing clock
        ("600", 20.0),  # capped at the policy's backoff_max
        ("Tue, 04 Mar 2025 13:00:00 GMT", 20.0),
    ],
)
def test_retry_after_of_a_server_error_in_seconds_or_as_an_http_date_is_the_wait_up_to_the_cap(
    no_sleep: list[float], retry_after: str, seconds: float
) -> None:
    error = errors.s3_error(503, "ServiceUnavailable", operation="op", bucket="b", key="k")
    pipeline = _pipeline(clock=lambda: NOW)
    assert pipeline.run(
        "GET", _answered_once(error, retry_after), operation="op", bucket="b", key="k"
    )
    assert no_sleep == [seconds]


@pytest.mark.parametrize(
    ("retry_after", "seconds"),
    [
        (None, 7.5),  # the backoff: a first step of 10 s, the jitter at its middle
        ("9", 9.0),  # lengthened to what the server asks
        ("Tue, 04 Mar 2025 12:00:12 GMT", 12.0),  # an HTTP-date, on the signing clock
        ("60", 15.0),  # but to no more than twice the backoff (MinIO asks 60 s of all)
        ("0", 7.5),
        ("soon", 7.5),  # neither a delay nor a date
        ("Tue, 04 Mar 2025 11:59:00 GMT", 7.5),  # in the past
    ],
)
def test_a_throttled_retry_waits_its_backoff_lengthened_to_retry_after_up_to_twice_it(
    no_sleep: list[float], monkeypatch: pytest.MonkeyPatch, retry_after: str, seconds: float
) -> None:
    monkeypatch.setattr("random.random", lambda: 0.5)
    policy = default_retry(3).new(backoff_factor=2.0)  # a first throttled step of 10 s
    pipeline = Pipeline(
        Endpoint.parse(EP), Credentials("AK", "SK"), "us-east-1", policy, None, lambda: NOW
    )
    error = errors.s3_error(429, "TooManyRequests", operation="op", bucket="b", key="k")
    assert pipeline.run(
        "POST", _answered_once(error, retry_after), operation="op", bucket="b", key="k"
    )
    assert no_sleep == [seconds]


def test_every_throttling_answer_is_told_to_the_threads_listener_retried_or_not() -> None:
    heard: list[int] = []
    answers = [
        errors.s3_error(429, "TooManyRequests", operation="op"),
        _slow_down(),
        errors.s3_error(500, "InternalError", operation="op"),
        _slow_down(),
    ]

    def attempt(request: SignedRequest, body: object) -> str:
        raise answers.pop(0)

    with hearing_throttles(lambda: heard.append(len(answers))), pytest.raises(errors.SlowDown):
        _pipeline(retries=3).run("GET", attempt, operation="op", bucket="b", key="k")
    assert heard == [3, 2, 0]  # the 500 is no throttling; the last SlowDown is not retried


@pytest.mark.parametrize(
    ("cause", "kind"),
    [
        (urllib3.exceptions.NewConnectionError(None, "refused"), "connect"),  # type: ignore[arg-type]
        (requests.exceptions.ConnectTimeout("slow connect"), "connect"),
        (ConnectionRefusedError(111, "refused"), "connect"),
        (requests.exceptions.ReadTimeout("slow read"), "read"),
        (TimeoutError("timed out"), "read"),
        (ConnectionResetError(104, "reset"), "read"),
        (
            requests.exceptions.ConnectionError(
                urllib3.exceptions.ProtocolError("aborted", ConnectionResetError(104, "reset"))
            ),
            "read",
        ),
        (requests.exceptions.SSLError("bad certificate"), None),
    ],
)
def test_a_transport_failure_is_sorted_by_its_original_exception(
    cause: BaseException, kind: str | None
) -> None:
    error = errors.TransportError("failed", operation="op")
    error.__cause__ = cause
    found = network_failure(error)
    if kind is None:
        assert found is None
    elif kind == "connect":
        assert isinstance(found, urllib3.exceptions.ConnectTimeoutError)
    else:
        assert isinstance(
            found, (urllib3.exceptions.ReadTimeoutError, urllib3.exceptions.ProtocolError)
        )
        assert not isinstance(found, urllib3.exceptions.ConnectTimeoutError)


# -- the loop ---------------------------------------------------------------------------


def test_each_attempt_is_signed_with_the_clock_at_that_attempt() -> None:
    times = iter(datetime(2025, 1, 1, tzinfo=timezone.utc) + timedelta(minutes=m) for m in range(9))
    seen: list[SignedRequest] = []

    def attempt(request: SignedRequest, body: object) -> str:
        seen.append(request)
        if len(seen) == 1:
            raise _slow_down()
        return "ok"

    assert (
        _pipeline(clock=lambda: next(times)).run(
            "GET", attempt, operation="op", bucket="b", key="k"
        )
        == "ok"
    )
    dates = [r.headers["x-amz-date"] for r in seen]
    assert dates == ["20250101T000000Z", "20250101T000100Z"]
    assert seen[0].headers["Authorization"] != seen[1].headers["Authorization"]


def test_retry_after_of_an_answer_sets_the_pause(no_sleep: list[float]) -> None:
    calls = []
    # A server error, not a throttling answer (whose wait Retry-After only lengthens).
    unavailable = errors.s3_error(503, "ServiceUnavailable", operation="op", bucket="b", key="k")

    def attempt(request: SignedRequest, body: object) -> str:
        calls.append(request)
        if len(calls) == 1:
            raise keep_retry_after(unavailable, {"Retry-After": "3"})
        return "ok"

    _pipeline().run("GET", attempt, operation="op", bucket="b", key="k")
    assert no_sleep == [3.0]


def test_on_retry_is_told_of_each_retried_failure() -> None:
    told: list[errors.ObjsdkError] = []
    failures = [_slow_down(), errors.ConnectError("refused", operation="op")]

    def attempt(request: SignedRequest, body: object) -> str:
        if failures:
            raise failures.pop(0)
        return "ok"

    _pipeline().run(
        "POST",
        attempt,
        operation="op",
        bucket="b",
        key="k",
        params=[("uploads", "")],
        on_retry=told.append,
    )
    assert [type(e) for e in told] == [errors.SlowDown, errors.ConnectError]


def test_each_retry_is_logged_once_with_its_error_and_its_pause(
    caplog: pytest.LogCaptureFixture,
) -> None:
    failures = [errors.ConnectError("cannot reach the server", operation="op", bucket="b")]

    def attempt(request: SignedRequest, body: object) -> str:
        if failures:
            raise failures.pop(0)
        return "ok"

    with caplog.at_level("WARNING", logger="objsdk"):
        _pipeline().run("GET", attempt, operation="op", bucket="b", key=None)
    # The error's own message names the operation, bucket and key; nothing is repeated.
    assert [r.getMessage() for r in caplog.records] == [
        "op: cannot reach the server (bucket 'b'); retrying in 0.00 s (retry 1)"
    ]


def test_a_file_body_is_rewound_before_it_is_sent_again() -> None:
    answers = [MockResponse(503, {}, SLOW_DOWN), MockResponse(200, {"ETag": '"e"'})]
    transport = MockTransport(lambda request: answers.pop(0), retry=default_retry(2))
    body = io.BytesIO(b"skip:payload")
    body.seek(5)
    Client(EP, transport=transport).put_object("b", "k", body)
    assert [r.body for r in transport.requests] == [b"payload", b"payload"]


def test_a_plain_post_is_not_sent_again_after_its_connection_broke(
    rsps: responses.RequestsMock,
) -> None:
    rsps.post(
        f"{EP}/b/k",
        body=requests.exceptions.ConnectionError(
            urllib3.exceptions.ProtocolError("aborted", ConnectionResetError(104, "reset"))
        ),
    )
    with Client(EP, "AK", "SK", retries=3) as client, pytest.raises(objsdk.TransportError):
        client.transport.request("POST", operation="post", bucket="b", key="k")
    assert len(rsps.calls) == 1


def test_a_get_is_sent_again_after_its_connection_broke(rsps: responses.RequestsMock) -> None:
    rsps.get(
        f"{EP}/b/k",
        body=requests.exceptions.ConnectionError(
            urllib3.exceptions.ProtocolError("aborted", ConnectionResetError(104, "reset"))
        ),
    )
    rsps.get(f"{EP}/b/k", body=b"data", auto_calculate_content_length=True)
    with Client(EP, "AK", "SK", retries=3) as client:
        assert client.get_object("b", "k") == b"data"
    assert len(rsps.calls) == 2


def test_a_copy_answered_200_with_internal_error_is_sent_again(
    rsps: responses.RequestsMock,
) -> None:
    error = b"<Error><Code>InternalError</Code><Message>try again</Message></Error>"
    done = (
        b"<CopyObjectResult><ETag>&quot;e&quot;</ETag>"
        b"<LastModified>2025-01-01T00:00:00.000Z</LastModified></CopyObjectResult>"
    )
    rsps.put(f"{EP}/b/dst", body=error)
    rsps.put(f"{EP}/b/dst", body=done)
    with Client(EP, "AK", "SK", retries=3) as client:
        assert client.copy_object("b", "src", "b", "dst").etag == '"e"'
    assert len(rsps.calls) == 2
