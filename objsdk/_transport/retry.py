"""The retry policy and the one classifier: what is retried, and when a request is
idempotent.

urllib3's ``Retry`` is the policy: an immutable value that counts attempts by kind
(connect, read, status), backs off exponentially with jitter and honours
``Retry-After``; each failed attempt derives the next policy. This module chooses S3's
settings, caps ``Retry-After``, counts broken attempts for callers that adapt to a
network that breaks connections, and decides, in one place, whether a failure may be
retried (:func:`retried`, :func:`next_policy`): by how safe the request is to send again
(:func:`retry_kind`) and by what went wrong (a connect that never reached the server, a
request broken after it left, an error answer, a throttling answer). The request
pipeline's retry loop (:mod:`objsdk._transport.pipeline`) and a resuming reader's
(``RangeReader``) both step their policies here, and sleep for :func:`pause`.

A throttling answer (:func:`is_throttle`: 429, or S3's ``SlowDown``) is retried for
every request, after a wait that grows from the first retry on, and is told to the
thread's listener (:func:`hearing_throttles`), through which a transfer lowers the
number of requests it keeps in flight.
"""

from __future__ import annotations

import enum
import random
import socket
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
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
    "THROTTLE_BACKOFF",
    "THROTTLE_CODES",
    "THROTTLE_STATUSES",
    "Failures",
    "Policy",
    "RetryKind",
    "S3Retry",
    "after_failure",
    "counting_failures",
    "default_retry",
    "hearing_throttles",
    "is_idempotent",
    "is_throttle",
    "is_unresolved",
    "make_retry",
    "next_policy",
    "pause",
    "resume_policy",
    "retried",
    "retry_after_seconds",
    "retry_kind",
    "throttle_heard",
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

# Throttling: the server refused the request for load, before doing any of it. 429 Too
# Many Requests (RFC 6585 §4: MinIO past MINIO_API_REQUESTS_MAX, which it answers at
# once, GCS, R2) whatever its code; and S3's SlowDown ("Error best practices": reduce
# the request rate; 503), under the codes services give it (MinIO's SlowDownRead and
# SlowDownWrite), with the throttling codes botocore knows for any AWS service.
THROTTLE_STATUSES = frozenset({429})
THROTTLE_CODES = frozenset(
    {
        "SlowDown",
        "SlowDownRead",
        "SlowDownWrite",
        "TooManyRequests",
        "TooManyRequestsException",
        "Throttling",
        "ThrottlingException",
        "RequestThrottled",
        "RequestLimitExceeded",
        "BandwidthLimitExceeded",
    }
)
# The wait before the first retry of a throttled request, in units of the policy's
# ``backoff_factor`` (0.1 s by default: 0.5 s), doubling with each throttled retry up to
# ``backoff_max``. A server that refuses for load is not asked again at once, as
# urllib3's backoff would (0 before the first retry): every request it refused in the
# same instant would come back in the same instant.
THROTTLE_BACKOFF = 5


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


def is_throttle(status: int | None, code: str | None) -> bool:
    """Whether an answer of ``status`` and ``code`` is throttling (see
    :data:`THROTTLE_STATUSES`, :data:`THROTTLE_CODES`)."""
    return status in THROTTLE_STATUSES or code in THROTTLE_CODES


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


def retried(
    kind: RetryKind,
    *,
    status: int | None = None,
    code: str | None = None,
    failure: Exception | None = None,
) -> bool:
    """The one classifier: whether a request of ``kind`` that got an error answer
    (``status``, ``code``) or failed on the network (``failure``, urllib3's kind of it: a
    connect error, or a read error once the request left) may be sent again, whatever
    its policy has left. A connect error: for any request, but for a host name that did
    not resolve (:func:`is_unresolved`). A throttling answer
    (:func:`is_throttle`): for any request. Another answer of :data:`RETRY_STATUSES` (or
    a 200 carrying :data:`RETRY_CODES`): for ALWAYS and ANSWERED requests. A read error:
    for ALWAYS requests only."""
    if failure is not None:
        if is_unresolved(failure):
            return False
        return isinstance(failure, ConnectTimeoutError) or kind is RetryKind.ALWAYS
    if is_throttle(status, code):
        # Even a request that is not safe to repeat (a POST the classifier does not
        # know, CreateMultipartUpload, a reader's GET that runs its own resumes): a
        # throttling answer is a refusal, made before the request was acted on. S3 asks
        # for the same request again, later ("Error best practices"), and botocore
        # retries throttling answers for every operation, POSTs included: its standard
        # mode by code (SlowDown, Throttling...: ThrottledRetryableChecker), its legacy
        # mode any 429 (_retry.json, "too_many_requests"). A 503 sent by a proxy after
        # the server acted names no SlowDown of the server's; where a server's
        # SlowDown did follow a lost reply (CreateMultipartUpload), the caller settles
        # it as after any retried attempt.
        return True
    if kind is RetryKind.UNSENT:
        return False
    return status in RETRY_STATUSES or code in RETRY_CODES


