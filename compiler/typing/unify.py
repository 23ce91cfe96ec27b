"""Unification of Relay types with incomplete types, joins toward ``?`` and instantiation.

Compiler layer (``compiler.typing``).

The solver owns the only mutable state of type inference: a union-find over
:class:`IncompleteType` placeholders and, for each class, the type it is bound to.

Rules (documented for users in :mod:`compiler.typing`):

* Two tensor types unify when their dtypes and ranks agree and each pair of dimensions
  is equal or one of them is ``?`` (``relay.Any``). The unified type is their *join*:
  ``?`` wherever the two differ. An incomplete type bound to a tensor type is rebound to
  the join, so a variable seen as ``(5, 10)`` and as ``(?, 10)`` ends up ``(?, 10)``.
* Type variables (``TypeVar``) are rigid: one unifies only with itself or with an
  incomplete type. Polymorphic function types unify with each other up to renaming of
  their type parameters; a polymorphic and a monomorphic function type do not unify (the
  inferencer instantiates polymorphic values where they are used).
* ``List`` and ``List[]`` (a nullary ADT with or without brackets) are the same type.
* An incomplete type never unifies with a type that contains it (no infinite types).

No Python recursion: unification, zonking and the occurs check use explicit stacks.
"""

from __future__ import annotations

from compiler.ir.types import (
    Any,
    FuncType,
    GlobalTypeVar,
    IncompleteType,
    TensorType,
    TupleType,
    Type,
    TypeCall,
    TypeVar,
)
from compiler.typing.display import type_text
from compiler.typing.typeops import rebuild_type, substitute, type_children

_PAIR, _BUILD, _REBIND = 0, 1, 2


