"""Argument conversion and checking against parameter types (vm.args), through the VM's API."""

from __future__ import annotations

import numpy as np
import pytest

import vm
from vm.builder import ExecutableBuilder
from vm.isa import Opcode as O

NIL, CONS = 3, 4

SPECS = {
    "matrix": ("tensor", (2, 3), "float32"),
    "rows": ("tensor", (-1, 3), "float32"),
    "i32": ("tensor", (), "int32"),
    "u8": ("tensor", (), "uint8"),
    "f16": ("tensor", (), "float16"),
    "f32": ("tensor", (), "float32"),
    "flag": ("tensor", (), "bool"),
    "pair": ("tuple", (("tensor", (2,), "float32"), ("tensor", (), "int64"))),
    "nested": ("tuple", (("tuple", (("tensor", (), "int64"),)), ("tensor", (), "int64"))),
    "items": ("adt", "List"),
    "fn": ("func",),
    "anything": ("any",),
}


@pytest.fixture(scope="module")
def machine():
    """One identity function per parameter type, plus two(a, b) -> a."""
    b = ExecutableBuilder()
    b.add_constructor(NIL, "Nil", 0, "List")
    b.add_constructor(CONS, "Cons", 2, "List")
    for name, spec in SPECS.items():
        f = b.function(name, ["x"], [spec], spec)
        f.emit(O.Ret, 0)
        b.add_function(f)
    i64 = ("tensor", (), "int64")
    f = b.function("two", ["a", "b"], [i64, i64], i64)
    f.emit(O.Ret, 0)
    b.add_function(f)
    return vm.VirtualMachine(b.build())


def cons_list(values):
    items = vm.ADT(NIL, [], "Nil")
    for value in reversed(values):
        items = vm.ADT(CONS, [value, items], "Cons")
    return items


# ---- tensors ---------------------------------------------------------------------------------


def test_a_matching_array_is_used_without_copy(machine):
    x = np.ones((2, 3), np.float32)
    result = machine.invoke("matrix", x)
    assert np.shares_memory(result, x) and result.base is x  # handed back as an NDArray view
    assert type(result) is vm.NDArray


def test_a_non_contiguous_array_is_made_contiguous(machine):
    base = np.arange(12, dtype=np.float32).reshape(2, 6)
    view = base[:, ::2]
    result = machine.invoke("matrix", view)
    assert result.flags.c_contiguous and not np.shares_memory(result, base)
    np.testing.assert_array_equal(result, view)


def test_a_fortran_order_array_is_made_c_contiguous(machine):
    x = np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3))
    result = machine.invoke("matrix", x)
    assert result.flags.c_contiguous
    np.testing.assert_array_equal(result, x)


def test_a_big_endian_array_is_converted_to_native_order(machine):
    x = np.arange(6, dtype=">f4").reshape(2, 3)
    result = machine.invoke("matrix", x)
    assert result.dtype == np.float32 and result.dtype.isnative
    np.testing.assert_array_equal(result, x)


def test_dynamic_dimensions_take_any_size(machine):
    assert machine.invoke("rows", np.zeros((7, 3), np.float32)).shape == (7, 3)


def test_a_wrong_dtype_is_a_type_error_naming_expected_and_received(machine):
    with pytest.raises(
        TypeError,
        match=r"matrix\(\): argument 0 \('x'\) expected a tensor float32\[2, 3\], "
        r"got a numpy array float64\[2, 3\]",
    ):
        machine.invoke("matrix", np.zeros((2, 3)))


def test_wrong_dimensions_are_listed_index_by_index(machine):
    with pytest.raises(ValueError) as info:
        machine.invoke("matrix", np.zeros((5, 4), np.float32))
    assert str(info.value) == (
        "matrix(): argument 0 ('x') has invalid dimensions for the following indices: "
        "index 0 got 5, expected 2; index 1 got 4, expected 3 "
        "(expected float32[2, 3], got float32[5, 4])"
    )


def test_a_dynamic_dimension_is_not_checked_but_a_static_one_is(machine):
    with pytest.raises(ValueError, match=r"index 1 got 4, expected 3 \(expected float32\[\?, 3\]"):
        machine.invoke("rows", np.zeros((5, 4), np.float32))


