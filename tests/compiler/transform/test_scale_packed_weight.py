"""ScalePackedWeight: a per-channel gate of a packed convolution's data multiplies the
packed weight instead, where the weight is smaller; anything else stays as it was."""

from __future__ import annotations

import numpy as np

from compiler import relay
from tests.compiler.transform.util import assert_results_match, calls

CONV = "nn.contrib_conv2d_gemm_without_weight_transform"
RNG = np.random.default_rng(29)


def _f32(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype("float32")


def _pack_then_scale(mod: relay.IRModule) -> relay.IRModule:
    """``mod`` through the passes ``relay.vm.compile`` runs up to this one."""
    passes = [
        relay.transform.AlterOpLayout(),
        relay.transform.FoldConstant(),
        relay.transform.ScalePackedWeight(),
    ]
    with relay.transform.PassContext(opt_level=3):
        return relay.transform.Sequential(passes)(mod)


def _gated(
    image: tuple[int, int, int, int] = (1, 8, 12, 12),
    gate_shape: tuple[int, ...] = (1, 8, 1, 1),
    out_channels: int = 6,
    kernel: int = 1,
    gate_first: bool = False,
    constant_gate: bool = False,
    also_return_scaled: bool = False,
) -> tuple[relay.IRModule, list[np.ndarray]]:
    """conv2d(multiply(x, g)) by a constant weight, as a squeeze-excite block ends."""
    x = relay.var("x", shape=image, dtype="float32")
    g = relay.const(_f32(*gate_shape)) if constant_gate else relay.var("g", shape=gate_shape)
    scaled = relay.multiply(g, x) if gate_first else relay.multiply(x, g)
    weight = relay.const(_f32(out_channels, image[1], kernel, kernel))
    conv = relay.nn.conv2d(scaled, weight, padding=kernel // 2, channels=out_channels,
                           kernel_size=kernel)  # fmt: skip
    body = relay.Tuple([conv, scaled]) if also_return_scaled else conv
    params = [x] if constant_gate else [x, g]
    inputs = [_f32(*image)] + ([] if constant_gate else [_f32(*gate_shape)])
    return relay.IRModule.from_expr(relay.Function(params, body)), inputs


def _data_multiplies(mod: relay.IRModule) -> int:
    """The multiplies a packed convolution reads as its data."""
    return sum(
        1
        for conv in calls(mod["main"], CONV)
        if getattr(getattr(conv.args[0], "op", None), "name", None) == "multiply"
    )


# ---- returns: the weight is scaled ------------------------------------------------------------


def test_a_gated_pointwise_convolution_scales_its_weight_instead_of_its_data() -> None:
    for gate_first in (False, True):
        for gate_shape in [(1, 8, 1, 1), (8, 1, 1)]:
            before, inputs = _gated(gate_shape=gate_shape, gate_first=gate_first)
            after = _pack_then_scale(before)
            assert _data_multiplies(after) == 0
            assert len(calls(after["main"], "multiply")) == 1
            assert_results_match(before, after, inputs, rtol=1e-5)


def test_a_gated_convolution_of_several_taps_scales_each_channels_taps() -> None:
    before, inputs = _gated(image=(1, 5, 24, 24), gate_shape=(1, 5, 1, 1), kernel=3)
    after = _pack_then_scale(before)
    assert _data_multiplies(after) == 0
    assert_results_match(before, after, inputs, rtol=1e-5)


def test_a_constant_gate_folds_into_the_weight_however_small_the_image() -> None:
    before, inputs = _gated(image=(1, 8, 2, 2), out_channels=40, constant_gate=True)
    after = _pack_then_scale(before)
    assert not calls(after["main"], "multiply")
    assert_results_match(before, after, inputs, rtol=1e-5)


def test_the_vm_runs_a_squeeze_excite_block_with_the_gate_in_the_weight() -> None:
    import vm

    x = relay.var("x", shape=(1, 16, 14, 14), dtype="float32")
    squeezed = relay.mean(x, axis=(2, 3), keepdims=True)
    hidden = relay.nn.relu(relay.nn.conv2d(squeezed, relay.const(_f32(4, 16, 1, 1)),
                                           channels=4, kernel_size=1))  # fmt: skip
    gate = relay.sigmoid(relay.nn.conv2d(hidden, relay.const(_f32(16, 4, 1, 1)), channels=16,
                                         kernel_size=1))  # fmt: skip
    out = relay.nn.conv2d(relay.multiply(x, gate), relay.const(_f32(24, 16, 1, 1)),
                          channels=24, kernel_size=1)  # fmt: skip
    mod = relay.IRModule.from_expr(relay.Function([x], out))
    exe = relay.vm.compile(mod)
    weight_gates = [n for n in exe.primitive_ops if "reshape_multiply" in n]
    assert len(weight_gates) == 1, exe.primitive_ops
    data = _f32(1, 16, 14, 14)
    got = vm.VirtualMachine(exe).invoke("main", data).numpy()
    expected = relay.create_executor("debug", mod).evaluate()(data).numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


# ---- returns: unchanged -----------------------------------------------------------------------


def test_a_gate_is_left_on_the_data_when_the_weight_is_larger() -> None:
    before, inputs = _gated(image=(1, 8, 3, 3), out_channels=40)
    after = _pack_then_scale(before)
    assert _data_multiplies(after) == 1
    assert_results_match(before, after, inputs, rtol=1e-5)


def test_scaled_data_read_elsewhere_keeps_its_multiply() -> None:
    before, inputs = _gated(also_return_scaled=True)
    after = _pack_then_scale(before)
    assert _data_multiplies(after) == 1
    assert len(calls(after["main"], "multiply")) == 1
    assert_results_match(before, after, inputs, rtol=1e-6)


def test_gates_per_image_or_per_pixel_stay_on_the_data() -> None:
    for image, gate_shape in [
        ((2, 8, 12, 12), (2, 8, 1, 1)),  # one gate per image of a batch
        ((1, 8, 12, 12), (1, 8, 12, 1)),  # varies along the rows
        ((1, 8, 12, 12), (1, 1, 1, 1)),  # one scalar: not a per-channel gate
    ]:
        before, inputs = _gated(image=image, gate_shape=gate_shape)
        after = _pack_then_scale(before)
        assert _data_multiplies(after) == 1, (image, gate_shape)
        assert_results_match(before, after, inputs, rtol=1e-6)
