"""AlterOpLayout: which convolutions become Winograd ones or products by a packed weight, which
dense layers become products by a packed or transposed weight, and that results do not
change."""

from __future__ import annotations

import numpy as np
import pytest

import vm
from compiler import relay
from tests.compiler.transform.util import assert_results_match, calls

alter = relay.transform.AlterOpLayout()
RNG = np.random.default_rng(3)
WINOGRAD = "nn.contrib_conv2d_winograd_without_weight_transform"
TRANSFORM = "nn.contrib_conv2d_winograd_weight_transform"
PACKED = "nn.contrib_conv2d_gemm_without_weight_transform"


def conv_module(
    channels: int = 8,
    out_channels: int = 8,
    size: int = 14,
    kernel: int = 3,
    constant: bool = True,
    dtype: str = "float32",
    **attrs: object,
) -> relay.IRModule:
    """``main(x) = relu(conv2d(x, W) + 1)`` on a (1, channels, size, size) input."""
    x = relay.var("x", shape=(1, channels, size, size), dtype=dtype)
    shape = (out_channels, channels // attrs.get("groups", 1), kernel, kernel)
    weight_value = RNG.standard_normal(shape).astype(dtype)
    params = [x]
    if constant:
        weight = relay.const(weight_value)
    else:
        weight = relay.var("w", shape=shape, dtype=dtype)
        params.append(weight)
    attrs.setdefault("padding", (1, 1))
    body = relay.nn.relu(relay.nn.conv2d(x, weight, **attrs) + relay.const(1.0, dtype))
    mod = relay.IRModule()
    mod["main"] = relay.Function(params, body)
    return mod


def image(channels: int = 8, size: int = 14, dtype: str = "float32") -> np.ndarray:
    return RNG.standard_normal((1, channels, size, size)).astype(dtype)


# ---- returns: rewritten ------------------------------------------------------------------------


def test_a_qualifying_convolution_becomes_a_winograd_one_with_a_foldable_transform() -> None:
    before = conv_module()
    after = alter(before)
    (conv,) = calls(after["main"], WINOGRAD)
    (transform,) = calls(after["main"], TRANSFORM)
    assert conv.args[1] is transform
    assert not calls(after["main"], "nn.conv2d")
    assert_results_match(before, after, [image()], rtol=1e-4)
    folded = relay.transform.FoldConstant()(after)
    assert not calls(folded["main"], TRANSFORM)  # the transform is computed at compile time


@pytest.mark.parametrize(("size", "tile"), [(14, 2), (15, 2), (28, 4), (30, 4)])
def test_the_tile_size_follows_the_output_size(size: int, tile: int) -> None:
    (conv,) = calls(alter(conv_module(size=size))["main"], WINOGRAD)
    assert conv.attrs["tile_size"] == tile


@pytest.mark.parametrize("size", [15, 30])
def test_opt_level_3_compiles_and_runs_it_like_the_reference(size: int) -> None:
    mod = conv_module(channels=16, out_channels=24, size=size)
    with relay.transform.PassContext(opt_level=3):
        exe = relay.vm.compile(mod)
    assert any(WINOGRAD.replace(".", "_") in p.name for p in exe.primitives)
    x = image(16, size)
    want = relay.create_executor("debug", mod).evaluate()(x)
    got = vm.VirtualMachine(exe, vm.cpu()).invoke("main", x)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(("size", "tile"), [(14, 2), (28, 4)])
def test_a_float32_winograd_weight_is_folded_into_panels_of_each_plane(size, tile) -> None:
    after = alter(conv_module(channels=64, out_channels=96, size=size))
    folded = relay.transform.FoldConstant()(after)
    (conv,) = calls(folded["main"], WINOGRAD)
    weight = conv.args[1]
    planes = (tile + 2) ** 2
    assert isinstance(weight, relay.Constant) and weight.data.shape == (planes * 3, 64, 32)
    assert conv.attrs["channels"] == 96


@pytest.mark.parametrize(
    "changes",
    [
        {"channels": 64, "out_channels": 40},  # a short last panel would waste its tiles
        {"channels": 32, "out_channels": 64},  # BLAS keeps up with few channels
        {"channels": 64, "out_channels": 64, "dtype": "float64"},
    ],
)
def test_other_winograd_weights_stay_as_the_transform_gives_them(changes: dict) -> None:
    folded = relay.transform.FoldConstant()(alter(conv_module(**changes)))
    (conv,) = calls(folded["main"], WINOGRAD)
    assert conv.args[1].data.shape == (4, 4, changes["out_channels"], changes["channels"])


@pytest.mark.parametrize(("size", "images"), [(14, 1), (15, 2), (28, 1), (30, 2)])
def test_opt_level_3_runs_winograd_planes_in_panels_like_the_reference(size, images) -> None:
    x = relay.var("x", shape=(images, 64, size, size), dtype="float32")
    w = RNG.standard_normal((64, 64, 3, 3)).astype("float32") * 0.1
    bias = RNG.standard_normal(64).astype("float32")
    conv = relay.nn.conv2d(x, relay.const(w), padding=(1, 1))
    mod = relay.IRModule.from_expr(
        relay.Function([x], relay.nn.relu(relay.nn.bias_add(conv, relay.const(bias))))
    )
    with relay.transform.PassContext(opt_level=3):
        exe = relay.vm.compile(mod)
    assert any(WINOGRAD.replace(".", "_") in p.name for p in exe.primitives)
    data = RNG.standard_normal((images, 64, size, size)).astype("float32")
    want = relay.create_executor("debug", mod).evaluate()(data)
    got = vm.VirtualMachine(exe, vm.cpu()).invoke("main", data)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-4, atol=1e-4)


