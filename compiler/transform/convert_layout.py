"""``ConvertLayout``: the transposes between channels-last operators move until they cancel.

Compiler layer (``compiler.transform``).

TVM's ``ConvertLayout({"nn.conv2d": ["NCHW", "default"]})`` rewrites a channels-last
network (a TensorFlow model's, or one built with ``data_layout="NHWC"``) into the layout its
fastest kernels take, with layout changes only where the layouts meet. relayvm's kernels all
take NCHW, and its builders already write an NHWC convolution or pool as the NCHW operator
between transposes (:mod:`compiler.op.layouts`); what is left to do is TVM's other half:
carry each transpose past the operators that do not care about the layout, until it meets
the next operator's transpose back and both go. A network of NHWC convolutions, bias adds,
batch norms, activations and residual additions keeps a transpose at its input and one at
its output.

The rewrites, each keeping every value bit for bit:

- ``f(transpose(x, p))`` is ``transpose(f(x), p)`` for an elementwise ``f`` (``relu``,
  ``clip``, ``sigmoid``...);
- ``g(transpose(x, p), transpose(y, p))`` is ``transpose(g(x, y), p)`` for a broadcasting
  ``g`` (``add``, ``multiply``...), and ``g(transpose(x, p), c)`` with a constant ``c`` is
  ``transpose(g(x, c'), p)``, ``c'`` the constant laid out as ``x`` is;
- ``nn.bias_add`` and ``nn.batch_norm`` of ``transpose(x, p)`` along axis ``a`` are the
  operator of ``x`` along axis ``p[a]``, transposed;
- ``transpose(transpose(x, a), b)`` is one transpose, or ``x``.

A transpose read by several operators moves past them only when every one of them would take
it in (it would otherwise stay, and be computed again after one of them); the rewrites run
again until none applies, at most :data:`SWEEPS` times.

relayvm keeps its convolutions NCHW whatever layout is asked for, since no kernel of it
takes another; the desired layouts are checked as TVM checks them, and an NHWC request
leaves the NCHW operators in place (the answers are the same).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

import numpy as np

from compiler.ir.expr import Call, Constant, Node, Tuple, TupleGetItem
from compiler.ir.module import IRModule
from compiler.ir.visitor import post_order
from compiler.op.api import call_op
from compiler.op.defs_transform import transpose_axes
from compiler.transform.pass_manager import Pass, PassContext
from compiler.transform.rewriter import (
    UseCountingMutator,
    is_op_call,
    is_shape_free_elementwise,
    rewrite_module,
)

__all__ = ["ConvertLayout", "convert_layout"]

#: The operators a desired layout may name, with the layouts relayvm's builders take.
_LAYOUT_OPS = frozenset(
    {
        "nn.conv2d", "nn.conv2d_transpose", "qnn.conv2d", "nn.max_pool2d", "nn.avg_pool2d",
        "nn.global_max_pool2d", "nn.global_avg_pool2d", "nn.adaptive_avg_pool2d",
        "nn.upsampling", "image.resize2d",
    }
)  # fmt: skip
_DATA_LAYOUTS = ("NCHW", "NHWC")
#: The most sweeps of the rewrites: each moves every transpose at least past one operator or
#: cancels it, and a network's transposes meet within a few; the bound only keeps a
#: pathological graph from costing more than the answers it leaves correct either way.
SWEEPS = 32


def _checked_layouts(desired: object) -> dict[str, tuple[str, ...]]:
    """``desired_layouts`` as TVM takes it (operator name -> ``[data layout, kernel
    layout]``, the kernel's ``"default"`` or left out), checked; ValueError naming the
    entry that is wrong."""
    if not isinstance(desired, Mapping):
        raise TypeError(
            "ConvertLayout: desired_layouts must be a dict from operator names to layout "
            f"lists, such as {{'nn.conv2d': ['NCHW', 'default']}}; got {type(desired).__name__}"
        )
    checked = {}
    for op, layouts in desired.items():
        if op not in _LAYOUT_OPS:
            known = ", ".join(sorted(_LAYOUT_OPS))
            raise ValueError(f"ConvertLayout: {op!r} has no layout to convert; one of {known}")
        if isinstance(layouts, str) or not isinstance(layouts, Sequence) or not layouts:
            raise ValueError(
                f"ConvertLayout: the layouts of {op!r} must be a list such as "
                f"['NCHW', 'default']; got {layouts!r}"
            )
        data, *kernel = layouts
        if data not in _DATA_LAYOUTS:
            raise ValueError(
                f"ConvertLayout: data layout {data!r} of {op!r} is not supported; expected "
                "'NCHW' or 'NHWC'"
            )
        if len(kernel) > 1 or (
            kernel and kernel[0] != "default" and sorted(str(kernel[0])) != sorted("OIHW")
        ):
            raise ValueError(
                f"ConvertLayout: kernel layout {kernel!r} of {op!r} is not supported; expected "
                "'default' or the letters O, I, H and W in some order"
            )
        checked[op] = (data, *kernel)
    return checked


def _perm(node: Node) -> list[int] | None:
    """The permutation of a ``transpose`` call, else None: its ``axes`` when it names them
    (as every transpose this pass writes does), else read from its checked type."""
    if not is_op_call(node, "transpose"):
        return None
    axes = node.attrs.get("axes")  # type: ignore[attr-defined]
    if axes:
        return [a % len(axes) for a in axes]
    data = getattr(node.args[0], "_checked_type", None)  # type: ignore[attr-defined]
    if data is None or not hasattr(data, "ndim"):
        return None
    return transpose_axes("transpose", data.ndim, axes)


def _takes(node: Call, index: int) -> bool:
    """Whether ``node`` would take the transpose that is its argument ``index`` in: it is
    another transpose, a bias add or batch norm of it, an elementwise operator of it alone,
    of it and a constant, or of it and a transpose the same way."""
    if is_op_call(node, "transpose"):
        return True
    if is_op_call(node, "nn.bias_add") or is_op_call(node, "nn.batch_norm"):
        return index == 0
    if not is_shape_free_elementwise(node) or len(node.args) > 2:
        return False
    if len(node.args) == 1:
        return True
    other = node.args[1 - index]
    perm = _perm(node.args[index])
    if isinstance(other, Constant):
        return perm is not None and other.data.ndim <= len(perm)
    return _perm(other) == perm


def _transposed(x: Node, perm: Sequence[int]) -> Call:
    return call_op("transpose", [x], axes=list(perm))


class _Mover(UseCountingMutator):
    """One sweep of the rewrites of the module doc; :attr:`moved` says whether any applied."""

    def __init__(self) -> None:
        super().__init__()
        self.moved = False
        #: Per transpose (by ``id``), how many of its readers would take it in: where all
        #: do, it moves past each of them and is no longer computed where it stands.
        self.takers: Counter[int] = Counter()

    def visit(self, root: Node) -> Node:
        for node in post_order(root, descend=self.descend):
            if isinstance(node, Call):
                for index, arg in enumerate(node.args):
                    if _perm(arg) is not None and _takes(node, index):
                        self.takers[id(arg)] += 1
        return super().visit(root)

    def rewrite(self, old: Node, new: Node) -> Node:
        out = self._rewritten(old, new)
        if out is not new:
            self.moved = True
        return out

    def _alone(self, old: Call, new: Call, index: int) -> list[int] | None:
        """The permutation of argument ``index`` of ``new`` when it is a transpose that may
        move past ``new``: nothing else reads it, or everything that does would take it in
        too (counted on ``old``, whose argument it replaces)."""
        arg = id(old.args[index])
        if self.uses[arg] != 1 and self.uses[arg] != self.takers[arg]:
            return None
        return _perm(new.args[index])

    def _rewritten(self, old: Node, new: Node) -> Node:
        if isinstance(new, TupleGetItem) and isinstance(new.tuple_value, Tuple):
            return new.tuple_value.fields[new.index]
        if not isinstance(new, Call) or not isinstance(old, Call):
            return new
        if is_op_call(new, "transpose"):
            return self._fold(old, new)
        if is_op_call(new, "nn.bias_add") or is_op_call(new, "nn.batch_norm"):
            return self._along_axis(old, new)
        if is_shape_free_elementwise(new):
            if len(new.args) == 1:
                perm = self._alone(old, new, 0)
                if perm is None:
                    return new
                inner = Call(new.op, [new.args[0].args[0]], new.attrs)  # type: ignore[attr-defined]
                return _transposed(inner, perm)
            if len(new.args) == 2:
                return self._broadcast(old, new)
        return new

    def _fold(self, old: Call, new: Call) -> Node:
        perm = _perm(new)
        inner = _perm(new.args[0])
        if perm is None or inner is None:
            return new
        composed = [inner[a] for a in perm]
        x = new.args[0].args[0]  # type: ignore[attr-defined]
        return x if composed == list(range(len(composed))) else _transposed(x, composed)

    def _broadcast(self, old: Call, new: Call) -> Node:
        perms = [self._alone(old, new, 0), self._alone(old, new, 1)]
        args = list(new.args)
        if perms[0] is not None and perms[1] is not None:
            if perms[0] != perms[1]:
                return new
            inner = [a.args[0] for a in args]  # type: ignore[attr-defined]
            return _transposed(Call(new.op, inner, new.attrs), perms[0])
        side = 0 if perms[0] is not None else 1
        perm, other = perms[side], args[1 - side]
        if perm is None or not isinstance(other, Constant) or other.data.ndim > len(perm):
            return new
        value = other.data
        if value.ndim > 0:
            full = value.reshape((1,) * (len(perm) - value.ndim) + value.shape)
            value = np.ascontiguousarray(np.transpose(full, np.argsort(perm)))
        args[side] = args[side].args[0]  # type: ignore[attr-defined]
        args[1 - side] = Constant(value)
        return _transposed(Call(new.op, args, new.attrs), perm)

    def _along_axis(self, old: Call, new: Call) -> Node:
        perm = self._alone(old, new, 0)
        if perm is None:
            return new
        axis = new.attrs.get("axis", 1)
        axis = axis + len(perm) if axis < 0 else axis  # type: ignore[operator]
        args = [new.args[0].args[0], *new.args[1:]]  # type: ignore[attr-defined]
        moved = Call(new.op, args, new.attrs.with_items(axis=perm[axis]))
        if is_op_call(new, "nn.bias_add"):
            return _transposed(moved, perm)
        # batch_norm's result is (normalized, mean, variance): only the first is laid out.
        return Tuple(
            [_transposed(TupleGetItem(moved, 0), perm), *(TupleGetItem(moved, i) for i in (1, 2))]
        )


def convert_layout(mod: IRModule, desired_layouts: Mapping[str, Sequence[str]]) -> IRModule:
    """Move the transposes of channels-last operators until they cancel (see the module
    doc).

    Parameters
    ----------
    mod : IRModule
        The module; it is not modified. It must type-check.
    desired_layouts : dict
        Operator name to ``[data layout, kernel layout]`` as TVM takes it, for instance
        ``{"nn.conv2d": ["NCHW", "default"]}``.

    Returns
    -------
    IRModule
        A new module computing the same values.

    Raises
    ------
    TypeError, ValueError
        If ``desired_layouts`` is not such a dict, naming the entry that is wrong.
    """
    _checked_layouts(desired_layouts)
    wanted = lambda node: is_op_call(node, "transpose")  # noqa: E731
    movers: list[_Mover] = []

    def make() -> _Mover:
        movers.append(_Mover())
        return movers[-1]

    for _ in range(SWEEPS):
        movers.clear()
        mod = rewrite_module(mod, wanted, make)
        if not any(mover.moved for mover in movers):
            break
    return mod


class ConvertLayout(Pass):
    """TVM's ``relay.transform.ConvertLayout(desired_layouts)`` (``opt_level=3``): see
    :mod:`compiler.transform.convert_layout`."""

    def __init__(self, desired_layouts: Mapping[str, Sequence[str]]) -> None:
        super().__init__("ConvertLayout", opt_level=3)
        self.desired_layouts = _checked_layouts(desired_layouts)

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        return convert_layout(mod, self.desired_layouts)

    def __repr__(self) -> str:
        return f"ConvertLayout({self.desired_layouts!r})"
