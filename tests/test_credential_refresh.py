"""When temporary credentials are refreshed: the expiry a ``Credentials`` carries, the
advisory and mandatory windows (botocore's 15 and 10 minutes, shrunk for short
lifetimes), credentials that arrive already expired, and the expiry formats the
sources write. Pure: every clock is an argument."""

from __future__ import annotations

import pickle
from datetime import datetime, timedelta, timezone

import pytest

from objsdk._core.refresh import (
    DEFAULT_POLICY,
    Arrival,
    RefreshPolicy,
    Stage,
    clock_skew_error,
    on_arrival,
    parse_expiration,
)
from objsdk._core.signing import Credentials
from objsdk.errors import ConfigError, InvalidArgument

NOW = datetime(2024, 5, 1, 12, 0, 0, tzinfo=timezone.utc)
MIN = timedelta(minutes=1)
SEC = timedelta(seconds=1)


# --- Credentials.expiry -------------------------------------------------------------------


def test_credentials_without_expiry_never_expire_nor_need_refresh():
    creds = Credentials("AKID", "SECRET")
    assert creds.expiry is None
    assert not creds.expired(NOW + timedelta(days=10_000))
    assert not creds.needs_refresh(NOW)
    assert creds.stage(NOW) is Stage.FRESH


def test_existing_positional_construction_still_works():
    creds = Credentials("AKID", "SECRET", "TOKEN")
    assert (creds.access_key, creds.secret_key, creds.session_token) == ("AKID", "SECRET", "TOKEN")


def test_expiry_is_stored_in_utc_whatever_zone_it_was_given_in():
    paris = timezone(timedelta(hours=2))
    creds = Credentials("AKID", "SECRET", expiry=datetime(2024, 5, 1, 14, 0, tzinfo=paris))
    assert creds.expiry == NOW
    assert creds.expiry is not None
    assert creds.expiry.tzinfo is timezone.utc


def test_a_naive_expiry_is_refused():
    with pytest.raises(InvalidArgument, match="expiry"):
        Credentials("AKID", "SECRET", expiry=datetime(2024, 5, 1, 12, 0))


def test_expired_from_the_expiry_instant_on():
    creds = Credentials("AKID", "SECRET", expiry=NOW)
    assert not creds.expired(NOW - SEC)
    assert creds.expired(NOW)
    assert creds.expired(NOW + SEC)


def test_expired_refuses_a_naive_now():
    with pytest.raises(InvalidArgument, match="now"):
        Credentials("AKID", "SECRET", expiry=NOW).expired(datetime(2024, 5, 1))


def test_repr_shows_the_expiry_but_hides_secret_and_token():
    text = repr(Credentials("AKIDVISIBLE", "s3cr3t-value", "t0k3n-value", NOW))
    assert "AKIDVISIBLE" in text
    assert "2024" in text
    assert "s3cr3t-value" not in text
    assert "t0k3n-value" not in text
    assert "s3cr3t-value" not in str(Credentials("AKID", "s3cr3t-value", "t0k3n-value", NOW))


def test_credentials_with_expiry_compare_and_pickle_as_values():
    creds = Credentials("AKID", "SECRET", "TOKEN", NOW)
    assert pickle.loads(pickle.dumps(creds)) == creds
    assert creds != Credentials("AKID", "SECRET", "TOKEN", NOW + SEC)


def test_needs_refresh_follows_the_policy_stage():
    creds = Credentials("AKID", "SECRET", expiry=NOW + timedelta(hours=1))
    assert not creds.needs_refresh(NOW)
    assert creds.needs_refresh(NOW + timedelta(minutes=46))
    assert creds.stage(NOW + timedelta(minutes=46)) is Stage.ADVISORY


# --- the windows ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("left", "stage"),
    [
        (timedelta(hours=1), Stage.FRESH),
        (15 * MIN + SEC, Stage.FRESH),
        (15 * MIN, Stage.ADVISORY),
        (10 * MIN + SEC, Stage.ADVISORY),
        (10 * MIN, Stage.MANDATORY),
        (SEC, Stage.MANDATORY),
        (timedelta(0), Stage.EXPIRED),
        (-MIN, Stage.EXPIRED),
    ],
)
def test_long_lived_credentials_use_botocores_15_and_10_minute_windows(left, stage):
    obtained = NOW - timedelta(hours=5)  # six hours of life: the fixed windows apply
    assert DEFAULT_POLICY.stage(NOW + left, NOW, obtained=obtained) is stage


def test_without_the_arrival_time_the_fixed_windows_apply():
    # botocore's behaviour: 20-second credentials are always within the windows.
    assert DEFAULT_POLICY.stage(NOW + 20 * SEC, NOW) is Stage.MANDATORY
    assert DEFAULT_POLICY.stage(NOW + 12 * MIN, NOW) is Stage.ADVISORY


def test_twenty_second_credentials_are_used_for_half_their_life_before_a_refresh():
    obtained = NOW
    expiry = NOW + 20 * SEC
    assert DEFAULT_POLICY.stage(expiry, NOW, obtained=obtained) is Stage.FRESH
    assert DEFAULT_POLICY.stage(expiry, NOW + 9 * SEC, obtained=obtained) is Stage.FRESH
    assert DEFAULT_POLICY.stage(expiry, NOW + 10 * SEC, obtained=obtained) is Stage.ADVISORY
    assert DEFAULT_POLICY.stage(expiry, NOW + 13 * SEC, obtained=obtained) is Stage.ADVISORY
    assert DEFAULT_POLICY.stage(expiry, NOW + 14 * SEC, obtained=obtained) is Stage.MANDATORY
    assert DEFAULT_POLICY.stage(expiry, NOW + 20 * SEC, obtained=obtained) is Stage.EXPIRED


