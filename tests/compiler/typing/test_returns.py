"""Well-typed programs and the types inference gives them (the "returns" group)."""

from __future__ import annotations

import numpy as np

from compiler import relay
from compiler.ir.visitor import post_order
from compiler.typing import infer_expr, infer_types
from tests.compiler.typing._programs import Adts, T, text


def main_type(func: relay.Function, mod: relay.IRModule | None = None) -> str:
    mod = relay.IRModule() if mod is None else mod
    mod["main"] = func
    return text(infer_types(mod)["main"].checked_type)


# --- tensors and operators ---------------------------------------------------------------------


def test_operator_call_on_static_tensors():
    x, y = relay.var("x", shape=(2, 3)), relay.var("y", shape=(2, 3))
    assert main_type(relay.Function([x, y], relay.add(x, y))) == (
        "fn (Tensor[(2, 3), float32], Tensor[(2, 3), float32]) -> Tensor[(2, 3), float32]"
    )


def test_broadcasting_and_comparison_dtypes():
    x, y = relay.var("x", shape=(2, 1)), relay.var("y", shape=(1, 3))
    body = relay.Tuple([x * y, relay.less(x, y), relay.cast(x, "int32"), relay.sum(y)])
    assert main_type(relay.Function([x, y], body)).endswith(
        "-> (Tensor[(2, 3), float32], Tensor[(2, 3), bool], Tensor[(2, 1), int32], "
        "Tensor[(), float32])"
    )


def test_constants_get_their_data_type():
    c = relay.const(np.zeros((4,), dtype="int64"))
    assert text(infer_expr(relay.Tuple([c, relay.const(1.5), relay.const(True)]))) == (
        "(Tensor[(4,), int64], Tensor[(), float32], Tensor[(), bool])"
    )


def test_dynamic_parameter_accepts_static_argument_and_result_comes_from_callee():
    p = relay.var("p", shape=(relay.Any(), 10))
    f = relay.Function([p], relay.exp(p))
    x = relay.var("x", shape=(5, 10))
    assert main_type(relay.Function([x], relay.Call(f, [x]))) == (
        "fn (Tensor[(5, 10), float32]) -> Tensor[(?, 10), float32]"
    )


def test_dynamic_dimension_broadcast_through_operator():
    x, y = relay.var("x", shape=(None, 10)), relay.var("y", shape=(5, 10))
    assert main_type(relay.Function([x, y], x + y)).endswith("-> Tensor[(5, 10), float32]")


def test_if_branches_join_toward_dynamic_dimension():
    c = relay.var("c", shape=(), dtype="bool")
    a, b = relay.var("a", shape=(5, 3)), relay.var("b", shape=(None, 3))
    assert main_type(relay.Function([c, a, b], relay.If(c, a, b))).endswith(
        "-> Tensor[(?, 3), float32]"
    )


def test_unannotated_variable_used_at_two_shapes_becomes_dynamic():
    x, y = relay.var("x", shape=(5,)), relay.var("y", shape=(None,))
    a = relay.var("a")
    f = relay.var("f")
    r1, s, r2 = relay.var("r1"), relay.var("s"), relay.var("s2")
    body = relay.Let(
        f,
        relay.Function([a], a),
        relay.Let(
            r1,
            relay.Call(f, [x]),
            relay.Let(s, r1 + r1, relay.Let(r2, relay.Call(f, [y]), relay.Tuple([s, r2]))),
        ),
    )
    mod = relay.IRModule.from_expr(relay.Function([x, y], body))
    typed = infer_types(mod)["main"]
    # The operator was typed while %a looked like (5,); it is re-checked once %a is (?,).
    assert text(typed.checked_type).endswith("-> (Tensor[(?,), float32], Tensor[(?,), float32])")
    closure = typed.body.value
    assert text(closure.params[0].type_annotation) == "Tensor[(?,), float32]"


# --- tuples, let, if ---------------------------------------------------------------------------


def test_tuple_and_projection():
    x = relay.var("x", shape=(3,))
    t = relay.var("t")
    body = relay.Let(t, relay.Tuple([x, relay.const(1)]), relay.Tuple([t[1], t[0]]))
    assert main_type(relay.Function([x], body)).endswith(
        "-> (Tensor[(), int32], Tensor[(3,), float32])"
    )


