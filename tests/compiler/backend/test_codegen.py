"""Bytecode generation: opcode sequences for small programs, storage, kernels, errors."""

from __future__ import annotations

import pytest

from compiler import relay
from compiler.backend.codegen import CodegenError, compile_module
from compiler.relay.vm import optimize
from tests.compiler.transform.util import HEADER, parse
from vm.isa import Opcode


def compile_text(text: str):  # type: ignore[no-untyped-def]
    # opt_level 0: no fusion, so each operator is its own kernel as these tests spell out.
    with relay.transform.PassContext(opt_level=0):
        return relay.vm.compile(parse(text))


def code(exe, name: str = "main") -> list[tuple]:  # type: ignore[no-untyped-def]
    """A function's instructions as (opcode name, operands...) tuples."""
    return [(Opcode(i.opcode).name, *i.operands) for i in exe.get_function(name).instructions]


OPT = "type Opt { Some(float32), Empty }\n"


# --- returns: straight-line code -------------------------------------------------------------


def test_parameters_occupy_the_first_registers_and_a_variable_needs_no_instruction() -> None:
    exe = compile_text("def @main(%x: float32, %y: float32) -> float32 { let %z = %y; %z }")
    assert code(exe) == [("Ret", 1)]
    main = exe.get_function("main")
    assert main.params == ("x", "y")
    assert main.param_types == (("tensor", (), "float32"), ("tensor", (), "float32"))


def test_tuple_is_alloc_adt_tag_zero_and_projection_is_get_field() -> None:
    exe = compile_text("def @main(%t: (float32, float32)) -> float32 { %t.1 }")
    assert code(exe) == [("GetField", 0, 1, 1), ("Ret", 1)]
    exe = compile_text("def @main(%x: float32, %y: float32) -> (float32, float32) { (%x, %y) }")
    assert code(exe) == [("AllocADT", 0, (0, 1), 2), ("Ret", 2)]


def test_projecting_a_tuple_built_in_the_function_reads_the_field_register() -> None:
    # The tuple itself is never read, so it is not built at all (compiler.backend.prune).
    exe = compile_text("def @main(%x: float32, %y: float32) -> float32 { (%x, %y).1 }")
    assert code(exe) == [("Ret", 1)]


def test_constants_are_loaded_from_an_interned_pool() -> None:
    exe = compile_text("def @main() -> (float32, float32, float32) { (1f, 2f, 1f) }")
    assert code(exe) == [
        ("LoadConst", 0, 0),
        ("LoadConst", 1, 1),
        ("LoadConst", 0, 2),
        ("AllocADT", 0, (0, 1, 2), 3),
        ("Ret", 3),
    ]
    assert [float(c) for c in exe.constant_values] == [1.0, 2.0]


def test_call_of_a_global_is_invoke_and_function_indices_follow_module_order() -> None:
    exe = compile_text("""
    def @main(%x: float32) -> float32 { @second(%x) }
    def @unused(%x: float32) -> float32 { %x }
    def @second(%x: float32) -> float32 { %x }""")
    assert exe.globals == ["main", "unused", "second"]
    assert code(exe) == [("Invoke", 2, (0,), 1), ("Ret", 1)]
    assert code(exe, "unused") == [("Ret", 0)]


def test_constructor_call_is_alloc_adt_with_its_tag_and_every_constructor_is_recorded() -> None:
    exe = compile_text(
        "type List[A] { Cons(A, List[A]), Nil }\n"
        "def @main(%x: float32) -> List[float32] { Cons(%x, Nil()) }"
    )
    tags = {c.name: c for c in exe.constructors}
    assert (tags["Cons"].arity, tags["Nil"].arity) == (2, 0)
    assert tags["Cons"].type_name == tags["Nil"].type_name == "List"
    assert code(exe) == [
        ("AllocADT", tags["Nil"].tag, (), 1),
        ("AllocADT", tags["Cons"].tag, (0, 1), 2),
        ("Ret", 2),
    ]
    assert exe.get_function("main").ret_type == ("adt", "List", (("tensor", (), "float32"),))
    assert tags["Cons"].type_arity == 1
    assert tags["Cons"].field_types == (("var", 0), ("adt", "List", (("var", 0),)))


# --- control flow -----------------------------------------------------------------------------


