"""Where a download to a path keeps its bytes until they are complete, and the record
an interrupted download leaves beside them.

The temp file for ``dir/name`` is ``dir/.name.objsdk-<tag>``, its record
``dir/.name.objsdk-<tag>.json``. ``tag`` is a keyed hash (HMAC-SHA256) of the
destination's absolute path under a random key kept in the user's cache directory, so
no object key can produce either name: ``cp -r`` of a prefix holding ``y`` and
``.y.objsdk-<anything>`` never writes one download's temp file or record as another's
final file. Names too long for NAME_MAX (255 bytes) keep a prefix of ``name``; the tag
still tells them apart.

The record says which parts are on disk, and for which download::

    {"format": 2, "bucket": "b", "key": "k", "etag": "\\"9b2c...\\"", "version_id": null,
     "size": 123456789, "part_size": 16777216, "dest": "/abs/dir/name",
     "done": [[0, 5], [7, 7]]}

``done`` lists runs of part numbers (first, last; inclusive), so the record stays small
for objects of millions of parts. A part is recorded only after its bytes are fsynced,
and the record is replaced atomically (temp + rename), so after a crash it never claims
bytes that are not on disk. A record that cannot be trusted (corrupt, hostile, too big,
a link) is ignored: the download starts over.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import secrets
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from objsdk._core.parts import part_count
from objsdk._core.sizes import MiB

__all__ = [
    "DownloadState",
    "cache_dir",
    "download_paths",
    "load_state",
    "record_key",
    "reusable_parts",
    "save_state",
]

STATE_FORMAT = 2
# A genuine record is a few hundred bytes; refuse to parse a huge one.
MAX_STATE_BYTES = MiB
# Never follow a link planted where a temp or state file goes.
O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


@dataclass(frozen=True)
class DownloadState:
    """The record kept beside a temp file: which object it is and which parts it holds."""

    bucket: str
    key: str
    etag: str | None
    version_id: str | None
    size: int
    part_size: int
    dest: str = ""  # the destination's absolute path
    done: frozenset[int] = field(default_factory=frozenset)

    def same_download(self, other: DownloadState) -> bool:
        """True if ``other`` describes the same bytes laid out in the same parts."""
        return replace(self, done=frozenset()) == replace(other, done=frozenset())

    def to_json(self) -> str:
        return json.dumps(
            {
                "format": STATE_FORMAT,
                "bucket": self.bucket,
                "key": self.key,
                "etag": self.etag,
                "version_id": self.version_id,
                "size": self.size,
                "part_size": self.part_size,
                "dest": self.dest,
                "done": _runs(self.done),
            }
        )

    @classmethod
    def from_json(cls, text: str | bytes) -> DownloadState | None:
        """The state in ``text``, or None if it is not a valid record (start over)."""
        try:
            raw = json.loads(text)
            state = cls(
                bucket=_typed(raw["bucket"], str),
                key=_typed(raw["key"], str),
                etag=_optional(raw["etag"], str),
                version_id=_optional(raw["version_id"], str),
                size=_typed(raw["size"], int),
                part_size=_typed(raw["part_size"], int),
                dest=_typed(raw["dest"], str),
                done=frozenset(_expand(raw["done"])),
            )
            if raw["format"] != STATE_FORMAT or state.size < 0 or state.part_size < 1:
                return None
        except (ValueError, TypeError, KeyError, RecursionError):
            return None  # JSONDecodeError is a ValueError; deep nesting a RecursionError
        if any(i >= part_count(state.size, state.part_size) for i in state.done):
            return None
        return state


def _typed(value: Any, kind: type[Any]) -> Any:
    if not isinstance(value, kind) or isinstance(value, bool):
        raise TypeError(f"expected {kind.__name__}, got {value!r}")
    return value


def _optional(value: Any, kind: type[Any]) -> Any:
    return None if value is None else _typed(value, kind)


def _runs(indices: Iterable[int]) -> list[list[int]]:
    """Sorted part numbers as inclusive runs: {0, 1, 2, 5} -> [[0, 2], [5, 5]]."""
    runs: list[list[int]] = []
    for i in sorted(indices):
        if runs and runs[-1][1] == i - 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return runs


def _expand(runs: Any) -> Iterable[int]:
    for run in _typed(runs, list):
        first, last = (_typed(x, int) for x in _typed(run, list))
        if not 0 <= first <= last:
            raise ValueError(f"bad run {run!r}")
        yield from range(first, last + 1)


def reusable_parts(
    saved: DownloadState | None, wanted: DownloadState, temp_size: int | None
) -> frozenset[int]:
    """The parts an earlier, interrupted download left that this one can keep.

    Only if the record describes the same object version (bucket, key, ETag, version
    id) going to the same destination, the same size and part size, and the temp file
    has the object's size; otherwise none (start over). Without an ETag nothing proves
    the bytes on disk are of this version.
    """
    if saved is None or wanted.etag is None or temp_size != wanted.size:
        return frozenset()
    if not saved.same_download(wanted):
        return frozenset()
    return saved.done


def load_state(path: str) -> DownloadState | None:
    """The record at ``path``, or None if there is none or it cannot be trusted."""
    try:
        fd = os.open(path, os.O_RDONLY | O_NOFOLLOW)
    except OSError:  # missing, or a link
        return None
    with os.fdopen(fd, "rb") as f:
        text = f.read(MAX_STATE_BYTES + 1)
    if len(text) > MAX_STATE_BYTES:
        return None
    return DownloadState.from_json(text)


def save_state(path: str, state: DownloadState) -> None:
    """Replace the record at ``path`` atomically: the old one or the new one, never a
    torn one, is what a crash leaves."""
    tmp = path + ".tmp"
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)  # whatever was there (a link, say) is not written through
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | O_NOFOLLOW, 0o666)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(state.to_json())
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


# -- names ---------------------------------------------------------------------------------

NAME_MAX = 255
_TAG_CHARS = 16  # 64 bits of the HMAC, in hex
# The longest name derived from the temp file's: the record's temp, ".json.tmp".
_LONGEST_SUFFIX = len(".json.tmp")
_keys: dict[str, bytes] = {}  # key file -> key


def download_paths(dest: str) -> tuple[str, str]:
    """The temp file and the record a download to ``dest`` uses (beside ``dest``)."""
    path = os.path.abspath(dest)
    directory, name = os.path.split(path)
    tag = hmac.new(_download_key(), os.fsencode(path), hashlib.sha256).hexdigest()[:_TAG_CHARS]
    suffix = f".objsdk-{tag}"
    room = NAME_MAX - 1 - len(suffix) - _LONGEST_SUFFIX
    raw = os.fsencode(name)
    if len(raw) > room:
        # Keep whole characters: cut the encoded name, drop a split one at the end.
        name = raw[:room].decode("utf-8", "ignore") if _utf8(raw) else os.fsdecode(raw[:room])
    temp = os.path.join(directory, f".{name}{suffix}")
    return temp, temp + ".json"


def _utf8(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def cache_dir() -> str:
    """``$XDG_CACHE_HOME/objsdk`` (``~/.cache/objsdk``), as the environment the call
    sees says: where the records' key and the records of uploads are kept."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "objsdk")


