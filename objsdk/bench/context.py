"""What every benchmark gets: the options, the target, Toxiproxy, a work directory."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from objsdk.bench.peers import Peer, PeerConfig, make_peer
from objsdk.bench.target import Target

if TYPE_CHECKING:
    from objsdk.testing.toxiproxy import Toxiproxy

__all__ = ["Context", "Options", "scratch_dir"]

MiB = 1 << 20


@dataclass
class Options:
    """The suite's settings (sizes in bytes)."""

    benchmarks: list[str]
    profiles: list[str]
    sizes: list[int]
    runs: int
    sweep: list[int]
    peers: list[str]
    tar_totals: list[int]
    tar_members: list[int]
    cuts: list[int]
    quick: bool = False
    warmup: bool = True


def scratch_dir() -> Path:
    """A fresh directory in memory (/dev/shm) when there is one, so disks do not blur
    network numbers; the caller removes it."""
    shm = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    return Path(tempfile.mkdtemp(prefix="objsdk-bench-", dir=shm))


@dataclass
class Context:
    options: Options
    target: Target
    toxiproxy: Toxiproxy | None
    work: Path
    notes: list[str] = field(default_factory=list)
    _counter: Iterator[int] = field(default_factory=lambda: iter(range(1 << 62)))

    def peer_config(self, endpoint: str) -> PeerConfig:
        t = self.target
        return PeerConfig(endpoint, t.access_key, t.secret_key, t.region, t.bucket)

    def peers(self, endpoint: str) -> list[Peer]:
        """The selected peers that can run here; the others leave a note (once)."""
        found = []
        for name in self.options.peers:
            peer = make_peer(name, self.peer_config(endpoint))
            if isinstance(peer, str):
                if peer not in self.notes:
                    self.notes.append(peer)
            else:
                found.append(peer)
        return found

    def unique_key(self, prefix: str) -> str:
        return f"{prefix}-{next(self._counter)}"
