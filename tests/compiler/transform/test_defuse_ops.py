"""DefuseOps: each call of a fused primitive function becomes the function's body again,
computing the same values (returns)."""

from __future__ import annotations

import numpy as np

from compiler import relay
from compiler.ir.visitor import post_order
from compiler.transform.typed_rewrite import is_primitive
from tests.compiler.transform.util import assert_results_match, assert_same, parse

PROGRAM = """
def @main(%x: Tensor[(2, 3), float32]) {
  %0 = exp(%x);
  %1 = add(%0, %x);
  %2 = nn.relu(%1);
  multiply(%2, 2f)
}"""


def _primitives(mod: relay.IRModule) -> list:
    return [n for n in post_order(mod["main"]) if is_primitive(n)]


def test_fused_then_defused_is_the_program_it_started_from():
    before = parse(PROGRAM)
    fused = relay.transform.FuseOps()(relay.transform.InferType()(before))
    assert len(_primitives(fused)) == 1
    after = relay.transform.DefuseOps()(fused)
    assert not _primitives(after)
    assert_same(after, PROGRAM)
    assert_results_match(before, after, [np.random.default_rng(0).random((2, 3), "float32")])


def test_a_primitive_called_twice_is_inlined_with_each_calls_arguments():
    x, y = relay.var("x", shape=(2,)), relay.var("y", shape=(2,))
    p = relay.var("p", shape=(2,))
    prim = relay.Function([p], relay.negative(p), attrs={"Primitive": 1})
    mod = relay.IRModule.from_expr(
        relay.Function([x, y], relay.Tuple([relay.Call(prim, [x]), relay.Call(prim, [y])]))
    )
    after = relay.transform.DefuseOps()(mod)
    assert_same(
        after,
        """
        def @main(%x: Tensor[(2), float32], %y: Tensor[(2), float32]) {
          (negative(%x), negative(%y))
        }""",
    )
