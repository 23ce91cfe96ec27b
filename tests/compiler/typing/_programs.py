"""Test programs for type inference, built with the Python ``relay`` builder.

Defines small List/Option ADTs and the polymorphic functions over them that the
tests type-check (map, foldl, length), independent of the Prelude.
"""

from __future__ import annotations

from compiler import relay
from compiler.typing.display import type_text


def text(ty: object) -> str:
    """A type as text, for assertions that read like the Relay text format."""
    return type_text(ty)  # type: ignore[arg-type]


def T(shape: tuple = (), dtype: str = "float32") -> relay.TensorType:
    """A tensor type; ``None`` in ``shape`` means ``?``."""
    return relay.TensorType([relay.Any() if d is None else d for d in shape], dtype)


class Adts:
    """A module with ``List[A] = Cons(A, List[A]) | Nil`` and ``Option[A] = Some(A) | None``."""

    def __init__(self) -> None:
        self.mod = relay.IRModule()
        a = relay.TypeVar("A")
        self.List = relay.GlobalTypeVar("List")
        self.Cons = relay.Constructor("Cons", [a, relay.TypeCall(self.List, [a])], self.List)
        self.Nil = relay.Constructor("Nil", [], self.List)
        self.mod.add_type_def(self.List, relay.TypeData(self.List, [a], [self.Cons, self.Nil]))
        b = relay.TypeVar("A")
        self.Option = relay.GlobalTypeVar("Option")
        self.Some = relay.Constructor("Some", [b], self.Option)
        self.NoneC = relay.Constructor("None", [], self.Option)
        self.mod.add_type_def(
            self.Option, relay.TypeData(self.Option, [b], [self.Some, self.NoneC])
        )

    def list_of(self, elem: relay.Type) -> relay.TypeCall:
        return relay.TypeCall(self.List, [elem])

    def cons(self, head: relay.Expr, tail: relay.Expr) -> relay.Call:
        return relay.Call(self.Cons, [head, tail])

    def nil(self) -> relay.Call:
        return relay.Call(self.Nil, [])

    def literal_list(self, values: list[relay.Expr]) -> relay.Expr:
        out: relay.Expr = self.nil()
        for v in reversed(values):
            out = self.cons(v, out)
        return out

    def add_map(self) -> relay.GlobalVar:
        """``def @map[A, B](%f: fn (A) -> B, %l: List[A]) -> List[B]``."""
        a, b = relay.TypeVar("A"), relay.TypeVar("B")
        gv = relay.GlobalVar("map")
        f = relay.var("f", relay.FuncType([a], b))
        lst = relay.var("l", self.list_of(a))
        h, t = relay.var("h"), relay.var("t")
        body = relay.Match(
            lst,
            [
                relay.Clause(
                    relay.PatternConstructor(self.Cons, [relay.PatternVar(h), relay.PatternVar(t)]),
                    self.cons(relay.Call(f, [h]), relay.Call(gv, [f, t])),
                ),
                relay.Clause(relay.PatternConstructor(self.Nil), self.nil()),
            ],
        )
        self.mod[gv] = relay.Function([f, lst], body, self.list_of(b), [a, b])
        return gv

    def add_foldl(self) -> relay.GlobalVar:
        """``def @foldl[A, B](%f: fn (A, B) -> A, %acc: A, %l: List[B]) -> A``."""
        a, b = relay.TypeVar("A"), relay.TypeVar("B")
        gv = relay.GlobalVar("foldl")
        f = relay.var("f", relay.FuncType([a, b], a))
        acc = relay.var("acc", a)
        lst = relay.var("l", self.list_of(b))
        h, t = relay.var("h"), relay.var("t")
        body = relay.Match(
            lst,
            [
                relay.Clause(
                    relay.PatternConstructor(self.Cons, [relay.PatternVar(h), relay.PatternVar(t)]),
                    relay.Call(gv, [f, relay.Call(f, [acc, h]), t]),
                ),
                relay.Clause(relay.PatternConstructor(self.Nil), acc),
            ],
        )
        self.mod[gv] = relay.Function([f, acc, lst], body, a, [a, b])
        return gv

    def add_length(self) -> relay.GlobalVar:
        """``def @length[A](%l: List[A])`` with its return type left to inference."""
        a = relay.TypeVar("A")
        gv = relay.GlobalVar("length")
        lst = relay.var("l", self.list_of(a))
        t = relay.var("t")
        body = relay.Match(
            lst,
            [
                relay.Clause(
                    relay.PatternConstructor(
                        self.Cons, [relay.PatternWildcard(), relay.PatternVar(t)]
                    ),
                    relay.add(relay.const(1), relay.Call(gv, [t])),
                ),
                relay.Clause(relay.PatternConstructor(self.Nil), relay.const(0)),
            ],
        )
        self.mod[gv] = relay.Function([lst], body, None, [a])
        return gv

    def add_id(self) -> relay.GlobalVar:
        """``def @id[T](%x: T) -> T``."""
        t = relay.TypeVar("T")
        gv = relay.GlobalVar("id")
        x = relay.var("x", t)
        self.mod[gv] = relay.Function([x], x, t, [t])
        return gv
