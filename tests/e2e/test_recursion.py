"""Recursion end to end: recursive globals as loops, let-bound recursion, mutual recursion."""

from __future__ import annotations

import numpy as np
import pytest

import vm
from compiler import relay
from tests.e2e.harness import check, parse
from tests.vm.interpreter_programs import traced_peak

I = np.int32


def test_scalar_loop_counting_down_to_zero() -> None:
    # TVM's test_count_loop.
    mod = parse("""
    def @count_down(%i: int32) -> int32 {
      if (%i == 0) { %i } else { @count_down(%i - 1) }
    }
    def @main(%i: int32) -> int32 { @count_down(%i) }""")
    check(mod, I(50), expected=I(0))


def test_sum_of_one_to_n_with_an_accumulator() -> None:
    # TVM's test_sum_loop.
    mod = parse("""
    def @sum_up(%i: int32, %acc: int32) -> int32 {
      if (%i == 0) { %acc } else { @sum_up(%i - 1, %acc + %i) }
    }
    def @main(%n: int32) -> int32 { @sum_up(%n, 0) }""")
    check(mod, I(100), expected=I(5050))


def test_non_tail_recursion_builds_the_result_on_the_way_back() -> None:
    mod = parse("""
    def @fact(%n: int32) -> int32 {
      if (%n < 1) { 1 } else { %n * @fact(%n - 1) }
    }
    def @main(%n: int32) -> int32 { @fact(%n) }""")
    check(mod, I(10), expected=I(3628800))


def test_let_bound_recursive_function_with_a_capture() -> None:
    mod = parse("""
    def @main(%n: int32, %step: int32) -> int32 {
      let %loop = fn (%i: int32, %acc: int32) -> int32 {
        if (%i < 1) { %acc } else { %loop(%i - %step, %acc + %i) }
      };
      %loop(%n, 0)
    }""")
    check(mod, I(10), I(3), expected=I(10 + 7 + 4 + 1))


def test_let_bound_recursive_function_without_captures() -> None:
    mod = parse("""
    def @main(%n: int32) -> int32 {
      let %fib = fn (%i: int32) -> int32 {
        if (%i < 2) { %i } else { %fib(%i - 1) + %fib(%i - 2) }
      };
      %fib(%n)
    }""")
    check(mod, I(12), expected=I(144))


def test_mutually_recursive_globals() -> None:
    mod = parse("""
    def @even(%n: int32) -> bool { if (%n == 0) { True } else { @odd(%n - 1) } }
    def @odd(%n: int32) -> bool { if (%n == 0) { False } else { @even(%n - 1) } }
    def @main(%n: int32) -> (bool, bool) { (@even(%n), @odd(%n)) }""")
    check(mod, I(7), expected=(np.bool_(False), np.bool_(True)))


def test_recursive_loop_over_tensors() -> None:
    mod = parse("""
    def @power(%x: Tensor[(3), float32], %n: int32) -> Tensor[(3), float32] {
      if (%n == 0) { ones_like(%x) } else { %x * @power(%x, %n - 1) }
    }
    def @main(%x: Tensor[(3), float32]) -> Tensor[(3), float32] { @power(%x, 4) }""")
    x = np.array([1.0, -2.0, 0.5], dtype="float32")
    check(mod, x, expected=x**4)


def test_deep_recursion_does_not_use_the_python_stack() -> None:
    mod = parse("""
    def @sum_up(%i: int32, %acc: int32) -> int32 {
      if (%i == 0) { %acc } else { @sum_up(%i - 1, %acc + %i) }
    }
    def @main(%n: int32) -> int32 { @sum_up(%n, 0) }""")
    n = 3000
    check(mod, I(n), expected=I(n * (n + 1) // 2))


#: Elements of the tensor each step of the loops below computes (64 KiB of float32).
STEP = 1 << 14


def _machine(text: str) -> vm.VirtualMachine:
    exe = relay.vm.compile(parse(text), target="llvm")
    return vm.VirtualMachine(exe)


@pytest.mark.parametrize(
    "text",
    [
        f"""
        def @steps(%i: int32, %t: Tensor[({STEP},), float32]) -> Tensor[({STEP},), float32] {{
          if (%i < 1) {{ %t }} else {{ @steps(%i - 1, %t + 1f) }}
        }}
        def @main(%n: int32, %t: Tensor[({STEP},), float32]) {{ @steps(%n, %t) }}""",
        f"""
        def @main(%n: int32, %t: Tensor[({STEP},), float32], %d: float32) {{
          let %loop = fn (%i: int32, %u: Tensor[({STEP},), float32]) {{
            if (%i < 1) {{ %u }} else {{ %loop(%i - 1, %u + %d) }}
          }};
          %loop(%n, %t)
        }}""",
    ],
    ids=["global", "let-bound closure"],
)
def test_a_loop_whose_call_is_in_a_branch_runs_in_constant_memory(text: str) -> None:
    # The recursive call's result goes through the branch's merge register and a jump to
    # the final ret: still a tail call, so each step's frame replaces the last one.
    machine = _machine(text)
    start = np.zeros(STEP, "float32")
    extra = (np.float32(1),) if "%d" in text else ()
    machine.invoke("main", I(3), start, *extra)  # kernels loaded, caches warm
    peak = traced_peak(lambda: machine.invoke("main", I(400), start, *extra))
    assert peak < 16 * STEP * 4
    result = machine.invoke("main", I(400), start, *extra)
    np.testing.assert_array_equal(result.numpy(), np.full(STEP, 400, "float32"))
