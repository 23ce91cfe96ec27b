"""Runtime values other than tensors: algebraic data type values and closures.

Runtime layer (``vm``); standard library only.

Tensors are numpy arrays and tuples are Python tuples; a constructor value is an
:class:`ADT` and a function value is a :class:`Closure`. The reference interpreter
in ``compiler`` builds the same :class:`ADT` values, so results compare directly.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any


class ADT:
    """A value built by a constructor: ``Cons(1, Nil)``.

    Attributes
    ----------
    tag : int
        The constructor's tag (unique within the executable; 0 is reserved for tuples).
    constructor : str
        The constructor's name, e.g. ``"Cons"``.
    fields : tuple
        The constructor's arguments.
    """

    __slots__ = ("constructor", "fields", "tag")

    def __init__(self, tag: int, fields: Sequence[Any], constructor: str = "") -> None:
        self.tag = tag
        self.fields = tuple(fields)
        self.constructor = constructor

    def __len__(self) -> int:
        return len(self.fields)

    def __getitem__(self, index: int) -> Any:
        return self.fields[index]

    def __iter__(self) -> Iterator[Any]:
        return iter(self.fields)

    def __repr__(self) -> str:
        # Iterative so a 100,000-long list prints without exhausting Python's stack.
        parts: list[str] = []
        stack: list[Any] = [self]
        while stack:
            item = stack.pop()
            if isinstance(item, str):
                parts.append(item)
            elif isinstance(item, ADT):
                name = item.constructor or f"ADT[tag={item.tag}]"
                if not item.fields:
                    parts.append(name)
                    continue
                pieces: list[Any] = [name + "("]
                for i, field in enumerate(item.fields):
                    if i:
                        pieces.append(", ")
                    pieces.append(field)
                pieces.append(")")
                stack.extend(reversed(pieces))
            else:
                parts.append(repr(item))
        return "".join(parts)


class Closure:
    """A function value: a VM function index and the values it captured.

    Call it with ``VirtualMachine.invoke_closure(closure, *args)``.
    """

    __slots__ = ("captured", "func_index", "name")

    def __init__(self, func_index: int, captured: Sequence[Any], name: str = "") -> None:
        self.func_index = func_index
        self.captured = tuple(captured)
        self.name = name

    def __repr__(self) -> str:
        label = self.name or f"function {self.func_index}"
        return f"Closure({label}, captured={len(self.captured)})"