def test_if_compiles_to_the_tvm_branch_pattern_with_one_merge_register() -> None:
    exe = compile_text(
        "def @main(%c: bool, %x: float32, %y: float32) -> float32 { if (%c) { %x } else { %y } }"
    )
    assert code(exe) == [
        ("LoadConsti", 1, 3),
        ("If", 0, 3, 1, 3),  # equal: fall through; else jump to pc 4
        ("Move", 1, 4),
        ("Goto", 2),  # past the else branch, to pc 5
        ("Move", 2, 4),
        ("Ret", 4),
    ]


def test_match_tests_each_clause_in_order_and_ends_in_fatal() -> None:
    exe = compile_text(
        OPT
        + """
    def @main(%o: Opt, %d: float32) -> float32 {
      match (%o) { Some(%v) => %v, Empty => %d }
    }"""
    )
    some, empty = sorted(c.tag for c in exe.constructors)
    assert code(exe) == [
        ("GetTag", 0, 3),
        ("LoadConsti", some, 4),
        ("If", 3, 4, 1, 4),  # not Some: try the next clause at pc 6
        ("GetField", 0, 0, 5),
        ("Move", 5, 2),
        ("Goto", 7),  # to the end, pc 12
        ("GetTag", 0, 6),
        ("LoadConsti", empty, 7),
        ("If", 6, 7, 1, 3),  # not Empty either: Fatal at pc 11
        ("Move", 1, 2),
        ("Goto", 2),
        ("Fatal",),
        ("Ret", 2),
    ]


def test_partial_match_traps_with_fatal_when_no_clause_applies() -> None:
    exe = compile_text(OPT + "def @main(%o: Opt) -> float32 { match? (%o) { Some(%v) => %v } }")
    ops = [name for name, *_ in code(exe)]
    assert ops == ["GetTag", "LoadConsti", "If", "GetField", "Move", "Goto", "Fatal", "Ret"]


def test_tuple_pattern_only_projects_and_an_irrefutable_last_clause_needs_no_fatal() -> None:
    exe = compile_text(
        OPT
        + """
    def @main(%p: (Opt, float32)) -> float32 {
      match (%p) { (Some(_), %w) => %w, (_, %z) => %z }
    }"""
    )
    (some,) = [c.tag for c in exe.constructors if c.name == "Some"]
    assert code(exe) == [
        ("GetField", 0, 0, 2),
        ("GetField", 0, 1, 3),
        ("GetTag", 2, 4),  # the wildcard inside Some(_) fetches nothing
        ("LoadConsti", some, 5),
        ("If", 4, 5, 1, 3),
        ("Move", 3, 1),
        ("Goto", 3),
        ("GetField", 0, 1, 6),  # the wildcard tuple field is never fetched
        ("Move", 6, 1),
        ("Ret", 1),
    ]


def test_clauses_after_an_irrefutable_clause_are_not_compiled() -> None:
    exe = compile_text(OPT + "def @main(%o: Opt) -> Opt { match (%o) { %x => %x, Some(_) => %o } }")
    assert code(exe) == [("Move", 0, 1), ("Ret", 1)]


def test_nested_constructor_patterns_test_tags_on_fetched_fields() -> None:
    exe = compile_text("""
    type List[A] { Cons(A, List[A]), Nil }
    def @main(%xs: List[float32]) -> float32 {
      match? (%xs) { Cons(_, Cons(%y, _)) => %y }
    }""")
    ops = [name for name, *_ in code(exe)]
    assert ops == [
        "GetTag", "LoadConsti", "If", "GetField",  # outer Cons, then its second field
        "GetTag", "LoadConsti", "If", "GetField",  # inner Cons, then %y
        "Move", "Goto", "Fatal", "Ret",
    ]  # fmt: skip


# --- closures ---------------------------------------------------------------------------------

PAIR = "def @pair(%a: float32, %b: float32) -> (float32, float32) { (%a, %b) }\n"


def test_capturing_function_is_alloc_closure_and_its_call_invoke_closure() -> None:
    exe = compile_text(
        PAIR
        + """
    def @main(%x: float32, %z: float32) -> (float32, float32) {
      let %f = fn (%y: float32) -> (float32, float32) { @pair(%y, %z) };
      %f(%x)
    }"""
    )
    lifted = exe.function_index("main_lifted_0")
    assert code(exe) == [
        ("AllocClosure", lifted, (1,), 2),
        ("InvokeClosure", 2, (0,), 3),
        ("Ret", 3),
    ]
    # Captured values come first in the lifted function, then its own parameters.
    assert exe.get_function_params("main_lifted_0") == ["z", "y"]
    assert code(exe, "main_lifted_0") == [("Invoke", 0, (1, 0), 2), ("Ret", 2)]


