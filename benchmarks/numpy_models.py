"""The benchmark models written directly in numpy: the reference answers and the numpy peer.

Benchmarks layer. Each ``<model>_forward(weights, *inputs, dtype=...)`` computes the model of
the same name in :mod:`benchmarks.models` from the same weights. With ``dtype="float64"`` it
is the reference every engine's output is compared with (float64 keeps its own rounding
error far below float32's); with ``dtype="float32"`` it is the numpy peer in the timings.
"""

from __future__ import annotations

import numpy as np

from benchmarks.models import chain_ops, resnet18_blocks


def _cast(weights: dict, dtype: str) -> dict:
    return {name: value.astype(dtype, copy=False) for name, value in weights.items()}


def softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Softmax along ``axis``, shifted by the maximum for stability."""
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _erf(x: np.ndarray) -> np.ndarray:
    """erf: exact (``math.erf`` per element) in float64; in float32, Abramowitz and Stegun's
    7.1.26 (absolute error below 1.5e-7, under float32's rounding), since numpy has no erf."""
    if x.dtype == np.float64:
        from math import erf

        return np.vectorize(erf, otypes=[x.dtype])(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + np.float32(0.3275911) * a)
    poly = t * (
        np.float32(0.254829592)
        + t
        * (
            np.float32(-0.284496736)
            + t
            * (
                np.float32(1.421413741)
                + t * (np.float32(-1.453152027) + t * np.float32(1.061405429))
            )
        )
    )
    return np.sign(x) * (1.0 - poly * np.exp(-a * a))


def mlp_forward(weights: dict, x: np.ndarray, dtype: str = "float64") -> np.ndarray:
    """The MLP of :func:`benchmarks.models.mlp_module`."""
    w = _cast(weights, dtype)
    h = x.astype(dtype, copy=False)
    layers = len(w) // 2
    for i in range(layers):
        h = h @ w[f"w{i}"].T + w[f"b{i}"]
        if i < layers - 1:
            h = np.maximum(h, 0)
    return softmax(h)


def conv2d(x: np.ndarray, w: np.ndarray, stride: int, padding: int) -> np.ndarray:
    """NCHW/OIHW convolution as im2col (a strided window view) and one matrix product."""
    n, c, _, _ = x.shape
    o, _, kh, kw = w.shape
    if padding:
        x = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    windows = np.lib.stride_tricks.sliding_window_view(x, (kh, kw), axis=(2, 3))
    windows = windows[:, :, ::stride, ::stride]  # (n, c, oh, ow, kh, kw)
    oh, ow = windows.shape[2:4]
    cols = windows.transpose(0, 2, 3, 1, 4, 5).reshape(n * oh * ow, c * kh * kw)
    out = cols @ w.reshape(o, c * kh * kw).T
    return out.reshape(n, oh, ow, o).transpose(0, 3, 1, 2)


def batch_norm(x: np.ndarray, w: dict, name: str, eps: float = 1e-5) -> np.ndarray:
    """Inference batch norm over axis 1 with ``<name>_{gamma,beta,mean,var}``."""

    def vec(part: str) -> np.ndarray:
        return w[f"{name}_{part}"][None, :, None, None]

    return (x - vec("mean")) / np.sqrt(vec("var") + eps) * vec("gamma") + vec("beta")


def max_pool2d(x: np.ndarray, size: int, stride: int, padding: int) -> np.ndarray:
    """Max pool with padding that never wins (padded with ``-inf``)."""
    pad = ((0, 0), (0, 0), (padding, padding), (padding, padding))
    x = np.pad(x, pad, constant_values=-np.inf)
    windows = np.lib.stride_tricks.sliding_window_view(x, (size, size), axis=(2, 3))
    return windows[:, :, ::stride, ::stride].max(axis=(4, 5))


def resnet18_forward(weights: dict, data: np.ndarray, dtype: str = "float64") -> np.ndarray:
    """ResNet-18 of :func:`benchmarks.models.resnet18_module` (the logits)."""
    w = _cast(weights, dtype)
    width = w["conv1_w"].shape[0]
    h = data.astype(dtype, copy=False)
    h = np.maximum(batch_norm(conv2d(h, w["conv1_w"], 2, 3), w, "bn1"), 0)
    h = max_pool2d(h, 3, 2, 1)
    for prefix, _, _, stride in resnet18_blocks(width):
        shortcut = h
        if f"{prefix}_down_w" in w:
            shortcut = conv2d(h, w[f"{prefix}_down_w"], stride, 0)
            shortcut = batch_norm(shortcut, w, f"{prefix}_downbn")
        y = np.maximum(
            batch_norm(conv2d(h, w[f"{prefix}_conv1_w"], stride, 1), w, f"{prefix}_bn1"), 0
        )
        y = batch_norm(conv2d(y, w[f"{prefix}_conv2_w"], 1, 1), w, f"{prefix}_bn2")
        h = np.maximum(y + shortcut, 0)
    h = h.mean(axis=(2, 3))
    return h @ w["fc_w"].T + w["fc_b"]


def layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float = 1e-5):
    """Layer norm over the last axis (biased variance)."""
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def transformer_forward(
    weights: dict, x: np.ndarray, heads: int = 4, dtype: str = "float64"
) -> np.ndarray:
    """The post-norm encoder layer of :func:`benchmarks.models.transformer_module`."""
    w = _cast(weights, dtype)
    x = x.astype(dtype, copy=False)
    seq, width = x.shape
    head_width = width // heads

    def split_heads(h: np.ndarray) -> np.ndarray:
        return h.reshape(seq, heads, head_width).transpose(1, 0, 2)

    q = split_heads(x @ w["wq"].T + w["bq"])
    k = split_heads(x @ w["wk"].T + w["bk"])
    v = split_heads(x @ w["wv"].T + w["bv"])
    scores = (q @ k.transpose(0, 2, 1)) * np.asarray(1.0 / np.sqrt(head_width), dtype)
    context = (softmax(scores) @ v).transpose(1, 0, 2).reshape(seq, width)
    y = layer_norm(x + context @ w["wo"].T + w["bo"], w["ln1_gamma"], w["ln1_beta"])
    hidden = y @ w["w1"].T + w["b1"]
    hidden = 0.5 * hidden * (1.0 + _erf(hidden * np.asarray(1.0 / np.sqrt(2.0), dtype)))
    return layer_norm(y + hidden @ w["w2"].T + w["b2"], w["ln2_gamma"], w["ln2_beta"])


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def lstm_forward(
    weights: dict, xs: np.ndarray, h0: np.ndarray, c0: np.ndarray, dtype: str = "float64"
) -> np.ndarray:
    """The LSTM loop of :func:`benchmarks.models.lstm_module`: the last hidden state."""
    w = _cast(weights, dtype)
    h, c = h0.astype(dtype), c0.astype(dtype)
    w_ih_t, w_hh_t = w["w_ih"].T, w["w_hh"].T
    for x in xs.astype(dtype, copy=False):
        i, f, g, o = np.split(x @ w_ih_t + h @ w_hh_t + w["b"], 4, axis=1)
        c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
        h = _sigmoid(o) * np.tanh(c)
    return h


def chain_forward(x: np.ndarray, length: int = 100, dtype: str = "float64") -> np.ndarray:
    """The elementwise chain of :func:`benchmarks.models.chain`, one numpy call per operator."""
    h = x.astype(dtype, copy=False)
    for name, constant in chain_ops(length):
        ufunc = getattr(np, name)
        h = ufunc(h) if constant is None else ufunc(h, np.asarray(constant, dtype))
    return h
