"""A-normal form: every non-atomic sub-expression let-bound, scopes respected, input untouched."""

from __future__ import annotations

from compiler import relay
from compiler.ir.expr import Call, Function, GlobalVar, If, Let, Tuple, Var
from compiler.ir.module import IRModule
from compiler.ir.visitor import let_chain
from compiler.transform.to_anf import is_atom, to_anf, to_anf_expr
from tests.compiler.transform.util import assert_same, parse

IDENTITY = "def @f(%x: float32) -> float32 { %x }\n"


def test_nested_calls_become_a_let_chain_in_evaluation_order() -> None:
    mod = parse(IDENTITY + "def @main(%x: float32) -> float32 { @f(@f(%x)) }")
    expected = (
        IDENTITY
        + """
    def @main(%x: float32) -> float32 {
      let %a = @f(%x);
      let %b = @f(%a);
      %b
    }"""
    )
    assert_same(to_anf(mod), expected)


def test_atoms_are_not_bound_and_a_constant_argument_stays_in_place() -> None:
    mod = parse(IDENTITY + "def @main(%x: float32) -> float32 { let %y = %x; @f(1f) }")
    expected = (
        IDENTITY
        + """
    def @main(%x: float32) -> float32 {
      let %y = %x;
      let %a = @f(1f);
      %a
    }"""
    )
    assert_same(to_anf(mod), expected)


def test_if_branches_keep_their_bindings_inside() -> None:
    mod = parse(
        IDENTITY
        + "def @main(%c: bool, %x: float32) -> float32 { if (%c) { @f(@f(%x)) } else { %x } }"
    )
    expected = (
        IDENTITY
        + """
    def @main(%c: bool, %x: float32) -> float32 {
      let %r = if (%c) {
        let %a = @f(%x);
        let %b = @f(%a);
        %b
      } else {
        %x
      };
      %r
    }"""
    )
    assert_same(to_anf(mod), expected)


def test_if_condition_is_bound_before_the_if() -> None:
    mod = parse(
        IDENTITY + "def @main(%x: float32) -> float32 { if (@f(%x) < %x) { %x } else { 0f } }"
    )
    expected = (
        IDENTITY
        + """
    def @main(%x: float32) -> float32 {
      let %a = @f(%x);
      let %c = less(%a, %x);
      let %r = if (%c) { %x } else { 0f };
      %r
    }"""
    )
    assert_same(to_anf(mod), expected)


def test_match_clause_bodies_are_separate_scopes() -> None:
    mod = parse("""
    type Opt { Some(float32), Empty }
    def @f(%x: float32) -> float32 { %x }
    def @main(%o: Opt) -> float32 {
      match (%o) {
        Some(%v) => @f(@f(%v)),
        Empty => 0f,
      }
    }""")
    expected = """
    type Opt { Some(float32), Empty }
    def @f(%x: float32) -> float32 { %x }
    def @main(%o: Opt) -> float32 {
      let %r = match (%o) {
        Some(%v) => {
          let %a = @f(%v);
          let %b = @f(%a);
          %b
        },
        Empty => 0f,
      };
      %r
    }"""
    assert_same(to_anf(mod), expected)


def test_tuples_and_projections_are_bound() -> None:
    mod = parse("def @main(%x: float32, %y: float32) -> float32 { (%x, (%y, %x)).1.0 }")
    expected = """
    def @main(%x: float32, %y: float32) -> float32 {
      let %inner = (%y, %x);
      let %t = (%x, %inner);
      let %a = %t.1;
      let %b = %a.0;
      %b
    }"""
    assert_same(to_anf(mod), expected)


def test_local_function_arguments_are_bound_and_their_bodies_normalized() -> None:
    mod = parse(
        IDENTITY
        + """
    def @apply(%g: fn (float32) -> float32, %x: float32) -> float32 { %g(%x) }
    def @main(%x: float32) -> float32 {
      @apply(fn (%y: float32) -> float32 { @f(@f(%y)) }, %x)
    }"""
    )
    expected = (
        IDENTITY
        + """
    def @apply(%g: fn (float32) -> float32, %x: float32) -> float32 {
      let %r = %g(%x);
      %r
    }
    def @main(%x: float32) -> float32 {
      let %h = fn (%y: float32) -> float32 {
        let %a = @f(%y);
        let %b = @f(%a);
        %b
      };
      let %r = @apply(%h, %x);
      %r
    }"""
    )
    assert_same(to_anf(mod), expected)


def test_let_bound_recursive_function_keeps_its_own_variable() -> None:
    mod = parse("""
    def @main(%n: int32) -> int32 {
      let %loop = fn (%i: int32) -> int32 {
        if (%i == 0) { %i } else { %loop(%i - 1) }
      };
      %loop(%n)
    }""")
    out = to_anf(mod)
    main = out["main"]
    bindings, tail = let_chain(main.body)
    loop = bindings[0]
    assert loop.var.name_hint == "loop" and isinstance(loop.value, Function)
    # The recursive call inside still refers to the let's own variable.
    inner, _ = let_chain(loop.value.body)
    branch = inner[-1].value
    assert isinstance(branch, If)
    else_bindings, _ = let_chain(branch.false_branch)
    assert any(isinstance(b.value, Call) and b.value.op is loop.var for b in else_bindings), (
        "the recursive call must name the let-bound variable"
    )
    assert isinstance(tail, Var)


