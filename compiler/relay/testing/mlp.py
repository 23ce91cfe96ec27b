"""A multilayer perceptron as TVM's ``relay.testing.mlp`` builds it.

Compiler layer (``compiler.relay``): the image flattened, dense layers of 128 and 64 units
with relu, a dense layer of ``num_classes`` units, softmax.
"""

from __future__ import annotations

import numpy as np

from compiler.ir.expr import Function, var
from compiler.ir.module import IRModule
from compiler.ir.visitor import free_vars
from compiler.op import nn
from compiler.relay.testing.init import create_workload
from compiler.relay.testing.layers import dense

__all__ = ["get_net", "get_workload"]


def get_net(
    batch_size: int,
    num_classes: int = 10,
    image_shape: tuple[int, ...] = (1, 28, 28),
    dtype: str = "float32",
) -> Function:
    """The network as a Relay function of ``data`` and its weights.

    Parameters
    ----------
    batch_size : int
        Images per call.
    num_classes : int
        Outputs per image.
    image_shape : tuple of int
        The shape of one image.
    dtype : str
        The data's and the weights' dtype.
    """
    data = var("data", shape=(batch_size, *image_shape), dtype=dtype)
    features = int(np.prod(image_shape))
    hidden = nn.relu(dense(nn.batch_flatten(data), features, 128, "fc1", dtype))
    hidden = nn.relu(dense(hidden, 128, 64, "fc2", dtype))
    logits = dense(hidden, 64, num_classes, "fc3", dtype)
    out = nn.softmax(logits, axis=1)
    return Function(free_vars(out), out)


def get_workload(
    batch_size: int,
    num_classes: int = 10,
    image_shape: tuple[int, ...] = (1, 28, 28),
    dtype: str = "float32",
) -> tuple[IRModule, dict[str, np.ndarray]]:
    """The network's module and its weights (see :func:`get_net` and
    :func:`compiler.relay.testing.create_workload`)."""
    return create_workload(get_net(batch_size, num_classes, image_shape, dtype))
