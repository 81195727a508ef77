"""A throwaway moto S3 server: a second S3 implementation for tests.

::

    with LocalMoto() as moto:
        client = moto.client()
        ...

moto's standalone server (``python -m moto.server``, from ``moto[server]``) keeps
everything in memory. It runs under :mod:`objsdk.testing.supervisor`, like
:class:`~objsdk.testing.LocalMinio`, so it goes away when this process exits, however
it exits. moto does not check signatures: any keys are accepted, so random ones are
made up (they still travel signed, as to any service).
"""

from __future__ import annotations

import os
import secrets
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from objsdk.testing.features import MOTO, S3Features
from objsdk.testing.localserver import LocalServer
from objsdk.testing.s3_service import service_client, service_env
from objsdk.testing.supervisor import Supervised, SupervisorError, tail

if TYPE_CHECKING:
    from objsdk.client import Client

__all__ = ["LocalMoto", "LocalMotoError"]


class LocalMotoError(SupervisorError):
    """The moto server could not be started (moto[server] missing, or it failed)."""


class LocalMoto(LocalServer):
    """moto's S3 server on a loopback port, empty at the start.

    :meth:`stop` (also run at exit) terminates it; its objects, held in its memory, go
    with it. The secret key never appears in ``repr``.
    """

    name = "moto"
    error = LocalMotoError
    #: The region moto serves; buckets are created there.
    region = "us-east-1"
    #: Where moto differs from other services (see docs/compatibility.md).
    features: S3Features = MOTO

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int | None = None,
        access_key: str | None = None,
        secret_key: str | None = None,
        startup_timeout: float = 60.0,
    ) -> None:
        super().__init__(binary=None, host=host, port=port, startup_timeout=startup_timeout)
        self.access_key = access_key or secrets.token_hex(10)
        self.secret_key = secret_key or secrets.token_hex(20)
        self._run_dir: Path | None = None

    def __repr__(self) -> str:
        where = self.endpoint if self.port is not None else "unstarted"
        return f"LocalMoto({where}, access_key={self.access_key!r}, pid={self.pid})"

    @property
    def endpoint(self) -> str:
        """The S3 endpoint URL, e.g. ``http://127.0.0.1:5000``."""
        return self._http_url()

    def client(self, **kwargs: Any) -> Client:
        """An objsdk client for this server; ``kwargs`` go to :class:`objsdk.client.Client`."""
        return service_client(self, **kwargs)

    def env(self) -> dict[str, str]:
        """Environment variables pointing AWS-style tools at this server."""
        return service_env(self)

    def _launch(self) -> Supervised:
        try:
            import moto.server  # noqa: F401  (only to fail early with a clear message)
        except ImportError as exc:
            raise LocalMotoError(
                "moto's server is not installed: pip install 'moto[server]'"
            ) from exc
        assert self.port is not None
        self._run_dir = self._temp_dir("objsdk-moto-run-")
        command = [sys.executable, "-m", "moto.server", "-H", self.host, "-p", str(self.port)]
        return Supervised(
            command, log=self._run_dir / "moto.log", cleanup=[self._run_dir], env=_environment()
        )

    def _await_ready(self) -> None:
        assert self._server is not None
        self._server.wait_http_ok(f"{self.endpoint}/moto-api/data.json", self.startup_timeout)

    def _log_tail(self) -> str:
        if self._run_dir is None:
            return ""
        return tail(self._run_dir / "moto.log").replace(self.secret_key, "***")


def _environment() -> dict[str, str]:
    env = dict(os.environ)
    # A proxy setting would send the server's own loopback traffic away.
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
        env.pop(name, None)
    return env
