"""TorchScript ``aten::``/``prim::`` operator converters for ``relay.frontend.from_pytorch``.

Compiler layer (``compiler.frontend``); does not import ``torch``. A converter takes a
:class:`TorchNode` (the node's operands already converted: a
:class:`~compiler.frontend.onnx_context.Value` per tensor, the Python value of every
constant, list and tuple) and returns the node's result, or a sequence with one result per
output for a node with several. Operators that ONNX also has (convolutions, pools,
normalizations, ``MatMul``) are built by the ONNX frontend's converters, so both frontends
lower them the same way. Shape arithmetic of traced graphs (``aten::size``,
``prim::NumToTensor``, ``aten::Int``) is evaluated at import time from the static input
shapes.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence
from typing import Any as AnyT

import numpy as np

from compiler.frontend.onnx_context import NodeContext, Value, constant_value
from compiler.frontend.onnx_registry import converters as onnx_converters
from compiler.frontend.pytorch_errors import OpNotImplemented, PyTorchImportError
from compiler.ir.expr import Expr, Tuple
from compiler.ir.types import Any
from compiler.typing.infer import infer_expr

#: The ``ai.onnx`` opset whose semantics the ONNX converters reused here apply.
_ONNX_OPSET = 17

#: torch's ScalarType codes (as ``aten::to`` and reductions carry them) to Relay dtypes.
SCALAR_TYPES = {
    0: "uint8",
    1: "int8",
    2: "int16",
    3: "int32",
    4: "int64",
    5: "float16",
    6: "float32",
    7: "float64",
    11: "bool",
}


class ModuleRef:
    """A (sub)module reached through ``prim::GetAttr``, with its ``state_dict`` path."""

    def __init__(self, obj: AnyT, path: str) -> None:
        self.obj = obj
        self.path = path


class TorchNode(NodeContext):
    """One TorchScript node being converted: its operands, builders and errors.

    Parameters
    ----------
    node : torch._C.Node
        The node (only its kind and output names are read).
    args : list
        The converted operands, in order.
    index : int
        The node's position in the walk (for messages).
    default_dtype : str
        The floating-point dtype of scalars promoted to tensors.
    """

    def __init__(self, node: AnyT, args: list[AnyT], index: int, default_dtype: str) -> None:
        outputs = [v.debugName() for v in node.outputs()]
        self.kind = node.kind()
        self.args = args
        self.default_dtype = default_dtype
        super().__init__(
            op_type=self.kind,
            name="",
            index=index,
            opset=_ONNX_OPSET,
            inputs=[a if isinstance(a, Value) else None for a in args],
            input_names=[""] * len(args),
            attrs={},
            outputs=outputs,
        )

    @property
    def label(self) -> str:
        first = next((o for o in self.outputs if o), "")
        return f"node {self.kind} (output %{first})" if first else f"node {self.kind}"

    def error(self, message: str) -> PyTorchImportError:  # type: ignore[override]
        """A :class:`PyTorchImportError` about this node."""
        return PyTorchImportError(f"PyTorch {self.label}: {message}")

    def unsupported(self, message: str) -> OpNotImplemented:
        """An :class:`OpNotImplemented` about this node (a mode we do not support)."""
        return OpNotImplemented(f"PyTorch {self.label}: {message}")

    # --- operands ------------------------------------------------------------------------------

    def arg(self, index: int, default: AnyT = None) -> AnyT:
        """Operand ``index`` (``default`` past the end)."""
        return self.args[index] if index < len(self.args) else default

    def tensor(self, index: int) -> Value:
        """Operand ``index``, which must be a tensor."""
        value = self.arg(index)
        if not isinstance(value, Value):
            raise self.error(f"operand {index} must be a tensor, found {value!r}")
        return value

    def ints(self, index: int, what: str) -> list[int]:
        """Operand ``index`` as a list of ints (an int is a list of one)."""
        value = self.arg(index)
        if isinstance(value, Value):
            if value.static is None:
                raise self.unsupported(f"{what} must be known when the model is imported")
            value = value.static.reshape(-1).tolist()
        if isinstance(value, (int, np.integer)):
            return [int(value)]
        try:
            return [self.int_of(v, what) for v in value]
        except TypeError:
            raise self.error(f"{what} must be a list of ints, found {value!r}") from None

    def int_of(self, value: AnyT, what: str) -> int:
        """A Python int from an int or a 0-d tensor known at import time."""
        if isinstance(value, Value):
            if value.static is None or value.static.size != 1:
                raise self.unsupported(
                    f"{what} must be known when the model is imported (found a tensor computed "
                    "at run time)"
                )
            return int(value.static.reshape(-1)[0])
        if isinstance(value, (bool, int, np.integer)):
            return int(value)
        raise TypeError(what)

    def as_value(self, value: AnyT, like: Value | None = None) -> Value:
        """A tensor operand, or a Python scalar as a 0-d constant of ``like``'s dtype (a float
        scalar with an integer ``like`` takes the default float dtype)."""
        if isinstance(value, Value):
            return value
        if isinstance(value, (bool, int, float, np.number)):
            if like is not None and not (isinstance(value, float) and like.dtype[0] in "iub"):
                return self.scalar(value, like.dtype)
            if isinstance(value, bool):
                return self.scalar(value, "bool")
            return self.scalar(value, self.default_dtype if isinstance(value, float) else "int64")
        raise self.error(f"expected a tensor or a number, found {value!r}")

    def axis(self, value: AnyT, ndim: int) -> int:
        """A dimension index normalized to ``[0, ndim)``."""
        axis = self.int_of(value, "dim")
        if not -max(ndim, 1) <= axis < max(ndim, 1):
            raise self.error(f"dim {axis} is out of range for a tensor of rank {ndim}")
        return axis % max(ndim, 1)

    def shape_of(self, x: Value) -> tuple[int, ...]:
        """``x``'s shape as ints; every dimension must be static."""
        if any(isinstance(d, Any) for d in x.shape):
            raise self.unsupported("input shapes must be static")
        return tuple(int(d) for d in x.shape)

    # --- building ------------------------------------------------------------------------------

    def onnx(self, op_type: str, inputs: Sequence[Value | None], **attrs: AnyT) -> AnyT:
        """Build ONNX operator ``op_type`` with the ONNX frontend's converter (messages still
        name this TorchScript node)."""
        context = TorchNode.__new__(TorchNode)
        NodeContext.__init__(
            context,
            op_type=op_type,
            name="",
            index=self.index,
            opset=_ONNX_OPSET,
            inputs=list(inputs),
            input_names=[""] * len(inputs),
            attrs=attrs,
            outputs=self.outputs,
        )
        context.kind = self.kind
        context.args = self.args
        context.default_dtype = self.default_dtype
        result = onnx_converters()[op_type](context)
        # Converters of multi-output ONNX operators (LayerNormalization, BatchNormalization)
        # return every output; torch's operator has only the first.
        return result if isinstance(result, Value) else result[0]

    def cast(self, x: Value, dtype: str) -> Value:
        return x if x.dtype == dtype else self.call("cast", x, dtype=dtype)

    def typed(self, expr: Expr) -> Value:
        """A Relay expression built by a custom converter, with its inferred type."""

        try:
            return Value(expr, infer_expr(expr))
        except Exception as exc:  # the user's expression: report its type error on this node
            raise self.error(f"the custom converter's result does not type-check: {exc}") from None


