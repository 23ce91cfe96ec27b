"""The VirtualMachine API around the loop: run, vm[name], stateful calls, saved functions,
invoke_closure (API.md "Running")."""

from __future__ import annotations

import numpy as np
import pytest

import vm
from tests.vm.interpreter_programs import closure_programs, scalar_programs


@pytest.fixture
def machine():
    return vm.VirtualMachine(scalar_programs())


def ints(values):
    return [int(v) for v in values]


# ---- returns ----------------------------------------------------------------------------------


def test_getitem_returns_a_callable_for_a_function(machine):
    assert ints(machine["swap"](1, 2)) == [2, 1]


def test_run_invokes_main():
    b = vm.builder.ExecutableBuilder()
    f = b.function("main", ["a"], [("tensor", (), "int64")], ("tensor", (), "int64"))
    f.emit(vm.isa.Opcode.Ret, 0)
    b.add_function(f)
    assert vm.VirtualMachine(b.build()).run(41) == 41


def test_keyword_arguments_fill_parameters_by_name(machine):
    assert ints(machine.invoke("swap", b=1, a=2)) == [1, 2]
    assert ints(machine.invoke("swap", 5, b=6)) == [6, 5]
    assert ints(machine.invoke("swap", 7, a=8)) == [7, 8]  # positional fills the free slot


def test_set_input_then_invoke_with_no_arguments(machine):
    machine.set_input("swap", 1, b=2)
    assert ints(machine.invoke("swap")) == [2, 1]
    assert ints(machine.invoke("swap")) == [2, 1]


def test_invoke_with_arguments_keeps_them_as_inputs(machine):
    machine.invoke("swap", 3, 4)
    assert ints(machine.invoke("swap")) == [4, 3]


def test_invoke_stateful_and_get_outputs_of_a_tuple(machine):
    machine.set_input("swap", 1, 2)
    assert machine.invoke_stateful("swap") is None
    outputs = machine.get_outputs()
    assert isinstance(outputs, list) and ints(outputs) == [2, 1]


def test_get_outputs_of_a_single_tensor_is_a_one_element_list(machine):
    machine.set_input("pick", 3, 3)
    machine.invoke_stateful("pick")
    outputs = machine.get_outputs()
    assert len(outputs) == 1 and outputs[0] == 1 and outputs[0].flags.writeable


def test_invoke_stateful_of_a_function_without_parameters_needs_no_inputs(machine):
    machine.invoke_stateful("skip")
    assert machine.get_outputs()[0] == 2


def test_get_outputs_shows_the_latest_stateful_call(machine):
    machine.invoke_stateful("swap", 1, 2)
    machine.invoke_stateful("swap", 5, 6)
    assert ints(machine.get_outputs()) == [6, 5]


def test_a_saved_function_runs_with_its_bound_arguments(machine):
    machine.save_function("swap", "swap_saved", 1, b=9)
    assert ints(machine["swap_saved"]()) == [9, 1]
    assert ints(machine["swap_saved"]()) == [9, 1]


def test_a_saved_function_without_return_gives_none(machine):
    machine.save_function("swap", "quiet", 1, 2, include_return=False)
    assert machine["quiet"]() is None


def test_saved_arguments_are_converted_once_at_save_time(machine):
    machine.save_function("pick", "same", 3, 3)
    machine.save_function("pick", "same", 3, 4)  # saving again replaces it
    assert machine["same"]() == 0


def test_get_input_index(machine):
    assert machine.get_input_index("b", "swap") == 1
    assert machine.get_input_index("z", "swap") == -1


def test_invoke_closure_converts_its_arguments():
    machine = vm.VirtualMachine(closure_programs())
    closure = machine.invoke("make", 5)
    assert ints(machine.invoke_closure(closure, 6.0)) == [5, 6]


# ---- invalid uses ------------------------------------------------------------------------------


def test_invoke_stateful_without_set_input_is_a_value_error(machine):
    with pytest.raises(
        ValueError, match=r"no inputs set for swap: call set_input\('swap', \.\.\.\)"
    ):
        machine.invoke_stateful("swap")


def test_get_outputs_before_invoke_stateful_is_a_value_error(machine):
    with pytest.raises(ValueError, match="no outputs saved"):
        machine.get_outputs()