class Mismatch(Exception):
    """Two types do not unify; ``detail`` says where inside them they disagree."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


def _count(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _adt_parts(t: Type) -> tuple[GlobalTypeVar, tuple[Type, ...]] | None:
    if isinstance(t, TypeCall):
        return t.func, t.args
    if isinstance(t, GlobalTypeVar):
        return t, ()
    return None


def _kind(t: Type) -> str:
    if isinstance(t, TensorType):
        return "a tensor"
    if isinstance(t, TupleType):
        return "a tuple"
    if isinstance(t, FuncType):
        return "a function"
    if isinstance(t, (TypeCall, GlobalTypeVar)):
        return "an algebraic data type"
    if isinstance(t, TypeVar):
        return f"type variable {t.name_hint}"
    return type(t).__name__


class Solver:
    """Union-find over incomplete types, with bindings, unification and zonking."""

    def __init__(self) -> None:
        self._parent: dict[IncompleteType, IncompleteType] = {}
        self._binding: dict[IncompleteType, Type] = {}

    # --- classes ------------------------------------------------------------------------------

    def find(self, t: IncompleteType) -> IncompleteType:
        """The representative of ``t``'s class (with path compression)."""
        root = t
        parent = self._parent
        while root in parent:
            root = parent[root]
        while t is not root:
            nxt = parent[t]
            parent[t] = root
            t = nxt
        return root

    def shallow(self, t: Type) -> Type:
        """``t`` with incomplete types at the top followed to what they are bound to."""
        while isinstance(t, IncompleteType):
            rep = self.find(t)
            bound = self._binding.get(rep)
            if bound is None:
                return rep
            t = bound
        return t

    def _expand(self, t: Type) -> tuple[Type, ...]:
        if isinstance(t, IncompleteType):
            bound = self._binding.get(self.find(t))
            return () if bound is None else (bound,)
        return type_children(t)

    def zonk(self, root: Type) -> Type:
        """``root`` with every bound incomplete type replaced by its (zonked) binding."""
        root = self.shallow(root)
        if isinstance(root, (TensorType, IncompleteType)):  # the common, childless cases
            return root
        memo: dict[int, Type] = {}
        keep: list[Type] = []  # keeps temporaries alive so their ids stay unique
        stack: list[tuple[Type, bool]] = [(root, False)]
        while stack:
            t, expanded = stack.pop()
            if expanded:
                kids = self._expand(t)
                new = [memo[id(k)] for k in kids]
                if isinstance(t, IncompleteType):
                    memo[id(t)] = new[0]
                elif all(a is b for a, b in zip(kids, new)):
                    memo[id(t)] = t
                else:
                    memo[id(t)] = rebuild_type(t, new)
                    keep.append(memo[id(t)])
                continue
            if id(t) in memo:
                continue
            kids = self._expand(t)
            if not kids:
                memo[id(t)] = self.find(t) if isinstance(t, IncompleteType) else t
                continue
            stack.append((t, True))
            stack.extend((k, False) for k in reversed(kids) if id(k) not in memo)
        return memo[id(root)]

    def occurs(self, rep: IncompleteType, t: Type) -> bool:
        """Whether the class of ``rep`` occurs in ``t`` (following bindings)."""
        seen: set[int] = set()
        stack = [t]
        while stack:
            x = stack.pop()
            if id(x) in seen:
                continue
            seen.add(id(x))
            if isinstance(x, IncompleteType) and self.find(x) is rep:
                return True
            stack.extend(self._expand(x))
        return False

    def is_resolved(self, t: Type) -> bool:
        """Whether ``t`` has no unbound incomplete type left."""
        t = self.shallow(t)
        if isinstance(t, (TensorType, IncompleteType)):
            return not isinstance(t, IncompleteType)
        seen: set[int] = set()
        stack = [t]
        while stack:
            x = stack.pop()
            if id(x) in seen:
                continue
            seen.add(id(x))
            if isinstance(x, IncompleteType) and self.find(x) not in self._binding:
                return False
            stack.extend(self._expand(x))
        return True

    # --- polymorphism -------------------------------------------------------------------------

    def instantiate(self, ft: FuncType) -> tuple[FuncType, list[IncompleteType]]:
        """A copy of polymorphic ``ft`` with fresh incomplete types for its type parameters."""
        fresh = [IncompleteType() for _ in ft.type_params]
        body = FuncType(ft.arg_types, ft.ret_type)
        inst = substitute(self.zonk(body), dict(zip(ft.type_params, fresh)))
        assert isinstance(inst, FuncType)
        return inst, fresh

    # --- unification --------------------------------------------------------------------------

    def unify(self, a: Type, b: Type) -> Type:
        """Make ``a`` and ``b`` equal and return their join; :class:`Mismatch` if impossible.

        ``a`` is the expected side: when the two are already equal the result is ``a``.
        """
        out: list[Type] = []
        tasks: list[tuple] = [(_PAIR, a, b)]
        while tasks:
            task = tasks.pop()
            if task[0] == _PAIR:
                self._pair(task[1], task[2], tasks, out)
            elif task[0] == _BUILD:
                _, proto, n = task
                kids = out[len(out) - n :]
                del out[len(out) - n :]
                out.append(self._rebuilt(proto, kids))
            else:
                rep = self.find(task[1])
                result = out.pop()
                if result is not self._binding.get(rep) and not self._same_class(result, rep):
                    if self.occurs(rep, result):
                        raise Mismatch("the type would have to contain itself")
                    self._binding[rep] = result
                out.append(rep)
        return out[0]

    def _same_class(self, t: Type, rep: IncompleteType) -> bool:
        return isinstance(t, IncompleteType) and self.find(t) is rep

    def _rebuilt(self, proto: Type, kids: list[Type]) -> Type:
        old = type_children(proto)
        for a, b in zip(old, kids):
            if a is b:
                continue
            if (
                isinstance(a, IncompleteType)
                and isinstance(b, IncompleteType)
                and self.find(a) is self.find(b)
            ):
                continue
            return rebuild_type(proto, kids)
        return proto

    def _pair(self, x: Type, y: Type, tasks: list[tuple], out: list[Type]) -> None:
        if x is y:
            out.append(x)
            return
        xi = isinstance(x, IncompleteType)
        yi = isinstance(y, IncompleteType)
        if xi and yi:
            assert isinstance(x, IncompleteType) and isinstance(y, IncompleteType)
            rx, ry = self.find(x), self.find(y)
            if rx is ry:
                out.append(rx)
                return
            bx, by = self._binding.get(rx), self._binding.get(ry)
            if (bx is not None and self.occurs(ry, bx)) or (by is not None and self.occurs(rx, by)):
                raise Mismatch("the type would have to contain itself")
            self._parent[ry] = rx
            self._binding.pop(ry, None)
            if by is None:
                out.append(rx)
            elif bx is None:
                self._binding[rx] = by
                out.append(rx)
            else:
                tasks.append((_REBIND, rx))
                tasks.append((_PAIR, bx, by))
            return
        if xi or yi:
            inc, other = (x, y) if xi else (y, x)
            assert isinstance(inc, IncompleteType)
            rep = self.find(inc)
            bound = self._binding.get(rep)
            if bound is None:
                if self.occurs(rep, other):
                    raise Mismatch("the type would have to contain itself")
                self._binding[rep] = other
                out.append(rep)
                return
            tasks.append((_REBIND, rep))
            tasks.append((_PAIR, bound, y) if xi else (_PAIR, x, bound))
            return
        self._structural(x, y, tasks, out)

    def _structural(self, x: Type, y: Type, tasks: list[tuple], out: list[Type]) -> None:
        if isinstance(x, TensorType) and isinstance(y, TensorType):
            out.append(join_tensors(x, y))
            return
        if isinstance(x, TupleType) and isinstance(y, TupleType):
            if len(x.fields) != len(y.fields):
                raise Mismatch(
                    f"a tuple of {_count(len(x.fields), 'field')} vs "
                    f"a tuple of {_count(len(y.fields), 'field')}"
                )
            self._push_children(x, x.fields, y.fields, tasks)
            return
        if isinstance(x, FuncType) and isinstance(y, FuncType):
            if len(x.arg_types) != len(y.arg_types):
                raise Mismatch(
                    f"a function of {_count(len(x.arg_types), 'parameter')} vs "
                    f"a function of {_count(len(y.arg_types), 'parameter')}"
                )
            if len(x.type_params) != len(y.type_params):
                raise Mismatch(
                    f"a function with {_count(len(x.type_params), 'type parameter')} vs "
                    f"a function with {_count(len(y.type_params), 'type parameter')}"
                )
            if x.type_params:
                renamed = substitute(
                    self.zonk(FuncType(y.arg_types, y.ret_type)),
                    dict(zip(y.type_params, x.type_params)),
                )
                assert isinstance(renamed, FuncType)
                y = FuncType(renamed.arg_types, renamed.ret_type, x.type_params)
            assert isinstance(y, FuncType)
            self._push_children(x, (*x.arg_types, x.ret_type), (*y.arg_types, y.ret_type), tasks)
            return
        px, py = _adt_parts(x), _adt_parts(y)
        if px is not None and py is not None:
            if px[0] != py[0]:
                raise Mismatch(f"type {px[0].name_hint} vs type {py[0].name_hint}")
            if len(px[1]) != len(py[1]):
                raise Mismatch(
                    f"{px[0].name_hint} with {_count(len(px[1]), 'type argument')} vs "
                    f"{_count(len(py[1]), 'type argument')}"
                )
            if not px[1]:
                out.append(x)
                return
            proto = x if isinstance(x, TypeCall) else TypeCall(px[0], px[1])
            self._push_children(proto, px[1], py[1], tasks)
            return
        if isinstance(x, TypeVar) and isinstance(y, TypeVar):
            raise Mismatch(f"type variable {x.name_hint} vs type variable {y.name_hint}")
        if type(x) is type(y):
            raise Mismatch(f"{type_text(x)} vs {type_text(y)}")
        raise Mismatch(f"{_kind(x)} vs {_kind(y)}")

    @staticmethod
    def _push_children(
        proto: Type, xs: tuple[Type, ...], ys: tuple[Type, ...], tasks: list[tuple]
    ) -> None:
        tasks.append((_BUILD, proto, len(xs)))
        for a, b in zip(reversed(xs), reversed(ys)):
            tasks.append((_PAIR, a, b))


def join_tensors(x: TensorType, y: TensorType) -> TensorType:
    """The join of two compatible tensor types (``?`` where they differ); ``x`` if equal."""
    if x.dtype != y.dtype:
        raise Mismatch(f"dtype {x.dtype} vs {y.dtype}")
    if len(x.shape) != len(y.shape):
        raise Mismatch(f"rank {len(x.shape)} vs rank {len(y.shape)}")
    if x.shape == y.shape:
        return x
    dims = []
    for axis, (a, b) in enumerate(zip(x.shape, y.shape)):
        if isinstance(a, Any) or isinstance(b, Any):
            dims.append(Any())
        elif a == b:
            dims.append(a)
        else:
            raise Mismatch(f"dimension {axis} is {a} vs {b}")
    joined = tuple(dims)
    if joined == x.shape:
        return x
    if joined == y.shape:
        return y
    return TensorType(joined, x.dtype)
