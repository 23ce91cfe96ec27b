"""Inception v3 as TVM's ``relay.testing.inception_v3`` builds it, for 299x299 images.

Compiler layer (``compiler.relay``). Every convolution is followed by batch norm and relu.
A stem of 3x3 convolutions (32 channels at stride 2, 32, 64 padded) and a 3x3 stride-2 max
pool, a 1x1 convolution to 80 and a 3x3 one to 192 channels and another max pool; then
eleven inception modules whose parallel towers are concatenated: three with 5x5 and double
3x3 towers (35x35), one that halves the map, four whose towers factor 7x7 into 1x7 and 7x1
convolutions (17x17), one that halves again, and two that split their 3x3 towers into 1x3
and 3x1 convolutions (8x8). The pool towers average (counting the padding) but for the
halving modules' and the last module's, which take the maximum. The head: an 8x8 average
pool, flatten, a dense layer, softmax.

The parameters have TVM's names, including its head's: ``fc1_weight`` and ``fc2_bias``.
"""

from __future__ import annotations

import numpy as np

from compiler.ir.expr import Expr, Function, var
from compiler.ir.module import IRModule
from compiler.ir.visitor import free_vars
from compiler.op import api, nn
from compiler.relay.testing.init import create_workload
from compiler.relay.testing.layers import Pair, batch_norm, conv2d, param

__all__ = ["get_net", "get_workload"]

#: The head's average pool (stride 1): the last map must be at least this wide, which
#: images of at least ``SMALLEST_SIDE`` pixels a side leave.
HEAD_POOL = 8
SMALLEST_SIDE = 299


