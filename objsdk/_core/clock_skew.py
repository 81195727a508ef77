"""How far this machine's clock is from the server's, told by an answer's ``Date``.

A SigV4 signature carries the time it was made (``X-Amz-Date``), and S3 refuses one made
more than 15 minutes from its own clock: 403 ``RequestTimeTooSkewed`` (S3 API reference,
"Authenticating Requests (AWS Signature Version 4)": "the request timestamp ... must be
within 15 minutes of the AWS system time"). A refusal without a body (any HEAD) says only
403, which reads as wrong credentials. Every answer carries the server's ``Date``
(RFC 9110 §6.6.1), so a 403 can still say whether the clocks are that far apart.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from email.utils import parsedate_to_datetime

__all__ = ["MAX_SKEW", "clock_skew", "skew_note"]

#: The furthest a request's signing time may be from the server's clock.
MAX_SKEW = timedelta(minutes=15)


def clock_skew(date: str | None, now: datetime) -> timedelta | None:
    """How far ``now`` (the local clock, an aware ``datetime``) is ahead of the server's
    ``date`` (an HTTP ``Date`` value; negative: behind), or None without a readable one."""
    if not date:
        return None
    try:
        server = parsedate_to_datetime(date)
    except (TypeError, ValueError):
        return None
    if server.tzinfo is None:  # "-0000": a time in UTC whose zone is not known (RFC 5322)
        return None
    return now - server


def skew_note(date: str | None, now: datetime) -> tuple[timedelta, str] | None:
    """The skew and what to say of it, when ``now`` is more than :data:`MAX_SKEW` from
    the server's ``date``; None when it is not (or the answer does not say)."""
    skew = clock_skew(date, now)
    if skew is None or abs(skew) <= MAX_SKEW:
        return None
    minutes = round(abs(skew).total_seconds() / 60)
    side = "ahead of" if skew > timedelta(0) else "behind"
    return skew, (
        f"this machine's clock is {minutes} minutes {side} the server's (S3 refuses a "
        f"request signed more than {MAX_SKEW.seconds // 60} minutes off): set the clock "
        "right, for example with NTP"
    )
