"""vm.NDArray and vm.nd: numpy arrays that also answer TVM's NDArray methods (issue 14 item 2);
vm.ndarray.frozen, the read-only arrays constants hold without a copy at every stage."""

from __future__ import annotations

import numpy as np
import pytest

import vm
from compiler import relay
from vm.interpreter import export
from vm.ndarray import frozen

# ---- returns ------------------------------------------------------------------------------------


def test_nd_array_copies_into_an_ndarray_that_answers_numpy_and_asnumpy():
    source = np.arange(6, dtype=np.float32).reshape(2, 3)
    array = vm.nd.array(source)
    assert type(array) is vm.NDArray and isinstance(array, np.ndarray)
    assert not np.shares_memory(array, source)
    for plain in (array.numpy(), array.asnumpy()):
        assert type(plain) is np.ndarray
        np.testing.assert_array_equal(plain, source)
    assert vm.nd.array([1, 2], dtype="int64").dtype == np.int64
    assert vm.nd.NDArray is vm.NDArray


def test_nd_empty_has_the_shape_and_dtype_asked_for():
    array = vm.nd.empty((2, 3), "int32", vm.cpu())
    assert type(array) is vm.NDArray and array.shape == (2, 3) and array.dtype == np.int32
    assert vm.nd.empty(4).shape == (4,)


def test_copyfrom_and_copyto():
    array = vm.nd.empty((2,), "float32")
    array.copyfrom(np.array([1.0, 2.0], np.float32))
    target = np.zeros(2, np.float32)
    assert array.copyto(target) is target
    np.testing.assert_array_equal(target, [1.0, 2.0])


def test_export_views_every_tensor_without_copying():
    x = np.ones(3, np.float32)
    adt = vm.ADT(1, [x, (x,)], "Box")
    result = export((x, adt))
    assert type(result[0]) is vm.NDArray and np.shares_memory(result[0], x)
    assert type(result[1][0]) is vm.NDArray and type(result[1][1][0]) is vm.NDArray


def test_create_executor_results_answer_numpy():
    x = relay.var("x", shape=(2,), dtype="float32")
    mod = relay.IRModule.from_expr(relay.Function([x], relay.Tuple([x + x, x])))
    data = np.array([1.0, 2.0], np.float32)
    for kind in ("debug", "vm"):
        result = relay.create_executor(kind, mod=mod).evaluate()(data)
        np.testing.assert_array_equal(result[0].numpy(), [2.0, 4.0])
        assert type(result[1].asnumpy()) is np.ndarray


def test_graph_executor_get_output_answers_numpy_and_fills_out():
    from vm.graph_executor import GraphModule

    x = relay.var("x", shape=(2,), dtype="float32")
    mod = relay.IRModule.from_expr(relay.Function([x], x + x))
    factory = relay.build(mod, "llvm")
    module = GraphModule(factory["default"](vm.cpu()))
    module.set_input("x", np.array([1.0, 3.0], np.float32))
    module.run()
    np.testing.assert_array_equal(module.get_output(0).numpy(), [2.0, 6.0])
    out = vm.nd.empty((2,), "float32")
    assert module.get_output(0, out) is out
    np.testing.assert_array_equal(out.asnumpy(), [2.0, 6.0])


def _vm_of(mod):
    return vm.VirtualMachine(relay.vm.compile(mod, "llvm"), vm.cpu())


def test_invoke_results_are_ndarrays_from_kernels_inputs_and_constants():
    x = relay.var("x", shape=(2,), dtype="float32")
    const = relay.const(np.array([5.0, 6.0], np.float32))
    mod = relay.IRModule.from_expr(relay.Function([x], relay.Tuple([x + x, x, const])))
    machine = _vm_of(mod)
    data = np.array([1.0, 2.0], np.float32)
    doubled, same, constant = machine.invoke("main", data)
    assert {type(doubled), type(same), type(constant)} == {vm.NDArray}
    np.testing.assert_array_equal(doubled.numpy(), [2.0, 4.0])
    np.testing.assert_array_equal(same.asnumpy(), data)
    assert np.shares_memory(same, data)  # an input comes back without a copy, as before
    assert constant.flags.writeable
    constant[0] = 0.0  # the caller owns it: the executable's constant is untouched
    np.testing.assert_array_equal(machine.invoke("main", data)[2].numpy(), [5.0, 6.0])


