"""FoldScaleAxis: a convolution's per-channel constant scale goes into its weight, and a
per-channel constant add becomes a bias_add; anything else stays as it was."""

from __future__ import annotations

import numpy as np

from compiler import relay
from tests.compiler.transform.util import assert_results_match, calls

fold = relay.transform.FoldScaleAxis()
RNG = np.random.default_rng(17)


def _f32(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype("float32")


def _batch_norm_like(scale_shape: tuple, groups: int = 1, bias: bool = False, twice: bool = False):
    """conv2d [-> bias_add] -> multiply(constant) -> add(constant), as SimplifyInference
    leaves a batch norm; ``twice``: the convolution is also a result."""
    x = relay.var("x", shape=(1, 4, 9, 9), dtype="float32")
    conv = relay.nn.conv2d(x, relay.const(_f32(6, 4 // groups, 3, 3)), padding=(1, 1),
                           groups=groups, channels=6, kernel_size=(3, 3))  # fmt: skip
    value = relay.nn.bias_add(conv, relay.const(_f32(6))) if bias else conv
    scaled = relay.multiply(value, relay.const(_f32(*scale_shape)))
    body = relay.add(scaled, relay.const(_f32(6, 1, 1)))
    if twice:
        body = relay.Tuple([body, conv])
    return relay.IRModule.from_expr(relay.Function([x], body))


def _inputs() -> list[np.ndarray]:
    return [_f32(1, 4, 9, 9)]


# ---- returns: folded ----------------------------------------------------------------------------


def test_a_per_channel_scale_goes_into_the_weight_and_the_shift_becomes_a_bias() -> None:
    for scale_shape in [(6, 1, 1), (1, 6, 1, 1), (1,)]:
        before = _batch_norm_like(scale_shape)
        after = fold(before)
        assert not calls(after["main"], "multiply") and not calls(after["main"], "add")
        assert len(calls(after["main"], "nn.bias_add")) == 1
        assert_results_match(before, after, _inputs(), rtol=1e-5)


def test_a_scale_after_a_constant_bias_scales_the_bias_too() -> None:
    before = _batch_norm_like((6, 1, 1), groups=2, bias=True)
    after = fold(before)
    assert not calls(after["main"], "multiply")
    assert_results_match(before, after, _inputs(), rtol=1e-5)


def test_the_vm_folds_a_batch_norm_after_a_convolution_at_the_default_level() -> None:
    import vm

    x = relay.var("x", shape=(1, 4, 9, 9), dtype="float32")
    conv = relay.nn.conv2d(x, relay.const(_f32(6, 4, 3, 3)), padding=(1, 1), channels=6,
                           kernel_size=(3, 3))  # fmt: skip
    stats = [relay.const(np.abs(_f32(6)) + 0.5 if i == 3 else _f32(6)) for i in range(4)]
    body = relay.nn.relu(relay.nn.batch_norm(conv, *stats)[0])
    mod = relay.IRModule.from_expr(relay.Function([x], body))
    exe = relay.vm.compile(mod)
    assert all("multiply" not in name for name in exe.primitive_ops)
    (data,) = _inputs()
    got = vm.VirtualMachine(exe).invoke("main", data).numpy()
    expected = relay.create_executor("debug", mod).evaluate()(data).numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


# ---- returns: unchanged -------------------------------------------------------------------------


def test_a_convolution_read_elsewhere_keeps_its_weight() -> None:
    before = _batch_norm_like((6, 1, 1), twice=True)
    after = fold(before)
    assert len(calls(after["main"], "multiply")) == 1
    assert len(calls(after["main"], "nn.bias_add")) == 1  # the add still becomes a bias
    assert_results_match(before, after, _inputs(), rtol=1e-6)


def test_scales_along_other_axes_or_of_variables_stay() -> None:
    x = relay.var("x", shape=(1, 4, 9, 9), dtype="float32")
    s = relay.var("s", shape=(6, 1, 1), dtype="float32")
    conv = relay.nn.conv2d(x, relay.const(_f32(6, 4, 3, 3)), padding=(1, 1), channels=6,
                           kernel_size=(3, 3))  # fmt: skip
    along_rows = relay.multiply(conv, relay.const(_f32(9, 1)))
    by_variable = relay.multiply(conv, s)
    shifted_rows = relay.add(conv, relay.const(_f32(1, 1, 9)))
    body = relay.Tuple([along_rows, by_variable, shifted_rows])
    before = relay.IRModule.from_expr(relay.Function([x, s], body))
    after = fold(before)
    assert len(calls(after["main"], "multiply")) == 2 and len(calls(after["main"], "add")) == 1
    assert not calls(after["main"], "nn.bias_add")
