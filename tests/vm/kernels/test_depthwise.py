"""Depthwise and narrow grouped nn.conv2d kernels (direct loops, vm.kernels.runtime.depthwise) match
the compiler's numpy references.

Returns group: depthwise (one input channel per group) with channel multipliers 1, 2 and 3, with
stride 1 (whole planes), on strided narrow outputs (channels-last loops) and on strided rows of 10
or more (per-group loops), grouped convolutions with 2 and 4 channels per group (direct loops) and 8
to 64 (float32: each group's column matrix by its weight packed into panels, or its window read in
place with the taps summed in the tiles, the groups shared with the polling workers with the same
bits as alone; other dtypes: im2col and products), kernels 1x1, 2x7, 3x3, 5x5, 3x5, 7x7 and 1x7,
strides 1-3 per axis, symmetric, asymmetric and no padding, dilation 1-2 per axis, batches of 1 and
3, in float32, float64 and float16; the fused epilogues of MobileNet-style blocks (bias with relu6,
folded batch norm with hardswish, squeeze-excite's sigmoid-multiply) applied per image, and the
plain path when a chain broadcasts the convolution beyond its shape. The generated source shows the
direct loops and the epilogue; the groups of a big float32 image, and the bands of rows of its
planes, shared with the polling workers give the same bits as the caller computing them alone; bands
of output rows computed one by one give the whole plane's bits. Small float32 planes of 16 channels
and more run in blocks of channels, channels last, the channels left over plane by plane: strides 1
and 2, kernels 3, 5 and 7, asymmetric padding, a clamp, a residual or sigmoid-multiply after them,
and the same bits shared or alone."""

from __future__ import annotations

import numpy as np
import pytest

from tests.vm.kernels.harness import SUMS, Program, check
from tests.vm.kernels.workers import assert_shared, needs_workers
from vm.kernels import load_kernel
from vm.kernels.emit_conv import CHANNELS_LAST_MAX_WIDTH
from vm.kernels.runtime import conv_jobs, jobs, packed
from vm.kernels.runtime import depthwise as dwc

RNG = np.random.default_rng(15)


