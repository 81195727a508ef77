"""ShardWriter: samples into tar shards in WebDataset layout, straight to the bucket,
indexed as they are written."""

from __future__ import annotations

import contextlib
import io
import tarfile
from collections.abc import Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any

from objsdk.errors import InvalidArgument, NoSuchKey

from .index import (
    ShardEntry,
    ShardIndex,
    index_location,
    normal_etag,
    read_index_object,
    save_index,
)
from .shards import Shard, parse_shard
from .tar import BLOCK, split_key

if TYPE_CHECKING:
    from objsdk import Client
    from objsdk._transfer.writer import ObjectWriter

__all__ = ["ShardWriter"]


class ShardWriter:
    """Write samples (dicts as :class:`ShardDataset` yields them) into tar shards.

    ``pattern`` names the shards: ``"bucket/prefix/shard-%06d.tar"`` (``%d`` takes the
    shard number, from ``start``). A shard ends when it holds ``maxcount`` samples or
    when the next sample would take it past ``maxsize`` bytes. Each sample needs
    ``__key__`` (no dot in its last path segment: WebDataset splits the key at the first
    dot); every other entry is a member named ``<key>.<suffix>``: bytes, str (UTF-8) or
    int (ASCII digits, as WebDataset writes a ``.cls``). Members are plain ustar/pax
    tar entries (mode 0644, mtime 0), so any tar tool and WebDataset read the shards.

    Each shard streams to the bucket through :meth:`Client.open_write`. ``close()`` (or
    the end of a ``with`` block) finishes the last shard and, with ``index=True``,
    writes the sample index of the shards beside them (merged into the index already
    there). Leaving the ``with`` block by an exception aborts the shard being written;
    the finished ones stay, and are indexed.
    """

    def __init__(
        self,
        client: Client,
        pattern: str,
        *,
        maxcount: int = 10_000,
        maxsize: int = 3 << 30,
        start: int = 0,
        index: bool = True,
    ) -> None:
        if maxcount < 1:
            raise InvalidArgument(f"maxcount must be >= 1, got {maxcount}")
        if maxsize < 1:
            raise InvalidArgument(f"maxsize must be >= 1, got {maxsize}")
        try:
            pattern % 0
        except (TypeError, ValueError):
            raise InvalidArgument(
                f"pattern must hold one %d for the shard number, got {pattern!r}"
            ) from None
        self.client = client
        self.pattern = pattern
        self.maxcount = maxcount
        self.maxsize = maxsize
        self.index = index
        self._next = start
        #: ``"bucket/key"`` of every shard finished so far, with its index entry
        self.written = ShardIndex()
        self._shard: Shard | None = None
        self._out: ObjectWriter | None = None
        self._offsets: list[int] = []
        self._pos = 0
        self._closed = False

    def __repr__(self) -> str:
        return f"ShardWriter({self.pattern!r}, {len(self.written)} shards written)"

    def write(self, sample: Mapping[str, Any]) -> None:
        """Append one sample (to a new shard if the current one is full)."""
        if self._closed:
            raise InvalidArgument("write to a closed ShardWriter")
        key = sample.get("__key__")
        if not isinstance(key, str) or not key or split_key(key + ".x") != (key, "x"):
            raise InvalidArgument(
                f"sample __key__ must be a non-empty str without a dot in its last path "
                f"segment, got {key!r}"
            )
        body = b"".join(
            _member(f"{key}.{suffix}", _bytes(key, suffix, value))
            for suffix, value in sample.items()
            if not suffix.startswith("__")
        )
        if not body:
            raise InvalidArgument(f"sample {key!r} has no fields besides __key__")
        if self._out is not None and (
            len(self._offsets) >= self.maxcount or self._pos + len(body) > self.maxsize
        ):
            self._finish()
        if self._out is None:
            self._begin()
        assert self._out is not None
        self._offsets.append(self._pos)
        self._out.write(body)
        self._pos += len(body)

    def close(self) -> None:
        """Finish the current shard and write the index."""
        if self._closed:
            return
        self._closed = True
        if self._out is not None:
            self._finish()
        if self.index and self.written:
            self._save_index()

    def __enter__(self) -> ShardWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.close()
            return
        out, self._out = self._out, None
        if out is not None:
            out.__exit__(exc_type, exc, tb)  # aborts the upload
        self._closed = True
        if self.index and self.written:
            self._save_index()

    # -- shards ----------------------------------------------------------------------------

    def _begin(self) -> None:
        self._shard = parse_shard(self.pattern % self._next)
        self._next += 1
        self._out = self.client.open_write(self._shard.bucket, self._shard.key)
        self._offsets = []
        self._pos = 0

    def _finish(self) -> None:
        out, shard = self._out, self._shard
        assert out is not None
        assert shard is not None
        self._out = None
        out.write(b"\0" * (2 * BLOCK))  # end-of-archive
        out.close()
        info = out.info
        self.written[str(shard)] = ShardEntry(
            size=self._pos + 2 * BLOCK,
            etag=normal_etag(info.etag if info is not None else None),
            offsets=tuple(self._offsets),
            end=self._pos,
        )

    def _save_index(self) -> None:
        for location in sorted({index_location(parse_shard(s)) for s in self.written}):
            merged = ShardIndex()
            with contextlib.suppress(NoSuchKey):
                merged.update(read_index_object(self.client, location))
            merged.update(self.written)
            save_index(self.client, location, merged)


def _bytes(key: str, suffix: str, value: Any) -> bytes:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value).encode("ascii")
    raise InvalidArgument(
        f"sample {key!r} field {suffix!r} must be bytes, str or int, got {type(value).__name__}"
    )


def _member(name: str, data: bytes) -> bytes:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    info.mtime = 0
    header = info.tobuf(format=tarfile.PAX_FORMAT, encoding="utf-8", errors="surrogateescape")
    pad = -len(data) % BLOCK
    with io.BytesIO() as buf:
        buf.write(header)
        buf.write(data)
        buf.write(b"\0" * pad)
        return buf.getvalue()
