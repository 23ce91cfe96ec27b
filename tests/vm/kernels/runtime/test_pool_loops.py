"""The row sums of means over trailing axes (vm.kernels.runtime.pool_loops.row_sums_f32).

Returns group: sums and means of float32 rows summed in float64, any range of rows on its own
(a chunk of the shared job) writing exactly its part, the work shared with the polling
workers giving the same bits, and NaN for the mean of empty rows. Traps group: an output
that does not hold one element per row.
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


# --- traps -----------------------------------------------------------------------------------


def test_an_output_without_one_element_per_row_is_refused() -> None:
    with pytest.raises(ValueError, match="one element per row"):
        pool_loops.row_sums_f32(rows(4, 5), np.zeros(3, np.float32), False)
