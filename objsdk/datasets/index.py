"""Sample indexes of tar shards: how many samples each shard holds and where each starts.

With an index, :class:`~objsdk.datasets.ShardDataset` splits an epoch by sample (every
rank the same count) and resumes by seeking straight to the next sample. The shards stay
plain tars that WebDataset and every tar tool read: the index is a separate object.

Where: one index per "directory" of shards, the key prefix up to the last ``/``, under
:data:`INDEX_NAME`: the shards ``b/train/shard-000000.tar`` ... are indexed by
``b/train/_objsdk_index.json``. Format (JSON)::

    {"format": "objsdk.shard-index", "version": 1,
     "shards": {"shard-000000.tar": {"size": 52428800, "etag": "\\"9b2c...\\"",
                                     "offsets": [0, 105472, ...], "end": 52428288}}}

``offsets`` are the byte offsets of each sample's first tar header, ``end`` where the
last sample ends; ``size`` and ``etag`` identify the shard version the index describes
(a shard whose ETag no longer matches is refused when read, naming the remedy).
"""

from __future__ import annotations

import itertools
import json
import logging
import posixpath
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from objsdk import ObjectSummary
from objsdk.errors import InvalidArgument, NoSuchKey, ObjectChangedError, ObjsdkError

from .errors import ShardError
from .shards import INDEX_NAME, Shard, parse_shard, resolve_shards
from .tar import group_samples, iter_members

if TYPE_CHECKING:
    from objsdk import Client

__all__ = [
    "INDEX_FORMAT",
    "INDEX_NAME",
    "ShardEntry",
    "ShardIndex",
    "build_index",
    "index_location",
    "load_index",
    "normal_etag",
    "save_index",
    "shard_changed",
]

log = logging.getLogger("objsdk.datasets")

INDEX_FORMAT = "objsdk.shard-index"
INDEX_VERSION = 1
# An interrupted build keeps what it scanned: the index is saved this often (seconds).
SAVE_EVERY = 30.0


@dataclass(frozen=True)
class ShardEntry:
    """One shard in an index: its version, and where its samples start."""

    size: int
    etag: str | None
    offsets: tuple[int, ...]
    end: int

    @property
    def count(self) -> int:
        return len(self.offsets)

    def to_json(self) -> dict[str, Any]:
        return {
            "size": self.size,
            "etag": self.etag,
            "offsets": list(self.offsets),
            "end": self.end,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any], where: str) -> ShardEntry:
        try:
            offsets = tuple(int(o) for o in data["offsets"])
            entry = cls(int(data["size"]), data.get("etag"), offsets, int(data["end"]))
        except (KeyError, TypeError, ValueError) as e:
            raise InvalidArgument(f"malformed shard index entry in {where}: {e}") from None
        ordered = all(a < b for a, b in itertools.pairwise(offsets))
        if not ordered or (offsets and entry.end < offsets[-1]):
            raise InvalidArgument(f"shard index entry in {where} has offsets out of order")
        return entry


class ShardIndex(dict[str, ShardEntry]):
    """``"bucket/key"`` of a shard -> its :class:`ShardEntry`."""

    def covers(self, shards: Iterable[Shard]) -> bool:
        return all(str(s) in self for s in shards)


def normal_etag(etag: str | None) -> str | None:
    """An ETag without its quotes (listings and GET answers differ in quoting)."""
    return etag.strip('"') or None if etag else None


def shard_changed(
    shard: Shard,
    etag: str | None,
    recorded: str | None,
    *,
    since: str,
    record: str,
    remedy: str,
    cause: ObjectChangedError | None = None,
) -> ShardError:
    """The refusal of a shard that is no longer the version recorded for it (by its
    sample index, or by the state a resumed epoch was saved in): names the shard, its
    ETag now and the recorded one. ``__cause__`` is ``cause`` (the read's own
    :class:`~objsdk.ObjectChangedError`) or one saying the same."""
    now, then = normal_etag(etag), normal_etag(recorded)
    error = ShardError(
        f"shard changed since {since} (ETag {now}, {record} {then}); {remedy}", shard=str(shard)
    )
    error.__cause__ = cause or ObjectChangedError(
        f"ETag {then} is now {now}", bucket=shard.bucket, key=shard.key
    )
    return error


def index_location(shard: Shard) -> Shard:
    """Where the index of ``shard``'s directory lives."""
    folder = posixpath.dirname(shard.key)
    return Shard(shard.bucket, f"{folder}/{INDEX_NAME}" if folder else INDEX_NAME)


def _folder_of(location: Shard) -> str:
    folder = posixpath.dirname(location.key)
    return f"{location.bucket}/{folder}/" if folder else f"{location.bucket}/"


def read_index_object(client: Client, location: Shard) -> ShardIndex:
    """The entries of the index object at ``location`` (NoSuchKey if there is none)."""
    raw = client.get_object(location.bucket, location.key)
    where = str(location)
    try:
        data = json.loads(raw)
    except ValueError as e:
        raise InvalidArgument(f"shard index {where} is not JSON: {e}") from None
    if not isinstance(data, dict) or data.get("format") != INDEX_FORMAT:
        raise InvalidArgument(f"{where} is not an objsdk shard index")
    if data.get("version") != INDEX_VERSION:
        raise InvalidArgument(f"shard index {where} has unknown version {data.get('version')!r}")
    folder = _folder_of(location)
    shards = data.get("shards")
    if not isinstance(shards, dict):
        raise InvalidArgument(f"shard index {where} has no 'shards' table")
    return ShardIndex({folder + name: ShardEntry.from_json(e, where) for name, e in shards.items()})


