"""Range and Content-Range bookkeeping (RFC 9110 §14)."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from objsdk._core.ranges import ContentRange, format_range, parse_content_range


def test_open_ended_range():
    assert format_range(100) == "bytes=100-"


def test_closed_range_is_inclusive():
    assert format_range(0, 9) == "bytes=0-9"


@pytest.mark.parametrize(("start", "end"), [(-1, None), (5, 4)])
def test_invalid_ranges_are_refused(start, end):
    with pytest.raises(ValueError, match="invalid byte range"):
        format_range(start, end)


def test_content_range_parses_first_last_total():
    cr = parse_content_range("bytes 100-199/1000")
    assert cr == ContentRange(100, 199, 1000)
    assert cr.length == 100


def test_content_range_with_unknown_total():
    assert parse_content_range("bytes 0-0/*") == ContentRange(0, 0, None)


@pytest.mark.parametrize(
    "value",
    [None, "", "bytes */1000", "bytes 5-4/10", "bytes 0-10/10", "items 0-1/2", "bytes 1-2"],
)
def test_malformed_or_unsatisfied_content_range_is_none(value):
    assert parse_content_range(value) is None


@given(st.integers(0, 2**50), st.integers(0, 2**40), st.integers(1, 2**40))
def test_content_range_round_trip(first, length, extra):
    last = first + length
    total = last + extra
    assert parse_content_range(f"bytes {first}-{last}/{total}") == ContentRange(first, last, total)
