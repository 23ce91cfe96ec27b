"""The Relax VM's runtime API as TVM documents it, on relayvm's one virtual machine.

Returns: ``save_function``, ``invoke_closure``, ``set_instrument`` with ``SKIP_RUN``,
``time_evaluator`` with every argument (and ``invoke_stateful``), stateful calls with
``get_outputs(func_name)``.
"""

from __future__ import annotations

import numpy as np

from compiler import tvm
from compiler.tvm import relay

VMInstrumentReturnKind = tvm.runtime.relax_vm.VMInstrumentReturnKind

PROGRAM = """
#[version = "0.0.5"]
def @twice(%v: Tensor[(3), float32]) -> Tensor[(3), float32] { %v * 2f }
def @main(%x: Tensor[(3), float32], %y: Tensor[(3), float32]) -> Tensor[(3), float32] {
  @twice(%x) + %y
}
def @pair(%x: Tensor[(3), float32]) -> (Tensor[(3), float32], Tensor[(3), float32]) {
  (%x, negative(%x))
}
def @make_adder(%a: Tensor[(3), float32]) -> fn (Tensor[(3), float32]) -> Tensor[(3), float32] {
  fn (%b: Tensor[(3), float32]) -> Tensor[(3), float32] { %a + %b }
}
"""

X = np.arange(3, dtype="float32")
Y = np.ones(3, dtype="float32")


def machine():
    mod = tvm.parser.fromtext(PROGRAM)
    with tvm.transform.PassContext(opt_level=0):
        ex = relay.vm.compile(mod, target="llvm")
    return tvm.runtime.relax_vm.VirtualMachine(ex, tvm.cpu())


def test_save_function_binds_the_arguments():
    vm = machine()
    vm.save_function("main", "main_saved", X, Y)
    np.testing.assert_array_equal(vm["main_saved"](), 2 * X + Y)


def test_invoke_closure_calls_a_returned_function():
    vm = machine()
    adder = vm["make_adder"](X)
    np.testing.assert_array_equal(vm.invoke_closure(adder, Y), X + Y)


def test_set_instrument_skip_run_skips_the_call_and_its_after_call():
    vm = machine()
    hits = []

    def instrument(func, func_symbol, before_run, ret_value, *args):
        hits.append((func_symbol, before_run))
        if before_run and func_symbol.endswith("multiply"):
            return VMInstrumentReturnKind.SKIP_RUN
        return VMInstrumentReturnKind.NO_OP

    vm.set_instrument(instrument)
    vm["main"](X, Y)
    symbols = [(s, before) for s, before in hits if s != "twice"]
    assert symbols == [
        ("vm_mod_fused_multiply", True),
        ("vm_mod_fused_add", True),
        ("vm_mod_fused_add", False),
    ]
    vm.set_instrument(None)
    np.testing.assert_array_equal(vm["main"](X, Y), 2 * X + Y)


def test_time_evaluator_with_every_argument():
    vm = machine()
    timing_res = vm.time_evaluator(
        "main",
        tvm.cpu(),
        number=2,
        repeat=3,
        min_repeat_ms=0,
        cooldown_interval_ms=0,
        repeats_to_cooldown=1,
        limit_zero_time_iterations=100,
        f_preproc="cache_flush_cpu_non_first_arg",
    )(X, Y)
    assert len(timing_res.results) == 3 and timing_res.mean > 0
    assert "Execution time summary" in str(timing_res)
    vm.save_function("main", "main_saved", X, Y)
    assert len(vm.time_evaluator("main_saved", tvm.cpu(), f_preproc="")().results) == 1


def test_stateful_calls_and_time_evaluator_of_invoke_stateful():
    vm = machine()
    vm.set_input("pair", X)
    vm.invoke_stateful("pair")
    vm.set_input("main", X, Y)
    timing_res = vm.time_evaluator("invoke_stateful", tvm.cpu(), repeat=2)("main")
    assert len(timing_res.results) == 2
    first, second = vm.get_outputs("pair")
    np.testing.assert_array_equal(first, X)
    np.testing.assert_array_equal(second, -X)
    np.testing.assert_array_equal(vm.get_outputs("main")[0], 2 * X + Y)
