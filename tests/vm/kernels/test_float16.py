"""float16 tensors: numba cannot compute in float16, so kernels pass it as uint16 bits and
compute in float32. These tests pin the conversions to numpy's bit for bit.

Returns group: every one of the 65,536 float16 bit patterns decodes exactly; float32 and
float64 values round to the nearest float16 with ties to even, including at every
midpoint between neighbouring float16 values, the subnormal range and the overflow
threshold.
"""

from __future__ import annotations

import numpy as np

from tests.vm.kernels.harness import DTYPES, cast_all, run


def _cast(x: np.ndarray, target: str) -> np.ndarray:
    with np.errstate(all="ignore"):  # the integer casts of inf and nan in the same kernel
        program, results = cast_all(x)
    want = program.expected(results)
    got = run(program.description(results), [x], want)
    return got[DTYPES.index(target)]


def test_every_float16_bit_pattern_decodes_exactly() -> None:
    bits = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    halves = bits.view(np.float16)
    got = _cast(halves, "float32")
    want = halves.astype(np.float32)
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)
    assert np.array_equal(got[~nan].view(np.uint32), want[~nan].view(np.uint32))


def _rounding_probes(dtype: str) -> np.ndarray:
    """Every finite float16, the midpoints between neighbours, and values just off them."""
    halves = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16)
    finite = np.sort(halves[np.isfinite(halves)].astype(np.float64))
    mids = (finite[:-1] + finite[1:]) / 2
    wide = np.concatenate([finite, mids, [65504.0, 65519.99, 65520.0, 1e6, -65520.0]])
    probes = wide.astype(dtype)
    up = np.nextafter(probes, np.array(np.inf, dtype))
    down = np.nextafter(probes, np.array(-np.inf, dtype))
    return np.concatenate([probes, up, down, np.array([np.nan, np.inf, -np.inf, -0.0], dtype)])


def test_float32_rounds_to_the_nearest_float16_ties_to_even() -> None:
    x = _rounding_probes("float32")
    got = _cast(x, "float16")
    with np.errstate(over="ignore"):
        want = x.astype(np.float16)
    assert np.array_equal(got.view(np.uint16), want.view(np.uint16))


def test_float64_rounds_to_float16_once() -> None:
    x = _rounding_probes("float64")
    got = _cast(x, "float16")
    with np.errstate(over="ignore"):
        want = x.astype(np.float16)
    assert np.array_equal(got.view(np.uint16), want.view(np.uint16))
