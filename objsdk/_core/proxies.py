"""Which proxy a request goes through: ``HTTP_PROXY``, ``HTTPS_PROXY`` and ``NO_PROXY``,
read as boto3 reads them.

:meth:`Proxies.from_environ` reads the environment once, when a client is built (botocore
reads it when it makes a client's endpoint); :meth:`Proxies.for_url` then says, for each
URL, the :class:`Proxy` to go through or None (directly). The transport asks it once per
origin, never per request.

The variables, as urllib and requests read them:

* ``http_proxy`` / ``HTTP_PROXY`` for ``http://`` URLs, ``https_proxy`` / ``HTTPS_PROXY``
  for ``https://`` URLs; the lower-case name wins, and a lower-case one set empty turns
  the upper-case one off. ``HTTP_PROXY`` is ignored when ``REQUEST_METHOD`` is set (a CGI
  script, where a client's ``Proxy:`` header arrives as ``HTTP_PROXY``: "httpoxy").
  ``ALL_PROXY`` is not read, as boto3 does not read it.
* A proxy is ``http://[user:password@]host[:port]`` (the scheme defaults to http, the
  port to the scheme's, as urllib3 takes it) or ``https://...`` (TLS to the proxy
  itself). The user and password, percent-decoded, become ``Proxy-Authorization: Basic``
  (RFC 9110 §11.7.1, RFC 7617). A SOCKS proxy is refused with a :class:`ConfigError`.
* ``no_proxy`` / ``NO_PROXY``: comma-separated entries, each ``*`` (no proxy at all), an
  IP address or network (``10.0.0.0/8``, ``fd00::/8``), or a host name that matches
  itself and its subdomains (``example.com`` and ``.example.com`` both match
  ``s3.example.com``, not ``badexample.com``), optionally with ``:port``.

Whatever the variables say, the EC2 instance metadata service and the container
credentials addresses (:data:`LOCAL_SERVICES`) are never reached through a proxy: they
answer only on the host's own link.

No repr or message shows a proxy's password: :class:`Proxy` keeps the header it makes,
out of its repr, and messages name the proxy by :attr:`Proxy.url` (scheme, host, port).
"""

from __future__ import annotations

import base64
import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import SplitResult, unquote, urlsplit

from ..errors import ConfigError

__all__ = ["LOCAL_SERVICES", "NO_PROXIES", "Proxies", "Proxy"]

