"""Row-wise float32 softmax and layer normalization (vm.kernels.runtime.rows) match numpy.

Returns group: rows short of, at and past the size from which they are shared, masked
entries (-inf and float32's lowest) giving exact zeros, with and without gamma and beta;
the rows shared with the polling workers give the bits the caller computes alone.
Traps group: an output of another shape, and a gamma of another length, raise ValueError.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.vm.kernels.workers import assert_shared, needs_workers
from vm.kernels.runtime import jobs, rows

RNG = np.random.default_rng(17)

# (rows, columns): one row; a few short rows; at the size rows are shared from; past it.
SHAPES = [(1, 5), (7, 33), (rows.SPLIT // 128, 128), (300, 197)]
IDS = [f"{m}x{n}" for m, n in SHAPES]


def softmax_reference(x: np.ndarray) -> np.ndarray:
    wide = x.astype(np.float64)
    e = np.exp(wide - wide.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def layer_norm_reference(x, gamma, beta, epsilon) -> np.ndarray:
    wide = x.astype(np.float64)
    mean = wide.mean(axis=-1, keepdims=True)
    var = ((wide - mean) ** 2).mean(axis=-1, keepdims=True)
    return (wide - mean) / np.sqrt(var + epsilon) * gamma + beta


def alone(function) -> None:
    """Run ``function()`` with the slot held, as while another job holds it: the caller
    computes every row itself."""
    jobs.SLOT[jobs._BUSY] = 1
    try:
        function()
    finally:
        jobs.SLOT[jobs._BUSY] = 0


# --- returns ----------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", SHAPES, ids=IDS)
def test_softmax_returns_numpy_s_softmax_of_each_row(shape) -> None:
    jobs.require(jobs.SOFTMAX_ROWS)
    x = (RNG.standard_normal(shape) * 4).astype(np.float32)
    out = np.full_like(x, np.nan)
    rows.softmax_f32(x, out)
    np.testing.assert_allclose(out, softmax_reference(x), rtol=2e-6, atol=1e-7)


def test_softmax_of_masked_entries_is_exactly_zero() -> None:
    # A causal mask: -inf or float32's lowest above the diagonal.
    jobs.require(jobs.SOFTMAX_ROWS)
    n = 160
    x = RNG.standard_normal((n, n)).astype(np.float32)
    upper = np.triu(np.ones((n, n), bool), 1)
    x[upper] = np.float32(np.finfo(np.float32).min)
    x[::3][upper[::3]] = -np.inf
    out = np.full_like(x, np.nan)
    rows.softmax_f32(x, out)
    assert (out[upper] == 0).all()
    np.testing.assert_allclose(out, softmax_reference(x), rtol=2e-6, atol=1e-7)


@pytest.mark.parametrize("affine", [(True, True), (True, False), (False, True), (False, False)])
@pytest.mark.parametrize("shape", SHAPES, ids=IDS)
def test_layer_norm_returns_numpy_s_normalization_of_each_row(shape, affine) -> None:
    jobs.require(jobs.LAYER_NORM_ROWS)
    scale, center = affine
    x = (RNG.standard_normal(shape) * 3 + 1).astype(np.float32)
    gamma = RNG.standard_normal(shape[1]).astype(np.float32)
    beta = RNG.standard_normal(shape[1]).astype(np.float32)
    out = np.full_like(x, np.nan)
    rows.layer_norm_f32(x, gamma, beta, np.float32(1e-5), scale, center, out)
    expected = layer_norm_reference(
        x, gamma if scale else 1.0, beta if center else 0.0, np.float64(np.float32(1e-5))
    )
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


@needs_workers
def test_a_softmax_shared_with_the_workers_gives_the_bits_of_one_thread() -> None:
    jobs.require(jobs.SOFTMAX_ROWS)
    x = (RNG.standard_normal((12 * 64, 64)) * 4).astype(np.float32)
    single = np.empty_like(x)
    alone(lambda: rows.softmax_f32(x, single))
    shared = np.full_like(x, np.nan)
    assert_shared(
        lambda: rows.softmax_f32(x, shared),
        lambda: np.testing.assert_array_equal(shared, single),
    )


@needs_workers
def test_a_layer_norm_shared_with_the_workers_gives_the_bits_of_one_thread() -> None:
    jobs.require(jobs.LAYER_NORM_ROWS)
    x = RNG.standard_normal((128, 768)).astype(np.float32)
    gamma, beta = RNG.standard_normal((2, 768)).astype(np.float32)
    epsilon = np.float32(1e-12)
    single = np.empty_like(x)
    alone(lambda: rows.layer_norm_f32(x, gamma, beta, epsilon, True, True, single))
    shared = np.full_like(x, np.nan)
    assert_shared(
        lambda: rows.layer_norm_f32(x, gamma, beta, epsilon, True, True, shared),
        lambda: np.testing.assert_array_equal(shared, single),
    )


# --- traps ------------------------------------------------------------------------------------


def test_a_softmax_into_an_output_of_another_shape_raises() -> None:
    x = np.zeros((4, 8), np.float32)
    with pytest.raises(ValueError, match="shape of x"):
        rows.softmax_f32(x, np.zeros((4, 7), np.float32))


def test_a_layer_norm_with_a_gamma_of_another_length_raises() -> None:
    x = np.zeros((4, 8), np.float32)
    gamma = np.ones(7, np.float32)
    with pytest.raises(ValueError, match="one element per column"):
        rows.layer_norm_f32(x, gamma, np.zeros(8, np.float32), np.float32(1e-5), True, True,
                            np.zeros_like(x))  # fmt: skip
