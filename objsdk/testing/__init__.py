"""Test helpers: a local MinIO, a Toxiproxy for network faults, and a pytest plugin.

Enable the fixtures with ``pytest_plugins = ["objsdk.testing.pytest_plugin"]``.
"""

from __future__ import annotations

from objsdk.local_minio import LocalMinio
from objsdk.testing.toxiproxy import Proxy, Toxiproxy, ToxiproxyError

__all__ = ["LocalMinio", "Proxy", "Toxiproxy", "ToxiproxyError"]
