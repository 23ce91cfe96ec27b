"""``FoldExplicitPadding``: a zero ``nn.pad`` of a convolution's spatial axes becomes the
convolution's own padding.

Compiler layer (``compiler.transform``).

Exporters of TensorFlow-style "same" padding (transformers' MobileNetV2 and EfficientNet,
for instance) write ``nn.conv2d(nn.pad(x, 0, pad_width=[[0, 0], [0, 0], [t, b], [l, r]]),
w, padding=0)``. The pad is a kernel of its own that copies the whole image, and the
convolution then sees an input two pixels wider, which can move it off its fastest path
(a 384-channel depthwise layer on 16x16 took three times as long as on 14x14 with
padding 1). As TVM's pass of the same name does, the pad's widths are added to the
convolution's padding::

    nn.conv2d(nn.pad(%x, 0f, pad_width=[[0, 0], [0, 0], [1, 1], [0, 1]]), %w, padding=[0, 0, 0, 0])
      =>
    nn.conv2d(%x, %w, padding=[1, 0, 1, 1])

Only constant padding with a zero value, on the height and width axes of NCHW data, is
folded; the pad stays for any other use of it (dead-code elimination removes it when it
has none). The pass runs at ``opt_level`` 1.
"""

from __future__ import annotations

from compiler.ir.expr import Call, Constant, Node
from compiler.ir.module import IRModule
from compiler.op.api import call_op
from compiler.op.defs_window import padding4
from compiler.op.registry import get_def
from compiler.transform.pass_manager import Pass, PassContext
from compiler.transform.rewriter import BindingMutator, is_op_call, is_primitive, rewrite_module

__all__ = ["FoldExplicitPadding", "fold_explicit_padding"]


def _is_conv(node: object) -> bool:
    return is_op_call(node, "nn.conv2d")


def _spatial_zero_pad(pad: Call) -> tuple[int, int, int, int] | None:
    """``(top, left, bottom, right)`` of a zero constant pad of NCHW's spatial axes only."""
    attrs = get_def("nn.pad").normalize_attrs(pad.attrs)
    value = pad.args[1]
    if attrs["pad_mode"] != "constant" or not isinstance(value, Constant):
        return None
    if value.data.size != 1 or float(value.data.reshape(())) != 0.0:
        return None
    widths = [tuple(int(v) for v in pair) for pair in attrs["pad_width"]]
    if len(widths) != 4 or widths[0] != (0, 0) or widths[1] != (0, 0):
        return None
    (top, bottom), (left, right) = widths[2], widths[3]
    if min(top, bottom, left, right) < 0:
        return None
    return top, left, bottom, right


class _Rewriter(BindingMutator):
    def descend(self, node: Node) -> bool:
        return not is_primitive(node)

    def rewrite(self, old: Node, new: Node) -> Node:
        if not _is_conv(new) or not is_op_call(new.args[0], "nn.pad"):  # type: ignore[attr-defined]
            return new
        conv: Call = new  # type: ignore[assignment]
        attrs = dict(get_def("nn.conv2d").normalize_attrs(conv.attrs))
        if attrs["data_layout"] != "NCHW":
            return new
        extra = _spatial_zero_pad(conv.args[0])  # type: ignore[arg-type]
        if extra is None:
            return new
        padding = padding4("nn.conv2d", attrs)
        attrs["padding"] = [p + e for p, e in zip(padding, extra)]
        data = conv.args[0].args[0]  # type: ignore[attr-defined]
        return call_op("nn.conv2d", [data, conv.args[1]], **attrs)


def fold_explicit_padding(mod: IRModule) -> IRModule:
    """Fold zero spatial ``nn.pad`` calls into the ``nn.conv2d`` that reads them (see the
    module doc).

    Parameters
    ----------
    mod : IRModule
        The module; it is not modified.

    Returns
    -------
    IRModule
        A new module.
    """
    return rewrite_module(mod, _is_conv, _Rewriter)


class FoldExplicitPadding(Pass):
    """Fold a zero ``nn.pad`` of the spatial axes into the following ``nn.conv2d``'s
    padding (``opt_level=1``). See :mod:`compiler.transform.fold_explicit_padding`."""

    def __init__(self) -> None:
        super().__init__("FoldExplicitPadding", opt_level=1)

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        return fold_explicit_padding(mod)

    def __repr__(self) -> str:
        return "FoldExplicitPadding()"
