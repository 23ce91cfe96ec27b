"""relay.ExprVisitor / ExprMutator / ExprFunctor as TVM scripts subclass them: overrides see
each node once, the default methods visit or rebuild every part, unchanged nodes come back as
they are, and programs deeper than Python's stack are walked (returns); a functor without the
method a node needs says which (traps)."""

from __future__ import annotations

import numpy as np
import pytest

from compiler import relay


def _x() -> relay.Var:
    return relay.var("x", shape=(3,))


class _ReluToClip(relay.ExprMutator):
    def visit_call(self, call):
        call = super().visit_call(call)
        if getattr(call.op, "name", None) == "nn.relu":
            return relay.clip(call.args[0], 0.0, 6.0)
        return call


class _CallCounter(relay.ExprVisitor):
    def __init__(self) -> None:
        super().__init__()
        self.ops: list[str] = []

    def visit_call(self, call) -> None:
        self.ops.append(call.op.name)
        super().visit_call(call)


# --- returns -------------------------------------------------------------------------------------


def test_a_mutator_replaces_the_calls_it_overrides_and_keeps_the_rest():
    x = _x()
    before = relay.Function([x], relay.nn.relu(x * relay.const(2.0)) + x)
    after = _ReluToClip().visit(before)
    want = relay.Function([x], relay.clip(x * relay.const(2.0), 0.0, 6.0) + x)
    assert relay.structural_equal(after, want)
    x_value = np.array([-1.0, 1.0, 5.0], "float32")
    got = relay.create_executor("debug", relay.IRModule.from_expr(after)).evaluate()(x_value)
    np.testing.assert_allclose(got, np.clip(2 * x_value, 0, 6) + x_value)


def test_an_unchanged_program_comes_back_as_the_same_object():
    x = _x()
    y = relay.var("y")
    func = relay.Function(
        [x],
        relay.Let(y, relay.Tuple([x, x]), relay.If(relay.const(True), y[0], relay.negative(y[1]))),
    )
    assert relay.ExprMutator().visit(func) is func


def test_a_visitor_sees_a_shared_node_once():
    x = _x()
    shared = relay.exp(x)
    counter = _CallCounter()
    counter.visit(relay.Function([x], relay.Tuple([shared + shared, shared])))
    assert sorted(counter.ops) == ["add", "exp"]


def test_lets_ifs_tuples_and_projections_are_rebuilt_around_a_replacement():
    x = _x()
    t = relay.var("t")
    body = relay.Let(
        t, relay.nn.relu(x), relay.If(relay.const(False), relay.Tuple([t, x])[0], relay.nn.relu(t))
    )
    after = _ReluToClip().visit(relay.Function([x], body))
    assert str(after).count("clip(") == 2 and "relu" not in str(after)
    counter = _CallCounter()
    counter.visit(after)
    assert counter.ops.count("clip") == 2


def test_a_chain_deeper_than_pythons_stack_is_walked():
    x = _x()
    y = x
    for _ in range(5000):
        y = relay.nn.relu(y + relay.const(1.0))
    after = _ReluToClip().visit(relay.Function([x], y))
    counter = _CallCounter()
    counter.visit(after)
    assert counter.ops.count("clip") == 5000 and counter.ops.count("add") == 5000


def test_results_are_remembered_in_memo_map():
    x = _x()
    call = relay.negative(x)
    mutator = _ReluToClip()
    mutator.visit(call)
    assert mutator.memo_map[call] is call and mutator.memo_map[x] is x


# --- traps ---------------------------------------------------------------------------------------


def test_a_functor_without_the_method_a_node_needs_says_which():
    class OnlyCalls(relay.ExprFunctor):
        def visit_call(self, call):
            return call.op.name

    with pytest.raises(NotImplementedError, match="OnlyCalls does not define visit_op"):
        OnlyCalls().visit(relay.negative(_x()))
