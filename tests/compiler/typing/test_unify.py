"""The unifier on its own: joins toward ``?``, rigid type variables, ADTs, infinite types."""

from __future__ import annotations

import pytest

from compiler import relay
from compiler.ir.types import IncompleteType
from compiler.typing.typeops import same_type, substitute
from compiler.typing.unify import Mismatch, Solver
from tests.compiler.typing._programs import T, text


def test_equal_tensors_unify_to_the_expected_side():
    s = Solver()
    a, b = T((2, 3)), T((2, 3))
    assert s.unify(a, b) is a


def test_dynamic_dimension_unifies_with_any_size_and_the_join_keeps_it():
    s = Solver()
    assert text(s.unify(T((None, 10)), T((5, 10)))) == "Tensor[(?, 10), float32]"
    assert text(s.unify(T((5, 10)), T((None, 10)))) == "Tensor[(?, 10), float32]"
    assert text(s.unify(T((5, None)), T((None, 10)))) == "Tensor[(?, ?), float32]"


@pytest.mark.parametrize(
    ("a", "b", "detail"),
    [
        (T((2,)), T((2,), "int32"), "dtype float32 vs int32"),
        (T((2,)), T((2, 1)), "rank 1 vs rank 2"),
        (T((2, 3)), T((2, 4)), "dimension 1 is 3 vs 4"),
    ],
)
def test_incompatible_tensors(a, b, detail):
    with pytest.raises(Mismatch, match=detail):
        Solver().unify(a, b)


def test_incomplete_type_is_bound_then_rebound_to_the_join():
    s = Solver()
    v = IncompleteType()
    s.unify(v, T((5,)))
    assert text(s.zonk(v)) == "Tensor[(5,), float32]"
    s.unify(v, T((None,)))
    assert text(s.zonk(v)) == "Tensor[(?,), float32]"
    s.unify(v, T((7,)))  # still compatible with ?, and stays ?
    assert text(s.zonk(v)) == "Tensor[(?,), float32]"


def test_two_incomplete_types_share_a_class():
    s = Solver()
    a, b = IncompleteType(), IncompleteType()
    s.unify(relay.TupleType([a, a]), relay.TupleType([b, T(())]))
    assert text(s.zonk(b)) == "Tensor[(), float32]"
    assert s.find(a) is s.find(b)


def test_bound_classes_merge_to_their_join():
    s = Solver()
    a, b = IncompleteType(), IncompleteType()
    s.unify(a, T((3,)))
    s.unify(b, T((None,)))
    s.unify(a, b)
    assert text(s.zonk(a)) == text(s.zonk(b)) == "Tensor[(?,), float32]"


def test_nested_join_rebuilds_only_what_changed():
    s = Solver()
    x = relay.TupleType([T((2,)), relay.TupleType([T((3,))])])
    y = relay.TupleType([T((2,)), relay.TupleType([T((None,))])])
    joined = s.unify(x, y)
    assert text(joined) == "(Tensor[(2,), float32], (Tensor[(?,), float32],))"
    assert joined.fields[0] is x.fields[0]


def test_type_variables_are_rigid():
    s = Solver()
    a, b = relay.TypeVar("A"), relay.TypeVar("A")
    assert s.unify(a, a) is a
    with pytest.raises(Mismatch, match="type variable A vs type variable A"):
        s.unify(a, b)
    with pytest.raises(Mismatch, match="type variable A vs a tensor"):
        s.unify(a, T(()))


def test_polymorphic_function_types_unify_up_to_renaming():
    s = Solver()
    a, b = relay.TypeVar("A"), relay.TypeVar("B")
    f = relay.FuncType([a], a, [a])
    g = relay.FuncType([b], b, [b])
    assert s.unify(f, g) is f
    h = relay.FuncType([b], T(()), [b])
    with pytest.raises(Mismatch):
        s.unify(f, h)
    with pytest.raises(Mismatch, match="1 type parameter vs"):
        s.unify(f, relay.FuncType([T(())], T(())))


def test_bare_nullary_adt_equals_its_empty_application():
    s = Solver()
    nat = relay.GlobalTypeVar("nat")
    assert s.unify(nat, relay.TypeCall(nat, [])) is nat
    lst = relay.GlobalTypeVar("List")
    with pytest.raises(Mismatch, match="type nat vs type List"):
        s.unify(nat, relay.TypeCall(lst, [T(())]))


def test_adt_arguments_unify():
    s = Solver()
    lst = relay.GlobalTypeVar("List")
    v = IncompleteType()
    s.unify(relay.TypeCall(lst, [v]), relay.TypeCall(lst, [T((4,), "int8")]))
    assert text(s.zonk(v)) == "Tensor[(4,), int8]"


def test_occurs_check_rejects_infinite_types():
    s = Solver()
    v = IncompleteType()
    with pytest.raises(Mismatch, match="contain itself"):
        s.unify(v, relay.TupleType([v]))
    w = IncompleteType()
    s.unify(w, relay.TupleType([IncompleteType()]))
    with pytest.raises(Mismatch, match="contain itself"):
        s.unify(relay.TupleType([w]), w)


def test_instantiate_gives_fresh_variables_each_time():
    s = Solver()
    a = relay.TypeVar("A")
    lst = relay.GlobalTypeVar("List")
    ft = relay.FuncType([a, relay.TypeCall(lst, [a])], relay.TypeCall(lst, [a]), [a])
    one, fresh1 = s.instantiate(ft)
    two, fresh2 = s.instantiate(ft)
    assert fresh1[0] is not fresh2[0]
    assert not one.type_params
    s.unify(one.arg_types[0], T(()))
    assert text(s.zonk(one.ret_type)) == "List[Tensor[(), float32]]"
    assert text(s.zonk(two.ret_type)) == "List[_]"


def test_substitute_and_same_type():
    a = relay.TypeVar("A")
    t = relay.TupleType([a, relay.FuncType([a], a)])
    out = substitute(t, {a: T((1,))})
    assert same_type(out, relay.TupleType([T((1,)), relay.FuncType([T((1,))], T((1,)))]))
    assert not same_type(out, t)


def test_deeply_nested_types_unify_and_zonk_without_recursion():
    s = Solver()
    v = IncompleteType()
    left: relay.Type = v
    right: relay.Type = T(())
    for _ in range(20_000):
        left = relay.TupleType([left])
        right = relay.TupleType([right])
    s.unify(left, right)
    assert s.zonk(v) == T(())
    assert s.is_resolved(left)
