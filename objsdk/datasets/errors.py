"""The error a shard raises when it cannot be read as a WebDataset tar.

:class:`ShardError` is defined with every other error in :mod:`objsdk.errors`; this
module keeps ``objsdk.datasets.errors.ShardError`` importable.
"""

from __future__ import annotations

from objsdk.errors import ShardError

__all__ = ["ShardError"]
