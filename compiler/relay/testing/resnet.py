"""ResNet as TVM's ``relay.testing.resnet`` builds it: pre-activation residual units.

Compiler layer (``compiler.relay``). Each unit normalizes and activates its input before
each convolution (batch norm, relu, conv), and adds its input, or a 1x1 projection of the
activated input where the shape changes. ResNet-18 and 34 use units of two 3x3
convolutions; 50, 101 and 152 bottleneck units (1x1, 3x3, 1x1 with four times fewer
channels inside). Images of at most 32 pixels start with a 3x3 convolution and no pooling,
larger ones with a 7x7 stride-2 convolution and a 3x3 stride-2 max pool. The head: batch
norm, relu, global average pool, a dense layer, softmax.
"""

from __future__ import annotations

import numpy as np

from compiler.ir.expr import Expr, Function, const, var
from compiler.ir.module import IRModule
from compiler.ir.visitor import free_vars
from compiler.op import nn
from compiler.relay.testing.init import create_workload
from compiler.relay.testing.layers import batch_norm, conv2d, dense, param

__all__ = ["get_net", "get_workload"]

#: Residual units per stage, by depth.
UNITS = {
    18: (2, 2, 2, 2),
    34: (3, 4, 6, 3),
    50: (3, 4, 6, 3),
    101: (3, 4, 23, 3),
    152: (3, 8, 36, 3),
}


class _Builder:
    """Makes the layers, each weight a parameter typed from the channels it reads."""

    def __init__(self, dtype: str, layout: str) -> None:
        self.dtype = dtype
        self.layout = layout
        self.axis = layout.index("C")

    def bn_relu(self, data: Expr, channels: int, name: str) -> Expr:
        return nn.relu(batch_norm(data, channels, name, self.dtype, epsilon=2e-5, axis=self.axis))

    def conv(
        self, data: Expr, in_channels: int, channels: int, kernel: int, stride: int, name: str
    ) -> Expr:
        return conv2d(
            data, in_channels, channels, kernel, name, self.dtype, stride=stride,
            layout=self.layout,
        )  # fmt: skip

    def unit(
        self, data: Expr, in_channels: int, channels: int, stride: int, bottleneck: bool, name: str
    ) -> Expr:
        act = self.bn_relu(data, in_channels, f"{name}_bn1")
        if bottleneck:
            inner = channels // 4
            body = self.conv(act, in_channels, inner, 1, stride, f"{name}_conv1")
            body = self.bn_relu(body, inner, f"{name}_bn2")
            body = self.conv(body, inner, inner, 3, 1, f"{name}_conv2")
            body = self.bn_relu(body, inner, f"{name}_bn3")
            body = self.conv(body, inner, channels, 1, 1, f"{name}_conv3")
        else:
            body = self.conv(act, in_channels, channels, 3, stride, f"{name}_conv1")
            body = self.bn_relu(body, channels, f"{name}_bn2")
            body = self.conv(body, channels, channels, 3, 1, f"{name}_conv2")
        if stride == 1 and in_channels == channels:
            return body + data
        return body + self.conv(act, in_channels, channels, 1, stride, f"{name}_sc")


def get_net(
    batch_size: int,
    num_classes: int,
    num_layers: int = 50,
    image_shape: tuple[int, int, int] = (3, 224, 224),
    layout: str = "NCHW",
    dtype: str = "float32",
) -> Function:
    """The network as a Relay function of ``data`` and its weights.

    Parameters
    ----------
    batch_size : int
        Images per call.
    num_classes : int
        Outputs per image.
    num_layers : int
        18, 34, 50, 101 or 152.
    image_shape : tuple of int
        ``(channels, height, width)`` of one image; ``(height, width, channels)`` for NHWC.
    layout : str
        ``"NCHW"``, or ``"NHWC"`` (HWIO weights, as TVM builds it).
    dtype : str
        The data's and the weights' dtype.

    Raises
    ------
    ValueError
        For another depth or layout.
    """
    if num_layers not in UNITS:
        raise ValueError(
            f"no ResNet of {num_layers} layers: num_layers must be one of "
            f"{', '.join(map(str, UNITS))}"
        )
    if layout not in ("NCHW", "NHWC"):
        raise ValueError(f"layout {layout!r} is not supported: 'NCHW' or 'NHWC'")
    bottleneck = num_layers >= 50
    widths = (64, 256, 512, 1024, 2048) if bottleneck else (64, 64, 128, 256, 512)
    build = _Builder(dtype, layout)
    image_channels, height = (
        (image_shape[0], image_shape[1]) if layout == "NCHW" else (image_shape[2], image_shape[0])
    )
    data = var("data", shape=(batch_size, *image_shape), dtype=dtype)
    # The input's own normalization keeps gamma at one, as TVM's does.
    beta, mean, variance = (
        param(f"bn_data_{p}", (image_channels,), dtype)
        for p in ("beta", "moving_mean", "moving_var")
    )
    ones = const(np.ones(image_channels, dtype))
    body = nn.batch_norm(
        data, ones, beta, mean, variance, axis=build.axis, epsilon=2e-5, scale=False
    )[0]
    if height <= 32:
        body = build.conv(body, image_channels, widths[0], 3, 1, "conv0")
    else:
        body = build.conv(body, image_channels, widths[0], 7, 2, "conv0")
        body = build.bn_relu(body, widths[0], "bn0")
        body = nn.max_pool2d(body, pool_size=(3, 3), strides=(2, 2), padding=(1, 1), layout=layout)
    channels = widths[0]
    for stage, units in enumerate(UNITS[num_layers]):
        for unit in range(units):
            stride = 2 if stage > 0 and unit == 0 else 1
            name = f"stage{stage + 1}_unit{unit + 1}"
            body = build.unit(body, channels, widths[stage + 1], stride, bottleneck, name)
            channels = widths[stage + 1]
    pooled = nn.global_avg_pool2d(build.bn_relu(body, channels, "bn1"), layout=layout)
    body = nn.batch_flatten(pooled)
    out = nn.softmax(dense(body, channels, num_classes, "fc1", dtype), axis=1)
    return Function(free_vars(out), out)


def get_workload(
    batch_size: int = 1,
    num_classes: int = 1000,
    num_layers: int = 18,
    image_shape: tuple[int, int, int] = (3, 224, 224),
    layout: str = "NCHW",
    dtype: str = "float32",
) -> tuple[IRModule, dict[str, np.ndarray]]:
    """The network's module and its weights (see :func:`get_net` and
    :func:`compiler.relay.testing.create_workload`)."""
    net = get_net(batch_size, num_classes, num_layers, image_shape, layout, dtype)
    return create_workload(net)