def test_the_default_opt_level_takes_winograd_too() -> None:
    # TVM keeps AlterOpLayout for opt_level 3; relay.vm.compile runs it at the default level
    # as well, so a user who keeps the default context gets the fast kernels.
    exe = relay.vm.compile(conv_module())
    assert any("winograd" in p.name for p in exe.primitives)


def test_opt_level_1_keeps_nn_conv2d() -> None:
    # Nothing is folded below opt_level 2, so a weight transform would run on every call.
    with relay.transform.PassContext(opt_level=1):
        exe = relay.vm.compile(conv_module())
    assert not any("winograd" in p.name for p in exe.primitives)


def test_the_pass_keeps_tvms_opt_level_in_a_users_sequential() -> None:
    seq = relay.transform.Sequential([relay.transform.AlterOpLayout()])
    assert not calls(seq(conv_module())["main"], WINOGRAD)
    with relay.transform.PassContext(opt_level=3):
        assert calls(seq(conv_module())["main"], WINOGRAD)


# ---- returns: the other convolutions ------------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "becomes"),
    [
        ({"strides": (2, 2)}, PACKED),
        ({"dilation": (2, 2), "padding": (2, 2)}, PACKED),
        ({"size": 8}, PACKED),  # 16 output tiles: im2col and a product win
        ({"groups": 2}, "nn.conv2d"),
        ({"kernel": 1, "padding": (0, 0)}, PACKED),  # 8 multiply-adds per output: pointwise
        ({"channels": 4}, PACKED),  # too few channels for Winograd's transforms
        ({"kernel": 1, "padding": (0, 0), "channels": 4}, "nn.conv2d"),  # 4 multiply-adds
        # ... unless the input is one pixel (squeeze-excite): a matrix-vector product
        ({"kernel": 1, "padding": (0, 0), "channels": 4, "size": 1}, PACKED),
        ({"constant": False}, "nn.conv2d"),  # the transform could not be folded
        ({"dtype": "float64", "strides": (2, 2)}, "nn.conv2d"),
    ],
)
def test_convolutions_winograd_does_not_take_get_a_packed_weight_when_deep(
    changes: dict, becomes: str
) -> None:
    before = conv_module(**changes)
    after = alter(before)
    assert not calls(after["main"], WINOGRAD)
    assert len(calls(after["main"], becomes)) == 1
    dtype = changes.get("dtype", "float32")
    x = image(changes.get("channels", 8), changes.get("size", 14), dtype)
    args = [x] if changes.get("constant", True) else [x, RNG.standard_normal(
        (8, 4 if changes.get("groups") else 8, 3, 3)).astype(dtype)]  # fmt: skip
    assert_results_match(before, after, args, rtol=1e-4)


def test_a_packed_weight_is_folded_into_panels_of_32_output_channels() -> None:
    after = alter(conv_module(channels=16, out_channels=40, strides=(2, 2)))
    folded = relay.transform.FoldConstant()(after)
    (conv,) = calls(folded["main"], PACKED)
    weight = conv.args[1]
    assert isinstance(weight, relay.Constant) and weight.data.shape == (2, 16 * 9, 32)
    assert conv.attrs["channels"] == 40 and tuple(conv.attrs["kernel_size"]) == (3, 3)


