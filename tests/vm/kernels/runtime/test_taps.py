"""Sums of a depthwise convolution's taps with the outputs in registers
(vm.kernels.runtime.taps): along a plane (plane_taps), by blocks of rows (plane_rows),
across a block of channels (channel_taps) and along a row at a column stride of 2
(stride2_taps3x3).

Returns group: any count of outputs (a block and a part, a part alone, none) and of taps,
summed in tap order, written only from the output's start up to the end of its last
block or group of pixels; rows of any count (blocks and single rows) and width (wide and
narrow blocks of columns), written only within their rows; the element type test the
depthwise loops branch on.
"""

from __future__ import annotations

import numpy as np
import pytest
from numba import njit

from vm.kernels.runtime import taps


@njit
def _sum_taps(pad, out_at, count, offsets, weights):
    taps.plane_taps(pad.ctypes.data, out_at, count, offsets.ctypes.data, weights.ctypes.data,
                    weights.size)  # fmt: skip


@njit
def _is_float32(array):
    return taps.is_float32(array)


@pytest.mark.parametrize("count", [0, 1, 17, taps.BLOCK, taps.BLOCK + 5, 3 * taps.BLOCK - 1])
@pytest.mark.parametrize("count_taps", [1, 9, 49])
def test_plane_taps_sum_every_tap_in_order_and_write_whole_blocks(count, count_taps) -> None:
    rng = np.random.default_rng(count * 100 + count_taps)
    reach = 4 * taps.BLOCK + 64  # what the taps read lies below the output
    pad = rng.standard_normal(2 * reach).astype("float32")
    offsets = rng.integers(0, reach - count - taps.BLOCK, count_taps).astype("int64")
    weights = rng.standard_normal(count_taps).astype("float32")
    out_at = reach
    before = pad.copy()
    _sum_taps(pad, out_at, count, offsets, weights)
    # One fused multiply-add per tap, in tap order: the same as float64 rounded per step.
    expected = np.zeros(count, "float32")
    for offset, weight in zip(offsets, weights):
        exact = np.float64(weight) * before[offset : offset + count] + expected
        expected = exact.astype("float32")
    np.testing.assert_array_equal(pad[out_at : out_at + count], expected)
    written = -(-count // taps.BLOCK) * taps.BLOCK
    np.testing.assert_array_equal(pad[:out_at], before[:out_at])
    np.testing.assert_array_equal(pad[out_at + written :], before[out_at + written :])


@njit
def _plane_rows(pad, out_at, at, row_len, rows, columns, weights, k):
    taps.plane_rows(pad.ctypes.data, out_at, at, row_len, rows, columns, weights.ctypes.data, k)


@pytest.mark.parametrize("k", taps.ROW_KERNELS)
@pytest.mark.parametrize(
    ("rows", "columns"),
    # Whole blocks of rows and single rows after them; narrow and wide blocks of columns.
    [(0, 20), (1, 1), (3, 16), (taps.ROWS, 28), (2 * taps.ROWS + 3, 56), (5, 112), (6, 47)],
)
def test_plane_rows_sum_every_tap_in_order_and_write_only_their_rows(k, rows, columns) -> None:
    rng = np.random.default_rng(rows * 1000 + columns * 10 + k)
    lanes = taps.LANES
    row_len = -(-(columns + k - 1) // lanes) * lanes
    at = 3 * row_len  # rows above the band, as in a band of a plane's rows
    out_at = at + (rows + k - 1) * row_len
    pad = rng.standard_normal(out_at + (rows + 2) * row_len).astype("float32")
    weights = rng.standard_normal(k * k).astype("float32")
    before = pad.copy()
    _plane_rows(pad, out_at, at, row_len, rows, columns, weights, k)
    plane = before[at : at + (rows + k - 1) * row_len].reshape(rows + k - 1, row_len)
    expected = np.zeros((rows, columns), "float32")
    for i in range(k):  # one fused multiply-add per tap, in tap order
        for j in range(k):
            window = plane[i : i + rows, j : j + columns]
            expected = (np.float64(weights[i * k + j]) * window + expected).astype("float32")
    got = pad[out_at : out_at + rows * row_len].reshape(rows, row_len)
    np.testing.assert_array_equal(got[:, :columns], expected)
    # Whole vectors of columns, within the rows; nothing else written.
    np.testing.assert_array_equal(pad[:out_at], before[:out_at])
    np.testing.assert_array_equal(pad[out_at + rows * row_len :], before[out_at + rows * row_len :])


def test_is_float32_tells_float32_arrays_from_others() -> None:
    assert _is_float32(np.zeros(2, "float32"))
    assert not _is_float32(np.zeros(2, "float64"))
    assert not _is_float32(np.zeros(2, "int32"))


@njit
def _sum_channel_taps(pad, bases, count, out, offsets, weights):
    taps.channel_taps(pad.ctypes.data, bases.ctypes.data, count, out.ctypes.data,
                      offsets.ctypes.data, weights.ctypes.data, offsets.size)  # fmt: skip


@pytest.mark.parametrize("count", [0, 1, taps.PIXELS, 4 * taps.PIXELS + 3])
@pytest.mark.parametrize("count_taps", [1, 9, 25])
def test_channel_taps_sum_every_tap_across_a_block_of_channels(count, count_taps) -> None:
    rng = np.random.default_rng(count * 100 + count_taps)
    lanes, rows = taps.LANES, 200
    pad = rng.standard_normal((rows, lanes)).astype("float32")
    padded = -(-count // taps.PIXELS) * taps.PIXELS
    bases = np.zeros(padded, "int64")
    bases[:count] = rng.integers(0, rows // 2, count)
    offsets = rng.integers(0, rows // 2, count_taps).astype("int64")
    weights = rng.standard_normal((count_taps, lanes)).astype("float32")
    out = np.full((padded + 1, lanes), np.nan, "float32")
    _sum_channel_taps(pad, bases, count, out, offsets, weights)
    expected = np.zeros((count, lanes), "float32")
    for offset, weight in zip(offsets, weights):
        exact = weight.astype("float64") * pad[bases[:count] + offset] + expected
        expected = exact.astype("float32")
    np.testing.assert_array_equal(out[:count], expected)
    assert np.isnan(out[padded:]).all()  # nothing past the last group


@njit
def _stride2_row(pad, at, step, out, blocks, weights):
    taps.stride2_taps3x3(pad.ctypes.data, at, step, out.ctypes.data, blocks, weights.ctypes.data)


@pytest.mark.parametrize("blocks", [0, 1, 3])
@pytest.mark.parametrize(("at", "step"), [(0, 2 * 3 * taps.LANES + 1), (5, 200)])
def test_stride2_taps3x3_sum_three_rows_at_every_other_column(blocks, at, step) -> None:
    rng = np.random.default_rng(blocks * 10 + at)
    width = 2 * taps.LANES * blocks + 1
    pad = rng.standard_normal(at + 2 * step + width + taps.STRIDE2_SLACK).astype("float32")
    weights = rng.standard_normal(9).astype("float32")
    out = np.full(blocks * taps.LANES + 1, np.nan, "float32")
    _stride2_row(pad, at, step, out, blocks, weights)
    count = blocks * taps.LANES
    # The taps in order, row by row: a product, then one fused multiply-add per tap.
    expected = np.zeros(count, "float32")
    for t, weight in enumerate(weights):
        i, j = divmod(t, 3)
        start = at + i * step + j
        exact = np.float64(weight) * pad[start : start + 2 * count : 2] + expected
        expected = exact.astype("float32")
    np.testing.assert_array_equal(out[:count], expected)
    assert np.isnan(out[count:]).all()  # nothing past the last block
