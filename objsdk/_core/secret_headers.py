"""``SecretHeaders``: a request's headers, some of which are credentials (pure).

A signed request carries its signature in ``Authorization``, the session token in
``x-amz-security-token`` and SSE-C's key in ``x-amz-server-side-encryption-customer-key``
(or its copy-source twin), and a proxy's credentials go in ``Proxy-Authorization``.
Whatever holds those headers may be shown by ``repr``: in a
log, or in a traceback whose locals an error reporter keeps
(``traceback.TracebackException(..., capture_locals=True)``, Sentry). This dict shows
their values as ``<hidden>``; in every other way it is the dict it is (http.client,
urllib3 and requests send it as any mapping), and costs nothing more until it is shown.
"""

from __future__ import annotations

__all__ = ["SECRET_HEADERS", "SecretHeaders"]

#: The headers whose values are credentials, lowercase.
SECRET_HEADERS = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "x-amz-security-token",
        "x-amz-server-side-encryption-customer-key",
        "x-amz-copy-source-server-side-encryption-customer-key",
    }
)


class SecretHeaders(dict[str, str]):
    """Header names to values, with the values of :data:`SECRET_HEADERS` (in any case)
    hidden from ``repr`` and ``str``."""

    __slots__ = ()

    def __repr__(self) -> str:
        shown = {
            name: "<hidden>" if name.lower() in SECRET_HEADERS else value
            for name, value in self.items()
        }
        return f"{type(self).__name__}({shown!r})"
