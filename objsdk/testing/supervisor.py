"""Run a local server that cannot outlive the process that started it.

The supervisor is a tiny stdlib-only program between the parent (a test session, a
script) and the server (MinIO, Toxiproxy)::

    python -m objsdk.testing.supervisor [--grace SECONDS] [--cleanup DIR]... -- COMMAND [ARG]...

Protocol:

* The parent connects a pipe to the supervisor's stdin and simply keeps it open.
* The supervisor starts COMMAND in its own process group, with stdin from /dev/null and
  stdout and stderr going to the supervisor's stderr (the parent points it at a log file).
* Supervisor stdout, one line per event: ``<pid>`` when the server started,
  ``exited <code>`` when it exited by itself, ``error <message>`` when it could not be
  started. After ``exited`` or ``error`` the supervisor keeps waiting, so the parent can
  still read the log, restart or stop.
* A ``restart`` line on stdin stops the server and starts COMMAND again, keeping the
  directories; the new pid follows on stdout.
* stdin EOF (the parent exited for any reason, SIGKILL included, since the kernel closes
  its pipe end) or SIGTERM/SIGINT/SIGHUP: the supervisor sends SIGTERM to the server's
  process group, SIGKILL after the grace period, reaps it, removes every ``--cleanup``
  directory and exits. Signals only request the stop (they never raise), so more of
  them arriving during the cleanup cannot cut it short.
* Second line of defence, on Linux: ``prctl(PR_SET_PDEATHSIG)`` asks the kernel to signal
  the supervisor when the parent dies and to SIGKILL the server when the supervisor dies.

:class:`Supervised` is the parent's side of the protocol.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import http.client
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import weakref
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import FrameType
from typing import IO

__all__ = ["Supervised", "SupervisorError", "free_port", "http_ok", "main", "tail"]

_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>
_POLL_INTERVAL = 0.1


# --------------------------------------------------------------------------- child side


class _Stop(Exception):
    """Raised (never from a signal handler) to leave the main loop and clean up."""


def _prctl_pdeathsig() -> Callable[[int], None] | None:
    """A function setting this process's parent-death signal, or None off Linux."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    # Explicit types: prctl is variadic, and its arguments are unsigned longs.
    prctl.argtypes = [ctypes.c_int, *[ctypes.c_ulong] * 4]
    prctl.restype = ctypes.c_int

    def set_signal(signum: int) -> None:
        prctl(_PR_SET_PDEATHSIG, signum, 0, 0, 0)

    return set_signal


def _log(message: str) -> None:
    """A line to the log; never raises, so it cannot cut the cleanup short."""
    with contextlib.suppress(Exception):
        print(f"supervisor: {message}", file=sys.stderr, flush=True)


def _announce(line: str) -> None:
    try:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()
    except OSError as exc:  # the parent closed its end: it is gone
        raise _Stop from exc


def _spawn(
    command: Sequence[str], pdeathsig: Callable[[int], None] | None
) -> subprocess.Popen[bytes]:
    me = os.getpid()

    def in_child() -> None:
        if pdeathsig is not None:
            pdeathsig(signal.SIGKILL)
        if os.getppid() != me:  # we died before the line above took effect
            os._exit(1)

    return subprocess.Popen(
        list(command),
        stdin=subprocess.DEVNULL,
        stdout=sys.stderr.fileno(),
        stderr=sys.stderr.fileno(),
        start_new_session=True,
        preexec_fn=in_child,
    )


def _terminate(server: subprocess.Popen[bytes], grace: float) -> None:
    # Signal the process group only while the leader is unreaped: until then its pid,
    # hence the group id, cannot have been reused by an unrelated process.
    if server.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(server.pid, signal.SIGTERM)
    try:
        server.wait(grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, signal.SIGKILL)
        server.wait()