def next_policy(
    policy: Retry,
    kind: RetryKind,
    *,
    status: int | None = None,
    code: str | None = None,
    retry_after: str | None = None,
    failure: Exception | None = None,
) -> Retry | None:
    """After an attempt that got an error answer (``status``, ``code`` and its
    ``Retry-After``) or failed on the network (``failure``), the policy for the next
    attempt, or None when that failure is not retried (:func:`retried`) or no retry is
    left. The caller sleeps for :func:`pause` before the next attempt."""
    if not retried(kind, status=status, code=code, failure=failure):
        return None
    # urllib3 sorts by method: "GET" stands for any request that may be sent again.
    method = "GET" if kind is RetryKind.ALWAYS else "POST"
    if failure is not None:
        return _step(policy, method, error=failure)
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


def pause(
    policy: Retry,
    retry_after: str | None = None,
    *,
    throttled: bool = False,
    now: datetime | None = None,
) -> float:
    """How long to sleep before the next attempt (the caller sleeps itself, rather
    than ``Retry.sleep``: its sleep must end when the request is cancelled).

    After a ``throttled`` answer: the throttling backoff (:data:`THROTTLE_BACKOFF`),
    lengthened to the answer's ``Retry-After`` (where the policy respects it) but to
    no more than twice itself. A server's Retry-After for throttling is a constant
    more often than a measure (MinIO asks 60 s of every request past its limit, whose
    slots free in milliseconds): honoured whole, it would stall every request it
    refused for as long, while the backoff doubles anyway as long as the refusals go
    on, and its jitter keeps the requests refused together apart.

    After any other answer: its ``Retry-After`` (:func:`retry_after_seconds`; ``now`` is
    the time an HTTP-date counts from), else the policy's own backoff."""
    asked = 0.0
    if retry_after and policy.respect_retry_after_header:
        asked = retry_after_seconds(retry_after, policy.backoff_max, now)
    if throttled:
        backoff = _throttle_backoff(policy)
        return min(max(backoff, asked), 2 * backoff, policy.backoff_max)
    if asked > 0:
        return asked
    return policy.get_backoff_time()


def retry_after_seconds(value: str, cap: float, now: datetime | None = None) -> float:
    """The seconds a ``Retry-After`` asks to wait (RFC 9110 §10.2.3): a number of
    seconds, or an HTTP-date counted from ``now`` (an aware ``datetime``: the client's
    signing clock; the system's if None), at most ``cap`` (the policy's
    ``backoff_max``: a server may ask for minutes, and the caller's retries would then
    outlast any timeout it set). 0 for a value that is neither, or in the past."""
    text = value.strip()
    if text.isdigit():
        seconds = float(text)
    else:
        try:
            when = parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return 0.0
        if when.tzinfo is None:  # "-0000": UTC, of unknown origin (RFC 5322 §3.3)
            when = when.replace(tzinfo=timezone.utc)
        seconds = (when - (now or datetime.now(timezone.utc))).total_seconds()
    return max(0.0, min(seconds, cap))


def _throttle_backoff(policy: Retry) -> float:
    """The wait after the n-th throttled attempt in a row: between half and all of
    ``THROTTLE_BACKOFF * backoff_factor * 2**(n - 1)``, capped at ``backoff_max``
    ("equal jitter", AWS Architecture Blog, "Exponential Backoff And Jitter": requests
    refused together are spread apart, and none comes back at once)."""
    failures = max(len(policy.history), 1)
    growth: float = 2.0 ** (failures - 1)
    step = min(THROTTLE_BACKOFF * policy.backoff_factor * growth, policy.backoff_max)
    return float(step / 2 + random.random() * step / 2)


_heard = threading.local()


@contextmanager
def hearing_throttles(on_throttle: Callable[[], None]) -> Iterator[None]:
    """Call ``on_throttle()`` at each throttling answer (:func:`is_throttle`) to this
    thread's requests until the block ends, retried or not (a transfer's part lowers
    the transfer's level with it: see ``objsdk._io.shared_level.InFlight``). An inner
    block hears them alone."""
    outer = getattr(_heard, "on_throttle", None)
    _heard.on_throttle = on_throttle
    try:
        yield
    finally:
        _heard.on_throttle = outer


def throttle_heard() -> None:
    """A request of this thread got a throttling answer: tell the listener, if any."""
    on_throttle: Callable[[], None] | None = getattr(_heard, "on_throttle", None)
    if on_throttle is not None:
        on_throttle()


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
