"""TVM's ``relay.ExprFunctor``, ``relay.ExprVisitor`` and ``relay.ExprMutator``: the classes
user scripts subclass to write their own passes (``def visit_call(self, call): ...``).

Compiler layer (``compiler.ir``).

As in TVM, ``visit(expr)`` dispatches on the node's class to ``visit_call``,
``visit_function``, ``visit_let``... and remembers each node's result, so a node shared by
several parents is visited once. The default methods of :class:`ExprVisitor` visit every
part of a node; those of :class:`ExprMutator` rebuild it from its visited parts, returning
the node itself when no part changed.

TVM's functors recurse once per level of the program; a 10,000-deep ``let`` chain or call
nest then exhausts Python's stack. Here ``visit`` walks the parts of a node not yet
visited first, with an explicit stack, deepest first; when the node's own method then
visits its parts they are already remembered. The results are TVM's. One difference can be
seen: an override that returns without visiting a part does not keep that part from being
visited (it still counts, say, in a visitor that counts calls).
"""

from __future__ import annotations

from typing import Any

from compiler.ir.expr import (
    Call,
    Clause,
    Constant,
    Constructor,
    Expr,
    Function,
    GlobalVar,
    If,
    Let,
    Match,
    Op,
    Tuple,
    TupleGetItem,
    Var,
)

__all__ = ["ExprFunctor", "ExprMutator", "ExprVisitor"]

#: The method each node class dispatches to.
_METHODS = {
    Function: "visit_function",
    Let: "visit_let",
    Call: "visit_call",
    Var: "visit_var",
    GlobalVar: "visit_global_var",
    If: "visit_if",
    Tuple: "visit_tuple",
    TupleGetItem: "visit_tuple_getitem",
    Constant: "visit_constant",
    Op: "visit_op",
    Constructor: "visit_constructor",
    Match: "visit_match",
}


def _parts(node: Expr) -> tuple[Expr, ...]:
    """The expressions the default methods visit in ``node``, in their order."""
    if isinstance(node, Function):
        return (*node.params, node.body)
    if isinstance(node, Let):
        return (node.var, node.value, node.body)
    if isinstance(node, Call):
        return (node.op, *node.args)
    if isinstance(node, If):
        return (node.cond, node.true_branch, node.false_branch)
    if isinstance(node, Tuple):
        return tuple(node.fields)
    if isinstance(node, TupleGetItem):
        return (node.tuple_value,)
    if isinstance(node, Match):
        return (node.data, *(clause.rhs for clause in node.clauses))
    return ()


class ExprFunctor:
    """Dispatch on the class of an expression, remembering each node's result.

    Subclasses define the ``visit_*`` methods they need; one that is missing raises
    ``NotImplementedError`` naming it. :attr:`memo_map` maps each visited node to its
    result.
    """

    def __init__(self) -> None:
        self.memo_map: dict[Expr, Any] = {}

    def visit(self, expr: Expr) -> Any:
        """The result of visiting ``expr`` (remembered: a node is visited once)."""
        memo = self.memo_map
        if expr in memo:
            return memo[expr]
        stack: list[tuple[Expr, bool]] = [(expr, False)]
        while stack:
            node, ready = stack.pop()
            if node in memo:
                continue
            if ready:
                memo[node] = self._dispatch(node)
                continue
            stack.append((node, True))
            stack.extend((part, False) for part in reversed(_parts(node)) if part not in memo)
        return memo[expr]

    def _dispatch(self, node: Expr) -> Any:
        for cls in type(node).__mro__:
            method = _METHODS.get(cls)
            if method is not None:
                return getattr(self, method)(node)
        raise TypeError(f"{type(self).__name__} cannot visit a {type(node).__name__}")

    def _missing(self, method: str) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not define {method}")

    def visit_function(self, fn: Function) -> Any:
        return self._missing("visit_function")

    def visit_let(self, let: Let) -> Any:
        return self._missing("visit_let")

    def visit_call(self, call: Call) -> Any:
        return self._missing("visit_call")

    def visit_var(self, var: Var) -> Any:
        return self._missing("visit_var")

    def visit_global_var(self, gvar: GlobalVar) -> Any:
        return self._missing("visit_global_var")

    def visit_if(self, ite: If) -> Any:
        return self._missing("visit_if")

    def visit_tuple(self, tup: Tuple) -> Any:
        return self._missing("visit_tuple")

    def visit_tuple_getitem(self, item: TupleGetItem) -> Any:
        return self._missing("visit_tuple_getitem")

    def visit_constant(self, const: Constant) -> Any:
        return self._missing("visit_constant")

    def visit_op(self, op: Op) -> Any:
        return self._missing("visit_op")

    def visit_constructor(self, con: Constructor) -> Any:
        return self._missing("visit_constructor")

    def visit_match(self, match: Match) -> Any:
        return self._missing("visit_match")


