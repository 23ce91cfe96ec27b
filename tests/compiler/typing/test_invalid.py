"""Ill-typed programs: each is rejected with a RelayTypeError naming the problem."""

from __future__ import annotations

import pytest

from compiler import relay
from compiler.typing import RelayTypeError, infer_expr, infer_types
from tests.compiler.typing._programs import Adts, T


def rejects(func: relay.Function, mod: relay.IRModule | None = None) -> str:
    """Type-check ``func`` as ``@main`` and return the error message."""
    mod = relay.IRModule() if mod is None else mod
    mod["main"] = func
    with pytest.raises(RelayTypeError) as info:
        infer_types(mod)
    return str(info.value)


def test_error_class_is_a_type_error_exported_by_relay():
    assert relay.RelayTypeError is RelayTypeError
    assert issubclass(RelayTypeError, TypeError)


# --- operators -----------------------------------------------------------------------------------


def test_operator_with_mismatched_dtypes():
    x, y = relay.var("x", shape=(2, 3)), relay.var("y", shape=(2, 3), dtype="int32")
    msg = rejects(relay.Function([x, y], relay.add(x, y)))
    assert "in `add(%x, %y)`" in msg
    assert "float32" in msg and "int32" in msg and "dtype" in msg


def test_operator_broadcast_mismatch():
    x, y = relay.var("x", shape=(2, 3)), relay.var("y", shape=(4, 3))
    msg = rejects(relay.Function([x, y], relay.multiply(x, y)))
    assert "cannot broadcast" in msg
    assert "Tensor[(2, 3), float32]" in msg and "Tensor[(4, 3), float32]" in msg


def test_operator_with_wrong_number_of_arguments():
    x = relay.var("x", shape=(2,))
    call = relay.Call(relay.op.get_op("add"), [x])
    msg = rejects(relay.Function([x], call))
    assert "wrong number of arguments" in msg and "expects 2 arguments, found 1" in msg


def test_operator_with_unknown_attribute():
    x = relay.var("x", shape=(2,))
    call = relay.Call(relay.op.get_op("sum"), [x], {"axes": 0})
    msg = rejects(relay.Function([x], call))
    assert "invalid attributes" in msg and "axes" in msg


def test_operator_used_as_a_value():
    msg = rejects(relay.Function([], relay.Tuple([relay.op.get_op("exp")])))
    assert "operator exp is used as a value" in msg


def test_operator_on_a_tuple():
    x = relay.var("x", shape=(2,))
    msg = rejects(relay.Function([x], relay.exp(relay.Tuple([x, x]))))
    assert "must be a tensor" in msg and "(Tensor[(2,), float32], Tensor[(2,), float32])" in msg


# --- if ------------------------------------------------------------------------------------------


def test_if_condition_that_is_not_a_bool_scalar():
    c = relay.var("c", shape=(), dtype="int32")
    x = relay.var("x", shape=(3,))
    msg = rejects(relay.Function([c, x], relay.If(c, x, x)))
    assert "the condition of `if (%c)" in msg
    assert "expected Tensor[(), bool] (a bool scalar), found Tensor[(), int32]" in msg


def test_if_condition_that_is_a_bool_vector():
    c = relay.var("c", shape=(2,), dtype="bool")
    msg = rejects(relay.Function([c], relay.If(c, relay.const(1), relay.const(2))))
    assert "found Tensor[(2,), bool]" in msg and "rank 0 vs rank 1" in msg


def test_if_branches_of_different_types():
    c = relay.var("c", shape=(), dtype="bool")
    x, y = relay.var("x", shape=(3,)), relay.var("y", shape=(4,))
    msg = rejects(relay.Function([c, x, y], relay.If(c, x, y)))
    assert "the false branch of `if (%c)" in msg
    assert "expected Tensor[(3,), float32] (the type of the true branch)" in msg
    assert "found Tensor[(4,), float32]" in msg and "dimension 0 is 3 vs 4" in msg


# --- calls ---------------------------------------------------------------------------------------


def test_calling_a_global_with_the_wrong_number_of_arguments():
    mod = relay.IRModule()
    a = relay.var("a", shape=())
    mod["double"] = relay.Function([a], a + a)
    msg = rejects(
        relay.Function([], relay.Call(mod.get_global_var("double"), [relay.const(1.0)] * 2)),
        mod,
    )
    assert "wrong number of arguments" in msg and "`@double(" in msg
    assert "expected 1 argument, found 2" in msg


