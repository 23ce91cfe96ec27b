"""relay.vm.compile's optimizing pipeline: what runs at which opt_level, params folding,
fusion in the lowered module, pass instruments, determinism and kernel names.

These tests inspect the lowered module and the bytecode only; nothing here builds a
kernel (the end-to-end runs are in ``tests/e2e/test_fused_programs.py``).
"""

from __future__ import annotations

import numpy as np
import pytest

from compiler import relay
from compiler.backend.kernel_desc import MAX_READABLE_NAME, kernel_base_name
from compiler.ir.expr import Call, Constant, Function, Let
from compiler.ir.visitor import post_order
from compiler.transform.typed_rewrite import is_primitive
from vm.isa import Opcode

T = relay.transform
HEADER = '#[version = "0.0.5"]\n'
V4 = "Tensor[(4), float32]"
RNG = np.random.default_rng(3)


def parse(text: str) -> relay.IRModule:
    return relay.fromtext(HEADER + text)


def kernels(mod: relay.IRModule) -> list[list[str]]:
    """The operators of each primitive called in ``mod``, calls in evaluation order."""
    out = []
    for func in mod.functions.values():
        for node in post_order(func):
            if isinstance(node, Call) and is_primitive(node.op):
                body = node.op.body  # type: ignore[attr-defined]
                out.append([n.op.name for n in post_order(body) if isinstance(n, Call)])
    return out


def opcodes(exe: object, name: str = "main") -> list[str]:
    code = exe.get_function(name).instructions  # type: ignore[attr-defined]
    return [Opcode(i.opcode).name for i in code]


CHAIN = f"def @main(%x: {V4}) {{ negative(exp(negative(exp(%x)))) }}"


def _bn_net() -> tuple[relay.IRModule, dict[str, np.ndarray]]:
    """dense -> batch_norm -> relu -> dropout -> dense + bias, with its weights."""
    x = relay.var("x", shape=(2, 6))
    names = ("w1", "gamma", "beta", "mean", "var", "w2", "b2")
    shapes = ((5, 6), (5,), (5,), (5,), (5,), (3, 5), (3,))
    w1, gamma, beta, mean, var, w2, b2 = (relay.var(n, shape=s) for n, s in zip(names, shapes))
    h = relay.nn.batch_norm(relay.nn.dense(x, w1), gamma, beta, mean, var)[0]
    h = relay.nn.dropout(relay.nn.relu(h), rate=0.3)
    out = relay.nn.bias_add(relay.nn.dense(h, w2), b2)
    func = relay.Function([x, w1, gamma, beta, mean, var, w2, b2], out)
    params = {n: RNG.standard_normal(s).astype("float32") for n, s in zip(names, shapes)}
    params["var"] = np.abs(params["var"]) + 0.5
    return relay.IRModule.from_expr(func), params


# --- returns: the default pipeline ----------------------------------------------------------------


def test_default_compile_fuses_an_elementwise_chain_into_one_kernel() -> None:
    lowered, _ = relay.vm.optimize(parse(CHAIN))
    assert kernels(lowered) == [["exp", "negative", "exp", "negative"]]
    exe = relay.vm.compile(parse(CHAIN))
    assert opcodes(exe).count("InvokePacked") == 1
    assert exe.primitive_ops == ["vm_mod_fused_exp_negative_exp_negative"]


def test_the_lowered_module_is_a_normal_and_lambda_lifted() -> None:
    text = f"""
    def @main(%x: {V4}) {{
      let %f = fn (%y: {V4}) {{ exp(%y) + %x }};
      negative(%f(%x) * 2f)
    }}"""
    lowered, _ = relay.vm.optimize(parse(text))
    assert sorted(gv.name_hint for gv in lowered.get_global_vars()) == ["main", "main_lifted_0"]
    assert kernels(lowered) == [["multiply", "negative"], ["exp", "add"]]  # @main first
    body = lowered["main"].body
    while isinstance(body, Let):
        assert not isinstance(body.value, Let)
        body = body.body


