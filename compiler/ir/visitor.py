"""Iterative traversal and rewriting of Relay expressions.

Compiler layer (``compiler.ir``).

Nothing here recurses in Python: a 10,000-deep ``let`` chain or call nest is walked
with an explicit stack. Every pass builds on :func:`children`, :func:`post_order`
and :class:`ExprMutator`. Shared sub-expressions are visited once (memoised by
identity), so DAG-shaped programs stay linear.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any as AnyT

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
    Node,
    Op,
    Pattern,
    PatternConstructor,
    PatternTuple,
    PatternVar,
    PatternWildcard,
    Tuple,
    TupleGetItem,
    Var,
)

LEAVES = (Var, GlobalVar, Constant, Op, Constructor, PatternWildcard)


def children(node: Node) -> tuple[Node, ...]:
    """The direct sub-nodes of ``node`` (expressions, clauses and patterns), in source order."""
    if isinstance(node, LEAVES):
        return ()
    if isinstance(node, Call):
        return (node.op, *node.args)
    if isinstance(node, Let):
        return (node.var, node.value, node.body)
    if isinstance(node, Tuple):
        return node.fields
    if isinstance(node, TupleGetItem):
        return (node.tuple_value,)
    if isinstance(node, If):
        return (node.cond, node.true_branch, node.false_branch)
    if isinstance(node, Function):
        return (*node.params, node.body)
    if isinstance(node, Match):
        return (node.data, *node.clauses)
    if isinstance(node, Clause):
        return (node.lhs, node.rhs)
    if isinstance(node, PatternVar):
        return (node.var,)
    if isinstance(node, PatternConstructor):
        return (node.constructor, *node.patterns)
    if isinstance(node, PatternTuple):
        return node.patterns
    raise TypeError(f"not a Relay node: {type(node).__name__}")


def rebuild(node: Node, new_children: tuple[Node, ...]) -> Node:
    """A copy of ``node`` with ``new_children`` (same order as :func:`children`).

    Returns ``node`` itself when every child is unchanged, so unchanged subtrees
    keep their identity (and their ``checked_type``).
    """
    old = children(node)
    if len(old) == len(new_children) and all(a is b for a, b in zip(old, new_children)):
        return node
    c: AnyT = new_children
    new: Node
    if isinstance(node, Call):
        new = Call(c[0], c[1:], node.attrs, node.type_args)
    elif isinstance(node, Let):
        new = Let(c[0], c[1], c[2])
    elif isinstance(node, Tuple):
        new = Tuple(c)
    elif isinstance(node, TupleGetItem):
        new = TupleGetItem(c[0], node.index)
    elif isinstance(node, If):
        new = If(c[0], c[1], c[2])
    elif isinstance(node, Function):
        n = len(node.params)
        new = Function(c[:n], c[n], node.ret_type, node.type_params, node.attrs)
    elif isinstance(node, Match):
        new = Match(c[0], c[1:], node.complete)
    elif isinstance(node, Clause):
        new = Clause(c[0], c[1])
    elif isinstance(node, PatternVar):
        new = PatternVar(c[0])
    elif isinstance(node, PatternConstructor):
        new = PatternConstructor(c[0], c[1:])
    elif isinstance(node, PatternTuple):
        new = PatternTuple(c)
    else:
        raise TypeError(f"cannot rebuild {type(node).__name__}")
    new.span = node.span
    return new


def post_order(root: Node, descend: Callable[[Node], bool] | None = None) -> Iterator[Node]:
    """Yield every node under ``root`` once, children before parents.

    ``descend(node)`` returning False stops the walk from entering ``node``'s
    children (the node itself is still yielded).
    """
    seen: set[int] = set()
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            yield node
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.append((node, True))
        if descend is None or descend(node):
            for child in reversed(children(node)):
                if id(child) not in seen:
                    stack.append((child, False))


def post_order_visit(expr: Node, fn: Callable[[Node], object]) -> None:
    """Call ``fn`` on every node of ``expr`` in post order, each node once (TVM's API)."""
    for node in post_order(expr):
        fn(node)


def pattern_vars(pattern: Pattern) -> list[Var]:
    """The variables a pattern binds, left to right."""
    out: list[Var] = []
    stack: list[Pattern] = [pattern]
    while stack:
        p = stack.pop()
        if isinstance(p, PatternVar):
            out.append(p.var)
        elif isinstance(p, (PatternConstructor, PatternTuple)):
            stack.extend(reversed(p.patterns))
    return out


def free_vars(expr: Node) -> list[Var]:
    """Variables used in ``expr`` but not bound inside it, in order of first use."""
    bound: set[Var] = set()
    for node in post_order(expr):
        if isinstance(node, Let):
            bound.add(node.var)
        elif isinstance(node, Function):
            bound.update(node.params)
        elif isinstance(node, Clause):
            bound.update(pattern_vars(node.lhs))
    out: list[Var] = []
    seen: set[Var] = set()
    # Pre-order (source order) so parameters of a wrapper come out in reading order.
    stack: list[Node] = [expr]
    visited: set[int] = set()
    while stack:
        node = stack.pop()
        if id(node) in visited:
            continue
        visited.add(id(node))
        if isinstance(node, Var):
            if node not in bound and node not in seen:
                seen.add(node)
                out.append(node)
            continue
        if isinstance(node, PatternVar):
            continue
        kids = children(node)
        if isinstance(node, Let):
            kids = (node.value, node.body)
        elif isinstance(node, Function):
            kids = (node.body,)
        stack.extend(reversed(kids))
    return out


def bound_vars(expr: Node) -> list[Var]:
    """Variables bound inside ``expr`` (let, function parameters, patterns)."""
    out: list[Var] = []
    for node in post_order(expr):
        if isinstance(node, Let):
            out.append(node.var)
        elif isinstance(node, Function):
            out.extend(node.params)
        elif isinstance(node, Clause):
            out.extend(pattern_vars(node.lhs))
    return out


def all_vars(expr: Node) -> list[Var]:
    """Every variable appearing in ``expr``."""
    return [n for n in post_order(expr) if isinstance(n, Var)]


class ExprMutator:
    """Iterative post-order rewriter.

    Subclasses override :meth:`rewrite` (called once per node, after its children
    have been rewritten, with the original and the rebuilt node) and optionally
    :meth:`descend` to leave a subtree untouched. Results are memoised by node
    identity, so a shared sub-expression is rewritten once and stays shared.
    """

    def __init__(self) -> None:
        self.memo: dict[int, Node] = {}
        self._keep: list[Node] = []  # keep originals alive so ids stay unique

    def descend(self, node: Node) -> bool:
        """Whether to rewrite inside ``node`` (default: always)."""
        return True

    def rewrite(self, old: Node, new: Node) -> Node:
        """Return the replacement for ``old``; ``new`` is ``old`` with rewritten children."""
        return new

    def visit(self, root: Node) -> AnyT:
        """Rewrite ``root`` and return the result."""
        memo = self.memo
        stack: list[tuple[Node, bool]] = [(root, False)]
        while stack:
            node, expanded = stack.pop()
            if id(node) in memo:
                continue
            if not expanded:
                if self.descend(node):
                    stack.append((node, True))
                    for child in reversed(children(node)):
                        if id(child) not in memo:
                            stack.append((child, False))
                else:
                    memo[id(node)] = self.rewrite(node, node)
                    self._keep.append(node)
                continue
            new_children = tuple(memo[id(c)] for c in children(node))
            memo[id(node)] = self.rewrite(node, rebuild(node, new_children))
            self._keep.append(node)
        return memo[id(root)]


def substitute(expr: Node, mapping: dict[Var, Expr]) -> AnyT:
    """Replace free occurrences of variables by expressions (no capture checks needed:
    Relay variables are unique objects)."""

    class _Subst(ExprMutator):
        def rewrite(self, old: Node, new: Node) -> Node:
            if isinstance(old, Var) and old in mapping:
                return mapping[old]
            return new

    return _Subst().visit(expr)


def let_chain(expr: Expr) -> tuple[list[Let], Expr]:
    """Split ``let a = x; let b = y; body`` into its bindings and the final body."""
    bindings: list[Let] = []
    while isinstance(expr, Let):
        bindings.append(expr)
        expr = expr.body
    return bindings, expr