def test_projection_of_unannotated_parameter_is_solved_after_the_call():
    t = relay.var("t")
    f = relay.var("f")
    x = relay.var("x", shape=(2,), dtype="int8")
    body = relay.Let(
        f,
        relay.Function([t], relay.negative(t[1])),
        relay.Call(f, [relay.Tuple([relay.const(1.0), x])]),
    )
    assert main_type(relay.Function([x], body)).endswith("-> Tensor[(2,), int8]")


def test_let_with_annotation_and_nested_if():
    x = relay.var("x", shape=(), dtype="int32")
    v = relay.var("v", shape=(), dtype="int32")
    body = relay.Let(
        v,
        relay.If(relay.less(x, relay.const(0)), relay.negative(x), x),
        relay.If(relay.equal(v, relay.const(3)), relay.const(1), v),
    )
    assert main_type(relay.Function([x], body)) == "fn (Tensor[(), int32]) -> Tensor[(), int32]"


def test_empty_tuple_and_nested_tuples():
    e = relay.Tuple([])
    body = relay.Tuple([e, relay.Tuple([relay.const(1), e])])
    assert text(infer_expr(body)) == "((), (Tensor[(), int32], ()))"


# --- functions and closures --------------------------------------------------------------------


def test_unannotated_closure_parameter_is_inferred_from_its_call():
    x = relay.var("x", shape=(4,))
    a, f = relay.var("a"), relay.var("f")
    body = relay.Let(f, relay.Function([a], a * a), relay.Call(f, [x]))
    typed = infer_types(relay.IRModule.from_expr(relay.Function([x], body)))["main"]
    assert text(typed.checked_type) == "fn (Tensor[(4,), float32]) -> Tensor[(4,), float32]"
    closure = typed.body.value
    assert text(closure.params[0].type_annotation) == "Tensor[(4,), float32]"
    assert text(closure.ret_type) == "Tensor[(4,), float32]"


def test_closure_capturing_a_variable_and_returned_from_a_global():
    gv = relay.GlobalVar("adder")
    n = relay.var("n", shape=(), dtype="int32")
    a = relay.var("a")
    mod = relay.IRModule()
    mod[gv] = relay.Function([n], relay.Function([a], a + n))
    x = relay.var("x", shape=(), dtype="int32")
    mod["main"] = relay.Function([x], relay.Call(relay.Call(gv, [x]), [x]))
    typed = infer_types(mod)
    assert text(typed[gv].checked_type) == (
        "fn (Tensor[(), int32]) -> fn (Tensor[(), int32]) -> Tensor[(), int32]"
    )
    assert text(typed["main"].checked_type) == "fn (Tensor[(), int32]) -> Tensor[(), int32]"


def test_higher_order_parameter_called_inside_the_body():
    f = relay.var("f")
    x = relay.var("x", shape=(2,))
    apply = relay.Function([f, x], relay.Call(f, [x]))
    g = relay.var("g")
    y = relay.var("y", shape=(2,))
    body = relay.Call(apply, [relay.Function([g], relay.greater(g, y)), y])
    assert main_type(relay.Function([y], body)).endswith("-> Tensor[(2,), bool]")


def test_function_with_no_parameters_and_annotated_return():
    f = relay.Function([], relay.const(2.0), T((), "float32"))
    assert text(infer_expr(relay.Call(f, []))) == "Tensor[(), float32]"


# --- recursion ---------------------------------------------------------------------------------


def _countdown(mod: relay.IRModule, name: str, other: str) -> relay.Function:
    n = relay.var("n", shape=(), dtype="int32")
    rec = relay.Call(mod.get_global_var(other), [relay.subtract(n, relay.const(1))])
    return relay.Function([n], relay.If(relay.equal(n, relay.const(0)), relay.const(0), rec))


def test_recursive_global_with_unannotated_return_type():
    mod = relay.IRModule()
    gv = relay.GlobalVar("count")
    mod[gv] = relay.Function([], relay.const(0))  # placeholder so the name exists
    mod[gv] = _countdown(mod, "count", "count")
    typed = infer_types(mod)
    assert text(typed["count"].checked_type) == "fn (Tensor[(), int32]) -> Tensor[(), int32]"
    assert text(typed["count"].ret_type) == "Tensor[(), int32]"