def record_key() -> bytes:
    """The key under which the names of downloads' temp files and of uploads' records
    are keyed hashes (:func:`_download_key`)."""
    return _download_key()


def _download_key() -> bytes:
    """The key that makes temp names unguessable: 32 random bytes in
    ``$XDG_CACHE_HOME/objsdk/download-key`` (``~/.cache``), shared by the user's
    processes so a later call finds an interrupted download's temp file. Where it cannot
    be kept, a key for this process only (downloads then resume within it only). Kept
    in memory by the file's path, which follows the environment the call sees."""
    path = os.path.join(cache_dir(), "download-key")
    key = _keys.get(path)
    if key is None:
        try:
            key = _load_or_create_key(path)
        except OSError:
            key = secrets.token_bytes(32)
        _keys[path] = key
    return key


def _load_or_create_key(path: str) -> bytes:
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    for _ in range(2):
        try:
            fd = os.open(path, os.O_RDONLY | O_NOFOLLOW)
        except FileNotFoundError:
            tmp = f"{path}.{os.getpid()}.{secrets.token_hex(4)}"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(secrets.token_bytes(32))
            try:
                os.link(tmp, path)  # the first writer's key wins; others read it
            except FileExistsError:
                pass
            finally:
                os.unlink(tmp)
            continue
        with os.fdopen(fd, "rb") as f:
            key = f.read(64)
        if len(key) >= 32:
            return key
        raise OSError(f"{path} holds {len(key)} bytes, not a key")
    raise OSError(f"cannot read {path}")
