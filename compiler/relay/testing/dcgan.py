"""The DCGAN generator as TVM's ``relay.testing.dcgan`` builds it: a random code to a 64x64
image.

Compiler layer (``compiler.relay``). The code (``data``, ``random_len`` numbers per image)
goes through a dense layer without bias and relu, is reshaped to ``8 * ngf`` maps of 4x4,
and grows by three 4x4 stride-2 transposed convolutions (to ``4 * ngf``, ``2 * ngf`` and
``ngf`` maps of 8x8, 16x16 and 32x32), each followed by batch norm without scale and relu;
a fourth makes the 64x64 image, which tanh squashes into ``[-1, 1]``.
"""

from __future__ import annotations

import numpy as np

from compiler.ir.expr import Expr, Function, var
from compiler.ir.module import IRModule
from compiler.ir.visitor import free_vars
from compiler.op import api, nn
from compiler.relay.testing.init import create_workload
from compiler.relay.testing.layers import batch_norm, conv2d_transpose, param

__all__ = ["get_net", "get_workload"]

#: The side of the generated image and of the maps the dense layer's output is cut into.
IMAGE_SIDE = 64
CODE_SIDE = 4
#: Every transposed convolution's kernel side and stride.
KERNEL = 4
STRIDE = 2
#: TVM's batch-norm epsilon here: the default plus 1e-12, from the MXNet generator it ports.
EPSILON = 1e-5 + 1e-12


def _deconv(data: Expr, in_channels: int, channels: int, side: int, name: str, dtype: str) -> Expr:
    """A transposed convolution that doubles the ``side`` of the map: padded by half the
    kernel less one, with the output padding that lands the size exactly."""
    pad = (KERNEL - 1) // 2
    target = STRIDE * side
    adjust = (target + 2 * pad - KERNEL) % STRIDE
    return conv2d_transpose(
        data, in_channels, channels, KERNEL, name, dtype, stride=STRIDE, padding=pad,
        output_padding=adjust,
    )  # fmt: skip


def get_net(
    batch_size: int,
    random_len: int = 100,
    oshape: tuple[int, int, int] = (3, 64, 64),
    ngf: int = 128,
    code: Expr | None = None,
    layout: str = "NCHW",
    dtype: str = "float32",
) -> Function:
    """The generator as a Relay function of ``data`` (or of ``code``'s free variables) and
    its weights.

    Parameters
    ----------
    batch_size : int
        Images per call.
    random_len : int
        Numbers in each image's random code.
    oshape : tuple of int
        ``(channels, 64, 64)``: one image.
    ngf : int
        Maps of the last hidden layer (the earlier ones have two, four and eight times as
        many).
    code : Expr, optional
        The ``(batch_size, random_len)`` codes; a ``data`` variable when None.
    layout : str
        Only ``"NCHW"`` (relayvm's transposed convolution has no NHWC kernel).
    dtype : str
        The code's and the weights' dtype.

    Raises
    ------
    ValueError
        For an image other than 64x64, or another layout.
    """
    if tuple(oshape[-2:]) != (IMAGE_SIDE, IMAGE_SIDE):
        raise ValueError(
            f"oshape {tuple(oshape)} is not supported: the DCGAN generator makes "
            f"{IMAGE_SIDE}x{IMAGE_SIDE} images, oshape must be (channels, {IMAGE_SIDE}, "
            f"{IMAGE_SIDE})"
        )
    if layout != "NCHW":
        raise ValueError(
            f"layout {layout!r} is not supported: relayvm's DCGAN is NCHW, layout must be 'NCHW'"
        )
    if code is None:
        code = var("data", shape=(batch_size, random_len), dtype=dtype)
    channels = 8 * ngf
    weight = param("dense_weight", (CODE_SIDE * CODE_SIDE * channels, random_len), dtype)
    body: Expr = nn.relu(nn.dense(code, weight, units=CODE_SIDE * CODE_SIDE * channels))
    body = api.reshape(body, (-1, channels, CODE_SIDE, CODE_SIDE))
    side = CODE_SIDE
    for stage in (2, 3, 4):
        prefix = f"g{stage}"
        body = _deconv(body, channels, channels // 2, side, f"{prefix}_deconv", dtype)
        body = batch_norm(
            body, channels // 2, f"{prefix}_batch_norm", dtype, epsilon=EPSILON, scale=False
        )
        body = nn.relu(body)
        channels, side = channels // 2, side * STRIDE
    out = api.tanh(_deconv(body, channels, oshape[0], side, "g5_deconv", dtype))
    return Function(free_vars(out), out)


def get_workload(
    batch_size: int,
    oshape: tuple[int, int, int] = (3, 64, 64),
    ngf: int = 128,
    random_len: int = 100,
    layout: str = "NCHW",
    dtype: str = "float32",
) -> tuple[IRModule, dict[str, np.ndarray]]:
    """The generator's module and its weights (see :func:`get_net` and
    :func:`compiler.relay.testing.create_workload`)."""
    net = get_net(batch_size, random_len, oshape=oshape, ngf=ngf, layout=layout, dtype=dtype)
    return create_workload(net)
