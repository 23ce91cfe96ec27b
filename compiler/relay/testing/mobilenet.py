"""MobileNet (v1) as TVM's ``relay.testing.mobilenet`` builds it: depthwise separable blocks.

Compiler layer (``compiler.relay``). A 3x3 stride-2 convolution of 32 channels, then
thirteen blocks of a 3x3 depthwise convolution and a 1x1 convolution, each followed by batch
norm and relu, five of them halving the image; global average pool, a dense layer, softmax.
``alpha`` scales every layer's channels.
"""

from __future__ import annotations

import numpy as np

from compiler.ir.expr import Expr, Function, var
from compiler.ir.module import IRModule
from compiler.ir.visitor import free_vars
from compiler.op import nn
from compiler.relay.testing.init import create_workload
from compiler.relay.testing.layers import batch_norm, conv2d, dense

__all__ = ["get_net", "get_workload"]

#: (output channels, stride) of the separable blocks, at ``alpha`` 1.
BLOCKS = (
    (64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2),
    (512, 1), (512, 1), (512, 1), (512, 1), (512, 1), (1024, 2), (1024, 1),
)  # fmt: skip


def _conv_bn_relu(
    data: Expr, in_channels: int, channels: int, kernel: int, stride: int, groups: int,
    name: str, dtype: str, layout: str,
) -> Expr:  # fmt: skip
    out = conv2d(
        data, in_channels, channels, kernel, name, dtype, stride=stride, groups=groups,
        layout=layout,
    )  # fmt: skip
    return nn.relu(batch_norm(out, channels, f"{name}_bn", dtype, axis=layout.index("C")))


def get_net(
    batch_size: int,
    num_classes: int = 1000,
    image_shape: tuple[int, int, int] = (3, 224, 224),
    dtype: str = "float32",
    layout: str = "NCHW",
    alpha: float = 1.0,
) -> Function:
    """The network as a Relay function of ``data`` and its weights.

    Parameters
    ----------
    batch_size : int
        Images per call.
    num_classes : int
        Outputs per image.
    image_shape : tuple of int
        ``(channels, height, width)`` of one image; ``(height, width, channels)`` for NHWC.
    dtype : str
        The data's and the weights' dtype.
    layout : str
        ``"NCHW"``, or ``"NHWC"`` (HWIO weights, HWOI for the depthwise ones, as TVM
        builds it).
    alpha : float
        Width multiplier of every layer.

    Raises
    ------
    ValueError
        For another layout, or an ``alpha`` that leaves a layer without channels.
    """
    if layout not in ("NCHW", "NHWC"):
        raise ValueError(f"layout {layout!r} is not supported: 'NCHW' or 'NHWC'")
    if int(32 * alpha) < 1:
        raise ValueError(f"alpha {alpha} leaves the first layer without channels")
    data = var("data", shape=(batch_size, *image_shape), dtype=dtype)
    channels = int(32 * alpha)
    image_channels = image_shape[0] if layout == "NCHW" else image_shape[2]
    body = _conv_bn_relu(data, image_channels, channels, 3, 2, 1, "conv0", dtype, layout)
    for i, (width, stride) in enumerate(BLOCKS, start=1):
        out_channels = int(width * alpha)
        body = _conv_bn_relu(
            body, channels, channels, 3, stride, channels, f"separable{i}_depthwise", dtype,
            layout,
        )  # fmt: skip
        body = _conv_bn_relu(
            body, channels, out_channels, 1, 1, 1, f"separable{i}_pointwise", dtype, layout
        )
        channels = out_channels
    body = nn.batch_flatten(nn.global_avg_pool2d(body, layout=layout))
    out = nn.softmax(dense(body, channels, num_classes, "fc", dtype), axis=1)
    return Function(free_vars(out), out)


def get_workload(
    batch_size: int = 1,
    num_classes: int = 1000,
    image_shape: tuple[int, int, int] = (3, 224, 224),
    dtype: str = "float32",
    layout: str = "NCHW",
) -> tuple[IRModule, dict[str, np.ndarray]]:
    """The network's module and its weights (see :func:`get_net` and
    :func:`compiler.relay.testing.create_workload`)."""
    return create_workload(get_net(batch_size, num_classes, image_shape, dtype, layout))