def test_opt_level_zero_gives_one_kernel_per_operator() -> None:
    with T.PassContext(opt_level=0):
        exe = relay.vm.compile(parse(CHAIN))
    assert opcodes(exe).count("InvokePacked") == 4
    assert exe.primitive_ops == ["vm_mod_fused_exp", "vm_mod_fused_negative"]


def test_disabling_fuse_ops_by_name_leaves_one_primitive_per_operator() -> None:
    with T.PassContext(opt_level=3, disabled_pass=["FuseOps"]):
        lowered, _ = relay.vm.optimize(parse(CHAIN))
    assert kernels(lowered) == [["exp"], ["negative"], ["exp"], ["negative"]]


def test_params_bind_and_fold_batch_norm_into_the_dense_epilogue() -> None:
    mod, params = _bn_net()
    lowered, bound = relay.vm.optimize(mod, params=params)
    assert bound == params
    assert [p.name_hint for p in lowered["main"].params] == ["x"]
    assert kernels(lowered) == [
        ["nn.dense", "multiply", "add", "nn.relu"],
        ["nn.dense", "nn.bias_add"],
    ]
    constants = [n for n in post_order(lowered["main"]) if isinstance(n, Constant)]
    # Two weight matrices, the bias, and batch_norm folded into one scale and one shift.
    assert sorted(c.data.shape for c in constants) == [(3,), (3, 5), (5,), (5,), (5, 6)]
    exe = relay.vm.compile(mod, params=params)
    assert exe.primitive_ops == [
        "vm_mod_fused_nn_dense_multiply_add_nn_relu",
        "vm_mod_fused_nn_dense_nn_bias_add",
    ]
    assert exe.get_function_params("main") == ["x"]


def test_without_constant_folding_the_weights_arithmetic_stays_in_kernels() -> None:
    mod, params = _bn_net()
    with T.PassContext(opt_level=2, disabled_pass=["FoldConstant"]):
        lowered, _ = relay.vm.optimize(mod, params=params)
    ops = [op for group in kernels(lowered) for op in group]
    assert "rsqrt" in ops or "sqrt" in ops
    assert "nn.batch_norm" not in ops and "nn.dropout" not in ops


@pytest.mark.parametrize(("opt_level", "merged"), [(1, False), (2, True), (3, True)])
def test_common_subexpressions_merge_from_the_default_opt_level(
    opt_level: int, merged: bool
) -> None:
    text = f"def @main(%x: {V4}) {{ add(exp(%x), exp(%x)) }}"
    with T.PassContext(opt_level=opt_level):
        lowered, _ = relay.vm.optimize(parse(text))
    assert kernels(lowered) == ([["exp", "add"]] if merged else [["exp", "exp", "add"]])


def test_the_default_opt_level_packs_dense_weights_like_opt_level_3() -> None:
    x = relay.var("x", shape=(1, 256))
    w = relay.const(RNG.standard_normal((128, 256)).astype("float32"))
    mod = relay.IRModule.from_expr(relay.Function([x], relay.nn.relu(relay.nn.dense(x, w))))
    default, _ = relay.vm.optimize(mod)
    with T.PassContext(opt_level=3):
        level3, _ = relay.vm.optimize(mod)
    assert kernels(default) == kernels(level3) == [["nn.contrib_dense_pack", "nn.relu"]]


def test_pass_timing_sees_every_step_of_the_pipeline() -> None:
    timing = T.PassTimingInstrument()
    with T.PassContext(opt_level=3, instruments=[timing]):
        relay.vm.optimize(parse(CHAIN))
    names = [name for _, name, _ in timing.timings()]
    for step in (
        "SimplifyInference",
        "FoldConstant",
        "EliminateCommonSubexpr",
        "DeadCodeElimination",
        "EtaExpand",
        "InferType",
        "FuseOps",
        "WrapPrimitives",
        "ToANormalForm",
        "LambdaLift",
    ):
        assert step in names, f"{step} did not run: {names}"
    assert names.index("FoldConstant") < names.index("FuseOps") < names.index("LambdaLift")


