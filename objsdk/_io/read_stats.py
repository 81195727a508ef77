"""``ReadStats``: what one reader did, counted as it reads."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ReadStats"]


@dataclass
class ReadStats:
    """What one reader did: bytes handed to the caller, GET/HEAD requests sent, resumes
    after a broken stream, bytes received but skipped (discarded), read-ahead bytes
    fetched but never delivered (wasted), the parts read ahead at the end (0 for
    one stream: with ``readahead=None``, what the adaptive level settled on), the
    checksum algorithm the last full pass was verified with, and why the last pass
    from byte 0 was not verified (no checksum stored, a composite one, a skip...)."""

    bytes_delivered: int = 0
    requests: int = 0
    resumes: int = 0
    bytes_discarded: int = 0
    bytes_wasted: int = 0
    readahead: int = 0  # parts in flight at the end (0: one stream); what auto chose
    verified: str | None = None
    unverified_reason: str | None = None
