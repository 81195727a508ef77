"""Patterns of keys, as s5cmd has them (pure): ``*`` matches any characters, ``/``
included, ``?`` one character, ``[seq]`` one of them; the prefix before the first
wildcard, to its last ``/``, is what is listed."""

from __future__ import annotations

import re
from fnmatch import translate

__all__ = ["has_wildcard", "key_pattern", "wildcard_base"]

_WILDCARD = re.compile(r"[*?\[]")


def has_wildcard(key: str) -> bool:
    """True when ``key`` holds ``*``, ``?`` or ``[``: an s5cmd-style pattern of keys."""
    return _WILDCARD.search(key) is not None


def wildcard_base(key: str) -> str:
    """The prefix to list for a wildcard key: up to the last ``/`` before its first
    wildcard (``logs/2024/*.gz`` -> ``logs/2024/``); names are kept relative to it."""
    m = _WILDCARD.search(key)
    head = key if m is None else key[: m.start()]
    return head[: head.rfind("/") + 1]


def key_pattern(key: str) -> re.Pattern[str]:
    """The whole-key matcher of the pattern ``key`` (``fnmatch`` rules, case-sensitive)."""
    return re.compile(translate(key))
