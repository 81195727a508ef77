"""An HTTP answer read whole, as the transport's own connections hand it over
(:mod:`objsdk._transport.wire`): :class:`Answer`, and its header :class:`Fields`."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Answer", "Fields"]


@dataclass
class Answer:
    """A whole HTTP answer: a :class:`~objsdk._transport.base.Response` whose body has
    been read (``read``/``readinto`` hand out ``content`` from where the last stopped)."""

    status: int
    headers: Mapping[str, str]
    # Not in the repr: an error body may echo the request (S3's SignatureDoesNotMatch
    # sends its canonical form, session token included, and the signature).
    content: bytes = field(repr=False)
    _pos: int = 0

    def read(self, n: int) -> bytes:
        data = self.content[self._pos : self._pos + n]
        self._pos += len(data)
        return data

    read1 = read

    def readinto(self, view: memoryview) -> int:
        data = self.read(len(view))
        view[: len(data)] = data
        return len(data)

    def close(self) -> None:
        pass


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
