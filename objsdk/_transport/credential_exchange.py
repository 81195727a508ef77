"""The one HTTP exchange of a credential fetch: where the transport's connection
settings (TLS verification, the client's proxies) apply to STS, SSO, the container
endpoint and the instance metadata service."""

from __future__ import annotations

from collections.abc import Mapping

from objsdk._core.proxies import Proxies
from objsdk._transport.answer import Answer
from objsdk._transport.translate import USER_AGENT, translate_errors
from objsdk._transport.wire import Wire

__all__ = ["LOCAL_PAUSE", "exchange"]

#: A pause between attempts of a local endpoint (container, metadata service) that failed.
LOCAL_PAUSE = 0.2


def exchange(
    method: str,
    url: str,
    headers: Mapping[str, str],
    body: bytes | None,
    *,
    operation: str,
    timeout: tuple[float, float],
    local: bool,
    verify: bool | str = True,
    proxies: Proxies | None = None,
) -> Answer:
    """One HTTP exchange of a credential fetch, its whole answer returned (any status);
    a failure is a :class:`~objsdk.errors.TransportError` naming ``operation``.
    ``proxies``: those of the client (``HTTPS_PROXY``...), as its S3 requests take
    them; ``local``: the container endpoint or the metadata service, reached directly
    whatever the proxies say (on loopback too, where ``NO_PROXY`` may not say so).
    Never retried here."""
    wire = Wire(verify=verify, timeout=timeout, maxsize=1, proxies=None if local else proxies)
    try:
        with translate_errors(operation, None, None):
            return wire.exchange(
                method,
                url,
                {"User-Agent": USER_AGENT, **headers},
                None if body is None else memoryview(body),
            )
    finally:
        wire.close()
