"""How much of an answer's head the transport takes, and the failure of one past it.

The read timeout bounds a wait for bytes, never how many arrive: a server that keeps
sending header lines, one header line without end, or interim (1xx) answers without end
is never quiet long enough for it to fire. Without a bound the client would read all of
it, and hold the fields and the line. http.client (so urllib3 and requests) bounds a
line at 64 KiB (``_MAXLINE``) and a head at 100 fields (``_MAXHEADERS``), but skips 100
Continue answers for as long as they come; objsdk's pools bound those
(:data:`~objsdk._transport.private_api.INTERIM`). The transport's own connections
(:mod:`objsdk._transport.wire`) bound a head by its size, its fields and its interim
answers, and a chunked body's trailer section, which httptools holds as it holds a head,
alike. An S3 answer carries a few dozen fields at most (user metadata is limited to 2 KB
in all, S3 User Guide, "Working with object metadata"), so each bound is far above any
answer S3 sends.

A head past a bound is the server's answer, which it would send again: it is neither
retried nor resumed (:func:`past_bound` tells it).
"""

from __future__ import annotations

import http.client

__all__ = ["MAX_FIELDS", "MAX_HEAD", "MAX_INTERIM", "HeadTooLarge", "past_bound"]

# The bytes of an answer's head, interim answers included, received without its end.
MAX_HEAD = 256 << 10
# The fields of one head (http.client takes 100).
MAX_FIELDS = 256
# Interim answers before the final one (RFC 9110 §15.2): a 100 Continue, 103 Early
# Hints; one or two in practice.
MAX_INTERIM = 16


class HeadTooLarge(http.client.HTTPException):
    """An answer whose head, or a chunked body's trailer section, passed one of the
    bounds above; the message says which.

    An :class:`http.client.HTTPException`, as http.client's own refusals of a head
    (``LineTooLong``, "got more than 100 headers") are, so it is told and retried as
    they are."""


def past_bound(e: BaseException) -> bool:
    """Whether ``e`` is an answer refused for passing a bound on what is held of it:
    :class:`HeadTooLarge`, or http.client's own refusals (``LineTooLong``, a line over
    64 KiB; "got more than 100 headers", the one thing it raises a bare
    ``HTTPException`` for)."""
    if isinstance(e, (HeadTooLarge, http.client.LineTooLong)):
        return True
    return type(e) is http.client.HTTPException and str(e).startswith("got more than")
