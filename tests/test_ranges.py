"""Range and Content-Range bookkeeping (RFC 9110 §14)."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from objsdk._core.ranges import (
    ContentRange,
    format_range,
    parse_content_length,
    parse_content_range,
    parse_unsatisfied_range,
)


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


@pytest.mark.parametrize(("value", "expected"), [(None, None), ("0", 0), ("0042", 42)])
def test_content_length_is_digits(value, expected):
    assert parse_content_length(value) == expected


@pytest.mark.parametrize("value", ["-5", "+5", " 5", "5 ", "5_0", "5, 5", "0x10", "²", ""])
def test_content_length_that_is_not_digits_is_refused(value):
    """RFC 9110 §8.6: 1*DIGIT. int() would take several of these."""
    with pytest.raises(ValueError, match="not a byte count"):
        parse_content_length(value)


def test_unsatisfied_range_states_the_size_or_nothing():
    assert parse_unsatisfied_range("bytes */1024") == 1024
    assert parse_unsatisfied_range(None) is None


@pytest.mark.parametrize("value", ["bytes */-5", "bytes */+0", "bytes */0x10", "bytes 0-1/2", ""])
def test_unsatisfied_range_that_states_no_size_is_refused(value):
    with pytest.raises(ValueError, match="unusable Content-Range"):
        parse_unsatisfied_range(value)


def test_content_range_positions_are_ascii_digits():
    assert parse_content_range("bytes 0-1/²") is None


@pytest.mark.parametrize("digits", [20, 5000])  # int() refuses past 4300 on its own
def test_a_length_or_position_of_more_digits_than_a_64_bit_count_is_refused(digits):
    """RFC 9110 §8.6: large numerals must not become parsing errors of their own."""
    many = "9" * digits
    assert parse_content_length("9" * 19) == int("9" * 19)
    with pytest.raises(ValueError, match="not a byte count"):
        parse_content_length(many)
    assert parse_content_range(f"bytes 0-1/{many}") is None
    assert parse_content_range(f"bytes {many}-{many}/*") is None
    with pytest.raises(ValueError, match="unusable Content-Range"):
        parse_unsatisfied_range(f"bytes */{many}")
