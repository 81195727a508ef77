"""Streamed answers and file bodies: requests' pooled adapter, loaded on first use.

A request whose answer is read whole and whose body is in memory goes over the
transport's own connections (:mod:`objsdk._transport.wire`), which never need requests;
this module, and requests with it, is imported the first time a transport streams an
answer or sends a file body (:attr:`objsdk._transport.http.HTTPTransport.streamed`).
So a command that only lists, heads, gets into memory or puts bytes never pays for
importing requests. Failures leave as :mod:`objsdk.errors`, exactly as on the wire.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Collection, Mapping
from typing import Any

import requests
import requests.exceptions
from requests.adapters import HTTPAdapter
from requests.structures import CaseInsensitiveDict
from urllib3.response import BaseHTTPResponse
from urllib3.util.retry import Retry

from objsdk import errors
from objsdk._core.proxies import Proxies, Proxy
from objsdk._core.secret_headers import SecretHeaders
from objsdk._transport import forks, private_api
from objsdk._transport.base import Body, flat_body
from objsdk._transport.pipeline import SignedRequest
from objsdk._transport.proxy import failure_of, refused
from objsdk._transport.refusal import MAX_ERROR_BODY, refusal
from objsdk._transport.translate import _BROKEN, translate, translate_errors

__all__ = ["Streamed", "StreamedResponse"]

log = logging.getLogger("objsdk")


class StreamedResponse:
    """A :class:`~objsdk._transport.base.Response` over a streamed requests response."""

    def __init__(
        self, resp: requests.Response, operation: str, bucket: str | None, key: str | None
    ):
        self._resp = resp
        self._raw = resp.raw
        self._fp = private_api.http_client_response(resp.raw)
        self._direct: private_api.DirectSocket | None = None
        self._where = (operation, bucket, key)
        self._ended = False  # the body was read to its end
        self._forks = forks.generation  # the process that received it (see close)
        self._body: bytes | None = None
        self.status = resp.status_code
        self.headers: Mapping[str, str] = resp.headers

    def _broken(self, e: BaseException) -> errors.ObjsdkError:
        return translate(e, *self._where)

    @property
    def content(self) -> bytes:
        # Stored bytes: never decoded, whatever Content-Encoding says.
        if self._body is None:
            try:
                self._body = bytes(self._raw.read(decode_content=False))
            except _BROKEN as e:
                raise self._broken(e) from e
            self._ended = True
        return self._body

    def read(self, n: int) -> bytes:
        try:
            if self._direct is not None:
                data = self._direct.recv(n, whole=True)
            elif n >= _DIRECT_MIN and private_api.DirectSocket.eligible(self._raw, self._fp):
                assert self._fp is not None
                self._direct, data = private_api.DirectSocket.take_bytes(self._raw, self._fp, n)
                if self._direct.left == 0:
                    self._direct.done()
                elif len(data) < n:
                    # What http.client had buffered is short of n: the rest now, so
                    # this read is whole like every other, and the reads after it stay
                    # aligned with the caller's (one join, once per body).
                    data += self._direct.recv(n - len(data), whole=True)
            elif self._fp is not None:
                data = self._fp.read(n)
            else:
                data = self._raw.read(n, decode_content=False)
        except _BROKEN as e:
            raise self._broken(e) from e
        self._note(len(data), n)
        return data

    def read1(self, n: int) -> bytes:
        try:
            if self._direct is not None:
                data = self._direct.recv(n, whole=False)
            elif self._fp is not None:
                data = self._fp.read1(n)
            else:
                data = self._raw.read1(n, decode_content=False)
        except _BROKEN as e:
            raise self._broken(e) from e
        self._note(len(data), n)
        return data

    def readinto(self, view: memoryview) -> int:
        try:
            if self._direct is not None:
                n = self._direct.recv_into(view, whole=True)
            elif len(view) >= _DIRECT_MIN and private_api.DirectSocket.eligible(
                self._raw, self._fp
            ):
                assert self._fp is not None
                self._direct, n = private_api.DirectSocket.take(self._raw, self._fp, view)
                if self._direct.left == 0:
                    self._direct.done()
            elif self._fp is not None:
                n = self._fp.readinto(view)
            else:
                n = self._raw.readinto(view)
        except _BROKEN as e:
            raise self._broken(e) from e
        self._note(n, len(view))
        return n

    def _note(self, got: int, asked: int) -> None:
        if (
            (asked and not got)
            or (self._direct is not None and self._direct.left == 0)
            or (self._fp is not None and self._fp.isclosed())
        ):
            self._ended = True

    def close(self) -> None:
        if self._forks != forks.generation:
            # A forked child's copy of its parent's connection: its descriptor is closed
            # and nothing else, so the parent reads on (no shutdown, no socket options
            # restored, and no pool of the parent's taken to put it back in).
            self._raw.close()
            return
        if self._ended and (self._fp is None or self._fp.isclosed()):
            # Read whole: the connection carries the next request.
            self._raw.release_conn()
            return
        if self._direct is not None:
            self._direct.restore()
        self._resp.close()


# Reads at least this large may switch a plain-HTTP body to direct socket reads.
_DIRECT_MIN = 256 * 1024


class _Adapter(HTTPAdapter):
    """requests' adapter, answering with the response and nothing else.

    ``build_response`` is the adapter's documented extension point. requests' own builds
    a case-insensitive copy of the headers and reads cookies into a jar; signed S3
    requests carry no cookies, and urllib3's headers are case-insensitive already.

    So are ``proxy_headers``, ``proxy_manager_for`` and ``cert_verify``: a proxy is named
    to requests by its URL without credentials (which would otherwise show in urllib3's
    errors and reprs), and its ``Proxy-Authorization`` comes from ``authorizations``; the
    proxy managers' pools report to the thread's watch like the direct ones; an https
    proxy's certificate is checked as the wire checks it.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.authorizations: dict[str, str] = {}  # proxy URL -> Proxy-Authorization
        super().__init__(*args, **kwargs)

    def proxy_headers(self, proxy: str) -> dict[str, str]:
        authorization = self.authorizations.get(proxy)
        if authorization is None:
            return {}
        return SecretHeaders({"Proxy-Authorization": authorization})

    def cert_verify(self, conn: Any, url: str, verify: Any, cert: Any) -> None:
        if url[:5].lower() == "http:" and getattr(conn, "scheme", None) == "https":
            # An http URL on a pool speaking TLS: an https proxy's, whose certificate
            # requests would leave unchecked for an http URL.
            url = "https:" + url[5:]
        super().cert_verify(conn, url, verify, cert)  # type: ignore[no-untyped-call]

    def proxy_manager_for(self, proxy: str, **proxy_kwargs: Any) -> Any:
        fresh = proxy not in self.proxy_manager
        manager = super().proxy_manager_for(proxy, **proxy_kwargs)
        if fresh:
            private_api.install_watched_pools(manager)
        return manager

    def build_response(
        self, req: requests.PreparedRequest, resp: BaseHTTPResponse
    ) -> requests.Response:
        response = requests.Response()
        response.status_code = resp.status
        response.headers = resp.headers  # type: ignore[assignment]
        response.raw = resp
        response.reason = resp.reason or ""
        response.url = req.url or ""
        response.request = req
        response.connection = self
        return response


