"""Pointwise (1x1, stride 1, unpadded) float32 convolutions by packed weights
(vm.kernels.runtime.pointwise) match numpy's products.

Returns group: channel counts from 1 to past a panel, pixel counts short of, equal to
and past whole 32-pixel panels (the short last panel never read past the input), several
images, through the generated kernel and called directly; the grid of tiles is visited
once, weight-major where the weight is the bigger operand; the work shared with the
polling workers gives the same bits as the caller computing it alone, and a short last
panel (its pixels the rows of the tiles) the bits of a whole one; an output at any
alignment is written exactly, the memory around it kept.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.vm.kernels.harness import SUMS, Program, packed, run
from tests.vm.kernels.workers import assert_shared, needs_workers
from vm.kernels.runtime import callbacks, jobs, pointwise, symbols
from vm.kernels.runtime import packed as tiles

RNG = np.random.default_rng(31)
PACKED = "nn.contrib_conv2d_gemm_without_weight_transform"


def tensor(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype("float32")


def reference(x: np.ndarray, weight: np.ndarray) -> np.ndarray:
    n, c, h, w = x.shape
    flat = x.reshape(n, c, h * w).astype("float64")
    return np.einsum("oc,ncp->nop", weight.reshape(weight.shape[0], c), flat).reshape(
        n, weight.shape[0], h, w
    )


# (channels, units, height, width)
SHAPES = [
    (1, 1, 1, 1),
    (3, 5, 4, 8),  # 32 pixels: one whole panel
    (16, 96, 7, 7),  # 49 pixels: a whole panel and a short one
    (24, 33, 6, 11),  # units one past a panel
    (64, 70, 14, 14),
    (7, 64, 2, 3),  # fewer pixels than a panel
    (16, 96, 32, 32),  # rows 4 KB apart: each pixel panel copied once
]


@pytest.mark.parametrize("shape", SHAPES, ids=[f"{c}to{u}_{h}x{w}" for c, u, h, w in SHAPES])
def test_pointwise_conv_returns_the_product(shape) -> None:
    channels, units, height, width = shape
    x, weight = tensor(2, channels, height, width), tensor(units, channels, 1, 1)
    jobs.require(jobs.POINTWISE)
    out = np.full((2, units, height * width), np.nan, "float32")
    for n in range(2):
        pointwise.conv(x, n, packed(weight), out[n], True)
    np.testing.assert_allclose(
        out.reshape(2, units, height, width), reference(x, weight), **SUMS[np.dtype("float32")]
    )


@pytest.mark.parametrize(
    ("plane", "aliased"),
    [(1024, True), (4096, True), (16384, True), (256, False), (2304, False), (196, False),
     (3136, False), (12544, False), (1056, False)],
)  # fmt: skip
def test_rows_a_multiple_of_4kb_apart_alias(plane, aliased) -> None:
    assert pointwise.aliasing_rows(plane) is aliased


def test_aliasing_rows_copied_give_the_bits_of_the_same_pixels_read_in_place() -> None:
    # 1024 pixels: rows 4 KB apart, so each pixel panel is copied for the three weight
    # panels; 1056 pixels are read where they lie. A pixel's sums do not depend on its
    # neighbours, so the first 1024 must come out bit for bit the same.
    channels, units = 16, 96
    assert channels <= pointwise.COPY_MAX_DEPTH
    wide = tensor(1, channels, 1, 1056)
    aliased = np.ascontiguousarray(wide[..., :1024])
    weight = tensor(units, channels, 1, 1)
    jobs.require(jobs.POINTWISE)
    got, expected = np.empty((units, 1024), "float32"), np.empty((units, 1056), "float32")
    pointwise.conv(aliased, 0, packed(weight), got, False)
    pointwise.conv(wide, 0, packed(weight), expected, False)
    np.testing.assert_array_equal(got, expected[:, :1024])
    np.testing.assert_allclose(
        got.reshape(1, units, 1, 1024), reference(aliased, weight), **SUMS[np.dtype("float32")]
    )


@pytest.mark.parametrize("offset", [0, 1, 15])
def test_an_output_at_any_alignment_is_written_exactly_and_its_neighbours_are_kept(
    offset,
) -> None:
    # The tiles' lines are owned ahead (pointwise.WRITE_AHEAD), one line before an
    # unaligned row included: owning a line must not change a byte of it.
    channels, units, height, width = 16, 40, 8, 20
    x, weight = tensor(1, channels, height, width), tensor(units, channels, 1, 1)
    jobs.require(jobs.POINTWISE)
    size = units * height * width
    buffer = np.full(size + 64, 7.0, "float32")
    out = buffer[offset : offset + size].reshape(units, height * width)
    pointwise.conv(x, 0, packed(weight), out, True)
    np.testing.assert_allclose(
        out.reshape(1, units, height, width), reference(x, weight), **SUMS[np.dtype("float32")]
    )
    assert (buffer[:offset] == 7.0).all() and (buffer[offset + size :] == 7.0).all()


@pytest.mark.parametrize("shape", [(16, 96, 9, 9), (5, 40, 3, 17)])
def test_a_packed_1x1_convolution_kernel_runs_pointwise_and_returns_the_reference(shape) -> None:
    channels, units, height, width = shape
    data, weight = tensor(3, channels, height, width), tensor(units, channels, 1, 1)
    program = Program([data, packed(weight)])
    result = program.add(PACKED, [0, 1], channels=units, kernel_size=(1, 1))
    (got,) = run(program.description(result), program.inputs, program.expected(result))
    np.testing.assert_allclose(got, reference(data, weight), **SUMS[np.dtype("float32")])


@needs_workers
@pytest.mark.parametrize(
    "shape",
    [(48, 100, 20, 21), (40, 300, 14, 14)],  # pixel-major; weight-major, a short panel of 4
    ids=["pixel_major", "weight_major"],
)
def test_a_pointwise_conv_shared_with_the_workers_gives_the_same_bits(shape) -> None:
    channels, units, height, width = shape
    x, weight = tensor(1, channels, height, width), tensor(units, channels, 1, 1)
    w = packed(weight)
    jobs.require(jobs.POINTWISE)
    alone = np.empty((units, height * width), "float32")
    jobs.SLOT[jobs._BUSY] = 1  # as while another job holds the slot: the caller works alone
    try:
        pointwise.conv(x, 0, w, alone, True)
    finally:
        jobs.SLOT[jobs._BUSY] = 0
    np.testing.assert_allclose(
        alone.reshape(1, units, height, width), reference(x, weight), **SUMS[np.dtype("float32")]
    )
    shared = np.full_like(alone, np.nan)
    assert_shared(
        lambda: pointwise.conv(x, 0, w, shared, True),
        lambda: np.testing.assert_array_equal(shared, alone),
    )


@pytest.mark.parametrize(("plane", "units"), [(196, 1024), (196, 64), (49, 96), (6, 64), (64, 64)])
def test_the_grid_visits_every_tile_once_in_the_order_of_the_bigger_operand(
    plane: int, units: int
) -> None:
    pixels, panels = -(-plane // 32), -(-units // 32)
    order = [pointwise.grid(plane, units, item) for item in range(pixels * panels)]
    assert sorted(order) == [(p, u) for p in range(pixels) for u in range(panels)]
    # More output channels than pixels: a weight panel's items follow each other.
    if units > plane:
        assert order[:pixels] == [(p, 0) for p in range(pixels)]
    else:
        assert order[:panels] == [(0, u) for u in range(panels)]


@pytest.mark.parametrize("activation", [tiles.CLAMP, tiles.SWISH])
@pytest.mark.parametrize("with_residual", [False, True])
@pytest.mark.parametrize(("plane", "whole"), [(196, 224), (49, 64)])
def test_a_short_last_pixel_panel_gives_the_bits_of_a_whole_one(
    activation: int, with_residual: bool, plane: int, whole: int
) -> None:
    # The last 4 of 196 pixels run as the rows of the register tiles, the last 17 of 49
    # as a pixel panel through scratch tiles; the same plane padded to whole panels runs
    # them in a whole pixel panel: the same sums in the same order, the same epilogue.
    assert (plane % 32 < pointwise.SHORT_ROWS) == (plane == 196)  # both paths
    callbacks.link(symbols.POINTWISE_ITEMS, symbols.TRANSPOSED)
    channels, units = 40, 45
    x = tensor(1, channels, 1, plane)
    weight = packed(tensor(units, channels, 1, 1))
    bias = tensor(units)
    residual = tensor(units, whole) if with_residual else np.empty(0, np.float32)
    padded_x = np.zeros((1, channels, 1, whole), np.float32)
    padded_x[..., :plane] = x
    padded = np.full((units, whole), np.nan, np.float32)
    post = tiles.post_epilogue(units, bias, 0.0, 6.0, activation, residual, padded)
    pointwise.conv(padded_x, 0, weight, padded, False, post.ctypes.data)
    out = np.full((units, plane), np.nan, np.float32)
    short_residual = np.ascontiguousarray(residual[:, :plane]) if with_residual else residual
    post = tiles.post_epilogue(units, bias, 0.0, 6.0, activation, short_residual, out)
    pointwise.conv(x, 0, weight, out, False, post.ctypes.data)
    np.testing.assert_array_equal(out, padded[:, :plane])


# (plane, channels): whole panels from one block of k; a short last panel of 4 pixels (the
# tiles' rows when written beside the residual); whole panels from blocks of k (on any
# first-level cache up to 64 KB); pixels as the tiles' rows, which store before they add.
OVER = [(64, 40), (196, 40), (128, 400), (49, 300)]


@pytest.mark.parametrize(("plane", "channels"), OVER, ids=[f"{p}px_{c}ch" for p, c in OVER])
def test_an_output_written_over_its_residual_gives_the_bits_of_one_beside_it(
    plane: int, channels: int
) -> None:
    # The memory plan may put a pointwise convolution's output in place of its residual
    # (compiler.backend.in_place): the epilogue's residual is then the output itself.
    from vm.kernels.runtime import convolution

    callbacks.link(symbols.POINTWISE_ITEMS, symbols.TRANSPOSED)
    jobs.require(jobs.POINTWISE)
    units = 45
    x = tensor(1, channels, 1, plane)
    weight = packed(tensor(units, channels, 1, 1))
    bias = tensor(units)
    residual = tensor(1, units, plane)
    beside = np.full((1, units, plane), np.nan, np.float32)
    window = (0, 1, 1, 1, 1, 0, 0, 1, 1, 1, plane)
    post = tiles.post_epilogue(units, bias, 0.0, 6.0, tiles.CLAMP, residual[0], beside[0])
    assert convolution._conv_blocks(x, weight, beside, 0, window, post.ctypes.data)
    over = residual.copy()
    post = tiles.post_epilogue(units, bias, 0.0, 6.0, tiles.CLAMP, over[0], over[0])
    assert tiles.writes_over_residual(post.ctypes.data)
    assert convolution._conv_blocks(x, weight, over, 0, window, post.ctypes.data)
    np.testing.assert_array_equal(over, beside)
