"""The benchmark models in PyTorch (CPU, eager or TorchScript), with the same numpy weights.

Benchmarks layer; needs the optional ``torch`` package (the ``bench`` extra). Each function
takes the weights of the model of the same name in :mod:`benchmarks.models` and returns a
``torch.nn.Module`` in eval mode whose ``forward`` takes the same inputs, in the same order and
layout, as the Relay ``@main`` (as torch tensors). :func:`script` compiles one with
``torch.jit.script``.
"""

from __future__ import annotations

import warnings

import numpy as np
import torch
from torch import nn
from torch.nn import functional

from benchmarks.models import resnet18_blocks


def tensor(value: np.ndarray) -> torch.Tensor:
    """A torch tensor sharing nothing with ``value`` (so numpy-side changes cannot leak in)."""
    return torch.from_numpy(np.array(value, copy=True))


def _load(parameter: torch.Tensor, value: np.ndarray) -> None:
    if tuple(parameter.shape) != value.shape:
        raise ValueError(
            f"torch parameter of shape {tuple(parameter.shape)} cannot take a weight of shape "
            f"{value.shape}"
        )
    with torch.no_grad():
        parameter.copy_(tensor(value))


def script(module: nn.Module) -> torch.jit.ScriptModule:
    """``torch.jit.script(module)`` in eval mode (TorchScript is deprecated upstream but still
    the scripted peer users compare with; its deprecation warning is silenced here)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return torch.jit.script(module).eval()


class MLP(nn.Module):
    """``Linear`` layers with relu between them and softmax at the end."""

    def __init__(self, weights: dict) -> None:
        super().__init__()
        layers = len(weights) // 2
        self.layers = nn.ModuleList()
        for i in range(layers):
            out_features, in_features = weights[f"w{i}"].shape
            linear = nn.Linear(in_features, out_features)
            _load(linear.weight, weights[f"w{i}"])
            _load(linear.bias, weights[f"b{i}"])
            self.layers.append(linear)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        last = len(self.layers) - 1
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i < last:
                x = functional.relu(x)
        return functional.softmax(x, dim=-1)


def _conv_bn(weights: dict, conv: str, bn: str, stride: int, padding: int) -> nn.Sequential:
    w = weights[conv]
    layer = nn.Conv2d(w.shape[1], w.shape[0], w.shape[2:], stride, padding, bias=False)
    _load(layer.weight, w)
    norm = nn.BatchNorm2d(w.shape[0], eps=1e-5)
    _load(norm.weight, weights[f"{bn}_gamma"])
    _load(norm.bias, weights[f"{bn}_beta"])
    _load(norm.running_mean, weights[f"{bn}_mean"])
    _load(norm.running_var, weights[f"{bn}_var"])
    return nn.Sequential(layer, norm)


class BasicBlock(nn.Module):
    """Two 3x3 convolutions with batch norm and a residual connection."""

    def __init__(self, weights: dict, prefix: str, stride: int) -> None:
        super().__init__()
        self.first = _conv_bn(weights, f"{prefix}_conv1_w", f"{prefix}_bn1", stride, 1)
        self.second = _conv_bn(weights, f"{prefix}_conv2_w", f"{prefix}_bn2", 1, 1)
        if f"{prefix}_down_w" in weights:
            self.down = _conv_bn(weights, f"{prefix}_down_w", f"{prefix}_downbn", stride, 0)
        else:
            self.down = nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.second(functional.relu(self.first(x)))
        return functional.relu(y + self.down(x))


class ResNet18(nn.Module):
    """ResNet-18 (NCHW), returning the logits."""

    def __init__(self, weights: dict) -> None:
        super().__init__()
        width = weights["conv1_w"].shape[0]
        self.stem = _conv_bn(weights, "conv1_w", "bn1", 2, 3)
        self.pool = nn.MaxPool2d(3, 2, 1)
        self.blocks = nn.Sequential(
            *(BasicBlock(weights, p, stride) for p, _, _, stride in resnet18_blocks(width))
        )
        self.fc = nn.Linear(weights["fc_w"].shape[1], weights["fc_w"].shape[0])
        _load(self.fc.weight, weights["fc_w"])
        _load(self.fc.bias, weights["fc_b"])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(functional.relu(self.stem(x)))
        x = self.blocks(x)
        x = functional.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.fc(x)


class TransformerLayer(nn.Module):
    """torch's own post-norm ``TransformerEncoderLayer`` (exact gelu, no dropout) on
    ``(seq, width)``; in eval mode without gradients torch runs its fused fast path."""

    def __init__(self, weights: dict, heads: int = 4) -> None:
        super().__init__()
        width = weights["wq"].shape[0]
        ff = weights["w1"].shape[0]
        self.layer = nn.TransformerEncoderLayer(
            width, heads, ff, dropout=0.0, activation="gelu", batch_first=True, norm_first=False
        )
        attn = self.layer.self_attn
        _load(attn.in_proj_weight, np.concatenate([weights[n] for n in ("wq", "wk", "wv")]))
        _load(attn.in_proj_bias, np.concatenate([weights[n] for n in ("bq", "bk", "bv")]))
        _load(attn.out_proj.weight, weights["wo"])
        _load(attn.out_proj.bias, weights["bo"])
        _load(self.layer.linear1.weight, weights["w1"])
        _load(self.layer.linear1.bias, weights["b1"])
        _load(self.layer.linear2.weight, weights["w2"])
        _load(self.layer.linear2.bias, weights["b2"])
        for i in (1, 2):
            norm = getattr(self.layer, f"norm{i}")
            _load(norm.weight, weights[f"ln{i}_gamma"])
            _load(norm.bias, weights[f"ln{i}_beta"])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer(x.unsqueeze(0)).squeeze(0)


class LSTMLoop(nn.Module):
    """An ``LSTMCell`` stepped over the first axis of ``xs``; returns the last hidden state."""

    def __init__(self, weights: dict) -> None:
        super().__init__()
        four_hidden, input_size = weights["w_ih"].shape
        self.cell = nn.LSTMCell(input_size, four_hidden // 4)
        _load(self.cell.weight_ih, weights["w_ih"])
        _load(self.cell.weight_hh, weights["w_hh"])
        _load(self.cell.bias_ih, weights["b"])
        _load(self.cell.bias_hh, np.zeros_like(weights["b"]))

    def forward(self, xs: torch.Tensor, h: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        for t in range(xs.shape[0]):
            h, c = self.cell(xs[t], (h, c))
        return h


def mlp(weights: dict) -> nn.Module:
    """The MLP of :func:`benchmarks.models.mlp_module`."""
    return MLP(weights).eval()


def resnet18(weights: dict) -> nn.Module:
    """ResNet-18 of :func:`benchmarks.models.resnet18_module`."""
    return ResNet18(weights).eval()


def transformer(weights: dict, heads: int = 4) -> nn.Module:
    """The encoder layer of :func:`benchmarks.models.transformer_module`."""
    return TransformerLayer(weights, heads).eval()


def lstm(weights: dict) -> nn.Module:
    """The LSTM loop of :func:`benchmarks.models.lstm_module`."""
    return LSTMLoop(weights).eval()
