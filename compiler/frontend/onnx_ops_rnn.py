"""ONNX ``LSTM``, ``GRU`` and ``RNN``: recurrent layers over a sequence of static length.

Compiler layer (``compiler.frontend``); does not import ``onnx``. A layer becomes Relay
operators, one step per time step: the input's products with ``W`` for every step at once
(one dense over ``seq x batch`` rows), then per step the product of the previous hidden
state with ``R`` and the gates. The sequence length must be known when the model is
imported; a model whose length varies is exported with ``Loop`` instead.

Every attribute of opset 7 to 22 is read: ``direction`` (forward, reverse, bidirectional),
``activations`` with ``activation_alpha``/``activation_beta``, ``clip``, ``hidden_size``,
``layout`` (opset 14: batch first), LSTM's ``input_forget`` and peepholes ``P``, GRU's
``linear_before_reset``. ``sequence_lens`` is read when known at import time: a batch entry
shorter than the sequence keeps its state and gives zeros past its length (forward
direction), as onnxruntime does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from compiler.frontend.onnx_context import NodeContext, Value
from compiler.frontend.onnx_registry import register

Activation = Callable[[Value], Value]

#: Each activation's default (alpha, beta): ONNX's values for the operators of that name;
#: ``None`` where the function takes no such parameter.
_PARAMETERS: dict[str, tuple[float | None, float | None]] = {
    "Relu": (None, None),
    "Tanh": (None, None),
    "Sigmoid": (None, None),
    "Softsign": (None, None),
    "Softplus": (None, None),
    "Affine": (1.0, 0.0),
    "LeakyRelu": (0.01, None),
    "ThresholdedRelu": (1.0, None),
    "ScaledTanh": (1.0, 1.0),
    "HardSigmoid": (0.2, 0.5),
    "Elu": (1.0, None),
}

#: Per layer kind: (gates, default activations of one direction, where the gates'
#: rows sit in W and R).
_LAYERS = {
    "LSTM": (4, ("Sigmoid", "Tanh", "Tanh")),
    "GRU": (3, ("Sigmoid", "Tanh")),
    "RNN": (1, ("Tanh",)),
}


def _activation(node: NodeContext, name: str, alpha: float | None, beta: float | None):
    """The ONNX activation function ``name`` as a builder of Relay calls."""
    dtype = "float32"

    def scalar(v: float) -> Value:
        return node.scalar(v, dtype)

    simple = {"Relu": "nn.relu", "Tanh": "tanh", "Sigmoid": "sigmoid"}
    if name in simple:
        return lambda x: node.call(simple[name], x)
    if name == "Softsign":
        return lambda x: node.call("divide", x, node.call("add", scalar(1.0), node.call("abs", x)))
    if name == "Softplus":
        # log(1 + exp(x)) without overflow: max(x, 0) + log(1 + exp(-|x|)).
        return lambda x: node.call(
            "add",
            node.call("maximum", x, scalar(0.0)),
            node.call(
                "log",
                node.call(
                    "add", scalar(1.0), node.call("exp", node.call("negative", node.call("abs", x)))
                ),
            ),
        )
    if name == "Affine":
        return lambda x: node.call("add", node.call("multiply", x, scalar(alpha)), scalar(beta))
    if name == "LeakyRelu":
        return lambda x: node.call("nn.leaky_relu", x, alpha=float(alpha))
    if name == "ThresholdedRelu":
        return lambda x: node.call("where", node.call("greater", x, scalar(alpha)), x, scalar(0.0))
    if name == "ScaledTanh":
        return lambda x: node.call(
            "multiply", node.call("tanh", node.call("multiply", x, scalar(beta))), scalar(alpha)
        )
    if name == "HardSigmoid":
        return lambda x: node.call(
            "clip", node.call("add", node.call("multiply", x, scalar(alpha)), scalar(beta)),
            a_min=0.0, a_max=1.0,
        )  # fmt: skip
    if name == "Elu":
        return lambda x: node.call(
            "where",
            node.call("less", x, scalar(0.0)),
            node.call(
                "multiply", node.call("subtract", node.call("exp", x), scalar(1.0)), scalar(alpha)
            ),
            x,
        )
    raise node.unsupported(
        f"activation {name!r} is not supported; supported: {', '.join(sorted(_PARAMETERS))}"
    )


def _activations(
    node: NodeContext, directions: int, defaults: Sequence[str]
) -> list[list[Activation]]:
    """Each direction's activation functions, alphas and betas consumed in order."""
    names = node.attr("activations", None)
    count = len(defaults)
    if names is None:
        names = list(defaults) * directions
    names = [n.decode() if isinstance(n, bytes) else str(n) for n in names]
    if len(names) != count * directions:
        raise node.error(
            f"activations lists {len(names)} functions; {node.op_type} with {directions} "
            f"direction(s) takes {count * directions}"
        )
    alphas = list(node.attr("activation_alpha", []) or [])
    betas = list(node.attr("activation_beta", []) or [])
    built: list[Activation] = []
    for name in names:
        canonical = next((k for k in _PARAMETERS if k.lower() == name.lower()), name)
        if canonical not in _PARAMETERS:
            raise node.unsupported(
                f"activation {name!r} is not supported; supported: {', '.join(sorted(_PARAMETERS))}"
            )
        default_alpha, default_beta = _PARAMETERS[canonical]
        alpha = alphas.pop(0) if default_alpha is not None and alphas else default_alpha
        beta = betas.pop(0) if default_beta is not None and betas else default_beta
        built.append(_activation(node, canonical, alpha, beta))
    return [built[d * count : (d + 1) * count] for d in range(directions)]


