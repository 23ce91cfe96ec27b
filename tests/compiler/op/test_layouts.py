"""Channels-last builders: ``relay.nn.conv2d(data_layout="NHWC", kernel_layout="HWIO")`` and
the NHWC pools compute what the NCHW operators compute on the transposed data (returns), and
an unknown layout is refused by name (invalid)."""

from __future__ import annotations

import numpy as np
import pytest

import vm
from compiler import relay
from compiler.ir.expr import Call, Constant
from compiler.ir.visitor import post_order

RNG = np.random.default_rng(11)


def _run(body, params: list, args: list[np.ndarray]) -> np.ndarray:
    """``body`` on the VM, checked against the reference interpreter."""
    mod = relay.IRModule.from_expr(relay.Function(params, body))
    want = relay.create_executor("debug", mod).evaluate()(*args)
    got = vm.VirtualMachine(relay.vm.compile(mod)).invoke("main", *args).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    return got


def _nchw_conv(x: np.ndarray, w_oihw: np.ndarray, **attrs) -> np.ndarray:
    """The NCHW convolution of NCHW ``x``, on the reference interpreter."""
    data = relay.var("x", shape=x.shape)
    mod = relay.IRModule.from_expr(
        relay.Function([data], relay.nn.conv2d(data, relay.const(w_oihw), **attrs))
    )
    return relay.create_executor("debug", mod).evaluate()(x)


# --- returns ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kernel_layout", "to_layout", "groups"),
    [
        ("HWIO", (2, 3, 1, 0), 1),  # TensorFlow's
        ("OHWI", (0, 2, 3, 1), 1),
        ("OIHW", (0, 1, 2, 3), 1),
        ("HWOI", (2, 3, 0, 1), 6),  # depthwise, as TVM lays its NHWC depthwise weights
    ],
)
def test_an_nhwc_convolution_is_the_nchw_one_of_the_transposed_data(
    kernel_layout, to_layout, groups
):
    x = RNG.standard_normal((2, 7, 9, 6)).astype("float32")
    w_oihw = RNG.standard_normal((6, 6 // groups, 3, 3)).astype("float32")
    w = np.ascontiguousarray(np.transpose(w_oihw, to_layout))
    attrs = {"strides": (2, 1), "padding": (1, 0), "groups": groups}
    want = _nchw_conv(x.transpose(0, 3, 1, 2), w_oihw, **attrs).transpose(0, 2, 3, 1)
    data, weight = relay.var("x", shape=x.shape), relay.var("w", shape=w.shape)
    body = relay.nn.conv2d(data, weight, data_layout="NHWC", kernel_layout=kernel_layout, **attrs)
    got = _run(body, [data, weight], [x, w])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_an_nhwc_convolution_may_ask_for_an_nchw_result():
    x = RNG.standard_normal((1, 5, 5, 3)).astype("float32")
    w = RNG.standard_normal((3, 3, 3, 4)).astype("float32")
    want = _nchw_conv(x.transpose(0, 3, 1, 2), w.transpose(3, 2, 0, 1), padding=(1, 1))
    data = relay.var("x", shape=x.shape)
    body = relay.nn.conv2d(
        data, relay.const(w), padding=(1, 1), data_layout="NHWC", kernel_layout="HWIO",
        out_layout="NCHW",
    )  # fmt: skip
    assert _run(body, [data], [x]).shape == (1, 4, 5, 5)
    np.testing.assert_allclose(_run(body, [data], [x]), want, rtol=1e-5, atol=1e-5)


def test_a_constant_weight_is_laid_out_at_once_not_by_a_transpose_call():
    data = relay.var("x", shape=(1, 5, 5, 3))
    w = RNG.standard_normal((3, 3, 3, 4)).astype("float32")
    body = relay.nn.conv2d(data, relay.const(w), data_layout="NHWC", kernel_layout="HWIO")
    conv = body.args[0]
    assert conv.op.name == "nn.conv2d" and conv.attrs["data_layout"] == "NCHW"
    assert isinstance(conv.args[1], Constant)
    np.testing.assert_array_equal(conv.args[1].data, w.transpose(3, 2, 0, 1))


@pytest.mark.parametrize(
    "build",
    [
        lambda d, layout: relay.nn.max_pool2d(
            d, pool_size=(3, 2), strides=(2, 1), padding=(1, 1), layout=layout
        ),
        lambda d, layout: relay.nn.avg_pool2d(
            d,
            pool_size=(2, 2),
            strides=(2, 2),
            padding=(1, 0),
            layout=layout,
            count_include_pad=True,
        ),
        lambda d, layout: relay.nn.global_max_pool2d(d, layout=layout),
        lambda d, layout: relay.nn.global_avg_pool2d(d, layout=layout),
        lambda d, layout: relay.nn.adaptive_avg_pool2d(d, (2, 3), layout=layout),
    ],
)
def test_an_nhwc_pool_is_the_nchw_one_of_the_transposed_data(build):
    x = RNG.standard_normal((2, 7, 8, 5)).astype("float32")
    data_h = relay.var("x", shape=x.shape)
    got = _run(build(data_h, "NHWC"), [data_h], [x])
    xc = np.ascontiguousarray(x.transpose(0, 3, 1, 2))
    data_c = relay.var("x", shape=xc.shape)
    want = _run(build(data_c, "NCHW"), [data_c], [xc]).transpose(0, 2, 3, 1)
    np.testing.assert_array_equal(got, want)


def test_nchw_calls_are_built_as_before():
    data = relay.var("x", shape=(1, 3, 5, 5))
    body = relay.nn.max_pool2d(relay.nn.conv2d(data, relay.var("w", shape=(4, 3, 3, 3))))
    ops = [n.op.name for n in post_order(body) if isinstance(n, Call)]
    assert ops == ["nn.conv2d", "nn.max_pool2d"]


# --- invalid ------------------------------------------------------------------------------------


def test_an_unknown_layout_is_refused_by_name():
    data = relay.var("x", shape=(1, 3, 5, 5))
    weight = relay.var("w", shape=(4, 3, 3, 3))
    with pytest.raises(ValueError, match=r"nn.conv2d: layout='NCHW4c' is not supported"):
        relay.nn.conv2d(data, weight, data_layout="NCHW4c")
    with pytest.raises(ValueError, match=r"kernel_layout='HWIX'.*letters O, I, H and W"):
        relay.nn.conv2d(data, weight, data_layout="NHWC", kernel_layout="HWIX")
    with pytest.raises(ValueError, match=r"nn.conv2d: out_layout='CHWN'"):
        relay.nn.conv2d(data, weight, data_layout="NHWC", kernel_layout="HWIO", out_layout="CHWN")
    with pytest.raises(ValueError, match=r"nn.max_pool2d: layout='NDHWC'"):
        relay.nn.max_pool2d(data, layout="NDHWC")
