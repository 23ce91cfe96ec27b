"""``Inline``: calls of global functions marked ``Inline=1`` become their bodies.

Compiler layer (``compiler.transform``). TVM's pass of that name: a global function whose
``Inline`` attribute is set (``func.with_attr("Inline", 1)``) is inlined where it is called,
its body bound to the call's arguments; a reference to it that is not a call becomes the
function itself (a closure). A function is inlined only if it is not recursive, directly or
through others, and every global function it calls is inlined too, so inlined code never
calls back out. Afterwards the marked functions that nothing refers to any more are removed,
but never one that nothing called to begin with (``main``, an entry point).

Each inlined copy gets fresh variables, so a function inlined twice into one caller binds
distinct variables (the VM compiler's passes rely on a variable being bound once).
Functions are processed callees first (the call graph's reverse topological order, built
with explicit stacks, no recursion), so a call inlined into a caller is already free of
calls the callee inlined.
"""

from __future__ import annotations

from compiler.ir.expr import Call, Expr, Function, GlobalVar, Node, Var
from compiler.ir.module import IRModule
from compiler.ir.visitor import bound_vars, post_order, substitute
from compiler.transform.pass_manager import Pass, PassContext
from compiler.transform.rewriter import BindingMutator, is_primitive

__all__ = ["Inline", "inline"]


def _marked(func: Function) -> bool:
    return bool(func.attrs.get("Inline", 0)) and not is_primitive(func)


def _callees(func: Function) -> set[str]:
    """The names of the global functions ``func`` refers to (outside primitives)."""
    outside = lambda node: not is_primitive(node)  # noqa: E731
    return {n.name_hint for n in post_order(func, descend=outside) if isinstance(n, GlobalVar)}


def _order(graph: dict[str, set[str]]) -> list[str]:
    """The functions callees first (a post-order of the call graph, by an explicit stack)."""
    order: list[str] = []
    state: dict[str, int] = {}  # 1 while on the stack, 2 once placed
    for root in sorted(graph):
        if root in state:
            continue
        stack = [(root, iter(sorted(graph[root])))]
        state[root] = 1
        while stack:
            name, pending = stack[-1]
            callee = next(pending, None)
            if callee is None:
                stack.pop()
                state[name] = 2
                order.append(name)
            elif callee in graph and callee not in state:
                state[callee] = 1
                stack.append((callee, iter(sorted(graph[callee]))))
    return order


def _cyclic(graph: dict[str, set[str]]) -> set[str]:
    """The functions that can reach themselves through calls (recursive, alone or with
    others)."""
    cyclic: set[str] = set()
    for start in graph:
        seen: set[str] = set()
        stack = list(graph[start])
        while stack:
            name = stack.pop()
            if name == start:
                cyclic.add(start)
                break
            if name in seen or name not in graph:
                continue
            seen.add(name)
            stack.extend(graph[name])
    return cyclic


def _fresh(func: Function) -> Function:
    """A copy of ``func`` that binds new variables (of the same names and annotations)."""
    renamed: dict[Var, Expr] = {v: Var(v.name_hint, v.type_annotation) for v in bound_vars(func)}
    return substitute(func, renamed)


class _Inliner(BindingMutator):
    def __init__(self, bodies: dict[str, Function]) -> None:
        super().__init__()
        self.bodies = bodies

    def descend(self, node: Node) -> bool:
        return not is_primitive(node)

    def rewrite(self, old: Node, new: Node) -> Node:
        if isinstance(old, Call) and isinstance(old.op, GlobalVar):
            callee = self.bodies.get(old.op.name_hint)
            if callee is not None:
                copy = _fresh(callee)
                args = new.args  # type: ignore[attr-defined]
                return substitute(copy.body, dict(zip(copy.params, args)))
        if isinstance(old, GlobalVar) and old.name_hint in self.bodies:
            # Not a call (the call above ignores its rewritten operator): the function as
            # a value.
            return _fresh(self.bodies[old.name_hint])
        return new


def inline(mod: IRModule) -> IRModule:
    """Inline the global functions marked ``Inline=1`` where they are used, and remove the
    ones nothing uses any more (see the module docstring).

    Parameters
    ----------
    mod : IRModule
        The module; it is not modified.

    Returns
    -------
    IRModule
        A new module.
    """
    funcs = {gv.name_hint: f for gv, f in mod.functions.items() if isinstance(f, Function)}
    graph = {name: _callees(f) & set(funcs) for name, f in funcs.items()}
    called = set().union(*graph.values())
    cyclic = _cyclic(graph)
    out = mod.copy()
    # The inlinable functions, each already free of the calls it inlined.
    bodies: dict[str, Function] = {}
    for name in _order(graph):
        func = funcs[name]
        if any(callee in bodies for callee in graph[name]):
            func = _Inliner(bodies).visit(func)
            out[name] = func
        if _marked(func) and name not in cyclic and graph[name] <= bodies.keys():
            bodies[name] = func
    used = set().union(*(_callees(out[name]) for name in funcs))
    for name in bodies:
        if name in called and name not in used:
            del out[name]
    return out


class Inline(Pass):
    """Inline the global functions marked ``Inline=1`` (``opt_level=1``), as TVM's pass of
    that name. See :mod:`compiler.transform.inline`."""

    def __init__(self) -> None:
        super().__init__("Inline", opt_level=1)

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        return inline(mod)

    def __repr__(self) -> str:
        return "Inline()"
