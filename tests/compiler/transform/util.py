"""Helpers for the pass tests: parse Relay text, compare modules, compare results."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from compiler import relay
from compiler.ir.expr import Call, Function, Let, Node
from compiler.ir.module import IRModule
from compiler.ir.visitor import post_order
from compiler.typing import infer_types

HEADER = '#[version = "0.0.5"]\n'


def parse(text: str) -> IRModule:
    """A module from Relay text (the version header is added)."""
    return relay.fromtext(HEADER + text)


def assert_same(actual: IRModule, expected: IRModule | str) -> None:
    """Fail, showing both programs, unless ``actual`` equals ``expected`` structurally.

    Both sides are type-checked first, so annotations the type checker fills in (return
    types, parameter types) never make the comparison depend on which pass ran inference.
    """
    want = parse(expected) if isinstance(expected, str) else expected
    got_typed, want_typed = infer_types(actual), infer_types(want)
    assert relay.structural_equal(got_typed, want_typed), (
        "pass output differs from the expected program.\n"
        f"--- actual:\n{actual}\n--- expected:\n{want}"
    )


def assert_same_untyped(actual: IRModule, expected: IRModule | str) -> None:
    """Fail unless ``actual`` is structurally equal to ``expected`` as written, untyped.

    For the lowering passes (fusion, A-normal form, lambda lifting, ...), whose tests compare
    exactly what the pass produced, annotations included.
    """
    want = parse(expected) if isinstance(expected, str) else expected
    assert relay.structural_equal(actual, want), (
        "pass output differs from the expected program.\n"
        f"--- actual:\n{actual}\n--- expected:\n{want}"
    )


def run(mod: IRModule, *args: object) -> object:
    """``main(*args)`` on the reference interpreter."""
    return relay.create_executor("debug", mod).evaluate()(*args)


def assert_results_match(
    before: IRModule, after: IRModule, args: Sequence[object], rtol: float = 1e-5
) -> None:
    """``before`` and ``after`` compute the same values (dtypes and shapes exactly)."""
    want, got = run(before, *args), run(after, *args)
    want_items = want if isinstance(want, tuple) else (want,)
    got_items = got if isinstance(got, tuple) else (got,)
    assert len(want_items) == len(got_items)
    for w, g in zip(want_items, got_items):
        w, g = np.asarray(w), np.asarray(g)
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, g.shape, w.dtype, w.shape)
        np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol)


def calls(node: Node, op_name: str | None = None) -> list[Call]:
    """The distinct call nodes under ``node`` (of operator ``op_name`` if given)."""
    out = [n for n in post_order(node) if isinstance(n, Call)]
    if op_name is not None:
        out = [c for c in out if getattr(c.op, "name", None) == op_name]
    return out


def op_names(mod: IRModule) -> set[str]:
    """Names of every operator called anywhere in ``mod``."""
    return {
        c.op.name  # type: ignore[attr-defined]
        for func in mod.functions.values()
        for c in calls(func)
        if hasattr(c.op, "name") and isinstance(c.op, relay.Op)
    }


def let_depth(func: Function) -> int:
    """How many ``let`` bindings the body chain of ``func`` has."""
    depth, body = 0, func.body
    while isinstance(body, Let):
        depth, body = depth + 1, body.body
    return depth
