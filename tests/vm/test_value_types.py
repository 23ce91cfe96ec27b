"""Caller-made closures, ADTs and tuples are checked against the callee's types (vm.value_types).

A value built outside the VM reaches compiled code that trusts its type, so a wrong
dtype, rank or static dimension anywhere inside it, or a closure of the wrong signature,
must be refused with an error naming the function, the parameter, the path inside the
value, the expected type and what was found; never run (issue 13, items 1 and 2).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import vm
from compiler import relay
from vm.builder import ExecutableBuilder
from vm.errors import InvalidExecutableError
from vm.executable import Executable
from vm.isa import Opcode as O

CLOSURES = """#[version = "0.0.5"]
def @g(%y: Tensor[(1), float32]) -> Tensor[(1), float32] { %y + %y }
def @h(%y: Tensor[(1), int32]) -> Tensor[(1), int32] { %y }
def @k(%a: Tensor[(1), float32], %b: Tensor[(2, 2), float32]) -> Tensor[(1), float32] { %a }
def @main(%f: fn () -> Tensor[(1), float32]) -> Tensor[(1), float32] { %f() }
def @apply(%f: fn (Tensor[(1), float32]) -> Tensor[(1), float32], %x: Tensor[(1), float32])
    -> Tensor[(1), float32] { %f(%x) }
def @pair(%p: (Tensor[(2), float32], (Tensor[(), int32], Tensor[(1), float32])))
    -> Tensor[(1), float32] { %p.1.1 + %p.1.1 }
"""


@pytest.fixture(scope="module")
def closures():
    exe = relay.vm.compile(relay.fromtext(CLOSURES), "llvm")
    return vm.VirtualMachine(exe, vm.cpu())


@pytest.fixture(scope="module")
def prelude():
    """``main(xs: List[int32])`` is the prelude's ``@sum``; ``@map`` is polymorphic."""
    mod = relay.IRModule()
    p = relay.Prelude(mod)
    list_of_int = relay.TypeCall(p.get_type("List")[0], [relay.TensorType((), "int32")])
    xs = relay.var("xs", list_of_int)
    mod["main"] = relay.Function([xs], relay.Call(p.get_global_var("sum"), [xs]))
    y = relay.var("y", shape=(1,), dtype="float32")
    mod["double"] = relay.Function([y], y + y)
    exe = relay.vm.compile(mod, "llvm")
    return vm.VirtualMachine(exe, vm.cpu())


def index(machine, name):
    return machine.executable.globals.index(name)


def tags(machine):
    return {c.name: c.tag for c in machine.executable.constructors}


def make_list(machine, values):
    tag = tags(machine)
    items = vm.ADT(tag["Nil"], [], "Nil")
    for value in reversed(values):
        items = vm.ADT(tag["Cons"], [value, items], "Cons")
    return items


def f32(*values):
    return np.array(values, dtype=np.float32)


# ---- returns ------------------------------------------------------------------------------------


def test_a_caller_made_closure_of_the_right_type_runs(closures):
    closure = vm.Closure(index(closures, "g"), [f32(1.5)])
    np.testing.assert_array_equal(closures.invoke("main", closure), f32(3.0))


def test_a_closure_with_nothing_captured_runs_as_an_argument(closures):
    closure = vm.Closure(index(closures, "g"), [])
    np.testing.assert_array_equal(closures.invoke("apply", closure, f32(2.0)), f32(4.0))


def test_a_closure_capturing_the_leading_parameters_matches_the_rest(closures):
    closure = vm.Closure(index(closures, "k"), [f32(7.0)])
    result = closures.invoke_closure(closure, np.zeros((2, 2), np.float32))
    np.testing.assert_array_equal(result, f32(7.0))


def test_a_caller_made_list_of_the_right_type_sums_right(prelude):
    values = [np.array(v, np.int32) for v in (1, 2, 39)]
    assert int(prelude.invoke("main", make_list(prelude, values))) == 42


def test_python_ints_in_an_int32_list_are_converted(prelude):
    assert int(prelude.invoke("main", make_list(prelude, [1, 2, 3]))) == 6


def test_a_polymorphic_function_takes_a_closure_and_a_list_that_agree(prelude):
    doubled = prelude.invoke(
        "map", vm.Closure(index(prelude, "double"), []), make_list(prelude, [f32(1), f32(2)])
    )
    assert [float(doubled[0][0]), float(doubled[1][0][0])] == [2.0, 4.0]


