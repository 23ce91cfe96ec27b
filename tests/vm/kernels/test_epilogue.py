"""Fused convolution and dense kernels compute their elementwise epilogue in the same pass.

Returns group: conv2d -> folded batch norm (multiply, add) -> relu and conv2d -> bias_add
-> residual add -> relu as one kernel whose chain runs per block of the convolution's
output (the generated source shows it, and the convolution writes straight into the
result), on BLAS-sized and loop-sized shapes and depthwise convolutions; the plain path
when the chain broadcasts the output to a bigger shape; several results (pre-activation,
activation, the convolution itself); a chain reading the convolution twice; a cast to
another dtype; a chain that also needs a later array operator (no epilogue, still right);
the transposed convolution; nn.dense and nn.batch_matmul with bias and activation
(including leaky_relu and prelu, which fuse like any elementwise operator); a small
plane's axes walked as one loop when every operand reads all of them or none; bias,
residual and a clamp or swish applied by packed, grouped and Winograd convolutions as
they store (a residual that is a strided view of a slice by the loop after them).
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from tests.vm.kernels.harness import SUMS, Program, check, packed, run
from vm.kernels import load_kernel

RNG = np.random.default_rng(31)


def f32(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype("float32")


def source_of(program: Program, results: list[int]) -> str:
    return load_kernel(program.description(results)).path.read_text()


def folded_batch_norm(shapes: tuple, residual: bool, groups: int = 1) -> tuple[Program, int]:
    """conv2d -> multiply(scale) -> add(shift) [-> add(residual)] -> relu."""
    data_shape, weight_shape = shapes
    o = weight_shape[0]
    inputs = [f32(*data_shape), f32(*weight_shape), f32(o, 1, 1), f32(o, 1, 1)]
    out_shape = (data_shape[0], o, data_shape[2], data_shape[3])
    if residual:
        inputs.append(f32(*out_shape))
    program = Program(inputs)
    (value,) = program.add("nn.conv2d", [0, 1], padding=(1, 1), groups=groups)
    (value,) = program.add("multiply", [value, 2])
    (value,) = program.add("add", [value, 3])
    if residual:
        (value,) = program.add("add", [value, 4])
    (value,) = program.add("nn.relu", [value])
    return program, value


def test_conv_batch_norm_relu_runs_per_block_into_the_result() -> None:
    for shapes in [((1, 4, 5, 6), (3, 4, 3, 3)), ((2, 32, 14, 14), (64, 32, 3, 3))]:
        program, value = folded_batch_norm(shapes, residual=False)
        check(program, [value], tolerances=SUMS)
    source = source_of(program, [value])
    assert "as its epilogue" in source
    # The convolution writes into the output array itself, and no separate pass follows
    # unless the result is broadcast beyond the convolution's shape.
    assert "= out0 if ep0 else np.empty(" in source
    assert source.count("fused elementwise loop") == 1
    assert "if not ep0:" in source


def test_conv_residual_relu_with_depthwise_groups_and_the_broadcast_fallback() -> None:
    for shapes in [((1, 8, 6, 7), (8, 1, 3, 3)), ((2, 16, 12, 12), (16, 1, 3, 3))]:
        program, value = folded_batch_norm(shapes, residual=True, groups=shapes[0][1])
        check(program, [value], tolerances=SUMS)
    # The same kernel, with a residual of batch 3 broadcasting a convolution of batch 1:
    # the result is bigger than the convolution's output, so the plain path runs.
    inputs = [f32(1, 8, 6, 7), f32(8, 1, 3, 3), f32(8, 1, 1), f32(8, 1, 1), f32(3, 8, 6, 7)]
    program = Program(inputs)
    (value,) = program.add("nn.conv2d", [0, 1], padding=(1, 1), groups=8)
    (value,) = program.add("multiply", [value, 2])
    (value,) = program.add("add", [value, 3])
    (value,) = program.add("add", [value, 4])
    (value,) = program.add("nn.relu", [value])
    check(program, [value], tolerances=SUMS)


def test_several_results_keep_the_convolution_intact() -> None:
    program = Program([f32(2, 16, 10, 10), f32(32, 16, 3, 3), f32(32)])
    (conv,) = program.add("nn.conv2d", [0, 1], strides=(2, 2), padding=(1, 1))
    (biased,) = program.add("nn.bias_add", [conv, 2])
    (relu,) = program.add("nn.relu", [biased])
    check(program, [relu, biased, conv], ["relu", "pre-activation", "conv"], SUMS)


def test_a_chain_reading_the_convolution_twice_and_a_cast() -> None:
    program = Program([f32(1, 16, 9, 9), f32(16, 16, 3, 3)])
    (conv,) = program.add("nn.conv2d", [0, 1], padding=(1, 1))
    (square,) = program.add("multiply", [conv, conv])
    (total,) = program.add("add", [conv, square])
    (half,) = program.add("cast", [total], dtype="float16")
    check(program, [half], tolerances={np.dtype("float16"): {"rtol": 1e-2, "atol": 1e-2}})
    assert "as its epilogue" in source_of(program, [half])


def test_a_chain_needing_a_later_array_operator_runs_afterwards() -> None:
    program = Program([f32(1, 16, 9, 9), f32(16, 16, 3, 3), f32(1, 16, 9, 9)])
    (conv,) = program.add("nn.conv2d", [0, 1], padding=(1, 1))
    (soft,) = program.add("nn.softmax", [2], axis=1)
    (total,) = program.add("add", [conv, soft])
    (relu,) = program.add("nn.relu", [total])
    check(program, [relu], tolerances=SUMS)
    assert "as its epilogue" not in source_of(program, [relu])


def test_conv2d_transpose_with_bias_and_leaky_relu() -> None:
    program = Program([f32(1, 32, 8, 8), f32(32, 16, 4, 4), f32(16)])
    (conv,) = program.add("nn.conv2d_transpose", [0, 1], strides=(2, 2), padding=(1, 1))
    (biased,) = program.add("nn.bias_add", [conv, 2])
    (value,) = program.add("nn.leaky_relu", [biased], alpha=0.1)
    check(program, [value], tolerances=SUMS)
    assert "as its epilogue" in source_of(program, [value])


def test_dense_bias_prelu_on_three_dimensional_data() -> None:
    for shape, units in [((2, 3, 8), 5), ((4, 16, 64), 48)]:
        program = Program([f32(*shape), f32(units, shape[-1]), f32(units), f32(units)])
        (dense,) = program.add("nn.dense", [0, 1])
        (biased,) = program.add("nn.bias_add", [dense, 2], axis=-1)
        (value,) = program.add("nn.prelu", [biased, 3], axis=2)
        check(program, [value], tolerances=SUMS)
    assert "as its epilogue" in source_of(program, [value])


def test_matmul_bias_relu_by_a_row_major_weight() -> None:
    for shape, units in [((3, 8), 5), ((64, 128), 96)]:
        program = Program([f32(*shape), f32(shape[-1], units), f32(units)])
        (product,) = program.add("nn.matmul", [0, 1])
        (biased,) = program.add("nn.bias_add", [product, 2], axis=-1)
        (value,) = program.add("nn.relu", [biased])
        check(program, [value], tolerances=SUMS)
    assert "as its epilogue" in source_of(program, [value])


def test_batch_matmul_scaled_and_activated() -> None:
    program = Program([f32(3, 20, 30), f32(3, 40, 30), f32(1, 1, 40)])
    (product,) = program.add("nn.batch_matmul", [0, 1])
    (scaled,) = program.add("multiply", [product, 2])
    (value,) = program.add("tanh", [scaled])
    check(program, [value], tolerances=SUMS)
    assert "as its epilogue" in source_of(program, [value])


def gelu_after_bias(shape: tuple, units: int) -> tuple[Program, int]:
    """dense -> bias_add -> gelu with 0-d constants (0.5 x (1 + erf(x / sqrt 2)))."""
    scalars = [np.array(c, "float32") for c in (0.5, 1.0, 1.0 / np.sqrt(2.0))]
    program = Program([f32(*shape), f32(units, shape[-1]), f32(units), *scalars])
    (dense,) = program.add("nn.dense", [0, 1])
    (x,) = program.add("nn.bias_add", [dense, 2], axis=-1)
    (half,) = program.add("multiply", [3, x])
    (scaled,) = program.add("multiply", [x, 5])
    (erf,) = program.add("erf", [scaled])
    (shifted,) = program.add("add", [4, erf])
    (value,) = program.add("multiply", [half, shifted])
    return program, value


def test_a_gelu_epilogue_reads_its_bias_directly_and_its_constants_once() -> None:
    for shape, units in [((1, 16), 8), ((5, 32), 40), ((2, 3, 24), 64)]:
        program, value = gelu_after_bias(shape, units)
        check(program, [value], tolerances=SUMS)
    source = source_of(program, [value])
    assert "as its epilogue" in source
    # The bias is read at the loop's own index in the loop taken when nothing broadcasts
    # (a read through a 0/1 flag kept the loop scalar), and the constants before it.
    assert re.search(r"if \(m2_0 == 1 or s\w+ == 1\):", source)
    assert re.search(r"= in2\[e\d+\]\n", source)
    assert re.search(r"c\d+ = in3\[\(\)\]\n", source)


def test_an_epilogue_operand_broadcast_along_a_looped_axis_takes_the_flagged_loop() -> None:
    # A (rows, 1) column added to a (rows, units) product: broadcast along the units axis,
    # for every size of it, including a single unit and a single row.
    for rows, units in [(4, 6), (1, 6), (4, 1), (3, 33)]:
        program = Program([f32(rows, 16), f32(units, 16), f32(rows, 1), f32(1, units)])
        (dense,) = program.add("nn.dense", [0, 1])
        (value,) = program.add("add", [dense, 2])
        (value,) = program.add("add", [value, 3])
        (value,) = program.add("erf", [value])
        check(program, [value], tolerances=SUMS)
    assert "as its epilogue" in source_of(program, [value])


def test_a_bias_and_relu6_epilogue_walks_each_small_plane_in_one_loop() -> None:
    # MobileNet's depthwise layer on a 7x7 plane: the bias reads channels only, so the
    # plane's two axes are walked as one (a 7-wide row would leave the vectors idle).
    # float64, because float32's loops apply this chain as they store and need no walk.
    for shape in [(1, 24, 7, 7), (2, 8, 5, 9)]:
        c = shape[1]
        inputs = [f32(*shape), f32(c, 1, 3, 3), f32(c)]
        program = Program([a.astype("float64") for a in inputs])
        (value,) = program.add("nn.conv2d", [0, 1], padding=(1, 1), groups=c)
        (value,) = program.add("nn.bias_add", [value, 2], axis=1)
        (value,) = program.add("clip", [value], a_min=0.0, a_max=6.0)
        check(program, [value], tolerances=SUMS)
    source = source_of(program, [value])
    assert re.search(r"v\d+ = out0\.reshape\(\(out0\.shape\[0\], out0\.shape\[1\], 1, ", source)
    assert "in2.reshape" not in source  # the bias keeps its own shape


def test_a_residual_reading_every_axis_is_folded_with_the_plane() -> None:
    program = Program([f32(2, 16, 6, 6), f32(16, 16, 1, 1), f32(16), f32(2, 16, 6, 6)])
    (value,) = program.add("nn.conv2d", [0, 1])
    (value,) = program.add("nn.bias_add", [value, 2], axis=1)
    (value,) = program.add("add", [value, 3])
    (value,) = program.add("nn.relu", [value])
    check(program, [value], tolerances=SUMS)
    assert re.search(r"v\d+ = in3\.reshape\(", source_of(program, [value]))


# A packed convolution's bias and clamp, applied by its tiles as they store them: 1x1 by
# pixel panels (9x9, and 7x7 from few channels) and by pixels (7x7 from more than
# convolution.POINTWISE_SMALL_DEPTH), a 3x3 window in column blocks (28x28), and one left
# to im2col then a product (5x5, too few blocks), each with relu, relu6 and bias only.
PACKED_SHAPES = [
    ((2, 16, 9, 9), 40, 1),
    ((1, 24, 7, 7), 33, 1),
    ((1, 136, 7, 7), 33, 1),
    ((1, 8, 28, 28), 20, 3),
    ((1, 6, 5, 5), 9, 3),
]


def packed_conv_chain(
    data_shape: tuple, units: int, kernel: int, tail: str, residual: tuple | None = None
) -> tuple:
    """conv2d by a packed weight -> bias_add [-> add(residual of shape ``residual``)] ->
    ``tail`` (``relu``, ``clip``, a swish of either operand order, or none)."""
    c = data_shape[1]
    data = f32(*data_shape)
    data.flat[3] = np.nan  # one NaN input pixel: relu turns it into 0, clip keeps it
    weight = f32(units, c, kernel, kernel)
    inputs = [data, packed(weight.reshape(units, -1)), f32(units)]
    program = Program(inputs + ([f32(*residual)] if residual else []))
    pad = kernel // 2
    (value,) = program.add(
        "nn.contrib_conv2d_gemm_without_weight_transform", [0, 1], channels=units,
        kernel_size=(kernel, kernel), padding=(pad, pad),
    )  # fmt: skip
    (value,) = program.add("nn.bias_add", [value, 2], axis=1)
    if residual:
        (value,) = program.add("add", [3, value])
    return program, activation(program, value, tail, clip=(0.0, 6.0))


def activation(
    program: Program,
    value: int,
    tail: str,
    clip: tuple[float, float] = (-0.5, 0.5),
    gelu_constants: tuple[int, int, int] | None = None,
) -> int:
    """``value`` after the chain's last step: ``relu``, ``clip`` (to ``clip``), ``swish``
    or ``swish-gate`` (see :func:`swish`), ``gelu`` (see :func:`gelu`, its constants the
    inputs ``gelu_constants``), or nothing for ``""``."""
    if tail == "relu":
        (value,) = program.add("nn.relu", [value])
    elif tail == "clip":
        (value,) = program.add("clip", [value], a_min=clip[0], a_max=clip[1])
    elif tail == "gelu":
        assert gelu_constants is not None
        (value,) = gelu(program, value, gelu_constants)
    elif tail:
        (value,) = swish(program, value, tail)
    return value


def swish(program: Program, value: int, tail: str) -> tuple[int]:
    """``multiply(value, sigmoid(value))``, the sigmoid first for ``tail`` "swish-gate"."""
    (gate,) = program.add("sigmoid", [value])
    return program.add("multiply", [gate, value] if tail == "swish-gate" else [value, gate])


def test_a_packed_convolutions_bias_and_clamp_run_in_its_tiles() -> None:
    for data_shape, units, kernel in PACKED_SHAPES:
        for tail in ("relu", "clip", "swish", "swish-gate", ""):
            program, value = packed_conv_chain(data_shape, units, kernel, tail)
            check(program, [value], tolerances=SUMS)
            source = source_of(program, [value])
            assert "convolution.post_epilogue(" in source
            assert ("convolution.SWISH" in source) == tail.startswith("swish")
            # No loop of the chain after the product, but the one for a broadcast result.
            assert source.count("for l") == 0


def test_a_packed_convolutions_residual_add_runs_in_its_tiles_when_shapes_agree() -> None:
    for data_shape, units, kernel in PACKED_SHAPES:
        n, _, h, w = data_shape
        for tail in ("relu", ""):
            # The residual of the output's shape is added in the tiles; one broadcast
            # along the rows takes the loop after the product, in the same kernel.
            for residual in [(n, units, h, w), (n, units, 1, w)]:
                program, value = packed_conv_chain(data_shape, units, kernel, tail, residual)
                check(program, [value], tolerances=SUMS)
                source = source_of(program, [value])
                assert "in3.shape[0] ==" in source and "convolution.post_epilogue(" in source


def test_a_strided_view_residual_is_added_by_the_loop_after_the_tiles() -> None:
    # The residual is a slice of a wider input, a view with the input's strides: the
    # tiles find a residual at a fixed distance from each output element, so they leave
    # it to the epilogue loop, which indexes it.
    data = f32(1, 8, 9, 9)
    program = Program([data, packed(f32(16, 8, 1, 1).reshape(16, -1)), f32(16), f32(1, 16, 9, 20)])
    # Sliced before the convolution, so the residual is there when its epilogue is planned;
    # along the rows, so that its rows lie further apart than the output's.
    (part,) = program.add("strided_slice", [3], begin=[2], end=[11], strides=[1], axes=[3])
    (value,) = program.add(
        "nn.contrib_conv2d_gemm_without_weight_transform", [0, 1], channels=16,
        kernel_size=(1, 1),
    )  # fmt: skip
    (value,) = program.add("nn.bias_add", [value, 2], axis=1)
    (value,) = program.add("add", [value, part])
    (value,) = program.add("nn.relu", [value])
    check(program, [value], tolerances=SUMS)
    source = source_of(program, [value])
    assert "as_strided" in source and "as its epilogue" in source
    assert "post_epilogue(" not in source or "sv_" not in source.split("post_epilogue(")[1]


def test_a_packed_convolutions_relu_alone_runs_in_its_tiles() -> None:
    data = f32(1, 8, 9, 9)
    data.flat[3] = np.nan
    program = Program([data, packed(f32(16, 8, 1, 1).reshape(16, -1))])
    (value,) = program.add(
        "nn.contrib_conv2d_gemm_without_weight_transform", [0, 1], channels=16,
        kernel_size=(1, 1),
    )  # fmt: skip
    (value,) = program.add("nn.relu", [value])
    check(program, [value], tolerances=SUMS)
    source = source_of(program, [value])
    assert "convolution.post_epilogue(" in source and source.count("for l") == 0


def test_a_packed_convolution_with_another_chain_keeps_its_epilogue_loop() -> None:
    program, value = packed_conv_chain((1, 8, 9, 9), 16, 1, "relu")
    (value,) = program.add("sigmoid", [value])
    check(program, [value], tolerances=SUMS)
    source = source_of(program, [value])
    assert "convolution.post_epilogue(" not in source
    assert "as its epilogue" in source


# Depthwise and narrow grouped convolutions (float32) apply the same chain as they write
# each group: whole planes (stride 1), row loops (stride 2 on wide rows, two channels per
# group), channels-last (dilated, narrow), a channel multiplier of 2.
GROUPED = [
    # (data shape, out channels, groups, kernel, stride, dilation)
    ((1, 8, 9, 9), 8, 8, 3, 1, 1),
    ((2, 6, 20, 20), 6, 3, 3, 2, 1),
    ((1, 16, 7, 7), 16, 16, 3, 1, 2),
    ((1, 4, 10, 10), 8, 4, 5, 1, 1),
]


@pytest.mark.parametrize("tail", ["relu", "clip", "swish", ""])
@pytest.mark.parametrize("residual", [False, True])
def test_grouped_convolutions_apply_bias_and_clamp_as_they_write(tail: str, residual: bool) -> None:
    for data_shape, units, groups, kernel, stride, dilation in GROUPED:
        data = f32(*data_shape)
        data.flat[5] = np.nan
        weight = f32(units, data_shape[1] // groups, kernel, kernel)
        n, _, h, w = data_shape
        out_h = (h + 2 * dilation * (kernel // 2) - dilation * (kernel - 1) - 1) // stride + 1
        out_w = (w + 2 * dilation * (kernel // 2) - dilation * (kernel - 1) - 1) // stride + 1
        extra = [f32(n, units, out_h, out_w)] if residual else []
        program = Program([data, weight, f32(units), *extra])
        pad = dilation * (kernel // 2)
        (value,) = program.add(
            "nn.conv2d", [0, 1], groups=groups, padding=(pad, pad), strides=(stride, stride),
            dilation=(dilation, dilation),
        )  # fmt: skip
        (value,) = program.add("nn.bias_add", [value, 2], axis=1)
        if residual:
            (value,) = program.add("add", [value, 3])
        value = activation(program, value, tail)
        check(program, [value], tolerances=SUMS)
        assert "convolution.post_epilogue(" in source_of(program, [value])


def test_a_winograd_convolution_applies_bias_residual_and_clamp_with_its_output_transform() -> None:
    # Shared by channels with the workers (64 channels at 28x28) and alone (8 at 6x6), the
    # 16-plane and the 36-plane transforms. (No NaN input: its transform spreads it over a
    # whole tile, where a direct convolution keeps it to the 3x3 windows that read it.)
    for channels, size, planes in [(64, 28, 36), (8, 6, 16), (16, 10, 36)]:
        data = f32(1, channels, size, size)
        tile = 2 if planes == 16 else 4
        # Outputs of about unit size: the 36-plane transform amplifies rounding, and an
        # output near zero after larger terms cancel would need a tolerance of its own.
        u = f32(tile + 2, tile + 2, channels, channels) / (4 * channels)
        program = Program([data, u, f32(channels), f32(1, channels, size, size)])
        (value,) = program.add(
            "nn.contrib_conv2d_winograd_without_weight_transform", [0, 1], tile_size=tile,
            padding=(1, 1), channels=channels, kernel_size=(3, 3),
        )  # fmt: skip
        (value,) = program.add("nn.bias_add", [value, 2], axis=1)
        (value,) = program.add("add", [value, 3])
        (value,) = program.add("nn.relu", [value])
        check(program, [value], tolerances={np.dtype("float32"): {"rtol": 1e-3, "atol": 1e-3}})
        assert "convolution.post_epilogue(" in source_of(program, [value])


# Packed dense layers: (data shape, units). One row (below COLUMNS_POST_MIN: the chain
# runs in the loop after the product); then outputs big enough for the product's loops to
# apply it: units of a short last panel; a weight that stays in cache (tiles of rows across
# the panels, shared by rows); a big weight (panels down the rows, shared by panels, more
# panels than one epilogue strip); a deep one (its panels in blocks of k).
PACKED_DENSE = [
    ((1, 40), 24),
    ((4, 100, 16), 45),
    ((300, 32), 96),
    ((60, 700), 300),
    ((200, 2100), 96),
]


def packed_dense_chain(
    shape: tuple, units: int, tail: str, residual: bool, bias_op: str = "add", one: float = 1.0
) -> tuple[Program, int]:
    """dense_pack -> bias (``add`` of a 1-D array, or ``nn.bias_add`` on the last axis)
    [-> add(residual)] [-> relu, clip, swish or the exporters' gelu, adding ``one`` to its
    erf]; the product is the value after the inputs."""
    out_shape = (*shape[:-1], units)
    scalars = [np.array(c, "float32") for c in (np.sqrt(2.0), one, 0.5)]
    extra = [f32(*out_shape)] if residual else []
    weight = f32(units, shape[-1]) / np.float32(np.sqrt(shape[-1]))
    program = Program([f32(*shape), packed(weight), f32(units), *scalars, *extra])
    (value,) = program.add("nn.contrib_dense_pack", [0, 1], units=units)
    if bias_op == "add":
        (value,) = program.add("add", [2, value])
    else:
        (value,) = program.add("nn.bias_add", [value, 2], axis=-1)
    if residual:
        (value,) = program.add("add", [value, 6])
    value = activation(program, value, tail, gelu_constants=(3, 4, 5))
    return program, value


def gelu(program: Program, value: int, constants: tuple[int, int, int]) -> tuple[int]:
    """``(v * (erf(v / root2) + one)) * half``, as exporters write it."""
    root2, one, half = constants
    (scaled,) = program.add("divide", [value, root2])
    (erf,) = program.add("erf", [scaled])
    (shifted,) = program.add("add", [erf, one])
    (product,) = program.add("multiply", [value, shifted])
    return program.add("multiply", [product, half])


@pytest.mark.parametrize("tail", ["relu", "clip", "swish", "gelu", ""])
def test_a_packed_dense_layers_bias_and_activation_run_with_its_product(tail: str) -> None:
    for shape, units in PACKED_DENSE:
        for residual in (False, True):
            program, value = packed_dense_chain(shape, units, tail, residual)
            check(program, [value], tolerances=SUMS)
            source = source_of(program, [value])
            assert "convolution.post_epilogue(" in source
            assert ("convolution.GELU," in source) == (tail == "gelu")
            # The loop of the chain after the product runs only without a header.
            assert re.search(r"\n(\s+)if post\d+\.size == 0:\n\1    if ep\d+:\n", source)


def test_a_packed_dense_layers_bias_may_be_a_bias_add_on_the_last_axis() -> None:
    program, value = packed_dense_chain((3, 100, 50), 70, "relu", True, bias_op="bias_add")
    check(program, [value], tolerances=SUMS)
    assert "convolution.post_epilogue(" in source_of(program, [value])


@pytest.mark.parametrize("form", ["erf", "tanh"])
def test_a_gelu_with_the_product_gives_the_bits_of_the_loop_after_it(form: str) -> None:
    # The same chain, once fused (the product's threads apply it) and once in the loop
    # after the product (the biased value is also a result, so the chain cannot borrow
    # the product's output).
    if form == "erf":
        program, value = packed_dense_chain((200, 64), 96, "gelu", False)
    else:
        program, value = tanh_gelu_dense_chain((200, 64), 96, False)
    fused = run(program.description([value]), program.inputs, program.expected([value]))
    both = [len(program.inputs), value]
    looped = run(program.description(both), program.inputs, program.expected(both))
    assert "convolution.GELU" not in source_of(program, both)
    assert "convolution.GELU" in source_of(program, [value])
    np.testing.assert_array_equal(fused[0], looped[1])


def test_a_gelu_adding_other_than_one_runs_in_the_loop_after_the_product() -> None:
    # The epilogue adds exactly 1 to the erf: with another constant the kernel takes the
    # loop after the product, and is still right.
    program, value = packed_dense_chain((500, 33), 40, "gelu", True, one=0.75)
    check(program, [value], tolerances=SUMS)
    assert "convolution.GELU" in source_of(program, [value])


def tanh_gelu_dense_chain(
    shape: tuple, units: int, residual: bool, cubic: float = 0.044715
) -> tuple[Program, int]:
    """dense_pack -> bias [-> add(residual)] -> GPT-2's tanh gelu, in its operators'
    order once SimplifyPower made the cube two products (``cubic`` its coefficient)."""
    out_shape = (*shape[:-1], units)
    scalars = [np.array(c, "float32") for c in (0.7978846, 1.0, 0.5, cubic)]
    weight = f32(units, shape[-1]) / np.float32(np.sqrt(shape[-1]))
    extra = [f32(*out_shape)] if residual else []
    program = Program([f32(*shape), packed(weight), f32(units), *scalars, *extra])
    (v,) = program.add("nn.contrib_dense_pack", [0, 1], units=units)
    (v,) = program.add("add", [v, 2])
    if residual:
        (v,) = program.add("add", [7, v])
    (halved,) = program.add("multiply", [v, 5])
    (square,) = program.add("multiply", [v, v])
    (cube,) = program.add("multiply", [square, v])
    (scaled_cube,) = program.add("multiply", [cube, 6])
    (total,) = program.add("add", [v, scaled_cube])
    (inner,) = program.add("multiply", [total, 3])
    (tanh,) = program.add("tanh", [inner])
    (shifted,) = program.add("add", [tanh, 4])
    (value,) = program.add("multiply", [halved, shifted])
    return program, value


def test_a_tanh_gelu_runs_with_the_product() -> None:
    for shape, units in PACKED_DENSE:
        for residual in (False, True):
            program, value = tanh_gelu_dense_chain(shape, units, residual)
            check(program, [value], tolerances=SUMS)
            assert "convolution.GELU_TANH" in source_of(program, [value])


def test_a_tanh_gelu_of_another_cubic_runs_in_the_loop_after_the_product() -> None:
    # The epilogue takes the cube by GELU_CUBIC: with another coefficient the kernel takes
    # the loop after the product, and is still right.
    program, value = tanh_gelu_dense_chain((500, 33), 40, True, cubic=0.05)
    check(program, [value], tolerances=SUMS)
    assert "convolution.GELU_TANH" in source_of(program, [value])


def test_a_packed_dense_chain_reading_a_broadcast_residual_keeps_its_epilogue_loop() -> None:
    program = Program([f32(6, 30), packed(f32(40, 30)), f32(40), f32(6, 1)])
    (value,) = program.add("nn.contrib_dense_pack", [0, 1], units=40)
    (value,) = program.add("add", [value, 2])
    (value,) = program.add("add", [value, 3])
    check(program, [value], tolerances=SUMS)
    source = source_of(program, [value])
    assert "convolution.post_epilogue(" in source and "as its epilogue" in source