def flatten_output(result: AnyT) -> Expr:
    """The Relay expression of a graph output (nested tuples and lists become tuples)."""
    if isinstance(result, Value):
        return result.expr
    if isinstance(result, (tuple, list)):
        return Tuple([flatten_output(r) for r in result])
    if isinstance(result, (bool, int, float)):
        return constant_value(np.asarray(result)).expr
    raise PyTorchImportError(f"a graph output is a {type(result).__name__}, not a tensor")


Converter = Callable[[TorchNode], AnyT]
CONVERTERS: dict[str, Converter] = {}


def register(*kinds: str) -> Callable[[Converter], Converter]:
    """Decorator: register a converter for each TorchScript kind in ``kinds``."""

    def decorate(func: Converter) -> Converter:
        for kind in kinds:
            assert kind not in CONVERTERS, kind
            CONVERTERS[kind] = func
        return func

    return decorate


# --- prim:: and Python-level values ------------------------------------------------------------


@register("prim::ListConstruct", "prim::TupleConstruct")
def _construct(node: TorchNode) -> AnyT:
    return list(node.args) if node.kind == "prim::ListConstruct" else tuple(node.args)


@register("prim::ListUnpack", "prim::TupleUnpack")
def _unpack(node: TorchNode) -> AnyT:
    value = node.arg(0)
    if not isinstance(value, (list, tuple)) or len(value) != node.num_outputs:
        raise node.error(f"cannot unpack {value!r} into {node.num_outputs} values")
    return list(value)


