"""A client's current credentials, refreshed from their source before they expire.

:class:`CredentialProvider` holds the credentials every request of a client is signed
with and fetches new ones (its ``fetch`` function: a credential source, or the user's
``credentials=`` callable) as :class:`~objsdk._core.refresh.RefreshPolicy` says:

* fresh: the credentials are handed out as they are. This is the hot path of every
  request: one clock read and one float comparison against a deadline worked out when
  the credentials arrived;
* advisory window: the first thread to notice refreshes while the others carry on with
  the current credentials, which still work; a failure is logged and the credentials
  are kept (the next attempt waits a little: a source that is down is not asked again
  by every request);
* mandatory window, expired, or none yet: every thread waits for one refresh, and its
  failure is raised (to every waiting thread, for one second, without asking the source
  again);
* credentials already expired when they arrive are fetched once more, then
  :func:`~objsdk._core.refresh.clock_skew_error` is raised.

One refresh runs at a time per provider, shared by the client's threads. A request
refused with ``ExpiredToken`` asks :meth:`CredentialProvider.expired`, which refreshes
at most once for the credentials that were refused (the other requests refused with
the same ones wait for it and use its result). Nothing here logs or shows a secret.
"""

from __future__ import annotations

import copy
import logging
import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from objsdk import errors
from objsdk._core.refresh import (
    DEFAULT_POLICY,
    Arrival,
    RefreshPolicy,
    clock_skew_error,
    on_arrival,
)
from objsdk._core.signing import Credentials, Signer
from objsdk._transport import forks

__all__ = ["EXPIRED_CODES", "CredentialProvider", "renew", "say_signed_with", "says_expired"]

log = logging.getLogger("objsdk")

#: How long a failed blocking refresh is answered with its error without asking the
#: source again.
FAILURE_HOLD = 1.0
#: Credentials refused as expired less than this long after they arrived are not
#: fetched again for that: the source just handed them out, and asking again at once
#: would hand out the same (a clock or a source to fix, not a refresh to repeat).
MIN_FORCED_INTERVAL = 1.0


@dataclass(frozen=True)
class _Held:
    """Credentials and the deadlines (``clock`` seconds) worked out when they arrived."""

    credentials: Credentials
    obtained_at: float
    advisory_at: float
    mandatory_at: float


def _held(credentials: Credentials, now: float, policy: RefreshPolicy) -> _Held:
    expiry = credentials.expiry
    if expiry is None:
        return _Held(credentials, now, math.inf, math.inf)
    obtained = datetime.fromtimestamp(now, timezone.utc)
    advisory, mandatory = policy.windows(expiry - obtained)
    return _Held(
        credentials,
        now,
        (expiry - advisory).timestamp(),
        (expiry - mandatory).timestamp(),
    )


