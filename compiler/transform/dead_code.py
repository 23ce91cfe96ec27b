"""``DeadCodeElimination`` and ``RemoveUnusedFunctions``.

Compiler layer (``compiler.transform``).

``DeadCodeElimination`` removes ``let`` bindings whose variable is never used by the code
that remains, transitively: in ``let %a = f(%x); let %b = g(%a); %x`` both go, and so
does a recursive local function nothing outside it calls. Liveness is found by marking
from each function's body outwards (a binding's value is live only once its variable is
used by live code), so one walk handles chains of any length. In Relay operator calls and
calls of functions, closures and constructors are pure, so any unused binding can go;
operators the registry does not know are treated as having effects and kept unless
``ignore_impurity=True``.

With ``inline_once=True`` a pure binding used exactly once is also substituted at its use
and the ``let`` dropped, unless the use is inside a local function (which may run many
times) or the binding is recursive.

``RemoveUnusedFunctions`` drops global functions not reachable (through global
references) from the entry functions. Primitive functions are left as they are by both.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from compiler.ir.expr import (
    Call,
    Clause,
    Expr,
    Function,
    GlobalVar,
    Let,
    Node,
    Op,
    PatternVar,
    Var,
)
from compiler.ir.module import IRModule
from compiler.ir.visitor import children, post_order
from compiler.op.registry import get_def
from compiler.transform.pass_manager import Pass, PassContext
from compiler.transform.rewriter import BindingMutator, is_primitive

__all__ = [
    "DeadCodeElimination",
    "RemoveUnusedFunctions",
    "dead_code_elimination",
    "remove_unused_functions",
]

_MIXED = -1  # context of a node reachable from more than one function body


def _known_op(op: Op) -> bool:
    try:
        get_def(op.name)
    except ValueError:
        return False
    return True


def _uses(node: Node) -> tuple[Node, ...]:
    """The children of ``node`` that are evaluated or referenced (not binding positions)."""
    if isinstance(node, Let):
        return (node.value, node.body)
    if isinstance(node, Function):
        return () if is_primitive(node) else (node.body,)
    if isinstance(node, Clause):
        return (node.rhs,)
    if isinstance(node, PatternVar):
        return ()
    return children(node)


class _Liveness:
    """Which bindings of one function are dead, and which may be inlined."""

    def __init__(self, func: Function, ignore_impurity: bool, inline_once: bool) -> None:
        self.order = list(post_order(func, descend=lambda n: not is_primitive(n)))
        self.impure = set() if ignore_impurity else self._impure()
        self.live, self.used = self._mark(func)
        self.dead: set[Let] = set()
        self.inlined: set[Let] = set()
        lets = [n for n in self.order if isinstance(n, Let) and id(n) in self.live]
        for let in lets:
            if let.var not in self.used and id(let.value) not in self.impure:
                self.dead.add(let)
        if inline_once:
            self._find_inlinable(lets)

    def _impure(self) -> set[int]:
        """ids of nodes whose evaluation may call an operator of unknown effect."""
        impure: set[int] = set()
        for node in self.order:  # children first
            if isinstance(node, Function):
                continue  # making a closure runs nothing
            unknown = isinstance(node, Call) and isinstance(node.op, Op) and not _known_op(node.op)
            if unknown or any(id(c) in impure for c in _uses(node)):
                impure.add(id(node))
        return impure

    def _mark(self, func: Function) -> tuple[set[int], set[Var]]:
        live: set[int] = set()
        used: set[Var] = set()
        waiting: dict[Var, Let] = {}  # bindings whose value is live once the variable is used
        stack: list[Node] = [func]
        while stack:
            node = stack.pop()
            if id(node) in live:
                continue
            live.add(id(node))
            if isinstance(node, Var):
                used.add(node)
                let = waiting.pop(node, None)
                if let is not None:
                    stack.append(let.value)
            elif isinstance(node, Let):
                stack.append(node.body)
                if node.var in used or id(node.value) in self.impure:
                    stack.append(node.value)
                else:
                    waiting[node.var] = node
            else:
                stack.extend(_uses(node))
        return live, used

    def _find_inlinable(self, lets: list[Let]) -> None:
        """Live pure bindings used once, from the function body they are bound in."""
        counts: dict[Var, int] = {}
        context: dict[int, int] = {}
        for node in reversed(self.order):  # parents before children
            if id(node) not in self.live:
                continue
            here = context.get(id(node), id(node))
            inner = id(node) if isinstance(node, Function) else here
            kids = _uses(node)
            if isinstance(node, Let) and node in self.dead:
                kids = (node.body,)
            for child in kids:
                if isinstance(child, Var):
                    counts[child] = counts.get(child, 0) + 1
                previous = context.get(id(child))
                if previous is None:
                    context[id(child)] = inner
                elif previous != inner:
                    context[id(child)] = _MIXED
        for let in lets:
            if let in self.dead or id(let.value) in self.impure:
                continue
            if counts.get(let.var) != 1:
                continue
            where = context.get(id(let.var))
            if where is not None and where != _MIXED and where == context.get(id(let)):
                self.inlined.add(let)


class _Eliminator(BindingMutator):
    def __init__(self, liveness: _Liveness) -> None:
        super().__init__()
        self.liveness = liveness
        self.inline: dict[Var, Expr] = {}

    def descend(self, node: Node) -> bool:
        return not is_primitive(node)

    def enter_let(self, let: Let, value: Expr) -> None:
        if let in self.liveness.inlined:
            self.inline[let.var] = value

    def rewrite(self, old: Node, new: Node) -> Node:
        if isinstance(new, Var):
            return self.inline.get(new, new)
        if isinstance(new, Let) and (old in self.liveness.dead or old in self.liveness.inlined):
            return new.body
        return new


def _eliminate(func: Function, inline_once: bool, ignore_impurity: bool) -> Function:
    if is_primitive(func):
        return func
    liveness = _Liveness(func, ignore_impurity, inline_once)
    if not liveness.dead and not liveness.inlined:
        return func
    return _Eliminator(liveness).visit(func)


def dead_code_elimination(
    mod: IRModule, inline_once: bool = False, ignore_impurity: bool = False
) -> IRModule:
    """Remove unused ``let`` bindings from every function of ``mod``.

    Parameters
    ----------
    mod : IRModule
        The module; it is not modified.
    inline_once : bool
        Also substitute pure bindings used exactly once (not into local functions).
    ignore_impurity : bool
        Treat calls of operators outside the registry as pure too.

    Returns
    -------
    IRModule
        A new module with the same globals and type definitions.
    """
    out = mod.copy()
    for gvar, func in mod.functions.items():
        out[gvar] = _eliminate(func, inline_once, ignore_impurity)
    return out


class DeadCodeElimination(Pass):
    """Remove ``let`` bindings whose variable is unused (TVM's ``DeadCodeElimination``,
    ``opt_level=1``). See :mod:`compiler.transform.dead_code`.

    Parameters
    ----------
    inline_once : bool
        Also inline pure bindings used exactly once.
    ignore_impurity : bool
        Also remove unused bindings of operators outside the registry.
    """

    def __init__(self, inline_once: bool = False, ignore_impurity: bool = False) -> None:
        super().__init__("DeadCodeElimination", opt_level=1)
        self.inline_once = bool(inline_once)
        self.ignore_impurity = bool(ignore_impurity)

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        return dead_code_elimination(mod, self.inline_once, self.ignore_impurity)

    def __repr__(self) -> str:
        return (
            f"DeadCodeElimination(inline_once={self.inline_once}, "
            f"ignore_impurity={self.ignore_impurity})"
        )


def remove_unused_functions(mod: IRModule, entry_functions: Sequence[str] = ("main",)) -> IRModule:
    """Drop the global functions of ``mod`` that no entry function reaches.

    Parameters
    ----------
    mod : IRModule
        The module; it is not modified.
    entry_functions : sequence of str
        Names of the functions to keep with everything they reference; each must exist.

    Returns
    -------
    IRModule
        A new module with the reachable functions (in their original order) and every
        type definition.
    """
    names = [g.name_hint for g in mod.get_global_vars()]
    missing = [e for e in entry_functions if e not in mod]
    if missing:
        have = ", ".join("@" + n for n in names) or "no functions"
        raise ValueError(
            f"RemoveUnusedFunctions: entry function(s) {', '.join('@' + m for m in missing)} "
            f"not found in the module (it has {have})"
        )
    reached: set[str] = set()
    work = list(entry_functions)
    while work:
        name = work.pop()
        if name in reached:
            continue
        reached.add(name)
        for node in post_order(mod[name]):
            if isinstance(node, GlobalVar) and node.name_hint in mod:
                work.append(node.name_hint)
    out = mod.copy()
    for name in names:
        if name not in reached:
            del out[name]
    return out


class RemoveUnusedFunctions(Pass):
    """Drop global functions unreachable from ``entry_functions`` (TVM's
    ``RemoveUnusedFunctions``, ``opt_level=1``).

    Parameters
    ----------
    entry_functions : list of str, optional
        The roots (default ``["main"]``); each must be a function of the module.
    """

    def __init__(self, entry_functions: Iterable[str] | None = None) -> None:
        super().__init__("RemoveUnusedFunctions", opt_level=1)
        if entry_functions is None:
            entry_functions = ["main"]
        if isinstance(entry_functions, str):
            raise TypeError(
                f"RemoveUnusedFunctions entry_functions must be a list of names, got the "
                f"string {entry_functions!r}"
            )
        entries = tuple(entry_functions)
        for e in entries:
            if not isinstance(e, str):
                raise TypeError(
                    f"RemoveUnusedFunctions entry function names must be str, got {e!r}"
                )
        self.entry_functions = entries

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        return remove_unused_functions(mod, self.entry_functions)

    def __repr__(self) -> str:
        return f"RemoveUnusedFunctions(entry_functions={list(self.entry_functions)})"