def test_a_closure_returned_by_the_vm_can_be_passed_back(prelude):
    values = make_list(prelude, [f32(1)])
    mapped = prelude.invoke("map", vm.Closure(index(prelude, "double"), []), values)
    again = prelude.invoke("map", vm.Closure(index(prelude, "double"), []), mapped)
    assert float(again[0][0]) == 4.0


def test_nested_tuples_of_the_right_types_run(closures):
    value = (f32(0, 0), (np.int32(3), f32(1.25)))
    np.testing.assert_array_equal(closures.invoke("pair", value), f32(2.5))


# ---- invalid: closures --------------------------------------------------------------------------


def test_a_captured_value_of_the_wrong_rank_is_refused(closures):
    closure = vm.Closure(index(closures, "g"), [np.ones((1, 1), np.float32)])
    with pytest.raises(
        ValueError,
        match=r"main\(\): argument 0 \('f'\) \(captured value 0 'y' of g\) expected 1 "
        r"dimension \(float32\[1\]\), got 2",
    ):
        closures.invoke("main", closure)
    # The machine is still usable.
    ok = vm.Closure(index(closures, "g"), [f32(1.0)])
    np.testing.assert_array_equal(closures.invoke("main", ok), f32(2.0))


def test_a_rank_16_captured_value_is_an_error_not_a_crash():
    # Run where a crash cannot take the test runner down: the process must exit normally.
    script = textwrap.dedent(
        f"""
        import numpy as np, vm
        from compiler import relay
        exe = relay.vm.compile(relay.fromtext({CLOSURES!r}), "llvm")
        machine = vm.VirtualMachine(exe, vm.cpu())
        closure = vm.Closure(exe.globals.index("g"), [np.ones((1,) * 16, "float32")])
        try:
            machine.invoke("main", closure)
        except ValueError as err:
            print("refused:", err)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "refused: main(): argument 0 ('f') (captured value 0 'y' of g)" in done.stdout


def test_a_captured_value_of_the_wrong_dtype_is_refused(closures):
    closure = vm.Closure(index(closures, "g"), [np.ones(1, np.int32)])
    with pytest.raises(TypeError, match=r"expected a tensor float32\[1\], got a numpy array int32"):
        closures.invoke("main", closure)


def test_a_closure_of_another_signature_is_refused(closures):
    closure = vm.Closure(index(closures, "h"), [np.ones(1, np.int32)])
    with pytest.raises(
        TypeError,
        match=r"main\(\): argument 0 \('f'\) expected a function fn\(\) -> float32\[1\], got a "
        r"closure of h with 1 captured values, which is fn\(\) -> int32\[1\]",
    ):
        closures.invoke("main", closure)


def test_a_closure_that_still_needs_arguments_is_refused(closures):
    closure = vm.Closure(index(closures, "k"), [f32(1.0)])
    with pytest.raises(TypeError, match=r"which is fn\(float32\[2, 2\]\) -> float32\[1\]"):
        closures.invoke("main", closure)


def test_a_closure_capturing_more_than_its_function_takes_is_refused(closures):
    closure = vm.Closure(index(closures, "g"), [f32(1.0), f32(2.0)])
    with pytest.raises(TypeError, match="closure of g with 2 captured values, but g takes only 1"):
        closures.invoke("main", closure)


@pytest.mark.parametrize("func_index", [-1, 99, True, 1.0, "g", None])
def test_a_closure_of_no_function_of_the_executable_is_refused(closures, func_index):
    with pytest.raises(TypeError, match=r"vm\.Closure of function index"):
        closures.invoke("main", vm.Closure(func_index, []))


def test_invoke_closure_checks_arguments_in_the_functions_types(closures):
    closure = vm.Closure(index(closures, "k"), [f32(1.0)])
    with pytest.raises(ValueError, match=r"closure of k\(\): argument 1 \('b'\) expected 2"):
        closures.invoke_closure(closure, f32(1.0))
    with pytest.raises(TypeError, match=r"takes 1 argument \(b\) but 0 were given"):
        closures.invoke_closure(closure)


# ---- invalid: ADT values and tuples -------------------------------------------------------------


def test_float_fields_in_an_int32_list_are_refused(prelude):
    floats = make_list(prelude, [np.array(1.5, np.float32), np.array(2.0, np.float32)])
    with pytest.raises(
        TypeError,
        match=r"main\(\): argument 0 \('xs'\) (field 1 )?field 0 expected a tensor int32\[\], got "
        r"a numpy array float32\[\]",
    ):
        prelude.invoke("main", floats)
    # Scalars follow the rule of scalar arguments: converted only when representable.
    with pytest.raises(ValueError, match="field 0 expected a int32 scalar; a numpy float32"):
        prelude.invoke("main", make_list(prelude, [np.float32(1.5)]))
    arrays = make_list(prelude, [np.array(1, np.int32), np.array(2.0, np.float32)])
    with pytest.raises(TypeError, match=r"field 1 field 0 expected a tensor int32\[\]"):
        prelude.invoke("main", arrays)


def test_a_field_of_the_wrong_rank_is_refused(prelude):
    with pytest.raises(ValueError, match=r"field 0 expected 0 dimensions \(int32\[\]\), got 1"):
        prelude.invoke("main", make_list(prelude, [np.ones(1, np.int32)]))


def test_a_value_of_another_adt_is_refused(prelude):
    some = vm.ADT(tags(prelude)["Some"], [np.int32(1)], "Some")
    with pytest.raises(TypeError, match=r"expected a List value \(constructors Cons, Nil\)"):
        prelude.invoke("main", some)
    tail = vm.ADT(tags(prelude)["Cons"], [np.int32(1), some], "Cons")
    with pytest.raises(TypeError, match=r"field 1 expected a List value"):
        prelude.invoke("main", tail)


def test_a_polymorphic_call_refuses_values_that_disagree(prelude):
    double = vm.Closure(index(prelude, "double"), [])
    ints = make_list(prelude, [np.ones(1, np.int32)])
    with pytest.raises(TypeError, match=r"map\(\): argument 1 \('xs'\) field 0 expected a tensor"):
        prelude.invoke("map", double, ints)


def test_a_cyclic_list_is_refused(prelude):
    cell = vm.ADT(tags(prelude)["Cons"], [np.int32(1), None], "Cons")
    cell.fields = (np.int32(1), cell)
    with pytest.raises(TypeError, match="contains itself"):
        prelude.invoke("main", cell)


def test_a_100000_long_caller_made_list_is_checked_without_recursion(prelude):
    items = make_list(prelude, [np.array(1, np.int32)] * 100_000)
    assert int(prelude.invoke("main", items)) == 100_000


@pytest.mark.parametrize(
    ("value", "error", "message"),
    [
        ((f32(0, 0),), TypeError, r"expected a tuple of 2 fields"),
        ((f32(0, 0), (np.int32(3), f32(1, 2))), ValueError, r"field 1 field 1 has invalid"),
        (
            (f32(0, 0), (np.array(3, np.float32), f32(1))),
            TypeError,
            r"field 1 field 0 expected a tensor",
        ),
        ((f32(0, 0), np.int32(3)), TypeError, r"field 1 expected a tuple"),
    ],
)
def test_tuples_of_the_wrong_arity_dtype_or_shape_are_refused(closures, value, error, message):
    with pytest.raises(error, match=message):
        closures.invoke("pair", value)


# ---- the executable carries the types ---------------------------------------------------------


def test_signatures_and_field_types_survive_save_and_load(prelude):
    exe = prelude.executable
    loaded = Executable.load_exec(*exe.save())
    assert loaded.constructors == exe.constructors
    assert loaded.get_function("map").param_types == exe.get_function("map").param_types
    cons = next(c for c in loaded.constructors if c.name == "Cons")
    assert cons.field_types == (("var", 0), ("adt", "List", (("var", 0),)))


# ---- invalid: executables whose types are wrong --------------------------------------------------


def _with_constructor(**fields):
    b = ExecutableBuilder()
    b.add_constructor(1, "Box", 1, "Box", **fields)
    spec = ("adt", "Box", (("tensor", (), "int32"),))
    f = b.function("main", ["x"], [spec], spec)
    f.emit(O.Ret, 0)
    b.add_function(f)
    return b


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"type_arity": 1, "field_types": [("var", 1)]}, "type variable 1 is not one of"),
        ({"type_arity": 1, "field_types": []}, "1 fields need 1 field types"),
        ({"type_arity": 1, "field_types": [("tensor", (), "int33")]}, "type of field 0"),
    ],
)
def test_bad_constructor_field_types_are_invalid(fields, message):
    with pytest.raises(InvalidExecutableError, match=message):
        _with_constructor(**fields).build()


def test_a_builder_made_box_is_checked_by_its_field_types():
    exe = _with_constructor(type_arity=1, field_types=[("var", 0)]).build()
    machine = vm.VirtualMachine(exe)
    box = vm.ADT(1, [np.int32(5)], "Box")
    assert int(machine.invoke("main", box)[0]) == 5
    with pytest.raises(TypeError, match=r"field 0 expected a tensor int32\[\]"):
        machine.invoke("main", vm.ADT(1, [np.array(5.0)], "Box"))
