"""``FoldScaleAxis``: constants along a convolution's output channels go where the kernels
apply them for free.

Compiler layer (``compiler.transform``).

A batch norm that ``SimplifyInference`` rewrote is ``x * scale + shift`` with ``scale`` and
``shift`` constants of shape ``(C, 1, 1)``. After a convolution, that is a pass over the
whole output inside its fused kernel, each element read through broadcast flags that keep
the loop scalar (ResNet-18 built with ``nn.batch_norm``: a third of some convolutions'
time). As TVM's pass of the same name does (its backward direction), the rewrites are:

- ``multiply(nn.conv2d(x, w), s)`` with ``w`` and ``s`` constants, ``s`` one value per
  output channel (or one for all), is ``nn.conv2d(x, w * s)``; through a constant
  ``nn.bias_add`` between the two, the bias is scaled too;
- ``add(y, c)`` with ``c`` a constant of one value per channel of a 4-D ``y`` is
  ``nn.bias_add(y, c, axis=1)``, which the convolution kernels add as they store their
  output (:mod:`vm.kernels.codegen`).

Only NCHW convolutions with OIHW weights are folded, and only when nothing else reads the
convolution (or the bias_add) before the multiply: otherwise the unscaled result would be
computed twice. Folding a scale into the weight rounds differently from scaling the sum
(within a few float32 ulps); the bias rewrite keeps every bit. The pass runs at
``opt_level`` 3, as TVM's does; ``relay.vm.compile`` runs it from the default level.
"""

from __future__ import annotations

import numpy as np

from compiler.ir.expr import Call, Constant, Node
from compiler.ir.module import IRModule
from compiler.ir.types import TensorType
from compiler.op.api import call_op
from compiler.op.registry import get_def
from compiler.transform.pass_manager import Pass, PassContext
from compiler.transform.rewriter import UseCountingMutator, is_op_call, rewrite_module

__all__ = ["FoldScaleAxis", "fold_scale_axis"]


def _wanted(node: object) -> bool:
    return is_op_call(node, "multiply") or is_op_call(node, "add")


def _tensor_type(node: object) -> TensorType | None:
    ty = getattr(node, "_checked_type", None)
    return ty if isinstance(ty, TensorType) else None


def _per_channel(value: object, like: TensorType) -> np.ndarray | None:
    """The values of a constant that broadcasts against the 4-D ``like`` along axis 1
    only, one per channel (a single value is repeated), without changing its shape or
    dtype; else None."""
    if not isinstance(value, Constant) or like.ndim != 4:
        return None
    data = value.data
    channels = like.shape[1]
    if data.dtype != np.dtype(like.dtype) or data.ndim > 4 or not isinstance(channels, int):
        return None
    shape = (1,) * (4 - data.ndim) + data.shape
    if shape[0] != 1 or shape[2] != 1 or shape[3] != 1 or shape[1] not in (1, channels):
        return None
    return np.broadcast_to(data.reshape(-1), (channels,))


class _Rewriter(UseCountingMutator):
    """Folds scales into convolutions that nothing else reads."""

    def rewrite(self, old: Node, new: Node) -> Node:
        out = _tensor_type(old)
        if out is None or not isinstance(new, Call):
            return new
        if is_op_call(new, "multiply"):
            return self.multiply(old, new, out)  # type: ignore[arg-type]
        if is_op_call(new, "add"):
            return self.add(old, new, out)  # type: ignore[arg-type]
        return new

    def multiply(self, old: Call, new: Call, out: TensorType) -> Node:
        for side in (0, 1):
            scale = _per_channel(new.args[1 - side], out)
            if scale is None or _tensor_type(old.args[side]) != out:
                continue
            folded = self.scaled(old.args[side], new.args[side], scale)
            if folded is not None:
                return folded
        return new

    def scaled(self, old: Node, new: Node, scale: np.ndarray) -> Node | None:
        """``new`` (rewritten from ``old``) times ``scale`` per output channel, folded into
        a convolution's constant weight (and a constant bias after it), or None."""
        if self.uses[id(old)] != 1:
            return None
        if is_op_call(new, "nn.bias_add"):
            conv_old, conv_new = old.args[0], new.args[0]  # type: ignore[attr-defined]
            bias = new.args[1]  # type: ignore[attr-defined]
            axis = get_def("nn.bias_add").normalize_attrs(new.attrs)["axis"]  # type: ignore[attr-defined]
            if not isinstance(bias, Constant) or axis not in (1, -3) or bias.data.ndim != 1:
                return None
            conv = self.scaled(conv_old, conv_new, scale)
            if conv is None or bias.data.size not in (1, scale.size):
                return None
            biased = (np.broadcast_to(bias.data, scale.shape) * scale).astype(bias.data.dtype)
            return call_op("nn.bias_add", [conv, Constant(biased)], axis=1)
        if not is_op_call(new, "nn.conv2d"):
            return None
        weight = new.args[1]  # type: ignore[attr-defined]
        attrs = dict(get_def("nn.conv2d").normalize_attrs(new.attrs))  # type: ignore[attr-defined]
        if attrs["data_layout"] != "NCHW" or attrs["kernel_layout"] != "OIHW":
            return None
        if attrs["out_layout"] not in ("", "NCHW") or not isinstance(weight, Constant):
            return None
        w = weight.data
        if attrs["out_dtype"] not in ("", str(w.dtype)) or w.shape[0] != scale.size:
            return None
        folded = (w * scale.reshape(-1, 1, 1, 1)).astype(w.dtype)
        return call_op("nn.conv2d", [new.args[0], Constant(folded)], **attrs)  # type: ignore[attr-defined]

    def add(self, old: Call, new: Call, out: TensorType) -> Node:
        for side in (0, 1):
            if _tensor_type(old.args[side]) != out:
                continue
            bias = _per_channel(new.args[1 - side], out)
            # One value for every channel is a scalar add, which fuses as well as it is.
            if bias is not None and out.shape[1] != 1 and new.args[1 - side].data.size > 1:  # type: ignore[attr-defined]
                return call_op("nn.bias_add", [new.args[side], Constant(bias.copy())], axis=1)
        return new


def fold_scale_axis(mod: IRModule) -> IRModule:
    """Fold per-channel constant scales into convolution weights and per-channel constant
    adds into ``nn.bias_add`` (see the module doc).

    Parameters
    ----------
    mod : IRModule
        The module; it is not modified. It must type-check if it calls ``multiply`` or
        ``add``.

    Returns
    -------
    IRModule
        A new module.
    """
    return rewrite_module(mod, _wanted, _Rewriter)


class FoldScaleAxis(Pass):
    """Fold a convolution's per-channel constant scale into its weight, and per-channel
    constant adds into ``nn.bias_add`` (``opt_level=3``, as in TVM). See
    :mod:`compiler.transform.fold_scale_axis`."""

    def __init__(self) -> None:
        super().__init__("FoldScaleAxis", opt_level=3)

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        return fold_scale_axis(mod)

    def __repr__(self) -> str:
        return "FoldScaleAxis()"
