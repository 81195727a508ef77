"""Callbacks that hold no reference to the object whose method they call.

A reader hands its own methods (verification's observer, the size, the first answer's
headers) to the request and read-ahead objects it owns. Bound methods would make a
cycle back to the reader, and a reader in a cycle is freed only by a later garbage
collection, not with its last reference: a file nobody closes (pyarrow leaves the files
it reads through fsspec open) would then hold its connection until a collection runs.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import ParamSpec, TypeVar

__all__ = ["weakly"]

P = ParamSpec("P")
R = TypeVar("R")


def weakly(method: Callable[P, R]) -> Callable[P, R]:
    """``method`` (a bound method), called while its object lives; once it is gone, a
    call raises ``ValueError`` as an operation on a closed file does."""
    ref = weakref.WeakMethod(method)

    def call(*args: P.args, **kwargs: P.kwargs) -> R:
        bound = ref()
        if bound is None:
            raise ValueError("I/O operation on closed file.")
        return bound(*args, **kwargs)

    return call