def test_a_wrong_rank_is_a_value_error(machine):
    with pytest.raises(
        ValueError, match=r"expected 2 dimensions \(float32\[2, 3\]\), got 3 \(float32\[1, 2, 3\]\)"
    ):
        machine.invoke("matrix", np.zeros((1, 2, 3), np.float32))


def test_a_list_for_a_tensor_parameter_suggests_an_array(machine):
    with pytest.raises(TypeError, match="got a list of 2 values; pass a numpy array"):
        machine.invoke("matrix", [[1, 2, 3], [4, 5, 6]])


def test_a_scalar_for_a_matrix_parameter_is_a_type_error(machine):
    with pytest.raises(
        TypeError, match=r"expected a tensor float32\[2, 3\], got the Python float 1.0"
    ):
        machine.invoke("matrix", 1.0)


# ---- scalars -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("function", "value", "dtype", "expected"),
    [
        ("i32", 7, np.int32, 7),
        ("i32", True, np.int32, 1),
        ("i32", 3.0, np.int32, 3),
        ("i32", np.int64(-5), np.int32, -5),
        ("u8", 255, np.uint8, 255),
        ("f32", 2, np.float32, 2.0),
        ("f32", 0.5, np.float32, 0.5),
        ("f32", np.float64(0.25), np.float32, 0.25),
        ("f16", 1.5, np.float16, 1.5),
        ("f32", float("inf"), np.float32, float("inf")),
        ("flag", True, np.bool_, True),
        ("flag", 0, np.bool_, False),
    ],
)
def test_python_and_numpy_scalars_are_converted_to_the_parameter_dtype(
    machine, function, value, dtype, expected
):
    result = machine.invoke(function, value)
    assert result.dtype == dtype and result.shape == () and result == expected


@pytest.mark.parametrize(
    ("function", "value", "message"),
    [
        ("u8", 256, r"the Python int 256 is out of range for uint8 \(0 to 255\)"),
        ("u8", -1, "out of range for uint8"),
        ("i32", 2**31, "out of range for int32"),
        ("i32", 1.5, "the Python float 1.5 is not an integer"),
        ("i32", float("nan"), "is not an integer"),
        ("f16", 1e6, r"overflows float16 \(largest finite value 65504\)"),
        ("f32", 10**40, "overflows float32"),
        ("flag", 2, "is not 0 or 1"),
    ],
)
def test_values_that_do_not_fit_the_dtype_are_value_errors(machine, function, value, message):
    with pytest.raises(ValueError, match=message):
        machine.invoke(function, value)


def test_a_string_for_a_scalar_is_a_type_error(machine):
    with pytest.raises(TypeError, match=r"expected a tensor int32\[\], got a builtins.str"):
        machine.invoke("i32", "7")


# ---- tuples, ADTs, closures, untyped values -----------------------------------------------------


def test_tuple_parameters_take_tuples_or_lists(machine):
    for value in ((np.zeros(2, np.float32), 1), [np.zeros(2, np.float32), 1]):
        result = machine.invoke("pair", value)
        assert type(result) is tuple and result[1].dtype == np.int64


def test_nested_tuples_convert_every_field(machine):
    result = machine.invoke("nested", ((1,), 2))
    assert int(result[0][0]) == 1 and int(result[1]) == 2


def test_a_tuple_of_the_wrong_length_is_a_type_error(machine):
    with pytest.raises(
        TypeError, match=r"pair\(\): argument 0 \('x'\) expected a tuple of 2 fields"
    ):
        machine.invoke("pair", (np.zeros(2, np.float32),))


def test_a_bad_tuple_field_is_named_by_its_path(machine):
    with pytest.raises(ValueError, match=r"argument 0 \('x'\) field 0 has invalid dimensions"):
        machine.invoke("pair", (np.zeros(3, np.float32), 1))


def test_an_adt_parameter_takes_a_vm_adt_of_its_type(machine):
    items = cons_list([np.float32(1), np.float32(2)])
    result = machine.invoke("items", items)
    assert result.constructor == "Cons" and float(result[0]) == 1.0