class Streamed:
    """requests' pooled adapter for one transport: prepares and sends the requests whose
    answer is streamed or whose body is a file. ``verify``, ``timeout`` and ``proxies``
    as the transport's; at most ``max_pool_connections`` kept per host."""

    def __init__(
        self,
        *,
        max_pool_connections: int,
        verify: bool | str,
        timeout: tuple[float, float],
        proxies: Proxies | None = None,
    ) -> None:
        self.verify = verify
        self.timeout = timeout
        self.proxies = proxies or None
        # scheme://netloc -> (what adapter.send takes as proxies, the proxy)
        self._routes: dict[str, tuple[dict[str, str], Proxy | None]] = {}
        # urllib3 sends each attempt once and raises what broke it: the pipeline's loop
        # is the only one that retries.
        self.adapter = _Adapter(
            pool_connections=4,
            pool_maxsize=max_pool_connections,
            max_retries=Retry(total=False, redirect=False, raise_on_status=False),
        )
        private_api.install_watched_pools(self.adapter.poolmanager)

    def close(self) -> None:
        self.adapter.close()

    def abandon(self) -> None:
        """In a forked child: close this process's descriptors of the pooled sockets,
        taking none of urllib3's locks and leaving the parent's connections as they are;
        the adapter is not used again."""
        private_api.close_pooled_sockets(self.adapter)

    def prepare(
        self, request: SignedRequest, body: Body, content_length: int | None
    ) -> requests.PreparedRequest:
        """The signed request as requests sends it, with its body (never copied)."""
        # Built here rather than by requests.Request.prepare(): the URL is the one
        # signed (requests would re-quote it and urllib3 would collapse '.'/'..'
        # segments, RFC 3986 §5.2.4, both of which change the key), there are no
        # params, cookies or auth to merge, and the signer has already refused any
        # header value with a CR, LF or NUL (requests' own header check).
        prepared = requests.PreparedRequest()
        prepared.method = request.method
        prepared.url = request.url
        prepared.headers = CaseInsensitiveDict(request.headers)
        if body is not None:
            data, length = _as_requests_body(body, content_length)
            prepared.prepare_body(data, None)
            # Always a plain Content-Length: S3 refuses chunked transfer encoding on PUT.
            prepared.headers.pop("Transfer-Encoding", None)
            prepared.headers["Content-Length"] = str(length)
        return prepared

    def send(
        self,
        prepared: requests.PreparedRequest,
        method: str,
        operation: str,
        bucket: str | None,
        key: str | None,
        stream: bool,
        ok: Collection[int],
    ) -> StreamedResponse:
        """Send ``prepared``; an answer not in ``ok`` is raised as its S3 error. Without
        ``stream`` the body is read whole before returning."""
        proxies, proxy = _DIRECT if self.proxies is None else self._route(prepared.url)
        with translate_errors(operation, bucket, key, prepared.url):
            # The adapter itself, not a Session: no cookie jars, hooks or redirects (a
            # 3xx is answered as an error), and no .netrc to re-authenticate a request
            # whose signature covers the Host we chose. The proxy is the one the wire
            # would take for this origin (objsdk._core.proxies), never requests' own
            # reading of the environment at each request.
            try:
                resp = self.adapter.send(
                    prepared, stream=True, timeout=self.timeout, verify=self.verify, proxies=proxies
                )
            except requests.exceptions.ProxyError as e:
                if proxy is None:
                    raise
                raise failure_of(proxy, e) from e
        log.debug("%s %s/%s -> %s", method, bucket or "", key or "", resp.status_code)
        answer = StreamedResponse(resp, operation, bucket, key)
        if resp.status_code == 407 and proxy is not None:
            # The proxy's answer, not the server's (RFC 9110 §15.5.8).
            resp.close()
            failure = refused(proxy, 407, resp.reason or "Proxy Authentication Required")
            raise translate(failure, operation, bucket, key) from failure
        if resp.status_code not in ok:
            try:
                # The body is never a local here: an error body may echo the request,
                # signature and session token included (SignatureDoesNotMatch).
                raise refusal(
                    resp.status_code,
                    resp.headers,
                    _error_body(resp, method),
                    operation,
                    bucket,
                    key,
                )
            finally:
                resp.close()
        if not stream:
            try:
                _ = answer.content
            finally:
                answer.close()
        return answer

    def _route(self, url: str | None) -> tuple[dict[str, str], Proxy | None]:
        """The proxies ``adapter.send`` takes for ``url``, and the proxy (once per
        origin)."""
        assert url is not None
        assert self.proxies is not None
        scheme, _, rest = url.partition("://")
        origin = f"{scheme}://{rest.partition('/')[0]}"
        route = self._routes.get(origin)
        if route is None:
            proxy = self.proxies.for_url(origin + "/")
            if proxy is None:
                route = _DIRECT
            else:
                # Credentials stay out of the URL requests and urllib3 see (their
                # errors and reprs show it); the adapter adds them as a header.
                if proxy.authorization is not None:
                    self.adapter.authorizations[proxy.url] = proxy.authorization
                route = ({scheme: proxy.url}, proxy)
            self._routes[origin] = route
        return route


_DIRECT: tuple[dict[str, str], Proxy | None] = ({}, None)


def _error_body(resp: requests.Response, method: str) -> bytes:
    """What an error answer's body says, up to MAX_ERROR_BODY (a HEAD's: nothing)."""
    if method == "HEAD":
        return b""
    with contextlib.suppress(Exception):
        return resp.raw.read(MAX_ERROR_BODY, decode_content=True) or b""
    return b""


def _as_requests_body(body: Body, content_length: int | None) -> tuple[Any, int]:
    """Hand a body to requests without copying it; return it with its length.

    A ``bytearray`` or ``memoryview`` goes as a flat byte memoryview, which urllib3
    sends with one ``sendall`` of the buffer itself.
    """
    if isinstance(body, (bytes, bytearray, memoryview)):
        view = flat_body(body)
        if view.nbytes == 0:
            return b"", 0
        if isinstance(body, bytes):
            return body, view.nbytes
        return view, view.nbytes
    if content_length is None:
        raise errors.InvalidArgument("a file body needs its content_length")
    if content_length == 0:
        return b"", 0
    return body, content_length
