"""What to fault and how: :class:`Action`, :class:`Rule`, which rules apply to a request,
and :class:`LoggedRequest`, the record of what was done. Pure data, no I/O."""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

__all__ = [
    "AFTER_FORWARD",
    "ANSWERED_HERE",
    "CHECKSUM_HEADER_PREFIXES",
    "NON_MD5_PREFIX",
    "Action",
    "FaultProxyError",
    "LoggedRequest",
    "Rule",
    "checksum_header",
    "choose_rules",
]


class FaultProxyError(RuntimeError):
    """The proxy could not start, or was used wrongly."""


class Action(enum.Enum):
    """What a matching rule does to the request or to its response."""

    #: Answer 503 SlowDown (an S3 XML error body) without forwarding the request.
    SLOW_DOWN = "slow_down"
    #: Answer ``status``/``code`` (default 500 InternalError) without forwarding, with
    #: the rule's ``headers`` (a 301 with ``x-amz-bucket-region``, say); a HEAD's
    #: answer has no body, as S3's has none.
    ERROR = "error"
    #: Forward the request, read the server's whole reply, then send the client an error
    #: instead (default 503 SlowDown): the request took effect but its reply was lost.
    ERROR_AFTER_FORWARD = "error_after_forward"
    #: Forward the request, read the server's whole reply, then close the client
    #: connection without sending anything.
    DROP_AFTER_FORWARD = "drop_after_forward"
    #: Close the client connection without forwarding the request or answering.
    DROP = "drop"
    #: Remove the ``ETag`` header from the response.
    STRIP_ETAG = "strip_etag"
    #: Turn the response's ``ETag: "x"`` into ``ETag: W/"x"``.
    WEAK_ETAG = "weak_etag"
    #: Forward without ``Range`` (and ``If-Range``): the server answers 200 with the whole
    #: body. A SigV4 request that signed ``Range`` is re-signed, so the proxy needs the
    #: credentials (``FaultProxy(..., access_key=, secret_key=)``).
    IGNORE_RANGE = "ignore_range"
    #: Remove ``Content-Length`` from the response; a body is then delimited by closing
    #: the connection, as HTTP/1.1 allows.
    STRIP_CONTENT_LENGTH = "strip_content_length"
    #: Add (or replace) the response headers given as ``headers``.
    SET_HEADERS = "set_headers"
    #: Wait ``seconds`` before forwarding the request: a slow server.
    DELAY = "delay"
    #: Send the response headers and the first ``after`` body bytes, then close the
    #: connection: a body cut short (Toxiproxy's ``limit_data``, for one request).
    TRUNCATE_BODY = "truncate_body"
    #: Forward without ``If-Match``: a server that does not honour it (re-signed like
    #: ``IGNORE_RANGE``).
    IGNORE_IF_MATCH = "ignore_if_match"
    #: Remove every ``x-amz-checksum-*`` header from the response: a server that stores
    #: or returns no checksums.
    STRIP_CHECKSUMS = "strip_checksums"
    #: Answer a request that carries any checksum header (``x-amz-checksum-*``,
    #: ``x-amz-sdk-checksum-algorithm``, or a checksum trailer) with S3's
    #: ``400 InvalidArgument`` "Unsupported header", without forwarding it, as Backblaze
    #: B2 does; requests without one are forwarded. ``hits`` counts the rejections.
    REJECT_CHECKSUM_HEADERS = "reject_checksum_headers"
    #: Give the response's ETag a form that is not an MD5 (``"x"`` becomes
    #: ``"nomd5-x"``), as services with opaque ETags do; ``If-Match`` and
    #: ``If-None-Match`` values of that form are turned back before forwarding, so a
    #: pin on the rewritten ETag still holds (re-signed).
    NON_MD5_ETAG = "non_md5_etag"
    #: Flip one bit of the body byte at offset ``after`` (counted from the first body
    #: byte the server sends): a corruption that every length check lets through.
    FLIP_BYTE = "flip_byte"


#: The request headers REJECT_CHECKSUM_HEADERS refuses: their name starts with one of these.
CHECKSUM_HEADER_PREFIXES = ("x-amz-checksum-", "x-amz-sdk-checksum-")
#: The form NON_MD5_ETAG gives an ETag's opaque part.
NON_MD5_PREFIX = "nomd5-"


