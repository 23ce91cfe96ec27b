"""Code generation for dynamic output shapes and zero-copy reshapes (compiler.backend.dynamic).

Returns: the opcode sequences the code generator emits (shape_of, the shape function's
invoke_packed, alloc_storage of a size in a register, alloc_tensor_reg; reshape_tensor with
a constant or computed shape), the shape function primitives it adds, and what the memory
plan makes of views (no buffer; the view refers to its input's buffer) and of dynamic
outputs (not in the pool). Invalid: an executable holding a malformed shape function is
refused when it is built or loaded. Nothing here runs a kernel.
"""

from __future__ import annotations

import numpy as np
import pytest

import vm
from compiler import relay
from compiler.backend import memory_plan as mp
from compiler.backend.dynamic import has_dynamic_output, lowers_here
from compiler.backend.kernel_desc import describe_primitive
from compiler.backend.views import is_view_primitive
from compiler.ir.expr import Call, Function
from compiler.ir.visitor import post_order
from compiler.relay.vm import optimize
from compiler.transform.typed_rewrite import is_primitive
from tests.compiler.transform.util import parse
from vm.builder import ExecutableBuilder
from vm.isa import Opcode
from vm.shape_funcs import is_shape_func, shape_func_description


def compile_text(text: str, opt_level: int = 2) -> vm.Executable:
    with relay.transform.PassContext(opt_level=opt_level):
        return relay.vm.compile(parse(text))


def opcodes(exe: vm.Executable, name: str = "main") -> list[str]:
    return [Opcode(i.opcode).name for i in exe.get_function(name).instructions]


def instructions(exe: vm.Executable, opcode: Opcode, name: str = "main") -> list:
    return [i for i in exe.get_function(name).instructions if i.opcode == opcode]


def primitive_calls(text: str, opt_level: int = 2) -> list[Call]:
    with relay.transform.PassContext(opt_level=opt_level):
        lowered, _ = optimize(parse(text))
    return [n for n in post_order(lowered["main"]) if isinstance(n, Call) and is_primitive(n.op)]


# --- returns: which calls are lowered here --------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "view"),
    [
        ("reshape(%x, newshape=[-1])", True),
        ("expand_dims(squeeze(%x, axis=[0]), axis=1)", True),
        ("nn.batch_flatten(%x)", True),
        ("exp(reshape(%x, newshape=[-1]))", False),
        ("transpose(%x)", False),
        ("copy(%x)", False),
    ],
)
def test_view_primitives_are_chains_of_reshape_like_operators(body: str, view: bool) -> None:
    (call,) = primitive_calls(f"def @main(%x: Tensor[(1, 2, 3), float32]) {{ {body} }}")
    assert is_view_primitive(call.op) is view
    assert lowers_here(call.op, call) is view  # static shapes: only views come here


def test_calls_with_a_dynamic_output_are_lowered_here() -> None:
    calls = primitive_calls(
        "def @main(%x: Tensor[(?, 3), float32]) { (exp(%x), sum(%x, axis=[0])) }", opt_level=0
    )
    assert [has_dynamic_output(c) for c in calls] == [True, False]
    assert [lowers_here(c.op, c) for c in calls] == [True, False]


# --- returns: bytecode ---------------------------------------------------------------------------


def test_a_static_reshape_is_load_const_and_reshape_tensor_without_a_kernel() -> None:
    exe = compile_text("def @main(%x: Tensor[(2, 6), float32]) { reshape(%x, newshape=[3, -1]) }")
    assert opcodes(exe) == ["LoadConst", "ReshapeTensor", "Ret"]
    assert exe.primitives == ()
    (shape,) = exe.constant_values
    assert shape.dtype == np.int64 and shape.tolist() == [3, 4]


def test_a_dynamic_output_gets_its_shape_at_run_time() -> None:
    exe = compile_text("def @main(%x: Tensor[(?, 2), float32]) { exp(%x) }")
    assert opcodes(exe) == [
        "ShapeOf",
        "LoadConsti",
        "AllocStorage",
        "AllocTensor",
        "AllocTensor",
        "InvokePacked",
        "AllocStorage",
        "AllocTensorReg",
        "InvokePacked",
        "Ret",
    ]
    kernel, shape_func = exe.primitives
    assert shape_func.name == "vm_mod_fused_exp_shape_func" and kernel.name == "vm_mod_fused_exp"
    assert is_shape_func(shape_func.description)
    assert shape_func.description == shape_func_description(kernel.description)
    code = exe.get_function("main").instructions
    shape_of, _, _, shape_vec, size, sf_call, storage, out, call = code[:9]
    assert sf_call.args == (shape_of.dst, shape_vec.dst, size.dst) and sf_call.num_outputs == 2
    assert shape_vec.shape == (2,) and shape_vec.dtype == "int64" and size.shape == ()
    assert storage.size == size.dst  # the storage is sized by the shape function
    assert out.shape_reg == shape_vec.dst and out.storage == storage.dst and out.dtype == "float32"
    assert call.args == (0, out.dst)


def test_inputs_of_static_shape_pass_their_shape_as_a_constant() -> None:
    exe = compile_text(
        "def @main(%x: Tensor[(?, 4), float32], %w: Tensor[(3, 4), float32]) { nn.dense(%x, %w) }"
    )
    (shape_of,) = instructions(exe, Opcode.ShapeOf)
    assert shape_of.tensor == 0
    assert [c.tolist() for c in exe.constant_values] == [[3, 4]]