def _static_dims(node: NodeContext, value: Value, what: str) -> tuple[int, ...]:
    shape = value.static_shape()
    if shape is None:
        raise node.unsupported(
            f"{what} must have a static shape (the sequence is unrolled); it is "
            f"{value.type}; export the model with a fixed sequence length, or with Loop"
        )
    return shape


class _Gates:
    """Slices of a ``(batch, gates * hidden)`` value, one per gate."""

    def __init__(self, node: NodeContext, hidden: int) -> None:
        self.node = node
        self.hidden = hidden

    def __call__(self, value: Value, index: int) -> Value:
        h = self.hidden
        return self.node.call(
            "strided_slice", value, begin=[index * h], end=[(index + 1) * h], axes=[1]
        )


@register("LSTM", "GRU", "RNN")
def _recurrent(node: NodeContext) -> list[Value | None]:
    kind = node.op_type
    gates, defaults = _LAYERS[kind]
    direction = node.check_attr("direction", ("forward", "reverse", "bidirectional"), "forward")
    if isinstance(direction, bytes):
        direction = direction.decode()
    directions = 2 if direction == "bidirectional" else 1
    layout = node.check_attr("layout", (0, 1), 0) if node.opset >= 14 else 0
    x = node.input(0)
    if x.dtype != "float32":
        raise node.unsupported(f"X must be float32, it is {x.dtype}")
    dims = _static_dims(node, x, "X")
    if len(dims) != 3:
        raise node.error(f"X must have rank 3, it has shape {dims}")
    seq, batch, width = (dims[1], dims[0], dims[2]) if layout else dims
    if layout:
        x = node.call("transpose", x, axes=[1, 0, 2])
    w = node.static(1, "W").astype("float32")
    r = node.static(2, "R").astype("float32")
    hidden = node.attr("hidden_size", None)
    hidden = int(hidden) if hidden is not None else r.shape[-1]
    if w.shape != (directions, gates * hidden, width):
        raise node.error(
            f"W has shape {w.shape}; expected {(directions, gates * hidden, width)} for "
            f"{directions} direction(s), hidden_size {hidden} and input size {width}"
        )
    if r.shape != (directions, gates * hidden, hidden):
        raise node.error(f"R has shape {r.shape}; expected {(directions, gates * hidden, hidden)}")
    b = node.optional_static(3, "B")
    b = np.zeros((directions, 2 * gates * hidden), "float32") if b is None else b.astype("float32")
    if b.shape != (directions, 2 * gates * hidden):
        raise node.error(f"B has shape {b.shape}; expected {(directions, 2 * gates * hidden)}")
    lengths = node.optional_static(4, "sequence_lens")
    if lengths is not None:
        lengths = lengths.astype("int64").reshape(-1)
        if lengths.shape != (batch,) or (lengths < 0).any() or (lengths > seq).any():
            raise node.error(f"sequence_lens {lengths.tolist()} must give 0..{seq} per batch entry")
        if (lengths == seq).all():
            lengths = None
        elif direction != "forward":
            raise node.unsupported(
                "sequence_lens shorter than the sequence are supported in the forward "
                "direction only"
            )
    states = [_initial(node, 5, "initial_h", directions, batch, hidden, layout)]
    peepholes = None
    if kind == "LSTM":
        states.append(_initial(node, 6, "initial_c", directions, batch, hidden, layout))
        peepholes = node.optional_static(7, "P")
        if peepholes is not None and peepholes.shape != (directions, 3 * hidden):
            raise node.error(f"P has shape {peepholes.shape}; expected {(directions, 3 * hidden)}")
    clip = node.attr("clip", None)
    functions = _activations(node, directions, defaults)
    flat_x = node.call("reshape", x, newshape=[seq * batch, width])
    outputs, finals = [], []
    for d in range(directions):
        reverse = direction == "reverse" or d == 1
        # The input's share of every gate for every step at once, W's and R's biases added.
        bias = b[d, : gates * hidden] + (b[d, gates * hidden :] if kind != "GRU" else 0)
        projected = node.call("nn.dense", flat_x, node.const(w[d]))
        projected = node.call("add", projected, node.const(bias))
        projected = node.call("reshape", projected, newshape=[seq, batch, gates * hidden])
        step_inputs = [
            node.call(
                "squeeze",
                node.call("strided_slice", projected, begin=[t], end=[t + 1], axes=[0]),
                axis=[0],
            )
            for t in range(seq)
        ]
        run = _Direction(node, kind, hidden, r[d], b[d], functions[d], clip, peepholes, d)
        ys, final = run.steps(step_inputs, [s[d] for s in states], reverse, lengths)
        outputs.append(node.call("stack", ys, axis=0))
        finals.append(final)
    # Y: (seq, directions, batch, hidden); Y_h and Y_c: (directions, batch, hidden).
    y = node.call("stack", outputs, axis=1)
    results: list[Value | None] = [y]
    for i in range(len(finals[0])):
        results.append(node.call("stack", [f[i] for f in finals], axis=0))
    if layout:
        results[0] = node.call("transpose", y, axes=[2, 0, 1, 3])
        results[1:] = [node.call("transpose", v, axes=[1, 0, 2]) for v in results[1:]]
    return results[: max(1, node.num_outputs)]


