"""The retry policy: urllib3's ``Retry``, configured for S3.

urllib3 already does the hard parts (counting, exponential backoff with jitter,
``Retry-After``, rewinding a file body before re-sending it, and refusing to re-send a
non-idempotent request whose bytes may have reached the server). This module only
chooses S3's settings, caps ``Retry-After``, and counts broken attempts for callers that
adapt to a network that breaks connections. Like ``Retry`` itself, a policy is an
immutable value: each attempt derives a new one.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from urllib3.exceptions import MaxRetryError, ProtocolError, ReadTimeoutError
from urllib3.util.retry import Retry

from objsdk import errors

if TYPE_CHECKING:
    from types import TracebackType

    from typing_extensions import Self
    from urllib3.connectionpool import ConnectionPool
    from urllib3.response import BaseHTTPResponse

__all__ = [
    "IDEMPOTENT_METHODS",
    "IDEMPOTENT_POSTS",
    "RETRY_STATUSES",
    "Failures",
    "Policy",
    "S3Retry",
    "after_failure",
    "counting_failures",
    "default_retry",
    "is_idempotent",
    "make_retry",
    "resume_policy",
]

# What the layers above hold without knowing it is urllib3's.
Policy = Retry

# POST (CreateMultipartUpload, CompleteMultipartUpload, DeleteObjects) is left out:
# urllib3 re-sends those only when the request provably never left (connect errors).
IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})

# POSTs that are safe to send again, by the query parameter that names the operation:
# DeleteObjects (``?delete``): deleting a key that is already gone is a no-op, and the
# answer lists the same keys deleted (S3 API reference, DeleteObjects).
# CompleteMultipartUpload (``?uploadId``): documented as safe to retry with the same
# upload id and part list; a retry that finds the upload gone is settled by the caller.
IDEMPOTENT_POSTS = frozenset({"delete", "uploadId"})

# S3 asks for a retry with 500 InternalError, 503 SlowDown/ServiceUnavailable; 502/504
# come from proxies and load balancers in front of it ("Error best practices", S3 docs).
RETRY_STATUSES = frozenset({500, 502, 503, 504})


class Failures:
    """How many attempts broke on their connection while counted (see
    :func:`counting_failures`)."""

    __slots__ = ("_on_failure", "count")

    def __init__(self, on_failure: Callable[[], None] | None = None) -> None:
        self.count = 0
        self._on_failure = on_failure

    def add(self) -> None:
        self.count += 1
        if self._on_failure is not None:
            self._on_failure()


_counting = threading.local()


@contextmanager
def counting_failures(on_failure: Callable[[], None] | None = None) -> Iterator[Failures]:
    """Count the attempts of this thread's requests that broke after the request was
    under way (a reset, a cut, a read timeout: what ``Retry`` calls a read error, as
    opposed to a failed connect or an error answer) until the block ends, calling
    ``on_failure()`` at each, before the request is sent again. Counted by
    :class:`S3Retry`, the policy ``Client`` makes; a ``Retry`` of the caller's own
    counts nothing."""
    outer = getattr(_counting, "failures", None)
    failures = _counting.failures = Failures(on_failure)
    try:
        yield failures
    finally:
        _counting.failures = outer


class S3Retry(Retry):
    """``Retry`` that never sleeps longer than ``backoff_max``, even if ``Retry-After``
    asks, and counts broken attempts for :func:`counting_failures`."""

    def parse_retry_after(self, retry_after: str) -> float:
        return min(super().parse_retry_after(retry_after), self.backoff_max)

    def increment(
        self,
        method: str | None = None,
        url: str | None = None,
        response: BaseHTTPResponse | None = None,
        error: Exception | None = None,
        _pool: ConnectionPool | None = None,
        _stacktrace: TracebackType | None = None,
    ) -> Self:
        failures: Failures | None = getattr(_counting, "failures", None)
        if failures is not None and isinstance(error, (ProtocolError, ReadTimeoutError)):
            failures.add()
        return super().increment(method, url, response, error, _pool, _stacktrace)


def default_retry(total: int = 5) -> S3Retry:
    """The policy ``Client`` uses unless told otherwise: ``total`` retries, 0.1 s → 20 s backoff."""
    return S3Retry(
        total=total,
        connect=total,
        read=min(total, 2),
        status=total,
        other=0,
        redirect=0,
        allowed_methods=IDEMPOTENT_METHODS,
        status_forcelist=RETRY_STATUSES,
        backoff_factor=0.1,
        backoff_max=20.0,
        backoff_jitter=0.1,
        respect_retry_after_header=True,
        # Hand the last error response back so the client can raise a proper S3Error
        # (SlowDown, InternalError) instead of urllib3's MaxRetryError.
        raise_on_status=False,
        raise_on_redirect=False,
    )


def make_retry(retries: int | Retry | None) -> Retry:
    """Normalise the ``retries`` argument of ``Client``: a count, a ``Retry``, or None (0)."""
    if retries is None:
        return default_retry(0)
    if isinstance(retries, Retry):
        return retries
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise errors.InvalidArgument(
            f"retries must be a non-negative int or a urllib3 Retry, got {retries!r}"
        )
    return default_retry(retries)


def resume_policy(max_resume: int) -> Retry:
    """The backoff between resume attempts of a broken read: first at once, then 0.2 s
    doubling to 5 s, with jitter; at most ``max_resume`` consecutive failures."""
    return Retry(
        total=max_resume,
        connect=None,
        read=None,
        status=None,
        other=None,
        redirect=0,
        backoff_factor=0.2,
        backoff_max=5.0,
        backoff_jitter=0.2,
    )


def after_failure(policy: Retry, error: Exception) -> Retry | None:
    """The policy for the next attempt after ``error``, or None when none is left.
    The caller sleeps with ``policy.sleep()`` before that attempt."""
    try:
        nxt = policy.increment(method="GET", error=error)
    except MaxRetryError:
        return None
    # The history sets the backoff (its length), but must not keep the errors: each
    # one's traceback keeps the frames of the read it broke, and with them the
    # caller's buffer, alive past the call.
    return nxt.new(history=tuple(h._replace(error=None) for h in nxt.history))


def is_idempotent(
    method: str, params: Iterable[tuple[str, str]], declared: bool | None = None
) -> bool:
    """Whether a request may be sent again after it may have reached the server: what
    the caller ``declared``, else by its method (GET, HEAD, PUT, DELETE) or, for a POST,
    by the operation its query names (:data:`IDEMPOTENT_POSTS`)."""
    if declared is not None:
        return declared
    if method in IDEMPOTENT_METHODS:
        return True
    return method == "POST" and any(name in IDEMPOTENT_POSTS for name, _ in params)
