"""A profile's ``credential_process``: the command to run and the JSON it must print.

``credential_process = /usr/bin/get-creds --account ml`` in a profile names a program
that prints, on its standard output (AWS CLI "Sourcing credentials with an external
process")::

    {"Version": 1, "AccessKeyId": "...", "SecretAccessKey": "...",
     "SessionToken": "...", "Expiration": "2024-01-02T03:04:05Z"}

``SessionToken`` and ``Expiration`` are optional (no ``Expiration``: the keys never
expire). The program runs without a shell: the line is split as a POSIX shell splits
words (botocore's ``compat_shell_split``); on Windows it is passed whole, as a command
line, since each Windows program splits its own. Running it is the caller's part; this
module says what to run and what the output means.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from typing import ClassVar

from ..errors import ConfigError
from .credential_json import PROCESS_FIELDS, credentials_from_fields, json_object
from .signing import Credentials

__all__ = ["CredentialProcess"]

# Enough of a failing program's stderr to say why, short enough for one message.
_STDERR_SHOWN = 1000


@dataclass(frozen=True)
class CredentialProcess:
    """Profile ``profile``'s ``credential_process`` line, ``command``."""

    profile: str
    command: str

    #: botocore's name for this source (``Credentials.method``).
    method: ClassVar[str] = "custom-process"

    def describe(self) -> str:
        return f"profile `{self.profile}` (credential_process)"

    def args(self, *, windows: bool = os.name == "nt") -> list[str] | str:
        """What to hand to ``subprocess.run`` (without ``shell=True``): the words of the
        line, or on Windows the line itself. :class:`ConfigError` if it cannot be split
        (an unclosed quote) or is empty."""
        if windows:
            if not self.command.strip():
                raise ConfigError(f"{self.describe()} is empty")
            return self.command
        try:
            words = shlex.split(self.command)
        except ValueError as e:
            raise ConfigError(f"{self.describe()} cannot be split into words: {e}") from None
        if not words:
            raise ConfigError(f"{self.describe()} is empty")
        return words

    def parse_output(self, stdout: bytes | str) -> Credentials:
        """The credentials the program printed; :class:`ConfigError` naming the profile
        and the field if the output is not version 1 of the format (never quoting it)."""

        def error(message: str) -> ConfigError:
            return ConfigError(message)

        what = f"the output of {self.describe()}"
        document = json_object(stdout, what, error)
        version = document.get("Version")
        if version != 1 or isinstance(version, bool):
            # Only a number or null is shown: the output may hold anything.
            plain = version is None or isinstance(version, int | float)
            shown = repr(version)[:20] if plain else f"a {type(version).__name__}"
            raise ConfigError(f"{what} has Version {shown}; only version 1 is supported")
        return credentials_from_fields(document, what, error, PROCESS_FIELDS)

    def failure(self, returncode: int, stderr: bytes | str) -> ConfigError:
        """The error for a run that exited with ``returncode`` (not 0), with the end of
        what the program wrote on its standard error."""
        text = stderr.decode("utf-8", "replace") if isinstance(stderr, bytes) else stderr
        text = text.strip()
        if len(text) > _STDERR_SHOWN:
            text = "..." + text[-_STDERR_SHOWN:]
        said = f": {text}" if text else " and wrote nothing on stderr"
        return ConfigError(f"{self.describe()} exited with status {returncode}{said}")
