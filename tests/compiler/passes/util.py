"""Helpers for before/after tests of passes: parse Relay text, compare modules structurally."""

from __future__ import annotations

from compiler import relay
from compiler.ir.module import IRModule

HEADER = '#[version = "0.0.5"]\n'


def parse(text: str) -> IRModule:
    """A module from Relay text (the version header is added)."""
    return relay.fromtext(HEADER + text)


def assert_same(actual: IRModule, expected: IRModule | str) -> None:
    """Fail, showing both programs, unless ``actual`` is structurally equal to ``expected``."""
    want = parse(expected) if isinstance(expected, str) else expected
    assert relay.structural_equal(actual, want), (
        "pass output differs from the expected program.\n"
        f"--- actual:\n{actual}\n--- expected:\n{want}"
    )
