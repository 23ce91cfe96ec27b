"""If, tuples and argument kinds end to end; TVM's example programs."""

from __future__ import annotations

import numpy as np

import vm
from compiler import relay
from tests.e2e.harness import check, parse

I = np.int32
F3 = "Tensor[(3), float32]"


def test_several_ifs_on_one_condition() -> None:
    # TVM's test_multiple_ifs.
    mod = parse("""
    def @main(%b: bool) -> int32 {
      let %x = if (%b) { 1 } else { 2 };
      let %y = if (%b) { %x + 10 } else { %x + 20 };
      if (%b) { %y * 2 } else { %y * 3 }
    }""")
    check(mod, np.bool_(True), expected=I(22))
    check(mod, np.bool_(False), expected=I(66))


def test_nested_ifs_choose_among_tensors() -> None:
    mod = parse(f"""
    def @main(%x: {F3}, %y: {F3}, %i: int32) -> {F3} {{
      if (%i < 0) {{
        %x
      }} else {{
        if (%i == 0) {{ %x + %y }} else {{ if (%i > 5) {{ %y * %y }} else {{ exp(%x) }} }}
      }}
    }}""")
    x = np.array([0.5, 1.0, -1.0], dtype="float32")
    y = np.array([2.0, 3.0, 4.0], dtype="float32")
    for i, want in [(-1, x), (0, x + y), (9, y * y), (3, np.exp(x))]:
        check(mod, x, y, I(i), expected=want)


def test_if_on_a_computed_tensor_condition() -> None:
    mod = parse(f"""
    def @main(%x: {F3}) -> {F3} {{
      if (sum(%x) > 0f) {{ %x }} else {{ negative(%x) }}
    }}""")
    check(
        mod,
        np.array([-1.0, -2.0, 0.5], dtype="float32"),
        expected=np.array([1.0, 2.0, -0.5], "float32"),
    )


def test_tuples_in_and_out() -> None:
    mod = parse(f"""
    def @main(%t: ({F3}, int32), %x: {F3}) -> (int32, ({F3}, {F3})) {{
      (%t.1 * 2, (%t.0 + %x, %t.0))
    }}""")
    a = np.array([1.0, 2.0, 3.0], dtype="float32")
    x = np.ones(3, dtype="float32")
    check(mod, (a, I(4)), x, expected=(I(8), (a + x, a)))


def test_tuple_returned_from_a_function_call_and_projected() -> None:
    mod = parse("""
    def @divmod(%a: int32, %b: int32) -> (int32, int32) { (%a / %b, %a - %a / %b * %b) }
    def @main(%a: int32, %b: int32) -> int32 {
      let %qr = @divmod(%a, %b);
      %qr.0 * 100 + %qr.1
    }""")
    check(mod, I(17), I(5), expected=I(302))


def test_python_scalars_as_arguments() -> None:
    mod = parse("""
    def @main(%i: int32, %x: float32, %flag: bool) -> (int32, float32) {
      if (%flag) { (%i + 1, %x * 2f) } else { (%i, %x) }
    }""")
    check(mod, 3, 2.5, True, expected=(I(4), np.float32(5.0)))


def test_results_belong_to_the_caller_and_are_not_overwritten_by_later_calls() -> None:
    mod = parse(f"def @main(%x: {F3}) -> {F3} {{ %x + %x }}")
    machine = vm.VirtualMachine(relay.vm.compile(mod))
    first = machine.invoke("main", np.ones(3, dtype="float32"))
    second = machine.invoke("main", np.full(3, 5.0, dtype="float32"))
    np.testing.assert_array_equal(first, [2.0, 2.0, 2.0])
    np.testing.assert_array_equal(second, [10.0, 10.0, 10.0])


def test_unused_functions_are_compiled_and_callable_by_name() -> None:
    mod = parse("""
    def @helper(%x: int32) -> int32 { %x * 3 }
    def @main(%x: int32) -> int32 { %x }""")
    check(mod, I(7), func="helper", expected=I(21))


def test_tvm_text_format_example_with_cast_and_add() -> None:
    # The example of the text format in the API contract (TVM's parser docs).
    mod = parse("""
    def @main(%a: Tensor[(1, 2), uint8], %b: Tensor[(1, 2), float32]) {
      %0 = cast(%a, dtype="float32") + %b;
      %0
    }""")
    a = np.array([[1, 200]], dtype="uint8")
    b = np.array([[0.5, -0.5]], dtype="float32")
    check(mod, a, b, expected=a.astype("float32") + b)


def test_tvm_vm_example_let_bound_tensor_and_scalar() -> None:
    # TVM's test_let_tensor / test_let_scalar in one program.
    mod = parse(f"""
    def @main(%x: {F3}, %s: float32) -> {F3} {{
      let %y = %x + %x;
      let %z = %y + %s;
      %z * %x
    }}""")
    x = np.array([1.0, 2.0, 3.0], dtype="float32")
    check(mod, x, np.float32(0.5), expected=(x + x + 0.5) * x)
