"""The ``relay.analysis`` namespace: read-only questions about expressions.

Compiler layer (``compiler.relay``). The variable queries are the iterative ones of
:mod:`compiler.ir.visitor`; :func:`free_type_vars` lists the type variables that an
expression's annotations use without binding.
"""

from __future__ import annotations

from compiler.ir.expr import Call, Function, Node, Var
from compiler.ir.types import Type, TypeVar
from compiler.ir.visitor import all_vars, bound_vars, children, free_vars, post_order_visit
from compiler.typing.typeops import free_type_vars_of_type

__all__ = ["all_vars", "bound_vars", "free_type_vars", "free_vars", "post_order_visit"]


def free_type_vars(node: Node | Type) -> list[TypeVar]:
    """Type variables used in ``node`` but not bound by it, in order of first appearance.

    For a type, these are the type variables outside any function type's parameters.
    For an expression, they are those of its annotations (variables, function return
    types, call type arguments) not bound by an enclosing function's ``type_params``.
    """
    if isinstance(node, Type):
        return free_type_vars_of_type(node)
    out: list[TypeVar] = []
    seen: set[TypeVar] = set()
    # Pre-order with the type variables bound around each node; a node shared under two
    # different scopes is looked at once per scope.
    stack: list[tuple[Node, frozenset[TypeVar]]] = [(node, frozenset())]
    visited: set[tuple[int, frozenset[TypeVar]]] = set()
    while stack:
        n, scope = stack.pop()
        if (id(n), scope) in visited:
            continue
        visited.add((id(n), scope))
        types: list[Type] = []
        if isinstance(n, Function):
            scope = scope | frozenset(n.type_params)
            if n.ret_type is not None:
                types.append(n.ret_type)
        elif isinstance(n, Var) and n.type_annotation is not None:
            types.append(n.type_annotation)
        elif isinstance(n, Call):
            types.extend(n.type_args)
        for t in types:
            for tv in free_type_vars_of_type(t, scope):
                if tv not in seen:
                    seen.add(tv)
                    out.append(tv)
        stack.extend((c, scope) for c in reversed(children(n)))
    return out