def test_mutually_recursive_globals_with_unannotated_return_types():
    mod = relay.IRModule()
    even, odd = relay.GlobalVar("even"), relay.GlobalVar("odd")
    mod[even] = relay.Function([], relay.const(0))
    mod[odd] = relay.Function([], relay.const(0))
    for gv, other in ((even, odd), (odd, even)):
        n = relay.var("n", shape=(), dtype="int32")
        rec = relay.Call(other, [relay.subtract(n, relay.const(1))])
        base = relay.const(gv is even)
        mod[gv] = relay.Function([n], relay.If(relay.equal(n, relay.const(0)), base, rec))
    x = relay.var("x", shape=(), dtype="int32")
    mod["main"] = relay.Function([x], relay.Call(even, [x]))
    typed = infer_types(mod)
    for name in ("even", "odd", "main"):
        assert text(typed[name].checked_type) == "fn (Tensor[(), int32]) -> Tensor[(), bool]"


def test_global_whose_parameter_type_comes_from_its_caller():
    mod = relay.IRModule()
    helper = relay.GlobalVar("double")
    a = relay.var("a")
    mod[helper] = relay.Function([a], a + a)
    x = relay.var("x", shape=(3,), dtype="int64")
    mod["main"] = relay.Function([x], relay.Call(helper, [x]))
    typed = infer_types(mod)
    assert text(typed["double"].checked_type) == "fn (Tensor[(3,), int64]) -> Tensor[(3,), int64]"
    assert text(typed["double"].params[0].type_annotation) == "Tensor[(3,), int64]"
    assert text(typed["double"].ret_type) == "Tensor[(3,), int64]"


def test_recursive_let_bound_function():
    i = relay.var("i", shape=(), dtype="int32")
    loop = relay.var("loop")
    step = relay.Call(loop, [relay.add(i, relay.const(1))])
    func = relay.Function([i], relay.If(relay.less(i, relay.const(10)), step, i))
    x = relay.var("x", shape=(), dtype="int32")
    body = relay.Let(loop, func, relay.Call(loop, [x]))
    assert main_type(relay.Function([x], body)) == "fn (Tensor[(), int32]) -> Tensor[(), int32]"


# --- polymorphism and ADTs ---------------------------------------------------------------------


def test_constructor_calls_fill_type_args():
    adts = Adts()
    x = relay.var("x", shape=(2,))
    lst = adts.literal_list([x, x])
    adts.mod["main"] = relay.Function([x], lst)
    typed = infer_types(adts.mod)
    assert text(typed["main"].checked_type) == (
        "fn (Tensor[(2,), float32]) -> List[Tensor[(2,), float32]]"
    )
    outer = typed["main"].body
    assert [text(t) for t in outer.type_args] == ["Tensor[(2,), float32]"]
    assert text(outer.op.checked_type) == "fn [A](A, List[A]) -> List[A]"


def test_polymorphic_map_instantiated_at_every_use():
    adts = Adts()
    map_gv = adts.add_map()
    xs = relay.var("xs", adts.list_of(T((3,))))
    e = relay.var("e")
    to_bool = relay.Function([e], relay.greater(e, relay.const(0.0)))
    b = relay.var("b")
    to_int = relay.Function([b], relay.cast(b, "int32"))
    first = relay.Call(map_gv, [to_bool, xs])
    second = relay.Call(map_gv, [to_int, first])
    adts.mod["main"] = relay.Function([xs], second)
    typed = infer_types(adts.mod)
    assert text(typed["main"].checked_type) == (
        "fn (List[Tensor[(3,), float32]]) -> List[Tensor[(3,), int32]]"
    )
    outer = typed["main"].body
    inner = outer.args[1]
    assert [text(t) for t in inner.type_args] == ["Tensor[(3,), float32]", "Tensor[(3,), bool]"]
    assert [text(t) for t in outer.type_args] == ["Tensor[(3,), bool]", "Tensor[(3,), int32]"]
    assert text(typed["map"].checked_type) == "fn [A, B](fn (A) -> B, List[A]) -> List[B]"


