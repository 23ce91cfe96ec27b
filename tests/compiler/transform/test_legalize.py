"""Legalize: calls of operators with a registered legalization become what it returns (with
the call's attributes, legalized arguments and types), inside let chains and functions
alike, with the same results; None keeps the call (returns); a legalization returning
something that is not an expression, or an expression of another type, is refused naming
the operator, and TVM's other attribute names are refused by name (invalid)."""

from __future__ import annotations

import numpy as np
import pytest

import vm
from compiler import relay
from compiler.op import legalize as registry
from tests.compiler.transform.util import assert_results_match, assert_same, calls

RNG = np.random.default_rng(7)


@pytest.fixture(autouse=True)
def empty_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test registers into a registry of its own."""
    monkeypatch.setattr(registry, "_REGISTERED", {})


def array(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype("float32")


def padded_channels(attrs, inputs, types):
    """TVM's classic legalization: a convolution of 3 input channels padded to 4."""
    data, weight = inputs
    data_type = types[0]
    if data_type.shape[1] % 4 == 0:
        return None
    extra = 4 - data_type.shape[1] % 4
    data = relay.nn.pad(data, pad_width=((0, 0), (0, extra), (0, 0), (0, 0)))
    weight = relay.nn.pad(weight, pad_width=((0, 0), (0, extra), (0, 0), (0, 0)))
    return relay.nn.conv2d(data, weight, **dict(attrs))


# ---- returns -------------------------------------------------------------------------------------


def test_a_convolution_of_three_channels_is_padded_to_four_with_the_same_results() -> None:
    relay.op.register_legalize("nn.conv2d", padded_channels)
    x = relay.var("x", shape=(1, 3, 6, 6))
    w = relay.var("w", shape=(5, 3, 3, 3))
    y = relay.nn.relu(relay.nn.conv2d(x, w, padding=(1, 1)))
    before = relay.IRModule.from_expr(relay.Function([x, w], y))
    after = relay.transform.Legalize()(before)
    (conv,) = calls(after["main"], "nn.conv2d")
    assert conv.args[0].checked_type.shape[1] == 4 and len(calls(after["main"], "nn.pad")) == 2
    assert_results_match(before, after, [array(1, 3, 6, 6), array(5, 3, 3, 3)])
    # Four channels already: the legalization keeps the call.
    x4 = relay.var("x", shape=(1, 4, 6, 6))
    w4 = relay.var("w", shape=(5, 4, 3, 3))
    kept = relay.IRModule.from_expr(relay.Function([x4, w4], relay.nn.conv2d(x4, w4)))
    assert_same(relay.transform.Legalize()(kept), kept)


def test_the_decorator_form_receives_attrs_legalized_inputs_and_types() -> None:
    seen = []

    @relay.op.register_legalize("subtract")
    def negate_and_add(attrs, inputs, types):
        seen.append([str(t) for t in types])
        return relay.add(inputs[0], relay.negative(inputs[1]))

    x = relay.var("x", shape=(2, 3))
    y = relay.var("y", shape=(3,))
    inner = relay.subtract(x, y)
    before = relay.IRModule.from_expr(relay.Function([x, y], relay.subtract(inner, y)))
    after = relay.transform.Legalize()(before)
    expected = relay.Function([x, y], relay.add(relay.add(x, relay.negative(y)), relay.negative(y)))
    assert_same(after, relay.IRModule.from_expr(expected))
    assert seen[0] == [
        "Tensor[(2, 3), float32]",
        "Tensor[(3), float32]",
        "Tensor[(2, 3), float32]",
    ]
    assert_results_match(before, after, [array(2, 3), array(3)])


def test_let_bound_calls_are_legalized_and_the_vm_runs_the_result() -> None:
    relay.op.register_legalize("subtract", lambda a, i, t: relay.add(i[0], relay.negative(i[1])))
    before = relay.fromtext(
        """
        def @main(%x: Tensor[(4), float32]) -> Tensor[(4), float32] {
          let %a = subtract(%x, 1f);
          let %b = multiply(%a, %a);
          subtract(%b, %a)
        }
        """
    )
    seq = relay.transform.Sequential([relay.transform.Legalize()])
    with relay.transform.PassContext(opt_level=3):
        after = seq(before)
    assert not calls(after["main"], "subtract") and len(calls(after["main"], "add")) == 2
    assert_results_match(before, after, [array(4)])


def test_a_higher_level_replaces_a_registration_and_a_lower_one_is_ignored() -> None:
    first = lambda a, i, t: None  # noqa: E731
    second = lambda a, i, t: relay.add(i[0], relay.negative(i[1]))  # noqa: E731
    relay.op.register_legalize("subtract", first)
    relay.op.register_legalize("subtract", second, level=11)
    relay.op.register_legalize("subtract", first, level=5)
    assert registry.get_legalize("subtract") is second


# ---- invalid -------------------------------------------------------------------------------------


def test_registering_twice_at_one_level_an_unknown_op_or_a_non_callable_is_refused() -> None:
    relay.op.register_legalize("subtract", lambda a, i, t: None)
    with pytest.raises(ValueError, match="subtract already has a legalization of level 10"):
        relay.op.register_legalize("subtract", lambda a, i, t: None)
    with pytest.raises(ValueError, match=r"nn\.no_such_op"):
        relay.op.register_legalize("nn.no_such_op", lambda a, i, t: None)
    with pytest.raises(TypeError, match="must be callable"):
        relay.op.register_legalize("add", 3)
    with pytest.raises(TypeError, match="level must be an int"):
        relay.op.register_legalize("add", lambda a, i, t: None, level="high")


@pytest.mark.parametrize(
    ("returned", "message"),
    [
        (lambda i: 3.0, "legalization of subtract returned float, not a Relay expression"),
        (lambda i: relay.sum(i[0]), "of type float32 where the call has type Tensor"),
        (lambda i: relay.add(i[0], relay.zeros((5,), "float32")), "does not type-check"),
    ],
    ids=["not-an-expression", "another-type", "ill-typed"],
)
def test_a_legalization_returning_the_wrong_thing_is_refused_naming_the_op(
    returned, message
) -> None:
    relay.op.register_legalize("subtract", lambda a, i, t: returned(i))
    x = relay.var("x", shape=(4,))
    mod = relay.IRModule.from_expr(relay.Function([x], relay.subtract(x, x)))
    with pytest.raises(TypeError, match=message):
        relay.transform.Legalize()(mod)


def test_another_attribute_map_name_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="FTVMQnnLegalize"):
        relay.transform.Legalize("FTVMQnnLegalize")
    assert repr(relay.transform.Legalize()) == "Legalize()"


def test_relay_vm_compile_applies_a_registered_legalization_first() -> None:
    # As TVM's build does: a legalization registered before compiling shapes the kernels.
    relay.op.register_legalize("subtract", lambda a, i, t: relay.add(i[0], relay.negative(i[1])))
    x = relay.var("x", shape=(4,))
    mod = relay.IRModule.from_expr(relay.Function([x], relay.subtract(x, relay.const(2.0))))
    timing = relay.transform.PassTimingInstrument()
    with relay.transform.PassContext(instruments=[timing]):
        optimized, _ = relay.vm.optimize(mod)
    names = [name for _, name, _ in timing.timings()]
    assert names.index("Legalize") < names.index("SimplifyInference")
    assert not calls(optimized["main"], "subtract")
    got = vm.VirtualMachine(relay.vm.compile(mod), vm.cpu()).invoke("main", np.ones(4, "float32"))
    np.testing.assert_array_equal(got.numpy(), -np.ones(4, "float32"))
