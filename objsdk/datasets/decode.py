"""Decoders for sample fields, chosen by suffix.

``decode`` maps a suffix (``"json"`` or ``".json"``) to a callable taking the member's
bytes. A field whose full suffix (``"seg.png"``) is not in the map is looked up by its
last extension (``"png"``); fields without a decoder stay bytes.
"""

from __future__ import annotations

import io
import json as _json
from collections.abc import Callable, Mapping
from typing import Any

from objsdk._extras import needs_extra
from objsdk.errors import InvalidArgument

__all__ = ["Decoder", "cls", "default_decoders", "json", "normalise_decoders", "npy", "txt"]

Decoder = Callable[[bytes], Any]


def npy(data: bytes) -> Any:
    """A ``.npy`` member as a NumPy array (needs the ``numpy`` extra)."""
    try:
        import numpy as np
    except ImportError:  # pragma: no cover - depends on the environment
        raise ImportError(needs_extra("decoding .npy needs numpy", "numpy")) from None
    return np.load(io.BytesIO(data), allow_pickle=False)


def json(data: bytes) -> Any:
    """A ``.json`` member as Python objects."""
    return _json.loads(data)


def txt(data: bytes) -> str:
    """A text member (UTF-8) as ``str``."""
    return data.decode("utf-8")


def cls(data: bytes) -> int:
    """A class-label member (an integer in ASCII, as WebDataset writes it) as ``int``."""
    return int(data.decode("ascii").strip())


def default_decoders() -> dict[str, Decoder]:
    """``npy``, ``json``, ``txt`` and ``cls`` decoders (``.npy`` needs numpy)."""
    return {"npy": npy, "json": json, "txt": txt, "cls": cls}


def normalise_decoders(decode: Mapping[str, Decoder] | None) -> dict[str, Decoder]:
    if decode is None:
        return {}
    if not isinstance(decode, Mapping):
        raise InvalidArgument(f"decode must map suffixes to callables, got {type(decode).__name__}")
    out: dict[str, Decoder] = {}
    for suffix, fn in decode.items():
        if not isinstance(suffix, str) or not callable(fn):
            raise InvalidArgument(f"decode entry {suffix!r} must map a suffix to a callable")
        out[suffix.lstrip(".").lower()] = fn
    return out


def decoder_for(decoders: Mapping[str, Decoder], suffix: str) -> Decoder | None:
    fn = decoders.get(suffix)
    if fn is None and "." in suffix:
        fn = decoders.get(suffix.rsplit(".", 1)[1])
    return fn