def test_invoke_without_arguments_or_inputs_says_so(machine):
    with pytest.raises(
        TypeError, match=r"swap\(\) takes 2 arguments \(a, b\) but 0 were given, and no inputs"
    ):
        machine.invoke("swap")


def test_an_unknown_keyword_is_a_type_error_naming_the_parameters(machine):
    with pytest.raises(
        TypeError, match=r"swap\(\) got an unexpected keyword argument 'c'; its parameters are a, b"
    ):
        machine.set_input("swap", 1, c=2)


def test_too_many_positional_arguments_with_keywords(machine):
    with pytest.raises(TypeError, match="1 given by keyword, so 1 positional"):
        machine.invoke("swap", 1, 2, b=3)


def test_a_saved_function_takes_no_arguments(machine):
    machine.save_function("swap", "s", 1, 2)
    with pytest.raises(TypeError, match="takes no arguments"):
        machine["s"](1)


def test_a_saved_name_may_not_shadow_a_function(machine):
    with pytest.raises(ValueError, match="has a function of that name"):
        machine.save_function("swap", "pick", 1, 2)


def test_save_function_checks_its_arguments_now(machine):
    with pytest.raises(TypeError, match=r"swap\(\) takes 2 arguments"):
        machine.save_function("swap", "bad", 1)


def test_invoke_closure_needs_a_closure(machine):
    with pytest.raises(
        TypeError, match=r"invoke_closure needs a vm\.Closure, got the Python int 3"
    ):
        machine.invoke_closure(3)


def test_invoke_closure_checks_the_captured_values_too():
    machine = vm.VirtualMachine(closure_programs())
    pair = machine.executable.globals.index("pair")
    with pytest.raises(
        TypeError,
        match=r"invoke_closure: the closure \(captured value 0 'c' of pair\) expected a tensor "
        r"int64\[\]",
    ):
        machine.invoke_closure(vm.Closure(pair, [np.zeros(3, np.float32)]), 1)
    with pytest.raises(
        TypeError, match=r"closure of pair\(\) takes 1 argument \(x\) but 2 were given"
    ):
        machine.invoke_closure(vm.Closure(pair, [np.int64(1)]), 1, 2)


def test_invoke_closure_rejects_an_index_outside_the_executable(machine):
    with pytest.raises(TypeError, match="function index 99"):
        machine.invoke_closure(vm.Closure(99, []))


# ---- TVM's signatures: returns ----------------------------------------------------------------


def test_constructor_takes_tvms_device_memory_cfg_and_profile():
    exe = scalar_programs()
    for memory_cfg in (None, "naive", "pooled", {vm.cpu(): "pooled"}):
        machine = vm.VirtualMachine(exe, vm.cpu(), memory_cfg, True)
        assert ints(machine.invoke("swap", 1, 2)) == [2, 1]


def test_get_outputs_of_a_named_function_is_its_last_stateful_result(machine):
    machine.invoke_stateful("swap", 1, 2)
    machine.invoke_stateful("is_five", 5)
    assert ints(machine.get_outputs("swap")) == [2, 1]
    assert ints(machine.get_outputs("is_five")) == [1]
    assert ints(machine.get_outputs()) == [1]


def test_get_num_outputs_counts_a_tuples_fields(machine):
    machine.invoke_stateful("swap", 1, 2)
    assert machine.get_num_outputs() == 2
    machine.invoke_stateful("is_five", 4)
    assert machine.get_num_outputs() == 1
    assert machine.get_num_outputs("swap") == 2


def test_set_one_input_by_index_and_name_fills_the_inputs(machine):
    machine.set_one_input("swap", 0, 3)
    machine.set_one_input("swap", "b", 4)
    machine.invoke_stateful("swap")
    assert ints(machine.get_outputs()) == [4, 3]
    machine.set_one_input("swap", a=9)  # the other input keeps its value
    assert ints(machine.invoke("swap")) == [4, 9]


def test_set_one_input_after_set_input_replaces_one_value(machine):
    machine.set_input("swap", 1, 2)
    machine.set_one_input("swap", 1, 7)
    assert ints(machine.invoke("swap")) == [7, 1]


# ---- TVM's signatures: invalid ------------------------------------------------------------------