#: Addresses only the host's own link answers on: the EC2 instance metadata service
#: (IPv4, IPv6) and the ECS and EKS container credentials endpoints.
LOCAL_SERVICES = frozenset(
    ipaddress.ip_address(a)
    for a in ("169.254.169.254", "fd00:ec2::254", "169.254.170.2", "169.254.170.23", "fd00:ec2::23")
)
_DEFAULT_PORTS = {"http": 80, "https": 443}
_IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
_IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class Proxy:
    """One proxy: ``scheme`` (``http``, or ``https`` for TLS to the proxy), ``host``
    (an IPv6 address without brackets) and ``port``; ``authorization`` is the
    ``Proxy-Authorization`` value its URL's credentials make (None without), and
    ``variable`` the environment variable that named it. The repr shows neither
    credentials nor the header."""

    scheme: str
    host: str
    port: int
    variable: str
    authorization: str | None = field(default=None, repr=False, compare=False)

    @property
    def url(self) -> str:
        """``scheme://host:port``: the proxy as messages name it (never its credentials)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"

    def __repr__(self) -> str:
        return f"Proxy({self.url!r}, from {self.variable})"

    __str__ = __repr__


@dataclass(frozen=True)
class Proxies:
    """The proxies for ``http://`` and ``https://`` URLs and the ``NO_PROXY`` entries
    (see the module docstring). False when no URL goes through a proxy."""

    http: Proxy | None = None
    https: Proxy | None = None
    no_proxy: tuple[str, ...] = ()

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> Proxies:
        """The proxies ``environ`` names; :class:`ConfigError` naming the variable for a
        proxy that is not an http(s) URL with a host."""
        http = _variable(environ, "http_proxy", cgi="REQUEST_METHOD" in environ)
        https = _variable(environ, "https_proxy")
        no_proxy = _variable(environ, "no_proxy")
        return cls(
            http=None if http is None else _parse(*http),
            https=None if https is None else _parse(*https),
            no_proxy=tuple(
                e for e in (no_proxy[1] if no_proxy else "").replace(" ", "").split(",") if e
            ),
        )

    def __bool__(self) -> bool:
        return self.http is not None or self.https is not None

    def for_url(self, url: str) -> Proxy | None:
        """The proxy a request to ``url`` goes through; None: directly."""
        parts = urlsplit(url)
        proxy = (
            self.https if parts.scheme == "https" else self.http if parts.scheme == "http" else None
        )
        if proxy is None:
            return None
        host = parts.hostname
        if not host:
            return None
        try:
            port = parts.port or _DEFAULT_PORTS[parts.scheme]
        except ValueError:
            return proxy  # not a valid port: the request fails wherever it goes
        address = _address(host)
        if address is not None and address in LOCAL_SERVICES:
            return None
        if any(_bypasses(entry, host, address, port) for entry in self.no_proxy):
            return None
        return proxy


#: No proxy for any URL.
NO_PROXIES = Proxies()


def _variable(
    environ: Mapping[str, str], lower: str, *, cgi: bool = False
) -> tuple[str, str] | None:
    """``(name, value)`` of the variable in force for ``lower`` (urllib's
    ``getproxies_environment``): the lower-case name wins, even set empty (then there is
    none); the upper-case one is ignored under CGI (``cgi``)."""
    if lower in environ:
        value = environ[lower].strip()
        return (lower, value) if value else None
    upper = lower.upper()
    value = "" if cgi else environ.get(upper, "").strip()
    return (upper, value) if value else None


def _parse(variable: str, text: str) -> Proxy:
    """The proxy ``text`` names (``variable``: where it came from, for messages)."""
    if "://" not in text:
        text = ("http:" if text.startswith("//") else "http://") + text
    parts = urlsplit(text)
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS:
        where = f"{scheme}://{parts.hostname or ''}"
        raise ConfigError(
            f"{variable} names a proxy objsdk cannot go through ({where}): give an "
            "http:// or https:// proxy"
        )
    try:
        host, port = parts.hostname, parts.port
    except ValueError:  # a port that is not a number in range
        host, port = None, None
        bad_port = True
    else:
        bad_port = False
    if not host or bad_port:
        raise ConfigError(
            f"{variable} is not a proxy URL such as http://proxy.example.com:3128 "
            f"({'its port is not a number from 0 to 65535' if bad_port else 'it names no host'})"
        )
    return Proxy(scheme, host, port or _DEFAULT_PORTS[scheme], variable, _authorization(parts))


def _authorization(parts: SplitResult) -> str | None:
    """``Proxy-Authorization: Basic`` for the URL's user and password (RFC 7617),
    encoded as requests and urllib3 encode it (Latin-1, else UTF-8)."""
    if parts.username is None:
        return None
    pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
    try:
        raw = pair.encode("latin-1")
    except UnicodeEncodeError:
        raw = pair.encode("utf-8")
    return "Basic " + base64.b64encode(raw).decode("ascii")


def _address(host: str) -> _IPAddress | None:
    try:
        return ipaddress.ip_address(host.split("%", 1)[0])  # an IPv6 zone is not compared
    except ValueError:
        return None


def _network(entry: str) -> _IPNetwork | None:
    try:
        return ipaddress.ip_network(entry.strip("[]"), strict=False)
    except ValueError:
        return None


def _bypasses(entry: str, host: str, address: _IPAddress | None, port: int) -> bool:
    """Does the ``NO_PROXY`` ``entry`` cover ``host`` (its ``address`` if it is an IP
    literal) on ``port``?"""
    if entry == "*":
        return True
    network = _network(entry)
    if network is None:
        # host:port, or [v6]:port
        name, sep, want = entry.rpartition(":")
        if sep and want.isdigit() and name and (":" not in name or name.startswith("[")):
            if int(want) != port:
                return False
            entry = name
            network = _network(entry)
    if network is not None:
        return address is not None and address.version == network.version and address in network
    name = entry.lower().lstrip("*").lstrip(".").rstrip(".")
    host = host.lower().rstrip(".")
    return bool(name) and (host == name or host.endswith("." + name))