def _parse(argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    parser = argparse.ArgumentParser(
        prog="python -m objsdk.testing.supervisor",
        description="Run COMMAND until stdin closes, then stop it and remove directories.",
        usage="%(prog)s [--grace SECONDS] [--cleanup DIR]... -- COMMAND [ARG]...",
    )
    parser.add_argument("--grace", type=float, default=5.0, help="SIGTERM to SIGKILL delay")
    parser.add_argument("--cleanup", action="append", default=[], metavar="DIR")
    argv = list(argv)
    if "--" not in argv:
        parser.error("missing '-- COMMAND'")
    split = argv.index("--")
    options = parser.parse_args(argv[:split])
    command = argv[split + 1 :]
    if not command:
        parser.error("missing COMMAND after '--'")
    return options, command


class _Runner:
    """The supervisor's state: the command and its current server process."""

    def __init__(self, command: list[str], grace: float) -> None:
        self.command = command
        self.grace = grace
        self.pdeathsig = _prctl_pdeathsig()
        self.server: subprocess.Popen[bytes] | None = None
        self.reported = False
        # Set by the signal handlers, which must not raise: an exception raised from a
        # handler surfaces wherever the main thread happens to be, the cleanup included.
        self.stop_requested: str | None = None

    def start(self) -> None:
        self.reported = False
        try:
            self.server = _spawn(self.command, self.pdeathsig)
        except OSError as exc:
            self.server = None
            print(f"supervisor: cannot start {self.command[0]}: {exc}", file=sys.stderr)
            _announce(f"error {exc}")
        else:
            _announce(str(self.server.pid))

    def report_exit(self) -> None:
        if self.server is None or self.reported or self.server.poll() is None:
            return
        self.reported = True
        print(f"supervisor: server exited with code {self.server.returncode}", file=sys.stderr)
        _announce(f"exited {self.server.returncode}")

    def terminate(self) -> None:
        if self.server is not None:
            _terminate(self.server, self.grace)


def _serve(runner: _Runner) -> None:
    """Run until stdin reaches EOF, obeying ``restart`` lines."""
    runner.start()
    pending = b""
    # A signal interrupts select() only to run its handler; select() then resumes, so a
    # stop request is seen within _POLL_INTERVAL.
    while runner.stop_requested is None:
        runner.report_exit()
        readable, _, _ = select.select([0], [], [], _POLL_INTERVAL)
        if not readable or runner.stop_requested is not None:
            continue
        chunk = os.read(0, 4096)
        if not chunk:
            runner.stop_requested = "stdin closed"
            return
        pending += chunk
        while b"\n" in pending and runner.stop_requested is None:
            line, pending = pending.split(b"\n", 1)
            if line.strip() == b"restart":
                runner.terminate()
                if runner.stop_requested is None:
                    runner.start()
            else:
                print(f"supervisor: ignoring unknown command {line!r}", file=sys.stderr)


def _shutdown(runner: _Runner, directories: Sequence[str]) -> None:
    """Stop the server, then remove the directories even if stopping it failed."""
    _log(f"stopping ({runner.stop_requested or 'error'})")
    try:
        runner.terminate()
    finally:
        for directory in directories:
            _remove(directory)


def _remove(directory: str) -> None:
    # A leftover process of the server's group may still be writing: retry briefly.
    for _ in range(10):
        shutil.rmtree(directory, ignore_errors=True)
        if not os.path.lexists(directory):
            return
        time.sleep(_POLL_INTERVAL)
    _log(f"cannot remove {directory}")


def main(argv: Sequence[str] | None = None) -> int:
    """Supervise one server; see the module docstring for the protocol."""
    options, command = _parse(sys.argv[1:] if argv is None else argv)
    parent = os.getppid()
    runner = _Runner(command, options.grace)

    # The handlers only record the request, and _serve polls it. They must not raise:
    # when the parent dies, stdin EOF and PDEATHSIG arrive microseconds apart, and an
    # exception raised by the second one inside the cleanup skipped the rmtree.
    def stop(signum: int, frame: FrameType | None) -> None:
        runner.stop_requested = f"signal {signum}"

    def parent_died(signum: int, frame: FrameType | None) -> None:
        # PDEATHSIG also fires when the parent *thread* that started us exits while the
        # parent process lives on; only a changed parent pid means the process is gone.
        if os.getppid() != parent:
            runner.stop_requested = "parent died"

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, stop)
    signal.signal(signal.SIGUSR2, parent_died)
    if runner.pdeathsig is not None:
        runner.pdeathsig(signal.SIGUSR2)
    # A parent that died before that prctl shows up as EOF on stdin in _serve.
    try:
        _serve(runner)
    except _Stop:
        runner.stop_requested = runner.stop_requested or "parent gone"
    finally:
        _shutdown(runner, options.cleanup)
    return 0


# -------------------------------------------------------------------------- parent side


class SupervisorError(RuntimeError):
    """The supervised server did not start, exited, or did not become ready."""


_LIVE: weakref.WeakSet[Supervised] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    # A forked child (multiprocessing worker, os.fork) must neither hold the pipe open,
    # which would keep the server alive after the real owner dies, nor stop it.
    for handle in list(_LIVE):
        handle._disown()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


