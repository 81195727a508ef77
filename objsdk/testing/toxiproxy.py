"""Toxiproxy (v2 HTTP API) for injecting network faults between a client and a server.

::

    with Toxiproxy() as toxiproxy:
        proxy = toxiproxy.create_proxy("minio", upstream="127.0.0.1:9000")
        proxy.add_toxic("limit_data", bytes=1000)  # cut each response after 1000 bytes
        ...  # talk to proxy.endpoint instead of the server

Toxic types and their attributes (see Toxiproxy's README): ``latency`` (latency, jitter
in ms), ``bandwidth`` (rate in KB/s), ``slicer`` (average_size, size_variation, delay),
``limit_data`` (bytes), ``reset_peer`` (timeout in ms), ``timeout`` (timeout in ms,
0 = forever), ``slow_close`` (delay).
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, cast

from objsdk.errors import ToxiproxyError
from objsdk.testing.gobuild import toxiproxy_binary
from objsdk.testing.localserver import LocalServer
from objsdk.testing.supervisor import Supervised, tail

__all__ = ["Proxy", "Toxiproxy", "ToxiproxyError"]

# Local servers must be reached directly, even when HTTP(S)_PROXY is set.
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class _Api:
    """Minimal JSON client for Toxiproxy's HTTP API."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.base_url + path,
            data=data,
            method=method,
            headers={"Content-Type": "application/json"},
        )
        try:
            with _DIRECT.open(request, timeout=10) as response:
                payload = response.read()
        except urllib.error.HTTPError as exc:
            with exc:
                detail = _error_text(exc.read())
            raise ToxiproxyError(
                f"toxiproxy {method} {path}: HTTP {exc.code}: {detail}", status=exc.code
            ) from None
        except OSError as exc:
            raise ToxiproxyError(f"toxiproxy {method} {path}: {exc}") from exc
        return json.loads(payload) if payload.strip() else None


def _error_text(body: bytes) -> str:
    try:
        return str(json.loads(body)["error"])
    except (ValueError, KeyError, TypeError):
        return body.decode("utf-8", "replace").strip()


def _quote(name: str) -> str:
    return urllib.parse.quote(name, safe="")


class Proxy:
    """One TCP proxy: clients connect to :attr:`endpoint`, traffic goes to ``upstream``."""

    def __init__(self, api: _Api, state: dict[str, Any]) -> None:
        self._api = api
        self.name: str = state["name"]
        self._update(state)

    def __repr__(self) -> str:
        return f"Proxy({self.name!r}, listen={self.listen!r}, upstream={self.upstream!r})"

    @property
    def endpoint(self) -> str:
        """``http://host:port`` of the proxy's listening side."""
        return f"http://{self.listen}"

    @property
    def port(self) -> int:
        """The port the proxy listens on."""
        return int(self.listen.rsplit(":", 1)[1])

    def add_toxic(
        self,
        type: str,
        *,
        stream: str = "downstream",
        toxicity: float = 1.0,
        name: str | None = None,
        **attributes: Any,
    ) -> str:
        """Add a toxic; returns its name (``<type>_<stream>`` unless given).

        ``stream`` is ``downstream`` (server to client) or ``upstream``; ``toxicity`` the
        probability that a connection is affected.
        """
        body: dict[str, Any] = {
            "type": type,
            "stream": stream,
            "toxicity": toxicity,
            "attributes": attributes,
        }
        if name is not None:
            body["name"] = name
        toxic = self._api.call("POST", f"{self._path}/toxics", body)
        return cast(str, toxic["name"])

    def update_toxic(self, name: str, **attributes: Any) -> None:
        """Change attributes of an existing toxic."""
        self._api.call("PATCH", f"{self._path}/toxics/{_quote(name)}", {"attributes": attributes})

    def toxics(self) -> list[dict[str, Any]]:
        """The toxics currently installed, as Toxiproxy describes them."""
        return cast(list[dict[str, Any]], self._api.call("GET", f"{self._path}/toxics"))

    def remove_toxic(self, name: str) -> None:
        """Remove one toxic."""
        self._api.call("DELETE", f"{self._path}/toxics/{_quote(name)}")

    def clear_toxics(self) -> None:
        """Remove every toxic from this proxy."""
        for toxic in self.toxics():
            self.remove_toxic(toxic["name"])

    def reset(self) -> None:
        """Back to a clean state: no toxics, enabled."""
        self.clear_toxics()
        self.enable()

    def disable(self) -> None:
        """Close all connections and refuse new ones until :meth:`enable`."""
        self._set_enabled(False)

    def enable(self) -> None:
        """Accept connections again."""
        self._set_enabled(True)

    def delete(self) -> None:
        """Remove the proxy, closing its connections; no error if already gone."""
        try:
            self._api.call("DELETE", self._path)
        except ToxiproxyError as exc:
            if exc.status != 404:
                raise

    @property
    def _path(self) -> str:
        return f"/proxies/{_quote(self.name)}"

    def _set_enabled(self, enabled: bool) -> None:
        self._update(self._api.call("PATCH", self._path, {"enabled": enabled}))

    def _update(self, state: dict[str, Any]) -> None:
        self.listen: str = state["listen"]
        self.upstream: str = state["upstream"]
        self.enabled: bool = state["enabled"]


