"""Loopback stand-ins for the services AWS hands out temporary credentials from: the
EC2 instance metadata service (IMDSv2), the container credentials endpoint (ECS, EKS
Pod Identity), STS (``AssumeRoleWithWebIdentity``, and ``AssumeRole`` passed on to
MinIO) and the IAM Identity Center portal with its OIDC token service (SSO).

Each answers with real temporary credentials from a
:class:`~objsdk.testing.temporary_credentials.TemporaryCredentials` (MinIO's STS),
declared to expire soon; each checks what a client must send (the IMDSv2 token, the
container authorization token, the web identity token, the SSO bearer token) and
records what it was asked (:attr:`CredentialServer.requests`). Standard library only::

    keys = TemporaryCredentials.of(local_minio, lifetime=20)
    with InstanceMetadataServer(keys) as imds:
        env = {"AWS_EC2_METADATA_SERVICE_ENDPOINT": imds.endpoint, ...}
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit
from xml.sax.saxutils import escape

from objsdk._core.signing import Credentials
from objsdk.testing.lifecycle import StartStop
from objsdk.testing.temporary_credentials import TemporaryCredentials, form

__all__ = [
    "ContainerCredentialsServer",
    "CredentialServer",
    "InstanceMetadataServer",
    "Served",
    "SsoPortal",
    "StsServer",
]


@dataclass(frozen=True)
class Served:
    """One request a server answered: method, path (with its query) and status."""

    method: str
    path: str
    status: int


@dataclass
class _Reply:
    status: int
    body: bytes = b""
    content_type: str = "application/json"


def _stamp(moment: datetime | None) -> str:
    assert moment is not None
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


class CredentialServer(StartStop):
    """An HTTP server on a loopback port whose answers come from :meth:`answer`."""

    name = "credential server"
    error = RuntimeError

    def __init__(self, keys: TemporaryCredentials, *, host: str = "127.0.0.1") -> None:
        self.keys = keys
        self.host = host
        self.port: int | None = None
        #: Every request answered, oldest first.
        self.requests: list[Served] = []
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._stopping = threading.Event()

    @property
    def endpoint(self) -> str:
        """``http://host:port``."""
        return self._http_url()

    def __repr__(self) -> str:
        where = self.endpoint if self.port is not None else "unstarted"
        return f"{type(self).__name__}({where})"

    def start(self) -> CredentialServer:
        if self._server is not None:
            return self
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_any(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                headers = {name.lower(): value for name, value in self.headers.items()}
                reply = owner.answer(self.command, self.path, headers, body)
                if reply is None:  # never answer (a hop limit, a black hole)
                    owner._stopping.wait()
                    self.close_connection = True
                    return
                owner._record(Served(self.command, self.path, reply.status))
                self.send_response(reply.status)
                self.send_header("Content-Type", reply.content_type)
                self.send_header("Content-Length", str(len(reply.body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(reply.body)

            do_GET = do_PUT = do_POST = do_HEAD = do_any

            def log_message(self, format: str, *args: Any) -> None:
                pass  # tests read self.requests

        self._stopping.clear()
        server = ThreadingHTTPServer((self.host, 0), Handler)
        server.daemon_threads = True
        self._server = server
        self.port = server.server_address[1]
        self._thread = threading.Thread(
            target=server.serve_forever, name=f"{type(self).__name__}", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None

    def _record(self, served: Served) -> None:
        with self._lock:
            self.requests.append(served)

    def answer(self, method: str, path: str, headers: dict[str, str], body: bytes) -> _Reply | None:
        """The reply to one request (None: never answer it)."""
        raise NotImplementedError

    @staticmethod
    def credentials_json(credentials: Credentials, token_field: str = "Token") -> bytes:
        return json.dumps(
            {
                "AccessKeyId": credentials.access_key,
                "SecretAccessKey": credentials.secret_key,
                token_field: credentials.session_token,
                "Expiration": _stamp(credentials.expiry),
            }
        ).encode()


class InstanceMetadataServer(CredentialServer):
    """The EC2 instance metadata service of an instance with role ``role``: IMDSv2
    (``PUT /latest/api/token``, then ``GET`` with the token), and IMDSv1 (``GET``
    without a token) unless ``v2_only``. ``hop_limit_exceeded``: the token request
    is never answered, as in a container on an instance whose hop limit is 1. The
    first ``failures`` requests for the role's credentials are answered 500."""

    name = "InstanceMetadataServer"

    def __init__(
        self,
        keys: TemporaryCredentials,
        *,
        role: str = "objsdk-test-role",
        v2_only: bool = True,
        hop_limit_exceeded: bool = False,
        failures: int = 0,
        host: str = "127.0.0.1",
    ) -> None:
        super().__init__(keys, host=host)
        self.role = role
        self.v2_only = v2_only
        self.hop_limit_exceeded = hop_limit_exceeded
        self.failures = failures
        self._tokens: set[str] = set()

    def answer(self, method: str, path: str, headers: dict[str, str], body: bytes) -> _Reply | None:
        url = urlsplit(path).path
        if url == "/latest/api/token":
            if method != "PUT":
                return _Reply(405)
            if "x-aws-ec2-metadata-token-ttl-seconds" not in headers:
                return _Reply(400)
            if self.hop_limit_exceeded:
                return None
            issued = secrets.token_urlsafe(24)
            self._tokens.add(issued)
            return _Reply(200, issued.encode(), "text/plain")
        token = headers.get("x-aws-ec2-metadata-token")
        if (token is None and self.v2_only) or (token is not None and token not in self._tokens):
            return _Reply(401)
        listing = "/latest/meta-data/iam/security-credentials/"
        if url == listing:
            return _Reply(200, self.role.encode(), "text/plain")
        if url == listing + self.role:
            with self._lock:
                failing = self.failures > 0
                self.failures -= failing
            if failing:
                return _Reply(500)
            credentials = self.keys.issue()
            document = json.loads(self.credentials_json(credentials))
            document.update(Code="Success", Type="AWS-HMAC", LastUpdated=_stamp(credentials.expiry))
            return _Reply(200, json.dumps(document).encode())
        return _Reply(404)


class ContainerCredentialsServer(CredentialServer):
    """The container credentials endpoint at :attr:`path`, answering only requests
    whose ``Authorization`` is ``token`` (when given); the first ``failures``
    requests are answered 500."""

    name = "ContainerCredentialsServer"

    def __init__(
        self,
        keys: TemporaryCredentials,
        *,
        token: str | None = None,
        path: str = "/v2/credentials/objsdk-test",
        failures: int = 0,
        host: str = "127.0.0.1",
    ) -> None:
        super().__init__(keys, host=host)
        self.token = token
        self.path = path
        self.failures = failures

    @property
    def url(self) -> str:
        """The full URI (``AWS_CONTAINER_CREDENTIALS_FULL_URI``)."""
        return self.endpoint + self.path

    def answer(self, method: str, path: str, headers: dict[str, str], body: bytes) -> _Reply | None:
        if method != "GET" or path != self.path:
            return _Reply(404)
        if self.token is not None and headers.get("authorization") != self.token:
            return _Reply(401 if "authorization" not in headers else 403)
        with self._lock:
            failing = self.failures > 0
            self.failures -= failing
        if failing:
            return _Reply(500)
        return _Reply(200, self.credentials_json(self.keys.issue()))


class StsServer(CredentialServer):
    """STS: ``AssumeRoleWithWebIdentity`` of ``role_arn`` for the web identity token
    ``web_token`` (answered with a new set), and ``AssumeRole`` passed on to MinIO
    as signed (MinIO checks the signature), its ``Expiration`` declared."""

    name = "StsServer"

    def __init__(
        self,
        keys: TemporaryCredentials,
        *,
        web_token: str,
        role_arn: str,
        host: str = "127.0.0.1",
    ) -> None:
        super().__init__(keys, host=host)
        self.web_token = web_token
        self.role_arn = role_arn
        #: The RoleSessionName of each call, oldest first.
        self.session_names: list[str] = []

    def answer(self, method: str, path: str, headers: dict[str, str], body: bytes) -> _Reply | None:
        fields = form(body) if method == "POST" else dict(parse_qsl(urlsplit(path).query))
        action = fields.get("Action")
        self.session_names.append(fields.get("RoleSessionName", ""))
        if action == "AssumeRole":
            status, answer = self.keys.forward(method, path, headers, body)
            if status == 200:
                answer = self.keys.declared_answer(answer, "AssumeRole")
            return _Reply(status, answer, "text/xml")
        if action != "AssumeRoleWithWebIdentity":
            return _error(400, "InvalidAction", f"unknown action {action!r}")
        if "authorization" in headers:
            return _error(400, "InvalidParameterValue", "AssumeRoleWithWebIdentity is unsigned")
        if fields.get("WebIdentityToken") != self.web_token:
            return _error(400, "InvalidIdentityToken", "the token is not valid")
        if fields.get("RoleArn") != self.role_arn:
            return _error(403, "AccessDenied", "not authorized to assume that role")
        credentials = self.keys.issue()
        result = (
            "<AssumeRoleWithWebIdentityResponse xmlns="
            '"https://sts.amazonaws.com/doc/2011-06-15/"><AssumeRoleWithWebIdentityResult>'
            f"<Credentials><AccessKeyId>{escape(credentials.access_key)}</AccessKeyId>"
            f"<SecretAccessKey>{escape(credentials.secret_key)}</SecretAccessKey>"
            f"<SessionToken>{escape(credentials.session_token or '')}</SessionToken>"
            f"<Expiration>{_stamp(credentials.expiry)}</Expiration></Credentials>"
            "</AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>"
        )
        return _Reply(200, result.encode(), "text/xml")


def _error(status: int, code: str, message: str) -> _Reply:
    body = (
        f"<ErrorResponse><Error><Type>Sender</Type><Code>{code}</Code>"
        f"<Message>{escape(message)}</Message></Error><RequestId>stub</RequestId>"
        "</ErrorResponse>"
    )
    return _Reply(status, body.encode(), "text/xml")


class SsoPortal(CredentialServer):
    """The IAM Identity Center portal (``GET /federation/credentials``) of role
    ``role_name`` in account ``account_id``, for the bearer token
    :attr:`access_token`; and the SSO OIDC token service (``POST /token``), which
    renews it for ``client_id``/``client_secret``/:attr:`refresh_token` (each renewal
    a new access token and refresh token, the old ones refused)."""

    name = "SsoPortal"

    def __init__(
        self,
        keys: TemporaryCredentials,
        *,
        account_id: str = "123456789012",
        role_name: str = "objsdk-reader",
        client_id: str = "objsdk-client",
        client_secret: str | None = None,
        host: str = "127.0.0.1",
    ) -> None:
        super().__init__(keys, host=host)
        self.account_id = account_id
        self.role_name = role_name
        self.client_id = client_id
        self.client_secret = client_secret or secrets.token_urlsafe(24)
        self.access_token = secrets.token_urlsafe(24)
        self.refresh_token = secrets.token_urlsafe(24)
        #: Seconds a renewed access token lasts.
        self.token_lifetime = 3600
        self.renewals = 0

    def answer(self, method: str, path: str, headers: dict[str, str], body: bytes) -> _Reply | None:
        url = urlsplit(path)
        if method == "POST" and url.path == "/token":
            return self._create_token(body)
        if method != "GET" or url.path != "/federation/credentials":
            return _Reply(404)
        query = dict(parse_qsl(url.query))
        if headers.get("x-amz-sso_bearer_token") != self.access_token:
            return _Reply(401, b'{"message":"Session token not found or invalid"}')
        if (query.get("role_name"), query.get("account_id")) != (self.role_name, self.account_id):
            return _Reply(403, b'{"message":"No access"}')
        credentials = self.keys.issue()
        assert credentials.expiry is not None
        role = {
            "accessKeyId": credentials.access_key,
            "secretAccessKey": credentials.secret_key,
            "sessionToken": credentials.session_token,
            "expiration": int(credentials.expiry.timestamp() * 1000),
        }
        return _Reply(200, json.dumps({"roleCredentials": role}).encode())

    def _create_token(self, body: bytes) -> _Reply:
        try:
            request = json.loads(body)
        except ValueError:
            return _Reply(400, b'{"error":"invalid_request"}')
        valid = (
            request.get("grantType") == "refresh_token"
            and request.get("clientId") == self.client_id
            and request.get("clientSecret") == self.client_secret
            and request.get("refreshToken") == self.refresh_token
        )
        if not valid:
            return _Reply(400, b'{"error":"invalid_grant"}')
        with self._lock:
            self.access_token = secrets.token_urlsafe(24)
            self.refresh_token = secrets.token_urlsafe(24)
            self.renewals += 1
        answer = {
            "accessToken": self.access_token,
            "expiresIn": self.token_lifetime,
            "refreshToken": self.refresh_token,
            "tokenType": "Bearer",
        }
        return _Reply(200, json.dumps(answer).encode())

    def cache(
        self,
        *,
        start_url: str,
        region: str,
        expires_in: float = 3600,
        renewable: bool = True,
    ) -> str:
        """The JSON ``aws sso login`` writes to ``~/.aws/sso/cache`` for this portal's
        login, its token expiring ``expires_in`` s from now (negative: expired)."""
        now = time.time()
        document: dict[str, Any] = {
            "startUrl": start_url,
            "region": region,
            "accessToken": self.access_token,
            "expiresAt": _stamp(datetime.fromtimestamp(now + expires_in, timezone.utc)),
        }
        if renewable:
            document.update(
                clientId=self.client_id,
                clientSecret=self.client_secret,
                refreshToken=self.refresh_token,
                registrationExpiresAt=_stamp(datetime.fromtimestamp(now + 86400, timezone.utc)),
            )
        return json.dumps(document)
