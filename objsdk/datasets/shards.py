"""Naming shards: ``bucket/key`` strings, brace patterns, key patterns and prefixes.

``shard-{000000..000099}.tar`` expands to 100 names (zero padding follows the width of
the bounds), ``{a,b}`` to alternatives; several groups multiply. A spec ending in ``/``
is a prefix: every ``.tar`` object under it, in key order. A spec holding ``*`` is a
pattern of keys, as ``objsdk cp`` and s5cmd have them (``*`` matches any characters,
``/`` included; ``?`` and ``[seq]`` are pattern characters in it too): every object it
matches, in key order. A spec without ``*`` names its key exactly, ``[`` and ``?``
included, so no key is ever read in place of another.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, NamedTuple

from objsdk import ObjectSummary
from objsdk._core.wildcards import key_pattern, wildcard_base
from objsdk.errors import InvalidArgument

if TYPE_CHECKING:
    from objsdk import Client

__all__ = ["INDEX_NAME", "Shard", "expand_braces", "parse_shard", "resolve_shards"]

#: The index of the shards in a folder, beside them (see :mod:`objsdk.datasets.index`):
#: never a shard, whatever pattern matches it.
INDEX_NAME = "_objsdk_index.json"

_RANGE = re.compile(r"^(-?\d+)\.\.(-?\d+)$")
_MAX_EXPANSION = 1_000_000


class Shard(NamedTuple):
    """A shard: ``(bucket, key)``; ``str()`` gives ``bucket/key``."""

    bucket: str
    key: str

    def __str__(self) -> str:
        return f"{self.bucket}/{self.key}"


def expand_braces(pattern: str) -> list[str]:
    """All names a brace pattern stands for, in order.

    >>> expand_braces("s-{00..02}.tar")
    ['s-00.tar', 's-01.tar', 's-02.tar']
    >>> expand_braces("{a,b}/{1..2}")
    ['a/1', 'a/2', 'b/1', 'b/2']
    """
    start = pattern.find("{")
    if start < 0:
        if "}" in pattern:
            raise InvalidArgument(f"unbalanced '}}' in shard pattern {pattern!r}")
        return [pattern]
    end = pattern.find("}", start)
    if end < 0:
        raise InvalidArgument(f"unbalanced '{{' in shard pattern {pattern!r}")
    body = pattern[start + 1 : end]
    if "{" in body:
        raise InvalidArgument(f"nested braces are not supported in shard pattern {pattern!r}")
    head, tail = pattern[:start], pattern[end + 1 :]
    alternatives = _alternatives(body, pattern)
    rests = expand_braces(tail)
    if len(alternatives) * len(rests) > _MAX_EXPANSION:
        raise InvalidArgument(f"shard pattern {pattern!r} expands to too many names")
    return [head + a + r for a in alternatives for r in rests]


def _alternatives(body: str, pattern: str) -> list[str]:
    match = _RANGE.match(body)
    if match:
        lo_text, hi_text = match.groups()
        lo, hi = int(lo_text), int(hi_text)
        if hi < lo:
            raise InvalidArgument(f"empty range {{{body}}} in shard pattern {pattern!r}")
        if hi - lo >= _MAX_EXPANSION:
            raise InvalidArgument(f"range {{{body}}} in shard pattern {pattern!r} is too large")
        width = len(lo_text) if lo_text.startswith("0") and len(lo_text) > 1 else 0
        return [str(i).zfill(width) for i in range(lo, hi + 1)]
    if "," in body:
        return body.split(",")
    raise InvalidArgument(
        f"brace group {{{body}}} in shard pattern {pattern!r} is neither a range "
        "(like 000..099) nor a list (like a,b)"
    )


def parse_shard(spec: str) -> Shard:
    """``bucket/key`` (an ``s3://`` prefix is accepted) as a :class:`Shard`."""
    text = spec.removeprefix("s3://")
    bucket, sep, key = text.partition("/")
    if not bucket or not sep or not key:
        raise InvalidArgument(f"shard {spec!r} is not of the form 'bucket/key'")
    return Shard(bucket, key)


def resolve_shards(client: Client | None, shards: str | Iterable[str]) -> list[Shard]:
    """Every shard named by ``shards`` (one spec or several), in the given order.

    Prefixes (specs ending in ``/``) are listed with ``client`` and give the ``.tar``
    objects under them sorted by key; so are key patterns (specs holding ``*``), which
    give the objects they match; brace patterns are expanded without listing.
    """
    specs: Sequence[str] = [shards] if isinstance(shards, str) else list(shards)
    out: list[Shard] = []
    for spec in specs:
        if not isinstance(spec, str):
            raise InvalidArgument(f"shards must be strings 'bucket/key', got {spec!r}")
        for name in expand_braces(spec):
            if name.endswith("/"):
                out.extend(_list_prefix(client, name))
            elif "*" in name:
                out.extend(_list_matching(client, name))
            else:
                out.append(parse_shard(name))
    if not out:
        raise InvalidArgument(f"no shards found for {shards!r}")
    return out


def _list_prefix(client: Client | None, spec: str) -> list[Shard]:
    text = spec.removeprefix("s3://")
    bucket, _, prefix = text.partition("/")
    if not bucket:
        raise InvalidArgument(f"shard prefix {spec!r} is not of the form 'bucket/prefix/'")
    if client is None:
        raise InvalidArgument(f"listing the shard prefix {spec!r} needs a client")
    keys = sorted(
        entry.key
        for entry in client.list_objects(bucket, prefix=prefix)
        if isinstance(entry, ObjectSummary) and entry.key.endswith(".tar")
    )
    if not keys:
        raise InvalidArgument(f"no .tar objects under the shard prefix {spec!r}")
    return [Shard(bucket, k) for k in keys]


def _list_matching(client: Client | None, spec: str) -> list[Shard]:
    bucket, _, pattern = spec.removeprefix("s3://").partition("/")
    if not bucket or not pattern:
        raise InvalidArgument(f"shard pattern {spec!r} is not of the form 'bucket/pattern'")
    if client is None:
        raise InvalidArgument(f"listing the shard pattern {spec!r} needs a client")
    matches = key_pattern(pattern).match
    keys = sorted(
        entry.key
        for entry in client.list_objects(bucket, prefix=wildcard_base(pattern))
        if isinstance(entry, ObjectSummary)
        and not entry.key.endswith("/")
        and entry.key.rsplit("/", 1)[-1] != INDEX_NAME
        and matches(entry.key)
    )
    if not keys:
        raise InvalidArgument(f"no objects match the shard pattern {spec!r}")
    return [Shard(bucket, k) for k in keys]
