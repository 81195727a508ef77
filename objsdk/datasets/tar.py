"""Reading WebDataset tar shards: members with their byte offsets, grouped into samples.

Members are read from any seekable binary file (an :class:`~objsdk.ObjectFile` in
practice) starting at a member boundary, so a reader can resume at the offset of any
member. Grouping follows WebDataset: the key is the member path up to the first dot of
its base name, the rest (lower-cased) is the suffix, consecutive members with one key
form a sample, non-regular members and ``__meta__``-style names are skipped.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Protocol

from objsdk.errors import ObjsdkError

from .errors import ShardError

__all__ = ["Member", "RawSample", "group_samples", "iter_members", "split_key"]

BLOCK = 512
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


def _number(field: bytes) -> int:
    """A tar numeric field: octal text, or base-256 when the high bit is set."""
    if field and field[0] & 0x80:
        value = int.from_bytes(field[1:], "big")
        return -value if field[0] & 0x40 else value
    text = field.split(b"\0", 1)[0].strip()
    return int(text, 8) if text else 0


# Larger sizes (base-256 fields hold up to 2^95) cannot be seeked past: refused.
_MAX_SIZE = 1 << 62


def _size(value: int) -> int:
    if not 0 <= value < _MAX_SIZE:
        raise ValueError(f"size {value} out of range")
    return value


def _checksum_ok(header: bytes) -> bool:
    try:
        stored = _number(header[148:156])
    except ValueError:
        return False
    unsigned = sum(header) - sum(header[148:156]) + 256
    if stored == unsigned:
        return True
    signed = sum(b - 256 if b > 127 else b for b in header) - sum(
        b - 256 if b > 127 else b for b in header[148:156]
    )
    return stored == signed + 256


def _text(field: bytes) -> str:
    return field.split(b"\0", 1)[0].decode("utf-8", "surrogateescape")


def _pax(data: bytes) -> dict[str, str]:
    """Records ``"<len> <key>=<value>\\n"`` of a pax extended header (POSIX.1-2008,
    pax "Extended Header"): ``<len>`` counts the whole record, newline included, so
    every record moves the parse forward; a record that does not is malformed."""
    out: dict[str, str] = {}
    pos = 0
    while pos < len(data) and data[pos] != 0:
        space = data.find(b" ", pos, pos + 21)
        digits = data[pos:space] if space > pos else b""
        if not digits.isdigit():
            raise ValueError(f"bad pax record length at byte {pos} of the extended header")
        length = int(digits)
        end = pos + length
        if end <= space + 1 or end > len(data) or data[end - 1] != 0x0A:
            raise ValueError(f"bad pax record of length {length} at byte {pos}")
        key, eq, value = data[space + 1 : end - 1].partition(b"=")
        if not eq:
            raise ValueError(f"pax record without '=' at byte {pos}")
        out[key.decode("utf-8", "surrogateescape")] = value.decode("utf-8", "surrogateescape")
        pos = end
    return out


# Members larger than this are read in pieces of it, so a header claiming more bytes than
# the shard holds costs at most this much memory before the shortfall is found.
_READ_PIECE = 64 << 20


def _read_exact(f: SeekableReader, size: int) -> bytes:
    """Up to ``size`` bytes (fewer only at the end of ``f``)."""
    if size <= _READ_PIECE:
        return f.read(size)
    pieces: list[bytes] = []
    left = size
    while left:
        piece = f.read(min(left, _READ_PIECE))
        if not piece:
            break
        pieces.append(piece)
        left -= len(piece)
    return b"".join(pieces)


_REGULAR = (b"0", b"\0", b"7")
_EXTENDED = (b"x", b"g", b"L", b"K")


def iter_members(f: SeekableReader, shard: str, start: int = 0) -> Iterator[Member]:
    """Regular members of the tar in ``f`` from the member header at ``start`` on.

    Raises :class:`ShardError` (naming ``shard`` and the member) for a bad header, a
    member cut short, or any read failure of ``f``. Reads ustar, GNU and pax archives
    (long names by pax ``path`` or GNU ``L`` records).
    """
    last: str | None = None
    pos = start
    member_start = start
    long_name: str | None = None
    pax: dict[str, str] = {}
    try:
        f.seek(start)
        while True:
            header = f.read(BLOCK)
            if not header:
                return  # the object ends at a block boundary: no end-of-archive blocks
            if len(header) < BLOCK:
                raise ShardError(
                    f"truncated tar header {_after(last)}",
                    shard=shard,
                    member=last,
                    offset=pos,
                )
            if header.count(0) == BLOCK:
                return  # end-of-archive block
            if not _checksum_ok(header):
                what = "not a tar archive" if pos == 0 else f"bad tar header {_after(last)}"
                raise ShardError(what, shard=shard, offset=pos)
            try:
                size = _size(_number(header[124:136]))
            except ValueError:
                raise ShardError(
                    f"bad size field in tar header {_after(last)}", shard=shard, offset=pos
                ) from None
            kind = header[156:157]
            data_at = pos + BLOCK
            end = data_at + ((size + BLOCK - 1) // BLOCK) * BLOCK
            if kind in _EXTENDED:
                ext = _read_exact(f, size)
                if len(ext) != size:
                    raise ShardError(
                        "extended tar header cut short", shard=shard, member=last, offset=pos
                    )
                if kind == b"x":
                    try:
                        pax = _pax(ext)
                    except ValueError as e:
                        raise ShardError(str(e), shard=shard, member=last, offset=pos) from None
                elif kind == b"L":
                    long_name = _text(ext)
                f.seek(end)
                pos = end
                continue
            name = _text(header[0:100])
            if header[257:262] == b"ustar":
                prefix = _text(header[345:500])
                if prefix:
                    name = f"{prefix}/{name}"
            name = pax.get("path", long_name or name)
            if "size" in pax:
                try:
                    size = _size(int(pax["size"]) if pax["size"].isascii() else -1)
                except ValueError:
                    raise ShardError(
                        f"bad pax size {pax['size'][:40]!r}", shard=shard, member=name, offset=pos
                    ) from None
                end = data_at + ((size + BLOCK - 1) // BLOCK) * BLOCK
            pax, long_name = {}, None
            if kind == b"S":
                raise ShardError(
                    "GNU sparse members are not supported", shard=shard, member=name, offset=pos
                )
            if kind in _REGULAR and not (kind == b"\0" and name.endswith("/")):
                data = _read_exact(f, size)
                if len(data) != size:
                    raise ShardError(
                        f"member cut short: {len(data)} of {size} bytes",
                        shard=shard,
                        member=name,
                        offset=data_at + len(data),
                    )
                last = name
                yield Member(name, member_start, data, end)
            f.seek(end)
            pos = member_start = end
    except ShardError:
        raise
    except (ObjsdkError, OSError) as e:
        raise ShardError(
            f"reading failed {_after(last)}: {e}", shard=shard, member=last, offset=pos
        ) from e


def _after(last: str | None) -> str:
    """Where in the shard a failure is, for its message."""
    return "before any member" if last is None else f"after member {last!r}"


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
