"""ONNX LSTM, GRU and RNN imported by from_onnx agree with onnxruntime and, without it, with
onnx's numpy reference (returns): every direction, both layouts, biases, initial states,
peepholes, clip, custom activations, GRU's linear_before_reset and LSTM's input_forget,
and sequence_lens; a sequence of unknown length and bad weights get errors (invalid). The
reference ignores clip, input_forget and sequence_lens and knows few activations: those
need onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")

from compiler import relay
from compiler.frontend import OnnxImportError, OpNotImplemented
from tests.compiler.frontend._onnx_helpers import (
    HAVE_ORT,
    check_against_ort,
    check_against_reference,
    needs_ort,
    run_vm,
    single_op,
)

RNG = np.random.default_rng(7)
SEQ, BATCH, INPUT, HIDDEN = 5, 3, 4, 6
GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}


def randn(*shape: int, scale: float = 0.5) -> np.ndarray:
    return (RNG.standard_normal(shape) * scale).astype("float32")


def weights(kind: str, directions: int) -> dict[str, np.ndarray]:
    g = GATES[kind]
    return {
        "W": randn(directions, g * HIDDEN, INPUT),
        "R": randn(directions, g * HIDDEN, HIDDEN),
        "B": randn(directions, 2 * g * HIDDEN),
    }


def check(proto, feeds, rtol=1e-4, atol=1e-5, ort=True) -> None:
    check_against_reference(proto, feeds, rtol=rtol, atol=atol)
    if ort and HAVE_ORT:
        check_against_ort(proto, feeds, rtol=rtol, atol=atol)


def layer(kind, attrs, *, directions=1, layout=0, states=False, peepholes=False, lengths=None):
    x = randn(BATCH, SEQ, INPUT) if layout else randn(SEQ, BATCH, INPUT)
    constants = weights(kind, directions)
    order = ["x", "W", "R", "B"]
    inputs = {"x": x}
    if lengths is not None:
        constants["L"] = np.asarray(lengths, "int32")
    order.append("L" if lengths is not None else "")
    if states:
        shape = (BATCH, directions, HIDDEN) if layout else (directions, BATCH, HIDDEN)
        inputs["h0"] = randn(*shape)
        order.append("h0")
        if kind == "LSTM":
            inputs["c0"] = randn(*shape)
            order.append("c0")
    if peepholes:
        while len(order) < 7:
            order.append("")
        constants["P"] = randn(directions, 3 * HIDDEN)
        order.append("P")
    outputs = 3 if kind == "LSTM" else 2
    all_attrs = {"hidden_size": HIDDEN, **attrs}
    if layout:
        all_attrs["layout"] = 1
    return single_op(kind, inputs, all_attrs, constants, order, outputs=outputs, opset=14)


# ---- returns ------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_every_direction_with_initial_states(kind, direction):
    directions = 2 if direction == "bidirectional" else 1
    proto, feeds = layer(kind, {"direction": direction}, directions=directions, states=True)
    check(proto, feeds)


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"])
def test_batch_first_layout(kind):
    proto, feeds = layer(kind, {"direction": "bidirectional"}, directions=2, layout=1, states=True)
    check(proto, feeds, ort=False)  # onnxruntime refuses layout 1


def test_lstm_peepholes():
    proto, feeds = layer("LSTM", {}, states=True, peepholes=True)
    check(proto, feeds)


@needs_ort
def test_lstm_clip_and_input_forget():
    proto, feeds = layer("LSTM", {"clip": 0.7, "input_forget": 1}, states=True, peepholes=True)
    check_against_ort(proto, feeds, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("linear_before_reset", [0, 1])
def test_gru_linear_before_reset(linear_before_reset):
    proto, feeds = layer("GRU", {"linear_before_reset": linear_before_reset}, states=True)
    check(proto, feeds)


@needs_ort
def test_custom_activations_consume_alphas_and_betas_in_order():
    cases = [
        ("LSTM", ["HardSigmoid", "LeakyRelu", "Softsign"], [0.3, 0.05], [0.4]),
        ("GRU", ["Elu", "ScaledTanh"], [0.5, 1.5], [0.7]),
        ("RNN", ["Relu"], [], []),
    ]
    for kind, names, alphas, betas in cases:
        attrs = {"activations": names}
        if alphas:
            attrs.update(activation_alpha=alphas, activation_beta=betas)
        proto, feeds = layer(kind, attrs)
        check_against_ort(proto, feeds, rtol=1e-4, atol=1e-4)


@needs_ort
def test_shorter_sequence_lengths_keep_the_state_and_give_zeros():
    # (The reference evaluator ignores sequence_lens.)
    proto, feeds = layer("LSTM", {}, lengths=[SEQ, 2, 1], states=True)
    check_against_ort(proto, feeds, rtol=1e-4, atol=1e-5)


# ---- invalid ------------------------------------------------------------------------------------


def test_a_sequence_of_unknown_length_names_the_way_out():
    proto, _ = layer("GRU", {})
    proto.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "seq"
    with pytest.raises(OpNotImplemented, match=r"static shape.*Loop"):
        relay.frontend.from_onnx(proto)


def test_weights_of_the_wrong_shape_are_named():
    proto, feeds = layer("RNN", {"hidden_size": HIDDEN + 1})
    with pytest.raises(OnnxImportError, match="W has shape"):
        run_vm(proto, feeds)


def test_an_unknown_activation_is_named():
    proto, feeds = layer("RNN", {"activations": ["Swish"]})
    with pytest.raises(OpNotImplemented, match="activation 'Swish'"):
        run_vm(proto, feeds)