def checksum_header(headers: Sequence[tuple[str, str]]) -> str | None:
    """The first checksum header a request carries (see REJECT_CHECKSUM_HEADERS)."""
    for name, value in headers:
        lname = name.lower()
        if lname.startswith(CHECKSUM_HEADER_PREFIXES):
            return lname
        if lname == "x-amz-trailer" and value.lower().startswith("x-amz-checksum-"):
            return lname
    return None


@dataclass
class Rule:
    """Which requests to fault, how, and how many times.

    A request matches when every given criterion does: ``method`` (exact, case
    insensitive), ``path`` (a regular expression searched in the percent-decoded path,
    e.g. ``r"/bucket/key$"``) and ``query`` (parameter names that must be present, or a
    mapping from name to required value, None meaning any value). ``times`` is how many
    matching requests the rule applies to (None: all of them); ``hits`` counts them.
    """

    action: Action
    method: str | None = None
    path: str | None = None
    query: Mapping[str, str | None] = field(default_factory=dict)
    times: int | None = 1
    status: int | None = None
    code: str | None = None
    retry_after: float | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    after: int = 0
    seconds: float = 0.0
    hits: int = 0

    def matches(
        self,
        method: str,
        path: str,
        query: Mapping[str, str],
        headers: Sequence[tuple[str, str]] = (),
    ) -> bool:
        if self.method is not None and self.method.upper() != method.upper():
            return False
        if self.action is Action.REJECT_CHECKSUM_HEADERS and checksum_header(headers) is None:
            return False
        if self.path is not None and re.search(self.path, path) is None:
            return False
        for name, value in self.query.items():
            if name not in query or (value is not None and query[name] != value):
                return False
        return True

    @property
    def used_up(self) -> bool:
        return self.times is not None and self.hits >= self.times


@dataclass(frozen=True)
class LoggedRequest:
    """One request the proxy handled, and what it sent back.

    ``status`` is the status the client got (None if the connection was dropped);
    ``upstream_status`` the one the server answered (None if it was not forwarded);
    ``actions`` the faults applied; ``body_bytes`` how many body bytes the client was sent
    and ``request_bytes`` how many request body bytes the client sent (both as framed on
    the wire: a chunked body counts its chunk headers; a request body cut short counts
    what arrived, logged with no status). ``started`` is when the request's head had
    arrived and ``time`` when the exchange ended (both ``time.time()``): between them the
    request was in flight.
    """

    method: str
    path: str
    query: dict[str, str]
    range: str | None
    status: int | None
    upstream_status: int | None
    actions: tuple[Action, ...]
    body_bytes: int
    time: float
    started: float = 0.0
    request_bytes: int = 0


#: Actions that answer the request in the proxy, without forwarding it.
ANSWERED_HERE = (Action.SLOW_DOWN, Action.ERROR, Action.DROP, Action.REJECT_CHECKSUM_HEADERS)
#: Actions that forward the request and then lose its reply.
AFTER_FORWARD = (Action.ERROR_AFTER_FORWARD, Action.DROP_AFTER_FORWARD)


def choose_rules(
    rules: Sequence[Rule],
    method: str,
    path: str,
    query: Mapping[str, str],
    headers: Sequence[tuple[str, str]] = (),
) -> list[Rule]:
    """The rules (in the order given) that apply to this request, their hits counted.

    An answer made here (SLOW_DOWN, ERROR, DROP, REJECT_CHECKSUM_HEADERS) excludes
    everything else; of the rest, one lost-reply rule (ERROR/DROP_AFTER_FORWARD), one
    TRUNCATE_BODY and one FLIP_BYTE apply at most, and every request or header rule does.
    """
    matching = [r for r in rules if not r.used_up and r.matches(method, path, query, headers)]
    here = [r for r in matching if r.action in ANSWERED_HERE]
    if here:
        chosen = here[:1]
    else:
        chosen, seen = [], set()
        for rule in matching:
            kind = "lost" if rule.action in AFTER_FORWARD else rule.action
            if kind in seen and kind in ("lost", Action.TRUNCATE_BODY, Action.FLIP_BYTE):
                continue
            seen.add(kind)
            chosen.append(rule)
    for rule in chosen:
        rule.hits += 1
    return chosen
