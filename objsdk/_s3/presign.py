"""Presigned URLs for one object: SigV4 query signing (``_core.signing.presign_url``)
with the limits S3 sets on them."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from objsdk import errors
from objsdk._core.addressing import check_bucket, check_key
from objsdk._core.signing import Credentials, presign_url
from objsdk._transport.base import Transport

__all__ = ["MAX_PRESIGN_SECONDS", "PRESIGN_METHODS", "PresignAPI"]

# Presigned URLs live at most 7 days with SigV4 ("Sharing objects with presigned URLs").
MAX_PRESIGN_SECONDS = 7 * 24 * 3600
# The requests on one object a URL can carry without a body or query of its own (S3 API,
# "Sharing objects with presigned URLs"): a POST on a key needs a query (?uploads...).
PRESIGN_METHODS = ("GET", "PUT", "HEAD", "DELETE")


class PresignAPI:
    """The :class:`~objsdk.Client` method for presigned URLs."""

    _transport: Transport

    @property
    def credentials(self) -> Credentials | None:
        """The credentials requests are signed with now (the client's)."""
        raise NotImplementedError

    def presign(
        self,
        method: str,
        bucket: str,
        key: str,
        expires: int | timedelta = 3600,
    ) -> str:
        """A URL that lets its holder perform ``method`` on the object until it expires.

        Signed for the bucket's region: the one its requests were redirected to, else
        the one the service names the first time a bucket is presigned (one HeadBucket
        per bucket, remembered; the client's region if none is named).
        The URL carries a signature: treat it as a secret, do not log it. Signed with
        temporary credentials, it stops working when they expire: ``expires`` is capped
        at the time they have left (its ``X-Amz-Expires`` says so).
        """
        check_bucket(bucket)
        check_key(key)
        where = f"(bucket {bucket!r}, key {key!r})"
        credentials = self.credentials
        if credentials is None:
            raise errors.InvalidArgument("presign needs credentials (this client is anonymous)")
        verb = method.upper() if isinstance(method, str) else method
        if verb not in PRESIGN_METHODS:
            raise errors.InvalidArgument(
                f"method must be one of {', '.join(PRESIGN_METHODS)} (any case), "
                f"got {method!r} {where}"
            )
        if isinstance(expires, timedelta):
            seconds = int(expires.total_seconds())
        elif isinstance(expires, int) and not isinstance(expires, bool):
            seconds = expires
        else:
            raise errors.InvalidArgument(
                f"expires must be seconds (an int) or a timedelta, got {expires!r} {where}"
            )
        if not 1 <= seconds <= MAX_PRESIGN_SECONDS:
            raise errors.InvalidArgument(f"expires must be 1 s to 7 days, got {seconds} s {where}")
        now = datetime.now(timezone.utc)
        if credentials.expiry is not None:
            left = int((credentials.expiry - now).total_seconds())
            if left < 1:
                raise errors.InvalidArgument(
                    f"the credentials expired at {credentials.expiry:%Y-%m-%dT%H:%M:%SZ}: "
                    f"no URL signed with them would work {where}"
                )
            seconds = min(seconds, left)
        # The bucket's route: where its requests were redirected, else asked of the
        # service once (a URL signed for the wrong region would be refused when used).
        route = self._transport.locate(bucket)
        return presign_url(
            verb,
            route.endpoint.build_url(bucket, key),
            credentials=credentials,
            region=route.region,
            now=now,
            expires=seconds,
        )