@pytest.mark.parametrize(
    "attrs",
    [
        {"strides": (2, 2), "padding": (1, 2, 0, 1)},
        {"dilation": (2, 1), "padding": (2, 1)},
        {"kernel": 1, "padding": (0, 0)},  # the input is its own column matrix
        {"kernel": 1, "strides": (2, 2), "padding": (0, 0)},
    ],
)
def test_opt_level_3_runs_packed_convolutions_like_the_reference(attrs: dict) -> None:
    mod = conv_module(channels=72, out_channels=45, size=11, **attrs)
    with relay.transform.PassContext(opt_level=3):
        exe = relay.vm.compile(mod)
    assert any(PACKED.replace(".", "_") in p.name for p in exe.primitives)
    x = image(72, 11)
    want = relay.create_executor("debug", mod).evaluate()(x)
    got = vm.VirtualMachine(exe, vm.cpu()).invoke("main", x)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    ("changes", "copy"),
    [
        ({"kernel": 1, "strides": (2, 2)}, "strided_slice"),
        ({"kernel": 1, "strides": (3, 2), "channels": 40}, "strided_slice"),
        ({"kernel": 2, "strides": (2, 2)}, "transpose"),
        ({"kernel": 2, "strides": (2, 2), "size": 11}, "transpose"),  # the last row dropped
        ({"kernel": 3, "strides": (3, 3), "out_channels": 600}, "transpose"),
    ],
)
def test_windows_that_do_not_overlap_copy_their_pixels_then_run_pointwise(
    changes: dict, copy: str
) -> None:
    # ResNet's 1x1 stride-2 shortcuts, ConvNeXt's 2x2 downsampling, patch embeddings: the
    # input's pixels are copied plane by plane (a slice, a space-to-depth) instead of
    # gathered one per channel by im2row, and the product is a 1x1 stride-1 one.
    attrs = {"channels": 24, "out_channels": 40, "size": 12, "padding": (0, 0), **changes}
    before = conv_module(**attrs)
    after = alter(before)
    (conv,) = calls(after["main"], PACKED)
    assert tuple(conv.attrs["kernel_size"]) == (1, 1) and tuple(conv.attrs["strides"]) == (1, 1)
    assert calls(after["main"], copy)
    x = image(attrs["channels"], attrs["size"])
    assert_results_match(before, after, [x], rtol=1e-4)
    with relay.transform.PassContext(opt_level=3):
        exe = relay.vm.compile(before)
    want = relay.create_executor("debug", before).evaluate()(x)
    got = vm.VirtualMachine(exe, vm.cpu()).invoke("main", x)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    "changes",
    [
        {"kernel": 4, "strides": (4, 4), "channels": 3, "size": 224},  # ConvNeXt's stem
        {"kernel": 2, "strides": (2, 2), "padding": (1, 1)},  # padded: windows overlap it
        {"kernel": 2, "strides": (2, 2), "dilation": (2, 2)},
        {"kernel": 3, "strides": (2, 2)},
    ],
)
def test_other_strided_windows_keep_their_window(changes: dict) -> None:
    # The stem's 4x4 blocks are copied by the runtime's column blocks, in cache.
    attrs = {"channels": 24, "out_channels": 40, "size": 12, "padding": (0, 0), **changes}
    after = alter(conv_module(**attrs))
    (conv,) = calls(after["main"], PACKED)
    assert tuple(conv.attrs["strides"]) == changes["strides"]
    assert not calls(after["main"], "strided_slice") and not calls(after["main"], "transpose")


@pytest.mark.parametrize("tile", [2, 4])
def test_a_weight_transform_of_a_parameter_runs_as_a_kernel(tile: int) -> None:
    x = relay.var("x", shape=(1, 6, 9, 9), dtype="float32")
    w = relay.var("w", shape=(8, 6, 3, 3), dtype="float32")
    u = relay.nn.contrib_conv2d_winograd_weight_transform(w, tile_size=tile)
    y = relay.nn.contrib_conv2d_winograd_without_weight_transform(
        x, u, tile_size=tile, padding=(1, 1)
    )
    mod = relay.IRModule()
    mod["main"] = relay.Function([x, w], y)
    exe = relay.vm.compile(mod)
    xv, wv = image(6, 9), RNG.standard_normal((8, 6, 3, 3)).astype("float32")
    got = vm.VirtualMachine(exe, vm.cpu()).invoke("main", xv, wv)
    want = relay.create_executor("debug", relay.IRModule.from_expr(relay.nn.conv2d(
        x, w, padding=(1, 1)))).evaluate()(xv, wv)  # fmt: skip
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