def test_calling_a_closure_with_a_wrong_argument_type():
    a = relay.var("a", shape=(2,))
    f = relay.var("f")
    body = relay.Let(f, relay.Function([a], a), relay.Call(f, [relay.const(1)]))
    msg = rejects(relay.Function([], body))
    assert "argument 0 of `%f(1)`" in msg
    assert "expected Tensor[(2,), float32], found Tensor[(), int32]" in msg


def test_calling_a_non_function():
    x = relay.var("x", shape=(2,))
    msg = rejects(relay.Function([x], relay.Call(x, [x])))
    assert "cannot call a non-function" in msg
    assert "`%x` has type Tensor[(2,), float32], expected a function" in msg


def test_unannotated_parameter_called_with_inconsistent_arities():
    f = relay.var("f")
    body = relay.Tuple([relay.Call(f, [relay.const(1)]), relay.Call(f, [])])
    msg = rejects(relay.Function([f], body))
    assert "`%f` has type fn (Tensor[(), int32]) -> _, expected 1 argument, found 0" in msg


def test_unannotated_parameter_called_with_inconsistent_arities_through_unification():
    f, g = relay.var("f"), relay.var("g")
    c = relay.var("c", shape=(), dtype="bool")
    pick = relay.If(c, f, g)
    body = relay.Tuple([relay.Call(f, [relay.const(1)]), relay.Call(g, []), pick])
    msg = rejects(relay.Function([c, f, g], body))
    assert "a function of 1 parameter vs a function of 0 parameters" in msg


def test_function_applied_to_itself_needs_an_infinite_type():
    f = relay.var("f")
    msg = rejects(relay.Function([f], relay.Call(f, [f])))
    assert "would have to contain itself" in msg


def test_return_type_annotation_mismatch():
    x = relay.var("x", shape=(2,))
    func = relay.Function([x], relay.cast(x, "int32"), T((2,), "float32"))
    msg = rejects(func)
    assert "in the body of" in msg
    assert "expected Tensor[(2,), float32] (the return type), found Tensor[(2,), int32]" in msg


def test_let_annotation_mismatch():
    v = relay.var("v", shape=(), dtype="bool")
    msg = rejects(relay.Function([], relay.Let(v, relay.const(1.0), v)))
    assert "the value of %v" in msg
    assert "expected Tensor[(), bool] (the annotation of %v), found Tensor[(), float32]" in msg


def test_unknown_global_function():
    msg = rejects(relay.Function([], relay.Call(relay.GlobalVar("missing"), [])))
    assert "unknown global function" in msg and "@missing" in msg


def test_free_variable_in_a_global_function():
    x = relay.var("x", shape=())
    msg = rejects(relay.Function([], x))
    assert "free variable" in msg and "%x" in msg


# --- tuples --------------------------------------------------------------------------------------


def test_tuple_index_out_of_range():
    x = relay.var("x", shape=(2,))
    t = relay.Tuple([x, x])
    msg = rejects(relay.Function([x], relay.TupleGetItem(t, 2)))
    assert "tuple index out of range" in msg and "index 2" in msg and "with 2 fields" in msg


def test_projection_from_a_tensor():
    x = relay.var("x", shape=(2,))
    msg = rejects(relay.Function([x], relay.TupleGetItem(x, 0)))
    assert "cannot project field 0" in msg and "expected a tuple" in msg


def test_projection_out_of_range_found_after_the_tuple_type_is_known():
    t, f = relay.var("t"), relay.var("f")
    body = relay.Let(f, relay.Function([t], t[3]), relay.Call(f, [relay.Tuple([relay.const(1)])]))
    msg = rejects(relay.Function([], body))
    assert "tuple index out of range" in msg and "%t.3" in msg


# --- polymorphism and ADTs ---------------------------------------------------------------------


def test_rigid_type_variable_is_not_a_tensor():
    a = relay.TypeVar("A")
    x = relay.var("x", a)
    msg = rejects(relay.Function([x], relay.const(1.0), a, [a]))
    assert "expected A (the return type), found Tensor[(), float32]" in msg


def test_two_type_variables_do_not_unify():
    a, b = relay.TypeVar("A"), relay.TypeVar("B")
    x = relay.var("x", a)
    msg = rejects(relay.Function([x], x, b, [a, b]))
    assert "expected B (the return type), found A" in msg


def test_constructor_applied_to_wrong_element_type():
    adts = Adts()
    xs = relay.var("xs", adts.list_of(T((), "int32")))
    msg = rejects(relay.Function([xs], adts.cons(relay.const(1.0), xs)), adts.mod)
    assert "argument 1 of `Cons(1f, %xs)`" in msg
    assert "expected List[Tensor[(), float32]], found List[Tensor[(), int32]]" in msg