@register("prim::TupleIndex", "aten::__getitem__")
def _getitem(node: TorchNode) -> AnyT:
    container, index = node.arg(0), node.int_of(node.arg(1), "index")
    if not isinstance(container, (list, tuple)) or not -len(container) <= index < len(container):
        raise node.error(f"index {index} is out of range for {container!r}")
    return container[index]


@register("aten::append")
def _append(node: TorchNode) -> list:
    container = node.arg(0)
    if not isinstance(container, list):
        raise node.error(f"append to a {type(container).__name__}, not a list")
    # Lists are Python lists shared by every node holding them, as TorchScript's are.
    container.append(node.arg(1))
    return container


@register("aten::len")
def _len(node: TorchNode) -> int:
    value = node.arg(0)
    if isinstance(value, Value):
        return int(node.shape_of(value)[0])
    return len(value)


@register("prim::NumToTensor", "aten::scalar_tensor")
def _num_to_tensor(node: TorchNode) -> Value:
    value = node.arg(0)
    if isinstance(value, Value):
        return value
    dtype = "int64" if isinstance(value, (bool, int)) and not isinstance(value, bool) else None
    return node.const(np.asarray(value, dtype=dtype or node.default_dtype))


@register("aten::Int", "aten::Float", "aten::Bool", "aten::ScalarImplicit", "aten::item")
def _to_python(node: TorchNode) -> AnyT:
    value = node.arg(0)
    if isinstance(value, Value):
        if value.static is None:
            # Known only at run time: stays a tensor, so a prim::If branching on it is
            # reported as such (and a shape built from it names the shape).
            return value
        if value.static.size != 1:
            raise node.error(f"a tensor of {value.static.size} elements is not a number")
        value = value.static.reshape(-1)[0].item()
    cast = {"aten::Int": int, "aten::Float": float, "aten::Bool": bool}.get(node.kind)
    return cast(value) if cast else value


@register("aten::size")
def _size(node: TorchNode) -> AnyT:
    x = node.tensor(0)
    dims = node.shape_of(x)
    if len(node.args) > 1 and node.arg(1) is not None:
        return dims[node.axis(node.arg(1), x.ndim)]
    return list(dims)


@register("aten::dim")
def _dim(node: TorchNode) -> int:
    return node.tensor(0).ndim


@register("aten::numel")
def _numel(node: TorchNode) -> int:
    return int(np.prod(node.shape_of(node.tensor(0)), dtype=np.int64))


@register("prim::dtype")
def _dtype(node: TorchNode) -> int:
    names = {v: k for k, v in SCALAR_TYPES.items()}
    return names.get(node.tensor(0).dtype, 6)


@register("aten::format")
def _format(node: TorchNode) -> str:
    # The messages of scripted code's checks, shown if one of them fails at import time.
    shown = [f"tensor{list(a.shape)}" if isinstance(a, Value) else a for a in node.args[1:]]
    try:
        return str(node.arg(0)).format(*shown)
    except (IndexError, KeyError, ValueError):
        return str(node.arg(0))


@register("prim::device", "aten::warn", "prim::Uninitialized")
def _ignored(node: TorchNode) -> AnyT:
    return None if node.num_outputs == 1 else []


