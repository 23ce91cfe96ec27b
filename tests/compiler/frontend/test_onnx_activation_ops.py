"""ONNX activations and normalizations composed from element-wise operators agree with
onnxruntime and, without it, with onnx's numpy reference (returns): Gelu, Mish, Celu,
ThresholdedRelu, Shrink, LRN and GroupNormalization; bad attributes get errors naming them
(invalid)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")

from onnx import helper

from compiler import relay
from compiler.frontend import OnnxImportError, OpNotImplemented
from tests.compiler.frontend._onnx_helpers import (
    HAVE_ORT,
    check_against_ort,
    check_against_reference,
    model,
    needs_ort,
    run_relay,
    run_vm,
    single_op,
)

RNG = np.random.default_rng(37)


def randn(*shape: int) -> np.ndarray:
    return (3 * RNG.standard_normal(shape)).astype("float32")


def both(proto, feeds, rtol: float = 1e-5, atol: float = 1e-5) -> None:
    """Compare with onnx's reference always, and with onnxruntime when it is installed."""
    check_against_reference(proto, feeds, rtol=rtol, atol=atol)
    if HAVE_ORT:
        check_against_ort(proto, feeds, rtol=rtol, atol=atol)


# --- returns -----------------------------------------------------------------------------------


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_exact_and_tanh_approximation(approximate):
    both(*single_op("Gelu", {"x": randn(3, 7)}, {"approximate": approximate}, opset=20))


def test_mish():
    both(*single_op("Mish", {"x": randn(4, 5)}, opset=18))


@pytest.mark.parametrize("alpha", [1.0, 0.4])
def test_celu(alpha):
    both(*single_op("Celu", {"x": randn(4, 5)}, {"alpha": alpha}))


@pytest.mark.parametrize("alpha", [1.0, -0.5])
def test_thresholded_relu(alpha):
    both(*single_op("ThresholdedRelu", {"x": randn(4, 5)}, {"alpha": alpha}))


@pytest.mark.parametrize(("bias", "lambd"), [(0.0, 0.5), (1.5, 2.0)])
def test_shrink_of_floats(bias, lambd):
    both(*single_op("Shrink", {"x": randn(4, 5)}, {"bias": bias, "lambd": lambd}))


@needs_ort
def test_shrink_of_integers():
    x = RNG.integers(-6, 6, (3, 4)).astype("int32")
    check_against_ort(*single_op("Shrink", {"x": x}, {"bias": 1.0, "lambd": 2.0}))


def lrn_by_the_formula(x: np.ndarray, size: int, alpha: float, beta: float, bias: float):
    """The specification's LRN, channel by channel (onnx's reference evaluator differs)."""
    out = np.empty_like(x, dtype=np.float64)
    channels = x.shape[1]
    for c in range(channels):
        lo = max(0, c - (size - 1) // 2)
        hi = min(channels - 1, c + -(-(size - 1) // 2))
        square_sum = (x[:, lo : hi + 1].astype(np.float64) ** 2).sum(axis=1)
        out[:, c] = x[:, c] / (bias + alpha / size * square_sum) ** beta
    return out.astype(x.dtype)


@pytest.mark.parametrize("size", [1, 2, 3, 5])
def test_lrn_with_odd_and_even_window(size):
    attrs = {"size": size, "alpha": 0.02, "beta": 0.6, "bias": 2.0}
    proto, feeds = single_op("LRN", {"x": randn(2, 6, 3, 4)}, attrs)
    expected = lrn_by_the_formula(feeds["x"], size, 0.02, 0.6, 2.0)
    np.testing.assert_allclose(run_relay(proto, feeds)[0], expected, rtol=1e-5, atol=1e-5)
    if HAVE_ORT and size % 2:  # (onnxruntime implements odd sizes only)
        check_against_ort(proto, feeds, rtol=1e-5, atol=1e-5)


def test_lrn_runs_on_the_vm():
    proto, feeds = single_op("LRN", {"x": randn(1, 5, 4, 4)}, {"size": 3})
    expected = lrn_by_the_formula(feeds["x"], 3, 1e-4, 0.75, 1.0)
    np.testing.assert_allclose(run_vm(proto, feeds)[0], expected, rtol=1e-5, atol=1e-5)


def group_norm(x: np.ndarray, scale: np.ndarray, bias: np.ndarray, groups: int, opset: int):
    """A GroupNormalization model (its output typed by hand: ONNX infers none for it)."""
    node = helper.make_node(
        "GroupNormalization", ["x", "s", "b"], ["y"], name="groupnormalization_0",
        num_groups=groups, epsilon=1e-3,
    )  # fmt: skip
    proto = model(
        [node], {"x": ("float32", x.shape)}, {"y": ("float32", x.shape)},
        {"s": scale, "b": bias}, opset=opset,
    )  # fmt: skip
    return proto, {"x": x}


@pytest.mark.parametrize("groups", [1, 2, 6])
@pytest.mark.parametrize("shape", [(2, 6, 3, 5), (2, 6, 7)])
def test_group_normalization_with_per_channel_affine(groups, shape):
    both(*group_norm(randn(*shape), randn(6), randn(6), groups, 21), rtol=1e-4, atol=1e-4)


# --- invalid -----------------------------------------------------------------------------------


def test_group_normalization_scale_of_the_wrong_length_is_named():
    proto, _ = group_norm(randn(1, 6, 4), randn(2), randn(6), 2, 21)
    with pytest.raises(OnnxImportError, match=r"groupnormalization_0.*scale \(2\) must hold 6"):
        relay.frontend.from_onnx(proto)


def test_gelu_with_an_unknown_approximation_is_named():
    proto, _ = single_op("Gelu", {"x": randn(2)}, {"approximate": "none"}, opset=20)
    proto.graph.node[0].attribute[0].s = b"erf"
    with pytest.raises(OpNotImplemented, match=r"gelu_0.*approximate='erf' is not supported"):
        relay.frontend.from_onnx(proto)