def _fields(items):
    """The first fields of a Cons list, in order."""
    found = []
    while items.constructor == "Cons":
        found.append(items[0])
        items = items[1]
    return found


def test_a_valid_adt_is_passed_without_copying_its_tensors(machine):
    data = np.zeros(2, np.float32)
    result = machine.invoke("items", cons_list([data] * 3))
    # Handed back with each tensor viewed as an NDArray (containers rebuilt, data shared).
    fields = _fields(result)
    assert len(fields) == 3 and all(np.shares_memory(f, data) for f in fields)
    assert {type(f) for f in fields} == {vm.NDArray}


def test_a_100000_long_list_converts_without_recursion(machine):
    data = np.zeros(1, np.float32)
    fields = _fields(machine.invoke("items", cons_list([data] * 100_000)))
    assert len(fields) == 100_000 and np.shares_memory(fields[-1], data)


def test_arrays_inside_an_adt_are_made_contiguous(machine):
    view = np.arange(6, dtype=np.float32)[::2]
    result = machine.invoke("items", cons_list([view]))
    assert result[0].flags.c_contiguous
    np.testing.assert_array_equal(result[0], view)


def test_a_value_of_another_type_is_a_type_error(machine):
    with pytest.raises(TypeError, match=r"expected a List value \(a vm.ADT\), got a tuple"):
        machine.invoke("items", ())
    with pytest.raises(
        TypeError,
        match=r"expected a List value \(constructors Nil, Cons\), "
        r"got a vm.ADT \(tag 9\) with tag 9",
    ):
        machine.invoke("items", vm.ADT(9, []))


def test_a_constructor_with_the_wrong_field_count_is_a_type_error(machine):
    with pytest.raises(TypeError, match="field 1 is a Nil value with 1 fields; Nil takes 0"):
        machine.invoke("items", vm.ADT(CONS, [np.float32(1), vm.ADT(NIL, [1])]))


def test_a_cyclic_value_is_a_type_error(machine):
    cell = vm.ADT(CONS, [np.float32(1), None])
    cell.fields = (np.float32(1), cell)
    with pytest.raises(TypeError, match="contains itself"):
        machine.invoke("items", cell)


def test_unsupported_values_inside_an_adt_are_named_by_path(machine):
    with pytest.raises(TypeError, match=r"field 0 is a builtins.str; VM values are numpy arrays"):
        machine.invoke("items", cons_list(["text"]))


def test_a_function_parameter_takes_a_closure(machine):
    closure = vm.Closure(0, [])
    assert machine.invoke("fn", closure) is closure
    with pytest.raises(
        TypeError, match=r"expected a function \(a vm.Closure\), got the Python int 1"
    ):
        machine.invoke("fn", 1)


@pytest.mark.parametrize(
    ("value", "dtype"),
    [
        (1.5, np.float32),
        (3, np.int32),
        (2**40, np.int64),
        (True, np.bool_),
        (np.float64(1), np.float64),
    ],
)
def test_untyped_python_scalars_are_typed_like_relay_constants(machine, value, dtype):
    result = machine.invoke("anything", value)
    assert result.dtype == dtype and result.shape == ()


def test_untyped_values_reject_unsupported_dtypes(machine):
    with pytest.raises(TypeError, match="arrays of dtype <U1 cannot be VM values"):
        machine.invoke("anything", np.array(["a"]))


# ---- counts, and staying usable ------------------------------------------------------------------


def test_a_wrong_argument_count_names_the_parameters(machine):
    with pytest.raises(TypeError, match=r"two\(\) takes 2 arguments \(a, b\) but 3 were given"):
        machine.invoke("two", 1, 2, 3)
    with pytest.raises(TypeError, match=r"two\(\) takes 2 arguments \(a, b\) but 1 was given"):
        machine.invoke("two", 1)


def test_the_machine_works_after_argument_errors(machine):
    with pytest.raises(TypeError):
        machine.invoke("two", "a", 1)
    assert machine.invoke("two", 4, 5) == 4