@register("prim::RaiseException")
def _raise(node: TorchNode) -> AnyT:
    raise node.error(f"the model raises an exception for these inputs: {node.arg(0)!r}")


@register("prim::unchecked_cast", "aten::contiguous", "aten::detach", "aten::clone")
def _identity(node: TorchNode) -> AnyT:
    return node.arg(0)


@register("aten::__is__", "aten::__isnot__")
def _is(node: TorchNode) -> bool:
    same = node.arg(0) is None and node.arg(1) is None
    return same if node.kind == "aten::__is__" else not same


@register("aten::list")
def _list(node: TorchNode) -> list:
    return list(node.arg(0))


@register("prim::is_nested", "prim::is_cuda", "prim::is_mkldnn", "prim::is_sparse")
def _is_flag(node: TorchNode) -> bool:
    # A converted model holds dense CPU tensors only.
    return False


@register("aten::zeros", "aten::ones", "aten::full")
def _filled(node: TorchNode) -> Value:
    # (size, [fill_value,] dtype, layout, device, pin_memory)
    full = node.kind == "aten::full"
    value = node.arg(1) if full else (0 if node.kind == "aten::zeros" else 1)
    if isinstance(value, Value):
        raise node.unsupported("a fill value computed at run time")
    code = node.arg(2 if full else 1)
    if code is None:
        dtype = (
            "int64"
            if isinstance(value, int) and not isinstance(value, bool) and full
            else (node.default_dtype)
        )
    else:
        dtype = SCALAR_TYPES.get(code)
        if dtype is None:
            raise node.unsupported(f"torch scalar type {code}")
    return node.const(np.full(node.ints(0, "size"), value, dtype=dtype))


@register("aten::tensor", "aten::as_tensor")
def _tensor(node: TorchNode) -> Value:
    # (data, dtype, device, requires_grad): data a number or nested list of numbers.
    data = node.arg(0)
    if isinstance(data, Value):
        return data if node.arg(1) is None else node.cast(data, SCALAR_TYPES[node.arg(1)])
    code = node.arg(1)
    if code is not None:
        dtype = SCALAR_TYPES.get(code)
        if dtype is None:
            raise node.unsupported(f"torch scalar type {code}")
    else:
        kind = np.asarray(data).dtype.kind
        dtype = {"b": "bool", "i": "int64", "u": "int64"}.get(kind, node.default_dtype)
    try:
        return node.const(np.asarray(data, dtype=dtype))
    except (TypeError, ValueError):
        raise node.error(f"cannot make a tensor from {data!r}") from None


@register("aten::arange")
def _arange(node: TorchNode) -> Value:
    # (end, dtype, layout, device, pin) / (start, end, ...) / (start, end, step, ...)
    count = {5: 1, 6: 2, 7: 3}.get(len(node.args))
    if count is None:
        raise node.error(f"unexpected arange overload with {len(node.args)} operands")
    bounds = []
    for value in node.args[:count]:
        if isinstance(value, Value):
            if value.static is None or value.static.size != 1:
                raise node.unsupported("arange bounds must be known when the model is imported")
            value = value.static.reshape(-1)[0].item()
        bounds.append(value)
    code = node.arg(count)
    if code is None:
        integral = all(isinstance(b, int) for b in bounds)
        dtype = "int64" if integral else node.default_dtype
    else:
        dtype = SCALAR_TYPES.get(code)
        if dtype is None:
            raise node.unsupported(f"torch scalar type {code}")
    return node.const(np.arange(*bounds).astype(dtype))


@register("aten::__contains__")
def _contains(node: TorchNode) -> bool:
    container = node.arg(0)
    if isinstance(container, Value):
        raise node.unsupported("membership in a tensor")
    return node.arg(1) in container


@register("aten::__not__")
def _not(node: TorchNode) -> bool:
    return not node.arg(0)


# --- elementwise arithmetic --------------------------------------------------------------------

