"""Whether a (re)opened GET continues the same byte stream: pure decisions."""

import pytest

from objsdk._core.continuation import (
    BadResponse,
    Changed,
    Continuation,
    Malformed,
    SizeUnknown,
    check_response,
    is_strong_etag,
    ranged_body,
)
from objsdk._transport.retry import after_failure, resume_policy

ETAG = '"v1"'


def h(**headers: str) -> dict[str, str]:
    return {k.replace("_", "-"): v for k, v in headers.items()}


def test_first_200_pins_etag_and_size():
    cont = check_response(200, h(ETag=ETAG, Content_Length="100"), want=0, etag=None, size=None)
    assert cont == Continuation(start=0, size=100, etag=ETAG)


def test_206_from_exactly_the_next_byte_continues():
    headers = h(ETag=ETAG, Content_Range="bytes 40-99/100", Content_Length="60")
    cont = check_response(206, headers, want=40, etag=ETAG, size=100)
    assert cont == Continuation(start=40, size=100, etag=ETAG)


def test_206_starting_elsewhere_is_refused():
    headers = h(ETag=ETAG, Content_Range="bytes 39-99/100")
    with pytest.raises(BadResponse, match="from 40, got Content-Range from 39"):
        check_response(206, headers, want=40, etag=ETAG, size=100)


def test_206_ending_early_is_refused():
    with pytest.raises(BadResponse, match="ends at 49, not at 99"):
        check_response(206, h(Content_Range="bytes 40-49/100"), want=40, etag=ETAG, size=100)


def test_206_without_content_range_is_refused():
    with pytest.raises(BadResponse, match="Content-Range"):
        check_response(206, h(ETag=ETAG), want=40, etag=ETAG, size=100)


def test_206_whose_length_disagrees_with_content_range_is_refused():
    headers = h(Content_Range="bytes 40-99/100", Content_Length="10")
    with pytest.raises(BadResponse, match="Content-Length"):
        check_response(206, headers, want=40, etag=ETAG, size=100)


def test_206_with_another_total_means_the_object_changed():
    with pytest.raises(Changed, match="size changed from 100 to 120"):
        check_response(206, h(Content_Range="bytes 40-119/120"), want=40, etag=ETAG, size=100)


def test_200_instead_of_206_discards_up_to_the_next_byte():
    cont = check_response(200, h(ETag=ETAG, Content_Length="100"), want=40, etag=ETAG, size=100)
    assert cont.start == 0
    assert cont.discard == 40


def test_200_of_another_size_means_the_object_changed():
    with pytest.raises(Changed):
        check_response(200, h(Content_Length="99"), want=40, etag=ETAG, size=100)


def test_412_means_the_object_changed():
    with pytest.raises(Changed, match="If-Match"):
        check_response(412, {}, want=40, etag=ETAG, size=100)


def test_a_different_etag_means_the_object_changed_even_with_206():
    headers = h(ETag='"v2"', Content_Range="bytes 40-99/100")
    with pytest.raises(Changed, match='"v1" to "v2"'):
        check_response(206, headers, want=40, etag=ETAG, size=100)


def test_416_at_the_end_is_eof():
    cont = check_response(416, h(Content_Range="bytes */100"), want=100, etag=None, size=None)
    assert cont.eof
    assert cont.size == 100


def test_416_without_any_size_asks_the_caller_to_find_out():
    with pytest.raises(SizeUnknown):
        check_response(416, {}, want=10, etag=None, size=None)


def test_416_without_content_range_uses_the_pinned_size():
    assert check_response(416, {}, want=100, etag=ETAG, size=100).eof


def test_416_without_a_size_inside_the_pinned_size_means_the_object_changed():
    # A server that ignored If-Match found nothing at offset 50 of a 100-byte version.
    with pytest.raises(Changed, match="416 for offset 50, inside the pinned size 100"):
        check_response(416, {}, want=50, etag=ETAG, size=100)


def test_416_before_the_end_is_refused():
    with pytest.raises(BadResponse, match="416 for offset 50"):
        check_response(416, h(Content_Range="bytes */100"), want=50, etag=ETAG, size=100)


def test_unexpected_status_is_refused():
    with pytest.raises(BadResponse, match="HTTP 302"):
        check_response(302, {}, want=0, etag=None, size=None)


def test_resume_backoff_starts_at_once_then_doubles_up_to_the_cap():
    policy = resume_policy(10).new(backoff_jitter=0.0)
    delays = []
    for _ in range(8):
        policy = policy.increment(method="GET", error=ConnectionResetError())
        delays.append(policy.get_backoff_time())
    assert delays[0] == 0
    assert delays[1:5] == [0.4, 0.8, 1.6, 3.2]
    assert max(delays) == 5.0


def test_resume_policy_is_exhausted_after_max_resume_plus_one_failures():
    from urllib3.exceptions import MaxRetryError

    policy = resume_policy(2)
    policy = policy.increment(method="GET", error=ConnectionResetError())
    policy = policy.increment(method="GET", error=ConnectionResetError())
    with pytest.raises(MaxRetryError):
        policy.increment(method="GET", error=ConnectionResetError())


def test_a_window_206_must_stop_at_the_window_end():
    headers = h(Content_Range="bytes 40-59/100", Content_Length="20")
    cont = check_response(206, headers, want=40, etag=ETAG, size=100, end=60)
    assert cont.start == 40
    with pytest.raises(BadResponse, match="not at 59"):
        check_response(
            206, h(Content_Range="bytes 40-99/100"), want=40, etag=ETAG, size=100, end=60
        )


