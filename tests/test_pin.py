"""``VersionPin``: what ties a reader's requests to one object version (pure)."""

from __future__ import annotations

import pickle
from datetime import datetime, timezone

import pytest

from objsdk import InvalidArgument, ObjectInfo
from objsdk._core.pin import VersionPin, pin_for

ETAG = '"9b2cf535f27731c974343645a3985328"'
DATE = "Mon, 01 Jan 2024 00:00:00 GMT"
INFO = ObjectInfo(
    "bkt",
    "k",
    size=10,
    etag=ETAG,
    last_modified=datetime(2024, 1, 1, tzinfo=timezone.utc),
    version_id="v1",
)


def test_a_head_answer_pins_its_etag_size_version_and_date_as_an_http_date() -> None:
    assert VersionPin.of(INFO) == VersionPin(ETAG, 10, "v1", DATE)


def test_a_get_answer_pins_its_etag_version_and_date_as_sent_and_the_size_it_was_read_as() -> None:
    headers = {"ETag": ETAG, "Last-Modified": "Mon,  1 Jan 2024 00:00:00 GMT"}
    headers["x-amz-version-id"] = "v2"
    pin = VersionPin.from_headers(headers, size=10)
    # The date goes back in If-Unmodified-Since and is compared as received.
    assert pin == VersionPin(ETAG, 10, "v2", "Mon,  1 Jan 2024 00:00:00 GMT")
    assert VersionPin.from_headers({}, size=None) == VersionPin()


def test_a_strong_etag_is_sent_as_if_match_and_nothing_else() -> None:
    assert VersionPin(ETAG, last_modified=DATE).conditions() == {"If-Match": ETAG}


@pytest.mark.parametrize("etag", ['W/"abc"', None])
def test_without_a_strong_etag_the_date_is_sent_as_if_unmodified_since(etag: str | None) -> None:
    pin = VersionPin(etag, 10, last_modified=DATE)
    assert pin.pinned
    assert pin.conditions() == {"If-Unmodified-Since": DATE}


def test_a_weak_etag_alone_pins_nothing_and_sends_no_condition() -> None:
    for pin in (VersionPin('W/"abc"', 10), VersionPin(size=10), VersionPin()):
        assert not pin.pinned
        assert pin.conditions() == {}


def test_a_known_version_is_named_in_the_query() -> None:
    assert VersionPin(version_id="v1").params() == [("versionId", "v1")]
    assert VersionPin(ETAG).params() == []


def test_what_an_answer_pinned_later_answers_never_change() -> None:
    first = VersionPin(ETAG, None, None, DATE)
    later = VersionPin('"other"', 10, "v1", "Tue, 02 Jan 2024 00:00:00 GMT")
    assert first.filled(later) == VersionPin(ETAG, 10, "v1", DATE)
    assert VersionPin(size=0).filled(VersionPin(size=10)).size == 0  # a known 0 is known


def test_a_pin_is_frozen_and_pickles() -> None:
    pin = VersionPin.of(INFO)
    with pytest.raises(AttributeError):
        pin.etag = None  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(pin)) == pin


def test_a_reader_starts_pinned_to_the_head_answer_it_is_given() -> None:
    assert pin_for("bkt", "k", None, INFO) == VersionPin.of(INFO)
    assert pin_for("bkt", "k", "v1", INFO) == VersionPin.of(INFO)
    assert pin_for("bkt", "k", None, None) == VersionPin()


def test_a_version_id_names_the_version_of_a_pin_that_has_none() -> None:
    assert pin_for("bkt", "k", "v9", VersionPin(ETAG)) == VersionPin(ETAG, version_id="v9")


def test_a_head_answer_for_another_object_is_refused_naming_both() -> None:
    with pytest.raises(InvalidArgument, match=r"bucket 'bkt', key 'k'.*key 'other'"):
        pin_for("bkt", "other", None, INFO)


def test_a_version_id_other_than_the_pinned_version_is_refused_naming_both() -> None:
    with pytest.raises(InvalidArgument, match=r"'v2' is not the pinned version 'v1'.*key 'k'"):
        pin_for("bkt", "k", "v2", INFO)


def test_a_pin_that_is_no_head_answer_is_refused_naming_its_type() -> None:
    with pytest.raises(InvalidArgument, match="ObjectInfo head_object returned, got dict"):
        pin_for("bkt", "k", None, {"ETag": ETAG})  # type: ignore[arg-type]