def test_dead_bindings_left_by_simplify_inference_are_removed_at_every_opt_level() -> None:
    text = f"""
    def @main(%x: Tensor[(2, 4), float32], %g: {V4}, %b: {V4}, %m: {V4}, %v: {V4}) {{
      let %bn = nn.batch_norm(%x, %g, %b, %m, %v);
      let %y = %bn.0;
      %y
    }}"""
    with T.PassContext(opt_level=0):
        lowered, _ = relay.vm.optimize(parse(text))
    ops = {op for group in kernels(lowered) for op in group}
    assert "nn.batch_norm" not in ops


def test_layer_norm_is_one_kernel_and_group_norm_becomes_arithmetic() -> None:
    text = f"""
    def @main(%x: Tensor[(2, 4), float32], %g: {V4}, %b: {V4}) {{
      add(nn.layer_norm(%x, %g, %b), nn.group_norm(%x, %g, %b, num_groups=2))
    }}"""
    lowered, _ = relay.vm.optimize(parse(text))
    groups = kernels(lowered)
    assert ["nn.layer_norm"] in groups
    assert not any("nn.group_norm" in group for group in groups)


def test_the_same_module_compiles_to_the_same_bytes() -> None:
    text = f"""
    def @main(%x: {V4}, %c: bool) {{
      let %f = fn (%y: {V4}) {{ exp(%y) * 1.5f + 0.25f }};
      if (%c) {{ (%f(%x), sum(%x * %x)) }} else {{ (negative(%x), max(%x)) }}
    }}"""
    first, second = (relay.vm.compile(parse(text)).save()[0] for _ in range(2))
    assert first == second


def test_a_10000_deep_let_chain_compiles_into_groups_of_at_most_256() -> None:
    depth = 10_000
    lines = ["def @main(%x0: float32) -> float32 {"]
    lines += [f"  let %x{i + 1} = negative(%x{i});" for i in range(depth)]
    lines += [f"  %x{depth}", "}"]
    exe = relay.vm.compile(parse("\n".join(lines)))
    assert opcodes(exe).count("InvokePacked") == 40
    assert len(exe.primitive_ops) == 2  # 256 negatives, and the last 16


# --- kernel names ---------------------------------------------------------------------------------


def test_kernel_names_follow_tvm_and_long_ones_are_cut_with_a_hash() -> None:
    assert kernel_base_name(["nn.dense", "nn.bias_add"]) == "vm_mod_fused_nn_dense_nn_bias_add"
    long_ops = ["sin", "multiply", "cos", "add"] * 25
    name = kernel_base_name(long_ops)
    readable = "fused_" + "_".join(long_ops)
    assert name.startswith("vm_mod_" + readable[:MAX_READABLE_NAME] + "_")
    assert len(name) == len("vm_mod_") + MAX_READABLE_NAME + 1 + 16
    assert name != kernel_base_name(long_ops[:-1]) and name == kernel_base_name(long_ops)


@pytest.mark.parametrize("level", [0, 1, 2, 3])
def test_every_opt_level_compiles_a_program_with_control_flow_and_closures(level: int) -> None:
    text = f"""
    def @main(%x: {V4}, %n: int32) -> {V4} {{
      let %step = fn (%v: {V4}) {{ tanh(%v * 0.5f) }};
      if (%n > 0) {{ %step(@main(%x, %n - 1)) }} else {{ %x }}
    }}"""
    with T.PassContext(opt_level=level):
        lowered, _ = relay.vm.optimize(parse(text))
    assert all(isinstance(f, Function) for f in lowered.functions.values())
    expected = [["multiply"], ["tanh"]] if level == 0 else [["multiply", "tanh"]]
    assert [k for k in kernels(lowered) if "greater" not in k and "subtract" not in k] == expected