def test_a_weak_etag_cannot_pin_with_if_match():
    assert not is_strong_etag('W/"abc"')
    assert not is_strong_etag(None)
    assert is_strong_etag('"abc"')


def test_a_weak_etag_matches_its_strong_form_weakly():
    cont = check_response(
        200, h(ETag='W/"abc"', Content_Length="100"), want=0, etag='"abc"', size=None
    )
    assert cont.size == 100


def test_a_different_last_modified_is_another_version():
    headers = h(Content_Length="100", Last_Modified="Mon, 23 Nov 2026 10:00:01 GMT")
    with pytest.raises(Changed, match="Last-Modified"):
        check_response(
            200, headers, want=0, etag=None, size=100, last_modified="Mon, 23 Nov 2026 10:00:00 GMT"
        )


def test_the_answer_pins_its_last_modified():
    headers = h(Content_Length="100", Last_Modified="Mon, 23 Nov 2026 10:00:00 GMT")
    cont = check_response(200, headers, want=0, etag=None, size=None)
    assert cont.last_modified == "Mon, 23 Nov 2026 10:00:00 GMT"


def test_backoff_still_grows_after_failures_are_recorded():
    policy = resume_policy(5).new(backoff_jitter=0.0)
    sleeps = []
    for _ in range(4):
        nxt = after_failure(policy, OSError("reset"))
        assert nxt is not None
        policy = nxt
        sleeps.append(policy.get_backoff_time())
    assert sleeps == sorted(sleeps)
    assert sleeps[-1] > sleeps[0]


def test_recorded_failures_do_not_keep_the_errors_alive():
    # An error's traceback holds the frames of the read it broke, and so the buffer
    # being read into: a policy kept by the reader must not hold on to it.
    nxt = after_failure(resume_policy(5), OSError("reset"))
    assert nxt is not None
    assert all(h.error is None for h in nxt.history)


def test_after_failure_is_none_once_the_limit_is_spent():
    policy = resume_policy(1)
    nxt = after_failure(policy, OSError("a"))
    assert nxt is not None
    assert after_failure(nxt, OSError("b")) is None


def test_ranged_body_takes_a_206_holding_exactly_the_bytes_asked_for():
    headers = h(Content_Range="bytes 100-199/1024")
    assert ranged_body(206, headers, b"x" * 100, offset=100, length=100) == b"x" * 100


def test_ranged_body_takes_a_206_cut_short_by_the_end_of_the_object():
    headers = h(Content_Range="bytes 1000-1023/1024")
    assert ranged_body(206, headers, b"x" * 24, offset=1000, length=100) == b"x" * 24


@pytest.mark.parametrize(
    ("content_range", "match"),
    [
        ("bytes 0-99/1024", "from 0"),
        ("bytes 100-149/1024", "ends at 149"),
        ("bytes 100-299/1024", "ends at 299"),
        (None, "unusable Content-Range"),
        ("bytes */1024", "unusable Content-Range"),
    ],
)
def test_ranged_body_refuses_a_206_for_other_bytes(content_range, match):
    headers = h(Content_Range=content_range) if content_range else {}
    with pytest.raises(BadResponse, match=match):
        ranged_body(206, headers, b"x" * 100, offset=100, length=100)


def test_ranged_body_refuses_a_206_whose_body_is_not_its_content_range():
    with pytest.raises(BadResponse, match="99 body bytes"):
        ranged_body(206, h(Content_Range="bytes 100-199/*"), b"x" * 99, offset=100, length=100)


def test_ranged_body_refuses_a_206_past_the_window_when_the_size_is_unknown():
    with pytest.raises(BadResponse, match="past 199"):
        ranged_body(206, h(Content_Range="bytes 100-299/*"), b"x" * 200, offset=100, length=100)


def test_ranged_body_slices_a_200_that_ignored_range():
    body = bytes(range(256))
    assert ranged_body(200, {}, body, offset=10, length=5) == body[10:15]
    assert ranged_body(200, {}, body, offset=250, length=None) == body[250:]


@pytest.mark.parametrize("length", [None, 200])
def test_ranged_body_refuses_a_206_cut_short_without_the_object_size(length):
    """``bytes 100-199/*`` may or may not end at the object's end: not proof enough."""
    with pytest.raises(BadResponse, match="without saying the object's size"):
        ranged_body(206, h(Content_Range="bytes 100-199/*"), b"x" * 100, offset=100, length=length)


@pytest.mark.parametrize(
    ("status", "headers"),
    [
        (200, h(Content_Length="-5")),
        (200, h(Content_Length="+5")),
        (206, h(Content_Range="bytes 40-99/100", Content_Length="-60")),
        (206, h(Content_Range="bytes 40-99/-100")),
        (206, h(ETag=ETAG)),
        (416, h(Content_Range="bytes */-5")),
    ],
    ids=[
        "200-negative",
        "200-signed",
        "206-negative-length",
        "206-negative-total",
        "206-none",
        "416",
    ],
)
def test_framing_values_that_are_not_numbers_are_malformed_not_sizes(status, headers):
    """Never a negative size or an end of the object: Malformed, which no resume cures."""
    with pytest.raises(Malformed):
        check_response(status, headers, want=40, etag=None, size=None)
