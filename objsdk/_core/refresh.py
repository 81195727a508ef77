"""When temporary credentials expire and when to fetch new ones, as pure decisions.

Credentials from STS, SSO, a container endpoint, the instance metadata service or a
``credential_process`` carry an expiry. A client keeps using them until a window before
that expiry, then fetches new ones. Two windows, as in botocore's
``RefreshableCredentials``:

* **advisory** (15 minutes before expiry): one caller refreshes while the others carry
  on with the current credentials; if the refresh fails, they are kept (they still work).
* **mandatory** (10 minutes before expiry): every caller waits for the refresh, and its
  failure is raised: the credentials are about to stop working.

Fixed windows assume credentials that live much longer than 15 minutes. STS hands out
credentials for as little as 15 minutes (``DurationSeconds=900``), a test or a
``credential_process`` may hand out 20 seconds: with a fixed 15-minute window those are
in the advisory window the moment they arrive and a refresh would be attempted before
every request. So the windows shrink with the lifetime the credentials arrived with
(``expiry - obtained``): advisory is ``min(15 min, lifetime / 2)`` and mandatory
``min(10 min, lifetime / 3)``. Credentials are therefore used for at least half of
their life before anyone refreshes (at most two fetches per lifetime instead of one per
request), the advisory stretch ``lifetime / 6`` gives one caller time to refresh
without holding the others up, and the last third is the margin for the blocking fetch
and for clock differences. From a lifetime of 30 minutes up, the windows are botocore's.

Every function takes the current time as an argument (an aware ``datetime``); nothing
here reads a clock or sleeps.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from ..errors import ConfigError, InvalidArgument

__all__ = [
    "DEFAULT_POLICY",
    "Arrival",
    "RefreshPolicy",
    "Stage",
    "clock_skew_error",
    "on_arrival",
    "parse_expiration",
    "utc",
]

# botocore: _DEFAULT_ADVISORY_REFRESH_TIMEOUT and _DEFAULT_MANDATORY_REFRESH_TIMEOUT.
ADVISORY_WINDOW = timedelta(minutes=15)
MANDATORY_WINDOW = timedelta(minutes=10)


def utc(when: datetime, name: str = "now") -> datetime:
    """``when`` in UTC; :class:`InvalidArgument` naming ``name`` if it is naive (a naive
    time says nothing about which instant it is)."""
    if not isinstance(when, datetime) or when.tzinfo is None or when.utcoffset() is None:
        raise InvalidArgument(f"{name} must be a timezone-aware datetime, got {when!r}")
    return when if when.tzinfo is timezone.utc else when.astimezone(timezone.utc)


class Stage(enum.Enum):
    """Where credentials stand relative to their expiry (:meth:`RefreshPolicy.stage`)."""

    #: Use them; no refresh is due.
    FRESH = "fresh"
    #: Refresh if no other caller is refreshing; on failure keep using these.
    ADVISORY = "advisory"
    #: Refresh before use, every caller waiting for it; a failure is raised.
    MANDATORY = "mandatory"
    #: They no longer work: refresh, and raise if that fails.
    EXPIRED = "expired"


@dataclass(frozen=True)
class RefreshPolicy:
    """The refresh windows (see the module docstring): ``advisory`` and ``mandatory``
    before expiry, each at most ``advisory_share`` / ``mandatory_share`` of the lifetime
    the credentials arrived with. :data:`DEFAULT_POLICY` is botocore's windows with the
    shares 1/2 and 1/3."""

    advisory: timedelta = ADVISORY_WINDOW
    mandatory: timedelta = MANDATORY_WINDOW
    advisory_share: float = 1 / 2
    mandatory_share: float = 1 / 3

    def __post_init__(self) -> None:
        if not timedelta(0) <= self.mandatory <= self.advisory:
            raise InvalidArgument(
                "the refresh windows must satisfy 0 <= mandatory <= advisory, got "
                f"mandatory={self.mandatory}, advisory={self.advisory}"
            )
        if not 0 < self.mandatory_share <= self.advisory_share < 1:
            raise InvalidArgument(
                "the lifetime shares must satisfy 0 < mandatory_share <= advisory_share < 1, "
                f"got mandatory_share={self.mandatory_share}, "
                f"advisory_share={self.advisory_share}"
            )

    def windows(self, lifetime: timedelta | None) -> tuple[timedelta, timedelta]:
        """``(advisory, mandatory)`` for credentials that arrived with ``lifetime`` left
        (None: unknown, the fixed windows)."""
        if lifetime is None:
            return self.advisory, self.mandatory
        lifetime = max(lifetime, timedelta(0))
        return (
            min(self.advisory, lifetime * self.advisory_share),
            min(self.mandatory, lifetime * self.mandatory_share),
        )

    def stage(
        self, expiry: datetime | None, now: datetime, *, obtained: datetime | None = None
    ) -> Stage:
        """Where credentials expiring at ``expiry`` (None: never) stand at ``now``.

        ``obtained`` is when they arrived: the windows scale with ``expiry - obtained``;
        without it the fixed windows apply (botocore's behaviour). Expired means
        ``now >= expiry``."""
        if expiry is None:
            return Stage.FRESH
        expiry, now = utc(expiry, "expiry"), utc(now)
        lifetime = None if obtained is None else expiry - utc(obtained, "obtained")
        advisory, mandatory = self.windows(lifetime)
        left = expiry - now
        if left <= timedelta(0):
            return Stage.EXPIRED
        if left <= mandatory:
            return Stage.MANDATORY
        if left <= advisory:
            return Stage.ADVISORY
        return Stage.FRESH

    def refresh_at(
        self, expiry: datetime | None, obtained: datetime | None = None
    ) -> datetime | None:
        """When the advisory window of credentials expiring at ``expiry`` opens (None:
        never), for scheduling a refresh or saying when one is due."""
        if expiry is None:
            return None
        expiry = utc(expiry, "expiry")
        lifetime = None if obtained is None else expiry - utc(obtained, "obtained")
        return expiry - self.windows(lifetime)[0]


#: botocore's windows (15 and 10 minutes), shrunk for short lifetimes.
DEFAULT_POLICY = RefreshPolicy()


class Arrival(enum.Enum):
    """What to do with credentials just fetched (:func:`on_arrival`)."""

    #: Use them.
    USE = "use"
    #: They were expired when they arrived: fetch once more.
    FETCH_AGAIN = "fetch again"
    #: Expired on arrival twice: the clocks disagree; raise :func:`clock_skew_error`.
    CLOCK_SKEW = "clock skew"


def on_arrival(expiry: datetime | None, now: datetime, *, attempt: int) -> Arrival:
    """The verdict on credentials just fetched (``attempt`` 1 for the first fetch of
    this refresh, 2 for the one :attr:`Arrival.FETCH_AGAIN` asked for).

    Credentials that are already expired when they arrive are most often a source that
    handed out its cached set a moment too late, which one more fetch cures; if the
    second set is expired too, the source and this machine disagree about the time
    (botocore raises "refreshed credentials are still expired" at once)."""
    if expiry is None or utc(expiry, "expiry") > utc(now):
        return Arrival.USE
    if attempt <= 1:
        return Arrival.FETCH_AGAIN
    return Arrival.CLOCK_SKEW


def clock_skew_error(source: str, expiry: datetime, now: datetime) -> ConfigError:
    """The error for :attr:`Arrival.CLOCK_SKEW`: ``source`` (a source's ``describe()``)
    twice handed out credentials already expired by this machine's clock."""
    expiry, now = utc(expiry, "expiry"), utc(now)
    late = now - expiry
    return ConfigError(
        f"credentials from {source} expired at {expiry:%Y-%m-%dT%H:%M:%SZ}, "
        f"{late.total_seconds():.0f} s before they arrived by this machine's clock "
        f"({now:%Y-%m-%dT%H:%M:%SZ}), twice: this machine's clock looks fast (check "
        "that it is synchronised, e.g. with NTP), or the source hands out stale credentials"
    )


# ISO 8601 as the credential sources write it: "2024-01-02T03:04:05Z" (IMDS, container
# endpoints, credential_process), "...05.123Z" (STS), "...05UTC" (old aws CLI SSO
# caches), "...05+00:00" (Python's isoformat). Python 3.10's fromisoformat reads none
# of "Z", "UTC" or fractions other than 3 or 6 digits, hence this pattern.
_ISO8601 = re.compile(
    r"(?P<date>\d{4}-\d{2}-\d{2})[T ](?P<time>\d{2}:\d{2}:\d{2})(?:[.,](?P<frac>\d+))?"
    r"\s*(?P<zone>Z|UTC|GMT|[+-]\d{2}:?\d{2})?",
    re.IGNORECASE,
)


def parse_expiration(text: object) -> datetime:
    """An expiry as the sources write it (ISO 8601, ``Z``, ``UTC`` or an offset; none:
    UTC, which every AWS source means) → an aware UTC datetime. ValueError if it is not
    one: the caller names the source in its own error."""
    if not isinstance(text, str):
        raise ValueError(f"an expiration must be an ISO 8601 string, got {type(text).__name__}")
    found = _ISO8601.fullmatch(text.strip())
    if found is None:
        raise ValueError(f"{text[:40]!r} is not an ISO 8601 time")
    micro = (found["frac"] or "").ljust(6, "0")[:6]
    zone = (found["zone"] or "Z").upper()
    if zone in ("Z", "UTC", "GMT"):
        offset = "+00:00"
    else:
        offset = zone if ":" in zone else f"{zone[:3]}:{zone[3:]}"
    parsed = datetime.fromisoformat(f"{found['date']}T{found['time']}.{micro}{offset}")
    return parsed.astimezone(timezone.utc)
