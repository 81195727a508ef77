"""Real temporary credentials for tests, from a MinIO's STS, declared to expire soon.

The credential emulators (:mod:`objsdk.testing.credential_servers`) hand out what
:class:`TemporaryCredentials` gets from MinIO's ``AssumeRole``: keys MinIO accepts, so
a client that reads a source wrongly fails on MinIO's signature check. MinIO gives
them at least 15 minutes; to test refreshing in seconds, each set is *declared* to
expire after :attr:`TemporaryCredentials.lifetime` (the ``Expiration`` the emulators
answer), and :meth:`TemporaryCredentials.refuse`, given to a
:class:`~objsdk.testing.faultproxy.FaultProxy` in front of MinIO, answers
``400 ExpiredToken`` to any request signed with a set past its declared expiry, as AWS
does::

    keys = TemporaryCredentials.of(local_minio, lifetime=20)
    with FaultProxy(local_minio.endpoint, refuse=keys.refuse) as proxy:
        ...  # a client of proxy.endpoint whose source hands out keys.issue()
"""

from __future__ import annotations

import hashlib
import http.client
import re
import threading
import time
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from objsdk._core.signing import Credentials, sign_request
from objsdk._core.sts import parse_sts_credentials, sts_request

__all__ = ["TemporaryCredentials", "form"]

# MinIO's shortest lifetime for AssumeRole (as STS's).
_MINIO_DURATION = 900
_EXPIRATION = re.compile(rb"<Expiration>[^<]*</Expiration>")
_CREDENTIAL = re.compile(r"Credential=([^/,\s]+)/")


def _timestamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


class TemporaryCredentials:
    """AssumeRole on the STS at ``endpoint`` (MinIO's S3 endpoint) with the user
    ``access_key``/``secret_key``; every set handed out is declared to expire
    ``lifetime`` seconds after it was issued. Thread-safe; the secret never appears
    in a repr."""

    def __init__(
        self,
        endpoint: str,
        access_key: str,
        secret_key: str,
        *,
        lifetime: float = 20.0,
        region: str = "us-east-1",
    ) -> None:
        self.endpoint = endpoint.rstrip("/")
        self._user = Credentials(access_key, secret_key)
        self.lifetime = lifetime
        self.region = region
        self._lock = threading.Lock()
        self._expiries: dict[str, float] = {}
        #: Every set handed out, oldest first.
        self.issued: list[Credentials] = []
        #: How many requests :meth:`refuse` answered ExpiredToken.
        self.refused = 0

    @classmethod
    def of(cls, server: Any, **kwargs: Any) -> TemporaryCredentials:
        """For a :class:`~objsdk.testing.LocalMinio` (or anything with ``endpoint``,
        ``access_key``, ``secret_key``)."""
        return cls(server.endpoint, server.access_key, server.secret_key, **kwargs)

    def __repr__(self) -> str:
        return (
            f"TemporaryCredentials({self.endpoint}, lifetime={self.lifetime:g} s, "
            f"issued={len(self.issued)})"
        )

    # -- handing out -------------------------------------------------------------------

    def issue(self) -> Credentials:
        """A new set from MinIO's STS, declared to expire :attr:`lifetime` s from now."""
        request = sts_request(
            "AssumeRole",
            self.endpoint + "/",
            self.region,
            {"DurationSeconds": _MINIO_DURATION},
        )
        headers = dict(request.headers)
        headers.update(
            sign_request(
                "POST",
                request.url,
                headers,
                credentials=self._user,
                region=request.region,
                now=datetime.now(timezone.utc),
                payload_hash=hashlib.sha256(request.body).hexdigest(),
                service="sts",
            )
        )
        status, body = self.forward("POST", "/", headers, request.body)
        if status != 200:
            raise RuntimeError(f"MinIO's AssumeRole answered {status}: {body[:300]!r}")
        return self.declare(parse_sts_credentials(body, "AssumeRole"))

    def declare(self, credentials: Credentials) -> Credentials:
        """``credentials`` with the expiry this object declares, remembered for
        :meth:`refuse`."""
        expires = time.time() + self.lifetime
        declared = Credentials(
            credentials.access_key,
            credentials.secret_key,
            credentials.session_token,
            datetime.fromtimestamp(expires, timezone.utc),
        )
        with self._lock:
            self._expiries[credentials.access_key] = expires
            self.issued.append(declared)
        return declared

    def declared_answer(self, body: bytes, action: str) -> bytes:
        """An STS success answer (MinIO's ``AssumeRole``) with its credentials declared
        (see :meth:`declare`): its ``Expiration`` replaced."""
        declared = self.declare(parse_sts_credentials(body, action))
        assert declared.expiry is not None
        stamp = f"<Expiration>{_timestamp(declared.expiry)}</Expiration>".encode()
        return _EXPIRATION.sub(stamp, body, count=1)

    def forward(
        self, method: str, path: str, headers: Mapping[str, str], body: bytes
    ) -> tuple[int, bytes]:
        """Send a request to MinIO as it is (its ``Host`` too: a signature made for
        another address stays valid); its status and body."""
        parts = urlsplit(self.endpoint)
        conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=30)
        try:
            conn.request(method, path, body=body, headers=dict(headers))
            answer = conn.getresponse()
            return answer.status, answer.read()
        finally:
            conn.close()

    # -- refusing ----------------------------------------------------------------------

    def expired(self, access_key: str, now: float | None = None) -> bool:
        """Whether ``access_key`` is one of the sets handed out, past its declared
        expiry."""
        with self._lock:
            expires = self._expiries.get(access_key)
        return expires is not None and (time.time() if now is None else now) >= expires

    def refuse(
        self,
        method: str,
        path: str,
        query: Mapping[str, str],
        headers: Sequence[tuple[str, str]],
    ) -> tuple[int, str, str] | None:
        """For ``FaultProxy(refuse=...)``: ``400 ExpiredToken`` for a request signed
        (header or presigned query) with a set past its declared expiry."""
        key = None
        for name, value in headers:
            if name.lower() == "authorization":
                found = _CREDENTIAL.search(value)
                key = found.group(1) if found else None
        credential = query.get("X-Amz-Credential")
        if key is None and credential:
            key = credential.partition("/")[0]
        if key is None or not self.expired(key):
            return None
        with self._lock:
            self.refused += 1
        return 400, "ExpiredToken", "The provided token has expired."


def form(body: bytes) -> dict[str, str]:
    """A form-encoded body's fields."""
    return dict(parse_qsl(body.decode("utf-8"), keep_blank_values=True))
