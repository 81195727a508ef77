"""Developer tooling, never imported by ``import objsdk``: a local MinIO (built from its
Go module by :mod:`~objsdk.testing.gobuild`, run under the crash-safe
:mod:`~objsdk.testing.supervisor`), a Toxiproxy for network faults, and a pytest plugin.

Enable the fixtures with ``pytest_plugins = ["objsdk.testing.pytest_plugin"]``.
"""

from __future__ import annotations

from objsdk.testing.local_minio import LocalMinio
from objsdk.testing.toxiproxy import Proxy, Toxiproxy, ToxiproxyError

__all__ = ["LocalMinio", "Proxy", "Toxiproxy", "ToxiproxyError"]