_PY_BINARY = {
    "add": operator.add,
    "sub": operator.sub,
    "mul": operator.mul,
    "div": operator.truediv,
    "floordiv": operator.floordiv,
    "floor_divide": operator.floordiv,
    "remainder": operator.mod,
    "pow": operator.pow,
    "eq": operator.eq,
    "ne": operator.ne,
    "lt": operator.lt,
    "le": operator.le,
    "gt": operator.gt,
    "ge": operator.ge,
}
_RELAY_BINARY = {
    "add": "add",
    "sub": "subtract",
    "mul": "multiply",
    "div": "divide",
    "floordiv": "floor_divide",
    "floor_divide": "floor_divide",
    "remainder": "floor_mod",
    "pow": "power",
    "eq": "equal",
    "ne": "not_equal",
    "lt": "less",
    "le": "less_equal",
    "gt": "greater",
    "ge": "greater_equal",
    "maximum": "maximum",
    "minimum": "minimum",
}


def _category(dtype: str) -> int:
    return 2 if dtype.startswith("float") else (0 if dtype == "bool" else 1)


def promote(node: TorchNode, a: AnyT, b: AnyT) -> tuple[Value, Value]:
    """Both operands as tensors of one dtype, by torch's rules: a Python scalar takes the
    tensor's dtype unless it is a float meeting integers; between tensors the higher
    category (bool < integer < float) wins, then a dimensioned tensor over a 0-d one, then
    the wider type."""
    if isinstance(a, Value) and isinstance(b, Value):
        if a.dtype != b.dtype:
            ca, cb = _category(a.dtype), _category(b.dtype)
            if ca != cb:
                target = a.dtype if ca > cb else b.dtype
            elif (a.ndim == 0) != (b.ndim == 0):
                target = b.dtype if a.ndim == 0 else a.dtype
            else:
                target = np.promote_types(a.dtype, b.dtype).name
            a, b = node.cast(a, target), node.cast(b, target)
        return a, b
    if isinstance(a, Value):
        b = node.as_value(b, a)
        return node.cast(a, b.dtype), b
    a = node.as_value(a, b)
    return a, node.cast(b, a.dtype)


def _binary(node: TorchNode) -> AnyT:
    name = node.kind.split("::")[1].rstrip("_")
    a, b = node.arg(0), node.arg(1)
    if not isinstance(a, Value) and not isinstance(b, Value):
        return _PY_BINARY[name](a, b)
    if name in ("add", "sub") and len(node.args) > 2 and node.arg(2) not in (None, 1):
        b = node.call("multiply", *promote(node, b, node.arg(2)))
    if name == "div":
        mode = node.arg(2)
        a, b = promote(node, a, b)
        if mode is None:
            if a.dtype[0] in "iub":
                a, b = node.cast(a, node.default_dtype), node.cast(b, node.default_dtype)
            return node.call("divide", a, b)
        if mode == "floor":
            return node.call("floor_divide", a, b)
        if mode == "trunc":
            if a.dtype[0] in "iu":
                # Truncation rounds towards zero: the quotient of the magnitudes, signed.
                magnitude = node.call("floor_divide", node.call("abs", a), node.call("abs", b))
                sign = node.call("multiply", node.call("sign", a), node.call("sign", b))
                return node.call("multiply", magnitude, sign)
            quotient = node.call("divide", a, b)
            return node.call(
                "multiply",
                node.call("sign", quotient),
                node.call("floor", node.call("abs", quotient)),
            )
        raise node.error(f"rounding_mode {mode!r} is not one of None, 'trunc', 'floor'")
    a, b = promote(node, a, b)
    return node.call(_RELAY_BINARY[name], a, b)


register(
    *(f"aten::{name}" for name in _PY_BINARY),
    *(f"aten::{name}_" for name in ("add", "sub", "mul", "div", "pow")),
    "aten::maximum",
    "aten::minimum",
)(_binary)
_PY_BINARY["maximum"] = max
_PY_BINARY["minimum"] = min