def test_global_used_as_a_value_is_a_closure_with_nothing_captured() -> None:
    exe = compile_text(
        PAIR + "def @main() -> fn (float32, float32) -> (float32, float32) { @pair }"
    )
    assert code(exe) == [("AllocClosure", 0, (), 0), ("Ret", 0)]
    scalar = ("tensor", (), "float32")
    assert exe.get_function("main").ret_type == (
        "func",
        (scalar, scalar),
        ("tuple", (scalar, scalar)),
    )


def test_curried_function_captures_grow_level_by_level() -> None:
    exe = compile_text(
        PAIR
        + """
    def @main(%x: float32) -> fn (float32) -> fn (float32) -> (float32, float32) {
      fn (%y: float32) -> fn (float32) -> (float32, float32) {
        fn (%z: float32) -> (float32, float32) { @pair(%x, %z) }
      }
    }"""
    )
    first, second = exe.function_index("main_lifted_0"), exe.function_index("main_lifted_1")
    assert code(exe) == [("AllocClosure", first, (0,), 1), ("Ret", 1)]
    assert code(exe, "main_lifted_0") == [("AllocClosure", second, (0,), 2), ("Ret", 2)]
    assert exe.get_function_params("main_lifted_1") == ["x", "z"]


def test_polymorphic_parameters_are_described_as_numbered_type_variables() -> None:
    exe = compile_text("def @id[A](%x: A) -> A { %x }\ndef @main(%x: int32) -> int32 { @id(%x) }")
    assert exe.get_function("id").param_types == (("var", 0),)
    assert exe.get_function("id").ret_type == ("var", 0)


# --- kernels and storage ---------------------------------------------------------------------


def test_kernel_outputs_share_one_storage_allocated_first_at_aligned_offsets() -> None:
    exe = compile_text("def @main(%x: Tensor[(3), float32]) -> Tensor[(3), float32] { exp(-%x) }")
    assert code(exe) == [
        ("LoadConsti", 64 + 12, 1),  # two 12-byte outputs, the second at offset 64
        ("AllocStorage", 1, 64, "uint8", 2),
        ("AllocTensor", 2, 0, (3,), "float32", 3),
        ("InvokePacked", 0, (0, 3), 1),
        ("AllocTensor", 2, 64, (3,), "float32", 4),
        ("InvokePacked", 1, (3, 4), 1),
        ("Ret", 4),
    ]
    assert exe.primitive_ops == ["vm_mod_fused_negative", "vm_mod_fused_exp"]


def test_function_without_kernels_allocates_no_storage() -> None:
    exe = compile_text("def @main(%x: float32) -> (float32,) { (%x,) }")
    assert "AllocStorage" not in [name for name, *_ in code(exe)]


def test_tuple_inputs_are_flattened_and_tuple_outputs_reassembled() -> None:
    exe = compile_text("""
    def @main(%t: (Tensor[(2), float32], Tensor[(3), float32])) {
      split(concatenate(%t, axis=0), indices_or_sections=[1, 3])
    }""")
    assert code(exe) == [
        ("LoadConsti", 64 * 3 + 8, 1),
        ("AllocStorage", 1, 64, "uint8", 2),
        ("GetField", 0, 0, 3),
        ("GetField", 0, 1, 4),
        ("AllocTensor", 2, 0, (5,), "float32", 5),
        ("InvokePacked", 0, (3, 4, 5), 1),
        ("AllocTensor", 2, 64, (1,), "float32", 6),
        ("AllocTensor", 2, 128, (2,), "float32", 7),
        ("AllocTensor", 2, 192, (2,), "float32", 8),
        ("InvokePacked", 1, (5, 6, 7, 8), 3),
        ("AllocADT", 0, (6, 7, 8), 9),
        ("Ret", 9),
    ]
    concat = exe.primitives[0].description
    assert concat["inputs"] == [["float32", 1], ["float32", 1]]
    assert concat["nodes"][0]["args"] == [0, 1]