class _Builder:
    """Makes the convolutions, each followed by batch norm and relu, with channel counts
    scaled by ``alpha``; a tensor travels with its channel count."""

    def __init__(self, dtype: str, alpha: float) -> None:
        self.dtype = dtype
        self.alpha = alpha

    def conv(
        self,
        data: tuple[Expr, int],
        channels: int,
        name: str,
        kernel: Pair = 1,
        stride: int = 1,
        padding: Pair = 0,
    ) -> tuple[Expr, int]:
        body, in_channels = data
        width = int(channels * self.alpha)
        if width < 1:
            raise ValueError(f"alpha {self.alpha} leaves layer {name!r} without channels")
        out = conv2d(body, in_channels, width, kernel, f"{name}_conv1", self.dtype, stride, padding)
        out = batch_norm(out, width, f"{name}_bn", self.dtype, epsilon=2e-5)
        return nn.relu(out), width

    @staticmethod
    def pool(data: tuple[Expr, int], kind: str, stride: int, padding: int) -> tuple[Expr, int]:
        body, channels = data
        size, strides = (3, 3), (stride, stride)
        if kind == "max":
            return nn.max_pool2d(body, size, strides, padding=padding), channels
        # TVM's (and MXNet's) average counts the padding in the divisor.
        pooled = nn.avg_pool2d(body, size, strides, padding=padding, count_include_pad=True)
        return pooled, channels

    @staticmethod
    def concat(*towers: tuple[Expr, int]) -> tuple[Expr, int]:
        body = api.concatenate([tower for tower, _ in towers], axis=1)
        return body, sum(channels for _, channels in towers)

    def module_a(
        self, data: tuple[Expr, int], widths: tuple[int, ...], pool: str, name: str
    ) -> tuple[Expr, int]:
        """Towers of 1x1; 1x1 then 5x5; 1x1 then two 3x3; a pool then 1x1."""
        one, red3, c3a, c3b, red5, c5, proj = widths
        tower5 = self.conv(data, red5, f"{name}_tower_conv")
        tower3 = self.conv(data, red3, f"{name}_tower_1_conv")
        tower3 = self.conv(tower3, c3a, f"{name}_tower_1_conv_1", 3, padding=1)
        return self.concat(
            self.conv(data, one, f"{name}_conv"),
            self.conv(tower5, c5, f"{name}_tower_conv_1", 5, padding=2),
            self.conv(tower3, c3b, f"{name}_tower_1_conv_2", 3, padding=1),
            self.conv(self.pool(data, pool, 1, 1), proj, f"{name}_tower_2_conv"),
        )

    def module_b(
        self, data: tuple[Expr, int], widths: tuple[int, ...], name: str
    ) -> tuple[Expr, int]:
        """Halves the map: a 3x3 stride-2 tower; 1x1, 3x3, 3x3 stride 2; a max pool."""
        c3, red, d3a, d3b = widths
        tower = self.conv(data, red, f"{name}_tower_conv")
        tower = self.conv(tower, d3a, f"{name}_tower_conv_1", 3, padding=1)
        return self.concat(
            self.conv(data, c3, f"{name}_conv", 3, stride=2),
            self.conv(tower, d3b, f"{name}_tower_conv_2", 3, stride=2),
            self.pool(data, "max", 2, 0),
        )

    def module_c(
        self, data: tuple[Expr, int], widths: tuple[int, ...], pool: str, name: str
    ) -> tuple[Expr, int]:
        """Towers of 1x1; 1x1, 1x7, 7x1; 1x1, 7x1, 1x7, 7x1, 1x7; a pool then 1x1."""
        one, red7, d7a, d7b, redq, q7a, q7b, q7c, q7d, proj = widths
        tower = self.conv(data, red7, f"{name}_tower_conv")
        tower = self.conv(tower, d7a, f"{name}_tower_conv_1", (1, 7), padding=(0, 3))
        tower = self.conv(tower, d7b, f"{name}_tower_conv_2", (7, 1), padding=(3, 0))
        tower1 = self.conv(data, redq, f"{name}_tower_1_conv")
        for step, channels in enumerate((q7a, q7b, q7c, q7d), start=1):
            kernel, padding = ((7, 1), (3, 0)) if step % 2 else ((1, 7), (0, 3))
            tower1 = self.conv(tower1, channels, f"{name}_tower_1_conv_{step}", kernel, 1, padding)
        return self.concat(
            self.conv(data, one, f"{name}_conv"),
            tower,
            tower1,
            self.conv(self.pool(data, pool, 1, 1), proj, f"{name}_tower_2_conv"),
        )

    def module_d(
        self, data: tuple[Expr, int], widths: tuple[int, ...], name: str
    ) -> tuple[Expr, int]:
        """Halves the map: 1x1 then 3x3 stride 2; 1x1, 1x7, 7x1, 3x3 stride 2; a max pool."""
        red3, c3, red7, d7a, d7b, d7c = widths
        tower = self.conv(data, red3, f"{name}_tower_conv")
        tower1 = self.conv(data, red7, f"{name}_tower_1_conv")
        tower1 = self.conv(tower1, d7a, f"{name}_tower_1_conv_1", (1, 7), padding=(0, 3))
        tower1 = self.conv(tower1, d7b, f"{name}_tower_1_conv_2", (7, 1), padding=(3, 0))
        return self.concat(
            self.conv(tower, c3, f"{name}_tower_conv_1", 3, stride=2),
            self.conv(tower1, d7c, f"{name}_tower_1_conv_3", 3, stride=2),
            self.pool(data, "max", 2, 0),
        )

    def module_e(
        self, data: tuple[Expr, int], widths: tuple[int, ...], pool: str, name: str
    ) -> tuple[Expr, int]:
        """Towers of 1x1; 1x1 then 1x3 and 3x1 side by side; 1x1, 3x3, then 1x3 and 3x1
        side by side; a pool then 1x1."""
        one, red3, d3a, d3b, red33, c33, d33a, d33b, proj = widths
        tower = self.conv(data, red3, f"{name}_tower_conv")
        tower1 = self.conv(data, red33, f"{name}_tower_1_conv")
        tower1 = self.conv(tower1, c33, f"{name}_tower_1_conv_1", 3, padding=1)
        return self.concat(
            self.conv(data, one, f"{name}_conv"),
            self.conv(tower, d3a, f"{name}_tower_mixed_conv", (1, 3), padding=(0, 1)),
            self.conv(tower, d3b, f"{name}_tower_mixed_conv_1", (3, 1), padding=(1, 0)),
            self.conv(tower1, d33a, f"{name}_tower_1_mixed_conv", (1, 3), padding=(0, 1)),
            self.conv(tower1, d33b, f"{name}_tower_1_mixed_conv_1", (3, 1), padding=(1, 0)),
            self.conv(self.pool(data, pool, 1, 1), proj, f"{name}_tower_2_conv"),
        )


