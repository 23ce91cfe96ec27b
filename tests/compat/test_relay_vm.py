"""TVM's Relay VM scripts, written from TVM's documentation, with only the imports changed.

Returns: the ``Executable.save`` docstring example (code and lib saved, loaded, run), the
stateful API, TVM's compile signatures and targets. Waiting: results' ``.numpy()``.
"""

from __future__ import annotations

import numpy as np
import pytest

from compiler import tvm
from compiler.tvm import relay


def test_executable_save_docstring_example():
    # define a simple network.
    x = relay.var("x", shape=(10, 10))
    f = relay.Function([x], x + x)
    mod = tvm.IRModule({"main": f})
    # create a Relay VM.
    dev = tvm.cpu()
    target = "llvm"
    executable = relay.vm.compile(mod, target)
    code, lib = executable.save()
    # save and load the code and lib file.
    tmp = tvm.contrib.utils.tempdir()
    path_lib = tmp.relpath("lib.so")
    lib.export_library(path_lib)
    with open(tmp.relpath("code.ro"), "wb") as fo:
        fo.write(code)
    loaded_lib = tvm.runtime.load_module(path_lib)
    loaded_code = bytearray(open(tmp.relpath("code.ro"), "rb").read())  # noqa: SIM115 (as TVM writes it)
    # deserialize.
    des_exec = tvm.runtime.vm.Executable.load_exec(loaded_code, loaded_lib)
    # execute the deserialized executable.
    x_data = np.random.rand(10, 10).astype("float32")
    des_vm = tvm.runtime.vm.VirtualMachine(des_exec, dev)
    res = des_vm.run(x_data)
    np.testing.assert_allclose(res, x_data + x_data)


def test_executable_save_docstring_example_prints_res_numpy():
    x = relay.var("x", shape=(10, 10))
    executable = relay.vm.compile(tvm.IRModule({"main": relay.Function([x], x + x)}), "llvm")
    des_vm = tvm.runtime.vm.VirtualMachine(executable, tvm.cpu())
    x_data = np.random.rand(10, 10).astype("float32")
    res = des_vm.run(x_data)
    np.testing.assert_allclose(res.numpy(), x_data + x_data)
    np.testing.assert_allclose(res.asnumpy(), x_data + x_data)
    np.testing.assert_allclose(des_vm.run(tvm.nd.array(x_data)).numpy(), x_data + x_data)


def affine_module():
    x = relay.var("x", shape=(1, 4))
    w = relay.var("w", shape=(3, 4))
    b = relay.var("b", shape=(3,))
    out = relay.nn.bias_add(relay.nn.dense(x, w), b)
    return tvm.IRModule.from_expr(relay.Function([x, w, b], relay.Tuple([out, relay.exp(out)])))


def test_stateful_calls_set_input_invoke_stateful_get_outputs():
    mod = affine_module()
    with tvm.transform.PassContext(opt_level=3):
        exe = relay.vm.compile(mod, target="llvm -mcpu=core-avx2", target_host="llvm")
    vm = tvm.runtime.vm.VirtualMachine(exe, tvm.cpu(0), memory_cfg="pooled")
    x = np.random.rand(1, 4).astype("float32")
    w = np.random.rand(3, 4).astype("float32")
    b = np.random.rand(3).astype("float32")
    vm.set_input("main", x, w, b=b)
    vm.invoke_stateful("main")
    assert vm.get_num_outputs() == 2
    out, exp_out = vm.get_outputs()
    np.testing.assert_allclose(out, x @ w.T + b, rtol=1e-5)
    np.testing.assert_allclose(exp_out, np.exp(x @ w.T + b), rtol=1e-5)
    assert vm.get_input_index("w", "main") == 1
    assert vm.get_input_index("nope", "main") == -1
    vm.set_one_input("main", "b", np.zeros(3, "float32"))
    vm.set_one_input("main", 0, x)
    vm.invoke_stateful("main")
    np.testing.assert_allclose(vm.get_outputs()[0], x @ w.T, rtol=1e-5)


def test_params_bound_at_compile_time_in_tvms_positional_order():
    mod = affine_module()
    params = {"w": np.random.rand(3, 4).astype("float32"), "b": np.ones(3, "float32")}
    exe = relay.vm.compile(mod, tvm.target.Target("llvm"), None, params)
    vm = tvm.runtime.vm.VirtualMachine(exe, tvm.cpu(), None, False)
    x = np.random.rand(1, 4).astype("float32")
    out, _ = vm.invoke("main", x)
    np.testing.assert_allclose(out, x @ params["w"].T + 1, rtol=1e-5)


def test_vm_compiler_object_and_a_gpu_target():
    compiler = relay.vm.VMCompiler()
    compiler.lower(affine_module(), "llvm")
    exe = compiler.get_exec()
    assert exe.get_function_params("main") == ["x", "w", "b"]
    with pytest.raises(ValueError, match="host CPU only"):
        relay.vm.compile(affine_module(), "cuda")
    assert tvm.runtime.enabled("llvm") and not tvm.runtime.enabled("cuda")
