"""nn.conv2d and nn.conv2d_transpose kernels match the compiler's references.

Returns group: every path one kernel can take (products small enough for the compiled
loop and big enough for BLAS, 1x1 kernels multiplying the input in place, depthwise
groups, ordinary groups, Winograd for 3x3 with partial tiles), strides, the 1-, 2- and
4-int padding forms, dilation, ``channels``/``kernel_size`` given, float64, float16,
integers that wrap in ``out_dtype``, and a wider ``out_dtype``; transposed convolutions
with strides, padding, ``output_padding``, groups and dilation. Traps group: weights whose
channels, kernel or ``channels`` attribute disagree with the data, windows larger than
the padded input, and transposed outputs cropped away entirely, each a ValueError naming
the node. Threads group: one kernel run from two threads at once.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

from tests.vm.kernels.harness import SUMS, Program, check, packed, run

RNG = np.random.default_rng(21)


def tensor(dtype: str, *shape: int) -> np.ndarray:
    if np.dtype(dtype).kind == "f":
        return RNG.standard_normal(shape).astype(dtype)
    low = 0 if np.dtype(dtype).kind == "u" else -100
    return RNG.integers(low, 100, shape).astype(dtype)


def conv(
    data: np.ndarray, weight: np.ndarray, op: str = "nn.conv2d", **attrs: object
) -> tuple[Program, list[int]]:
    program = Program([data, weight])
    return program, program.add(op, [0, 1], **attrs)


# (data shape, weight shape): the first two run the compiled loop, the rest call BLAS; 1x1
# kernels with stride 1 and no padding multiply the input without an im2col copy.
DEFAULT_CASES = [
    ((1, 3, 6, 5), (4, 3, 3, 3)),
    ((2, 2, 4, 4), (3, 2, 1, 1)),
    ((2, 16, 12, 11), (24, 16, 3, 3)),
    ((1, 32, 9, 9), (48, 32, 1, 1)),
    ((1, 8, 7, 20), (16, 8, 2, 5)),
]


@pytest.mark.parametrize(("data_shape", "weight_shape"), DEFAULT_CASES)
def test_conv2d_default_attributes_by_loop_blas_and_direct_1x1(data_shape, weight_shape) -> None:
    check(*conv(tensor("float32", *data_shape), tensor("float32", *weight_shape)), tolerances=SUMS)


@pytest.mark.parametrize(
    ("data_shape", "weight_shape"),
    [((1, 3, 9, 8), (5, 3, 3, 3)), ((2, 16, 15, 14), (32, 16, 3, 3)), ((1, 8, 6, 6), (8, 8, 1, 1))],
)
def test_conv2d_strided_and_padded_with_channels_and_kernel_size(data_shape, weight_shape) -> None:
    data, weight = tensor("float32", *data_shape), tensor("float32", *weight_shape)
    program, results = conv(
        data, weight, strides=(2, 2), padding=(1, 1, 1, 1), channels=weight_shape[0],
        kernel_size=weight_shape[2:],
    )  # fmt: skip
    check(program, results, tolerances=SUMS)


@pytest.mark.parametrize(
    ("data_shape", "weight_shape"),
    [((1, 4, 7, 9), (6, 2, 3, 2)), ((2, 32, 12, 12), (64, 16, 2, 3))],
)
def test_conv2d_groups_dilation_and_asymmetric_padding(data_shape, weight_shape) -> None:
    data, weight = tensor("float32", *data_shape), tensor("float32", *weight_shape)
    program, results = conv(
        data, weight, strides=(2, 1), padding=(1, 0, 2, 1), dilation=(1, 2), groups=2
    )
    check(program, results, tolerances=SUMS)


@pytest.mark.parametrize(
    ("data_shape", "weight_shape"),
    [((1, 4, 6, 6), (4, 1, 3, 3)), ((2, 8, 11, 10), (16, 1, 3, 3)), ((1, 6, 5, 5), (6, 1, 1, 1))],
)
def test_conv2d_depthwise_with_channel_multipliers(data_shape, weight_shape) -> None:
    data, weight = tensor("float32", *data_shape), tensor("float32", *weight_shape)
    program, results = conv(data, weight, strides=(1, 2), padding=(1, 1), groups=data_shape[1])
    check(program, results, tolerances=SUMS)


def test_conv2d_float64_with_two_int_padding_and_dilation() -> None:
    for data_shape, weight_shape in [
        ((1, 2, 8, 7), (3, 2, 3, 3)),
        ((1, 16, 14, 14), (32, 16, 3, 3)),
    ]:
        data, weight = tensor("float64", *data_shape), tensor("float64", *weight_shape)
        program, results = conv(data, weight, padding=(2, 1), dilation=(2, 2))
        check(program, results, tolerances=SUMS)


@pytest.mark.parametrize(("dtype", "out_dtype"), [("int8", "int32"), ("int32", ""), ("uint8", "")])
def test_conv2d_integers_accumulate_and_wrap_in_out_dtype(dtype: str, out_dtype: str) -> None:
    data, weight = tensor(dtype, 1, 4, 6, 7), tensor(dtype, 5, 4, 3, 3)
    check(*conv(data, weight, padding=(1, 1), out_dtype=out_dtype))


def test_conv2d_float16_rounds_the_float32_sum_once() -> None:
    data, weight = tensor("float16", 1, 4, 6, 7), tensor("float16", 5, 4, 3, 3)
    check(*conv(data, weight, padding=(1, 1)), tolerances=SUMS)


def test_conv2d_wider_out_dtype_converts_the_operands_first() -> None:
    data, weight = tensor("float32", 1, 4, 6, 7), tensor("float32", 5, 4, 3, 3)
    check(
        *conv(data, weight, out_dtype="float64"),
        tolerances={np.dtype("float64"): SUMS[np.dtype("float32")]},
    )


@pytest.mark.parametrize(
    ("data_shape", "weight_shape"), [((2, 4, 5, 6), (4, 3, 3, 3)), ((1, 32, 8, 8), (32, 16, 3, 3))]
)
def test_conv2d_transpose_default_attributes(data_shape, weight_shape) -> None:
    data, weight = tensor("float32", *data_shape), tensor("float32", *weight_shape)
    check(*conv(data, weight, "nn.conv2d_transpose"), tolerances=SUMS)


@pytest.mark.parametrize(
    ("data_shape", "weight_shape"), [((2, 4, 5, 6), (4, 3, 3, 2)), ((1, 32, 9, 8), (32, 8, 4, 4))]
)
def test_conv2d_transpose_strides_padding_output_padding_and_groups(
    data_shape, weight_shape
) -> None:
    data, weight = tensor("float32", *data_shape), tensor("float32", *weight_shape)
    program, results = conv(
        data, weight, "nn.conv2d_transpose", strides=(2, 3), padding=(1, 0, 2, 1),
        output_padding=(1, 2), groups=2,
    )  # fmt: skip
    check(program, results, tolerances=SUMS)


def test_conv2d_transpose_float64_dilation_and_int32() -> None:
    data, weight = tensor("float64", 1, 3, 4, 5), tensor("float64", 3, 2, 3, 3)
    check(*conv(data, weight, "nn.conv2d_transpose", dilation=(2, 1)), tolerances=SUMS)
    data, weight = tensor("int32", 1, 3, 4, 5), tensor("int32", 3, 2, 3, 3)
    check(*conv(data, weight, "nn.conv2d_transpose", dilation=(2, 1)))


# --- traps -------------------------------------------------------------------------------------


def run_with(program: Program, results: list[int], inputs: list[np.ndarray]) -> None:
    desc = program.description(results)
    run(desc, inputs, [np.zeros((1,) * len(program.values[results[0]].shape), "float32")])


def test_conv2d_with_disagreeing_weight_channels_raises() -> None:
    program, results = conv(tensor("float32", 1, 3, 6, 5), tensor("float32", 4, 3, 3, 3))
    with pytest.raises(ValueError, match=r"node 0 \(nn\.conv2d\): input channels of data"):
        run_with(program, results, [tensor("float32", 1, 3, 6, 5), tensor("float32", 4, 2, 3, 3)])


def test_conv2d_window_larger_than_the_padded_input_raises() -> None:
    program, results = conv(tensor("float32", 1, 3, 6, 5), tensor("float32", 4, 3, 3, 3))
    with pytest.raises(ValueError, match="padded input width is smaller than the dilated kernel"):
        run_with(program, results, [tensor("float32", 1, 3, 6, 2), tensor("float32", 4, 3, 3, 3)])


def test_conv2d_groups_and_attributes_that_disagree_with_the_weight_raise() -> None:
    program, results = conv(
        tensor("float32", 1, 4, 7, 9), tensor("float32", 6, 2, 3, 2), strides=(2, 1),
        padding=(1, 0, 2, 1), dilation=(1, 2), groups=2,
    )  # fmt: skip
    with pytest.raises(ValueError, match="output channels of weight are not divisible by groups"):
        run_with(program, results, [tensor("float32", 1, 4, 7, 9), tensor("float32", 5, 2, 3, 2)])
    program, results = conv(
        tensor("float32", 1, 3, 9, 8), tensor("float32", 5, 3, 3, 3), strides=(2, 2),
        padding=(1, 1, 1, 1), channels=5, kernel_size=(3, 3),
    )  # fmt: skip
    with pytest.raises(ValueError, match=r"output channels \(attribute channels\): expected 5"):
        run_with(program, results, [tensor("float32", 1, 3, 9, 8), tensor("float32", 6, 3, 3, 3)])
    with pytest.raises(ValueError, match=r"kernel width of weight \(attribute kernel_size\)"):
        run_with(program, results, [tensor("float32", 1, 3, 9, 8), tensor("float32", 5, 3, 3, 2)])


def test_conv2d_transpose_cropped_to_nothing_raises() -> None:
    data, weight = tensor("float32", 2, 4, 5, 6), tensor("float32", 4, 3, 3, 2)
    program, results = conv(
        data, weight, "nn.conv2d_transpose", strides=(2, 3), padding=(1, 0, 2, 1),
        output_padding=(1, 2), groups=2,
    )  # fmt: skip
    with pytest.raises(ValueError, match="output height would be less than 1"):
        run_with(program, results, [tensor("float32", 2, 4, 1, 6), tensor("float32", 4, 3, 1, 2)])


# --- nn.contrib_conv2d_gemm_without_weight_transform ----------------------------------------------

PACKED = "nn.contrib_conv2d_gemm_without_weight_transform"


@pytest.mark.parametrize(
    ("data_shape", "weight_shape", "attrs"),
    [
        # Output pixels around the 7-pixel register tile, channels around the 32-wide panels.
        ((1, 3, 6, 5), (4, 3, 3, 3), {}),
        ((2, 8, 9, 8), (40, 8, 3, 3), {"strides": (2, 1), "padding": (1, 1, 0, 1)}),
        ((1, 16, 7, 7), (64, 16, 1, 1), {}),  # the input is its own column matrix
        # 1x1 with pixels as the tiles' rows (the image transposed to pixel rows): a second
        # image, a short panel, and a depth the tiles take in blocks.
        ((2, 40, 5, 3), (33, 40, 1, 1), {}),
        ((1, 520, 7, 7), (40, 520, 1, 1), {}),
        ((2, 300, 1, 1), (20, 300, 1, 1), {}),  # one pixel: its channels are its row
        ((1, 16, 8, 8), (33, 16, 1, 1), {"strides": (2, 2)}),
        ((1, 3, 23, 23), (64, 3, 7, 7), {"strides": (2, 2), "padding": (3, 3)}),
        ((1, 4, 10, 11), (7, 4, 3, 2), {"dilation": (2, 2), "padding": (2, 1)}),
        # Big enough for the threads: im2col split by channels, the product shared.
        ((1, 128, 14, 14), (256, 128, 3, 3), {"padding": (1, 1)}),
        # Enough output rows for column blocks (conv_jobs.packed_conv): short last blocks,
        # pixels and channels short of whole panels, strides, batches.
        ((1, 3, 64, 60), (40, 3, 7, 7), {"strides": (2, 2), "padding": (3, 3)}),
        ((1, 8, 40, 36), (64, 8, 3, 3), {"padding": (1, 1), "dilation": (1, 2)}),
        ((2, 16, 64, 64), (33, 16, 1, 1), {"strides": (2, 2)}),
        # A column stride of 2 read by vector shuffles: im2col's every other column
        # (3x3, odd and even widths, with and without padding) and the phases of
        # im2col_strided (7x7, an odd width).
        ((1, 3, 66, 63), (32, 3, 3, 3), {"strides": (2, 2), "padding": (1, 1)}),
        ((1, 3, 60, 70), (16, 3, 3, 3), {"strides": (2, 2)}),
        ((1, 3, 61, 59), (40, 3, 7, 7), {"strides": (2, 2), "padding": (3, 3)}),
        # 3x3 windows of 64 channels or more whose im2row matrix is small: im2row by blocks
        # of 16 pixels and one product, where column blocks would take a 3-channel window.
        ((1, 64, 40, 34), (40, 64, 3, 3), {"padding": (1, 1)}),
        ((1, 64, 90, 40), (48, 64, 3, 3), {"strides": (2, 2), "padding": (1, 1)}),
    ],
)
def test_packed_convolutions_match_conv2d(data_shape, weight_shape, attrs) -> None:
    data, weight = tensor("float32", *data_shape), tensor("float32", *weight_shape)
    program = Program([data, packed(weight)])
    kernel = weight_shape[2:]
    result = program.add(PACKED, [0, 1], channels=weight_shape[0], kernel_size=kernel, **attrs)
    got = run(program.description(result), program.inputs, program.expected(result))
    reference = Program([data, weight])
    (want,) = reference.expected(reference.add("nn.conv2d", [0, 1], **attrs))
    np.testing.assert_allclose(got[0], want, **SUMS[np.dtype("float32")])


def test_a_packed_weight_for_other_channels_or_kernels_traps() -> None:
    data, weight = tensor("float32", 1, 3, 9, 8), tensor("float32", 40, 3, 3, 3)
    program, results = conv(data, packed(weight), PACKED, channels=40, kernel_size=(3, 3))
    with pytest.raises(ValueError, match=r"depth of weight \(input channels times kernel taps\)"):
        run_with(program, results, [tensor("float32", 1, 4, 9, 8), packed(weight)])
    with pytest.raises(ValueError, match=r"panels of weight for channels=40"):
        run_with(program, results, [data, packed(weight[:32])])


# --- threads -----------------------------------------------------------------------------------


def test_one_kernel_runs_in_two_threads_at_once() -> None:
    data, weight = tensor("float32", 2, 16, 12, 11), tensor("float32", 24, 16, 3, 3)
    program, results = conv(data, weight)
    (want,) = program.expected(results)
    desc = program.description(results)
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(20):
                (got,) = run(desc, [data, weight], [want])
                np.testing.assert_allclose(got, want, **SUMS[np.dtype("float32")])
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
