"""SpecializeConstantArguments: a recursive function whose callers all pass it one constant,
which it passes on unchanged, gets a copy with the constant inside; the original stays
callable, results do not change, and the functions it cannot specialize are left alone."""

from __future__ import annotations

import numpy as np
import pytest

import vm
from compiler import relay
from tests.compiler.transform.util import assert_results_match, calls, parse

specialize = relay.transform.SpecializeConstantArguments()
RNG = np.random.default_rng(31)

# A loop of three steps that scales its state by a weight passed on unchanged.
LOOP = """
def @loop(%i: Tensor[(), int32], %h: Tensor[(1, 4), float32], %w: Tensor[(4, 4), float32])
    -> Tensor[(1, 4), float32] {
  if (equal(%i, 3)) {
    %h
  } else {
    @loop(add(%i, 1), tanh(nn.dense(%h, %w)), %w)
  }
}
"""


def loop_module() -> relay.IRModule:
    """``LOOP`` and a ``main`` that starts it with the weight ``%w`` (bound by the tests)."""
    params = "%h0: Tensor[(1, 4), float32], %w: Tensor[(4, 4), float32]"
    return parse(LOOP + f"def @main({params}) {{ @loop(0, %h0, %w) }}")


WEIGHT = RNG.standard_normal((4, 4)).astype("float32")


def bound(mod: relay.IRModule, value: np.ndarray = WEIGHT) -> relay.IRModule:
    from compiler.ir.bind import bind_params_by_name

    out = mod.copy()
    out["main"] = bind_params_by_name(mod["main"], {"w": value})
    return out


def state() -> np.ndarray:
    return RNG.standard_normal((1, 4)).astype("float32")


# ---- returns: specialized ----------------------------------------------------------------------


def test_a_loop_invariant_constant_moves_into_a_copy_of_the_loop() -> None:
    before = bound(loop_module())
    after = specialize(before)
    copy = after["loop_specialized"]
    assert [p.name_hint for p in copy.params] == ["i", "h"]
    (product,) = calls(copy, "nn.dense")
    assert isinstance(product.args[1], relay.Constant)
    np.testing.assert_array_equal(product.args[1].data, WEIGHT)
    # The copy calls itself, main calls the copy, and the original is kept as it was.
    callees = [c.op for c in calls(copy) if isinstance(c.op, relay.GlobalVar)]
    assert [g.name_hint for g in callees] == ["loop_specialized"]
    (entry,) = [c for c in calls(after["main"]) if isinstance(c.op, relay.GlobalVar)]
    assert entry.op.name_hint == "loop_specialized" and len(entry.args) == 2
    assert after["loop"] is before["loop"]
    assert_results_match(before, after, [state()])


def test_equal_constants_from_two_callers_count_as_one() -> None:
    main = """
    def @main(%h0: Tensor[(1, 4), float32]) {
      (@loop(0, %h0, %w), @loop(1, %h0, %w2))
    }
    """
    mod = parse(LOOP + main.replace("%h0: Tensor[(1, 4), float32]",
                                    "%h0: Tensor[(1, 4), float32], %w: Tensor[(4, 4), float32], "
                                    "%w2: Tensor[(4, 4), float32]"))  # fmt: skip
    from compiler.ir.bind import bind_params_by_name

    mod["main"] = bind_params_by_name(mod["main"], {"w": WEIGHT, "w2": WEIGHT.copy()})
    after = specialize(mod)
    assert "loop_specialized" in after
    assert_results_match(mod, after, [state()])


def test_a_copy_takes_a_free_name() -> None:
    mod = bound(loop_module())
    mod["loop_specialized"] = relay.Function([], relay.const(1.0))
    after = specialize(mod)
    assert "loop_specialized2" in after
    assert after["loop_specialized"] is mod["loop_specialized"]