def tensor(dtype: str, *shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


# (data shape, groups, output channels per group, kernel, attributes)
CASES = [
    ((1, 8, 9, 10), 8, 1, (3, 3), {"padding": (1, 1)}),
    ((3, 6, 12, 11), 6, 1, (3, 3), {"padding": (1, 1), "strides": (2, 2)}),
    ((1, 4, 13, 13), 4, 2, (3, 3), {"padding": (2, 2), "dilation": (2, 2)}),
    ((1, 5, 11, 17), 5, 3, (5, 5), {"padding": (2, 2), "strides": (2, 1)}),
    ((2, 4, 10, 9), 4, 1, (3, 5), {"padding": (1, 0, 2, 3), "strides": (1, 3)}),
    ((1, 3, 15, 15), 3, 1, (7, 7), {"padding": (3, 3), "strides": (2, 2), "dilation": (1, 2)}),
    ((1, 4, 8, 12), 4, 2, (1, 7), {"padding": (0, 3)}),
    ((1, 6, 7, 7), 6, 1, (1, 1), {"strides": (2, 2)}),
    ((1, 7, 5, 5), 7, 1, (3, 3), {}),
    ((1, 3, 4, 4), 3, 1, (5, 5), {"padding": (3, 3), "strides": (3, 3)}),
    ((2, 8, 9, 9), 4, 3, (3, 3), {"padding": (1, 1)}),
    # Rows of 20 or more outputs: depthwise runs per group along the rows.
    ((1, 4, 9, 45), 4, 1, (3, 3), {"padding": (1, 1)}),
    ((2, 3, 8, 50), 3, 2, (5, 5), {"padding": (2, 2), "strides": (1, 2)}),
    (
        (1, 2, 11, 47),
        2,
        1,
        (3, 3),
        {"padding": (0, 2, 1, 0), "strides": (2, 2), "dilation": (2, 2)},
    ),
    ((1, 2, 6, 30), 2, 1, (2, 7), {"padding": (1, 3), "dilation": (2, 1)}),
    # A column stride of 2 splits rows into even and odd columns by vector pairs: an odd
    # left padding and width, and a last input column no window reads.
    ((1, 3, 9, 41), 3, 1, (5, 5), {"padding": (2, 1, 2, 3), "strides": (2, 2)}),
    ((1, 2, 9, 45), 2, 1, (3, 4), {"strides": (1, 2)}),
    # 3x3 with a column stride of 2 on wide rows: whole rows, every other column kept.
    ((1, 4, 9, 45), 4, 1, (3, 3), {"padding": (1, 1), "strides": (2, 2)}),
    ((2, 3, 10, 41), 3, 2, (3, 3), {"padding": (0, 1, 1, 0), "strides": (1, 2)}),
    ((1, 8, 12, 40), 2, 3, (3, 3), {"padding": (1, 1), "strides": (3, 2), "dilation": (2, 1)}),
    # float32 depthwise: rows split by phase in registers, whole blocks of 16 outputs and
    # a part (none, rows of 32; only a part, rows of 10; both, rows of 25), a row
    # dilation, a left padding of 2 or 3 and none.
    ((1, 3, 10, 64), 3, 1, (3, 3), {"padding": (1, 1), "strides": (2, 2)}),
    ((1, 2, 9, 20), 2, 1, (3, 3), {"padding": (1, 1), "strides": (1, 2)}),
    ((1, 4, 12, 50), 4, 2, (3, 3), {"padding": (2, 2), "strides": (2, 2), "dilation": (2, 1)}),
    ((1, 2, 7, 40), 2, 1, (3, 3), {"padding": (1, 3, 1, 0), "strides": (2, 2)}),
    ((1, 2, 9, 33), 2, 1, (3, 3), {"strides": (2, 2)}),
    # Taller planes run in bands of output rows, each copying its own padded rows: three
    # bands, the last short; bands whose rows are the bottom padding, at a row dilation.
    ((1, 3, 37, 40), 3, 1, (3, 3), {"padding": (1, 1), "strides": (2, 2)}),
    (
        (1, 2, 20, 36),
        2,
        2,
        (3, 3),
        {"padding": (2, 1, 3, 1), "strides": (1, 2), "dilation": (2, 1)},
    ),
    ((1, 16, 10, 8), 4, 4, (3, 3), {"padding": (1, 1), "strides": (2, 2)}),
    ((1, 16, 7, 9), 2, 2, (5, 3), {"padding": (2, 1), "dilation": (2, 1)}),
    ((1, 32, 8, 8), 2, 8, (3, 3), {"padding": (1, 1)}),
    # Groups of 8 to 16 channels (float32: grouped_columns): batches, a row stride, a
    # column dilation, asymmetric padding, output channels past a panel, a 1x1 kernel.
    (
        (2, 24, 11, 13),
        3,
        5,
        (3, 3),
        {"padding": (1, 2, 0, 1), "strides": (2, 1), "dilation": (1, 2)},
    ),
    ((1, 64, 9, 9), 4, 40, (1, 1), {}),
    ((3, 20, 6, 37), 2, 3, (2, 7), {"padding": (1, 3), "strides": (1, 2)}),
    # Planes of several bands of output rows a group (the last one short), the windows
    # of each band shifted by its first row: a row stride with asymmetric padding and a
    # row dilation, and the strided copy (kw > 2 * sw).
    (
        (1, 16, 61, 45),
        2,
        8,
        (3, 3),
        {"padding": (1, 2, 0, 1), "strides": (2, 1), "dilation": (2, 1)},
    ),
    ((1, 16, 40, 50), 2, 8, (3, 7), {"padding": (1, 3), "strides": (2, 2)}),
    # Groups of 8 channels and more of 16 output channels and more (a panel of 32 on planes
    # of 28x28 and more): each band's window read in place, taps summed in the tiles (a column
    # dilation and asymmetric padding; a stride of 2 and output channels past a panel; a
    # 1x7 kernel on a batch of two; groups of 8 to 16 on a small plane, unequal strides).
    ((1, 32, 30, 29), 2, 32, (3, 3), {"padding": (1, 2, 0, 1), "dilation": (1, 2)}),
    ((1, 16, 12, 11), 2, 16, (3, 3), {"padding": (1, 1), "strides": (1, 2)}),
    ((1, 32, 61, 59), 2, 40, (3, 3), {"padding": (1, 1), "strides": (2, 2)}),
    ((2, 48, 30, 40), 3, 48, (1, 7), {"padding": (0, 3)}),
    # A panel of output channels a group on a small plane: pixels as the tiles' rows.
    ((2, 64, 9, 9), 2, 32, (3, 3), {"padding": (1, 1)}),
    ((1, 96, 15, 13), 3, 48, (3, 3), {"padding": (1, 0, 2, 1), "strides": (2, 1)}),
    # Equal strides on short rows: whole planes split into phases.
    ((1, 6, 14, 14), 6, 1, (3, 3), {"padding": (0, 0, 1, 1), "strides": (2, 2)}),
    ((1, 5, 13, 15), 5, 2, (5, 5), {"padding": (2, 2), "strides": (2, 2)}),
    ((2, 4, 9, 10), 4, 1, (4, 4), {"padding": (1, 2, 2, 1), "strides": (3, 3)}),
    ((1, 3, 16, 16), 3, 1, (3, 3), {"padding": (1, 1), "strides": (2, 2)}),
]


def make(case: tuple, dtype: str) -> tuple[Program, int]:
    data_shape, groups, per_group, kernel, attrs = case
    cg = data_shape[1] // groups
    weight = tensor(dtype, groups * per_group, cg, *kernel)
    program = Program([tensor(dtype, *data_shape), weight])
    (value,) = program.add("nn.conv2d", [0, 1], groups=groups, **attrs)
    return program, value


@pytest.mark.parametrize("case", CASES, ids=[f"case{i}" for i in range(len(CASES))])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_grouped_conv2d_returns_the_reference(case, dtype) -> None:
    program, value = make(case, dtype)
    check(program, [value], tolerances=SUMS)


def test_float16_depthwise_computes_in_float32() -> None:
    program, value = make(CASES[1], "float16")
    check(program, [value], tolerances=SUMS)


@pytest.mark.parametrize(("dtype", "entry"), [("float32", "_f32"), ("float64", "")])
def test_narrow_groups_run_the_direct_loops_with_a_fused_epilogue(dtype, entry) -> None:
    # float32 reaches the loops through entry points compiled once, other dtypes directly.
    program, value = make(CASES[0], dtype)
    (value,) = program.add("nn.relu", [value])
    source = load_kernel(program.description([value])).path.read_text()
    assert f"dwc.image_groups{entry}(" in source
    assert f"dwc.image_channels_last{entry}(" in source
    assert "as its epilogue" in source
    check(program, [value], tolerances=SUMS)


@pytest.mark.parametrize(("dtype", "entry"), [("float32", True), ("float64", False)])
@pytest.mark.parametrize(
    "case",
    [
        ((1, 16, 61, 45), 2, 8, (3, 3), {"padding": (1, 1), "strides": (2, 1)}),
        ((2, 64, 9, 9), 2, 32, (3, 3), {"padding": (1, 1)}),
        ((2, 32, 29, 28), 2, 32, (3, 3), {"padding": (1, 1)}),
    ],
    ids=["bands", "pixel_rows", "window_in_place"],
)
def test_wide_groups_apply_bias_residual_and_relu_as_they_store(case, dtype, entry) -> None:
    # As RegNet's grouped layers (batch norm folded into a bias) and ResNeXt's. float32
    # reaches grouped_columns through its entry point, which applies the chain; float64
    # goes through Python, the chain after each image.
    plain, value = make(case, dtype)
    shape = plain.values[value].shape
    data, weight = plain.inputs
    program = Program([data, weight, tensor(dtype, shape[1]), tensor(dtype, *shape)])
    (value,) = program.add("nn.conv2d", [0, 1], groups=case[1], **case[4])
    (value,) = program.add("nn.bias_add", [value, 2])
    (value,) = program.add("add", [value, 3])
    (value,) = program.add("nn.relu", [value])
    source = load_kernel(program.description([value])).path.read_text()
    assert ("convolution.grouped_f32(" in source) == entry
    assert ("convolution.post_epilogue(" in source) == entry
    check(program, [value], tolerances=SUMS)


def _same_bits_alone_and_shared(run, x, w3, out_shape, geometry) -> None:
    """``run`` (image_groups or image_channels_last) gives the same bits on the calling
    thread alone as when the polling workers share the image."""
    # Called directly: no kernel loader requires the kinds these functions share.
    jobs.require(jobs.DEPTHWISE_GROUPS, jobs.DEPTHWISE_CHANNELS, jobs.DEPTHWISE_ROWS)
    alone = np.empty(out_shape, "float32")
    jobs.SLOT[jobs._BUSY] = 1  # as while another job holds the slot: the caller works alone
    try:
        run(x, w3, alone, *geometry, 1)
    finally:
        jobs.SLOT[jobs._BUSY] = 0
    shared = np.full_like(alone, np.nan)
    assert_shared(
        lambda: run(x, w3, shared, *geometry, 1),
        lambda: np.testing.assert_array_equal(shared[1], alone[1]),
    )


@needs_workers
@pytest.mark.parametrize(
    ("cg", "og", "stride", "size"),
    # The last: planes big enough to be shared by bands of rows (DEPTHWISE_ROWS).
    [(1, 1, 1, 40), (1, 2, 2, 40), (1, 8, 2, 24), (4, 4, 1, 40), (1, 2, 1, 97)],
)
def test_the_groups_of_a_big_image_shared_with_the_workers_give_the_same_bits(cg, og, stride, size):
    groups = 24 if size < 97 else 5
    out_size = (size - 1) // stride + 1
    assert (out_size**2 >= dwc.ROWS_MIN_PLANE) == (size == 97)
    geometry = (3, 3, stride, stride, 1, 1, 1, 1, out_size, out_size)
    assert groups * og * cg * 9 * out_size**2 >= dwc.SPLIT_WORK
    x, w3 = tensor("float32", 2, groups * cg, size, size), tensor("float32", groups, og, cg * 9)
    out_shape = (2, groups * og, out_size * out_size)
    _same_bits_alone_and_shared(dwc.image_groups, x, w3, out_shape, geometry)


@needs_workers
@pytest.mark.parametrize(
    ("groups", "cg", "og", "size"), [(16, 8, 8, 28), (8, 32, 32, 14), (3, 64, 64, 28)]
)
def test_the_groups_of_a_grouped_convolution_shared_with_the_workers_give_the_same_bits(
    groups, cg, og, size
) -> None:
    # Groups of 8 output channels run by columns, of 32 on a 14x14 plane by pixel rows;
    # at 28x28 both in bands of rows, three groups of 64 shared as their bands.
    assert conv_jobs._grouped_plan(og, cg, size, size)[0] == {8: 0, 32: 1, 64: 2}[og]
    assert (conv_jobs._grouped_plan(og, cg, size, size)[2] > 1) == (size != 14)
    _grouped_alone_shared_and_reference(groups, cg, og, size, epilogue=False)


@needs_workers
@pytest.mark.parametrize(("groups", "cg", "og", "size"), [(8, 32, 32, 14), (3, 64, 64, 28)])
def test_a_grouped_convolution_applies_its_epilogue_to_each_band_alone_and_shared(
    groups, cg, og, size
) -> None:
    # Bias, residual and relu, by pixel rows (one band a group) and by bands of columns.
    _grouped_alone_shared_and_reference(groups, cg, og, size, epilogue=True)


def _grouped_alone_shared_and_reference(groups, cg, og, size, epilogue) -> None:
    """grouped_columns on image 1 of two, 3x3 with padding 1, with the epilogue (bias,
    residual, relu) or none: the calling thread alone matches float64 loops, and the
    polling workers sharing it give the same bits."""
    x, w3 = tensor("float32", 2, groups * cg, size, size), tensor("float32", groups, og, cg * 9)
    geometry = (3, 3, 1, 1, 1, 1, 1, 1, size, size)
    jobs.require(jobs.GROUPED)
    shape = (2, groups * og, size * size)
    bias, residual = tensor("float32", groups * og), tensor("float32", *shape)

    def run(out: np.ndarray) -> None:
        if not epilogue:
            conv_jobs.grouped_columns(x, w3, out, 1, *geometry)
            return
        post = packed.post_epilogue(groups * og, bias, 0.0, np.inf, packed.RELU, residual, out)
        conv_jobs.grouped_columns(x, w3, out, 1, *geometry, packed.post_address(post))

    alone = np.full(shape, np.nan, "float32")
    jobs.SLOT[jobs._BUSY] = 1  # as while another job holds the slot: the caller works alone
    try:
        run(alone)
    finally:
        jobs.SLOT[jobs._BUSY] = 0
    assert np.isnan(alone[0]).all()  # the other image is left alone
    weight = w3.reshape(groups * og, cg, 3, 3).astype("float64")
    expected = np.zeros((groups * og, size, size))
    padded = np.pad(x[1].astype("float64"), ((0, 0), (1, 1), (1, 1)))
    for o in range(groups * og):
        g = o // og
        for i in range(3):
            for j in range(3):
                taps = padded[g * cg : (g + 1) * cg, i : i + size, j : j + size]
                expected[o] += np.tensordot(weight[o, :, i, j], taps, axes=1)
    if epilogue:
        expected += bias[:, None, None] + residual[1].reshape(expected.shape)
        expected = np.maximum(expected, 0.0)
    np.testing.assert_allclose(alone[1].reshape(expected.shape), expected, rtol=1e-4, atol=1e-4)
    shared = np.full_like(alone, np.nan)
    assert_shared(
        lambda: run(shared),
        lambda: np.testing.assert_array_equal(shared[1], alone[1]),
    )


@pytest.mark.parametrize(
    ("kernel", "stride", "padding", "og"),
    [(3, 1, (1, 1), 1), (5, 1, (2, 1), 2), (3, 2, (1, 1), 1), (5, 2, (2, 2), 1), (4, 3, (1, 2), 2)],
)
def test_bands_of_output_rows_give_those_rows_of_the_whole_plane(kernel, stride, padding, og):
    # A chunk of DEPTHWISE_ROWS computes one band of every channel's plane from the input
    # rows it reads: the bands, each in a fresh workspace, make up the whole plane's bits.
    channels, height, width = 3, 23, 19
    pt, pl = padding
    out_h = (height + 2 * pt - kernel) // stride + 1
    out_w = (width + 2 * pl - kernel) // stride + 1
    x = tensor("float32", 2, channels, height, width)
    w3 = tensor("float32", channels, og, kernel * kernel)
    size = dwc.plane_workspace_size(kernel, kernel, stride, out_h, out_w)

    def rows(r0: int, r1: int, out: np.ndarray) -> None:
        pad = np.zeros(size, "float32")
        dwc._plane_range(x, w3, out, 1, 0, channels, kernel, kernel, stride, pt, pl, out_h, out_w,
                         pad, 0, r0, r1)  # fmt: skip

    whole = np.full((2, channels * og, out_h * out_w), np.nan, "float32")
    rows(0, out_h, whole)
    bands = np.full_like(whole, np.nan)
    for r0, r1 in [(0, 1), (1, 1), (1, 5), (5, out_h - 1), (out_h - 1, out_h)]:
        rows(r0, r1, bands)
    np.testing.assert_array_equal(bands[1], whole[1])
    assert np.isnan(bands[0]).all()  # the other image is left alone


@needs_workers
@pytest.mark.parametrize(("channels", "og", "stride"), [(200, 1, 1), (97, 2, 2)])
def test_the_channels_of_a_narrow_image_shared_with_the_workers_give_the_same_bits(
    channels, og, stride
):
    size = 9 if stride == 1 else 17
    out_size = (size - 1) // stride + 1
    geometry = (3, 3, stride, stride, 1, 1, 1, 1, out_size, out_size)
    assert out_size < CHANNELS_LAST_MAX_WIDTH
    assert channels * og * 9 * out_size**2 >= dwc.SPLIT_WORK
    x, w3 = tensor("float32", 2, channels, size, size), tensor("float32", channels, og, 9)
    out_shape = (2, channels * og, out_size * out_size)
    _same_bits_alone_and_shared(dwc.image_channels_last, x, w3, out_shape, geometry)


def mobilenet_block(activation: str, dtype: str = "float32") -> tuple[Program, int]:
    """Depthwise 3x3 -> bias or folded batch norm -> activation, as MobileNetV2/V3 do."""
    c = 12
    data = tensor(dtype, 2, c, 14, 13)
    weight = tensor(dtype, c, 1, 3, 3)
    scale, shift = tensor(dtype, c, 1, 1), tensor(dtype, c, 1, 1)
    three, sixth = np.asarray(3, dtype), np.asarray(1 / 6, dtype)
    program = Program([data, weight, scale, shift, three, sixth])
    (value,) = program.add("nn.conv2d", [0, 1], groups=c, padding=(1, 1), strides=(2, 2))
    (value,) = program.add("multiply", [value, 2])
    (value,) = program.add("add", [value, 3])
    if activation == "relu6":
        (value,) = program.add("clip", [value], a_min=0.0, a_max=6.0)
    elif activation == "hardswish":
        # x * relu6(x + 3) / 6, as ONNX HardSwish imports.
        (shifted,) = program.add("add", [value, 4])
        (gate,) = program.add("clip", [shifted], a_min=0.0, a_max=6.0)
        (gated,) = program.add("multiply", [value, gate])
        (value,) = program.add("multiply", [gated, 5])
    else:
        (gate,) = program.add("sigmoid", [value])
        (value,) = program.add("multiply", [value, gate])
    return program, value


@pytest.mark.parametrize("activation", ["relu6", "hardswish", "sigmoid_multiply"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_fused_mobilenet_epilogues_return_the_reference(activation, dtype) -> None:
    program, value = mobilenet_block(activation, dtype)
    source = load_kernel(program.description([value])).path.read_text()
    assert "as its epilogue" in source
    check(program, [value], tolerances=SUMS)


# (channels, size, kernel, stride, padding, epilogue): small output planes, 16 channels and
# more, so that whole blocks of channels run channels last and the rest plane by plane.
BLOCK_CASES = [
    (16, 7, 3, 1, (1, 1), None),
    (40, 14, 5, 2, (2, 2), "relu6"),
    (33, 9, 7, 1, (3, 3), "residual"),
    (48, 15, 3, 2, (0, 0, 1, 1), None),
    (32, 27, 5, 2, (2, 2), "sigmoid_multiply"),
    (24, 55, 5, 2, (2, 2), None),  # a 28x28 output: strided and wider than 3x3
]


@pytest.mark.parametrize("case", BLOCK_CASES, ids=[f"block{i}" for i in range(len(BLOCK_CASES))])
def test_depthwise_in_blocks_of_channels_returns_the_reference(case) -> None:
    channels, size, kernel, stride, padding, epilogue = case
    before, after = padding[0], padding[-1]
    out_size = (size + before + after - kernel) // stride + 1
    data = tensor("float32", 2, channels, size, size)
    inputs = [data, tensor("float32", channels, 1, kernel, kernel)]
    if epilogue == "residual":
        inputs.append(tensor("float32", 2, channels, out_size, out_size))
    program = Program(inputs)
    (value,) = program.add("nn.conv2d", [0, 1], groups=channels, padding=padding,
                           strides=(stride, stride))  # fmt: skip
    assert program.values[value].shape[-1] == out_size
    w3 = np.zeros((channels, 1, kernel * kernel), "float32")
    assert dwc.by_channel_blocks(data, w3, kernel, kernel, stride, stride, 1, 1, out_size,
                                 out_size)  # fmt: skip
    if epilogue == "relu6":
        (value,) = program.add("clip", [value], a_min=0.0, a_max=6.0)
    elif epilogue == "residual":
        (value,) = program.add("add", [value, 2])
    elif epilogue == "sigmoid_multiply":
        (gate,) = program.add("sigmoid", [value])
        (value,) = program.add("multiply", [value, gate])
    check(program, [value], tolerances=SUMS)


@needs_workers
@pytest.mark.parametrize(("size", "stride"), [(14, 1), (27, 2)])
def test_blocks_of_channels_shared_with_the_workers_give_the_same_bits(size, stride) -> None:
    # 100 channels: chunks cut between blocks of 16, the last one taking the 4 left over.
    channels = 100
    out_size = (size - 1) // stride + 1
    x, w3 = tensor("float32", 2, channels, size, size), tensor("float32", channels, 1, 9)
    geometry = (3, 3, stride, stride, 1, 1, 1, 1, out_size, out_size)
    assert dwc.by_channel_blocks(x, w3, *geometry[:2], stride, stride, 1, 1, out_size, out_size)
    assert channels * 9 * out_size**2 >= dwc.SPLIT_WORK
    _same_bits_alone_and_shared(dwc.image_groups, x, w3, (2, channels, out_size**2), geometry)


def test_a_chain_broadcasting_the_output_takes_the_plain_path() -> None:
    data, weight = tensor("float32", 1, 6, 8, 8), tensor("float32", 12, 1, 3, 3)
    residual = tensor("float32", 3, 12, 8, 8)
    program = Program([data, weight, residual])
    (value,) = program.add("nn.conv2d", [0, 1], groups=6, padding=(1, 1))
    (value,) = program.add("add", [value, 2])
    (value,) = program.add("nn.relu", [value])
    check(program, [value], tolerances=SUMS)
