"""The layers the ``relay.testing`` networks are built of, each weight a typed parameter.

Compiler layer (``compiler.relay``). A weight is a free variable named ``<layer>_weight``
(``_bias``, ``_gamma``, ...), typed from the channels the layer reads, so that the network
type-checks before any value exists and :func:`~compiler.relay.testing.create_workload`
can make one for each name.
"""

from __future__ import annotations

from compiler.ir.expr import Expr, Var, var
from compiler.op import nn

__all__ = ["batch_norm", "conv2d", "dense", "param"]


def param(name: str, shape: tuple[int, ...], dtype: str) -> Var:
    """A parameter ``name`` of ``shape`` and ``dtype``."""
    return var(name, shape=shape, dtype=dtype)


def conv2d(
    data: Expr,
    in_channels: int,
    channels: int,
    kernel: int,
    name: str,
    dtype: str,
    stride: int = 1,
    padding: int | None = None,
    groups: int = 1,
) -> Expr:
    """A ``kernel`` x ``kernel`` convolution by ``<name>_weight`` (padded by half the
    kernel unless ``padding`` is given)."""
    pad = kernel // 2 if padding is None else padding
    weight = param(f"{name}_weight", (channels, in_channels // groups, kernel, kernel), dtype)
    return nn.conv2d(
        data, weight, strides=(stride, stride), padding=(pad, pad), groups=groups,
        channels=channels, kernel_size=(kernel, kernel),
    )  # fmt: skip


def batch_norm(data: Expr, channels: int, name: str, dtype: str, epsilon: float = 1e-5) -> Expr:
    """Batch normalization by ``<name>_gamma``, ``_beta``, ``_moving_mean`` and
    ``_moving_var``."""
    gamma, beta, mean, variance = (
        param(f"{name}_{p}", (channels,), dtype)
        for p in ("gamma", "beta", "moving_mean", "moving_var")
    )
    return nn.batch_norm(data, gamma, beta, mean, variance, epsilon=epsilon)[0]


def dense(data: Expr, in_features: int, units: int, name: str, dtype: str) -> Expr:
    """A dense layer by ``<name>_weight`` plus ``<name>_bias``."""
    weight = param(f"{name}_weight", (units, in_features), dtype)
    bias = param(f"{name}_bias", (units,), dtype)
    return nn.bias_add(nn.dense(data, weight, units=units), bias, axis=-1)
