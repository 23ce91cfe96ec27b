"""The layers the ``relay.testing`` networks are built of, each weight a typed parameter.

Compiler layer (``compiler.relay``). A weight is a free variable named ``<layer>_weight``
(``_bias``, ``_gamma``, ...), typed from the channels the layer reads, so that the network
type-checks before any value exists and :func:`~compiler.relay.testing.create_workload`
can make one for each name.
"""

from __future__ import annotations

from compiler.ir.expr import Expr, Var, var
from compiler.op import nn

__all__ = ["batch_norm", "conv2d", "conv2d_transpose", "dense", "param"]

#: A size for both sides, or ``(height, width)``.
Pair = int | tuple[int, int]


def param(name: str, shape: tuple[int, ...], dtype: str) -> Var:
    """A parameter ``name`` of ``shape`` and ``dtype``."""
    return var(name, shape=shape, dtype=dtype)


def _pair(value: Pair) -> tuple[int, int]:
    return (value, value) if isinstance(value, int) else (int(value[0]), int(value[1]))


def conv2d(
    data: Expr,
    in_channels: int,
    channels: int,
    kernel: Pair,
    name: str,
    dtype: str,
    stride: Pair = 1,
    padding: Pair | None = None,
    groups: int = 1,
    layout: str = "NCHW",
) -> Expr:
    """A ``kernel`` convolution by ``<name>_weight``: ``kernel``, ``stride`` and ``padding``
    are one int for both sides or ``(height, width)``; the padding is half the kernel
    unless given. NHWC ``data`` takes an HWIO weight, a depthwise one HWOI, as in TVM's
    networks."""
    kh, kw = _pair(kernel)
    pad = (kh // 2, kw // 2) if padding is None else _pair(padding)
    if layout == "NHWC" and groups > 1 and groups == in_channels:
        shape, kernel_layout = (kh, kw, channels, 1), "HWOI"
    elif layout == "NHWC":
        shape, kernel_layout = (kh, kw, in_channels // groups, channels), "HWIO"
    else:
        shape, kernel_layout = (channels, in_channels // groups, kh, kw), "OIHW"
    weight = param(f"{name}_weight", shape, dtype)
    return nn.conv2d(
        data, weight, strides=_pair(stride), padding=pad, groups=groups, channels=channels,
        kernel_size=(kh, kw), data_layout=layout, kernel_layout=kernel_layout,
    )  # fmt: skip


def conv2d_transpose(
    data: Expr,
    in_channels: int,
    channels: int,
    kernel: Pair,
    name: str,
    dtype: str,
    stride: Pair = 1,
    padding: Pair = 0,
    output_padding: Pair = 0,
) -> Expr:
    """A transposed ``kernel`` convolution by the IOHW ``<name>_weight`` (NCHW data)."""
    kh, kw = _pair(kernel)
    weight = param(f"{name}_weight", (in_channels, channels, kh, kw), dtype)
    return nn.conv2d_transpose(
        data, weight, strides=_pair(stride), padding=_pair(padding), channels=channels,
        kernel_size=(kh, kw), output_padding=_pair(output_padding),
    )  # fmt: skip


def batch_norm(
    data: Expr,
    channels: int,
    name: str,
    dtype: str,
    epsilon: float = 1e-5,
    scale: bool = True,
    axis: int = 1,
) -> Expr:
    """Batch normalization along ``axis`` by ``<name>_gamma``, ``_beta``, ``_moving_mean``
    and ``_moving_var`` (``<name>_gamma`` stays a parameter, unused, when not ``scale``, as
    in TVM)."""
    gamma, beta, mean, variance = (
        param(f"{name}_{p}", (channels,), dtype)
        for p in ("gamma", "beta", "moving_mean", "moving_var")
    )
    return nn.batch_norm(
        data, gamma, beta, mean, variance, axis=axis, epsilon=epsilon, scale=scale
    )[0]


def dense(data: Expr, in_features: int, units: int, name: str, dtype: str) -> Expr:
    """A dense layer by ``<name>_weight`` plus ``<name>_bias``."""
    weight = param(f"{name}_weight", (units, in_features), dtype)
    bias = param(f"{name}_bias", (units,), dtype)
    return nn.bias_add(nn.dense(data, weight, units=units), bias, axis=-1)
