"""The vectorizable float32 exp, sigmoid, tanh and erf: accuracy, edges, special values; exp
flushed to 0 below the normal range; the row maximum: numpy's answer, NaN and infinities,
signed zeros, an empty row; the row sums: float64 sums of float32 and float64 rows, strided
rows, special values."""

from __future__ import annotations

import math

import numba
import numpy as np
import pytest

from vm.kernels.runtime import vecmath as vx


@numba.njit
def _apply(values, out, which):  # type: ignore[no-untyped-def]
    for i in range(values.shape[0]):
        x = values[i]
        if which == 0:
            out[i] = vx.exp_f32(x)
        elif which == 1:
            out[i] = vx.sigmoid_f32(x)
        elif which == 2:
            out[i] = vx.tanh_f32(x)
        else:
            out[i] = vx.erf_f32(x)


def apply(name: str, values: np.ndarray) -> np.ndarray:
    out = np.empty_like(values)
    _apply(values, out, ("exp", "sigmoid", "tanh", "erf").index(name))
    return out


REFERENCES = {
    "exp": np.exp,
    "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)),
    "tanh": np.tanh,
    "erf": np.vectorize(math.erf),
}
# Worst error seen on these grids, in units of the float32 spacing at the true value.
ULPS = {"exp": 1.5, "sigmoid": 2.5, "tanh": 1.5, "erf": 3.0}

GRID = np.concatenate(
    [
        np.linspace(-100.0, 88.0, 200_001),
        np.linspace(-6.0, 6.0, 200_001),
        np.linspace(-1e-3, 1e-3, 2_001),
        [0.0, -0.0, 0.625, -0.625, 1.0, -1.0, 4.0, -4.0],
    ]
).astype(np.float32)


@numba.njit
def _flushed(values, out):  # type: ignore[no-untyped-def]
    for i in range(values.shape[0]):
        out[i] = vx.exp_flushed_f32(values[i])


# ---- returns -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_results_are_within_a_few_ulp_of_the_float64_value(name: str) -> None:
    with np.errstate(over="ignore"):
        exact = REFERENCES[name](GRID.astype(np.float64))
        rounded = exact.astype(np.float32)
    got = apply(name, GRID).astype(np.float64)
    normal = np.isfinite(rounded) & (np.abs(exact) >= np.finfo(np.float32).tiny)
    spacing = np.spacing(np.abs(rounded[normal])).astype(np.float64)
    assert (np.abs(got[normal] - exact[normal]) / spacing).max() <= ULPS[name]


def test_exp_overflows_to_infinity_and_underflows_through_subnormals_to_zero() -> None:
    x = np.array([88.7, 88.73, 100.0, -90.0, -100.0, -103.0, -104.0, -200.0], np.float32)
    got = apply("exp", x)
    assert np.isfinite(got[0]) and np.isinf(got[1:3]).all()
    exact = np.exp(x[3:6].astype(np.float64))
    tiny_spacing = np.finfo(np.float32).smallest_subnormal
    assert np.all(np.abs(got[3:6] - exact) <= np.maximum(2e-7 * exact, tiny_spacing))
    assert (got[6:] == 0).all()


@numba.njit
def _scaled(p, k, out):  # type: ignore[no-untyped-def]
    for i in range(p.shape[0]):
        out[i] = vx._ldexp(p[i], k[i])


def test_exp_scales_by_its_power_of_two_with_one_rounding() -> None:
    # exp_f32 ends with p * 2 ** k, p in [0.7, 1.42] and k in [-150, 128]: by ldexp on
    # AVX-512 hosts, elsewhere as p * 2 ** (k // 2) * 2 ** (k - k // 2), whose first
    # product is exact. Both must round once, subnormal results and overflow included.
    rng = np.random.default_rng(5)
    k = np.repeat(np.arange(-150, 129, dtype=np.int32), 64)
    p = rng.uniform(0.7, 1.42, k.size).astype(np.float32)
    got = np.empty_like(p)
    _scaled(p, k, got)
    half = k >> 1
    with np.errstate(over="ignore"):
        expected = p * np.ldexp(np.float32(1), half) * np.ldexp(np.float32(1), k - half)
    assert expected.dtype == np.float32
    np.testing.assert_array_equal(got.view(np.uint32), expected.view(np.uint32))
    assert np.isinf(got[k == 128][p[k == 128] >= 1]).all()
    assert (got[k == -150] <= np.finfo(np.float32).smallest_subnormal).all()