def test_a_chain_of_dynamic_kernels_reuses_each_computed_shape() -> None:
    exe = compile_text(
        "def @main(%x: Tensor[(?, 2), float32]) { %0 = exp(%x); sum(%0, axis=[1]) }",
        opt_level=0,
    )
    assert opcodes(exe).count("ShapeOf") == 1  # the sum reads the exp's shape vector
    packed = instructions(exe, Opcode.InvokePacked)
    first_shape = packed[0].args[1]
    assert packed[2].args[0] == first_shape


def test_calls_of_one_kernel_share_one_shape_function() -> None:
    exe = compile_text(
        "def @main(%x: Tensor[(?, 2), float32], %y: Tensor[(?, 2), float32]) {  (exp(%x), exp(%y))}"
    )
    assert [p.name for p in exe.primitives] == ["vm_mod_fused_exp", "vm_mod_fused_exp_shape_func"]
    assert len(instructions(exe, Opcode.InvokePacked)) == 4


def test_a_dynamic_reshape_uses_the_shape_function_and_no_kernel() -> None:
    exe = compile_text("def @main(%x: Tensor[(?, 6), float32]) { reshape(%x, newshape=[0, 2, 3]) }")
    assert opcodes(exe)[-2:] == ["ReshapeTensor", "Ret"]
    (primitive,) = exe.primitives
    assert primitive.name == "vm_mod_fused_reshape_shape_func"
    # A static output of a dynamic input is checked at run time as well (naming reshape).
    exe = compile_text("def @main(%x: Tensor[(?, 6), float32]) { reshape(%x, newshape=[2, 6]) }")
    assert "ShapeOf" in opcodes(exe) and opcodes(exe)[-2:] == ["ReshapeTensor", "Ret"]


def test_squeeze_without_axis_gets_the_axes_its_type_removed() -> None:
    exe = compile_text("def @main(%x: Tensor[(1, 3, ?, 1), float32]) { squeeze(%x) }")
    (primitive,) = exe.primitives
    (node,) = primitive.description["shape_func"]["nodes"]
    assert node["op"] == "squeeze" and node["attrs"]["axis"] == [0, 3]


def test_tuple_outputs_of_dynamic_shape_are_allocated_one_by_one() -> None:
    exe = compile_text(
        "def @main(%x: Tensor[(?, 4), float32]) { split(%x, indices_or_sections=2, axis=1) }"
    )
    assert opcodes(exe).count("AllocTensorReg") == 2
    shape_call, kernel_call = instructions(exe, Opcode.InvokePacked)
    assert shape_call.num_outputs == 4 and kernel_call.num_outputs == 2
    assert opcodes(exe)[-2:] == ["AllocADT", "Ret"]


def test_executables_with_shape_functions_save_and_load() -> None:
    exe = compile_text(
        "def @main(%x: Tensor[(?, 2), float32]) { reshape(exp(%x), newshape=[-1]) }", opt_level=0
    )
    loaded = vm.Executable.load_exec(exe.save()[0])
    assert loaded.save()[0] == exe.save()[0]
    assert [is_shape_func(p.description) for p in loaded.primitives] == [False, True, True]


# --- returns: the memory plan ---------------------------------------------------------------------


def _plan(text: str, opt_level: int = 2) -> mp.FunctionPlan:
    with relay.transform.PassContext(opt_level=opt_level):
        lowered, _ = optimize(parse(text))
    return mp.plan_function(lowered["main"])


def test_a_view_has_no_buffer_and_keeps_its_input_alive_while_it_is_used() -> None:
    plan = _plan(
        "def @main(%x: Tensor[(4, 4), float32]) {"
        "  %0 = exp(%x); %1 = reshape(%0, newshape=[16]); %2 = exp(%x); (%1, %2)"
        "}",
        opt_level=0,
    )
    views = [c for c in plan.calls if is_view_primitive(c.call.op)]
    (view,) = views
    assert view.outputs == ()
    (source,) = plan.calls[0].outputs
    assert plan.alias(view.call) == frozenset({source})
    assert plan.objects[source].escapes  # returned through the view
    assert len(plan.buffers) == 2


def test_dynamic_outputs_are_not_part_of_the_pool() -> None:
    plan = _plan(
        "def @main(%x: Tensor[(?, 4), float32]) { %0 = exp(%x); (%0, sum(%x, axis=[0])) }",
        opt_level=0,
    )
    dynamic, static = plan.buffers
    assert dynamic.nbytes is None and dynamic.storage is None
    assert static.storage == 0 and plan.storages == (16,)


# --- invalid -------------------------------------------------------------------------------------


def _bad_executable(description: dict) -> ExecutableBuilder:
    builder = ExecutableBuilder()
    builder.declare("main")
    fb = builder.function("main", ["x"], [("tensor", (2,), "int64")], ("tensor", (2,), "int64"))
    fb.emit(Opcode.Ret, 0)
    builder.add_function(fb)
    builder.add_primitive("vm_mod_fused_exp_shape_func", description)
    return builder


def test_a_malformed_shape_function_is_refused_when_built_and_when_loaded() -> None:
    (call,) = primitive_calls("def @main(%x: Tensor[(?, 2), float32]) { exp(%x) }")
    assert isinstance(call.op, Function)
    good = shape_func_description(describe_primitive(call.op)[1])
    data = _bad_executable(good).build().save()[0]
    assert vm.Executable.load_exec(data).primitives[0].description == good
    bad = dict(good, outputs=[["int64", 1]])
    with pytest.raises(vm.InvalidExecutableError, match=r"primitive 0.*outputs must be"):
        _bad_executable(bad).build()
    tampered = data.replace(b"shape_func", b"shape_fun_")
    with pytest.raises(vm.ExecutableLoadError, match="kernel"):
        vm.Executable.load_exec(tampered)
