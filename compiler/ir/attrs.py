"""Operator and function attributes: an immutable name -> value mapping.

Compiler layer (``compiler.ir``); standard library only.

Values are plain data (bool, int, float, str, None, and tuples of them) so that
attributes print, parse, hash and serialize without special cases. Attribute
access works both ways TVM users know: ``attrs.axis`` and ``attrs["axis"]``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping


def _freeze(value: object) -> object:
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    if hasattr(value, "item") and hasattr(value, "dtype") and not isinstance(value, type):
        return value.item()  # type: ignore[union-attr]
    return value


class Attrs(Mapping[str, object]):
    """An immutable, ordered mapping of attribute names to plain values."""

    __slots__ = ("_items",)

    def __init__(self, items: Mapping[str, object] | None = None) -> None:
        frozen = {str(k): _freeze(v) for k, v in (items or {}).items()}
        object.__setattr__(self, "_items", frozen)

    _items: dict[str, object]

    def __getitem__(self, key: str) -> object:
        return self._items[key]

    def __getattr__(self, key: str) -> object:
        try:
            return self._items[key]
        except KeyError:
            raise AttributeError(f"attrs has no attribute {key!r}") from None

    def __setattr__(self, key: str, value: object) -> None:
        raise AttributeError("attrs are immutable")

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Attrs):
            return self._items == other._items
        if isinstance(other, Mapping):
            return self._items == dict(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self._items.items()))

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in self._items.items())
        return f"Attrs({inner})"

    def with_items(self, **updates: object) -> Attrs:
        """A copy with ``updates`` applied."""
        merged = dict(self._items)
        merged.update(updates)
        return Attrs(merged)


EMPTY = Attrs()


def make_attrs(attrs: Attrs | Mapping[str, object] | None) -> Attrs:
    """Coerce ``None``, a dict or an :class:`Attrs` into an :class:`Attrs`."""
    if attrs is None:
        return EMPTY
    if isinstance(attrs, Attrs):
        return attrs
    return Attrs(attrs)