def test_pattern_of_the_wrong_type():
    adts = Adts()
    xs = relay.var("xs", adts.list_of(T((), "int32")))
    v = relay.var("v")
    match = relay.Match(
        xs,
        [relay.Clause(relay.PatternConstructor(adts.Some, [relay.PatternVar(v)]), v)],
    )
    msg = rejects(relay.Function([xs], match), adts.mod)
    assert "the pattern `Some(%v)`" in msg
    assert "expected List[Tensor[(), int32]] (the type of the matched value)" in msg
    assert "found Option[_]" in msg


def test_pattern_with_wrong_number_of_fields():
    adts = Adts()
    xs = relay.var("xs", adts.list_of(T(())))
    match = relay.Match(
        xs, [relay.Clause(relay.PatternConstructor(adts.Cons, [relay.PatternWildcard()]), xs)]
    )
    msg = rejects(relay.Function([xs], match), adts.mod)
    assert "constructor Cons has 2 fields, found 1 sub-patterns" in msg


def test_tuple_pattern_against_a_tensor():
    x = relay.var("x", shape=(2,))
    match = relay.Match(x, [relay.Clause(relay.PatternTuple([relay.PatternWildcard()]), x)])
    msg = rejects(relay.Function([x], match))
    assert "matches a tuple of 1 field, found a value of type Tensor[(2,), float32]" in msg


def test_match_clauses_of_different_types():
    adts = Adts()
    xs = relay.var("xs", adts.list_of(T(())))
    match = relay.Match(
        xs,
        [
            relay.Clause(relay.PatternConstructor(adts.Nil), relay.const(0)),
            relay.Clause(relay.PatternWildcard(), relay.const(0.0)),
        ],
    )
    msg = rejects(relay.Function([xs], match), adts.mod)
    assert "clause 1 of `match" in msg
    assert "expected Tensor[(), int32] (the type of the earlier clauses)" in msg


def test_empty_match():
    x = relay.var("x", shape=())
    msg = rejects(relay.Function([x], relay.Match(x, [])))
    assert "empty match" in msg


def test_constructor_of_a_type_missing_from_the_module():
    adts = Adts()
    msg = rejects(relay.Function([], adts.nil()))  # a fresh module without List
    assert "unknown constructor" in msg and "Nil belongs to type List" in msg


def test_unbound_type_variable_in_an_annotation():
    b = relay.TypeVar("B")
    x = relay.var("x", b)
    msg = rejects(relay.Function([x], x))
    assert "ill-formed type" in msg and "unbound type variable B" in msg
    assert "the annotation of parameter %x" in msg


def test_unknown_adt_in_an_annotation():
    tree = relay.GlobalTypeVar("Tree")
    x = relay.var("x", relay.TypeCall(tree, [T(())]))
    msg = rejects(relay.Function([x], x))
    assert "unknown type Tree" in msg


def test_adt_applied_to_the_wrong_number_of_type_arguments():
    adts = Adts()
    x = relay.var("x", relay.TypeCall(adts.List, [T(()), T(())]))
    msg = rejects(relay.Function([x], x), adts.mod)
    assert "type List expects 1 type argument, found 2" in msg


def test_constructor_field_with_an_unbound_type_variable():
    mod = relay.IRModule()
    box = relay.GlobalTypeVar("Box")
    stray = relay.TypeVar("Z")
    mod.add_type_def(box, relay.TypeData(box, [], [relay.Constructor("MkBox", [stray], box)]))
    mod["main"] = relay.Function([], relay.const(0))
    with pytest.raises(RelayTypeError, match="field 0 of constructor MkBox of type Box"):
        infer_types(mod)


def test_polymorphic_function_passed_where_a_polymorphic_one_is_expected_with_wrong_arity():
    adts = Adts()
    id_gv = adts.add_id()
    s = relay.TypeVar("S")
    g = relay.var("g", relay.FuncType([s, s], s, [s]))
    takes = relay.Function([g], relay.const(0))
    msg = rejects(relay.Function([], relay.Call(takes, [id_gv])), adts.mod)
    assert "a function of 2 parameters vs a function of 1 parameter" in msg


# --- what inference cannot determine -----------------------------------------------------------


def test_unconstrained_parameter_is_reported_by_name():
    x = relay.var("x")
    msg = rejects(relay.Function([x], x))
    assert "cannot infer the type of `%x`" in msg and "nothing in the program constrains it" in msg


def test_operator_on_an_unknown_argument_is_reported():
    x = relay.var("x")
    msg = rejects(relay.Function([x], relay.exp(x)))
    assert "cannot infer the type of argument 0 (`%x`) of `exp(%x)`" in msg