def test_the_vm_runs_the_copy_and_still_runs_the_original_by_name() -> None:
    mod = loop_module()
    exe = relay.vm.compile(mod, params={"w": WEIGHT})
    machine = vm.VirtualMachine(exe, vm.cpu())
    h = state()
    want = relay.create_executor("debug", mod).evaluate()(h, WEIGHT)
    np.testing.assert_allclose(machine.invoke("main", h), want, rtol=1e-6)
    # Invoked by name, the original takes its weight as before.
    other = RNG.standard_normal((4, 4)).astype("float32")
    direct = machine.invoke("loop", np.array(0, "int32"), h, other)
    expected = h
    for _ in range(3):
        expected = np.tanh(expected @ other.T)
    np.testing.assert_allclose(direct, expected, rtol=1e-5)


def test_the_lstm_loop_runs_one_gate_product_per_step_at_opt_level_3() -> None:
    from benchmarks import models
    from benchmarks import numpy_models as npm

    weights = models.lstm_weights(input_size=16, hidden=16)
    mod, params = models.lstm_module(weights, steps=4)
    with relay.transform.PassContext(opt_level=3):
        exe = relay.vm.compile(mod, params=params)
    text = exe.bytecode.split("loop_specialized(")[1]
    assert text.count("dense") == 1, text
    inputs = [RNG.standard_normal(s).astype("float32") for s in ((4, 1, 16), (1, 16), (1, 16))]
    got = vm.VirtualMachine(exe, vm.cpu()).invoke("main", *inputs)
    np.testing.assert_allclose(got, npm.lstm_forward(weights, *inputs), rtol=1e-5, atol=1e-6)


# ---- returns: left alone -----------------------------------------------------------------------


def with_main(loop: str, main: str, **values: np.ndarray) -> relay.IRModule:
    """``loop`` and ``main`` parsed, ``values`` bound to ``main``'s parameters by name."""
    from compiler.ir.bind import bind_params_by_name

    mod = parse(loop + main)
    mod["main"] = bind_params_by_name(mod["main"], values)
    return mod


MAIN_PARAMS = (
    "%h0: Tensor[(1, 4), float32], %w: Tensor[(4, 4), float32], %x: Tensor[(4, 4), float32]"
)


def test_an_argument_that_changes_from_step_to_step_stays_a_parameter() -> None:
    loop = LOOP.replace("tanh(nn.dense(%h, %w)), %w)", "tanh(nn.dense(%h, %w)), tanh(%w))")
    mod = with_main(loop, f"def @main({MAIN_PARAMS}) {{ @loop(0, %h0, %w) }}", w=WEIGHT)
    assert "loop_specialized" not in specialize(mod)


@pytest.mark.parametrize(
    ("body", "bound_names"),
    [
        ("(@loop(0, %h0, %w), @loop(0, %h0, %x))", ("w", "x")),  # two different weights
        ("@loop(0, %h0, %x)", ("w",)),  # the weight is the caller's input
        ("let %f = @loop; %f(0, %h0, %w)", ("w",)),  # the loop is used as a value
    ],
)
def test_loops_whose_weight_is_not_one_constant_stay(body: str, bound_names: tuple) -> None:
    values = {"w": WEIGHT, "x": RNG.standard_normal((4, 4)).astype("float32")}
    mod = with_main(
        LOOP, f"def @main({MAIN_PARAMS}) {{ {body} }}", **{n: values[n] for n in bound_names}
    )
    after = specialize(mod)
    assert "loop_specialized" not in after
    assert after["main"] is mod["main"]


def test_main_is_never_specialized() -> None:
    mod = parse(
        """
        def @main(%i: Tensor[(), int32], %w: Tensor[(2), float32]) -> Tensor[(2), float32] {
          if (equal(%i, 0)) { %w } else { @main(subtract(%i, 1), %w) }
        }
        def @start(%w0: Tensor[(2), float32]) { @main(2, %w0) }
        """
    )
    from compiler.ir.bind import bind_params_by_name

    mod["start"] = bind_params_by_name(mod["start"], {"w0": np.ones(2, "float32")})
    after = specialize(mod)
    assert list(after.functions) == list(mod.functions)
