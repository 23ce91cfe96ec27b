"""The row sums of means over trailing axes (vm.kernels.runtime.pool_loops.row_sums_f32) and
the nearest and bilinear upsampling loops.

Returns group: sums and means of float32 rows summed in float64, any range of rows on its own
(a chunk of the shared job) writing exactly its part, the work shared with the polling
workers giving the same bits, and NaN for the mean of empty rows; upsampled planes equal to
interpolating each output pixel on its own, and the same bits shared with the workers.
Traps group: an output that does not hold one element per row.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.vm.kernels.workers import assert_shared, needs_workers
from vm.kernels.runtime import jobs, pool_loops

RNG = np.random.default_rng(43)


def rows(m: int, n: int) -> np.ndarray:
    return RNG.uniform(-2, 2, (m, n)).astype("float32")


def expected(x: np.ndarray, mean: bool) -> np.ndarray:
    total = x.astype(np.float64).sum(axis=1)
    return (total / x.shape[1] if mean else total).astype(np.float32)


# --- returns ---------------------------------------------------------------------------------


@pytest.mark.parametrize("mean", [False, True])
@pytest.mark.parametrize("shape", [(1, 1), (3, 49), (32, 1000), (7, 17)])
def test_row_sums_are_float64_sums_rounded_once(shape: tuple[int, int], mean: bool) -> None:
    x = rows(*shape)
    out = np.full(shape[0], np.nan, np.float32)
    pool_loops.row_sums_f32(x, out, mean)
    np.testing.assert_array_equal(out, expected(x, mean))


def test_each_range_of_rows_writes_its_part_only() -> None:
    x = rows(10, 33)
    out = np.full(10, np.nan, np.float32)
    pool_loops.row_sums_range(x, out, True, 0, 4)
    assert not np.isnan(out[:4]).any() and np.isnan(out[4:]).all()
    pool_loops.row_sums_range(x, out, True, 4, 10)
    np.testing.assert_array_equal(out, expected(x, True))


def test_the_mean_of_empty_rows_is_nan_and_their_sum_zero() -> None:
    x = np.empty((3, 0), np.float32)
    out = np.zeros(3, np.float32)
    pool_loops.row_sums_f32(x, out, True)
    assert np.isnan(out).all()
    pool_loops.row_sums_f32(x, out, False)
    np.testing.assert_array_equal(out, np.zeros(3, np.float32))


@needs_workers
def test_sums_shared_with_the_workers_give_the_same_bits() -> None:
    jobs.require(jobs.ROW_SUMS)
    x = rows(96, 784)
    assert x.size >= pool_loops.ROW_SUMS_SPLIT
    out = np.full(96, np.nan, np.float32)

    def check() -> None:
        np.testing.assert_array_equal(out, expected(x, True))
        out[:] = np.nan

    assert_shared(lambda: pool_loops.row_sums_f32(x, out, True), check)


def upsampled_pixel_by_pixel(x: np.ndarray, out_h: int, out_w: int, align: bool, method: str):
    """Each output pixel on its own, as TVM's upsampling defines it (float64 arithmetic,
    columns first for bilinear)."""
    n, c, height, width = x.shape

    def source(r: int, size: int, out_n: int) -> float:
        if align:
            return r * ((size - 1) / (out_n - 1)) if out_n > 1 else 0.0
        return r * (size / out_n)

    def nearest(r: int, size: int, out_n: int) -> int:
        s = source(r, size, out_n)
        index = np.rint(s) if align else np.floor(s + 1e-5)
        return min(max(int(index), 0), size - 1)

    def linear(r: int, size: int, out_n: int) -> tuple[int, int, float]:
        s = source(r, size, out_n)
        first = np.floor(s)
        i0 = int(first)
        return min(max(i0, 0), size - 1), min(max(i0 + 1, 0), size - 1), s - first

    out = np.empty((n, c, out_h, out_w), x.dtype)
    planes, flat = out.reshape(n * c, out_h, out_w), x.reshape(n * c, height, width)
    for r in range(out_h):
        for q in range(out_w):
            if method == "nearest":
                planes[:, r, q] = flat[:, nearest(r, height, out_h), nearest(q, width, out_w)]
                continue
            r0, r1, wy = linear(r, height, out_h)
            c0, c1, wx = linear(q, width, out_w)
            wide = flat.astype(np.float64)
            top = wide[:, r0, c0] * (1 - wx) + wide[:, r0, c1] * wx
            bottom = wide[:, r1, c0] * (1 - wx) + wide[:, r1, c1] * wx
            planes[:, r, q] = top * (1 - wy) + bottom * wy
    return out


UPSAMPLINGS = [("nearest", pool_loops.upsample_nearest), ("bilinear", pool_loops.upsample_bilinear)]


@pytest.mark.parametrize(("method", "function"), UPSAMPLINGS, ids=[m for m, _ in UPSAMPLINGS])
@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize(("shape", "size"), [((2, 3, 5, 7), (15, 21)), ((1, 2, 1, 1), (8, 8)),
                                             ((1, 1, 6, 4), (3, 9))])  # fmt: skip
def test_upsampling_is_each_pixel_interpolated_on_its_own(method, function, align, shape, size):
    # Rows repeated by nearest sampling are copies; bilinear rows are blends of rows
    # interpolated once: the bits are those of each pixel on its own.
    x = RNG.standard_normal(shape).astype(np.float32)
    out = np.full((*shape[:2], *size), np.nan, np.float32)
    function(x, out, align)
    expected = upsampled_pixel_by_pixel(x, *size, align, method)
    np.testing.assert_array_equal(out.view(np.uint32), expected.view(np.uint32))


@needs_workers
@pytest.mark.parametrize(("method", "function"), UPSAMPLINGS, ids=[m for m, _ in UPSAMPLINGS])
def test_an_upsampling_shared_with_the_workers_gives_the_bits_of_one_thread(method, function):
    jobs.require(jobs.UPSAMPLE)
    x = RNG.standard_normal((1, 21, 16, 16)).astype(np.float32)
    out = np.full((1, 21, 64, 64), np.nan, np.float32)
    assert out.size >= pool_loops.UPSAMPLE_SPLIT
    expected = upsampled_pixel_by_pixel(x, 64, 64, False, method)

    def check() -> None:
        np.testing.assert_array_equal(out.view(np.uint32), expected.view(np.uint32))
        out[:] = np.nan

    assert_shared(lambda: function(x, out, False), check)


# --- traps -----------------------------------------------------------------------------------


def test_an_output_without_one_element_per_row_is_refused() -> None:
    with pytest.raises(ValueError, match="one element per row"):
        pool_loops.row_sums_f32(rows(4, 5), np.zeros(3, np.float32), False)