def test_constructor_refuses_other_allocators_and_a_non_bool_profile():
    exe = scalar_programs()
    with pytest.raises(ValueError, match="memory_cfg must be None, 'naive' or 'pooled'"):
        vm.VirtualMachine(exe, vm.cpu(), "arena")
    with pytest.raises(TypeError, match="profile must be a bool"):
        vm.VirtualMachine(exe, vm.cpu(), None, "yes")


def test_max_call_depth_is_keyword_only():
    with pytest.raises(TypeError):
        vm.VirtualMachine(scalar_programs(), None, None, False, 100)


def test_get_outputs_of_a_function_not_run_statefully_is_a_value_error(machine):
    machine.invoke_stateful("swap", 1, 2)
    with pytest.raises(ValueError, match=r"invoke_stateful\('is_five'\) before get_outputs"):
        machine.get_outputs("is_five")
    with pytest.raises(KeyError, match="unknown function 'nope'"):
        machine.get_outputs("nope")
    with pytest.raises(ValueError, match="before get_num_outputs"):
        vm.VirtualMachine(scalar_programs()).get_num_outputs()


def test_stateful_call_with_inputs_partly_set_names_the_missing_ones(machine):
    machine.set_one_input("swap", "b", 4)
    with pytest.raises(ValueError, match="inputs of swap not set: a"):
        machine.invoke_stateful("swap")
    with pytest.raises(TypeError, match="inputs of swap not set: a"):
        machine.invoke("swap")


def test_set_one_input_checks_the_parameter_and_the_value(machine):
    with pytest.raises(KeyError, match="swap\\(\\) has no parameter 'c'; its parameters are a, b"):
        machine.set_one_input("swap", "c", 1)
    with pytest.raises(IndexError, match="index below 2"):
        machine.set_one_input("swap", 2, 1)
    with pytest.raises(TypeError, match=r"swap\(\): argument 1 \('b'\)"):
        machine.set_one_input("swap", "b", np.zeros(3, "float32"))
    with pytest.raises(TypeError, match="set_one_input takes one input"):
        machine.set_one_input("swap", a=1, b=2)
    with pytest.raises(TypeError, match="set_one_input takes one input"):
        machine.set_one_input("swap", 1)
    machine.set_one_input("swap", "a", 1)  # a failed call left nothing half-set
    with pytest.raises(ValueError, match="inputs of swap not set: b"):
        machine.invoke_stateful("swap")


# ---- threads: one VirtualMachine per thread, one Executable shared ------------------------------


def in_thread(fn):
    """Run ``fn`` in a new thread to completion; its result, or the exception it raised."""
    import threading

    box = {}

    def target():
        try:
            box["result"] = fn()
        except BaseException as err:  # handed back to the test
            box["error"] = err

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box.get("result")


@pytest.mark.parametrize(
    ("call", "what"),
    [
        (lambda m: m.set_input("swap", 5, 6), "set_input"),
        (lambda m: m.invoke("swap"), "invoke with no arguments"),
        (lambda m: m.invoke_stateful("swap"), "invoke_stateful"),
        (lambda m: m.get_outputs(), "get_outputs"),
    ],
)
def test_the_stateful_api_of_another_threads_machine_is_a_runtime_error(machine, call, what):
    machine.set_input("swap", 1, 2)
    machine.invoke_stateful("swap")
    with pytest.raises(RuntimeError, match=rf"{what}: .*one VirtualMachine per thread"):
        in_thread(lambda: call(machine))
    # The owner's inputs and outputs are untouched.
    assert ints(machine.invoke("swap")) == [2, 1]
    assert ints(machine.get_outputs()) == [2, 1]


def test_stateless_invoke_is_shared_without_disturbing_the_owners_inputs(machine):
    machine.set_input("swap", 1, 2)
    assert ints(in_thread(lambda: machine.invoke("swap", 7, 8))) == [8, 7]
    assert ints(machine.invoke("swap")) == [2, 1]


def test_a_machine_made_in_one_thread_belongs_to_the_first_thread_that_sets_inputs(machine):
    in_thread(lambda: machine.set_input("swap", 3, 4))
    with pytest.raises(RuntimeError, match="belongs to thread"):
        machine.invoke("swap")
    assert ints(machine.invoke("swap", 5, 6)) == [6, 5]