def save_index(client: Client, location: Shard, index: Mapping[str, ShardEntry]) -> None:
    """Write the entries of ``index`` that lie in ``location``'s directory to it."""
    folder = _folder_of(location)
    shards = {
        name[len(folder) :]: entry.to_json()
        for name, entry in sorted(index.items())
        if name.startswith(folder) and "/" not in name[len(folder) :]
    }
    body = {"format": INDEX_FORMAT, "version": INDEX_VERSION, "shards": shards}
    data = json.dumps(body, separators=(",", ":")).encode()
    client.put_object(location.bucket, location.key, data, content_type="application/json")


def load_index(client: Client, shards: Iterable[Shard]) -> ShardIndex | None:
    """The indexes beside ``shards`` merged, or None if one directory has none or one
    lacks a shard (a partial index cannot split by sample)."""
    merged = ShardIndex()
    shards = list(shards)
    for location in sorted({index_location(s) for s in shards}):
        try:
            merged.update(read_index_object(client, location))
        except NoSuchKey:
            return None
    if not merged.covers(shards):
        missing = [str(s) for s in shards if str(s) not in merged]
        log.warning(
            "shard index lacks %d of %d shards (first: %s): splitting by shard; "
            "rebuild it with `objsdk index`",
            len(missing),
            len(shards),
            missing[0],
        )
        return None
    return merged


def scan_shard(client: Client, shard: Shard) -> ShardEntry:
    """Read ``shard`` once and return its entry."""
    name = str(shard)
    offsets: list[int] = []
    end = 0
    with client.open(shard.bucket, shard.key) as f:
        for raw in group_samples(iter_members(f, name), name):
            offsets.append(raw.offset)
            end = raw.end
        return ShardEntry(f.size, normal_etag(f.etag), tuple(offsets), end)


def build_index(
    client: Client,
    shards: str | Iterable[str],
    *,
    parallel: int = 8,
    progress: Callable[[str, ShardEntry], None] | None = None,
) -> ShardIndex:
    """Index ``shards`` (specs as :class:`ShardDataset` takes them) and store the index
    beside them (see the module docstring for where and what).

    One pass over each shard, ``parallel`` at a time. Resumable: shards already in an
    existing index with the same size and ETag (by one listing per directory) are not
    read again, and the index is saved every :data:`SAVE_EVERY` seconds while building,
    so an interrupted build continues where it stopped. ``progress(shard, entry)`` is
    called as each shard is done. Raises :class:`ShardError` for a shard that cannot be
    read (after saving what was done).
    """
    if parallel < 1:
        raise InvalidArgument(f"parallel must be >= 1, got {parallel}")
    targets = resolve_shards(client, shards)
    locations = sorted({index_location(s) for s in targets})
    index = ShardIndex()
    for location in locations:
        try:
            index.update(read_index_object(client, location))
        except NoSuchKey:
            pass
        except InvalidArgument as e:
            log.warning("rebuilding %s: %s", location, e)
    current = _listed(client, locations)
    todo = []
    for shard in targets:
        entry, now = index.get(str(shard)), current.get(str(shard))
        if entry is None or now is None or (entry.size, entry.etag) != now:
            index.pop(str(shard), None)
            todo.append(shard)
    lock = threading.Lock()
    last_save = time.monotonic()

    def save_all() -> None:
        for location in locations:
            save_index(client, location, index)

    try:
        with ThreadPoolExecutor(parallel, thread_name_prefix="objsdk-index") as pool:
            futures = {pool.submit(scan_shard, client, s): s for s in dict.fromkeys(todo)}
            for future in as_completed(futures):
                shard = futures[future]
                try:
                    entry = future.result()
                except ShardError:
                    raise
                except ObjsdkError as e:
                    raise ShardError(f"cannot index: {e}", shard=str(shard)) from e
                with lock:
                    index[str(shard)] = entry
                if progress is not None:
                    progress(str(shard), entry)
                if time.monotonic() - last_save > SAVE_EVERY:
                    save_all()
                    last_save = time.monotonic()
    finally:
        save_all()
    return ShardIndex({str(s): index[str(s)] for s in targets})


def _listed(client: Client, locations: list[Shard]) -> dict[str, tuple[int, str | None]]:
    """``"bucket/key"`` -> (size, ETag) of every object in the indexes' directories."""
    out: dict[str, tuple[int, str | None]] = {}
    for location in locations:
        folder = posixpath.dirname(location.key)
        prefix = f"{folder}/" if folder else ""
        for entry in client.list_objects(location.bucket, prefix=prefix):
            if isinstance(entry, ObjectSummary):
                out[f"{location.bucket}/{entry.key}"] = (entry.size, normal_etag(entry.etag))
    return out


def index_from_spec(client: Client, spec: str) -> ShardIndex:
    """The index object named by ``"bucket/key"`` (the ``index=`` of ShardDataset)."""
    return read_index_object(client, parse_shard(spec))


def index_command(client: Client, spec: str, *, parallel: int, note: Callable[[str], None]) -> int:
    """``objsdk index s3://bucket/prefix/``: build (or bring up to date) the index of the
    shards ``spec`` names, reporting each shard through ``note``. Returns the exit code."""
    done = 0

    def report(shard: str, entry: ShardEntry) -> None:
        nonlocal done
        done += 1
        note(f"index: {shard}: {entry.count} samples")

    index = build_index(client, spec, parallel=parallel, progress=report)
    where = sorted({str(index_location(parse_shard(s))) for s in index})
    samples = sum(e.count for e in index.values())
    note(f"index: {len(index)} shards ({done} read), {samples} samples -> {', '.join(where)}")
    return 0
