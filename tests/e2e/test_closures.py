"""Closures end to end: captures, currying, compose, functions as values, closures as results."""

from __future__ import annotations

import numpy as np
import pytest

import vm
from compiler import relay
from tests.e2e.harness import check, int_list, parse

I = np.int32


def test_closure_adds_its_captured_value() -> None:
    mod = parse("""
    def @main(%x: int32, %y: int32) -> int32 {
      let %add_x = fn (%z: int32) -> int32 { %x + %z };
      %add_x(%y)
    }""")
    check(mod, I(3), I(4), expected=I(7))


def test_tvm_closure_program_curried_add() -> None:
    # TVM's test_closure: fn(x) { fn(y) { x + y } } applied to 1 and then to 2.
    mod = parse("""
    def @main(%i: int32) -> int32 {
      let %f = fn (%x: int32) -> fn (int32) -> int32 { fn (%y: int32) -> int32 { %x + %y } };
      %f(1)(%i)
    }""")
    check(mod, I(2), expected=I(3))


def test_three_level_currying_through_a_global() -> None:
    mod = parse("""
    def @add3(%a: int32) -> fn (int32) -> fn (int32) -> int32 {
      fn (%b: int32) -> fn (int32) -> int32 {
        fn (%c: int32) -> int32 { %a * 100 + %b * 10 + %c }
      }
    }
    def @main(%n: int32) -> int32 {
      let %partial = @add3(1);
      let %more = %partial(2);
      %more(%n) + @add3(4)(5)(6)
    }""")
    check(mod, I(3), expected=I(123 + 456))


def test_compose_from_the_prelude() -> None:
    mod = parse(
        """
        def @main(%n: int32) -> int32 {
          let %inc = fn (%x: int32) -> int32 { %x + 1 };
          let %dbl = fn (%x: int32) -> int32 { %x * 2 };
          @compose(%inc, %dbl)(%n) - @compose(%dbl, %inc)(%n)
        }""",
        prelude=True,
    )
    check(mod, I(5), expected=I((5 * 2 + 1) - (5 + 1) * 2))


def test_iterate_builds_a_closure_chain() -> None:
    mod = parse(
        "def @main(%n: int32) -> int32 { @iterate(fn (%x: int32) -> int32 { %x * 2 }, 5)(%n) }",
        prelude=True,
    )
    check(mod, I(3), expected=I(96))


def test_capturing_closure_passed_to_map() -> None:
    mod = parse(
        """
        def @main(%k: int32) -> List[int32] {
          @map(fn (%x: int32) -> int32 { %x * %k }, Cons(1, Cons(2, Cons(3, Nil()))))
        }""",
        prelude=True,
    )
    check(mod, I(10), expected=int_list(mod, [10, 20, 30]))


def test_global_function_passed_as_a_value() -> None:
    mod = parse(
        """
        def @triple(%x: int32) -> int32 { %x * 3 }
        def @main(%n: int32) -> List[int32] { @map(@triple, Cons(%n, Cons(1, Nil()))) }""",
        prelude=True,
    )
    check(mod, I(2), expected=int_list(mod, [6, 3]))


def test_constructor_passed_as_a_value_copies_a_list() -> None:
    mod = parse(
        "def @main(%n: int32) -> List[int32] { @foldr(Cons, Nil(), Cons(%n, Cons(7, Nil()))) }",
        prelude=True,
    )
    check(mod, I(4), expected=int_list(mod, [4, 7]))


def test_closure_over_a_tensor_and_a_closure() -> None:
    mod = parse("""
    def @main(%x: Tensor[(3), float32], %y: Tensor[(3), float32]) -> Tensor[(3), float32] {
      let %scale = fn (%v: Tensor[(3), float32]) -> Tensor[(3), float32] { %v * %x };
      let %twice = fn (%v: Tensor[(3), float32]) -> Tensor[(3), float32] { %scale(%scale(%v)) };
      %twice(%y) + %x
    }""")
    x = np.array([1.0, 2.0, 3.0], dtype="float32")
    y = np.array([0.5, -1.0, 2.0], dtype="float32")
    check(mod, x, y, expected=y * x * x + x)


def test_returned_closure_can_be_called_through_the_vm_after_save_and_load() -> None:
    mod = parse("""
    def @main(%x: int32) -> fn (int32) -> int32 {
      fn (%y: int32) -> int32 { %x - %y }
    }""")
    exe = relay.vm.compile(mod)
    for executable in (exe, vm.Executable.load_exec(exe.save()[0])):
        machine = vm.VirtualMachine(executable)
        closure = machine.invoke("main", I(10))
        assert isinstance(closure, vm.Closure)
        assert int(machine.invoke_closure(closure, I(4))) == 6


GLOBAL_AS_VALUE = """
    def @apply(%f: fn (float32) -> float32, %x: float32) -> float32 { %f(%x) }
    def @main(%y: float32) {
      let %g = fn (%x: float32) -> float32 { %x * %y };
      (%g, @apply)
    }"""


def test_global_function_returned_as_a_closure_runs_with_invoke_closure_and_invoke() -> None:
    # TVM's VM tests return (%g, @apply) and call apply on g from Python: the closure of a
    # global captures nothing, the closure of g captures %y.
    mod = parse(GLOBAL_AS_VALUE)
    exe = relay.vm.compile(mod)
    for executable in (exe, vm.Executable.load_exec(*exe.save())):
        machine = vm.VirtualMachine(executable)
        g, apply_clo = machine.invoke("main", np.float32(3))
        assert isinstance(apply_clo, vm.Closure) and apply_clo.captured == ()
        assert float(machine.invoke_closure(apply_clo, g, np.float32(2))) == 6.0
        assert float(machine.invoke("apply", g, np.float32(5))) == 15.0
        assert float(machine.invoke_closure(g, np.float32(4))) == 12.0
        # The same closures again, in the other order, through the cached signatures.
        assert float(machine.invoke_closure(apply_clo, g, np.float32(1))) == 3.0


def test_global_function_returned_as_a_closure_on_the_reference_interpreter() -> None:
    from compiler.interpreter import Interpreter

    interp = Interpreter(parse(GLOBAL_AS_VALUE))
    g, apply_fn = interp.call("main", np.float32(3))
    assert float(interp.call(apply_fn, g, np.float32(2))) == 6.0
    assert float(interp.call("apply", g, np.float32(5))) == 15.0


def test_invoke_closure_of_a_global_with_wrong_arguments_names_the_parameter() -> None:
    machine = vm.VirtualMachine(relay.vm.compile(parse(GLOBAL_AS_VALUE)))
    g, apply_clo = machine.invoke("main", np.float32(3))
    with pytest.raises(TypeError, match=r"apply\(\) takes 2 arguments \(f, x\) but 1 was given"):
        machine.invoke_closure(apply_clo, g)
    with pytest.raises(TypeError, match=r"argument 0 \('f'\) expected a function"):
        machine.invoke_closure(apply_clo, np.float32(1), np.float32(2))
    assert float(machine.invoke_closure(apply_clo, g, np.float32(2))) == 6.0
