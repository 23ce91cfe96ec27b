"""ToGraphNormalForm (let bindings become shared nodes, scopes and recursion kept) and the
TVM spellings of the form-changing passes, ToANormalForm and LambdaLift, as pass objects
(returns)."""

from __future__ import annotations

import numpy as np

from compiler import relay
from compiler.ir.expr import Let
from compiler.ir.visitor import post_order
from tests.compiler.transform.util import assert_results_match, assert_same, parse, run

to_gnf = relay.transform.ToGraphNormalForm()
to_anf = relay.transform.ToANormalForm()

GRAPH = """
def @main(%x: Tensor[(2), float32]) {
  %0 = add(%x, %x);
  %1 = multiply(%0, %0);
  (%1, %0)
}"""


def _lets(mod: relay.IRModule) -> list[Let]:
    return [n for n in post_order(mod["main"]) if isinstance(n, Let)]


def test_a_let_chain_becomes_the_graph_it_names():
    before = parse(
        """
        def @main(%x: Tensor[(2), float32]) {
          let %a = add(%x, %x);
          let %b = multiply(%a, %a);
          (%b, %a)
        }"""
    )
    after = to_gnf(before)
    assert not _lets(after)
    assert_same(after, GRAPH)
    assert_results_match(before, after, [np.array([1.0, -2.0], "float32")])


def test_a_normal_form_and_back_is_the_program_it_started_from():
    graph = parse(GRAPH)
    anf = to_anf(graph)
    assert len(_lets(anf)) >= 3
    assert_same(to_gnf(anf), GRAPH)


def test_an_unused_binding_goes_and_a_branch_keeps_its_own_bindings():
    before = parse(
        """
        def @main(%c: bool, %x: Tensor[(2), float32]) {
          let %unused = exp(%x);
          if (%c) {
            let %y = negative(%x);
            add(%y, %y)
          } else {
            %x
          }
        }"""
    )
    after = to_gnf(before)
    assert_same(
        after,
        """
        def @main(%c: bool, %x: Tensor[(2), float32]) {
          if (%c) {
            %0 = negative(%x);
            add(%0, %0)
          } else {
            %x
          }
        }""",
    )
    data = np.array([1.0, 2.0], "float32")
    for flag in (True, False):
        assert_results_match(before, after, [np.array(flag), data])


def test_a_recursive_local_function_keeps_the_let_it_calls_itself_through():
    before = parse(
        """
        def @main(%n: int32) {
          let %twice = multiply(%n, 2);
          let %count = fn (%i: int32) -> int32 {
            if (equal(%i, 0)) { 0 } else { add(%count(subtract(%i, 1)), 1) }
          };
          %count(%twice)
        }"""
    )
    after = to_gnf(before)
    assert [let.var.name_hint for let in _lets(after)] == ["count"]
    assert int(run(after, np.array(5, "int32"))) == 10


def test_lambda_lift_as_a_pass_types_the_module_and_lifts_a_closure():
    before = parse(
        """
        def @main(%x: Tensor[(2), float32]) {
          %0 = add(%x, %x);
          %1 = fn (%y: Tensor[(2), float32]) { multiply(%y, %0) };
          (%1(%0), %1(%x))
        }"""
    )
    after = relay.transform.LambdaLift()(before)
    assert sorted(g.name_hint for g in after.get_global_vars()) == ["main", "main_lifted_0"]
    assert_results_match(before, after, [np.array([1.0, 3.0], "float32")])


def test_the_form_passes_run_by_name_and_by_level_in_a_sequential():
    seq = relay.transform.Sequential(
        [relay.transform.get_pass("ToANormalForm"), relay.transform.get_pass("ToGraphNormalForm")]
    )
    with relay.transform.PassContext(opt_level=1):
        assert_same(seq(parse(GRAPH)), GRAPH)
    with relay.transform.PassContext(opt_level=1, disabled_pass=["ToGraphNormalForm"]):
        assert _lets(seq(parse(GRAPH)))
