"""Fused programs end to end: the reference interpreter, the VM and the VM after save/load agree.

Returns group: the 100-operator elementwise chain is one primitive and one kernel call;
an MLP fuses each dense with its bias and activation; a network with batch_norm and
dropout compiled with params folds them into the dense epilogue; reductions with
producers and epilogues, diamonds and fused code inside branches and loops compute what
the interpreter computes. Operators and dtypes repeat across tests so that few distinct
kernels are built (each is a numba compile the first time).
"""

from __future__ import annotations

from typing import Any

import numpy as np

import vm
from compiler import relay
from tests.e2e.harness import parse, run_all
from vm.isa import Opcode

RNG = np.random.default_rng(17)


def f32(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype("float32")


def assert_close(actual: Any, expected: Any, what: str, tol: float = 1e-5) -> None:
    """Values agree within ``tol``: fused numba kernels may round transcendental functions
    and sums differently from numpy by an ulp or so."""
    if isinstance(expected, tuple):
        assert isinstance(actual, tuple) and len(actual) == len(expected), what
        for a, e in zip(actual, expected):
            assert_close(a, e, what, tol)
        return
    assert isinstance(actual, np.ndarray), f"{what}: not an array: {actual!r}"
    assert actual.dtype == np.asarray(expected).dtype, f"{what}: dtype {actual.dtype}"
    np.testing.assert_allclose(actual, expected, rtol=tol, atol=tol, err_msg=what)


def check_three_ways(mod: relay.IRModule, *args: Any, tol: float = 1e-5) -> Any:
    reference, direct, after_load = run_all(mod, *args)
    assert_close(direct, reference, "VM vs interpreter", tol)
    assert_close(after_load, reference, "VM after save/load vs interpreter", tol)
    return direct


def invoke_packed_count(exe: vm.Executable, name: str = "main") -> int:
    code = exe.get_function(name).instructions
    return sum(1 for i in code if i.opcode == Opcode.InvokePacked)


# The benchmark's chain (benchmarks/models.py), so the test and the benchmark share a kernel.
CHAIN_PATTERN = (("sin", None), ("multiply", 1.5), ("cos", None), ("add", 0.25))


def chain_module(length: int = 100) -> relay.IRModule:
    x = relay.var("x", shape=(10, 10), dtype="float32")
    h: relay.Expr = x
    for name, constant in CHAIN_PATTERN * (length // len(CHAIN_PATTERN)):
        op = getattr(relay, name)
        h = op(h) if constant is None else op(h, relay.const(constant, "float32"))
    return relay.IRModule.from_expr(relay.Function([x], h))


def test_the_100_operator_chain_is_one_primitive_and_one_kernel_call() -> None:
    mod = chain_module(100)
    exe = relay.vm.compile(mod)
    assert len(exe.primitive_ops) == 1
    assert invoke_packed_count(exe) == 1
    (primitive,) = exe.primitives
    description = primitive.description
    assert len(description["nodes"]) == 100
    # The 50 scalar constants are two kernel inputs: 1.5 and 0.25.
    assert description["inputs"] == [["float32", 2], ["float32", 0], ["float32", 0]]
    got = check_three_ways(mod, f32(10, 10))
    x = np.linspace(-1, 1, 100, dtype="float32").reshape(10, 10)
    want = x
    for _ in range(25):
        want = np.cos(np.sin(want) * np.float32(1.5)) + np.float32(0.25)
    assert_close(vm.VirtualMachine(exe).invoke("main", x), want, "chain vs numpy")
    assert got.shape == (10, 10)


def _mlp() -> tuple[relay.IRModule, dict[str, np.ndarray]]:
    x = relay.var("x", shape=(3, 8))
    sizes = [(8, 16), (16, 16), (16, 4)]
    params: dict[str, np.ndarray] = {}
    h: relay.Expr = x
    weights = []
    for k, (fan_in, fan_out) in enumerate(sizes):
        w = relay.var(f"w{k}", shape=(fan_out, fan_in))
        b = relay.var(f"b{k}", shape=(fan_out,))
        weights += [w, b]
        params[f"w{k}"] = (f32(fan_out, fan_in) / np.sqrt(fan_in)).astype("float32")
        params[f"b{k}"] = f32(fan_out)
        h = relay.nn.bias_add(relay.nn.dense(h, w), b)
        if k < len(sizes) - 1:
            h = relay.nn.relu(h)
    return relay.IRModule.from_expr(relay.Function([x, *weights], h)), params


def test_an_mlp_fuses_dense_bias_and_relu_per_layer() -> None:
    mod, params = _mlp()
    exe = relay.vm.compile(mod)
    assert exe.primitive_ops == [
        "vm_mod_fused_nn_dense_nn_bias_add_nn_relu",
        "vm_mod_fused_nn_dense_nn_bias_add",
    ]
    assert invoke_packed_count(exe) == 3
    x = f32(3, 8)
    check_three_ways(mod, x, *params.values())
    bound = relay.vm.compile(mod, params=params)
    assert bound.primitive_ops == exe.primitive_ops
    reference = relay.create_executor("debug", mod).evaluate()(x, *params.values())
    for executable in (bound, vm.Executable.load_exec(bound.save()[0])):
        assert_close(vm.VirtualMachine(executable).invoke("main", x), reference, "bound MLP")


def test_batch_norm_and_dropout_fold_into_the_dense_epilogue_with_params() -> None:
    x = relay.var("x", shape=(4, 8))
    names = ("w1", "gamma", "beta", "mean", "var", "w2", "b2")
    shapes = ((16, 8), (16,), (16,), (16,), (16,), (4, 16), (4,))
    w1, gamma, beta, mean, var, w2, b2 = (relay.var(n, shape=s) for n, s in zip(names, shapes))
    h = relay.nn.batch_norm(relay.nn.dense(x, w1), gamma, beta, mean, var)[0]
    h = relay.nn.dropout(relay.nn.relu(h), rate=0.5)
    out = relay.nn.bias_add(relay.nn.dense(h, w2), b2)
    mod = relay.IRModule.from_expr(relay.Function([x, w1, gamma, beta, mean, var, w2, b2], out))
    params = {n: f32(*s) for n, s in zip(names, shapes)}
    params["var"] = np.abs(params["var"]) + 0.5

    exe = relay.vm.compile(mod, params=params)
    assert exe.primitive_ops == [
        "vm_mod_fused_nn_dense_multiply_add_nn_relu",
        "vm_mod_fused_nn_dense_nn_bias_add",
    ]
    assert exe.get_function_params("main") == ["x"]
    data = f32(4, 8)
    reference = relay.create_executor("debug", mod).evaluate()(data, *params.values())
    reloaded = vm.Executable.load_exec(exe.save()[0])
    for executable in (exe, reloaded):
        got = vm.VirtualMachine(executable).invoke("main", data)
        assert_close(got, reference, "folded batch_norm network", tol=1e-4)


def test_reductions_with_producers_and_epilogues_and_a_diamond() -> None:
    mod = parse("""
    def @main(%x: Tensor[(3, 10), float32]) {
      let %e = exp(%x);
      let %d = add(sin(%e), cos(%e));
      (multiply(sum(multiply(%x, %x), axis=[1]), 0.25f), %d)
    }""")
    exe = relay.vm.compile(mod)
    assert exe.primitive_ops == [
        "vm_mod_fused_exp_sin_cos_add",
        "vm_mod_fused_multiply_sum_multiply",
    ]
    check_three_ways(mod, f32(3, 10))


def test_fused_kernels_run_inside_branches_of_a_recursive_loop() -> None:
    mod = parse("""
    def @main(%x: Tensor[(10, 10), float32], %n: int32) -> Tensor[(10, 10), float32] {
      if (%n > 0) {
        let %h = @main(%x, %n - 1);
        add(cos(multiply(sin(%h), 1.5f)), 0.25f)
      } else {
        %x
      }
    }""")
    exe = relay.vm.compile(mod)
    assert "vm_mod_fused_sin_multiply_cos_add" in exe.primitive_ops
    check_three_ways(mod, f32(10, 10), np.array(5, dtype="int32"))
