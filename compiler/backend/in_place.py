"""Outputs written over an argument: which argument's bytes a kernel call's output may take
when that argument dies at the call.

Compiler layer (``compiler.backend``). The memory plan (:mod:`compiler.backend.memory_plan`)
asks :func:`in_place_argument` of every kernel call.

A residual block ends in a 1x1 convolution whose epilogue adds the block's input (ResNet's
bottlenecks, MobileNetV2's and EfficientNet's projections). The pixel panels that run it
(:mod:`vm.kernels.runtime.pointwise`) read each element's residual just before they store
the output element at the same place (:func:`vm.kernels.runtime.packed.post_epilogue`), so
the output can be written over the residual: the layer then reads the residual and writes
back the same cache lines, instead of also fetching a second buffer as large from memory
to write into, and the arena holds one buffer fewer. onnxruntime's fused convolution
with a sum does the same. The runtime keeps it correct however an executable was planned:
a path that cannot write in place gets a copy of the residual (``_conv_blocks``).

Only a primitive function of exactly this form qualifies, the form the kernel generator
turns into a tile epilogue with a residual (``vm.kernels.codegen``, ``tile_epilogue``):
``nn.contrib_conv2d_gemm_without_weight_transform`` with a 1x1 window, stride 1, no
padding, whose float32 output runs in pixel panels from one block of ``k``
(:func:`vm.kernels.runtime.convolution.written_over_pays`), then an optional
``nn.bias_add`` along the channels, then ``add`` of a parameter of the output's type, then
an optional ``nn.relu`` or ``clip``.
"""

from __future__ import annotations

from compiler.ir.expr import Call, Expr, Function, Op, Var
from compiler.ir.types import TensorType
from compiler.op.registry import get_def
from compiler.transform.typed_rewrite import is_primitive, known_type

__all__ = ["in_place_argument"]

_CONV = "nn.contrib_conv2d_gemm_without_weight_transform"
_ACTIVATIONS = frozenset({"nn.relu", "clip"})


def in_place_argument(call: Call) -> int | None:
    """The index of the argument of kernel call ``call`` whose bytes its output may be
    written over (see the module docstring), or None.

    Parameters
    ----------
    call : Call
        A call of a type-checked primitive function.

    Returns
    -------
    int or None
        An index into ``call.args``; that argument has the output's type.
    """
    func = call.op
    if not is_primitive(func) or not isinstance(func, Function):
        return None
    out_type = known_type(func.body)
    if not _float32_static(out_type):
        return None
    node = func.body
    if _is_op(node, _ACTIVATIONS):
        node = node.args[0]  # type: ignore[attr-defined]
    if not _is_op(node, {"add"}) or len(node.args) != 2:  # type: ignore[attr-defined]
        return None
    for residual, rest in (node.args, tuple(reversed(node.args))):  # type: ignore[attr-defined]
        if not isinstance(residual, Var) or residual not in func.params:
            continue
        if known_type(residual) != out_type:
            continue
        conv = _bias_input(rest)
        if conv is not None and _pays_to_write_over(conv) and residual not in conv.args:
            return func.params.index(residual)
    return None


def _is_op(node: Expr, names: frozenset[str] | set[str]) -> bool:
    return isinstance(node, Call) and isinstance(node.op, Op) and node.op.name in names


def _float32_static(ty: object) -> bool:
    return isinstance(ty, TensorType) and ty.dtype == "float32" and ty.is_static


def _bias_input(node: Expr) -> Call | None:
    """The convolution under an optional ``nn.bias_add`` along axis 1, if ``node`` is one."""
    if _is_op(node, {"nn.bias_add"}):
        attrs = get_def("nn.bias_add").normalize_attrs(node.attrs)  # type: ignore[attr-defined]
        bias_type = known_type(node.args[1])  # type: ignore[attr-defined]
        if attrs["axis"] not in (1, -3) or not (
            isinstance(bias_type, TensorType) and bias_type.dtype == "float32"
        ):
            return None
        node = node.args[0]  # type: ignore[attr-defined]
    return node if _is_op(node, {_CONV}) else None  # type: ignore[return-value]


def _pays_to_write_over(conv: Call) -> bool:
    """Whether ``conv`` is a 1x1, stride-1, unpadded packed convolution of float32 NCHW
    data that gains by writing over its residual (see the module docstring)."""
    from vm.kernels.runtime import convolution  # deferred: numba, only when planning

    data_type = known_type(conv.args[0])
    if not (_float32_static(data_type) and data_type.ndim == 4):  # type: ignore[union-attr]
        return False
    attrs = get_def(_CONV).normalize_attrs(conv.attrs)
    window = (attrs["kernel_size"], attrs["strides"], attrs["dilation"])
    if any(tuple(int(v) for v in value) != (1, 1) for value in window):
        return False
    if any(int(p) for p in attrs["padding"]):
        return False
    if attrs["out_dtype"] not in ("", "float32", None):
        return False
    _, channels, height, width = (int(d) for d in data_type.shape)  # type: ignore[union-attr]
    return bool(convolution.written_over_pays(height * width, channels))
