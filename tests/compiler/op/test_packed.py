"""layout_transform to NC<n>n panels, nn.contrib_dense_pack and
nn.contrib_conv2d_gemm_without_weight_transform: references against nn.dense and nn.conv2d,
type relations, errors."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.op.registry import OpTypeError
from tests.compiler.op._helpers import T, ref, rel

TRANSFORM = "layout_transform"
DENSE_PACK = "nn.contrib_dense_pack"
CONV = "nn.contrib_conv2d_gemm_without_weight_transform"
RNG = np.random.default_rng(9)


# ---- returns ----------------------------------------------------------------------------------


def test_packing_puts_row_p_times_n_plus_j_at_panel_p_lane_j_and_pads_with_zeros() -> None:
    w = np.arange(5 * 3, dtype="float32").reshape(5, 3)
    packed = ref(TRANSFORM, w, src_layout="NC", dst_layout="NC2n")
    assert packed.shape == (3, 3, 2) and packed.dtype == np.float32
    for p in range(3):
        for j in range(2):
            row = p * 2 + j
            want = w[row] if row < 5 else np.zeros(3, "float32")
            np.testing.assert_array_equal(packed[p, :, j], want)


@pytest.mark.parametrize(
    ("data", "units", "width"),
    [((4, 16), 32, 32), ((3, 16), 70, 32), ((2, 3, 8), 5, 4), ((1, 7), 1, 32), ((0, 4), 6, 2)],
)
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
def test_the_packed_product_equals_nn_dense(data, units, width, dtype) -> None:
    x = (RNG.standard_normal(data) * 10).astype(dtype)
    w = (RNG.standard_normal((units, data[-1])) * 10).astype(dtype)
    layout = f"NC{width}n"
    packed = ref(TRANSFORM, w, src_layout="NC", dst_layout=layout)
    got = ref(DENSE_PACK, x, packed, units=units, weight_layout=layout)
    want = ref("nn.dense", x, w)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


def _packed_oihw(w: np.ndarray) -> np.ndarray:
    return ref(TRANSFORM, w.reshape(w.shape[0], -1), src_layout="NC", dst_layout="NC32n")


@pytest.mark.parametrize(
    ("data", "out_channels", "kernel", "attrs"),
    [
        ((2, 5, 9, 8), 40, 3, {"strides": (2, 1), "padding": (1, 1, 0, 1)}),
        ((1, 3, 12, 12), 64, 7, {"strides": (2, 2), "padding": (3, 3)}),
        ((1, 16, 7, 7), 32, 1, {}),
        ((1, 4, 10, 10), 7, 3, {"dilation": (2, 2), "padding": (2, 2)}),
    ],
)
def test_the_packed_convolution_equals_nn_conv2d(data, out_channels, kernel, attrs) -> None:
    x = RNG.standard_normal(data).astype("float32")
    w = RNG.standard_normal((out_channels, data[1], kernel, kernel)).astype("float32")
    got = ref(CONV, x, _packed_oihw(w), channels=out_channels, kernel_size=kernel, **attrs)
    want = ref("nn.conv2d", x, w, **attrs)
    assert got.dtype == np.float32 and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_types_follow_tvm() -> None:
    assert rel(TRANSFORM, T((70, 16)), src_layout="NC", dst_layout="NC32n") == T((3, 16, 32))
    assert rel(DENSE_PACK, T((None, 16)), T((3, 16, 32)), units=70) == T((None, 70))
    assert rel(DENSE_PACK, T((2, 5, 16)), T((3, 16, 32))) == T((2, 5, 96))
    out = rel(DENSE_PACK, T((2, 16), "int8"), T((1, 16, 32), "int8"), out_dtype="int32")
    assert out == T((2, 32), "int32")
    conv = rel(CONV, T((None, 8, 14, 14)), T((2, 72, 32)), channels=40, kernel_size=(3, 3))
    assert conv == T((None, 40, 12, 12))


# ---- invalid ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "attrs", "message"),
    [
        ((T((4, 8)),), {"src_layout": "CN"}, "src_layout='CN' is not supported"),
        ((T((4, 8)),), {"dst_layout": "NCHW"}, "dst_layout='NCHW' is not supported"),
        ((T((4, 8)),), {"dst_layout": "NC0n"}, "dst_layout='NC0n' is not supported"),
        ((T((4, 8, 2)),), {}, "2-D NC tensor"),
    ],
)
def test_layout_transform_refuses_what_it_cannot_do(args, attrs, message) -> None:
    with pytest.raises(OpTypeError, match=message):
        rel(TRANSFORM, *args, **attrs)


@pytest.mark.parametrize(
    ("data", "weight", "attrs", "message"),
    [
        (T((2, 16)), T((3, 16, 16)), {}, r"\(panels, in_features, 32\)"),
        (T((2, 16)), T((48, 16)), {}, "3-D NC32n tensor"),
        (T((2, 8)), T((3, 16, 32)), {}, "input features"),
        (T((2, 16)), T((3, 16, 32)), {"units": 64}, "units=64 does not fit"),
        (T((2, 16)), T((3, 16, 32)), {"units": 97}, "units=97 does not fit"),
        (T((2, 16)), T((3, 16, 32), "float64"), {}, "float64"),
        (T((2, 16)), T((3, 16, 32)), {"weight_layout": "NK"}, "weight_layout='NK'"),
        (T(()), T((3, 16, 32)), {}, "rank >= 1"),
    ],
)
def test_the_packed_product_refuses_mismatched_operands(data, weight, attrs, message) -> None:
    with pytest.raises(OpTypeError, match=message):
        rel(DENSE_PACK, data, weight, **attrs)


_CONV_ATTRS = {"channels": 40, "kernel_size": (3, 3)}


@pytest.mark.parametrize(
    ("data", "weight", "attrs", "message"),
    [
        (T((1, 8, 9, 9)), T((2, 72, 32)), {"kernel_size": (3, 3)}, "channels is required"),
        (T((1, 8, 9, 9)), T((2, 72, 32)), {"channels": 40}, "kernel_size is required"),
        (T((1, 8, 9, 9)), T((1, 72, 32)), _CONV_ATTRS, r"\(2, in_channels \* 3 \* 3, 32\)"),
        (T((1, 8, 9, 9)), T((2, 72, 16)), _CONV_ATTRS, "3-D NC32n tensor"),
        (T((1, 8, 9, 9)), T((2, 70, 32)), _CONV_ATTRS, r"not a multiple of the kernel's 3 \* 3"),
        (T((1, 4, 9, 9)), T((2, 72, 32)), _CONV_ATTRS, "has 4 input channels"),
        (T((1, 8, 9, 9)), T((2, 72, 32)), {**_CONV_ATTRS, "groups": 2}, "groups=2 must be 1"),
        (T((1, 8, 9, 9), "float64"), T((2, 72, 32), "float64"), _CONV_ATTRS, "float32"),
        (T((1, 8, 2, 2)), T((2, 72, 32)), _CONV_ATTRS, "kernel"),
    ],
)
def test_the_packed_convolution_refuses_mismatched_operands(data, weight, attrs, message) -> None:
    with pytest.raises(OpTypeError, match=message):
        rel(CONV, data, weight, **attrs)