def test_fifteen_minute_sts_credentials_are_not_refreshed_on_arrival():
    # DurationSeconds=900, STS's minimum: a fixed 15-minute window would refresh at once.
    expiry = NOW + 15 * MIN
    assert DEFAULT_POLICY.stage(expiry, NOW, obtained=NOW) is Stage.FRESH
    assert DEFAULT_POLICY.windows(15 * MIN) == (7.5 * MIN, 5 * MIN)


@pytest.mark.parametrize("lifetime", [SEC, 20 * SEC, 15 * MIN, 30 * MIN, timedelta(hours=12)])
def test_windows_never_exceed_botocores_and_mandatory_is_within_advisory(lifetime):
    advisory, mandatory = DEFAULT_POLICY.windows(lifetime)
    assert timedelta(0) < mandatory < advisory <= 15 * MIN
    assert mandatory <= 10 * MIN
    assert advisory <= lifetime / 2


def test_from_thirty_minutes_of_life_the_windows_are_botocores():
    assert DEFAULT_POLICY.windows(30 * MIN) == (15 * MIN, 10 * MIN)
    assert DEFAULT_POLICY.windows(None) == (15 * MIN, 10 * MIN)


def test_refresh_at_is_when_the_advisory_window_opens():
    assert DEFAULT_POLICY.refresh_at(None) is None
    assert DEFAULT_POLICY.refresh_at(NOW + timedelta(hours=1)) == NOW + 45 * MIN
    assert DEFAULT_POLICY.refresh_at(NOW + 20 * SEC, obtained=NOW) == NOW + 10 * SEC


def test_a_policy_with_mandatory_wider_than_advisory_is_refused():
    with pytest.raises(InvalidArgument, match="mandatory"):
        RefreshPolicy(advisory=MIN, mandatory=2 * MIN)
    with pytest.raises(InvalidArgument, match="share"):
        RefreshPolicy(advisory_share=0.2, mandatory_share=0.3)


def test_a_custom_policy_changes_the_stage():
    policy = RefreshPolicy(advisory=2 * MIN, mandatory=MIN)
    creds = Credentials("AKID", "SECRET", expiry=NOW + 5 * MIN)
    assert creds.stage(NOW, policy=policy) is Stage.FRESH
    assert creds.stage(NOW + 3 * MIN + SEC, policy=policy) is Stage.ADVISORY


def test_stage_refuses_naive_times():
    with pytest.raises(InvalidArgument, match="obtained"):
        DEFAULT_POLICY.stage(NOW, NOW, obtained=datetime(2024, 5, 1))


# --- credentials that arrive expired ------------------------------------------------------------


def test_fresh_credentials_and_those_without_expiry_are_used():
    assert on_arrival(NOW + SEC, NOW, attempt=1) is Arrival.USE
    assert on_arrival(None, NOW, attempt=1) is Arrival.USE


def test_credentials_expired_on_arrival_are_fetched_once_more_then_blamed_on_the_clock():
    assert on_arrival(NOW, NOW, attempt=1) is Arrival.FETCH_AGAIN
    assert on_arrival(NOW - MIN, NOW, attempt=2) is Arrival.CLOCK_SKEW
    assert on_arrival(NOW + MIN, NOW, attempt=2) is Arrival.USE


def test_the_clock_skew_error_names_the_source_the_times_and_the_fix():
    error = clock_skew_error("profile `ml` (credential_process)", NOW - 5 * MIN, NOW)
    assert isinstance(error, ConfigError)
    text = str(error)
    assert "profile `ml` (credential_process)" in text
    assert "2024-05-01T11:55:00Z" in text
    assert "2024-05-01T12:00:00Z" in text
    assert "300 s" in text
    assert "clock" in text
    assert "NTP" in text


# --- expiry formats -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024-05-01T12:00:00Z", NOW),  # IMDS, container endpoints, credential_process
        ("2024-05-01T12:00:00.000Z", NOW),  # STS
        ("2024-05-01T12:00:00UTC", NOW),  # old aws CLI SSO caches
        ("2024-05-01T12:00:00+00:00", NOW),  # isoformat()
        ("2024-05-01T14:00:00+02:00", NOW),
        ("2024-05-01T07:00:00-0500", NOW),
        ("2024-05-01T12:00:00", NOW),  # no zone: UTC, as AWS always means
        ("2024-05-01 12:00:00Z", NOW),
        ("2024-05-01T12:00:00.1234567Z", NOW + timedelta(microseconds=123456)),
        ("2024-05-01T12:00:00.5z", NOW + timedelta(milliseconds=500)),
    ],
)
def test_expirations_in_every_format_the_sources_write(text, expected):
    parsed = parse_expiration(text)
    assert parsed == expected
    assert parsed.tzinfo is timezone.utc


@pytest.mark.parametrize("text", ["", "tomorrow", "2024-13-01T00:00:00Z", "1714564800", None, 5])
def test_a_malformed_expiration_is_a_value_error(text):
    with pytest.raises(ValueError):  # noqa: PT011 - the callers wrap it with the source's name
        parse_expiration(text)
