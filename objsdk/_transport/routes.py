"""Where each bucket's requests go and the region they are signed for: the client's own
endpoint and region, or those a region redirect taught it.

An error answer that says the bucket is in another region
(:func:`~objsdk._core.region_redirect.region_redirect`) is marked when the transport
turns it into an :class:`~objsdk.errors.S3Error` (:func:`keep_redirect`); the pipeline
then asks :meth:`BucketRoutes.moved` for the route to send the request again by, and
that route is remembered for the client's life, so the bucket's next requests (streamed
reads, parts, presigned URLs...) go there at once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from objsdk import errors
from objsdk._core.addressing import Endpoint, Route
from objsdk._core.region_redirect import Redirect, region_redirect
from objsdk._core.s3xml import parse_error

__all__ = ["ANY_STATUS", "BucketRoutes", "keep_redirect", "redirect_of"]

log = logging.getLogger("objsdk")

#: Every status: a question about a bucket's region reads the answer's header, whatever
#: the answer is.
ANY_STATUS = range(100, 600)
# What an S3Error answer says of the bucket's region (a Redirect).
_REDIRECT = "_objsdk_redirect"
# The statuses an answer saying "another region" comes with (see region_redirect).
_REDIRECT_STATUSES = frozenset({301, 302, 307, 400})


def keep_redirect(
    error: errors.S3Error, status: int, headers: Mapping[str, str], body: bytes
) -> errors.S3Error:
    """``error``, remembering whether its answer says the bucket is in another region."""
    if status in _REDIRECT_STATUSES:
        redirect = region_redirect(status, headers, parse_error(body))
        if redirect is not None:
            setattr(error, _REDIRECT, redirect)
    return error


def redirect_of(error: errors.S3Error) -> Redirect | None:
    """What ``error``'s answer says of the bucket's region (see :func:`keep_redirect`)."""
    redirect = getattr(error, _REDIRECT, None)
    return redirect if isinstance(redirect, Redirect) else None


class BucketRoutes:
    """The route of each bucket of one client: ``home`` (its endpoint and region) unless
    a region redirect moved the bucket. Requests without a bucket are routed as the
    bucket ``""``. A bucket is known once an answer came back for a request routed so
    (:meth:`confirm`) or a redirect moved it (:meth:`learn`).

    The routes are a plain dict, :attr:`known`: its single gets and sets are atomic, so
    the client's threads share it without a lock, and a forked child keeps a copy, as
    data. A request's hot path reads it directly (one ``get``, no call): a bucket found
    there is routed by what was found and needs no :meth:`confirm`.
    """

    def __init__(self, endpoint: Endpoint, region: str) -> None:
        self.endpoint = endpoint
        self.home = Route(endpoint, region)
        #: The route of each bucket known (see above), by name; ``""`` for requests
        #: without a bucket. Changed only by :meth:`confirm` and :meth:`learn`.
        self.known: dict[str, Route] = {}

    def route(self, bucket: str | None) -> Route:
        """Where a request for ``bucket`` goes now, and the region it is signed for."""
        return self.known.get(bucket or "", self.home)

    def confirm(self, bucket: str | None, route: Route) -> None:
        """``bucket``'s request sent by ``route`` was answered (its signature taken): the
        bucket is known to be there, unless a redirect said otherwise meanwhile."""
        if bucket is not None and bucket not in self.known:
            self.known[bucket] = route

    def learn(self, bucket: str | None, region: str) -> Route:
        """Remember that ``bucket``'s requests are signed for ``region`` (and on AWS,
        sent to that region's endpoint); return that route."""
        route = Route(self.endpoint.for_region(region), region)
        self.known[bucket or ""] = route
        return route

    def locate(self, bucket: str, ask: Callable[[str], str | None]) -> Route:
        """``bucket``'s route: the one known, else the region ``ask(bucket)`` names (the
        client's if it names none), remembered."""
        known = self.known.get(bucket)
        if known is not None:
            return known
        return self.learn(bucket, ask(bucket) or self.home.region)

    def moved(
        self,
        error: errors.S3Error,
        bucket: str | None,
        route: Route,
        ask: Callable[[str], str | None] | None,
    ) -> Route | None:
        """The route to send a request again by, if its ``error`` says the bucket is in
        another region than ``route``'s (learned from now on); else None. An answer that
        does not name the region (a HEAD's bare 400, which may mean anything) has it
        asked of the service by ``ask(bucket)``, for a bucket not known yet."""
        redirect = redirect_of(error)
        if redirect is None:
            return None
        region = redirect.region
        if region is None and bucket is not None and ask is not None and bucket not in self.known:
            region = ask(bucket)
        if region is None or Route(self.endpoint.for_region(region), region) == route:
            return None
        log.info(
            "%s: bucket %r is in region %r, not %r; its requests are signed for %r from now on",
            error.operation,
            bucket,
            region,
            route.region,
            region,
        )
        return self.learn(bucket, region)