def _map_side(side: int) -> int:
    """The side of the map the head pools, from the image's: the stem's unpadded 3x3
    convolutions and pools and the two halving modules shrink it."""
    side = (side - 3) // 2 + 1 - 2  # conv (stride 2), conv_1
    side = (side - 3) // 2 + 1 - 2  # pool, conv_4
    for _ in range(3):  # pool1, then the two halving modules
        side = (side - 3) // 2 + 1
    return side


def get_net(
    batch_size: int,
    num_classes: int,
    image_shape: tuple[int, int, int],
    dtype: str,
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
        ``(channels, height, width)`` of one image, at least 299 pixels high and wide.
    dtype : str
        The data's and the weights' dtype.
    alpha : float
        Width multiplier of every convolution (not TVM's; for small test networks).

    Raises
    ------
    ValueError
        For an image too small for the head's 8x8 average pool, or an ``alpha`` that
        leaves a layer without channels.
    """
    channels, height, width = image_shape
    if min(height, width) < SMALLEST_SIDE:
        raise ValueError(
            f"image_shape {tuple(image_shape)} leaves a {_map_side(height)}x"
            f"{_map_side(width)} map for the head's {HEAD_POOL}x{HEAD_POOL} average pool: "
            f"height and width must be at least {SMALLEST_SIDE}"
        )
    build = _Builder(dtype, alpha)
    data = var("data", shape=(batch_size, *image_shape), dtype=dtype)
    body = build.conv((data, channels), 32, "conv", 3, stride=2)
    body = build.conv(body, 32, "conv_1", 3)
    body = build.conv(body, 64, "conv_2", 3, padding=1)
    body = build.pool(body, "max", 2, 0)
    body = build.conv(body, 80, "conv_3")
    body = build.conv(body, 192, "conv_4", 3)
    body = build.pool(body, "max", 2, 0)
    body = build.module_a(body, (64, 64, 96, 96, 48, 64, 32), "avg", "mixed")
    body = build.module_a(body, (64, 64, 96, 96, 48, 64, 64), "avg", "mixed_1")
    body = build.module_a(body, (64, 64, 96, 96, 48, 64, 64), "avg", "mixed_2")
    body = build.module_b(body, (384, 64, 96, 96), "mixed_3")
    for index, middle in ((4, 128), (5, 160), (6, 160), (7, 192)):
        widths = (192, middle, middle, 192, middle, middle, middle, middle, 192, 192)
        body = build.module_c(body, widths, "avg", f"mixed_{index}")
    body = build.module_d(body, (192, 320, 192, 192, 192, 192), "mixed_8")
    last_widths = (320, 384, 384, 384, 448, 384, 384, 384, 192)
    body = build.module_e(body, last_widths, "avg", "mixed_9")
    features, channels = build.module_e(body, last_widths, "max", "mixed_10")
    features = nn.avg_pool2d(features, pool_size=(HEAD_POOL, HEAD_POOL), count_include_pad=True)
    pooled = (_map_side(height) - HEAD_POOL + 1) * (_map_side(width) - HEAD_POOL + 1)
    weight = param("fc1_weight", (num_classes, channels * pooled), dtype)
    bias = param("fc2_bias", (num_classes,), dtype)
    logits = nn.bias_add(
        nn.dense(nn.batch_flatten(features), weight, units=num_classes), bias, axis=-1
    )
    out = nn.softmax(logits, axis=1)
    return Function(free_vars(out), out)


def get_workload(
    batch_size: int = 1,
    num_classes: int = 1000,
    image_shape: tuple[int, int, int] = (3, 299, 299),
    dtype: str = "float32",
) -> tuple[IRModule, dict[str, np.ndarray]]:
    """The network's module and its weights (see :func:`get_net` and
    :func:`compiler.relay.testing.create_workload`)."""
    return create_workload(get_net(batch_size, num_classes, image_shape, dtype))
