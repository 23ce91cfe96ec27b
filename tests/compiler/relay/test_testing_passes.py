"""relay.testing.run_infer_type and run_opt_pass: an expression through passes, back as the
same kind of thing (returns)."""

from __future__ import annotations

from compiler import relay
from compiler.ir.expr import Function, Let
from compiler.relay.testing import run_infer_type, run_opt_pass


def _function() -> Function:
    x = relay.var("x", shape=(2, 3))
    return relay.Function([x], relay.add(x, relay.const(1.0) + relay.const(2.0)))


def test_run_infer_type_types_a_function_or_a_bare_expression():
    typed = run_infer_type(_function())
    assert isinstance(typed, Function)
    assert str(typed.checked_type) == "fn (Tensor[(2, 3), float32]) -> Tensor[(2, 3), float32]"
    x = relay.var("x", shape=(4,), dtype="int32")
    body = run_infer_type(relay.sum(x))
    assert str(body.checked_type) == "int32"


def test_run_opt_pass_takes_one_pass_or_a_list_in_order():
    folded = run_opt_pass(_function(), relay.transform.FoldConstant())
    assert float(folded.body.args[1].data) == 3.0
    x = relay.var("x", shape=(2,))
    anf = run_opt_pass(
        relay.add(x, x), [relay.transform.InferType(), relay.transform.ToANormalForm()]
    )
    assert isinstance(anf, Let)
    with_prelude = run_opt_pass(_function(), relay.transform.FoldConstant(), import_prelude=True)
    assert relay.structural_equal(with_prelude, folded)
