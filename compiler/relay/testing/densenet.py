"""DenseNet-121, 161, 169 and 201 as TVM's ``relay.testing.densenet`` builds them.

Compiler layer (``compiler.relay``). A 7x7 stride-2 convolution, batch norm, relu and a 3x3
stride-2 max pool; then dense blocks of layers (batch norm, relu, a 1x1 convolution to
``bn_size * growth_rate`` channels, batch norm, relu, a 3x3 convolution to ``growth_rate``)
whose outputs are concatenated, with a transition between blocks (batch norm, relu, a 1x1
convolution, a 2x2 stride-2 average pool). The head: batch norm, relu, a 7x7 average pool,
flatten and a dense layer, with no softmax (TVM's has none).

The connections are TVM's, not the DenseNet paper's: a layer reads only the layer before
it, a block's output concatenates its layers' outputs without the block's input, and a
transition narrows to half the paper's running feature count. The weights therefore have
the shapes of TVM's workload, not of a trained DenseNet.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from compiler.ir.expr import Expr, Function, var
from compiler.ir.module import IRModule
from compiler.ir.visitor import free_vars
from compiler.op import api, nn
from compiler.relay.testing.init import create_workload
from compiler.relay.testing.layers import batch_norm, conv2d, dense

__all__ = ["get_net", "get_workload"]

#: ``(num_init_features, growth_rate, layers per block)`` by size: TVM's table, whose 169
#: starts with 69 features where the paper has 64 (kept, so the weights match TVM's).
SPECS: dict[int, tuple[int, int, tuple[int, ...]]] = {
    121: (64, 32, (6, 12, 24, 16)),
    161: (96, 48, (6, 12, 36, 24)),
    169: (69, 32, (6, 12, 32, 32)),
    201: (64, 32, (6, 12, 48, 32)),
}

#: The head's average pool (stride 1): the last map must be at least this wide.
HEAD_POOL = 7


def _bn_relu(data: Expr, channels: int, name: str, dtype: str) -> Expr:
    return nn.relu(batch_norm(data, channels, name, dtype))


def _smallest_side(transitions: int) -> int:
    """The smallest image side that leaves a ``HEAD_POOL`` map: each transition's pool
    halves (rounding down), the stem's convolution and max pool halve rounding up."""
    side = HEAD_POOL * 2**transitions
    return 2 * (2 * side - 1) - 1


def get_net(
    num_init_features: int,
    growth_rate: int,
    block_config: Sequence[int],
    batch_size: int = 4,
    classes: int = 1000,
    image_shape: tuple[int, int, int] = (3, 224, 224),
    dtype: str = "float32",
    bn_size: int = 4,
) -> Function:
    """A DenseNet of any widths and depths as a Relay function of ``data`` and its weights
    (:func:`get_workload` takes the numbers of a named size from :data:`SPECS`).

    Parameters
    ----------
    num_init_features : int
        The stem convolution's channels.
    growth_rate : int
        The channels each dense layer adds.
    block_config : sequence of int
        Dense layers per block.
    batch_size : int
        Images per call.
    classes : int
        Outputs per image.
    image_shape : tuple of int
        ``(channels, height, width)`` of one image.
    dtype : str
        The data's and the weights' dtype.
    bn_size : int
        The 1x1 convolutions inside a dense layer have ``bn_size * growth_rate`` channels.

    Raises
    ------
    ValueError
        For an empty ``block_config`` or one with a block of no layers, or an
        ``image_shape`` too small for the head's 7x7 average pool.
    """
    blocks = tuple(int(count) for count in block_config)
    if not blocks or min(blocks) < 1:
        raise ValueError(
            f"block_config {tuple(block_config)} must list one or more blocks of at least one "
            "layer each"
        )
    channels, height, width = image_shape
    for _ in range(2):  # the stem's 7x7 stride-2 convolution, then its 3x3 stride-2 pool
        height, width = (height - 1) // 2 + 1, (width - 1) // 2 + 1
    transitions = len(blocks) - 1  # each halves, rounding down
    height, width = height >> transitions, width >> transitions
    if min(height, width) < HEAD_POOL:
        smallest = _smallest_side(transitions)
        raise ValueError(
            f"image_shape {tuple(image_shape)} leaves a {height}x{width} map for the head's "
            f"{HEAD_POOL}x{HEAD_POOL} average pool: with {len(blocks)} blocks, height and "
            f"width must be at least {smallest}"
        )
    inner = bn_size * growth_rate
    data = var("data", shape=(batch_size, *image_shape), dtype=dtype)
    body = conv2d(data, channels, num_init_features, 7, "conv1", dtype, stride=2, padding=3)
    body = _bn_relu(body, num_init_features, "batch1", dtype)
    body = nn.max_pool2d(body, pool_size=(3, 3), strides=(2, 2), padding=(1, 1))
    # ``channels`` is what the tensor has; ``features`` is the paper's running count, which
    # TVM's transitions take their width from.
    channels = features = num_init_features
    for block, count in enumerate(blocks):
        outputs = []
        for layer in range(count):
            index = f"{block}_{layer}"
            body = _bn_relu(body, channels, f"batch_1_{index}", dtype)
            body = conv2d(body, channels, inner, 1, f"conv2d_1_{index}", dtype)
            body = _bn_relu(body, inner, f"batch_2_{index}", dtype)
            body = conv2d(body, inner, growth_rate, 3, f"conv2d_2_{index}", dtype)
            channels = growth_rate
            outputs.append(body)
        body = api.concatenate(outputs, axis=1)
        channels = count * growth_rate
        features += count * growth_rate
        if block == len(blocks) - 1:
            break
        features //= 2
        body = _bn_relu(body, channels, f"batch_t_{block}", dtype)
        body = conv2d(body, channels, features, 1, f"conv_t_{block}", dtype)
        body = nn.avg_pool2d(body, pool_size=(2, 2), strides=(2, 2))
        channels = features
    body = _bn_relu(body, channels, "batch2", dtype)
    body = nn.batch_flatten(nn.avg_pool2d(body, pool_size=(HEAD_POOL, HEAD_POOL)))
    pooled = (height - HEAD_POOL + 1) * (width - HEAD_POOL + 1)
    out = dense(body, channels * pooled, classes, "dense", dtype)
    return Function(free_vars(out), out)


def get_workload(
    densenet_size: int = 121,
    classes: int = 1000,
    batch_size: int = 4,
    image_shape: tuple[int, int, int] = (3, 224, 224),
    dtype: str = "float32",
) -> tuple[IRModule, dict[str, np.ndarray]]:
    """DenseNet-``densenet_size``'s module and its weights (see :func:`get_net` and
    :func:`compiler.relay.testing.create_workload`).

    Parameters
    ----------
    densenet_size : int
        121, 161, 169 or 201.
    classes : int
        Outputs per image.
    batch_size : int
        Images per call.
    image_shape : tuple of int
        ``(channels, height, width)`` of one image, at least 221 pixels high and wide.
    dtype : str
        The data's and the weights' dtype.

    Raises
    ------
    ValueError
        For another size, or an image too small (see :func:`get_net`).
    """
    if densenet_size not in SPECS:
        raise ValueError(
            f"no DenseNet-{densenet_size}: densenet_size must be one of "
            f"{', '.join(map(str, SPECS))}"
        )
    num_init_features, growth_rate, blocks = SPECS[densenet_size]
    net = get_net(num_init_features, growth_rate, blocks, batch_size, classes, image_shape, dtype)
    return create_workload(net)
