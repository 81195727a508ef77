"""How a user installs one of objsdk's optional extras: the command every message about a
missing one gives.

objsdk is not published on the package index (an install by name would fetch whatever
the index holds under it): it installs from its source tree, a clone, as
docs/getting-started.md says under "Install". The command below is the one given there
for the folder that holds the clone.
"""

from __future__ import annotations

__all__ = ["install_command", "needs_extra"]


def install_command(extra: str) -> str:
    """``pip install './objsdk[<extra>]'``: objsdk with ``extra``, from the folder holding
    the clone."""
    return f"pip install './objsdk[{extra}]'"


def needs_extra(what: str, extra: str) -> str:
    """The message for ``what`` lacking ``extra``'s packages: the command that installs
    them, and where the docs say more."""
    return (
        f"{what}: {install_command(extra)} from the folder holding your objsdk clone "
        '(docs/getting-started.md, "Install")'
    )
