"""A throwaway MinIO server for tests, demos and benchmarks.

::

    with LocalMinio() as minio:
        client = minio.client()
        ...

The server runs under :mod:`objsdk.testing.supervisor`, so it and its data directory go away
when this process exits, however it exits (even ``kill -9``).
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from objsdk.errors import LocalMinioError
from objsdk.testing.features import MINIO, S3Features
from objsdk.testing.gobuild import minio_binary
from objsdk.testing.localserver import LocalServer
from objsdk.testing.s3_service import service_client, service_env
from objsdk.testing.supervisor import Supervised, SupervisorError, free_port, tail

if TYPE_CHECKING:
    from objsdk.client import Client

__all__ = ["LocalMinio"]


def _host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class LocalMinio(LocalServer):
    """A single-drive MinIO server on a loopback port, with a fresh data directory.

    Credentials are random unless given. ``env`` adds to the server's environment, last:
    ``{"MINIO_API_REQUESTS_MAX": "4"}`` makes a server that answers 429 TooManyRequests
    to requests past four at once. :meth:`stop` (also run at exit) terminates the
    server and deletes its data. The secret key never appears in ``repr``.
    """

    name = "MinIO"
    error = LocalMinioError
    #: The region MinIO answers for (its default, unless given).
    region = "us-east-1"
    #: Where MinIO differs from other services (see docs/compatibility.md).
    features: S3Features = MINIO

    def __init__(
        self,
        *,
        binary: str | os.PathLike[str] | None = None,
        host: str = "127.0.0.1",
        port: int | None = None,
        access_key: str | None = None,
        secret_key: str | None = None,
        startup_timeout: float = 60.0,
        tls: bool = False,
        kms_secret_key: str | None = None,
        region: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        """``region``: the region the server answers for (``MINIO_SITE_REGION``); it
        refuses requests signed for another, as S3 does. ``env``: more of the server's
        environment, set last (``MINIO_API_REQUESTS_MAX``...)."""
        super().__init__(binary=binary, host=host, port=port, startup_timeout=startup_timeout)
        if region is not None:
            self.region = region
        #: Serve HTTPS with a throwaway self-signed CA (see :attr:`ca_bundle`).
        self.tls = tls
        #: ``NAME:BASE64_32_BYTES``: MinIO's built-in KMS key (MINIO_KMS_SECRET_KEY), which
        #: server-side encryption with SSE-S3 and SSE-KMS (key id NAME) needs.
        self.kms_secret_key = kms_secret_key
        #: More of the server's environment, set last: MinIO's own settings
        #: (``MINIO_API_REQUESTS_MAX``...), which no inherited ``MINIO_*`` variable changes.
        self.extra_env = dict(env or {})
        self.access_key = access_key or secrets.token_hex(10)
        self.secret_key = secret_key or secrets.token_hex(20)
        self._console_port: int | None = None
        self._data_dir: Path | None = None
        self._run_dir: Path | None = None

    def __repr__(self) -> str:
        where = self.endpoint if self.port is not None else "unstarted"
        return f"LocalMinio({where}, access_key={self.access_key!r}, pid={self.pid})"

    @property
    def endpoint(self) -> str:
        """The S3 endpoint URL, e.g. ``http://127.0.0.1:9000`` (``https://`` with TLS)."""
        if self.port is None:
            raise LocalMinioError("LocalMinio has not been started")
        scheme = "https" if self.tls else "http"
        return f"{scheme}://{_host_port(self.host, self.port)}"

    @property
    def ca_bundle(self) -> Path:
        """With ``tls=True``: the PEM file of the CA that signed the server's certificate."""
        if not self.tls or self._run_dir is None:
            raise LocalMinioError("LocalMinio was not started with tls=True")
        return self._run_dir / "ca.crt"

    @property
    def data_dir(self) -> Path:
        """The server's data directory (deleted by :meth:`stop`)."""
        if self._data_dir is None:
            raise LocalMinioError("LocalMinio has not been started")
        return self._data_dir

    def _launch(self) -> Supervised:
        binary = self._binary if self._binary is not None else minio_binary()
        self._console_port = free_port(self.host)
        self._data_dir = self._temp_dir("objsdk-minio-data-")
        self._run_dir = self._temp_dir("objsdk-minio-run-")
        if self.tls:
            from objsdk.testing.tls import make_certificates

            make_certificates(self._run_dir / "certs", ca_path=self._run_dir / "ca.crt")
        return Supervised(
            self._command(binary),
            log=self._log,
            cleanup=[self._data_dir, self._run_dir],
            env=self._environment(),
        )

    def _port_taken(self, log: str) -> bool:
        # MinIO rewords Go's "bind: address already in use" for humans.
        text = log.lower()
        return "address already in use" in text or "port is already in use" in text

    def restart(self) -> None:
        """Restart the server process on the same port with the same data."""
        if self._server is None:
            raise LocalMinioError("LocalMinio has not been started")
        try:
            self._server.restart()
            self._await_ready()
        except SupervisorError as exc:
            raise LocalMinioError(f"MinIO did not restart: {exc}\n{self._log_tail()}") from None

    def client(self, **kwargs: Any) -> Client:
        """An objsdk client for this server, in its region unless ``kwargs`` say
        otherwise; ``kwargs`` go to :class:`objsdk.client.Client`."""
        return service_client(self, **kwargs)

    def env(self) -> dict[str, str]:
        """Environment variables pointing AWS-style tools at this server (and, with TLS,
        at its CA)."""
        return service_env(self, str(self.ca_bundle) if self.tls else None)

    @property
    def _log(self) -> Path:
        assert self._run_dir is not None
        return self._run_dir / "minio.log"

    def _command(self, binary: Path) -> list[str]:
        assert self.port is not None
        assert self._run_dir is not None
        return [
            str(binary),
            "server",
            str(self.data_dir),
            "--address",
            _host_port(self.host, self.port),
            "--console-address",
            _host_port(self.host, self._console_port or 0),
            # Keep MinIO away from ~/.minio/certs: certificates there would switch it to TLS.
            "--certs-dir",
            str(self._run_dir / "certs"),
        ]

    def _environment(self) -> dict[str, str]:
        # Inherited MINIO_* settings (volumes, KMS, ...) would change what we start.
        env = {k: v for k, v in os.environ.items() if not k.startswith("MINIO_")}
        env.update(
            MINIO_ROOT_USER=self.access_key,
            MINIO_ROOT_PASSWORD=self.secret_key,
            MINIO_BROWSER="off",
            MINIO_UPDATE="off",
            # Skips the checks for production deployments (root drive, ...).
            MINIO_CI_CD="1",
        )
        if self.kms_secret_key:
            env["MINIO_KMS_SECRET_KEY"] = self.kms_secret_key
        if self.region != LocalMinio.region:
            env["MINIO_SITE_REGION"] = self.region
        env.update(self.extra_env)
        return env

    def _await_ready(self) -> None:
        assert self._server is not None
        deadline = time.monotonic() + self.startup_timeout
        # "live" answers as soon as HTTP is up. "ready" does too (only its header
        # x-minio-server-status says "offline"), while S3 requests still get 503
        # XMinioServerNotInitialized with a Retry-After; "cluster" answers 200 only once
        # the object layer, the bucket metadata and IAM are initialised
        # (cmd/healthcheck-handler.go, checkHealth).
        for probe in ("live", "cluster"):
            remaining = max(0.0, deadline - time.monotonic())
            url = f"{self.endpoint}/minio/health/{probe}"
            if self.tls:
                self._wait_https_ok(url, remaining)
            else:
                self._server.wait_http_ok(url, remaining)

    def _wait_https_ok(self, url: str, timeout: float) -> None:
        import http.client
        import ssl
        import urllib.error
        import urllib.request

        assert self._server is not None
        context = ssl.create_default_context(cafile=str(self.ca_bundle))
        opener = urllib.request.build_opener(
            urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=context)
        )
        deadline = time.monotonic() + timeout
        while True:
            code = self._server.poll()
            if code is not None:
                raise SupervisorError(f"server exited with code {code} during startup")
            try:
                with opener.open(url, timeout=2.0) as response:
                    if response.status == 200:
                        return
            except urllib.error.HTTPError as exc:
                exc.close()
            except (OSError, http.client.HTTPException):
                pass
            if time.monotonic() > deadline:
                raise SupervisorError(f"server not ready at {url} after {timeout:g} s")
            time.sleep(0.05)

    def _log_tail(self) -> str:
        if self._run_dir is None:
            return ""
        return tail(self._log).replace(self.secret_key, "***")
