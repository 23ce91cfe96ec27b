"""SqueezeNet 1.0 and 1.1 as TVM's ``relay.testing.squeezenet`` builds them: fire modules.

Compiler layer (``compiler.relay``). A fire module squeezes its input to a few channels
with a 1x1 convolution and relu, then expands it with a 1x1 and a 3x3 convolution (relu
each) whose outputs are concatenated. Version 1.0 starts with a 7x7 stride-2 convolution
of 96 channels, 1.1 with a 3x3 one of 64; max pools of 3x3 stride 2 sit between groups of
fire modules. The head: dropout, a 1x1 convolution to ``num_classes`` channels and relu,
global average pool, softmax.
"""

from __future__ import annotations

import numpy as np

from compiler.ir.expr import Expr, Function, var
from compiler.ir.module import IRModule
from compiler.ir.visitor import free_vars
from compiler.op import api, nn
from compiler.relay.testing.init import create_workload
from compiler.relay.testing.layers import conv2d

__all__ = ["get_net", "get_workload"]

#: Per version: the stem's (channels, kernel), then the fire modules' squeeze widths
#: (each expands to four times as many channels per branch), "pool" where a max pool sits.
PLANS: dict[str, tuple[tuple[int, int], tuple[int | str, ...]]] = {
    "1.0": ((96, 7), ("pool", 16, 16, 32, "pool", 32, 48, 48, 64, "pool", 64)),
    "1.1": ((64, 3), ("pool", 16, 16, "pool", 32, 32, "pool", 48, 48, 64, 64)),
}


def _fire(data: Expr, in_channels: int, squeeze: int, name: str, dtype: str) -> Expr:
    expand = 4 * squeeze
    body = nn.relu(conv2d(data, in_channels, squeeze, 1, f"{name}_squeeze1x1", dtype))
    left = nn.relu(conv2d(body, squeeze, expand, 1, f"{name}_expand1x1", dtype))
    right = nn.relu(conv2d(body, squeeze, expand, 3, f"{name}_expand3x3", dtype))
    return api.concatenate([left, right], axis=1)


def get_net(
    batch_size: int,
    image_shape: tuple[int, int, int],
    num_classes: int,
    version: str,
    dtype: str,
) -> Function:
    """The network as a Relay function of ``data`` and its weights.

    Parameters
    ----------
    batch_size : int
        Images per call.
    image_shape : tuple of int
        ``(channels, height, width)`` of one image.
    num_classes : int
        Outputs per image.
    version : str
        ``"1.0"`` or ``"1.1"``.
    dtype : str
        The data's and the weights' dtype.

    Raises
    ------
    ValueError
        For another version.
    """
    if version not in PLANS:
        raise ValueError(f"no SqueezeNet {version!r}: version must be '1.0' or '1.1'")
    (stem_channels, stem_kernel), plan = PLANS[version]
    data = var("data", shape=(batch_size, *image_shape), dtype=dtype)
    body = conv2d(data, image_shape[0], stem_channels, stem_kernel, "conv1", dtype, 2, 0)
    body = nn.relu(body)
    channels, fire = stem_channels, 0
    for step in plan:
        if step == "pool":
            body = nn.max_pool2d(body, pool_size=(3, 3), strides=(2, 2))
            continue
        fire += 1
        body = _fire(body, channels, int(step), f"fire{fire}", dtype)
        channels = 8 * int(step)
    body = nn.dropout(body)
    body = nn.relu(conv2d(body, channels, num_classes, 1, "conv10", dtype))
    out = nn.softmax(nn.batch_flatten(nn.global_avg_pool2d(body)), axis=1)
    return Function(free_vars(out), out)


def get_workload(
    batch_size: int = 1,
    num_classes: int = 1000,
    version: str = "1.0",
    image_shape: tuple[int, int, int] = (3, 224, 224),
    dtype: str = "float32",
) -> tuple[IRModule, dict[str, np.ndarray]]:
    """The network's module and its weights (see :func:`get_net` and
    :func:`compiler.relay.testing.create_workload`)."""
    net = get_net(batch_size, image_shape, num_classes, version, dtype)
    return create_workload(net)
