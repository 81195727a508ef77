"""Exit codes and the one-line messages the command line prints for errors.

The codes follow the aws CLI's, so scripts written for one read the other.
"""

from __future__ import annotations

from .. import errors
from .._core.upload_record import KeptUpload

__all__ = [
    "EXIT_BAD_ARGS",
    "EXIT_BAD_CONFIG",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_OTHER",
    "EXIT_SERVICE",
    "EXIT_SKIPPED",
    "CliError",
    "error_record",
    "exit_code_for",
    "message_for",
]

EXIT_OK = 0
EXIT_FAILED = 1  # one or more transfers failed
EXIT_SKIPPED = 2  # one or more files were skipped; the rest was transferred
EXIT_INTERRUPTED = 130  # SIGINT (Ctrl-C)
EXIT_BAD_ARGS = 252  # bad command line: unknown option, bad s3:// URL, missing local file
EXIT_BAD_CONFIG = 253  # no endpoint or credentials, unknown profile, unreadable config
EXIT_SERVICE = 254  # the server answered with an error (no such bucket/key, access denied)
EXIT_OTHER = 255  # the endpoint could not be reached, or anything unexpected


class CliError(Exception):
    """An error the command line reports as one line and an exit code."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def exit_code_for(exc: BaseException) -> int:
    """The exit code for an exception that reached the top of a command."""
    if isinstance(exc, CliError):
        return exc.code
    if isinstance(exc, KeyboardInterrupt):
        return EXIT_INTERRUPTED
    if isinstance(exc, errors.ConfigError | errors.CredentialsError):
        return EXIT_BAD_CONFIG
    if isinstance(exc, errors.InvalidArgument):
        return EXIT_BAD_ARGS
    if isinstance(exc, errors.S3Error):
        return EXIT_SERVICE
    if isinstance(exc, errors.ReadError | errors.SourceChangedError | errors.LocalWriteError):
        return EXIT_FAILED
    return EXIT_OTHER


# A local path's own faults: Python's errors, told by what is wrong with which path.
_PATH_ERRORS = (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError)


def message_for(exc: BaseException) -> str:
    """One line describing ``exc`` for a user (objsdk messages carry no credentials)."""
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted"
    if isinstance(exc, errors.ConnectError) and exc.endpoint:
        # As aws says it ('Could not connect to the endpoint URL: "..."'), and why.
        said = f'Could not connect to the endpoint URL: "{exc.endpoint}"'
        return f"{said}: {exc.reason}" if exc.reason else said
    if isinstance(exc, errors.AccessDenied) and exc.clock_skew is None:
        # (With the clock off, the message says so: the credentials are not the cause.)
        return f"{exc} (check the credentials and their permissions)"
    if isinstance(exc, _PATH_ERRORS):
        return f"{exc.strerror}: {exc.filename}"
    if isinstance(exc, errors.ObjsdkError | CliError):
        text = str(exc)
        kept = getattr(exc, "kept_upload", None)
        if isinstance(kept, KeptUpload):  # the command is what to run again
            text = text.replace(kept.advice(), kept.advice("the same command"))
        return text
    return f"{type(exc).__name__}: {exc}"


_CLI_CODES = {EXIT_BAD_ARGS: "InvalidArgument", EXIT_BAD_CONFIG: "InvalidConfiguration"}


def error_record(exc: BaseException) -> dict[str, object]:
    """``exc`` as the JSON object ``--json`` prints on stderr: ``code`` (the S3 error
    code, else the kind of error), ``message``, and ``bucket``, ``key`` or ``prefix``
    where known."""
    code = getattr(exc, "code", None)
    if isinstance(exc, CliError):
        code = _CLI_CODES.get(exc.code, "Failed")
    record: dict[str, object] = {
        "code": code if isinstance(code, str) else type(exc).__name__,
        "message": message_for(exc),
    }
    for name in ("bucket", "key", "prefix"):
        value = getattr(exc, name, None)
        if value is not None:
            record[name] = value
    if isinstance(exc, OSError) and exc.filename is not None:
        record["path"] = str(exc.filename)
    return record