@register("aten::rsub")
def _rsub(node: TorchNode) -> Value:
    a, b = promote(node, node.arg(0), node.arg(1))
    alpha = node.arg(2, 1)
    if alpha not in (None, 1):
        a = node.call("multiply", *promote(node, a, alpha))
    return node.call("subtract", b, a)


@register("aten::neg")
def _neg(node: TorchNode) -> AnyT:
    x = node.arg(0)
    return -x if not isinstance(x, Value) else node.call("negative", x)


_UNARY = {
    "exp": "exp",
    "log": "log",
    "sqrt": "sqrt",
    "rsqrt": "rsqrt",
    "abs": "abs",
    "erf": "erf",
    "sin": "sin",
    "cos": "cos",
    "tanh": "tanh",
    "sigmoid": "sigmoid",
    "relu": "nn.relu",
    "floor": "floor",
    "ceil": "ceil",
    "round": "round",
    "sign": "sign",
}


_PY_UNARY = {
    "exp": np.exp,
    "log": np.log,
    "sqrt": np.sqrt,
    "abs": np.abs,
    "sin": np.sin,
    "cos": np.cos,
    "tanh": np.tanh,
    "floor": np.floor,
    "ceil": np.ceil,
}


def _unary(node: TorchNode) -> AnyT:
    name = node.kind.split("::")[1].rstrip("_")
    if isinstance(node.arg(0), (bool, int, float)):
        # Python-number math of scripted code (math.sqrt(head_dim)): evaluated here.
        value = float(node.arg(0))
        if name not in _PY_UNARY:
            raise node.unsupported(f"{name} of a Python number")
        with np.errstate(all="ignore"):
            return float(_PY_UNARY[name](np.float64(value)))
    x = node.tensor(0)
    if x.dtype[0] in "iub" and name not in ("abs", "relu", "sign", "floor", "ceil", "round"):
        x = node.cast(x, node.default_dtype)
    return node.call(_UNARY[name], x)


register(*(f"aten::{n}" for n in _UNARY), *(f"aten::{n}_" for n in _UNARY))(_unary)


@register("aten::gelu", "aten::gelu_")
def _gelu(node: TorchNode) -> Value:
    x = node.tensor(0)
    approximate = node.arg(1, "none")
    half = node.call("multiply", x, node.scalar(0.5, x.dtype))
    if approximate == "tanh":
        cube = node.call("multiply", node.call("multiply", x, x), x)
        inner = node.call("add", x, node.call("multiply", cube, node.scalar(0.044715, x.dtype)))
        inner = node.call("multiply", inner, node.scalar(math.sqrt(2.0 / math.pi), x.dtype))
        return node.call(
            "multiply", half, node.call("add", node.call("tanh", inner), node.scalar(1.0, x.dtype))
        )
    if approximate != "none":
        raise node.error(f"approximate={approximate!r} is not one of 'none', 'tanh'")
    scaled = node.call("multiply", x, node.scalar(1.0 / math.sqrt(2.0), x.dtype))
    return node.call(
        "multiply", half, node.call("add", node.call("erf", scaled), node.scalar(1.0, x.dtype))
    )


@register("aten::silu", "aten::silu_")
def _silu(node: TorchNode) -> Value:
    x = node.tensor(0)
    return node.call("multiply", x, node.call("sigmoid", x))


@register("aten::hardswish", "aten::hardswish_")
def _hardswish(node: TorchNode) -> Value:
    return node.onnx("HardSwish", [node.tensor(0)])


@register("aten::hardsigmoid", "aten::hardsigmoid_")
def _hardsigmoid(node: TorchNode) -> Value:
    return node.onnx("HardSigmoid", [node.tensor(0)], alpha=1.0 / 6.0, beta=0.5)


@register("aten::elu", "aten::elu_")
def _elu(node: TorchNode) -> Value:
    if node.arg(2, 1) != 1 or node.arg(3, 1) != 1:
        raise node.unsupported("elu with scale or input_scale other than 1")
    return node.onnx("Elu", [node.tensor(0)], alpha=float(node.arg(1, 1.0)))


