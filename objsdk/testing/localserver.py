"""What every local server (MinIO, Toxiproxy) does the same way.

A free loopback port, retried when another process takes it between our probe and
the server's bind; the server launched under :mod:`objsdk.testing.supervisor`, so it and its
temporary directories go away however this process ends; a stop at exit; and use as a
context manager. Subclasses say how to launch, how to tell that the server is ready,
and where its log is.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path
from typing import TypeVar

from objsdk.testing.lifecycle import StartStop
from objsdk.testing.supervisor import Supervised, SupervisorError, free_port

__all__ = ["LocalServer"]

S = TypeVar("S", bound="LocalServer")


class LocalServer(StartStop):
    """Start/stop lifecycle of a supervised server on a loopback port."""

    #: Used in error messages ("MinIO did not start: ...").
    name = "server"
    #: The exception raised when the server cannot be started.
    error: type[Exception] = SupervisorError
    port_attempts = 5

    def __init__(
        self,
        *,
        binary: str | os.PathLike[str] | None,
        host: str,
        port: int | None,
        startup_timeout: float,
    ) -> None:
        self._binary = Path(binary) if binary is not None else None
        self.host = host
        self.port = port
        self._fixed_port = port is not None
        self.startup_timeout = startup_timeout
        self._server: Supervised | None = None
        self._dirs: list[Path] = []

    @property
    def pid(self) -> int | None:
        """The server's pid while it runs, else None."""
        return self._server.pid if self._server is not None else None

    def start(self: S) -> S:
        """Start the server and wait until it is ready; no-op if already running."""
        if self._server is not None:
            return self
        for attempt in range(1, self.port_attempts + 1):
            if not self._fixed_port:
                self.port = free_port(self.host)
            try:
                self._server = self._launch()
                self._await_ready()
            except (SupervisorError, OSError) as exc:
                log = self._log_tail()
                self.stop()
                # Another process can grab the port between free_port() and the bind.
                if self._port_taken(log) and not self._fixed_port and attempt < self.port_attempts:
                    continue
                raise self.error(f"{self.name} did not start: {exc}\n{log}") from None
            atexit.register(self.stop)
            return self
        raise AssertionError("unreachable")

    def stop(self) -> None:
        """Stop the server and delete its temporary directories; idempotent."""
        atexit.unregister(self.stop)
        if self._server is not None:
            self._server.stop()
            self._server = None
        # The supervisor removes these; this covers a supervisor that never started.
        for directory in self._dirs:
            shutil.rmtree(directory, ignore_errors=True)
        self._dirs = []

    def _temp_dir(self, prefix: str) -> Path:
        """A new temporary directory, removed by :meth:`stop`."""
        directory = Path(tempfile.mkdtemp(prefix=prefix))
        self._dirs.append(directory)
        return directory

    # -- what subclasses provide -------------------------------------------------------

    def _launch(self) -> Supervised:
        """Start the server process (``self.port`` is chosen) and return its handle."""
        raise NotImplementedError

    def _await_ready(self) -> None:
        """Return once the started server answers; raise SupervisorError otherwise."""
        raise NotImplementedError

    def _log_tail(self) -> str:
        """The end of the server's log, for error messages."""
        return ""

    def _port_taken(self, log: str) -> bool:
        return "address already in use" in log.lower()