def test_polymorphic_foldl_sums_a_list():
    adts = Adts()
    foldl = adts.add_foldl()
    xs = relay.var("xs", adts.list_of(T((), "int32")))
    acc, v = relay.var("acc"), relay.var("v")
    plus = relay.Function([acc, v], acc + v)
    adts.mod["main"] = relay.Function([xs], relay.Call(foldl, [plus, relay.const(0), xs]))
    typed = infer_types(adts.mod)
    assert text(typed["main"].checked_type) == "fn (List[Tensor[(), int32]]) -> Tensor[(), int32]"
    assert text(typed["main"].body.args[0].params[0].type_annotation) == "Tensor[(), int32]"


def test_polymorphic_global_with_inferred_return_type_used_at_two_types():
    adts = Adts()
    length = adts.add_length()
    xs = relay.var("xs", adts.list_of(T((2,))))
    ys = relay.var("ys", adts.list_of(adts.list_of(T((), "bool"))))
    body = relay.add(relay.Call(length, [xs]), relay.Call(length, [ys]))
    adts.mod["main"] = relay.Function([xs, ys], body)
    typed = infer_types(adts.mod)
    assert text(typed["length"].checked_type) == "fn [A](List[A]) -> Tensor[(), int32]"
    assert text(typed["main"].checked_type).endswith("-> Tensor[(), int32]")


def test_polymorphic_global_passed_as_a_function_value():
    adts = Adts()
    map_gv, id_gv = adts.add_map(), adts.add_id()
    xs = relay.var("xs", adts.list_of(T((), "uint8")))
    adts.mod["main"] = relay.Function([xs], relay.Call(map_gv, [id_gv, xs]))
    typed = infer_types(adts.mod)
    assert text(typed["main"].checked_type) == (
        "fn (List[Tensor[(), uint8]]) -> List[Tensor[(), uint8]]"
    )
    # The global keeps its polymorphic type; the use is an instance of it.
    assert text(typed["main"].body.args[0].checked_type) == "fn [T](T) -> T"


def test_let_bound_polymorphic_function_used_at_two_types():
    t = relay.TypeVar("T")
    v = relay.var("v", t)
    ident = relay.var("ident")
    body = relay.Let(
        ident,
        relay.Function([v], v, t, [t]),
        relay.Tuple([relay.Call(ident, [relay.const(1)]), relay.Call(ident, [relay.const(1.0)])]),
    )
    assert text(infer_expr(body)) == "(Tensor[(), int32], Tensor[(), float32])"


def test_match_binds_fields_with_type_arguments_substituted():
    adts = Adts()
    xs = relay.var("xs", adts.list_of(relay.TupleType([T((), "int32"), T((4,))])))
    h, t, a, b = relay.var("h"), relay.var("t"), relay.var("a"), relay.var("b")
    match = relay.Match(
        xs,
        [
            relay.Clause(
                relay.PatternConstructor(
                    adts.Cons,
                    [
                        relay.PatternTuple([relay.PatternVar(a), relay.PatternVar(b)]),
                        relay.PatternVar(t),
                    ],
                ),
                relay.Call(adts.Some, [b]),
            ),
            relay.Clause(relay.PatternWildcard(), relay.Call(adts.NoneC, [])),
        ],
    )
    adts.mod["main"] = relay.Function([xs], match)
    typed = infer_types(adts.mod)
    assert text(typed["main"].checked_type).endswith("-> Option[Tensor[(4,), float32]]")
    clause = typed["main"].body.clauses[0]
    tuple_pat, tail_pat = clause.lhs.patterns
    assert text(tuple_pat.patterns[0].var.checked_type) == "Tensor[(), int32]"
    assert text(tail_pat.var.checked_type) == "List[(Tensor[(), int32], Tensor[(4,), float32])]"
    del h


def test_match_on_a_tuple_of_an_unannotated_parameter():
    p, u, w = relay.var("p"), relay.var("u"), relay.var("w")
    f = relay.var("f")
    swap = relay.Function(
        [p],
        relay.Match(
            p,
            [
                relay.Clause(
                    relay.PatternTuple([relay.PatternVar(u), relay.PatternVar(w)]),
                    relay.Tuple([w, u]),
                )
            ],
        ),
    )
    body = relay.Let(f, swap, relay.Call(f, [relay.Tuple([relay.const(1), relay.const(2.0)])]))
    assert text(infer_expr(body)) == "(Tensor[(), float32], Tensor[(), int32])"


