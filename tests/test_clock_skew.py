"""A clock too far off, told from a 403's ``Date``: past S3's 15 minutes, the refusal
says how far the local clock is off and which way, whatever the request (a HEAD's 403 has
no text of its own); within them, or without a readable ``Date``, it says nothing more.
The same under a real shifted clock (``faketime``) against MinIO is in
test_clock_skew_minio.py."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from email.utils import format_datetime

import pytest

from objsdk import errors
from objsdk._core.addressing import Endpoint
from objsdk._core.clock_skew import MAX_SKEW, clock_skew, skew_note
from objsdk._core.signing import Credentials
from objsdk._transport.pipeline import Pipeline, SignedRequest
from objsdk._transport.refusal import refusal
from objsdk._transport.retry import default_retry

NOW = datetime(2025, 3, 1, 12, 0, tzinfo=timezone.utc)


def _date(at: datetime) -> str:
    """``at`` as an HTTP Date header writes it (RFC 9110 §5.6.7, IMF-fixdate)."""
    return format_datetime(at, usegmt=True)


def test_the_skew_is_how_far_the_local_clock_is_ahead_of_the_server_s_date() -> None:
    assert clock_skew(_date(NOW - timedelta(minutes=20)), NOW) == timedelta(minutes=20)
    assert clock_skew(_date(NOW + timedelta(minutes=20)), NOW) == -timedelta(minutes=20)
    assert clock_skew("Sat, 01 Mar 2025 11:40:00 GMT", NOW) == timedelta(minutes=20)


@pytest.mark.parametrize(
    ("server_behind", "says"),
    [
        (timedelta(minutes=20), "this machine's clock is 20 minutes ahead of the server's"),
        (-timedelta(minutes=20), "this machine's clock is 20 minutes behind the server's"),
        (timedelta(hours=3, minutes=1), "is 181 minutes ahead of"),
        (MAX_SKEW + timedelta(seconds=31), "is 16 minutes ahead of"),
    ],
)
def test_past_15_minutes_the_note_says_how_far_and_which_way(
    server_behind: timedelta, says: str
) -> None:
    noted = skew_note(_date(NOW - server_behind), NOW)
    assert noted is not None
    skew, note = noted
    assert skew == server_behind
    assert says in note
    assert "15 minutes" in note


@pytest.mark.parametrize(
    "date",
    [
        _date(NOW),
        _date(NOW - timedelta(minutes=14)),
        _date(NOW + MAX_SKEW),
        None,
        "",
        "yesterday",
        "Sat, 01 Mar 2025 11:40:00 -0000",  # a time whose zone is unknown
    ],
    ids=["same", "14 min", "exactly 15 min", "no Date", "empty", "unreadable", "no zone"],
)
def test_within_15_minutes_or_without_a_readable_date_there_is_no_note(date: str | None) -> None:
    assert skew_note(date, NOW) is None


def _refused_with(date: str, *, method: str, body: bytes = b"") -> errors.S3Error:
    """What a pipeline whose clock reads NOW raises when the server refuses with 403
    and ``date``."""

    def attempt(request: SignedRequest, _: object) -> None:
        raise refusal(403, {"Date": date}, body, "head_object", "b", "k")

    pipeline = Pipeline(
        Endpoint.parse("http://s3.test:9000"),
        Credentials("AK", "SK"),
        "us-east-1",
        default_retry(0),
        clock=lambda: NOW,
    )
    with pytest.raises(errors.S3Error) as info:
        pipeline.run(method, attempt, operation="head_object", bucket="b", key="k")
    return info.value


def test_a_head_refused_without_a_body_says_the_clock_is_off() -> None:
    # Before: "head_object: AccessDenied (HTTP 403) (bucket 'b', key 'k')", which reads
    # as wrong credentials.
    err = _refused_with(_date(NOW + timedelta(minutes=20)), method="HEAD")
    assert isinstance(err, errors.AccessDenied)
    assert err.clock_skew == -timedelta(minutes=20)
    assert str(err).startswith("head_object: AccessDenied (HTTP 403) (bucket 'b', key 'k'): ")
    assert "this machine's clock is 20 minutes behind the server's" in str(err)


def test_a_request_time_too_skewed_answer_keeps_the_server_s_text_and_says_how_far() -> None:
    body = (
        b"<Error><Code>RequestTimeTooSkewed</Code><Message>The difference between the "
        b"request time and the current time is too large.</Message></Error>"
    )
    err = _refused_with(_date(NOW - timedelta(minutes=20)), method="GET", body=body)
    assert isinstance(err, errors.AccessDenied)
    assert err.code == "RequestTimeTooSkewed"
    assert err.message.startswith("The difference between the request time")
    assert "this machine's clock is 20 minutes ahead of the server's" in err.message
    assert err.message in str(err)


def test_a_403_with_the_clocks_close_says_nothing_of_the_clock() -> None:
    err = _refused_with(_date(NOW - timedelta(minutes=2)), method="HEAD")
    assert err.clock_skew is None
    assert str(err) == "head_object: AccessDenied (HTTP 403) (bucket 'b', key 'k')"
