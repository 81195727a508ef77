"""``DownloadResult``: what a download did."""

from __future__ import annotations

from dataclasses import dataclass

from objsdk.models import ObjectInfo

__all__ = ["DownloadResult"]


@dataclass(frozen=True)
class DownloadResult:
    """What :func:`~objsdk._transfer.download.download` did.

    ``info`` describes the version downloaded (size, ETag, version, checksums).
    ``parts_reused`` parts were already on disk from an interrupted earlier call;
    ``parts_fetched`` parts (``bytes_fetched`` bytes) were fetched by this one, with
    ``parallel`` parts in flight at the end (what ``parallel=None`` settled on).
    ``verified`` is the checksum algorithm the bytes were checked with, or None, and
    then ``unverified_reason`` says why (``verify=False``, no checksum stored, a
    composite one...).
    """

    info: ObjectInfo
    parts_total: int
    parts_fetched: int
    parts_reused: int
    bytes_fetched: int
    parallel: int = 1
    verified: str | None = None
    unverified_reason: str | None = None
