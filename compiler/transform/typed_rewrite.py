"""Helpers the passes share: known types of expressions, type-preserving rewrites, type variables.

Compiler layer (``compiler.transform``).

The passes rebuild only the nodes whose children change. A rebuilt node is a new object
without a ``checked_type``; since every pass here preserves meaning, the rebuilt node has
the type of the node it replaces, and :func:`carry_type` copies it over so a later pass
can read types without running inference again. Only freshly built nodes are written to;
the input program is never mutated.
"""

from __future__ import annotations

from collections.abc import Iterable

from compiler.ir.expr import Expr, Function, Node, Var
from compiler.ir.types import FuncType, TupleType, Type, TypeCall, TypeVar


def known_type(expr: Expr) -> Type | None:
    """The type of ``expr`` from type inference, else its annotation (variables), else None."""
    ty = expr._checked_type
    if ty is None and isinstance(expr, Var):
        ty = expr.type_annotation
    return ty


def carry_type(old: Node, new: Node) -> Node:
    """Give ``new`` (built to replace ``old``) the checked type of ``old``; return ``new``."""
    if (
        new is not old
        and isinstance(new, Expr)
        and isinstance(old, Expr)
        and new._checked_type is None
    ):
        new._checked_type = old._checked_type
    return new


def with_type(expr: Expr, ty: Type | None) -> Expr:
    """Set the checked type of the freshly built ``expr`` (if known); returns ``expr``."""
    if ty is not None and expr._checked_type is None:
        expr._checked_type = ty
    return expr


def is_primitive(expr: object) -> bool:
    """Whether ``expr`` is a primitive function (``Primitive=1``): one kernel."""
    return isinstance(expr, Function) and bool(expr.attrs.get("Primitive", 0))


def is_closure(expr: object) -> bool:
    """Whether ``expr`` is a lifted closure-producing function (``Closure=1``)."""
    return isinstance(expr, Function) and bool(expr.attrs.get("Closure", 0))


def _type_children(ty: Type) -> tuple[Type, ...]:
    if isinstance(ty, TupleType):
        return ty.fields
    if isinstance(ty, FuncType):
        return (*ty.arg_types, ty.ret_type)
    if isinstance(ty, TypeCall):
        return ty.args
    return ()


def type_vars_in(types: Iterable[Type | None]) -> list[TypeVar]:
    """Type variables occurring in ``types``, in order of first appearance.

    Type variables bound by a polymorphic function type inside ``types`` are not free
    there, but Relay programs never shadow, so they are reported too; callers subtract
    the parameters they bind.
    """
    out: list[TypeVar] = []
    seen: set[int] = set()  # every type node already walked (types are often shared)
    stack: list[Type] = [t for t in reversed(list(types)) if t is not None]
    while stack:
        ty = stack.pop()
        if id(ty) in seen:
            continue
        seen.add(id(ty))
        if isinstance(ty, TypeVar):
            out.append(ty)
            continue
        stack.extend(reversed(_type_children(ty)))
    return out


def substitute_type(ty: Type, mapping: dict[TypeVar, Type]) -> Type:
    """``ty`` with each type variable in ``mapping`` replaced; rebuilds only changed parts."""
    results: dict[int, Type] = {}
    stack: list[tuple[Type, bool]] = [(ty, False)]
    while stack:
        node, expanded = stack.pop()
        if id(node) in results:
            continue
        kids = _type_children(node)
        if not expanded and kids:
            stack.append((node, True))
            stack.extend((k, False) for k in kids if id(k) not in results)
            continue
        if isinstance(node, TypeVar):
            results[id(node)] = mapping.get(node, node)
            continue
        new_kids = tuple(results[id(k)] for k in kids)
        if all(a is b for a, b in zip(kids, new_kids)):
            results[id(node)] = node
        elif isinstance(node, TupleType):
            results[id(node)] = TupleType(new_kids)
        elif isinstance(node, FuncType):
            results[id(node)] = FuncType(new_kids[:-1], new_kids[-1], node.type_params)
        else:
            assert isinstance(node, TypeCall)
            results[id(node)] = TypeCall(node.func, new_kids)
    return results[id(ty)]
