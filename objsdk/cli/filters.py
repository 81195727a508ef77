"""``--exclude`` and ``--include``, with the aws CLI's semantics (pure).

Every file or object is in at first; each pattern, in the order given, puts the paths it
matches out (``--exclude``) or back in (``--include``), so the last match decides.
Patterns are matched against the path relative to the source (or destination)
directory or prefix, whole, with ``fnmatch`` rules: ``*`` matches any characters
including ``/``, ``?`` one character, ``[seq]`` one of them; case matters.
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass, field
from fnmatch import translate
from typing import Any

__all__ = ["FilterAction", "Filters"]


@dataclass(frozen=True)
class Filters:
    """The ordered ``(include, pattern)`` rules; empty: everything is in."""

    rules: tuple[tuple[bool, str], ...] = ()
    _compiled: tuple[tuple[bool, re.Pattern[str]], ...] = field(
        default=(), compare=False, repr=False
    )

    def __post_init__(self) -> None:
        compiled = tuple((inc, re.compile(translate(p))) for inc, p in self.rules)
        object.__setattr__(self, "_compiled", compiled)

    def __bool__(self) -> bool:
        return bool(self.rules)

    def accepts(self, rel: str) -> bool:
        """True when ``rel`` (a relative posix path) is in after every rule."""
        keep = True
        for include, pattern in self._compiled:
            if keep != include and pattern.match(rel):
                keep = include
        return keep


class FilterAction(argparse.Action):
    """Collects ``--exclude``/``--include`` in the order given, into one list."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        rules = list(getattr(namespace, "filters", None) or [])
        rules.append((option_string == "--include", str(values)))
        namespace.filters = rules