def _initial(
    node: NodeContext, index: int, what: str, directions: int, batch: int, hidden: int, layout: int
) -> list[Value]:
    """An initial state as one ``(batch, hidden)`` value per direction (zeros if omitted)."""
    value = node.optional(index)
    if value is None:
        zero = node.const(np.zeros((batch, hidden), "float32"))
        return [zero] * directions
    expected = (batch, directions, hidden) if layout else (directions, batch, hidden)
    if value.static_shape() is not None and value.static_shape() != expected:
        raise node.error(f"{what} has shape {value.static_shape()}; expected {expected}")
    axis = 1 if layout else 0
    return [
        node.call(
            "squeeze",
            node.call("strided_slice", value, begin=[d], end=[d + 1], axes=[axis]),
            axis=[axis],
        )
        for d in range(directions)
    ]


class _Direction:
    """The steps of one direction of a layer."""

    def __init__(
        self,
        node: NodeContext,
        kind: str,
        hidden: int,
        r: np.ndarray,
        b: np.ndarray,
        functions: list[Activation],
        clip: float | None,
        peepholes: np.ndarray | None,
        direction: int,
    ) -> None:
        self.node = node
        self.kind = kind
        self.hidden = hidden
        self.r = node.const(r)
        self.functions = functions
        self.clip = clip
        self.gate = _Gates(node, hidden)
        gates = r.shape[0] // hidden
        self.recurrent_bias = node.const(b[gates * hidden :])
        if peepholes is not None:
            p = peepholes[direction].astype("float32")
            self.peep = [node.const(p[i * hidden : (i + 1) * hidden]) for i in range(3)]
        else:
            self.peep = None
        self.input_forget = bool(node.attr("input_forget", 0)) if kind == "LSTM" else False
        self.linear_before_reset = (
            bool(node.attr("linear_before_reset", 0)) if kind == "GRU" else False
        )

    def _clipped(self, value: Value) -> Value:
        if self.clip is None:
            return value
        return self.node.call("clip", value, a_min=-float(self.clip), a_max=float(self.clip))

    def steps(
        self,
        inputs: list[Value],
        state: list[Value],
        reverse: bool,
        lengths: np.ndarray | None,
    ) -> tuple[list[Value], list[Value]]:
        """Every step's output in sequence order, and the final state."""
        node = self.node
        order = range(len(inputs) - 1, -1, -1) if reverse else range(len(inputs))
        ys: list[Value | None] = [None] * len(inputs)
        for t in order:
            new = self.step(inputs[t], state)
            if lengths is not None:
                # Entries past their length keep their state and output zeros.
                live = node.const((t < lengths).reshape(-1, 1))
                new = [node.call("where", live, n, s) for n, s in zip(new, state)]
                ys[t] = node.call("where", live, new[0], node.scalar(0.0, "float32"))
            else:
                ys[t] = new[0]
            state = new
        return ys, state  # type: ignore[return-value]

    def step(self, x_part: Value, state: list[Value]) -> list[Value]:
        node, gate = self.node, self.gate
        h = state[0]
        if self.kind == "GRU":
            return [self._gru(x_part, h)]
        recurrent = node.call("nn.dense", h, self.r)
        total = node.call("add", x_part, recurrent)
        if self.kind == "RNN":
            return [self.functions[0](self._clipped(total))]
        f, g, act_h = self.functions
        c = state[1]
        # W's rows are the gates i, o, f, c; peepholes P are i, o, f.
        pre_i, pre_o, pre_f, pre_c = (gate(total, k) for k in range(4))
        if self.peep is not None:
            pre_i = node.call("add", pre_i, node.call("multiply", self.peep[0], c))
            pre_f = node.call("add", pre_f, node.call("multiply", self.peep[2], c))
        i = f(self._clipped(pre_i))
        if self.input_forget:
            forget = node.call("subtract", node.scalar(1.0, "float32"), i)
        else:
            forget = f(self._clipped(pre_f))
        candidate = g(self._clipped(pre_c))
        c_new = node.call(
            "add", node.call("multiply", forget, c), node.call("multiply", i, candidate)
        )
        if self.peep is not None:
            pre_o = node.call("add", pre_o, node.call("multiply", self.peep[1], c_new))
        o = f(self._clipped(pre_o))
        return [node.call("multiply", o, act_h(c_new)), c_new]

    def _gru(self, x_part: Value, h: Value) -> Value:
        node, gate = self.node, self.gate
        f, g = self.functions
        # W's rows are the gates z, r, h; x_part holds W's bias, R's bias is added here.
        recurrent = node.call("add", node.call("nn.dense", h, self.r), self.recurrent_bias)
        z = f(self._clipped(node.call("add", gate(x_part, 0), gate(recurrent, 0))))
        reset = f(self._clipped(node.call("add", gate(x_part, 1), gate(recurrent, 1))))
        if self.linear_before_reset:
            mixed = node.call("multiply", reset, gate(recurrent, 2))
        else:
            hidden = self.hidden
            r_h = node.call("strided_slice", self.r, begin=[2 * hidden], end=[3 * hidden], axes=[0])
            bias_h = node.call(
                "strided_slice", self.recurrent_bias, begin=[2 * hidden], end=[3 * hidden], axes=[0]
            )
            mixed = node.call(
                "add", node.call("nn.dense", node.call("multiply", reset, h), r_h), bias_h
            )
        candidate = g(self._clipped(node.call("add", gate(x_part, 2), mixed)))
        one_minus_z = node.call("subtract", node.scalar(1.0, "float32"), z)
        return node.call(
            "add", node.call("multiply", one_minus_z, candidate), node.call("multiply", z, h)
        )
