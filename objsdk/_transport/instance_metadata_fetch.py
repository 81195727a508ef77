"""Fetching credentials from the EC2 instance metadata service: IMDSv2 (a token, then
the role, then its credentials) with ``AWS_METADATA_SERVICE_TIMEOUT`` and
``_NUM_ATTEMPTS``; IMDSv1 when the token request is refused or times out, unless
``AWS_EC2_METADATA_V1_DISABLED``. What to send and how to read the answers is
:mod:`objsdk._core.instance_metadata`'s."""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Mapping
from datetime import datetime, timedelta, timezone

import urllib3.exceptions

from objsdk import errors
from objsdk._core.instance_metadata import InstanceMetadata, TokenOutcome, extend_stale_expiry
from objsdk._core.signing import Credentials
from objsdk._transport.answer import Answer
from objsdk._transport.credential_exchange import LOCAL_PAUSE, exchange

__all__ = ["InstanceMetadataFetch"]

log = logging.getLogger("objsdk")

# The remedy when the token request times out: on EC2, a container's requests take one
# more network hop, and the token's answer is sent with the instance's hop limit (1 by
# default), so it never arrives ("Instance metadata access considerations", EC2 guide).
_HOP_LIMIT = (
    "the IMDSv2 token request timed out: inside a container (Docker, EKS, ECS on EC2) "
    "the answer needs 2 network hops and the instance's hop limit is 1; raise it "
    "(aws ec2 modify-instance-metadata-options --instance-id ID "
    "--http-put-response-hop-limit 2), or give this container another credential source"
)


class InstanceMetadataFetch:
    """One instance's metadata service; remembers the last credentials it handed out
    (for the service's stale credentials, see ``extend_stale_expiry``)."""

    def __init__(self, source: InstanceMetadata) -> None:
        self.source = source
        self.last: Credentials | None = None

    def __call__(self) -> Credentials:
        source = self.source
        token, timed_out = self._token()
        if token is None and source.v1_disabled:
            reason = _HOP_LIMIT if timed_out else "the service gave no IMDSv2 token"
            raise errors.CredentialsError(
                f"{source.describe()}: {reason}, and IMDSv1 is disabled "
                "(AWS_EC2_METADATA_V1_DISABLED / ec2_metadata_v1_disabled)"
            )
        url, headers = source.role_request(token)
        role = source.parse_role(self._get(url, headers, "its IAM role", timed_out).content)
        url, headers = source.credentials_request(role, token)
        answer = self._get(url, headers, f"the credentials of role {role}", timed_out)
        credentials = source.parse_answer(answer.content)
        last, self.last = self.last, credentials
        if last is not None and last.access_key == credentials.access_key:
            # The service handed out the same credentials again: it could not renew
            # them. AWS keeps accepting them for a while; ask again in some minutes.
            jitter = timedelta(seconds=random.randint(120, 600))
            expiry = extend_stale_expiry(credentials.expiry, datetime.now(timezone.utc), jitter)
            if expiry != credentials.expiry:
                log.warning(
                    "%s handed out credentials that expire soon again; keeping them "
                    "and asking again at %s",
                    source.describe(),
                    f"{expiry:%H:%M:%SZ}" if expiry else "?",
                )
                credentials = Credentials(
                    credentials.access_key,
                    credentials.secret_key,
                    credentials.session_token,
                    expiry,
                )
        return credentials

    def _token(self) -> tuple[str | None, bool]:
        """The IMDSv2 session token (None: ask without one), and whether the token
        request timed out."""
        source = self.source
        url, headers = source.token_request()
        for _ in range(source.attempts):
            try:
                answer = self._exchange("PUT", url, headers)
            except errors.Timeout as e:
                # botocore's answer to a token request that timed out: try IMDSv1.
                log.debug("%s: %s", source.describe(), e)
                return None, isinstance(e.__cause__, urllib3.exceptions.ReadTimeoutError)
            except errors.TransportError as e:
                log.debug("%s: %s", source.describe(), e)
                return None, False
            outcome = source.token_outcome(answer.status)
            if outcome is TokenOutcome.TOKEN:
                return answer.content.decode("ascii", "replace").strip(), False
            if outcome is TokenOutcome.WITHOUT_TOKEN:
                return None, False
        return None, False

    def _get(self, url: str, headers: Mapping[str, str], what: str, timed_out: bool) -> Answer:
        source = self.source
        failure = ""
        for attempt in range(1, source.attempts + 1):
            try:
                answer = self._exchange("GET", url, headers)
            except errors.TransportError as e:
                failure = f"did not answer ({e})"
            else:
                if answer.status == 200:
                    return answer
                failure = f"answered HTTP {answer.status}"
                if answer.status == 404:
                    raise errors.CredentialsError(
                        f"{source.describe()} has no {what} (HTTP 404): is an IAM role "
                        "attached to the instance?"
                    )
                if answer.status == 401 and timed_out:
                    raise errors.CredentialsError(f"{source.describe()}: {_HOP_LIMIT}")
            if attempt < source.attempts:
                time.sleep(LOCAL_PAUSE)
        before = (
            f"profile `{source.fallback_for}` gives none"
            if source.fallback_for
            else "the environment and the AWS shared files give none"
        )
        raise errors.CredentialsError(
            f"no credentials: {before}, and {source.describe()} {failure} when asked for "
            f"{what} (not on EC2? see docs/credentials.md for the sources; "
            "AWS_EC2_METADATA_DISABLED=true skips this one)"
        )

    def _exchange(self, method: str, url: str, headers: Mapping[str, str]) -> Answer:
        timeout = self.source.timeout
        return exchange(
            method,
            url,
            headers,
            b"" if method == "PUT" else None,
            operation="instance metadata",
            timeout=(timeout, timeout),
            local=True,
        )