class Toxiproxy(LocalServer):
    """A Toxiproxy server on a loopback port, run under :mod:`objsdk.testing.supervisor`."""

    name = "Toxiproxy"
    error = ToxiproxyError

    def __init__(
        self,
        *,
        binary: str | os.PathLike[str] | None = None,
        host: str = "127.0.0.1",
        port: int | None = None,
        startup_timeout: float = 30.0,
    ) -> None:
        super().__init__(binary=binary, host=host, port=port, startup_timeout=startup_timeout)
        self._run_dir: Path | None = None

    def __repr__(self) -> str:
        return f"Toxiproxy(port={self.port}, pid={self.pid})"

    @property
    def api_url(self) -> str:
        """Base URL of the HTTP API."""
        return self._http_url()

    def _launch(self) -> Supervised:
        binary = self._binary if self._binary is not None else toxiproxy_binary()
        self._run_dir = self._temp_dir("objsdk-toxiproxy-")
        return Supervised(
            [str(binary), "-host", self.host, "-port", str(self.port)],
            log=self._run_dir / "toxiproxy.log",
            cleanup=[self._run_dir],
            # Default "debug" logs every API call; only proxy events are useful.
            env={**os.environ, "LOG_LEVEL": os.environ.get("LOG_LEVEL", "info")},
        )

    def _await_ready(self) -> None:
        assert self._server is not None
        self._server.wait_http_ok(f"{self.api_url}/version", self.startup_timeout)

    def _log_tail(self) -> str:
        return tail(self._run_dir / "toxiproxy.log") if self._run_dir is not None else ""

    def version(self) -> str:
        """The server's version string."""
        return cast(str, self._api.call("GET", "/version")["version"])

    def create_proxy(self, name: str, upstream: str, *, listen: str | None = None) -> Proxy:
        """Create a proxy to ``upstream`` (``host:port``) on a free loopback port."""
        body = {"name": name, "upstream": upstream, "listen": listen or f"{self.host}:0"}
        return Proxy(self._api, self._api.call("POST", "/proxies", body))

    def get_proxy(self, name: str) -> Proxy:
        """An existing proxy by name."""
        return Proxy(self._api, self._api.call("GET", f"/proxies/{_quote(name)}"))

    def proxies(self) -> dict[str, Proxy]:
        """All proxies by name."""
        states: dict[str, dict[str, Any]] = self._api.call("GET", "/proxies")
        return {name: Proxy(self._api, state) for name, state in states.items()}

    def reset(self) -> None:
        """Enable every proxy and remove every toxic."""
        self._api.call("POST", "/reset")

    @property
    def _api(self) -> _Api:
        return _Api(self.api_url)
