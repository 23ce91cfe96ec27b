"""Hand-written numba peers: the whole LSTM loop and the hand-fused elementwise chain.

Benchmarks layer. Each function is one ``@njit`` function (cached on disk by numba beside
this module) doing what the relayvm program does in many kernel calls, so its time is a
floor for what fusion and a fast dispatch loop could reach.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from benchmarks.models import CHAIN_PATTERN


@numba.njit(cache=True)
def _lstm_loop(xs, h0, c0, w_ih_t, w_hh_t, b):  # pragma: no cover - compiled by numba
    hidden = h0.shape[1]
    h = h0.copy()
    c = c0.copy()
    gates = np.empty(4 * hidden, dtype=np.float32)
    one = np.float32(1.0)
    for t in range(xs.shape[0]):
        # gates = b + x @ w_ih.T + h @ w_hh.T, row by row so each inner loop is a vectorizable
        # axpy (numba's np.dot would need scipy for its BLAS bindings).
        gates[:] = b
        for k in range(xs.shape[2]):
            xk = xs[t, 0, k]
            for j in range(4 * hidden):
                gates[j] += xk * w_ih_t[k, j]
        for k in range(hidden):
            hk = h[0, k]
            for j in range(4 * hidden):
                gates[j] += hk * w_hh_t[k, j]
        for j in range(hidden):
            i = one / (one + math.exp(-gates[j]))
            f = one / (one + math.exp(-gates[hidden + j]))
            g = math.tanh(gates[2 * hidden + j])
            o = one / (one + math.exp(-gates[3 * hidden + j]))
            c[0, j] = f * c[0, j] + i * g
            h[0, j] = o * math.tanh(c[0, j])
    return h


class LSTMLoop:
    """The LSTM loop of :func:`benchmarks.models.lstm_module` as one numba function.

    The weights are transposed once here (as a user would), then ``__call__(xs, h0, c0)``
    runs all the steps in compiled code: two vector-matrix products per step and a loop
    for the gates.
    """

    def __init__(self, weights: dict) -> None:
        self.w_ih_t = np.ascontiguousarray(weights["w_ih"].T)
        self.w_hh_t = np.ascontiguousarray(weights["w_hh"].T)
        self.b = np.ascontiguousarray(weights["b"])

    def __call__(self, xs: np.ndarray, h0: np.ndarray, c0: np.ndarray) -> np.ndarray:
        return _lstm_loop(xs, h0, c0, self.w_ih_t, self.w_hh_t, self.b)


@numba.njit(cache=True)
def _chain(x, repeats, out):  # pragma: no cover - compiled by numba
    flat_in = x.reshape(x.size)
    flat_out = out.reshape(out.size)
    scale = np.float32(1.5)
    shift = np.float32(0.25)
    for k in range(flat_in.size):
        v = flat_in[k]
        for _ in range(repeats):
            v = math.cos(math.sin(v) * scale) + shift
        flat_out[k] = v


def chain_fused(x: np.ndarray, length: int = 100) -> np.ndarray:
    """The elementwise chain of :func:`benchmarks.models.chain` as one pass over ``x``."""
    if CHAIN_PATTERN != (("sin", None), ("multiply", 1.5), ("cos", None), ("add", 0.25)):
        raise RuntimeError("chain_fused is written for a different CHAIN_PATTERN; update it")
    if length % len(CHAIN_PATTERN):
        raise ValueError(f"the chain's length must be a multiple of 4, got {length}")
    x = np.ascontiguousarray(x, dtype=np.float32)
    out = np.empty_like(x)
    _chain(x, length // len(CHAIN_PATTERN), out)
    return out
