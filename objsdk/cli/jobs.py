"""What a transfer plan is made of: :class:`Job` values, the options they run with, and
the :class:`Outcome` counters they add to. Pure data."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from objsdk import errors

from .filters import Filters
from .paths import Location

Symlinks = Literal["files", "all", "none"]
# What a download or copy does with an object in an archive storage class (GLACIER,
# DEEP_ARCHIVE) not restored, as the aws CLI: skip it with a warning (exit 2), skip it
# quietly (--ignore-glacier-warnings), or try it (--force-glacier-transfer).
Archived = Literal["warn", "ignore", "force"]

__all__ = [
    "STREAM_CHUNK",
    "Archived",
    "Cancelled",
    "Job",
    "Kind",
    "Outcome",
    "PlanOptions",
    "Symlinks",
    "TransferOptions",
]

Kind = Literal["upload", "download", "copy", "stdin", "stdout", "delete"]
STREAM_CHUNK = 1 << 20


@dataclass(frozen=True)
class Job:
    """One transfer (or, for sync --delete, one deletion)."""

    kind: Kind
    src: Location | None
    dst: Location
    size: int = 0
    mtime: datetime | None = None  # the source object's date, given to downloaded files
    root: str | None = None  # a local deletion's destination directory: it stays inside
    listed: bool = False  # size and mtime come from a listing (a download may trust them)

    @property
    def action(self) -> str:
        """What the user sees this job as: ``stdin``/``stdout`` are an upload/a download."""
        return {"stdin": "upload", "stdout": "download"}.get(self.kind, self.kind)

    def describe(self) -> str:
        if self.kind == "delete":
            return f"delete: {self.dst}"
        return f"{self.action}: {self.src} to {self.dst}"


# Parts in flight per large file when several files are in flight at once and no
# --parallel is given: each file's own adaptive climb would gain by taking bandwidth from
# the others, and the run would end with jobs x ADAPTIVE_CAP connections.
PARALLEL_PER_FILE = 4


@dataclass(frozen=True)
class TransferOptions:
    parallel: int | None = PARALLEL_PER_FILE  # None: the library's adaptive default
    jobs: int = 16
    part_size: int | None = None
    multipart_threshold: int | None = None
    content_type: str | None = None
    guess_mime_type: bool = True  # Content-Type from the file name when not given
    metadata: dict[str, str] | None = None
    cache_control: str | None = None
    content_encoding: str | None = None
    storage_class: str | None = None
    acl: str | None = None  # a canned ACL (x-amz-acl) for uploads and copies
    replace_fields: bool = False  # copies store the fields given, not their source's
    expected_size: int | None = None  # of standard input: parts large enough to hold it
    move: bool = False  # mv: each source is removed once its copy is verified
    archived: Archived = "warn"  # objects the service refuses for their storage class
    resume: bool = True  # uploads of files resume (--no-resume: start over)


@dataclass
class Outcome:
    done: int = 0  # files transferred
    deleted: int = 0  # files or objects a sync --delete removed
    failed: int = 0
    skipped: int = 0
    bytes: int = 0
    reused: int = 0  # bytes a resumed download found already on disk
    stored: int = 0  # bytes a resumed upload found already stored


#: Raised from progress callbacks to stop transfers after Ctrl-C: the library's own, so
#: that an upload of a file stopped so is kept to resume, as after the Ctrl-C itself.
Cancelled = errors.Cancelled


@dataclass(frozen=True)
class PlanOptions:
    """What decides which files and objects a ``cp``, ``sync`` or ``rm`` takes."""

    symlinks: Symlinks = "files"
    filters: Filters = field(default_factory=Filters)
    checksum: bool = False  # sync: compare content
    delete: bool = False  # sync: delete what the source lacks
    size_only: bool = False  # sync: compare sizes alone
    exact_timestamps: bool = False  # sync down: same size but another time is a change
    archived: Archived = "warn"  # listed objects in an archive storage class
