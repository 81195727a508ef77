"""The error a shard raises when it cannot be read as a WebDataset tar."""

from __future__ import annotations

from objsdk.errors import ObjsdkError

__all__ = ["ShardError"]


class ShardError(ObjsdkError):
    """A shard could not be read: missing, refused, corrupt, truncated or malformed.

    ``shard`` is ``bucket/key``; ``member`` the tar member being read (or the last one
    read before the failure, or None at the start); ``offset`` the byte offset in the
    shard where the problem is. ``__cause__`` holds the underlying error, if any.
    """

    def __init__(
        self, message: str, *, shard: str, member: str | None = None, offset: int | None = None
    ) -> None:
        self.shard = shard
        self.member = member
        self.offset = offset
        where = f"shard {shard!r}"
        if member is not None:
            where += f", member {member!r}"
        if offset is not None:
            where += f", offset {offset}"
        super().__init__(f"{message} ({where})")