class CredentialProvider:
    """The credentials of one client, fetched by ``fetch()`` (which raises an objsdk
    error naming the source when it cannot) and refreshed per ``policy``. ``label``
    names the source in messages (``profile `ml` (credential_process)``); ``clock``
    is the wall clock in seconds (expiries are wall-clock times)."""

    def __init__(
        self,
        fetch: Callable[[], Credentials],
        label: str,
        *,
        policy: RefreshPolicy = DEFAULT_POLICY,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._fetch = fetch
        self.label = label
        self._policy = policy
        self._clock = clock
        self._lock = threading.Lock()
        self._held_now: _Held | None = None
        # After a failed advisory refresh: when the next may be tried.
        self._next_try = -math.inf
        # After a failed blocking refresh: the error, and until when it is the answer.
        self._failure: BaseException | None = None
        self._failed_until = -math.inf
        #: How many fetches this provider made (refreshes included).
        self.fetches = 0
        forks.register(self)

    def after_fork_in_child(self) -> None:
        # A parent thread may have held the lock at the fork; the credentials stay.
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        held = self._held_now
        key = None if held is None else held.credentials.access_key
        return f"CredentialProvider({self.label}, access_key={key!r})"

    # -- the hot path ----------------------------------------------------------------

    def current(self) -> Credentials:
        """The credentials to sign with now, refreshed first when they are due (see the
        module docstring)."""
        held = self._held_now
        if held is not None and self._clock() < held.advisory_at:
            return held.credentials
        return self._due()

    # -- refreshing ------------------------------------------------------------------

    def _due(self) -> Credentials:
        now = self._clock()
        held = self._held_now
        if held is not None and now < held.mandatory_at:
            # Advisory: whoever gets the lock refreshes; nobody waits for it.
            if now >= self._next_try and self._lock.acquire(blocking=False):
                try:
                    if self._held_now is held:
                        self._advisory_refresh(held)
                finally:
                    self._lock.release()
            current = self._held_now
            assert current is not None
            return current.credentials
        with self._lock:
            held = self._held_now
            now = self._clock()
            if held is not None and now < held.mandatory_at:
                return held.credentials  # another thread refreshed meanwhile
            if self._failure is not None and now < self._failed_until:
                raise copy.copy(self._failure)
            try:
                return self._refresh().credentials
            except Exception as e:
                self._failure, self._failed_until = e, self._clock() + FAILURE_HOLD
                raise

    def _advisory_refresh(self, held: _Held) -> None:
        try:
            self._refresh()
        except Exception as e:
            now = self._clock()
            # Ask again after a third of the time left before the mandatory window
            # (between 1 and 60 s): a source that is down is not asked by every request.
            wait = min(60.0, max(1.0, (held.mandatory_at - now) / 3))
            self._next_try = now + wait
            expiry = held.credentials.expiry
            until = "" if expiry is None else f" (they expire at {expiry:%Y-%m-%dT%H:%M:%SZ})"
            log.warning(
                "refreshing the credentials from %s failed; the current ones are kept%s and "
                "the refresh is tried again in %.0f s: %s",
                self.label,
                until,
                wait,
                e,
            )

    def _refresh(self) -> _Held:
        """Fetch (once more if they arrive expired), install and return the new
        credentials; the caller holds the lock."""
        for attempt in (1, 2):
            self.fetches += 1
            credentials = self._fetch()
            now = self._clock()
            arrived = datetime.fromtimestamp(now, timezone.utc)
            verdict = on_arrival(credentials.expiry, arrived, attempt=attempt)
            if verdict is Arrival.USE:
                held = _held(credentials, now, self._policy)
                self._held_now = held
                self._failure = None
                self._next_try = -math.inf
                log.debug(
                    "credentials from %s: access key %s, expiring %s",
                    self.label,
                    credentials.access_key,
                    "never" if credentials.expiry is None else f"in {_left(credentials, now)}",
                )
                return held
            if verdict is Arrival.CLOCK_SKEW:
                assert credentials.expiry is not None
                raise clock_skew_error(self.label, credentials.expiry, arrived)
            log.debug("credentials from %s arrived expired; fetching once more", self.label)
        raise AssertionError("unreachable")  # pragma: no cover

    def expired(self, access_key: str, session_token: str | None) -> bool:
        """A request signed with these credentials was refused as expired
        (``ExpiredToken``): whether to send it again with :meth:`current`'s. They are
        fetched again if they are still the current ones and did not arrive just now
        (:data:`MIN_FORCED_INTERVAL`); a fetch that fails raises. Threads refused with
        the same credentials share one fetch."""
        with self._lock:
            held = self._held_now
            if held is None:
                return True
            used = (access_key, session_token or None)
            if (held.credentials.access_key, held.credentials.session_token) != used:
                return True  # refreshed since that request was signed
            if self._clock() - held.obtained_at < MIN_FORCED_INTERVAL:
                return False
            log.info("credentials from %s were refused as expired; fetching new ones", self.label)
            fresh = self._refresh().credentials
            return (fresh.access_key, fresh.session_token) != used


def _left(credentials: Credentials, now: float) -> timedelta:
    assert credentials.expiry is not None
    return timedelta(seconds=round(credentials.expiry.timestamp() - now))


# -- what the request pipeline asks (objsdk._transport.pipeline) -------------------------

#: The codes of answers saying the request's credentials expired.
EXPIRED_CODES = frozenset({"ExpiredToken", "ExpiredTokenException", "TokenRefreshRequired"})


def says_expired(e: errors.S3Error, method: str) -> bool:
    """Whether ``e`` may mean the credentials expired: its code says so (S3 answers
    400 or 403), or it is a HEAD's 400, which has no body to say anything."""
    if e.code in EXPIRED_CODES:
        return True
    return method == "HEAD" and e.status == 400 and e.code == "BadRequest"


def renew(signer: Signer, headers: Mapping[str, str], refused: errors.S3Error) -> bool:
    """After ``refused``, an answer saying the credentials of a request sent with
    ``headers`` expired: whether to send it again, with credentials refreshed from
    their source (:meth:`CredentialProvider.expired`; the fetch's error, chained to
    ``refused``, if that fails). Credentials not from a source cannot be refreshed."""
    provider = signer.provider
    if not isinstance(provider, CredentialProvider):
        return False
    lower = {name.lower(): value for name, value in headers.items()}
    credential = lower.get("authorization", "").partition("Credential=")[2]
    try:
        return provider.expired(credential.partition("/")[0], lower.get("x-amz-security-token"))
    except errors.ObjsdkError as e:
        raise e from refused


def say_signed_with(signer: Signer, e: errors.AccessDenied) -> None:
    """Complete ``e``'s message with what its request was signed with: nothing (an
    anonymous client), or credentials from a source (named)."""
    provider = signer.provider
    if provider is None:
        said = "the request was unsigned: this client is anonymous (anonymous=True)"
    elif isinstance(provider, CredentialProvider):
        said = f"the request was signed with credentials from {provider.label}"
    else:
        return
    e.message = f"{e.message.rstrip('.')}; {said}" if e.message else said
    e.args = (e._text(),)