def test_nullary_adt_spelled_bare_or_applied_to_nothing():
    mod = relay.IRModule()
    nat = relay.GlobalTypeVar("nat")
    z = relay.Constructor("z", [], nat)
    s = relay.Constructor("s", [nat], nat)
    mod.add_type_def(nat, relay.TypeData(nat, [], [z, s]))
    n = relay.var("n", relay.TypeCall(nat, []))
    mod["main"] = relay.Function([n], relay.Call(s, [n]), nat)
    assert text(infer_types(mod)["main"].checked_type) == "fn (nat) -> nat"


# --- whole-module properties --------------------------------------------------------------------


def test_input_module_is_not_modified_and_every_node_is_typed():
    x = relay.var("x", shape=(2,))
    a, f = relay.var("a"), relay.var("f")
    body = relay.Let(f, relay.Function([a], relay.Tuple([a, a])), relay.Call(f, [x])[0])
    func = relay.Function([x], body)
    mod = relay.IRModule.from_expr(func)
    typed = infer_types(mod)
    assert typed is not mod and typed["main"] is not func
    assert func._checked_type is None and a.type_annotation is None and func.ret_type is None
    for node in post_order(typed["main"]):
        if isinstance(node, relay.Expr) and not isinstance(node, relay.Op):
            assert node._checked_type is not None, node
    assert mod["main"] is func


def test_inferred_module_type_checks_again_to_the_same_types():
    adts = Adts()
    map_gv = adts.add_map()
    xs = relay.var("xs", adts.list_of(T((3,))))
    e = relay.var("e")
    adts.mod["main"] = relay.Function([xs], relay.Call(map_gv, [relay.Function([e], -e), xs]))
    once = infer_types(adts.mod)
    twice = infer_types(once)
    assert text(twice["main"].checked_type) == text(once["main"].checked_type)


def test_infer_expr_uses_a_typed_module_for_globals():
    adts = Adts()
    map_gv, id_gv = adts.add_map(), adts.add_id()
    typed = infer_types(adts.mod)
    expr = relay.Call(map_gv, [id_gv, adts.literal_list([relay.const(1)])])
    assert text(infer_expr(expr, typed)) == "List[Tensor[(), int32]]"
    assert text(infer_expr(expr, adts.mod)) == "List[Tensor[(), int32]]"


def test_infer_type_pass_object():
    x = relay.var("x", shape=(1,))
    mod = relay.IRModule.from_expr(relay.Function([x], relay.exp(x)))
    pass_ = relay.transform.InferType()
    assert pass_.name == "InferType"
    assert text(pass_(mod)["main"].body.checked_type) == "Tensor[(1,), float32]"


def test_deep_let_chain_type_checks_without_recursion():
    x = relay.var("x", shape=(), dtype="int32")
    names = [relay.var(f"v{i}") for i in range(10_000)]
    body: relay.Expr = names[-1]
    for i in reversed(range(10_000)):
        prev = names[i - 1] if i else x
        body = relay.Let(names[i], relay.add(prev, relay.const(1)), body)
    typed = infer_types(relay.IRModule.from_expr(relay.Function([x], body)))
    assert text(typed["main"].checked_type) == "fn (Tensor[(), int32]) -> Tensor[(), int32]"


def test_deep_call_nest_with_unknown_input_is_solved_by_the_worklist():
    a = relay.var("a")
    e: relay.Expr = a
    for _ in range(3_000):
        e = relay.negative(e)
    f = relay.var("f")
    body = relay.Let(f, relay.Function([a], e), relay.Call(f, [relay.const(1.0)]))
    assert text(infer_expr(body)) == "Tensor[(), float32]"


def test_infer_expr_annotates_the_expression_in_place():
    x = relay.var("x", shape=(3,))
    e = relay.Tuple([x, relay.exp(x)])
    ty = infer_expr(e)
    assert e.checked_type is ty
    assert text(e.fields[1].checked_type) == "Tensor[(3,), float32]"
    assert x.checked_type == x.type_annotation


def test_explicit_type_arguments_on_a_call_are_respected():
    adts = Adts()
    id_gv = adts.add_id()
    call = relay.Call(id_gv, [relay.const(1)], type_args=[T((), "int32")])
    assert text(infer_expr(call, adts.mod)) == "Tensor[(), int32]"
    assert [text(t) for t in call.type_args] == ["Tensor[(), int32]"]
