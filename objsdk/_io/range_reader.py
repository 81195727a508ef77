"""``RangeReader``: bytes of one object version from a GET that resumes where it broke.

One GET serves a whole sequential pass. When it breaks (reset, timeout, truncated or
malformed body, 5xx) the reader reopens at the next undelivered byte with
``Range: bytes=<next>-`` and ``If-Match: <etag>``, and checks the answer
(:mod:`objsdk._core.continuation`) before taking a byte from it: the caller sees one unbroken
stream of one object version, or an exception. ``ObjectFile``, read-ahead parts and
downloads all read through this one class.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TypeVar

from objsdk import errors
from objsdk._core.continuation import (
    BadResponse,
    Changed,
    Continuation,
    Malformed,
    SizeUnknown,
    check_response,
    same_etag,
)
from objsdk._core.pin import VersionPin
from objsdk._core.ranges import format_range
from objsdk._io.body import BodyStream, Broken, Observer
from objsdk._io.read_stats import ReadStats
from objsdk._s3.head import head_object
from objsdk._transport import forks
from objsdk._transport.base import Response, Transport
from objsdk._transport.pipeline import cannot_connect, refused_past_bound
from objsdk._transport.retry import after_failure, is_throttle, resume_policy
from objsdk.models import ObjectInfo

__all__ = [
    "DEFAULT_MAX_RESUME",
    "SKIP_THRESHOLD",
    "RangeIgnored",
    "RangeReader",
]

log = logging.getLogger("objsdk")

DEFAULT_MAX_RESUME = 6
# A forward seek this close to the open stream reads through instead of paying for a
# new request (tarfile's "r:" mode skips member padding and small members like this).
SKIP_THRESHOLD = 256 * 1024
# After a far seek, a GET asks for the bytes the caller wants (this much when it does
# not say, as a readline), not the rest of the object: a body read to its end gives its
# connection back to the pool, where an open-ended GET dropped after a few KiB takes
# its connection down with it, and the next seek pays a new TCP (and TLS) handshake
# (Parquet footers and column chunks, zip members). While reading goes on in sequence
# each window is four times the last; past RANDOM_WINDOW_CAP the stream is open-ended
# again (a tar member read after a seek pays 4 windows, not 8).
RANDOM_WINDOW = 64 * 1024
RANDOM_WINDOW_CAP = 8 << 20
# A GET of an object known to be this small is read whole by the transport's own
# connections (httptools) instead of streamed through requests: streaming a 4 KiB object
# cost three times the client CPU of reading it whole (docs/perf.md, "Downloads of small
# objects"). Its size, not the window's, decides: a server that ignores Range answers
# with the whole object, which must fit in memory. After a break the reader streams.
WHOLE_ANSWER = 1 << 20


T = TypeVar("T")


class RangeIgnored(errors.ProtocolError):
    """The server answered a ranged GET with the whole object (200). Raised only to
    readers made with ``strict_range``: parallel parts then cost O(N²) bytes, so their
    owner falls back to one stream."""


class RangeReader:
    """Bytes ``[pos, end)`` of one object version, resumed across broken connections.

    Pinned (:class:`~objsdk._core.pin.VersionPin`): what ``pin`` does not know yet, the
    first answer sets (ETag, size, version, Last-Modified), and every later request
    carries its conditions (``If-Match``, or ``If-Unmodified-Since`` for a server
    without a strong ETag); if the object changes, :class:`~objsdk.ObjectChangedError`
    is raised. With nothing to pin, a broken stream is not resumed
    (:class:`~objsdk.ReadError`), since nothing would prove the rest comes from the same
    version. A broken stream is resumed from the next undelivered byte up to
    ``max_resume`` consecutive failures (:class:`~objsdk.ResumeLimitError` after that).
    ``end`` makes it a window: closed ``Range`` requests, as if the object ended there.
    ``cancel``, once set, turns the next break into :class:`~objsdk.Cancelled` instead
    of a resume.

    ``observer(offset, data)`` sees every received byte in object order; ``on_start``
    gets the headers of every answer that starts at byte 0 (stored checksums).

    An endpoint that cannot be reached is not a broken stream. A request of a reader
    that has had no answer yet (nothing received, and a pin that knows nothing an
    answer tells: no ETag, size or date; a version id is the caller's) and that cannot
    connect at all (refused, a host name not resolved, a TLS handshake failed:
    :func:`~objsdk._transport.pipeline.cannot_connect`) raises that
    :class:`~objsdk.ConnectError`, naming the endpoint URL, after the transport's own
    connect retries, as every other call does: there is nothing to resume, and resuming
    would only repeat those retries ``max_resume + 1`` times, with backoff, before a
    :class:`~objsdk.ResumeLimitError`. A timeout, a connection the server accepted and
    then reset, or a 5xx that is no throttling is resumed as ever: the server was
    reached, or may be slow.
    Once the reader has had an answer (or was made with a pin an earlier answer filled:
    a window of a pinned read, a download part, a pickled file), or with ``reached``
    (its caller has read from this endpoint before: a dataset's later shards), a failed
    connect is an outage, a server restarting, and is resumed like any break, within
    ``max_resume`` or ``max_stall``.

    Time bound: a GET that reached the server is never retried by the transport, only
    by this reader's policy, so one read that makes no progress against a server that
    accepts connections and never answers ends within ``(max_resume + 1) x read
    timeout`` plus at most 5 s of backoff per attempt: with the defaults (60 s, 6
    resumes), under 8 minutes. (Connect failures are retried by the transport first,
    and so are throttling answers, which come at once: a server that keeps throttling
    ends the read with :class:`~objsdk.SlowDown`, without a resume.)
    """

    def __init__(
        self,
        transport: Transport,
        bucket: str,
        key: str,
        *,
        pin: VersionPin | None = None,
        end: int | None = None,
        max_resume: int = DEFAULT_MAX_RESUME,
        checksum_mode: bool = False,
        observer: Observer | None = None,
        on_start: Callable[[Mapping[str, str]], None] | None = None,
        cancel: threading.Event | None = None,
        stats: ReadStats | None = None,
        strict_range: bool = False,
        max_stall: float | None = None,
        reached: bool = False,
    ) -> None:
        self.transport = transport
        self.bucket = bucket
        self.key = key
        self.pin = pin if pin is not None else VersionPin()
        self.end = end
        self.max_resume = max_resume
        self.checksum_mode = checksum_mode
        self.observer = observer
        self.on_start = on_start
        self.cancel = cancel
        self.strict_range = strict_range
        self.stats = stats if stats is not None else ReadStats()
        self.pos = 0  # the next byte to receive
        # After a far seek: the span of the next GET (None: to the end; 0: not chosen
        # yet), the caller's hint of how many bytes it wants (taken by the next open),
        # and where the last GET ended.
        self._span_size: int | None = None
        self.expect = 0
        self._span_end: int | None = None
        self._stream: BodyStream | None = None
        self._forks = forks.generation  # the process _stream was opened in
        self._policy = resume_policy(max_resume)
        self._retry = self._policy
        self._opened_once = False
        self.reached = reached
        self.max_stall = max_stall
        self._stalled_since: float | None = None
        # Whether a small object may be read whole (WHOLE_ANSWER): not after a break,
        # which loses all a whole answer received, where a stream keeps every byte.
        self._whole = True

    def window(
        self,
        end: int | None,
        *,
        cancel: threading.Event | None = None,
        stats: ReadStats | None = None,
        strict_range: bool = False,
    ) -> RangeReader:
        """A new reader of this one's object up to ``end``, pinned to the version this
        one is pinned to, with its transport and resume limit (a part of the same read).
        It shares nothing else: not this reader's observer, callbacks or stream."""
        return RangeReader(
            self.transport,
            self.bucket,
            self.key,
            pin=self.pin,
            end=end,
            max_resume=self.max_resume,
            cancel=cancel,
            stats=stats,
            strict_range=strict_range,
            max_stall=self.max_stall,
            reached=self.reached,
        )

    @property
    def max_stall(self) -> float | None:
        """A budget in time instead of ``max_resume``: seconds a read may go without
        progress (resumes go on, the backoff capped, until then). None: by count."""
        return self._max_stall

    @max_stall.setter
    def max_stall(self, seconds: float | None) -> None:
        if seconds is not None and not seconds > 0:
            raise errors.InvalidArgument(
                f"max_stall must be > 0 seconds or None, got {seconds!r} "
                f"(bucket {self.bucket!r}, key {self.key!r})"
            )
        self._max_stall = seconds

    # -- position ----------------------------------------------------------------------

    @property
    def size(self) -> int | None:
        """The object's size, once known (the pin's)."""
        return self.pin.size

    @property
    def limit(self) -> int | None:
        """Where reading stops: the window's end or the object's size, if known."""
        if self.end is None:
            return self.size
        return self.end if self.size is None else min(self.end, self.size)

    def seek(self, pos: int) -> bool:
        """Receive from ``pos`` next. Returns True if the open stream is kept (a short
        skip forward reads through it), False if it was dropped (reopened lazily)."""
        stream = self._stream
        self.pos = pos
        # Past the end of the open stream there is nothing to read through: skipping
        # would meet the end of its body, which is no break (the next read is just b"").
        past_end = stream is not None and stream.end is not None and pos > stream.end
        if stream is not None and 0 <= pos - stream.pos <= SKIP_THRESHOLD and not past_end:
            return True
        if (
            stream is not None
            and stream.end is not None
            and stream.end - stream.pos <= RANDOM_WINDOW
        ):
            # The little left of a window is read off: its connection stays open for
            # the next GET, which costs less than a new handshake.
            with contextlib.suppress(Broken):
                stream.discard(stream.end - stream.pos)
                self.stats.bytes_discarded += stream.end - stream.pos
        self.drop()
        return False

    def jumped(self, pos: int) -> None:
        """The caller moved far from where it read (its own seek, not a resume): GETs
        ask for windows from here (see :data:`RANDOM_WINDOW`). A reader with an end
        reads one window already."""
        if self.end is None and pos != self._span_end:
            self._span_size, self._span_end = 0, None

    def head(self) -> ObjectInfo:
        """Size, ETag and version from HEAD, pinned like a GET answer."""
        self.stats.requests += 1
        pin = self.pin
        info = head_object(self.transport, self.bucket, self.key, version_id=pin.version_id)
        if pin.etag is not None and not same_etag(info.etag or "", pin.etag):
            raise self._changed(f"ETag {pin.etag} is now {info.etag}", self.pos)
        if info.size is None:
            raise errors.ProtocolError(
                "HEAD answer has no Content-Length",
                operation="head",
                bucket=self.bucket,
                key=self.key,
            )
        # HEAD's ETag (the same by the weak comparison) is kept in the form it came in.
        self.pin = replace(pin, etag=info.etag, size=info.size).filled(VersionPin.of(info))
        return info

    @property
    def pinned(self) -> bool:
        """Can later requests be tied to the version the first answer came from?"""
        return self.pin.pinned

    # -- reading -----------------------------------------------------------------------

    def read(self, n: int) -> bytes:
        """Up to ``n`` bytes (fewer only at the end)."""
        return self._net(lambda s: s.read(n), b"")

    def read1(self, n: int) -> bytes:
        """Up to ``n`` bytes with at most one network receive."""
        return self._net(lambda s: s.read1(n), b"")

    def readinto(self, view: memoryview) -> int:
        """Receive straight into ``view``; 0 at the end."""
        return self._net(lambda s: s.readinto(view), 0)

    def fill_view(self, n: int) -> tuple[bytes, int]:
        """One network chunk of up to ``n`` bytes, as (chunk, offset of pos in it)."""
        return self.read(n), 0

    def discard(self, n: int) -> None:
        """Skip ``n`` bytes forward (received and dropped)."""
        self.seek(self.pos + n)

    @property
    def done(self) -> bool:
        limit = self.limit
        return limit is not None and self.pos >= limit

    def close(self) -> None:
        self.drop()

    def drop(self) -> None:
        """Close the open stream, if any; the next read reopens at ``pos``."""
        if self._stream is not None:
            stream, self._stream = self._stream, None
            stream.close()

    def _net(self, op: Callable[[BodyStream], T], empty: T) -> T:
        """Run one body read at ``pos``, resuming on breaks; ``empty`` at the end."""
        while True:
            try:
                stream = self._stream_at(self.pos)
                if stream is None:
                    return empty
                result = op(stream)
            except Broken as e:
                self._on_break(e)
                continue
            if stream.pos > self.pos:
                self.pos = stream.pos
                self._retry = self._policy  # progress forgives earlier failures
                self._stalled_since = None
            if stream.done:
                self.drop()  # read whole: the connection goes back to the pool
            return result

    def _stream_at(self, want: int) -> BodyStream | None:
        """The stream positioned at ``want`` (opened if needed); None at the end."""
        stream = self._stream
        if stream is not None and self._forks != forks.generation:
            # Forked in mid-body: the connection is the parent's, which reads on from it.
            # This process closes its copy of the socket and resumes from its own
            # position on a connection of its own, pinned as always.
            self.drop()
            stream = None
        if stream is not None and stream.pos < want:
            skip = want - stream.pos
            stream.discard(skip)  # raises Broken on failure: then we resume at want
            self.stats.bytes_discarded += skip
        if stream is not None and stream.pos == want:
            return stream
        self.drop()
        limit = self.limit
        if limit is not None and want >= limit:
            return None
        return self._open(want)

    def _span(self, want: int) -> int | None:
        """Where a GET from ``want`` ends (exclusive; None: at the object's end): the
        reader's end, or, after a far seek, the window (see :data:`RANDOM_WINDOW`)."""
        expect, self.expect = self.expect, 0
        if expect < 0:  # the caller reads to the end: one stream
            self._span_size = self._span_end = None
        if self._span_size is None:
            return self.end
        if want == self._span_end and self._span_size:
            # Read on past the last window: sequential again, the windows grow.
            if 4 * self._span_size > RANDOM_WINDOW_CAP:
                self._span_size = self._span_end = None
                return self.end
            self._span_size = max(4 * self._span_size, RANDOM_WINDOW)
        else:
            self._span_size = self._span_size or RANDOM_WINDOW
        end = want + max(self._span_size, expect)
        if self.end is not None:
            end = min(end, self.end)
        self._span_end = end
        return end

    def _open(self, want: int) -> BodyStream | None:
        headers = {"Accept-Encoding": "identity"}  # offsets must be stored bytes
        end = self._span(want)
        if end is not None:
            headers["Range"] = format_range(want, end - 1)
        elif want:
            headers["Range"] = format_range(want)
        conditions = self.pin.conditions()
        headers.update(conditions)
        if not conditions and self._opened_once:
            raise errors.ReadError(
                "cannot resume this read safely: the server sent neither an ETag nor "
                "Last-Modified to pin the object's version",
                bucket=self.bucket,
                key=self.key,
                offset=want,
            )
        if want == 0 and self.checksum_mode:
            # S3 returns stored checksums only when asked (GetObject, ChecksumMode).
            headers["x-amz-checksum-mode"] = "ENABLED"
        params = self.pin.params()
        self.stats.requests += 1
        size = self.pin.size
        try:
            resp = self.transport.request(
                "GET",
                operation="read",
                bucket=self.bucket,
                key=self.key,
                params=params,
                headers=headers,
                stream=not (self._whole and size is not None and size <= WHOLE_ANSWER),
                ok=(200, 206, 412, 416),
                # This reader's own policy retries (backoff, max_resume): the transport
                # retries only connect errors and throttling answers, so a silent
                # server costs at most (max_resume + 1) read timeouts, not that many
                # times its retries too.
                idempotent=False,
            )
        except errors.NoSuchKey as e:
            if not self._opened_once:
                raise
            raise self._changed("it was deleted", want) from e
        except errors.ProxyError:
            raise  # the proxy's refusal: it would refuse the resume too
        except errors.TransportError as e:
            if self._unanswered() and cannot_connect(e):
                raise  # the endpoint is not reached: see the class docstring
            if refused_past_bound(e):
                raise  # the server's answer, which it would send again: not resumed
            raise Broken(e) from e
        except errors.S3Error as e:
            # A throttling answer (429, SlowDown) is no broken stream: the transport
            # retried it, with a growing backoff, for as long as its policy allows (it
            # is retried for any request); the SlowDown that still comes is final.
            if e.status >= 500 and not is_throttle(e.status, e.code):
                raise Broken(e) from e  # still failing after the transport's own retries
            raise
        try:
            cont = check_response(
                resp.status,
                resp.headers,
                want=want,
                etag=self.pin.etag,
                size=self.pin.size,
                end=end,
                last_modified=self.pin.last_modified,
            )
        except Changed as e:
            resp.close()
            raise self._changed(str(e), want) from None
        except Malformed as e:
            resp.close()
            raise errors.ProtocolError(
                str(e), operation="read", bucket=self.bucket, key=self.key
            ) from None
        except BadResponse as e:
            resp.close()
            raise Broken(str(e)) from None
        except SizeUnknown:
            resp.close()
            self.head()  # pinned to our ETag
            if self.size is not None and want >= self.size:
                return None
            raise Broken(f"416 for offset {want} of a {self.size}-byte object") from None
        ignored = cont.discard or (
            resp.status == 200 and end is not None and (cont.size or 0) > end
        )
        if ignored and self.strict_range:
            resp.close()
            raise RangeIgnored(
                f"the server ignored Range for offset {want}",
                operation="read",
                bucket=self.bucket,
                key=self.key,
            )
        self._adopt(cont, resp, want)
        if cont.eof:
            resp.close()
            return None
        if self.size is None:
            # No Content-Length (a close-delimited or chunked 200) nor a total in
            # Content-Range: the end of the body would be taken for the end of the object,
            # and a cut answer for a short object. HEAD (pinned to this answer's ETag)
            # says where the object ends, so a body that stops early is a break.
            try:
                self.head()
            except BaseException:
                resp.close()
                raise
        size = self.size
        stop = size if end is None or size is None else min(size, end)
        stream = BodyStream(resp, cont.start, stop, self.observer)
        self._stream, self._forks = stream, forks.generation
        if cont.discard:
            stream.discard(cont.discard)
            self.stats.bytes_discarded += cont.discard
        return stream

    def _unanswered(self) -> bool:
        """Whether nothing tells this reader that its endpoint answers: no answer yet,
        no ETag, size or date in its pin (a version id is the caller's), not
        ``reached``."""
        pin = self.pin
        told = pin.etag is not None or pin.size is not None or pin.last_modified is not None
        return not (self._opened_once or told or self.reached)

    def _adopt(self, cont: Continuation, resp: Response, want: int) -> None:
        """Pin what a good answer says about the object: ETag, size, version, date."""
        self._opened_once = True
        self.pin = self.pin.filled(VersionPin.from_headers(resp.headers, size=cont.size))
        if want == 0 and not cont.eof and self.on_start is not None:
            self.on_start(resp.headers)

    def _on_break(self, e: Broken) -> None:
        self.drop()
        self._whole = False
        cause = e.cause
        if self.cancel is not None and self.cancel.is_set():
            raise self._cancelled() from cause
        if self.max_stall is not None:
            self._resume_in_time(cause)
            return
        policy = after_failure(self._retry, cause)
        if policy is None:
            raise self._resume_limit(
                f"stream broke {self.max_resume + 1} times in a row without progress "
                f"(last: {_describe(cause)})"
            ) from cause
        self._retry = policy
        self._resume(cause, self._retry.get_backoff_time())

    def _resume(self, cause: Exception, seconds: float, note: str = "") -> None:
        """Count a resume after ``cause``, log it (with ``note``), and back off ``seconds``."""
        self.stats.resumes += 1
        log.warning(
            "resuming read of bucket %r key %r at offset %d after %s%s",
            self.bucket,
            self.key,
            self.pos,
            _describe(cause),
            note,
        )
        self._pause(seconds, cause)

    def _resume_limit(self, why: str) -> errors.ResumeLimitError:
        """The error that ends the read when it may resume no more: ``why``, at its offset."""
        return errors.ResumeLimitError(why, bucket=self.bucket, key=self.key, offset=self.pos)

    def _pause(self, seconds: float, cause: Exception | None) -> None:
        """The backoff before a resume; a cancel ends it, and the read, at once (a
        reader being closed must not wait out a sleep of up to 5 s)."""
        if self.cancel is None:
            time.sleep(seconds)
        elif self.cancel.wait(seconds):
            raise self._cancelled() from cause

    def _cancelled(self) -> errors.Cancelled:
        return errors.Cancelled(
            f"read cancelled (bucket {self.bucket!r}, key {self.key!r}, offset {self.pos})"
        )

    def _resume_in_time(self, cause: Exception) -> None:
        """``max_stall``: resume until that long has passed without progress."""
        assert self.max_stall is not None
        now = time.monotonic()
        if self._stalled_since is None:
            self._stalled_since = now
        left = self._stalled_since + self.max_stall - now
        if left <= 0:
            raise self._resume_limit(
                f"no progress for {self.max_stall:g} s (max_stall) after "
                f"{self.stats.resumes} resumes (last: {_describe(cause)})"
            ) from cause
        # The backoff grows as by count, then stays at its cap (5 s) once the count
        # would have run out; it never sleeps past the budget.
        self._retry = after_failure(self._retry, cause) or self._retry
        backoff = min(self._retry.get_backoff_time(), left)
        self._resume(cause, backoff, f" ({left:.0f} s of max_stall left)")

    def _changed(self, why: str, offset: int) -> errors.ObjectChangedError:
        self.drop()
        return errors.ObjectChangedError(
            f"object changed while being read: {why}",
            bucket=self.bucket,
            key=self.key,
            offset=offset,
        )


def _describe(cause: BaseException) -> str:
    text = str(cause).split("\n")[0][:200]
    return f"{type(cause).__name__}: {text}" if text else type(cause).__name__
