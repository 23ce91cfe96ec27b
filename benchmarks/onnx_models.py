"""The benchmark models as ONNX graphs, built with ``onnx.helper`` from the same numpy weights.

Benchmarks layer; needs the optional ``onnx`` package (the ``bench`` extra). Each function
takes the weights and sizes of the model of the same name in :mod:`benchmarks.models` and
returns the serialized model (bytes) for an onnxruntime session. Input names match the
Relay ``@main``'s data parameters; the single output is ``y``. Opset 17.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from benchmarks.models import chain_ops, resnet18_blocks

OPSET = 17

_ONNX_OP = {"sin": "Sin", "cos": "Cos", "multiply": "Mul", "add": "Add"}


class _Graph:
    """Nodes and initializers under construction, with fresh value names."""

    def __init__(self) -> None:
        self.nodes: list = []
        self.initializers: list = []
        self._count = 0

    def fresh(self, hint: str) -> str:
        self._count += 1
        return f"{hint}_{self._count}"

    def const(self, value: np.ndarray, hint: str = "c") -> str:
        from onnx import numpy_helper

        name = self.fresh(hint)
        self.initializers.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def op(self, op_type: str, inputs: Sequence[str], hint: str | None = None, **attrs) -> str:
        from onnx import helper

        out = self.fresh(hint or op_type.lower())
        self.nodes.append(helper.make_node(op_type, list(inputs), [out], **attrs))
        return out

    def model(self, inputs: list[tuple[str, Sequence[int]]], output: str, shape) -> bytes:
        from onnx import TensorProto, checker, helper

        # The last value is renamed ``y`` so every model has the same output name.
        self.nodes.append(helper.make_node("Identity", [output], ["y"]))
        graph = helper.make_graph(
            self.nodes,
            "benchmark",
            [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(s)) for n, s in inputs],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(shape))],
            initializer=self.initializers,
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
        model.ir_version = 8
        checker.check_model(model)
        return model.SerializeToString()


def mlp(weights: dict, batch: int = 1) -> bytes:
    """The MLP: ``Gemm`` (``transB=1``) layers with ``Relu`` between them, ``Softmax`` last."""
    g = _Graph()
    layers = len(weights) // 2
    h = "x"
    for i in range(layers):
        w, b = g.const(weights[f"w{i}"], f"w{i}"), g.const(weights[f"b{i}"], f"b{i}")
        h = g.op("Gemm", [h, w, b], transB=1)
        if i < layers - 1:
            h = g.op("Relu", [h])
    h = g.op("Softmax", [h], axis=-1)
    out_features = weights[f"w{layers - 1}"].shape[0]
    return g.model([("x", (batch, weights["w0"].shape[1]))], h, (batch, out_features))


def resnet18(weights: dict, batch: int = 1, image: int = 224) -> bytes:
    """ResNet-18 with ``BatchNormalization`` nodes (onnxruntime folds them into the convs)."""
    g = _Graph()
    width = weights["conv1_w"].shape[0]

    def conv(h: str, name: str, stride: int, padding: int) -> str:
        w = weights[name]
        return g.op(
            "Conv",
            [h, g.const(w, name)],
            kernel_shape=list(w.shape[2:]),
            strides=[stride, stride],
            pads=[padding] * 4,
        )

    def bn(h: str, name: str) -> str:
        stats = [g.const(weights[f"{name}_{p}"], name) for p in ("gamma", "beta", "mean", "var")]
        return g.op("BatchNormalization", [h, *stats], epsilon=1e-5)

    h = g.op("Relu", [bn(conv("data", "conv1_w", 2, 3), "bn1")])
    h = g.op("MaxPool", [h], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    for prefix, _, _, stride in resnet18_blocks(width):
        shortcut = h
        if f"{prefix}_down_w" in weights:
            shortcut = bn(conv(h, f"{prefix}_down_w", stride, 0), f"{prefix}_downbn")
        y = g.op("Relu", [bn(conv(h, f"{prefix}_conv1_w", stride, 1), f"{prefix}_bn1")])
        y = bn(conv(y, f"{prefix}_conv2_w", 1, 1), f"{prefix}_bn2")
        h = g.op("Relu", [g.op("Add", [y, shortcut])])
    h = g.op("Flatten", [g.op("GlobalAveragePool", [h])])
    h = g.op(
        "Gemm", [h, g.const(weights["fc_w"], "fc_w"), g.const(weights["fc_b"], "fc_b")], transB=1
    )
    in_channels = weights["conv1_w"].shape[1]
    classes = weights["fc_w"].shape[0]
    return g.model([("data", (batch, in_channels, image, image))], h, (batch, classes))


def transformer(weights: dict, seq: int = 128, heads: int = 4) -> bytes:
    """The encoder layer: ``MatMul``/``Add`` projections, per-head ``MatMul`` and ``Softmax``,
    ``LayerNormalization``, and gelu through ``Erf``."""
    g = _Graph()
    width = weights["wq"].shape[0]
    head_width = width // heads

    def linear(h: str, w: str, b: str) -> str:
        # MatMul with the transposed weight, which is what exporters emit.
        product = g.op("MatMul", [h, g.const(np.ascontiguousarray(weights[w].T), w)])
        return g.op("Add", [product, g.const(weights[b], b)])

    to_heads = g.const(np.array([seq, heads, head_width], np.int64), "to_heads")
    to_rows = g.const(np.array([seq, width], np.int64), "to_rows")

    def split_heads(h: str) -> str:
        return g.op("Transpose", [g.op("Reshape", [h, to_heads])], perm=[1, 0, 2])

    def norm(h: str, name: str) -> str:
        gamma, beta = g.const(weights[f"{name}_gamma"]), g.const(weights[f"{name}_beta"])
        return g.op("LayerNormalization", [h, gamma, beta], axis=-1, epsilon=1e-5)

    q = split_heads(linear("x", "wq", "bq"))
    k = split_heads(linear("x", "wk", "bk"))
    v = split_heads(linear("x", "wv", "bv"))
    scores = g.op("MatMul", [q, g.op("Transpose", [k], perm=[0, 2, 1])])
    scale = g.const(np.array(1.0 / np.sqrt(head_width), np.float32), "scale")
    attn = g.op("Softmax", [g.op("Mul", [scores, scale])], axis=-1)
    context = g.op("MatMul", [attn, v])
    context = g.op("Reshape", [g.op("Transpose", [context], perm=[1, 0, 2]), to_rows])
    y = norm(g.op("Add", ["x", linear(context, "wo", "bo")]), "ln1")
    hidden = linear(y, "w1", "b1")
    erf = g.op("Erf", [g.op("Mul", [hidden, g.const(np.array(1 / np.sqrt(2), np.float32))])])
    gelu = g.op(
        "Mul",
        [
            g.op("Mul", [hidden, g.const(np.array(0.5, np.float32))]),
            g.op("Add", [erf, g.const(np.array(1.0, np.float32))]),
        ],
    )
    out = norm(g.op("Add", [y, linear(gelu, "w2", "b2")]), "ln2")
    return g.model([("x", (seq, width))], out, (seq, width))


def _lstm_cell(g: _Graph, x: str, h: str, c: str, w_ih: str, w_hh: str, b: str):
    """One LSTM step on ``(1, input)`` ``x``; returns the names of the new ``h`` and ``c``."""
    from onnx import helper

    gates = g.op("Add", [g.op("Gemm", [x, w_ih, b], transB=1), g.op("Gemm", [h, w_hh], transB=1)])
    parts = [g.fresh(f"gate{k}") for k in range(4)]
    g.nodes.append(helper.make_node("Split", [gates], parts, axis=1))
    i, f, o = (g.op("Sigmoid", [parts[k]]) for k in (0, 1, 3))
    cell = g.op("Tanh", [parts[2]])
    c_next = g.op("Add", [g.op("Mul", [f, c]), g.op("Mul", [i, cell])])
    h_next = g.op("Mul", [o, g.op("Tanh", [c_next])])
    return h_next, c_next


def _lstm_inputs(steps: int, input_size: int, hidden: int) -> list[tuple[str, tuple]]:
    return [("xs", (steps, 1, input_size)), ("h0", (1, hidden)), ("c0", (1, hidden))]


def lstm_loop(weights: dict, steps: int = 32) -> bytes:
    """The LSTM loop as one ONNX ``Loop`` node whose body is the cell (trip count ``steps``)."""
    from onnx import TensorProto, helper

    hidden = weights["w_hh"].shape[1]
    input_size = weights["w_ih"].shape[1]
    g = _Graph()
    w_ih, w_hh, b = (g.const(weights[n], n) for n in ("w_ih", "w_hh", "b"))
    body = _Graph()
    body._count = 1000  # keep body names apart from the outer graph's
    x = body.op("Gather", ["xs", "iter"], axis=0)
    h_next, c_next = _lstm_cell(body, x, "h_in", "c_in", w_ih, w_hh, b)
    body.nodes.append(helper.make_node("Identity", ["cond_in"], ["cond_out"]))
    body.nodes.append(helper.make_node("Identity", [h_next], ["h_out"]))
    body.nodes.append(helper.make_node("Identity", [c_next], ["c_out"]))
    state = [1, hidden]
    body_graph = helper.make_graph(
        body.nodes,
        "lstm_step",
        [
            helper.make_tensor_value_info("iter", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            helper.make_tensor_value_info("h_in", TensorProto.FLOAT, state),
            helper.make_tensor_value_info("c_in", TensorProto.FLOAT, state),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("h_out", TensorProto.FLOAT, state),
            helper.make_tensor_value_info("c_out", TensorProto.FLOAT, state),
        ],
    )
    trips = g.const(np.array(steps, np.int64), "trips")
    keep_going = g.const(np.array(True), "cond")
    g.nodes.append(
        helper.make_node(
            "Loop", [trips, keep_going, "h0", "c0"], ["h_last", "c_last"], body=body_graph
        )
    )
    return g.model(_lstm_inputs(steps, input_size, hidden), "h_last", state)


def lstm_unrolled(weights: dict, steps: int = 32) -> bytes:
    """The LSTM loop unrolled: ``steps`` copies of the cell in one graph."""
    hidden = weights["w_hh"].shape[1]
    input_size = weights["w_ih"].shape[1]
    g = _Graph()
    w_ih, w_hh, b = (g.const(weights[n], n) for n in ("w_ih", "w_hh", "b"))
    h, c = "h0", "c0"
    for t in range(steps):
        x = g.op("Gather", ["xs", g.const(np.array(t, np.int64), "t")], axis=0)
        h, c = _lstm_cell(g, x, h, c, w_ih, w_hh, b)
    return g.model(_lstm_inputs(steps, input_size, hidden), h, (1, hidden))


def chain(length: int = 100, shape: Sequence[int] = (10, 10)) -> bytes:
    """The elementwise chain: one node per operator, scalar constants as initializers."""
    g = _Graph()
    h = "x"
    for name, constant in chain_ops(length):
        inputs = [h] if constant is None else [h, g.const(np.array(constant, np.float32))]
        h = g.op(_ONNX_OP[name], inputs)
    return g.model([("x", tuple(shape))], h, tuple(shape))
