"""relay.vm.compile's contract: targets, params binding, inputs it accepts, determinism."""

from __future__ import annotations

import numpy as np
import pytest

import vm
from compiler import relay
from compiler.relay.target import Target
from compiler.relay.vm import VMCompiler
from tests.e2e.harness import assert_same_value, check, parse

F3 = "Tensor[(3), float32]"
AFFINE = f"def @main(%x: {F3}, %w: {F3}, %b: {F3}) -> {F3} {{ %x * %w + %b }}"


@pytest.mark.parametrize(
    "target",
    [
        "llvm",
        "llvm -mcpu=skylake-avx512 -mattr=+avx512f,+avx2",
        "c",
        None,
        {"kind": "llvm", "mcpu": "znver3"},
        Target("llvm -mcpu=core-avx2"),
        Target("llvm", host="llvm"),
    ],
)
def test_every_cpu_target_gives_the_executable_of_cpu(target) -> None:
    mod = parse(AFFINE)
    expected, _ = relay.vm.compile(mod, target="cpu").save()
    code, _ = relay.vm.compile(mod, target).save()
    assert code == expected


def test_compile_takes_tvms_positional_order_mod_target_target_host_params() -> None:
    w = np.array([1.0, 2.0, 3.0], dtype="float32")
    exe = relay.vm.compile(parse(AFFINE), "llvm", "llvm", {"w": w})
    assert exe.get_function_params("main") == ["x", "b"]


@pytest.mark.parametrize("target", ["cuda", "vulkan -from_device=0", {"kind": "opencl"}])
def test_a_gpu_target_is_refused_naming_the_cpu_targets(target) -> None:
    with pytest.raises(
        ValueError, match="relayvm generates code for the host CPU only; use 'llvm'"
    ):
        relay.vm.compile(parse(AFFINE), target=target)
    with pytest.raises(ValueError, match="host CPU only"):
        relay.vm.compile(parse(AFFINE), "llvm", target)


@pytest.mark.parametrize("target", ["x86", "", "llvm mcpu=skylake"])
def test_an_unknown_or_malformed_target_is_refused(target) -> None:
    with pytest.raises(ValueError, match="target"):
        relay.vm.compile(parse(AFFINE), target=target)


def test_params_bind_main_parameters_by_name_as_constants() -> None:
    mod = parse(AFFINE)
    w = np.array([1.0, 2.0, 3.0], dtype="float32")
    b = np.array([0.5, 0.5, 0.5], dtype="float32")
    x = np.array([2.0, 2.0, -1.0], dtype="float32")
    exe = relay.vm.compile(mod, params={"w": w, "b": b, "unknown": w})
    assert exe.get_function_params("main") == ["x"]
    for executable in (exe, vm.Executable.load_exec(exe.save()[0])):
        got = vm.VirtualMachine(executable).invoke("main", x)
        assert_same_value(got, x * w + b)
    assert mod["main"].params[1].name_hint == "w", "the caller's module is not modified"


def test_a_function_is_compiled_as_the_main_of_a_new_module() -> None:
    x = relay.var("x", shape=(3,), dtype="float32")
    exe = relay.vm.compile(relay.Function([x], x * x))
    got = vm.VirtualMachine(exe).invoke("main", np.array([1.0, 2.0, 3.0], dtype="float32"))
    assert_same_value(got, np.array([1.0, 4.0, 9.0], dtype="float32"))


def test_other_inputs_are_refused() -> None:
    with pytest.raises(TypeError, match="expects an IRModule"):
        relay.vm.compile("def @main() { 1 }")


def test_ill_typed_program_raises_a_type_error() -> None:
    with pytest.raises(TypeError):
        relay.vm.compile(parse("def @main(%x: float32, %i: int32) { %x + %i }"))


def test_vm_compiler_object_compiles_one_module() -> None:
    compiler = VMCompiler()
    compiler.set_params({"b": np.zeros(3, dtype="float32")})
    compiler.lower(parse(AFFINE))
    compiler.codegen()
    exe = compiler.get_exec()
    assert exe.get_function_params("main") == ["x", "w"]
    with pytest.raises(RuntimeError, match="one module"):
        compiler.lower(parse(AFFINE))


def test_create_executor_vm_agrees_with_the_interpreter() -> None:
    mod = parse("def @main(%n: int32) -> int32 { if (%n > 0) { %n * 2 } else { 0 - %n } }")
    for n in (3, -4):
        got = relay.create_executor("vm", mod).evaluate()(np.int32(n))
        want = relay.create_executor("debug", mod).evaluate()(np.int32(n))
        assert_same_value(got, want)


def test_compiling_twice_and_saving_is_byte_identical() -> None:
    text = f"""
    def @main(%x: {F3}, %n: int32) -> ({F3}, int32) {{
      let %f = fn (%v: {F3}) -> {F3} {{ %v * %x }};
      (if (%n > 0) {{ %f(%x) }} else {{ %x }}, %n + 1)
    }}"""
    assert relay.vm.compile(parse(text)).save()[0] == relay.vm.compile(parse(text)).save()[0]
    check(parse(text), np.ones(3, dtype="float32"), np.int32(1))
