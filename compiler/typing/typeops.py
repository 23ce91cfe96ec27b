"""Generic, iterative operations on type trees: children, rebuilding, mapping, substitution.

Compiler layer (``compiler.typing``).

Types can nest as deeply as the program that produced them (a long chain of tuples),
so every walk here uses an explicit stack. Rebuilding keeps a node's identity when its
children did not change, which keeps unification and comparisons cheap.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from compiler.ir.types import (
    FuncType,
    GlobalTypeVar,
    IncompleteType,
    TensorType,
    TupleType,
    Type,
    TypeCall,
    TypeVar,
)


def type_children(t: Type) -> tuple[Type, ...]:
    """The direct sub-types of ``t`` (a function's type parameters are binders, not children)."""
    if isinstance(t, TupleType):
        return t.fields
    if isinstance(t, FuncType):
        return (*t.arg_types, t.ret_type)
    if isinstance(t, TypeCall):
        return t.args
    return ()


def rebuild_type(t: Type, kids: list[Type] | tuple[Type, ...]) -> Type:
    """A copy of ``t`` with ``kids`` in place of :func:`type_children` (same order)."""
    if isinstance(t, TupleType):
        return TupleType(kids)
    if isinstance(t, FuncType):
        return FuncType(kids[:-1], kids[-1], t.type_params)
    if isinstance(t, TypeCall):
        return TypeCall(t.func, kids)
    return t


def map_type(root: Type, fn: Callable[[Type], Type | None]) -> Type:
    """Rewrite ``root`` bottom-up: ``fn(t)`` returns a replacement, or ``None`` to descend.

    Sub-trees whose children are unchanged keep their identity.
    """
    memo: dict[int, Type] = {}
    stack: list[tuple[Type, bool]] = [(root, False)]
    while stack:
        t, expanded = stack.pop()
        if expanded:
            kids = type_children(t)
            new = [memo[id(k)] for k in kids]
            same = all(a is b for a, b in zip(kids, new))
            memo[id(t)] = t if same else rebuild_type(t, new)
            continue
        if id(t) in memo:
            continue
        replacement = fn(t)
        if replacement is not None:
            memo[id(t)] = replacement
            continue
        kids = type_children(t)
        if not kids:
            memo[id(t)] = t
            continue
        stack.append((t, True))
        stack.extend((k, False) for k in reversed(kids) if id(k) not in memo)
    return memo[id(root)]


def substitute(t: Type, mapping: Mapping[TypeVar, Type]) -> Type:
    """Replace type variables by types (type variables are unique objects: no capture)."""
    if not mapping:
        return t
    return map_type(t, lambda x: mapping.get(x) if isinstance(x, TypeVar) else None)


def walk_type(root: Type) -> Iterator[Type]:
    """Every sub-type of ``root`` (including itself), each distinct object once, pre-order."""
    seen: set[int] = set()
    stack = [root]
    while stack:
        t = stack.pop()
        if id(t) in seen:
            continue
        seen.add(id(t))
        yield t
        stack.extend(reversed(type_children(t)))


def has_incomplete(t: Type) -> bool:
    """Whether an :class:`IncompleteType` occurs in ``t``."""
    return any(isinstance(x, IncompleteType) for x in walk_type(t))


def free_type_vars_of_type(root: Type, bound: frozenset[TypeVar] = frozenset()) -> list[TypeVar]:
    """Type variables of ``root`` not bound by ``bound`` or by a function type's parameters."""
    out: list[TypeVar] = []
    seen: set[TypeVar] = set()
    stack: list[tuple[Type, frozenset[TypeVar]]] = [(root, bound)]
    while stack:
        t, scope = stack.pop()
        if isinstance(t, TypeVar):
            if t not in scope and t not in seen:
                seen.add(t)
                out.append(t)
            continue
        if isinstance(t, FuncType) and t.type_params:
            scope = scope | frozenset(t.type_params)
        stack.extend((k, scope) for k in reversed(type_children(t)))
    return out


def adt_type(header: GlobalTypeVar, args: list[Type] | tuple[Type, ...]) -> Type:
    """The type of a value of ADT ``header`` applied to ``args`` (bare name when nullary)."""
    return TypeCall(header, args) if args else header


def same_type(a: Type, b: Type) -> bool:
    """Structural equality; type variables and incomplete types compare by identity."""
    stack = [(a, b)]
    while stack:
        x, y = stack.pop()
        if x is y:
            continue
        if isinstance(x, GlobalTypeVar) and isinstance(y, TypeCall):
            x = TypeCall(x, ())
        if isinstance(y, GlobalTypeVar) and isinstance(x, TypeCall):
            y = TypeCall(y, ())
        if type(x) is not type(y):
            return False
        if isinstance(x, TensorType):
            if x != y:
                return False
            continue
        if isinstance(x, GlobalTypeVar):
            if x != y:
                return False
            continue
        if isinstance(x, (TypeVar, IncompleteType)):
            return False
        if isinstance(x, FuncType):
            assert isinstance(y, FuncType)
            if x.type_params != y.type_params:
                return False
        if isinstance(x, TypeCall):
            assert isinstance(y, TypeCall)
            if x.func != y.func:
                return False
        kx, ky = type_children(x), type_children(y)
        if len(kx) != len(ky):
            return False
        stack.extend(zip(kx, ky))
    return True
