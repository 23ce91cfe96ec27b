"""The order in which inference checks global functions: callees first, cycles together."""

from __future__ import annotations

from compiler import relay
from compiler.typing.callgraph import call_graph_components


def test_components_come_callees_first_with_mutual_recursion_grouped():
    names = ["main", "even", "odd", "leaf", "alone"]
    gvs = {n: relay.GlobalVar(n) for n in names}
    calls = {"main": ["even", "leaf"], "even": ["odd"], "odd": ["even", "leaf"], "leaf": []}
    funcs = {}
    for n in names:
        body = relay.Tuple([relay.Call(gvs[c], []) for c in calls.get(n, [])])
        funcs[gvs[n]] = relay.Function([], body)
    order = [[g.name_hint for g in comp] for comp in call_graph_components(funcs)]
    flat = [n for comp in order for n in comp]
    assert sorted(flat) == sorted(names)
    assert sorted(next(c for c in order if "even" in c)) == ["even", "odd"]
    position = {n: i for i, comp in enumerate(order) for n in comp}
    assert position["leaf"] < position["even"] < position["main"]
    assert ["alone"] in order


def test_long_call_chain_is_walked_without_recursion():
    gvs = [relay.GlobalVar(f"f{i}") for i in range(5_000)]
    funcs = {}
    for i, gv in enumerate(gvs):
        body = relay.Call(gvs[i + 1], []) if i + 1 < len(gvs) else relay.const(0)
        funcs[gv] = relay.Function([], body)
    order = call_graph_components(funcs)
    assert [c[0].name_hint for c in order[:2]] == ["f4999", "f4998"]
    assert len(order) == 5_000
