"""What every start/stop helper of :mod:`objsdk.testing` does the same way: ``with x:``
starts ``x`` (and gives it back) and stops it at the end, and ``x``'s ``http://`` URL on
its loopback port is there only once it has started."""

from __future__ import annotations

from types import TracebackType
from typing import TypeVar

__all__ = ["StartStop"]

S = TypeVar("S", bound="StartStop")


class StartStop:
    """A context manager around :meth:`start` and :meth:`stop`, which subclasses define."""

    #: Used in error messages ("Toxiproxy has not been started").
    name = "server"
    #: The exception raised when it is used before it started, or cannot start.
    error: type[Exception] = RuntimeError
    host: str
    port: int | None

    def start(self: S) -> S:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self: S) -> S:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _http_url(self) -> str:
        """``http://host:port``; raises :attr:`error` before :meth:`start`."""
        if self.port is None:
            raise self.error(f"{self.name} has not been started")
        return f"http://{self.host}:{self.port}"
