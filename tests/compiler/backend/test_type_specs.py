"""Relay types as vm.program type specs, and tensor leaves of tuple types."""

from __future__ import annotations

import pytest

from compiler import relay
from compiler.backend.type_specs import tensor_leaves, type_spec
from compiler.ir.types import IncompleteType


def test_tensor_spec_keeps_static_dimensions_and_marks_dynamic_ones_minus_one() -> None:
    assert type_spec(relay.TensorType((2, relay.Any(), 4), "int8")) == (
        "tensor",
        (2, -1, 4),
        "int8",
    )
    assert type_spec(relay.scalar_type("bool")) == ("tensor", (), "bool")


def test_nested_tuple_spec() -> None:
    t = relay.TupleType([relay.scalar_type("float32"), relay.TupleType([]), relay.TensorType((3,))])
    assert type_spec(t) == (
        "tuple",
        (("tensor", (), "float32"), ("tuple", ()), ("tensor", (3,), "float32")),
    )


def test_adt_function_and_type_variable_specs() -> None:
    a = relay.TypeVar("A")
    lst = relay.GlobalTypeVar("List")
    b = relay.TypeVar("B")
    f32 = relay.scalar_type("float32")
    assert type_spec(relay.TypeCall(lst, [a])) == ("adt", "List", (("var", 0),))
    assert type_spec(lst) == ("adt", "List", ())
    # Variables are numbered by first appearance, one numbering per signature.
    assert type_spec(relay.FuncType([b, a], b)) == ("func", (("var", 0), ("var", 1)), ("var", 0))
    assert type_spec(relay.FuncType([f32], f32)) == (
        "func",
        (("tensor", (), "float32"),),
        ("tensor", (), "float32"),
    )
    numbering = {a: 0}
    assert type_spec(b, numbering) == ("var", 1) and numbering == {a: 0, b: 1}
    # A function type with type parameters of its own is left unchecked.
    assert type_spec(relay.FuncType([a], a, [a])) == ("func",)


def test_a_type_left_unsolved_is_refused() -> None:
    with pytest.raises(TypeError, match="unsolved"):
        type_spec(relay.TupleType([IncompleteType()]))


def test_a_deeply_nested_tuple_type_needs_no_recursion() -> None:
    t = relay.scalar_type("int32")
    for _ in range(5000):
        t = relay.TupleType([t])
    spec = type_spec(t)
    for _ in range(5000):
        assert spec[0] == "tuple"
        (spec,) = spec[1]
    assert spec == ("tensor", (), "int32")


def test_tensor_leaves_are_depth_first_left_to_right() -> None:
    a, b, c = (relay.TensorType((i,), "float32") for i in (1, 2, 3))
    assert tensor_leaves(relay.TupleType([a, relay.TupleType([b, c])])) == [a, b, c]
    assert tensor_leaves(a) == [a]
    with pytest.raises(TypeError, match="tensor or a tuple of tensors"):
        tensor_leaves(relay.TupleType([a, relay.FuncType([], a)]))