def test_shared_subexpression_is_bound_once_and_its_variable_reused() -> None:
    f = GlobalVar("f")
    x = relay.var("x", shape=(), dtype="float32")
    shared = Call(f, [x])
    func = Function([x], Tuple([shared, shared]))
    out = to_anf_expr(func)
    bindings, tail = let_chain(out.body)
    assert len(bindings) == 2
    call, tup = bindings
    assert isinstance(call.value, Call)
    assert isinstance(tup.value, Tuple) and tup.value.fields == (call.var, call.var)
    assert tail is tup.var


def test_shared_subexpression_used_in_both_branches_is_bound_in_each() -> None:
    f = GlobalVar("f")
    x = relay.var("x", shape=(), dtype="float32")
    c = relay.var("c", shape=(), dtype="bool")
    shared = Call(f, [x])
    out = to_anf_expr(Function([c, x], If(c, shared, shared)))
    (binding,), _ = let_chain(out.body)
    branch = binding.value
    assert isinstance(branch, If)
    for side in (branch.true_branch, branch.false_branch):
        inner, tail = let_chain(side)
        assert len(inner) == 1 and isinstance(inner[0].value, Call) and tail is inner[0].var


def test_primitive_function_callee_stays_in_place_untouched() -> None:
    mod = parse("""
    def @main(%x: float32) -> float32 {
      %0 = fn (%p: float32, Primitive=1) -> float32 { exp(negative(%p)) };
      %0(%0(%x))
    }""")
    expected = """
    def @main(%x: float32) -> float32 {
      %0 = fn (%p: float32, Primitive=1) -> float32 { exp(negative(%p)) };
      let %a = %0(%x);
      let %b = %0(%a);
      %b
    }"""
    assert_same(to_anf(mod), expected)


def test_every_call_argument_is_an_atom_after_conversion() -> None:
    mod = parse(
        IDENTITY
        + """
    def @main(%x: float32, %c: bool) -> (float32, float32) {
      let %t = (@f(%x), if (%c) { @f(%x) } else { 1f });
      (%t.0, @f(%t.1))
    }"""
    )
    out = to_anf(mod)
    for node in _all_nodes(out["main"]):
        if isinstance(node, Call):
            assert all(is_atom(a) for a in node.args)
        if isinstance(node, Tuple):
            assert all(is_atom(a) for a in node.fields)


def test_the_input_module_is_not_modified() -> None:
    mod = parse(
        IDENTITY + "def @main(%c: bool, %x: float32) -> float32 { if (%c) { @f(%x) } else { %x } }"
    )
    before = mod.astext()
    main = mod["main"]
    to_anf(mod)
    assert mod.astext() == before
    assert mod["main"] is main


def test_a_10000_deep_let_chain_and_call_nest_convert_without_recursion() -> None:
    depth = 10_000
    x = relay.var("x", shape=(), dtype="float32")
    body = x
    for _ in range(depth):
        body = relay.negative(body)
    nest = to_anf_expr(Function([x], body))
    bindings, _ = let_chain(nest.body)
    assert len(bindings) == depth

    f = GlobalVar("f")
    chain: relay.Expr = x
    vars_ = [relay.var(f"v{i}") for i in range(depth)]
    chain = vars_[-1]
    for i in reversed(range(depth)):
        chain = Let(vars_[i], Call(f, [x if i == 0 else vars_[i - 1]]), chain)
    out = to_anf_expr(Function([x], chain))
    bindings, tail = let_chain(out.body)
    assert len(bindings) == depth and tail is vars_[-1]


def _all_nodes(func: Function) -> list:
    from compiler.ir.visitor import post_order

    return list(post_order(func))


def test_module_level_function_order_and_globals_are_preserved() -> None:
    mod = parse(IDENTITY + "def @main(%x: float32) -> float32 { @f(%x) }")
    out = to_anf(mod)
    assert isinstance(out, IRModule)
    assert [g.name_hint for g in out.get_global_vars()] == ["f", "main"]


def test_let_shared_by_two_parents_binds_its_variable_once() -> None:
    f = GlobalVar("f")
    x = relay.var("x", shape=(), dtype="float32")
    v = relay.var("v")
    shared = Let(v, Call(f, [x]), v)
    out = to_anf_expr(Function([x], Tuple([shared, shared])))
    bindings, tail = let_chain(out.body)
    assert len(bindings) == 2 and bindings[0].var is v
    assert bindings[1].value.fields == (v, v) and tail is bindings[1].var
