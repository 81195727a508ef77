"""Datasets over objects: WebDataset tar shards for dataloaders (:class:`ShardDataset`).

Importing this module imports torch if it is installed (``ShardDataset`` is then a
``torch.utils.data.IterableDataset``); ``import objsdk`` never does.
"""

from __future__ import annotations

from . import decode
from .dataset import ShardDataset, ShardRead
from .decode import default_decoders
from .errors import ShardError
from .index import INDEX_NAME, ShardEntry, ShardIndex, build_index, load_index
from .shards import Shard, expand_braces, resolve_shards
from .split import Slot, plan_shards
from .tar import split_key
from .writer import ShardWriter

__all__ = [
    "INDEX_NAME",
    "Shard",
    "ShardDataset",
    "ShardEntry",
    "ShardError",
    "ShardIndex",
    "ShardRead",
    "ShardWriter",
    "Slot",
    "build_index",
    "decode",
    "default_decoders",
    "expand_braces",
    "load_index",
    "plan_shards",
    "resolve_shards",
    "split_key",
]