class Supervised:
    """A server process started through the supervisor (the parent's handle).

    The server is stopped and ``cleanup`` removed when :meth:`stop` is called or when
    this process exits in any way. Its output is appended to ``log``.
    """

    def __init__(
        self,
        command: Sequence[str],
        *,
        log: Path,
        cleanup: Sequence[Path] = (),
        env: Mapping[str, str] | None = None,
        grace: float = 5.0,
        start_timeout: float = 10.0,
    ) -> None:
        self._owner = os.getpid()
        self._grace = grace
        self._cleanup = list(cleanup)
        self.exit_code: int | None = None
        self._pid: int | None = None
        # -I: stdlib only, and keep objsdk/ (the script dir) off sys.path, where a module
        # named like a stdlib one would shadow it.
        script = str(Path(__file__).resolve())
        argv = [sys.executable, "-I", script, "--grace", str(grace)]
        for directory in cleanup:
            argv += ["--cleanup", str(directory)]
        with open(log, "ab") as log_file:
            self._proc = subprocess.Popen(
                [*argv, "--", *command],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log_file,
                env=None if env is None else dict(env),
                bufsize=0,
                # Out of the terminal's process group: Ctrl-C reaches the parent, whose
                # exit then stops the server in order, instead of killing it mid-cleanup.
                start_new_session=True,
            )
        _LIVE.add(self)
        try:
            self._await_pid(start_timeout)
        except BaseException:
            self.stop()
            raise

    @property
    def pid(self) -> int | None:
        """The server's pid while it runs, else None."""
        return None if self.poll() is not None else self._pid

    @property
    def supervisor_pid(self) -> int:
        """Pid of the supervisor process."""
        return self._proc.pid

    def poll(self) -> int | None:
        """The server's exit code if it has exited, else None (never blocks)."""
        while self.exit_code is None and self._readable(0):
            self._handle(self._readline())
        return self.exit_code

    def wait_http_ok(self, url: str, timeout: float) -> None:
        """Wait until ``GET url`` answers 200; SupervisorError if it exits or times out."""
        deadline = time.monotonic() + timeout
        while True:
            code = self.poll()
            if code is not None:
                raise SupervisorError(f"server exited with code {code} during startup")
            if http_ok(url):
                return
            if time.monotonic() > deadline:
                raise SupervisorError(f"server not ready at {url} after {timeout:g} s")
            time.sleep(0.05)

    def restart(self, timeout: float = 30.0) -> int:
        """Stop the server and start it again (directories kept); returns the new pid."""
        if self._proc.stdin is None or self._proc.stdin.closed:
            raise SupervisorError("supervised server already stopped")
        try:
            self._proc.stdin.write(b"restart\n")
        except OSError as exc:
            raise SupervisorError(f"supervisor is gone: {exc}") from exc
        self._pid = None
        self._await_pid(timeout + self._grace)
        assert self._pid is not None
        return self._pid

    def stop(self) -> None:
        """Stop the server, remove the cleanup directories; idempotent."""
        if os.getpid() != self._owner:
            return
        _LIVE.discard(self)
        if self._proc.stdin is not None and not self._proc.stdin.closed:
            with contextlib.suppress(OSError):
                self._proc.stdin.close()  # EOF: the supervisor's signal to shut down
        try:
            self._proc.wait(self._grace + 10)
        except subprocess.TimeoutExpired:
            # The supervisor is stuck; do its job here.
            self._proc.kill()
            self._proc.wait()
            if self._pid is not None and self.exit_code is None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(self._pid, signal.SIGKILL)
        for directory in self._cleanup:
            shutil.rmtree(directory, ignore_errors=True)
        if self._proc.stdout is not None:
            self._proc.stdout.close()
        self._pid = None

    def _disown(self) -> None:
        self._owner = -1
        if self._proc.stdin is not None:
            with contextlib.suppress(OSError):
                self._proc.stdin.close()

    def _await_pid(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while self._pid is None:
            if not self._readable(max(0.0, deadline - time.monotonic())):
                raise SupervisorError(f"supervisor did not start the server in {timeout:g} s")
            line = self._readline()
            if line.startswith("error ") or not line:
                raise SupervisorError(f"cannot start the server: {line[6:] or 'supervisor died'}")
            self._handle(line)

    def _readable(self, timeout: float) -> bool:
        stdout = self._proc.stdout
        if stdout is None or stdout.closed:
            return False
        readable, _, _ = select.select([stdout], [], [], timeout)
        return bool(readable)

    def _readline(self) -> str:
        stdout: IO[bytes] | None = self._proc.stdout
        assert stdout is not None
        return stdout.readline().decode("utf-8", "replace").strip()

    def _handle(self, line: str) -> None:
        if line.isdigit():
            self._pid = int(line)
            self.exit_code = None
        elif line.startswith("exited "):
            self.exit_code = int(line.split()[1])
        elif not line:  # EOF: the supervisor itself is gone
            self.exit_code = -1


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on ``host`` that was free a moment ago (another process may take it)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


# Local servers must be reached directly, even when HTTP(S)_PROXY is set.
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def http_ok(url: str, timeout: float = 2.0) -> bool:
    """True if ``GET url`` answers 200."""
    try:
        with _DIRECT.open(url, timeout=timeout) as response:
            return bool(response.status == 200)
    except urllib.error.HTTPError as exc:
        exc.close()
        return False
    except (OSError, http.client.HTTPException):
        return False


def tail(path: Path, lines: int = 40) -> str:
    """The last ``lines`` lines of a text file ('' if it cannot be read)."""
    try:
        with open(path, "rb") as file:
            file.seek(0, os.SEEK_END)
            file.seek(max(0, file.tell() - 65536))
            data = file.read()
    except OSError:
        return ""
    return "\n".join(data.decode("utf-8", "replace").splitlines()[-lines:])


if __name__ == "__main__":
    sys.exit(main())