# ---- dense layers ------------------------------------------------------------------------------


def dense_module(
    rows: object = 4,
    features: int = 256,
    units: int = 128,
    constant: bool = True,
    dtype: str = "float32",
) -> relay.IRModule:
    """``main(x) = relu(dense(x, W) + b)`` on a (rows, features) input."""
    x = relay.var("x", shape=(rows, features), dtype=dtype)
    weight_value = RNG.standard_normal((units, features)).astype(dtype)
    params = [x]
    if constant:
        weight = relay.const(weight_value)
    else:
        weight = relay.var("w", shape=(units, features), dtype=dtype)
        params.append(weight)
    bias = relay.const(RNG.standard_normal(units).astype(dtype))
    body = relay.nn.relu(relay.nn.bias_add(relay.nn.dense(x, weight), bias))
    mod = relay.IRModule()
    mod["main"] = relay.Function(params, body)
    return mod


@pytest.mark.parametrize("rows", [1, 4])
def test_a_float32_dense_layer_with_a_big_constant_weight_gets_a_packed_weight(rows: int) -> None:
    before = dense_module(rows=rows, units=130)
    after = alter(before)
    (product,) = calls(after["main"], "nn.contrib_dense_pack")
    assert not calls(after["main"], "nn.dense")
    assert product.attrs["units"] == 130 and product.attrs["weight_layout"] == "NC32n"
    x = RNG.standard_normal((rows, 256)).astype("float32")
    assert_results_match(before, after, [x], rtol=1e-5)
    folded = relay.transform.FoldConstant()(after)
    (product,) = calls(folded["main"], "nn.contrib_dense_pack")
    weight = product.args[1]
    assert isinstance(weight, relay.Constant) and weight.data.shape == (5, 256, 32)


def test_a_float64_dense_layer_with_a_big_constant_weight_becomes_a_product_by_its_transpose() -> (
    None
):
    before = dense_module(dtype="float64")
    after = alter(before)
    (product,) = calls(after["main"], "nn.matmul")
    assert not calls(after["main"], "nn.dense")
    assert not product.attrs["transpose_a"] and not product.attrs["transpose_b"]
    x = RNG.standard_normal((4, 256))
    assert_results_match(before, after, [x], rtol=1e-5)
    folded = relay.transform.FoldConstant()(after)
    (product,) = calls(folded["main"], "nn.matmul")
    weight = product.args[1]
    assert isinstance(weight, relay.Constant) and weight.data.shape == (256, 128)


@pytest.mark.parametrize(
    ("dtype", "kernel"), [("float32", "nn_contrib_dense_pack"), ("float64", "nn_matmul")]
)
@pytest.mark.parametrize("opt_level", [2, 3])
def test_the_vm_runs_the_product_by_the_altered_weight_for_any_batch(
    dtype: str, kernel: str, opt_level: int
) -> None:
    mod = dense_module(rows=relay.Any(), units=130, dtype=dtype)
    with relay.transform.PassContext(opt_level=opt_level):
        exe = relay.vm.compile(mod)
    assert any(kernel in p.name for p in exe.primitives)
    machine = vm.VirtualMachine(exe, vm.cpu())
    run = relay.create_executor("debug", mod).evaluate()
    for rows in (1, 5, 7, 8, 64):
        x = RNG.standard_normal((rows, 256)).astype(dtype)
        np.testing.assert_allclose(machine.invoke("main", x), run(x), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    "changes",
    [
        {"rows": 1, "dtype": "float64"},  # a matrix-vector product: as fast either way
        {"features": 64, "units": 64},  # small enough for the compiled loops
        {"constant": False},  # the transpose could not be folded
    ],
)
def test_other_dense_layers_are_left_alone(changes: dict) -> None:
    after = alter(dense_module(**changes))
    assert len(calls(after["main"], "nn.dense")) == 1
    assert not calls(after["main"], "nn.matmul")
