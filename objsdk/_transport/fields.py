"""An HTTP answer's header fields, as the transport's own connections hand them over
(:mod:`objsdk._transport.wire`)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["Fields"]


class Fields(Mapping[str, str]):
    """An answer's header fields: looked up by name in any case, listed with the names
    as the server sent them; a repeated field's values joined with ", " (RFC 9110 §5.3,
    as urllib3 joins them)."""

    __slots__ = ("_names", "_values")

    def __init__(self, raw: list[tuple[bytes, bytes]]) -> None:
        values: dict[str, str] = {}
        names: dict[str, str] = {}
        for name_bytes, value_bytes in raw:
            name, value = name_bytes.decode("latin-1"), value_bytes.decode("latin-1")
            low = name.lower()
            old = values.get(low)
            if old is None:
                values[low] = value
                names[low] = name
            else:
                values[low] = f"{old}, {value}"
        self._values = values
        self._names = names

    def __getitem__(self, name: str) -> str:
        return self._values[name.lower()]

    def get(self, name: str, default: Any = None) -> Any:  # the ABC's goes through a raise
        return self._values.get(name.lower(), default)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._values

    def __iter__(self) -> Iterator[str]:
        return iter(self._names.values())

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"Fields({dict(self.items())!r})"