@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_nan_gives_nan_and_infinities_give_the_limits(name: str) -> None:
    got = apply(name, np.array([np.nan, np.inf, -np.inf], np.float32))
    expected = {
        "exp": [np.inf, 0.0],
        "sigmoid": [1.0, 0.0],
        "tanh": [1.0, -1.0],
        "erf": [1.0, -1.0],
    }[name]
    assert np.isnan(got[0])
    assert list(got[1:]) == expected


@pytest.mark.parametrize("name", ["tanh", "erf"])
def test_odd_functions_are_exactly_odd(name: str) -> None:
    x = GRID[GRID > 0]
    np.testing.assert_array_equal(apply(name, -x), -apply(name, x))


_max_f32 = numba.njit(lambda row: vx.max_f32(row))


@pytest.mark.parametrize("size", [1, 7, 16, 129])
def test_the_row_maximum_is_numpys(size: int) -> None:
    rng = np.random.default_rng(size)
    for scale in (1e-30, 1.0, 1e30):
        row = (rng.standard_normal(size) * scale).astype(np.float32)
        assert _max_f32(row) == row.max()
        assert _max_f32(-np.abs(row)) == (-np.abs(row)).max()


def test_the_row_maximum_of_special_values() -> None:
    inf = np.float32(np.inf)
    assert np.isnan(_max_f32(np.float32([1.0, np.nan, 2.0])))
    assert np.isnan(_max_f32(np.float32([-np.nan, -inf])))  # a negative NaN too
    assert _max_f32(np.float32([-inf, 3.0, inf])) == inf
    assert _max_f32(np.float32([-inf, -inf])) == -inf
    assert _max_f32(np.float32([-1e-45, -3.0])) == np.float32(-1e-45)  # subnormal
    top = _max_f32(np.float32([-0.0, 0.0, -0.0]))
    assert top == 0.0 and not np.signbit(top)
    assert _max_f32(np.float32([-0.0])) == 0.0
    assert _max_f32(np.zeros(0, np.float32)) == -inf


_sum_f64 = numba.njit(lambda row: vx.sum_f64(row))
_squares = numba.njit(lambda row, center: vx.squared_deviations_f64(row, center))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("size", [0, 1, 7, 768, 1001])
def test_row_sums_match_float64_sums_in_order(dtype: str, size: int) -> None:
    rng = np.random.default_rng(size)
    row = (rng.standard_normal(size) * 1e3 + 5.0).astype(dtype)
    exact = math.fsum(row.astype(np.float64))
    assert _sum_f64(row) == pytest.approx(exact, rel=1e-13, abs=1e-9)
    center = row.dtype.type(row.mean()) if size else row.dtype.type(0)
    squares = [float(np.float64((x - center) * (x - center))) for x in row]
    assert _squares(row, center) == pytest.approx(math.fsum(squares), rel=1e-13, abs=1e-9)


def test_row_sums_read_strided_rows_and_carry_special_values() -> None:
    grid = np.arange(12, dtype=np.float32).reshape(3, 4)
    assert _sum_f64(grid[:, 1]) == 1.0 + 5.0 + 9.0  # a column: not contiguous
    assert np.isnan(_sum_f64(np.float32([1.0, np.nan, 2.0])))
    assert _sum_f64(np.float32([np.inf, 1.0])) == np.inf
    assert np.isnan(_sum_f64(np.float32([np.inf, -np.inf])))
    # float32's largest values sum past float32's range without overflowing float64.
    big = np.full(4, np.finfo(np.float32).max, np.float32)
    assert _sum_f64(big) == 4.0 * float(np.finfo(np.float32).max)


def test_a_flushed_exp_is_exp_in_the_normal_range_and_zero_below_it() -> None:
    lowest = np.finfo(np.float32).min
    values = np.array(
        [-87.5, -87.0, -86.9, -100.0, -np.inf, lowest, 0.0, 3.0, np.nan, np.inf], np.float32
    )
    got = np.empty_like(values)
    _flushed(values, got)
    exact = apply("exp", values)
    normal = ~(values < -87.0)
    np.testing.assert_array_equal(got[normal], exact[normal])  # NaN and inf included
    assert (got[~normal] == 0.0).all()
    assert (got[normal & np.isfinite(values)] >= np.finfo(np.float32).tiny).all()
