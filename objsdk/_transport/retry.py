"""The retry policy and the one classifier: what is retried, and when a request is
idempotent.

urllib3's ``Retry`` is the policy: an immutable value that counts attempts by kind
(connect, read, status), backs off exponentially with jitter and honours
``Retry-After``; each failed attempt derives the next policy. This module chooses S3's
settings, caps ``Retry-After``, counts broken attempts for callers that adapt to a
network that breaks connections, and decides, in one place, whether a failure may be
retried (:func:`next_policy`): by how safe the request is to send again
(:func:`retry_kind`) and by what went wrong (a connect that never reached the server, a
request broken after it left, an error answer). The request pipeline's retry loop
(:mod:`objsdk._transport.pipeline`) and a resuming reader's (``RangeReader``) both step
their policies here.
"""

from __future__ import annotations

import enum
import socket
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from urllib3.exceptions import (
    ConnectTimeoutError,
    NameResolutionError,
    ProtocolError,
    ReadTimeoutError,
)
from urllib3.response import HTTPResponse
from urllib3.util.retry import Retry

from objsdk import errors
from objsdk._core import failure_chain

if TYPE_CHECKING:
    from types import TracebackType

    from typing_extensions import Self
    from urllib3.connectionpool import ConnectionPool
    from urllib3.response import BaseHTTPResponse

__all__ = [
    "IDEMPOTENT_METHODS",
    "IDEMPOTENT_POSTS",
    "RETRY_CODES",
    "RETRY_STATUSES",
    "Failures",
    "Policy",
    "RetryKind",
    "S3Retry",
    "after_failure",
    "counting_failures",
    "default_retry",
    "is_idempotent",
    "is_unresolved",
    "make_retry",
    "next_policy",
    "pause",
    "resume_policy",
    "retry_kind",
]

# What the layers above hold without knowing it is urllib3's.
Policy = Retry

# Methods safe to send again (RFC 9110 §9.2.2). POST is sorted by its operation below.
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
# The same errors inside a 200 answer (CompleteMultipartUpload, CopyObject).
RETRY_CODES = frozenset({"InternalError", "SlowDown", "ServiceUnavailable"})


class RetryKind(enum.Enum):
    """How safe a request is to send again."""

    #: Safe whatever happened: the request may have reached the server.
    ALWAYS = "always"
    #: After an error answer (which says it did nothing), never after a lost reply:
    #: CreateMultipartUpload, whose lost reply may hide an upload.
    ANSWERED = "answered"
    #: Only if it provably never left (a failed connect).
    UNSENT = "unsent"


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


def make_retry(retries: object) -> Retry:
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


def retry_kind(
    method: str, params: Iterable[tuple[str, str]], declared: bool | None = None
) -> RetryKind:
    """How safe a request is to send again: what the caller ``declared`` (True: always;
    False: only unsent, for a caller that runs its own retries, so that retries never
    nest), else by its method (GET, HEAD, PUT, DELETE: always) or, for a POST, by the
    operation its query names (:data:`IDEMPOTENT_POSTS`; ``?uploads``: answered)."""
    if declared is not None:
        return RetryKind.ALWAYS if declared else RetryKind.UNSENT
    if method in IDEMPOTENT_METHODS:
        return RetryKind.ALWAYS
    names = {name for name, _ in params}
    if method == "POST" and names & IDEMPOTENT_POSTS:
        return RetryKind.ALWAYS
    if method == "POST" and "uploads" in names:
        return RetryKind.ANSWERED
    return RetryKind.UNSENT


def is_idempotent(
    method: str, params: Iterable[tuple[str, str]], declared: bool | None = None
) -> bool:
    """Whether a request may be sent again after it may have reached the server (see
    :func:`retry_kind`)."""
    return retry_kind(method, params, declared) is RetryKind.ALWAYS


def next_policy(
    policy: Retry,
    kind: RetryKind,
    *,
    status: int | None = None,
    code: str | None = None,
    retry_after: str | None = None,
    failure: Exception | None = None,
) -> Retry | None:
    """The one classifier. After an attempt that got an error answer (``status``,
    ``code`` and its ``Retry-After``) or failed on the network (``failure``, urllib3's
    kind of it: a connect error, or a read error once the request left), the policy
    for the next attempt, or None when that failure is not retried or no retry is
    left. A connect error is retried for any request, but for a host name that did not
    resolve (:func:`is_unresolved`); an answer of
    :data:`RETRY_STATUSES` (or a 200 carrying :data:`RETRY_CODES`) for ALWAYS and
    ANSWERED requests; a read error for ALWAYS requests only. The caller sleeps for
    :func:`pause` before the next attempt."""
    # urllib3 sorts by method: "GET" stands for any request that may be sent again.
    method = "GET" if kind is RetryKind.ALWAYS else "POST"
    if failure is not None:
        if is_unresolved(failure):
            return None
        if not isinstance(failure, ConnectTimeoutError) and kind is not RetryKind.ALWAYS:
            return None
        return _step(policy, method, error=failure)
    if kind is RetryKind.UNSENT:
        return None
    if status not in RETRY_STATUSES and code not in RETRY_CODES:
        return None
    return _step(policy, method, response=HTTPResponse(status=status or 500))


def is_unresolved(failure: BaseException) -> bool:
    """Whether ``failure`` is a host name the resolver could not resolve
    (``socket.gaierror``, urllib3's ``NameResolutionError``), found in it or in what it
    was raised from. Such a connect is not tried again: the resolver has already asked
    its servers as often as it is configured to (resolv.conf's ``attempts`` and
    ``timeout``), and a name that does not exist (a typo in the endpoint) stays so; five
    more lookups with backoff would only delay the error that names it."""
    running = failure_chain.running_frames()  # not the caller's own lookup that failed
    seen: set[int] = set()
    stack: list[BaseException] = [failure]
    while stack:
        e = stack.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, (socket.gaierror, NameResolutionError)):
            return True
        reason = getattr(e, "reason", None)
        inner = [reason] if isinstance(reason, BaseException) else []
        stack.extend([*inner, *failure_chain.links(e, running)])
    return False


def pause(policy: Retry, retry_after: str | None = None) -> float:
    """How long to sleep before the next attempt: the ``Retry-After`` of the answer
    (capped by an :class:`S3Retry`) where the policy respects it, else its backoff (as
    ``Retry.sleep`` decides, which the caller does not call: its sleep must end when the
    request is cancelled)."""
    if retry_after and policy.respect_retry_after_header:
        seconds = policy.parse_retry_after(retry_after)
        if seconds > 0:
            return seconds
    return policy.get_backoff_time()


def _step(
    policy: Retry,
    method: str,
    *,
    error: Exception | None = None,
    response: HTTPResponse | None = None,
) -> Retry | None:
    try:
        nxt = policy.increment(method=method, error=error, response=response)
    except Exception:
        # Out of retries (MaxRetryError), or urllib3 would not repeat this (it re-raises
        # the error itself).
        return None
    # The history sets the backoff (its length), but must not keep the errors: each
    # one's traceback keeps the frames of the read it broke, and with them the
    # caller's buffer, alive past the call.
    return nxt.new(history=tuple(h._replace(error=None) for h in nxt.history))


def after_failure(policy: Retry, error: Exception) -> Retry | None:
    """The policy for the next attempt of a resuming read after ``error``, or None
    when none is left (each resume is a new request from where the read stopped, so
    it may always be sent again). The caller sleeps ``policy.get_backoff_time()``."""
    return _step(policy, "GET", error=error)
