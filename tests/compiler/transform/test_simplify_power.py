"""SimplifyPower: power by a whole constant of 1 to 4 becomes multiplications; anything
else is left alone."""

from __future__ import annotations

import numpy as np
import pytest

from compiler import relay
from tests.compiler.transform.util import assert_results_match, assert_same, calls, parse

simplify_power = relay.transform.SimplifyPower()
RNG = np.random.default_rng(5)


# ---- returns: rewritten ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("exponent", "expected"),
    [
        ("1f", "%x"),
        ("2f", "multiply(%x, %x)"),
        ("3f", "multiply(multiply(%x, %x), %x)"),
        ("4f", "%0 = multiply(%x, %x); multiply(%0, %0)"),
    ],
)
def test_a_whole_exponent_becomes_multiplications(exponent: str, expected: str) -> None:
    before = parse(f"def @main(%x: Tensor[(4, 5), float32]) {{ power(%x, {exponent}) }}")
    after = simplify_power(before)
    assert_same(after, f"def @main(%x: Tensor[(4, 5), float32]) {{ {expected} }}")
    assert_results_match(before, after, [RNG.standard_normal((4, 5)).astype("float32")])


def test_gpt2_gelu_keeps_its_values() -> None:
    before = parse(
        """
        def @main(%x: Tensor[(8, 16), float32]) {
          %0 = add(%x, multiply(0.044715f, power(%x, 3f)));
          multiply(multiply(0.5f, %x), add(1f, tanh(multiply(0.797885f, %0))))
        }
        """
    )
    after = simplify_power(before)
    assert not calls(after["main"], "power")
    assert_results_match(before, after, [RNG.standard_normal((8, 16)).astype("float32")])


# ---- returns: left alone -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "def @main(%x: Tensor[(4,), float32]) { power(%x, 0.5f) }",  # fractional
        "def @main(%x: Tensor[(4,), float32]) { power(%x, 5f) }",  # above 4
        "def @main(%x: Tensor[(4,), float32], %e: float32) { power(%x, %e) }",  # not constant
        "def @main(%x: float32) { power(%x, meta[relay.Constant][0]) }",  # would broadcast
        "def @main(%x: Tensor[(4,), int32]) { power(%x, 2) }",  # integers
    ],
    ids=["fractional", "above-4", "run-time", "broadcasting", "integer"],
)
def test_other_exponents_stay_a_power(text: str) -> None:
    if "meta" in text:
        x = relay.var("x", shape=(), dtype="float32")
        body = relay.power(x, relay.const(np.array([2.0], "float32")))
        before = relay.IRModule.from_expr(relay.Function([x], body))
    else:
        before = parse(text)
    after = simplify_power(before)
    assert calls(after["main"], "power")
