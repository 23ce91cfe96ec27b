"""``ScalePackedWeight``: a per-input-channel scale of a packed convolution's data goes
into its weight, when the weight is the smaller of the two.

Compiler layer (``compiler.transform``).

A squeeze-and-excite block (EfficientNet, MobileNetV3, MnasNet, RegNet) ends in
``multiply(x, s)``, ``s`` a run-time ``(1, C, 1, 1)`` gate, and a 1x1 projection reads the
product. That multiply is a pass over the whole image of its own: 10% of EfficientNet-B0's
time, 125 us for a 32x112x112 image. Since a convolution sums ``w[o, c] * x[c]`` over the
input channels ``c``, scaling ``x``'s channels is scaling the weight's columns, and after
``AlterOpLayout`` the weight is a constant ``NC32n`` panel array ``(P, C * KH * KW, 32)``
whose middle axis runs over the input channels (each repeated for the kernel's taps). So::

    nn.contrib_conv2d_gemm_without_weight_transform(multiply(%x, %s), W)
      =>
    nn.contrib_conv2d_gemm_without_weight_transform(%x, multiply(W, reshape(%s, (1, C, 1))))

(for a kernel of more than one tap the weight is viewed as ``(P, C, KH * KW, 32)`` for the
multiply). The weight's multiply is a small kernel of its own on each call; the rewrite is
made only where it touches fewer elements than the data's (``N * H * W`` larger than the
weight's ``32 * P * KH * KW``: every squeeze-excite projection of 14x14 and larger
images), and only when nothing else reads the scaled data. A constant ``s`` is folded now.

The product rounds as ``(w * s) * x`` instead of ``w * (s * x)`` (within a float32 ulp per
term), and where the convolution pads, an infinite or NaN scale now meets the padding's
zeros (``0 * inf``): the rewrite assumes finite scales, as folding does everywhere. It
runs after ``AlterOpLayout`` and the ``FoldConstant`` that packs the weights, from the
default ``opt_level``.
"""

from __future__ import annotations

import numpy as np

from compiler.ir.expr import Call, Constant, Node
from compiler.ir.module import IRModule
from compiler.ir.types import TensorType
from compiler.op.api import call_op
from compiler.op.defs_packed import CONV
from compiler.op.defs_window import pair
from compiler.op.registry import get_def
from compiler.transform.pass_manager import Pass, PassContext
from compiler.transform.rewriter import UseCountingMutator, is_op_call, rewrite_module

__all__ = ["ScalePackedWeight", "scale_packed_weight"]


def _wanted(node: object) -> bool:
    return is_op_call(node, CONV) and is_op_call(node.args[0], "multiply")  # type: ignore[attr-defined]


def _static_shape(node: object) -> tuple[int, ...] | None:
    ty = getattr(node, "_checked_type", None)
    if not isinstance(ty, TensorType) or not all(isinstance(d, int) for d in ty.shape):
        return None
    return tuple(ty.shape)  # type: ignore[arg-type]


def _channel_gate(data: tuple[int, ...], gate: tuple[int, ...] | None) -> bool:
    """Whether a tensor of shape ``gate`` broadcasts against the NCHW ``data`` with one
    value per channel, the same for every image."""
    if gate is None or len(gate) > 4:
        return False
    gate = (1,) * (4 - len(gate)) + gate
    return gate[0] == 1 and gate[1] == data[1] and gate[2] == 1 and gate[3] == 1


class _Rewriter(UseCountingMutator):
    """Moves gates into weights; a scaled image read elsewhere is computed anyway, and
    scaling the weight too would only add work."""

    def rewrite(self, old: Node, new: Node) -> Node:
        if not _wanted(new) or not isinstance(new.args[1], Constant):  # type: ignore[attr-defined]
            return new
        conv: Call = new  # type: ignore[assignment]
        scaled_old = old.args[0]  # type: ignore[attr-defined]
        data_shape = _static_shape(scaled_old)
        weight = conv.args[1].data  # type: ignore[attr-defined]
        if self.uses[id(scaled_old)] != 1 or data_shape is None or len(data_shape) != 4:
            return new
        if weight.dtype != np.float32:
            return new
        for side in (0, 1):
            data_old, gate_old = scaled_old.args[side], scaled_old.args[1 - side]
            if _static_shape(data_old) == data_shape and _channel_gate(
                data_shape, _static_shape(gate_old)
            ):
                gate = conv.args[0].args[1 - side]  # type: ignore[attr-defined]
                # A constant gate folds for free; a run-time one costs a pass over the weight.
                if not isinstance(gate, Constant) and weight.size >= np.prod(data_shape):
                    return new
                scaled = _scaled_weight(weight, gate, conv)
                if scaled is not None:
                    data = conv.args[0].args[side]  # type: ignore[attr-defined]
                    return call_op(CONV, [data, scaled], **conv.attrs)
        return new


def _scaled_weight(weight: np.ndarray, gate: Node, conv: Call) -> Node | None:
    """The packed ``weight`` of ``conv`` with each input channel's columns times ``gate``'s
    value for that channel; None if the weight's depth does not split into channels."""
    kh, kw = pair(CONV, get_def(CONV).normalize_attrs(conv.attrs), "kernel_size")
    panels, depth, width = weight.shape
    taps = kh * kw
    if depth % taps:
        return None
    channels = depth // taps
    if isinstance(gate, Constant):
        column = np.asarray(gate.data, dtype=weight.dtype).reshape(1, channels, 1, 1)
        folded = weight.reshape(panels, channels, taps, width) * column
        return Constant(folded.reshape(weight.shape).astype(weight.dtype))
    if taps == 1:
        return call_op("multiply", [Constant(weight), _as_column(gate, (1, channels, 1))])
    blocks = Constant(weight.reshape(panels, channels, taps, width))
    product = call_op("multiply", [blocks, _as_column(gate, (1, channels, 1, 1))])
    return call_op("reshape", [product], newshape=weight.shape)


def _as_column(gate: Node, shape: tuple[int, ...]) -> Node:
    return call_op("reshape", [gate], newshape=shape)


def scale_packed_weight(mod: IRModule) -> IRModule:
    """Move per-input-channel scales of packed convolutions' data into their weights
    where that is less work (see the module doc).

    Parameters
    ----------
    mod : IRModule
        The module; it is not modified. It must type-check if it has a packed convolution
        of a ``multiply``.

    Returns
    -------
    IRModule
        A new module.
    """
    return rewrite_module(mod, _wanted, _Rewriter)


class ScalePackedWeight(Pass):
    """Scale a packed convolution's weight instead of its data by a per-channel gate
    (``opt_level=2``). See :mod:`compiler.transform.scale_packed_weight`."""

    def __init__(self) -> None:
        super().__init__("ScalePackedWeight", opt_level=2)

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        return scale_packed_weight(mod)

    def __repr__(self) -> str:
        return "ScalePackedWeight()"
