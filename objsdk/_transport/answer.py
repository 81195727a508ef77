"""An HTTP answer read whole, as the transport's own connections hand it over
(:mod:`objsdk._transport.wire`): :class:`Answer`, and its header :class:`Fields`; and
the :class:`Reader` httptools hands an answer's parts to as it parses them."""

from __future__ import annotations

from collections.abc import ItemsView, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import httptools

from objsdk._transport.answer_head import MAX_FIELDS, MAX_HEAD, MAX_INTERIM, HeadTooLarge

__all__ = ["Answer", "Fields", "Reader"]


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

    def items(self) -> ItemsView[str, str]:
        return _FieldItems(self)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"Fields({dict(self.items())!r})"


class _FieldItems(ItemsView[str, str]):
    """:meth:`Fields.items`: the ABC's view (``in``, ``len`` and set operations as
    theirs), listing the pairs without looking each value up again by its name, a call
    and a ``lower()`` a field: both of its dicts hold their keys in the order the fields
    came."""

    __slots__ = ()
    _mapping: Fields

    def __iter__(self) -> Iterator[tuple[str, str]]:
        fields = self._mapping
        return zip(fields._names.values(), fields._values.values(), strict=True)


class Reader:
    """httptools' callbacks: the answer's head and, until the wire reads a body of known
    length itself, its body. What it holds of a head is bounded
    (:mod:`~objsdk._transport.answer_head`)."""

    __slots__ = (
        "body",
        "done",
        "extra",
        "fields",
        "got",
        "head_done",
        "idle",
        "interim",
        "parser",
        "received",
        "status",
        "trailers_from",
    )

    def __init__(self) -> None:
        self.parser = httptools.HttpResponseParser(self)
        self.status = 0
        self.fields: list[tuple[bytes, bytes]] = []
        self.body: list[bytes] = []
        self.got = 0
        self.head_done = False
        self.done = False
        self.extra = False  # bytes after the end of the answer
        self.interim = 0  # interim answers skipped
        self.received = 0  # bytes fed to the parser
        self.idle = 0  # bytes fed since the body last grew
        self.trailers_from = 0  # how many fields the head had

    def head(self, data: bytes) -> None:
        """Feed ``data``, received while the head has not ended; raise
        :class:`~objsdk._transport.answer_head.HeadTooLarge` once it passes a bound.
        Checked once per receive, never per byte or per field: httptools holds a line
        until it ends, so a line without end is bounded only by what came in."""
        self.parser.feed_data(data)
        self.received += len(data)
        if not self.head_done and self.received >= MAX_HEAD:
            raise HeadTooLarge(f"{self.received} bytes of head without its end")
        if self.interim > MAX_INTERIM:
            raise HeadTooLarge(f"more than {MAX_INTERIM} interim answers")
        if len(self.fields) > MAX_FIELDS:
            raise HeadTooLarge(f"more than {MAX_FIELDS} header fields")

    def rest(self, data: bytes) -> HeadTooLarge | None:
        """Feed ``data``, received after the head; return what passed a bound, if
        anything did. Between a chunked body's bytes come only chunk sizes and, at its
        end, the trailer fields (RFC 9112 §7.1.2), which httptools holds as it holds a
        head's, and which a server may send without end, the body never growing."""
        got = self.got
        self.parser.feed_data(data)
        self.idle = 0 if self.got > got else self.idle + len(data)
        if self.idle >= MAX_HEAD:
            return HeadTooLarge(f"{self.idle} bytes of chunk framing or trailer fields")
        if len(self.fields) - self.trailers_from > MAX_FIELDS:
            return HeadTooLarge(f"more than {MAX_FIELDS} trailer fields")
        return None

    def on_message_begin(self) -> None:
        if self.done:
            self.extra = True

    def on_header(self, name: bytes, value: bytes) -> None:
        self.fields.append((name, value))

    def on_headers_complete(self) -> None:
        self.status = self.parser.get_status_code()
        if self.status < 200:
            # An interim answer (RFC 9110 §15.2): its fields are not the answer's.
            self.fields = []
            self.interim += 1
            return
        self.head_done = True
        self.trailers_from = len(self.fields)

    def on_body(self, body: bytes) -> None:
        if self.done:
            self.extra = True
            return
        self.body.append(body)
        self.got += len(body)

    def on_message_complete(self) -> None:
        if self.head_done:
            self.done = True
