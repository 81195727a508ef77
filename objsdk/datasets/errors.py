"""The error a shard raises when it cannot be read as a WebDataset tar."""

from __future__ import annotations

import ast
import re

from objsdk.errors import ObjsdkError

__all__ = ["ShardError"]

# The "(shard ..., member ..., offset ...)" tail of a message, as __init__ writes it.
_WHERE = re.compile(
    r"\(shard (?P<shard>'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")"
    r"(?:, member (?P<member>'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"))?"
    r"(?:, offset (?P<offset>\d+))?\)"
)


class ShardError(ObjsdkError):
    """A shard could not be read: missing, refused, corrupt, truncated or malformed.

    ``shard`` is ``bucket/key``; ``member`` the tar member being read (or the last one
    read before the failure, or None at the start); ``offset`` the byte offset in the
    shard where the problem is. ``__cause__`` holds the underlying error, if any.

    ``ShardError(message)`` alone is how torch's DataLoader rebuilds an error raised in a
    worker (from its formatted text): ``shard``, ``member`` and ``offset`` are then read
    back from the message, so ``except ShardError`` and the attributes work across the
    worker boundary.
    """

    def __init__(
        self,
        message: str,
        *,
        shard: str | None = None,
        member: str | None = None,
        offset: int | None = None,
    ) -> None:
        if shard is None:
            found = list(_WHERE.finditer(message))
            last = found[-1] if found else None
            self.shard = _literal(last["shard"]) if last else None
            self.member = _literal(last["member"]) if last else None
            self.offset = int(last["offset"]) if last and last["offset"] else None
            super().__init__(message)
            return
        self.shard = shard
        self.member = member
        self.offset = offset
        where = f"shard {shard!r}"
        if member is not None:
            where += f", member {member!r}"
        if offset is not None:
            where += f", offset {offset}"
        super().__init__(f"{message} ({where})")


def _literal(text: str | None) -> str | None:
    if text is None:
        return None
    value = ast.literal_eval(text)
    return value if isinstance(value, str) else None
