"""Reading WebDataset tar shards: members with their byte offsets, grouped into samples.

Members are read from any seekable binary file (an :class:`~objsdk.ObjectFile` in
practice) starting at a member boundary, so a reader can resume at the offset of any
member. Grouping follows WebDataset: the key is the member path up to the first dot of
its base name, the rest (lower-cased) is the suffix, consecutive members with one key
form a sample, non-regular members and ``__meta__``-style names are skipped.
"""

from __future__ import annotations

import re
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO, Protocol, cast

from objsdk.errors import ObjsdkError

from .errors import ShardError

__all__ = ["Member", "RawSample", "group_samples", "iter_members", "split_key"]

BLOCK = tarfile.BLOCKSIZE
_KEY_RE = re.compile(r"^((?:.*/|)[^.]+)[.]([^/]*)$")
_SKIP_META = re.compile(r"__[^/]*__($|/)")


@dataclass(frozen=True)
class Member:
    """One regular tar member: its path, the offset of its header, its data, and the
    offset where the next member's header starts."""

    name: str
    offset: int
    data: bytes
    end: int


@dataclass
class RawSample:
    """Members sharing a key. ``offset`` is where the sample's first header starts,
    ``end`` where the next sample's first header starts (or the end of the archive)."""

    key: str
    offset: int
    end: int = 0
    fields: dict[str, bytes] = field(default_factory=dict)
    members: dict[str, str] = field(default_factory=dict)  # suffix -> member path


class SeekableReader(Protocol):
    """What reading a shard needs: an :class:`~objsdk.ObjectFile` or a local file."""

    def read(self, size: int = -1, /) -> bytes: ...
    def seek(self, offset: int, whence: int = 0, /) -> int: ...
    def tell(self) -> int: ...


def split_key(path: str) -> tuple[str, str] | None:
    """``(key, suffix)`` by WebDataset's rule, suffix lower-cased; None if no dot."""
    match = _KEY_RE.match(path)
    if not match:
        return None
    return match.group(1), match.group(2).lower()


def _skipped(name: str) -> bool:
    if "/" not in name and name.startswith("__") and name.endswith("__"):
        return True
    return _SKIP_META.match(name) is not None


def iter_members(f: SeekableReader, shard: str, start: int = 0) -> Iterator[Member]:
    """Regular members of the tar in ``f`` from the member header at ``start`` on.

    Raises :class:`ShardError` (naming ``shard`` and the member) for a bad header, a
    member cut short, or any read failure of ``f``.
    """
    last: str | None = None
    pos = start
    try:
        f.seek(start)
        try:
            tar = tarfile.open(fileobj=cast(IO[bytes], f), mode="r:")  # noqa: SIM115
        except tarfile.TarError as e:
            raise ShardError(f"not a tar archive: {e}", shard=shard, offset=start) from e
        with tar:
            while True:
                # Keep the file where tarfile expects it: it must never seek backwards.
                f.seek(tar.offset)
                pos = tar.offset
                try:
                    info = tar.next()
                except tarfile.TarError as e:
                    raise ShardError(
                        f"bad tar header after member {last!r}: {e}", shard=shard, offset=pos
                    ) from e
                if info is None:
                    break
                name = info.name
                if not info.isreg():
                    continue
                f.seek(info.offset_data)
                data = f.read(info.size)
                if len(data) != info.size:
                    raise ShardError(
                        f"member cut short: {len(data)} of {info.size} bytes",
                        shard=shard,
                        member=name,
                        offset=info.offset_data + len(data),
                    )
                last = name
                yield Member(name, info.offset, data, tar.offset)
            _check_end(f, tar.offset, shard, last)
    except ShardError:
        raise
    except (ObjsdkError, OSError) as e:
        raise ShardError(
            f"reading failed after member {last!r}: {e}", shard=shard, member=last, offset=pos
        ) from e


def _check_end(f: SeekableReader, offset: int, shard: str, last: str | None) -> None:
    """tarfile stops quietly at a bad header after the first one: tell the end of the
    archive (zero blocks, or the object ending at a block boundary) from corruption."""
    f.seek(offset)
    block = f.read(BLOCK)
    if block.count(0) == len(block) and (not block or len(block) == BLOCK):
        return
    what = "truncated" if len(block) < BLOCK else "bad"
    raise ShardError(f"{what} tar header after member {last!r}", shard=shard, offset=offset)


def group_samples(members: Iterator[Member], shard: str) -> Iterator[RawSample]:
    """Consecutive members with one key as samples; a repeated suffix is an error."""
    current: RawSample | None = None
    for m in members:
        if _skipped(m.name):
            continue
        parts = split_key(m.name)
        if parts is None:
            continue
        key, suffix = parts
        if current is None or key != current.key:
            if current is not None:
                current.end = m.offset
                yield current
            current = RawSample(key, m.offset)
        if suffix in current.fields:
            raise ShardError(
                f"duplicate suffix {suffix!r} in sample {key!r}",
                shard=shard,
                member=m.name,
                offset=m.offset,
            )
        current.fields[suffix] = m.data
        current.members[suffix] = m.name
        current.end = m.end
    if current is not None:
        yield current