def _softplus_of(node: TorchNode, x: Value) -> Value:
    return node.onnx("Softplus", [x])


@register("aten::softplus")
def _softplus(node: TorchNode) -> Value:
    x = node.tensor(0)
    beta = float(node.arg(1, 1.0))
    # torch switches to the identity above `threshold`, where log1p(exp(x)) equals x to
    # float precision anyway (threshold 20 by default).
    if beta == 1.0:
        return _softplus_of(node, x)
    scaled = node.call("multiply", x, node.scalar(beta, x.dtype))
    return node.call("divide", _softplus_of(node, scaled), node.scalar(beta, x.dtype))


@register("aten::mish", "aten::mish_")
def _mish(node: TorchNode) -> Value:
    x = node.tensor(0)
    return node.call("multiply", x, node.call("tanh", _softplus_of(node, x)))


@register("aten::prelu")
def _prelu(node: TorchNode) -> Value:
    x, slope = node.tensor(0), node.tensor(1)
    if slope.ndim == 1 and x.ndim > 2 and node.shape_of(slope)[0] > 1:
        # torch applies one slope per channel (axis 1); ONNX broadcasts from the right.
        slope = node.call("reshape", slope, newshape=(-1,) + (1,) * (x.ndim - 2))
    return node.onnx("PRelu", [x, slope])


@register("aten::leaky_relu", "aten::leaky_relu_")
def _leaky_relu(node: TorchNode) -> Value:
    return node.call("nn.leaky_relu", node.tensor(0), alpha=float(node.arg(1, 0.01)))


def _clip(node: TorchNode, x: Value, low: AnyT, high: AnyT) -> Value:
    if isinstance(low, Value) or isinstance(high, Value):
        raise node.unsupported("tensor bounds; only numbers (or None) are supported")
    low = -math.inf if low is None else float(low)
    high = math.inf if high is None else float(high)
    return node.call("clip", x, a_min=low, a_max=high)


@register("aten::clamp", "aten::clamp_", "aten::clip", "aten::hardtanh", "aten::hardtanh_")
def _clamp(node: TorchNode) -> Value:
    x = node.tensor(0)
    if node.kind.startswith("aten::hardtanh"):
        return _clip(node, x, node.arg(1, -1.0), node.arg(2, 1.0))
    return _clip(node, x, node.arg(1), node.arg(2))


@register("aten::relu6", "aten::relu6_")
def _relu6(node: TorchNode) -> Value:
    return _clip(node, node.tensor(0), 0.0, 6.0)


@register(
    "aten::dropout",
    "aten::dropout_",
    "aten::feature_dropout",
    "aten::alpha_dropout",
    "aten::feature_alpha_dropout",
)
def _dropout(node: TorchNode) -> Value:
    # Inference: dropout is the identity (the `train` operand of a traced eval module is
    # False; a module traced in training mode would not match torch anyway).
    return node.tensor(0)


@register("aten::to", "aten::type_as")
def _to(node: TorchNode) -> Value:
    x = node.tensor(0)
    if node.kind == "aten::type_as":
        return node.cast(x, node.tensor(1).dtype)
    if isinstance(node.arg(1), Value):  # to(other): other's dtype
        return node.cast(x, node.arg(1).dtype)
    for arg in node.args[1:3]:
        if isinstance(arg, int) and not isinstance(arg, bool):
            if arg not in SCALAR_TYPES:
                raise node.unsupported(f"conversion to torch scalar type {arg}")
            return node.cast(x, SCALAR_TYPES[arg])
    return x


@register("aten::masked_fill", "aten::masked_fill_")
def _masked_fill(node: TorchNode) -> Value:
    x, mask = node.tensor(0), node.tensor(1)
    fill = node.cast(node.as_value(node.arg(2), x), x.dtype)
    return node.call("where", node.cast(mask, "bool"), fill, x)


@register("aten::where")
def _where(node: TorchNode) -> Value:
    condition = node.cast(node.tensor(0), "bool")
    a, b = promote(node, node.arg(1), node.arg(2))
    return node.call("where", condition, a, b)