class ExprVisitor(ExprFunctor):
    """Visit every part of an expression once; override ``visit_*`` to act on the nodes
    of a kind (calling the base method, or ``self.visit`` on the parts, to go on)."""

    def _each(self, node: Expr) -> None:
        for part in _parts(node):
            self.visit(part)

    def visit_function(self, fn: Function) -> None:
        self._each(fn)

    def visit_let(self, let: Let) -> None:
        self._each(let)

    def visit_call(self, call: Call) -> None:
        self._each(call)

    def visit_if(self, ite: If) -> None:
        self._each(ite)

    def visit_tuple(self, tup: Tuple) -> None:
        self._each(tup)

    def visit_tuple_getitem(self, item: TupleGetItem) -> None:
        self._each(item)

    def visit_match(self, match: Match) -> None:
        self._each(match)

    def visit_var(self, var: Var) -> None:
        pass

    def visit_global_var(self, gvar: GlobalVar) -> None:
        pass

    def visit_constant(self, const: Constant) -> None:
        pass

    def visit_op(self, op: Op) -> None:
        pass

    def visit_constructor(self, con: Constructor) -> None:
        pass


class ExprMutator(ExprFunctor):
    """Rebuild an expression from its visited parts; override ``visit_*`` to replace the
    nodes of a kind. A node whose parts come back unchanged is returned as it is."""

    def visit_function(self, fn: Function) -> Expr:
        params = [self.visit(p) for p in fn.params]
        body = self.visit(fn.body)
        if body is fn.body and all(new is old for new, old in zip(params, fn.params)):
            return fn
        return Function(params, body, fn.ret_type, fn.type_params, fn.attrs)

    def visit_let(self, let: Let) -> Expr:
        var, value, body = self.visit(let.var), self.visit(let.value), self.visit(let.body)
        if var is let.var and value is let.value and body is let.body:
            return let
        return Let(var, value, body)

    def visit_call(self, call: Call) -> Expr:
        op = self.visit(call.op)
        args = [self.visit(a) for a in call.args]
        if op is call.op and all(new is old for new, old in zip(args, call.args)):
            return call
        return Call(op, args, call.attrs, call.type_args)

    def visit_if(self, ite: If) -> Expr:
        parts = [self.visit(p) for p in (ite.cond, ite.true_branch, ite.false_branch)]
        if all(
            new is old for new, old in zip(parts, (ite.cond, ite.true_branch, ite.false_branch))
        ):
            return ite
        return If(*parts)

    def visit_tuple(self, tup: Tuple) -> Expr:
        fields = [self.visit(f) for f in tup.fields]
        if all(new is old for new, old in zip(fields, tup.fields)):
            return tup
        return Tuple(fields)

    def visit_tuple_getitem(self, item: TupleGetItem) -> Expr:
        value = self.visit(item.tuple_value)
        return item if value is item.tuple_value else TupleGetItem(value, item.index)

    def visit_match(self, match: Match) -> Expr:
        data = self.visit(match.data)
        rhs = [self.visit(clause.rhs) for clause in match.clauses]
        if data is match.data and all(new is c.rhs for new, c in zip(rhs, match.clauses)):
            return match
        clauses = [Clause(c.lhs, new) for c, new in zip(match.clauses, rhs)]
        return Match(data, clauses, match.complete)

    def visit_var(self, var: Var) -> Expr:
        return var

    def visit_global_var(self, gvar: GlobalVar) -> Expr:
        return gvar

    def visit_constant(self, const: Constant) -> Expr:
        return const

    def visit_op(self, op: Op) -> Expr:
        return op

    def visit_constructor(self, con: Constructor) -> Expr:
        return con