def test_a_lone_result_is_a_writable_ndarray_whether_made_here_or_passed_in():
    # x + x is returned straight from the VM's allocation; the identity function hands
    # back its read-only input, which must still be copied into a writable NDArray.
    x = relay.var("x", shape=(2,), dtype="float32")
    doubled = _vm_of(relay.IRModule.from_expr(relay.Function([x], x + x)))
    same = _vm_of(relay.IRModule.from_expr(relay.Function([x], x)))
    data = np.array([1.0, 2.0], np.float32)
    data.flags.writeable = False
    made, echoed = doubled.invoke("main", data), same.invoke("main", data)
    assert type(made) is vm.NDArray and type(echoed) is vm.NDArray
    assert made.flags.writeable and echoed.flags.writeable
    assert not np.shares_memory(echoed, data)
    np.testing.assert_array_equal(made.numpy(), [2.0, 4.0])
    np.testing.assert_array_equal(echoed.numpy(), data)


def test_an_ndarray_result_passed_back_in_is_accepted_as_is():
    x = relay.var("x", shape=(2,), dtype="float32")
    machine = _vm_of(relay.IRModule.from_expr(relay.Function([x], x + x)))
    once = machine.invoke("main", vm.nd.array(np.array([1.0, 2.0], np.float32)))
    twice = machine.invoke("main", once)
    assert type(twice) is vm.NDArray
    np.testing.assert_array_equal(twice.numpy(), [4.0, 8.0])


def test_stateful_outputs_and_adt_fields_are_ndarrays():
    x = relay.var("x", shape=(2,), dtype="float32")
    mod = relay.IRModule.from_expr(relay.Function([x], relay.Tuple([x + x, relay.exp(x)])))
    machine = _vm_of(mod)
    machine.set_input("main", np.zeros(2, np.float32))
    machine.invoke_stateful("main")
    outputs = machine.get_outputs()
    assert [type(o) for o in outputs] == [vm.NDArray, vm.NDArray]
    np.testing.assert_array_equal(outputs[1].numpy(), [1.0, 1.0])


# ---- invalid ------------------------------------------------------------------------------------


def test_nd_empty_refuses_a_bad_shape_and_nd_array_a_bad_device():
    with pytest.raises(ValueError, match="shape must be non-negative ints"):
        vm.nd.empty((2, -1))
    with pytest.raises(TypeError, match=r"a device must be vm\.cpu"):
        vm.nd.array([1], device="gpu")


def test_copyfrom_refuses_another_shape():
    with pytest.raises(ValueError, match=r"the source has shape \(3,\)"):
        vm.nd.empty((2,)).copyfrom(np.zeros(3))


def test_frozen_takes_an_array_read_only_down_to_its_owner_as_it_is():
    owner = np.arange(6.0)
    owner.flags.writeable = False
    view = owner.reshape(2, 3)
    view.flags.writeable = False
    assert frozen(owner) is owner and frozen(view) is view


def test_frozen_copies_what_something_else_could_write_or_keep_alive():
    writable = np.arange(4.0)
    read_only_view = writable[1:]
    read_only_view.flags.writeable = False
    of_bytes = np.frombuffer(b"\x00" * 16, np.float32)  # read-only, but a view of bytes
    subclass = vm.nd.array(np.arange(3.0))
    subclass.flags.writeable = False
    for array in (writable, read_only_view, of_bytes, subclass):
        got = frozen(array)
        assert type(got) is np.ndarray and not got.flags.writeable
        assert not np.shares_memory(got, array)
        np.testing.assert_array_equal(got, array)
    writable[1] = 7.0  # the copy keeps the value it had
    assert frozen(writable)[1] == 7.0 and read_only_view[0] == 7.0
