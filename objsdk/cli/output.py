"""What the command line prints: human sizes, JSON lines, progress bars."""

from __future__ import annotations

import json
import logging
import sys
import threading
from collections.abc import Callable
from datetime import datetime
from types import TracebackType
from typing import Any

__all__ = ["LibraryWarnings", "Output", "Progress", "counted", "human_size", "terminal_safe"]


def counted(n: int, noun: str) -> str:
    """``counted(1, "file")`` -> ``"1 file"``, ``counted(2, "file")`` -> ``"2 files"``."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def human_size(n: int) -> str:
    """``1536`` -> ``"1.5 KiB"``, ``1`` -> ``"1 Byte"`` (binary units, as the aws CLI's
    --human-readable)."""
    size = float(n)
    for unit in ("Bytes", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if size < 1024 or unit == "PiB":
            return counted(n, "Byte") if unit == "Bytes" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def format_time(t: datetime | None) -> str:
    return t.astimezone().strftime("%Y-%m-%d %H:%M:%S") if t else " " * 19


def terminal_safe(text: str) -> str:
    """``text`` with each character a terminal acts on or does not show (control
    characters such as ESC and CR, line separators, format characters such as U+202E)
    written as its Python escape (``\\x1b``, ``\\r``, ``\\u202e``): a key or file name in
    a line for humans can neither move the cursor, rewrite the screen, nor split the
    line in two. JSON output keeps names exact."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


def _emit(text: str, *, err: bool = False) -> None:
    """``text`` and its newline in one write, flushed. ``print`` writes them apart, and
    with ``PYTHONUNBUFFERED`` (usual in containers) each is a system call of its own,
    two per file in a transfer of many, each a hand-off of the GIL among its threads."""
    stream = sys.stderr if err else sys.stdout
    stream.write(text + "\n")
    stream.flush()


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


class Output:
    """Where results (stdout) and notes (stderr) go, and in which form.

    ``quiet``: no progress bar, no per-file lines, no summary; ``no_progress``: no bar;
    ``only_errors`` (``--only-show-errors``): warnings and errors only. Per-file lines
    go through the bar's writer while a bar is shown, so they never cut it mid-line.
    A line for humans is one line, printed :func:`terminal_safe`.
    """

    def __init__(
        self,
        *,
        json_mode: bool,
        quiet: bool,
        no_progress: bool = False,
        only_errors: bool = False,
    ) -> None:
        self.json_mode = json_mode
        self.quiet = quiet or only_errors
        self.no_progress = no_progress
        self._lock = threading.Lock()
        self._bar: Progress | None = None

    def line(self, text: str) -> None:
        """A result line for humans (not printed in JSON mode)."""
        if not self.json_mode:
            self._print(text)

    def note(self, text: str) -> None:
        """A per-file line ("upload: a to s3://b/a"), on stdout unless --quiet or --json."""
        if not self.quiet and not self.json_mode:
            self._print(text)

    def _print(self, text: str, *, err: bool = False) -> None:
        text = terminal_safe(text)
        with self._lock:
            bar = self._bar
            if bar is not None and bar.write(text, err=err):
                return
            _emit(text, err=err)

    def warn(self, text: str) -> None:
        """A warning on stderr (always printed; with --json as ``{"warning": text}``)."""
        if self.json_mode:
            with self._lock:
                _emit(json.dumps({"warning": text}), err=True)
        else:
            self._print(f"warning: {text}", err=True)

    def error(self, text: str, record: dict[str, Any] | None = None) -> None:
        """An error on stderr: one line, or with --json one JSON object (``code``,
        ``message``, ``bucket``, ``key``...)."""
        if self.json_mode:
            value = {"message": text, **(record or {})}
            with self._lock:
                _emit(json.dumps(_jsonable(value), sort_keys=True), err=True)
        else:
            self._print(text, err=True)

    def json(self, value: Any) -> None:
        """One JSON document on one line (only in JSON mode)."""
        if self.json_mode:
            with self._lock:
                _emit(json.dumps(_jsonable(value), sort_keys=True))

    def summary(self, text: str) -> None:
        """The closing line of a run of transfers, on stderr (not with --quiet or --json)."""
        if not self.quiet and not self.json_mode:
            with self._lock:
                _emit(text, err=True)

    def progress(self, total: int, desc: str) -> Progress:
        """A byte counter shown as a tqdm bar when stdout is a terminal, unless --quiet,
        --no-progress or --json."""
        show = (
            not self.quiet and not self.no_progress and not self.json_mode and sys.stdout.isatty()
        )
        bar = Progress(total, desc, show=show, on_close=self._closed)
        with self._lock:
            self._bar = bar
        return bar

    def _closed(self, bar: Progress) -> None:
        with self._lock:
            if self._bar is bar:
                self._bar = None


class Progress:
    """Thread-safe byte progress; a tqdm bar on stderr, shown after half a second."""

    def __init__(
        self,
        total: int,
        desc: str,
        *,
        show: bool,
        on_close: Callable[[Progress], None] | None = None,
    ) -> None:
        self._lock = threading.Lock()
        self._bar: Any = None
        self._done = 0
        self._on_close = on_close
        if show:
            try:
                from tqdm import tqdm  # type: ignore[import-untyped,unused-ignore]
            except ImportError:  # the cli extra is not installed: no bar
                return
            self._bar = tqdm(
                total=total,
                desc=desc,
                unit="B",
                unit_scale=True,
                unit_divisor=1024,
                delay=0.5,
                leave=False,
                file=sys.stderr,
                dynamic_ncols=True,
            )

    def add(self, n: int) -> None:
        with self._lock:
            self._done += n
            if self._bar is not None:
                self._bar.update(n)

    def grow_total(self, total: int) -> None:
        """Raise the bar's total when a transfer learns its size (a single download)."""
        with self._lock:
            if self._bar is not None and (self._bar.total or 0) < total:
                self._bar.total = total
                self._bar.refresh()

    @property
    def done(self) -> int:
        return self._done

    def callback(self, check: Callable[[], None] | None = None) -> Callable[[int, Any], None]:
        """A ``progress(done, total)`` callback for one transfer, adding its deltas.

        ``check()`` runs first on every call: a transfer is cancelled by making it raise.
        """
        seen = 0
        lock = threading.Lock()

        def report(done: int, total: Any) -> None:
            nonlocal seen
            if check is not None:
                check()
            with lock:
                delta, seen = done - seen, max(seen, done)
            if isinstance(total, int) and total > 0:
                self.grow_total(total)
            if delta > 0:
                self.add(delta)

        return report

    def write(self, text: str, *, err: bool = False) -> bool:
        """Print ``text`` on stdout (``err``: stderr) above the bar (cleared and redrawn
        around it); False when no bar is shown, for the caller to print it itself."""
        with self._lock:
            if self._bar is None:
                return False
            self._bar.write(text, file=sys.stderr if err else sys.stdout)
            return True

    def close(self) -> None:
        if self._on_close is not None:
            self._on_close(self)
        with self._lock:
            if self._bar is not None:
                self._bar.close()
                self._bar = None

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class LibraryWarnings(logging.Handler):
    """The library's warnings (a retry, a refused checksum header) as the command's own
    ``warning:`` lines through :class:`Output`: above the progress bar, or as
    ``{"warning": ...}`` objects with --json, instead of Python's bare last-resort
    lines on stderr."""

    def __init__(self, out: Output) -> None:
        super().__init__(logging.WARNING)
        self._out = out

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self._out.warn(record.getMessage())
        except Exception:
            self.handleError(record)