def test_partially_known_type_is_shown():
    adts = Adts()
    msg = rejects(relay.Function([], adts.nil()), adts.mod)
    assert "it is only known to be List[_]" in msg


def test_projection_of_an_unknown_tuple_is_reported():
    t = relay.var("t")
    msg = rejects(relay.Function([t], t[0]))
    assert "projecting field 0 needs to know it is a tuple" in msg


# --- message shape -----------------------------------------------------------------------------


def test_message_gives_source_position_when_the_node_has_a_span():
    x, y = relay.var("x", shape=(2, 3)), relay.var("y", shape=(2, 3), dtype="int32")
    call = relay.add(x, y)
    call.span = relay.Span(3, 14)
    msg = rejects(relay.Function([x, y], call))
    assert msg.startswith("type error at 3:14 in `add(%x, %y)`")


def test_mismatch_message_has_position_expression_expected_and_found():
    c = relay.var("c", shape=(), dtype="float32")
    c.span = relay.Span(2, 7)
    with pytest.raises(RelayTypeError) as info:
        infer_expr(relay.If(c, relay.const(1), relay.const(2)))
    err = info.value
    assert str(err).startswith("type mismatch at 2:7 in the condition of `if (%c)")
    assert err.node is c
    assert str(err.expected) and err.found == T((), "float32")


def test_long_expressions_are_truncated_in_messages():
    x = relay.var("x", shape=(2,))
    body: relay.Expr = x
    for _ in range(100):
        body = relay.add(body, x)
    msg = rejects(relay.Function([x], relay.If(body, x, x)))
    quoted = msg.split("`")[1]
    assert len(quoted) <= 200 and quoted.endswith("...")


def test_type_checks_text_format_programs_with_positions():
    src = (
        '#[version = "0.0.5"]\n'
        "def @main(%x: Tensor[(2, 3), float32], %c: int32) {\n"
        "  if (%c) { %x } else { %x }\n"
        "}\n"
    )
    mod = relay.fromtext(src)
    with pytest.raises(RelayTypeError, match=r"type mismatch at 3:\d+ in the condition"):
        infer_types(mod)


def test_constructor_called_with_too_few_arguments_shows_its_polymorphic_type():
    adts = Adts()
    msg = rejects(relay.Function([], relay.Call(adts.Cons, [relay.const(1)])), adts.mod)
    assert "`Cons` has type fn [A](A, List[A]) -> List[A], expected 2 arguments, found 1" in msg


def test_unannotated_global_is_monomorphic():
    mod = relay.IRModule()
    v = relay.var("v")
    ident = relay.GlobalVar("ident")
    mod[ident] = relay.Function([v], v)
    body = relay.Tuple([relay.Call(ident, [relay.const(1)]), relay.Call(ident, [relay.const(1.0)])])
    msg = rejects(relay.Function([], body), mod)
    assert "argument 0 of `@ident(1f)`" in msg
    assert "expected Tensor[(), int32], found Tensor[(), float32]" in msg


def test_explicit_type_arguments_that_contradict_the_arguments():
    adts = Adts()
    id_gv = adts.add_id()
    call = relay.Call(id_gv, [relay.const(1)], type_args=[T((), "float32")])
    with pytest.raises(RelayTypeError, match="argument 0 of `@id"):
        infer_expr(call, adts.mod)
    wrong_count = relay.Call(id_gv, [relay.const(1)], type_args=[T(()), T(())])
    with pytest.raises(RelayTypeError, match="wrong number of type arguments"):
        infer_expr(wrong_count, adts.mod)


def test_nullary_constructor_used_as_a_function_value_suggests_calling_it():
    # Bare `Nil` in text is the applied constructor (TVM's rule); `fn Nil`, like a
    # Python-built `relay.Constructor` outside a call, is the constructor as a function.
    mod = relay.fromtext(
        """
        #[version = "0.0.5"]
        type List[A] { Cons(A, List[A]), Nil }
        def @main(%x: Tensor[(), float32]) -> List[Tensor[(), float32]] { Cons(%x, fn Nil) }
        """
    )
    with pytest.raises(RelayTypeError) as info:
        infer_types(mod)
    assert "argument 1 of `Cons(%x, fn Nil)`" in str(info.value)
    assert "write `Nil` or `Nil()`" in str(info.value)


def test_bare_nullary_constructor_in_text_is_its_value():
    mod = relay.fromtext(
        """
        #[version = "0.0.5"]
        type List[A] { Cons(A, List[A]), Nil }
        def @main(%x: Tensor[(), float32]) -> List[Tensor[(), float32]] { Cons(%x, Nil) }
        """
    )
    typed = infer_types(mod)
    assert str(typed["main"].body.checked_type) == "List[float32]"
