"""VGG as TVM's ``relay.testing.vgg`` builds it: stages of 3x3 convolutions, then three
dense layers.

Compiler layer (``compiler.relay``). Five stages of 3x3 convolutions (each followed by
batch norm when asked, and relu), each stage ending in a 2x2 stride-2 max pool; the
flattened features go through dense layers of 4096, 4096 and ``num_classes`` units (relu
and dropout after the first two), then softmax.
"""

from __future__ import annotations

import numpy as np

from compiler.ir.expr import Function, var
from compiler.ir.module import IRModule
from compiler.ir.visitor import free_vars
from compiler.op import nn
from compiler.relay.testing.init import create_workload
from compiler.relay.testing.layers import batch_norm as batch_norm_layer
from compiler.relay.testing.layers import conv2d, dense

__all__ = ["get_net", "get_workload"]

#: Convolutions per stage, by depth; the stages have 64, 128, 256, 512 and 512 channels.
LAYERS = {11: (1, 1, 2, 2, 2), 13: (2, 2, 2, 2, 2), 16: (2, 2, 3, 3, 3), 19: (2, 2, 4, 4, 4)}
WIDTHS = (64, 128, 256, 512, 512)


def get_net(
    batch_size: int,
    num_classes: int,
    image_shape: tuple[int, int, int],
    dtype: str,
    num_layers: int = 11,
    batch_norm: bool = False,
) -> Function:
    """The network as a Relay function of ``data`` and its weights.

    Parameters
    ----------
    batch_size : int
        Images per call.
    num_classes : int
        Outputs per image.
    image_shape : tuple of int
        ``(channels, height, width)`` of one image; height and width divisible by 32.
    dtype : str
        The data's and the weights' dtype.
    num_layers : int
        11, 13, 16 or 19.
    batch_norm : bool
        Normalize after each convolution.

    Raises
    ------
    ValueError
        For another depth, or an image the five pools cannot halve.
    """
    if num_layers not in LAYERS:
        raise ValueError(
            f"no VGG of {num_layers} layers: num_layers must be one of "
            f"{', '.join(map(str, LAYERS))}"
        )
    channels, height, width = image_shape
    if height % 32 or width % 32:
        raise ValueError(
            f"VGG halves the image five times: {height}x{width} is not a multiple of 32"
        )
    body = var("data", shape=(batch_size, *image_shape), dtype=dtype)
    for stage, (count, out_channels) in enumerate(zip(LAYERS[num_layers], WIDTHS), start=1):
        for layer in range(1, count + 1):
            name = f"conv{stage}_{layer}"
            body = conv2d(body, channels, out_channels, 3, name, dtype)
            if batch_norm:
                body = batch_norm_layer(body, out_channels, f"{name}_bn", dtype)
            body = nn.relu(body)
            channels = out_channels
        body = nn.max_pool2d(body, pool_size=(2, 2), strides=(2, 2))
    features = channels * (height // 32) * (width // 32)
    body = nn.batch_flatten(body)
    body = nn.dropout(nn.relu(dense(body, features, 4096, "fc6", dtype)))
    body = nn.dropout(nn.relu(dense(body, 4096, 4096, "fc7", dtype)))
    out = nn.softmax(dense(body, 4096, num_classes, "fc8", dtype), axis=1)
    return Function(free_vars(out), out)


def get_workload(
    batch_size: int = 1,
    num_classes: int = 1000,
    image_shape: tuple[int, int, int] = (3, 224, 224),
    dtype: str = "float32",
    num_layers: int = 11,
    batch_norm: bool = False,
) -> tuple[IRModule, dict[str, np.ndarray]]:
    """The network's module and its weights (see :func:`get_net` and
    :func:`compiler.relay.testing.create_workload`)."""
    net = get_net(batch_size, num_classes, image_shape, dtype, num_layers, batch_norm)
    return create_workload(net)