def test_fused_primitive_with_several_calls_and_a_tuple_result_is_one_kernel() -> None:
    exe = compile_text("""
    def @main(%x: Tensor[(4), float32]) -> (Tensor[(4), float32], Tensor[(4), bool]) {
      %0 = fn (%p: Tensor[(4), float32], Primitive=1)
          -> (Tensor[(4), float32], Tensor[(4), bool]) {
        %1 = negative(%p);
        (exp(%1), less(%1, %p))
      };
      %0(%x)
    }""")
    (kernel,) = exe.primitives
    assert kernel.name == "vm_mod_fused_negative_exp_less"
    assert [n["op"] for n in kernel.description["nodes"]] == ["negative", "exp", "less"]
    assert kernel.description["results"] == [2, 3]
    assert [name for name, *_ in code(exe)] == [
        "LoadConsti", "AllocStorage", "AllocTensor", "AllocTensor", "InvokePacked", "AllocADT",
        "Ret",
    ]  # fmt: skip


def test_identical_kernels_are_shared_and_different_ones_get_numbered_names() -> None:
    exe = compile_text("""
    def @main(%x: Tensor[(3), float32], %i: Tensor[(3), int32]) {
      (%x + %x, %i + %i, %x + %x, add(%x, 1f))
    }""")
    assert exe.primitive_ops == ["vm_mod_fused_add", "vm_mod_fused_add_1", "vm_mod_fused_add_2"]
    packed = [ops[0] for name, *ops in code(exe) if name == "InvokePacked"]
    assert packed == [0, 1, 0, 2]


def test_kernel_attributes_are_normalized_plain_data() -> None:
    exe = compile_text("def @main(%x: Tensor[(2, 3), float32]) { sum(%x, axis=[1]) }")
    (node,) = exe.primitives[0].description["nodes"]
    assert node["op"] == "sum"
    assert node["attrs"]["axis"] == [1] and node["attrs"]["keepdims"] is False


# --- invalid: what the compiler refuses ---------------------------------------------------------


def test_unlowered_module_is_refused_with_the_pass_to_run() -> None:
    from compiler.typing import infer_types

    mod = infer_types(parse("def @main(%x: float32) -> float32 { %x + %x }"))
    with pytest.raises(CodegenError, match="primitive extraction"):
        compile_module(mod)
    mod = infer_types(
        parse(
            "def @main(%x: float32) -> float32 {"
            "  let %f = fn (%y: float32) -> float32 { %y }; %f(%x)"
            "}"
        )
    )
    with pytest.raises(CodegenError, match="lambda lifting"):
        compile_module(mod)


def test_primitive_that_cannot_become_a_kernel_is_refused_naming_where_it_is_called() -> None:
    with pytest.raises(CodegenError, match=r"in @main: the primitive function calling add"):
        compile_text("""
        def @main(%x: float32) -> float32 {
          %0 = fn (%p: float32, Primitive=1) -> float32 { add(%p, 1f) };
          %0(%x)
        }""")


# --- determinism and scale -----------------------------------------------------------------------


def test_same_module_gives_the_same_executable_bytes() -> None:
    text = (
        PAIR
        + """
    def @main(%x: Tensor[(3), float32], %z: Tensor[(3), float32]) -> Tensor[(3), float32] {
      let %f = fn (%y: Tensor[(3), float32]) -> Tensor[(3), float32] { %y * %z };
      if (sum(%x) < 0f) { %f(%x) } else { exp(%z) + 1f }
    }"""
    )
    first, second = (relay.vm.compile(relay.fromtext(HEADER + text)) for _ in range(2))
    assert first.save()[0] == second.save()[0]


def test_a_10000_deep_let_chain_compiles() -> None:
    depth = 10_000
    lines = ["def @main(%x0: float32) -> float32 {"]
    lines += [f"  let %x{i + 1} = negative(%x{i});" for i in range(depth)]
    lines += [f"  %x{depth}", "}"]
    with relay.transform.PassContext(opt_level=0):
        exe = relay.vm.compile(relay.fromtext(HEADER + "\n".join(lines)))
    ops = [name for name, *_ in code(exe)]
    assert ops.count("InvokePacked") == depth and exe.primitive_ops == ["vm_mod_fused_negative"]


def test_optimize_returns_the_lowered_module_it_compiles() -> None:
    lowered, params = optimize(parse("def @main(%x: float32) -> float32 { %x + %x }"))
    assert params == {}
    assert "Primitive=1" in lowered.astext()
