"""The call graph of a module's global functions, split into strongly connected components.

Compiler layer (``compiler.typing``). Type inference checks each component (a function
and everything mutually recursive with it) after the components it calls, so that a
polymorphic global is fully typed before other functions instantiate it.
"""

from __future__ import annotations

from compiler.ir.expr import Function, GlobalVar
from compiler.ir.visitor import post_order


def call_graph_components(funcs: dict[GlobalVar, Function]) -> list[list[GlobalVar]]:
    """Strongly connected components of the global call graph, callees first (Tarjan)."""
    by_name = {gv.name_hint: gv for gv in funcs}
    edges: dict[GlobalVar, list[GlobalVar]] = {}
    for gv, func in funcs.items():
        refs: list[GlobalVar] = []
        seen: set[str] = set()
        for node in post_order(func.body):
            name = node.name_hint if isinstance(node, GlobalVar) else None
            if name is not None and name in by_name and name not in seen:
                seen.add(name)
                refs.append(by_name[name])
        edges[gv] = refs
    index: dict[GlobalVar, int] = {}
    low: dict[GlobalVar, int] = {}
    on_stack: set[GlobalVar] = set()
    stack: list[GlobalVar] = []
    out: list[list[GlobalVar]] = []
    for start in funcs:
        if start in index:
            continue
        work: list[tuple[GlobalVar, int]] = [(start, 0)]
        while work:
            v, i = work.pop()
            if i == 0:
                index[v] = low[v] = len(index)
                stack.append(v)
                on_stack.add(v)
            succ = edges[v]
            if i > 0:
                low[v] = min(low[v], low[succ[i - 1]])
            while i < len(succ) and succ[i] in index:
                w = succ[i]
                if w in on_stack:
                    low[v] = min(low[v], index[w])
                i += 1
            if i < len(succ):
                work.append((v, i + 1))
                work.append((succ[i], 0))
                continue
            if low[v] == index[v]:
                component = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.append(w)
                    if w is v:
                        break
                out.append(component[::-1])
    return out
