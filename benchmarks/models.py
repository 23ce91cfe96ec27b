"""The benchmark models: random numpy weights, built once, and their Relay form.

Benchmarks layer (may import everything). Each model has three parts here:

- ``<model>_weights(...)``: a dict of parameter name -> float32 array, drawn from a seeded
  generator, so every form of the model (Relay here, ONNX in :mod:`benchmarks.onnx_models`,
  torch in :mod:`benchmarks.torch_models`, numpy in :mod:`benchmarks.numpy_models`) computes
  with the very same numbers;
- ``<model>_inputs(...)``: the example inputs, in the order of ``@main``'s data parameters;
- ``<model>(...)``: the Relay module and its ``params`` (the weights, bound by
  ``relay.vm.compile(mod, params=params)``), as TVM's model zoo returns them.

The models are the ones issue 4 names: an MLP, ResNet-18, a transformer encoder layer, an
LSTM cell looped by a recursive Relay function, and a chain of elementwise operators.
Every builder takes its sizes as arguments so a smoke test can build a tiny instance.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np

#: The seed every model's weights and inputs are drawn with unless told otherwise.
SEED = 0

#: ResNet-18: (output channels as a multiple of the stem width, first block's stride) per stage.
RESNET18_STAGES = ((1, 1), (2, 2), (4, 2), (8, 2))
RESNET18_BLOCKS_PER_STAGE = 2

#: The elementwise chain repeats these four operators; ``(name, constant or None)``.
CHAIN_PATTERN = (("sin", None), ("multiply", 1.5), ("cos", None), ("add", 0.25))


def _rng(seed: int, salt: int) -> np.random.Generator:
    # Weights and inputs use different streams so a model's input does not depend on its size.
    return np.random.default_rng([seed, salt])


def _normal(rng: np.random.Generator, shape: Sequence[int], scale: float) -> np.ndarray:
    return (scale * rng.standard_normal(tuple(shape))).astype("float32")


# --- MLP ----------------------------------------------------------------------------------------


def mlp_weights(sizes: Sequence[int] = (784, 512, 512, 10), seed: int = SEED) -> dict:
    """Weights ``w{i}`` of shape ``(out, in)`` and biases ``b{i}`` for each layer of an MLP."""
    rng = _rng(seed, 1)
    weights: dict[str, np.ndarray] = {}
    for i, (n_in, n_out) in enumerate(itertools.pairwise(sizes)):
        weights[f"w{i}"] = _normal(rng, (n_out, n_in), 1.0 / np.sqrt(n_in))
        weights[f"b{i}"] = _normal(rng, (n_out,), 0.1)
    return weights


def mlp_inputs(batch: int = 1, in_features: int = 784, seed: int = SEED) -> list[np.ndarray]:
    """The MLP's data input ``x`` of shape ``(batch, in_features)``."""
    return [_normal(_rng(seed, 2), (batch, in_features), 1.0)]


def mlp_module(weights: dict, batch: int = 1):
    """The MLP as Relay: ``dense + bias_add`` layers, relu between them, softmax at the end.

    Returns ``(mod, params)``; ``@main(%x, %w0, %b0, ...)`` with ``params`` the weights.
    """
    from compiler import relay

    layers = len(weights) // 2
    in_features = weights["w0"].shape[1]
    x = relay.var("x", shape=(batch, in_features), dtype="float32")
    free = [x]
    h = x
    for i in range(layers):
        w = relay.var(f"w{i}", shape=weights[f"w{i}"].shape, dtype="float32")
        b = relay.var(f"b{i}", shape=weights[f"b{i}"].shape, dtype="float32")
        free += [w, b]
        h = relay.nn.bias_add(relay.nn.dense(h, w), b)
        if i < layers - 1:
            h = relay.nn.relu(h)
    out = relay.nn.softmax(h, axis=-1)
    return relay.IRModule.from_expr(relay.Function(free, out)), dict(weights)


def mlp(batch: int = 1, sizes: Sequence[int] = (784, 512, 512, 10), seed: int = SEED):
    """An MLP ``sizes[0] -> ... -> sizes[-1]`` (relu, softmax) at ``batch``: ``(mod, params)``."""
    return mlp_module(mlp_weights(sizes, seed), batch)


# --- ResNet-18 ----------------------------------------------------------------------------------


def resnet18_blocks(width: int = 64) -> list[tuple[str, int, int, int]]:
    """ResNet-18's basic blocks in order: ``(prefix, in_channels, out_channels, stride)``."""
    blocks = []
    channels = width
    for stage, (mult, stride) in enumerate(RESNET18_STAGES, start=1):
        out = width * mult
        for block in range(RESNET18_BLOCKS_PER_STAGE):
            blocks.append((f"layer{stage}_{block}", channels, out, stride if block == 0 else 1))
            channels = out
    return blocks


def _add_bn(weights: dict, rng: np.random.Generator, name: str, channels: int) -> None:
    weights[f"{name}_gamma"] = rng.uniform(0.5, 1.0, channels).astype("float32")
    weights[f"{name}_beta"] = _normal(rng, (channels,), 0.1)
    weights[f"{name}_mean"] = _normal(rng, (channels,), 0.1)
    weights[f"{name}_var"] = rng.uniform(0.5, 1.5, channels).astype("float32")


def _add_conv(weights: dict, rng: np.random.Generator, name: str, shape: tuple) -> None:
    fan_in = shape[1] * shape[2] * shape[3]
    weights[name] = _normal(rng, shape, np.sqrt(2.0 / fan_in))


def resnet18_weights(
    width: int = 64, num_classes: int = 1000, in_channels: int = 3, seed: int = SEED
) -> dict:
    """ResNet-18's weights: convolutions (OIHW, no bias), batch-norm statistics, the classifier.

    Names: ``conv1_w``, ``bn1_{gamma,beta,mean,var}``, per block ``<prefix>_conv{1,2}_w``,
    ``<prefix>_bn{1,2}_*`` and, where the shape changes, ``<prefix>_down_w`` and
    ``<prefix>_downbn_*``; then ``fc_w`` ``(num_classes, 8 * width)`` and ``fc_b``.
    """
    rng = _rng(seed, 3)
    weights: dict[str, np.ndarray] = {}
    _add_conv(weights, rng, "conv1_w", (width, in_channels, 7, 7))
    _add_bn(weights, rng, "bn1", width)
    for prefix, c_in, c_out, stride in resnet18_blocks(width):
        _add_conv(weights, rng, f"{prefix}_conv1_w", (c_out, c_in, 3, 3))
        _add_bn(weights, rng, f"{prefix}_bn1", c_out)
        _add_conv(weights, rng, f"{prefix}_conv2_w", (c_out, c_out, 3, 3))
        _add_bn(weights, rng, f"{prefix}_bn2", c_out)
        if stride != 1 or c_in != c_out:
            _add_conv(weights, rng, f"{prefix}_down_w", (c_out, c_in, 1, 1))
            _add_bn(weights, rng, f"{prefix}_downbn", c_out)
    features = 8 * width
    weights["fc_w"] = _normal(rng, (num_classes, features), 1.0 / np.sqrt(features))
    weights["fc_b"] = _normal(rng, (num_classes,), 0.1)
    return weights


def resnet18_inputs(
    batch: int = 1, image: int = 224, in_channels: int = 3, seed: int = SEED
) -> list[np.ndarray]:
    """ResNet-18's data input of shape ``(batch, in_channels, image, image)``."""
    return [_normal(_rng(seed, 4), (batch, in_channels, image, image), 1.0)]


def resnet18_module(weights: dict, batch: int = 1, image: int = 224):
    """ResNet-18 (NCHW) as Relay, with ``nn.batch_norm`` in the graph: ``(mod, params)``.

    Stem: 7x7/2 convolution, batch norm, relu, 3x3/2 max pool; four stages of two basic
    blocks (3x3 convolutions with batch norm, a 1x1/2 projection where the shape changes,
    residual add, relu); global average pool, flatten, dense with bias (the logits).
    """
    from compiler import relay

    width = weights["conv1_w"].shape[0]
    in_channels = weights["conv1_w"].shape[1]
    data = relay.var("data", shape=(batch, in_channels, image, image), dtype="float32")
    variables: dict[str, object] = {}

    def param(name: str):
        if name not in variables:
            variables[name] = relay.var(name, shape=weights[name].shape, dtype="float32")
        return variables[name]

    def conv(h, name: str, stride: int, padding: int):
        w = param(name)
        return relay.nn.conv2d(
            h,
            w,
            strides=(stride, stride),
            padding=(padding, padding),
            channels=weights[name].shape[0],
            kernel_size=weights[name].shape[2:],
        )

    def bn(h, name: str):
        stats = [param(f"{name}_{part}") for part in ("gamma", "beta", "mean", "var")]
        return relay.nn.batch_norm(h, *stats, epsilon=1e-5)[0]

    h = relay.nn.relu(bn(conv(data, "conv1_w", 2, 3), "bn1"))
    h = relay.nn.max_pool2d(h, pool_size=(3, 3), strides=(2, 2), padding=(1, 1))
    for prefix, _, _, stride in resnet18_blocks(width):
        shortcut = h
        if f"{prefix}_down_w" in weights:
            shortcut = bn(conv(h, f"{prefix}_down_w", stride, 0), f"{prefix}_downbn")
        y = relay.nn.relu(bn(conv(h, f"{prefix}_conv1_w", stride, 1), f"{prefix}_bn1"))
        y = bn(conv(y, f"{prefix}_conv2_w", 1, 1), f"{prefix}_bn2")
        h = relay.nn.relu(y + shortcut)
    h = relay.nn.batch_flatten(relay.nn.global_avg_pool2d(h))
    out = relay.nn.bias_add(relay.nn.dense(h, param("fc_w")), param("fc_b"))
    free = [data, *variables.values()]
    params = {name: weights[name] for name in variables}
    return relay.IRModule.from_expr(relay.Function(free, out)), params


def resnet18(
    batch: int = 1, image: int = 224, width: int = 64, num_classes: int = 1000, seed: int = SEED
):
    """ResNet-18 at ``(batch, 3, image, image)``: ``(mod, params)``."""
    return resnet18_module(resnet18_weights(width, num_classes, seed=seed), batch, image)


# --- transformer encoder layer ------------------------------------------------------------------


def transformer_weights(width: int = 256, ff: int = 1024, seed: int = SEED) -> dict:
    """A post-norm encoder layer's weights (``(out, in)`` matrices, as torch stores them).

    Names: ``wq wk wv wo`` ``(width, width)`` with biases ``bq bk bv bo``; ``w1`` ``(ff,
    width)``, ``b1``, ``w2`` ``(width, ff)``, ``b2``; ``ln1_gamma ln1_beta ln2_gamma ln2_beta``.
    """
    rng = _rng(seed, 5)
    weights: dict[str, np.ndarray] = {}
    for name in ("q", "k", "v", "o"):
        weights[f"w{name}"] = _normal(rng, (width, width), 1.0 / np.sqrt(width))
        weights[f"b{name}"] = _normal(rng, (width,), 0.02)
    weights["w1"] = _normal(rng, (ff, width), 1.0 / np.sqrt(width))
    weights["b1"] = _normal(rng, (ff,), 0.02)
    weights["w2"] = _normal(rng, (width, ff), 1.0 / np.sqrt(ff))
    weights["b2"] = _normal(rng, (width,), 0.02)
    for norm in ("ln1", "ln2"):
        weights[f"{norm}_gamma"] = rng.uniform(0.8, 1.2, width).astype("float32")
        weights[f"{norm}_beta"] = _normal(rng, (width,), 0.02)
    return weights


def transformer_inputs(seq: int = 128, width: int = 256, seed: int = SEED) -> list[np.ndarray]:
    """The encoder layer's input: ``seq`` tokens of ``width`` features, ``(seq, width)``."""
    return [_normal(_rng(seed, 6), (seq, width), 1.0)]


def transformer_module(weights: dict, seq: int = 128, heads: int = 4):
    """A post-norm transformer encoder layer (as torch's ``TransformerEncoderLayer``): ``(mod,
    params)``.

    ``y = layer_norm(x + attention(x))``, ``out = layer_norm(y + w2 gelu(w1 y))``; attention
    splits the width into ``heads`` heads, multiplies queries and keys with
    ``nn.batch_matmul`` (heads as the batch), scales by ``1/sqrt(head width)``, takes
    ``nn.softmax`` over the keys and weights the values with a second ``nn.batch_matmul``.
    gelu is the exact one, ``x/2 (1 + erf(x/sqrt 2))``.
    """
    from compiler import relay

    width = weights["wq"].shape[0]
    if width % heads:
        raise ValueError(f"transformer width {width} is not a multiple of heads={heads}")
    head_width = width // heads
    x = relay.var("x", shape=(seq, width), dtype="float32")
    variables = {
        name: relay.var(name, shape=value.shape, dtype="float32") for name, value in weights.items()
    }
    v = variables

    def linear(h, w: str, b: str):
        return relay.nn.bias_add(relay.nn.dense(h, v[w]), v[b], axis=-1)

    def split_heads(h):
        # (seq, width) -> (heads, seq, head_width): the heads become batch_matmul's batch.
        return relay.transpose(relay.reshape(h, (seq, heads, head_width)), (1, 0, 2))

    q = split_heads(linear(x, "wq", "bq"))
    k = split_heads(linear(x, "wk", "bk"))
    val = split_heads(linear(x, "wv", "bv"))
    scores = relay.nn.batch_matmul(q, k) * relay.const(1.0 / np.sqrt(head_width), "float32")
    attn = relay.nn.softmax(scores, axis=-1)
    context = relay.nn.batch_matmul(attn, val, transpose_b=False)
    context = relay.reshape(relay.transpose(context, (1, 0, 2)), (seq, width))
    y = relay.nn.layer_norm(x + linear(context, "wo", "bo"), v["ln1_gamma"], v["ln1_beta"])
    hidden = linear(y, "w1", "b1")
    inv_sqrt2 = relay.const(1.0 / np.sqrt(2.0), "float32")
    hidden = (
        relay.const(0.5, "float32")
        * hidden
        * (relay.const(1.0, "float32") + relay.erf(hidden * inv_sqrt2))
    )
    out = relay.nn.layer_norm(y + linear(hidden, "w2", "b2"), v["ln2_gamma"], v["ln2_beta"])
    func = relay.Function([x, *variables.values()], out)
    return relay.IRModule.from_expr(func), dict(weights)


def transformer(seq: int = 128, width: int = 256, heads: int = 4, ff: int = 1024, seed: int = SEED):
    """A transformer encoder layer on ``(seq, width)``: ``(mod, params)``."""
    return transformer_module(transformer_weights(width, ff, seed), seq, heads)


# --- LSTM loop ----------------------------------------------------------------------------------


def lstm_weights(input_size: int = 128, hidden: int = 128, seed: int = SEED) -> dict:
    """An LSTM cell's weights in torch's layout and gate order (input, forget, cell, output).

    ``w_ih`` ``(4 hidden, input_size)``, ``w_hh`` ``(4 hidden, hidden)``, ``b`` ``(4 hidden,)``
    (torch's ``b_ih + b_hh`` as one vector).
    """
    rng = _rng(seed, 7)
    scale = 1.0 / np.sqrt(hidden)
    return {
        "w_ih": rng.uniform(-scale, scale, (4 * hidden, input_size)).astype("float32"),
        "w_hh": rng.uniform(-scale, scale, (4 * hidden, hidden)).astype("float32"),
        "b": rng.uniform(-scale, scale, 4 * hidden).astype("float32"),
    }


def lstm_inputs(
    steps: int = 32, input_size: int = 128, hidden: int = 128, seed: int = SEED
) -> list[np.ndarray]:
    """The loop's inputs: ``xs`` ``(steps, 1, input_size)``, ``h0`` and ``c0`` ``(1, hidden)``."""
    rng = _rng(seed, 8)
    return [
        _normal(rng, (steps, 1, input_size), 1.0),
        _normal(rng, (1, hidden), 0.5),
        _normal(rng, (1, hidden), 0.5),
    ]


def lstm_module(weights: dict, steps: int = 32):
    """An LSTM cell run over ``steps`` inputs by a recursive global function: ``(mod, params)``.

    ``@loop(%i, %h, %c, %xs, %w_ih, %w_hh, %b)`` returns ``(%h, %c)`` when ``%i`` reaches
    ``steps``, else runs the cell on ``take(%xs, %i)`` and calls itself with ``%i + 1``.
    ``@main(%xs, %h0, %c0, %w_ih, %w_hh, %b)`` starts it at 0 and returns the last ``h``.
    """
    from compiler import relay

    hidden = weights["w_hh"].shape[1]
    input_size = weights["w_ih"].shape[1]
    state_type = relay.TensorType((1, hidden), "float32")

    def weight_vars() -> list:
        return [
            relay.var(n, shape=weights[n].shape, dtype="float32") for n in ("w_ih", "w_hh", "b")
        ]

    loop = relay.GlobalVar("loop")
    i = relay.var("i", shape=(), dtype="int32")
    h = relay.var("h", shape=(1, hidden), dtype="float32")
    c = relay.var("c", shape=(1, hidden), dtype="float32")
    xs = relay.var("xs", shape=(steps, 1, input_size), dtype="float32")
    w_ih, w_hh, b = weight_vars()
    x = relay.take(xs, i, axis=0)
    gates = relay.nn.dense(x, w_ih) + relay.nn.dense(h, w_hh) + b
    parts = relay.split(gates, 4, axis=1)
    in_gate = relay.sigmoid(relay.TupleGetItem(parts, 0))
    forget = relay.sigmoid(relay.TupleGetItem(parts, 1))
    cell = relay.tanh(relay.TupleGetItem(parts, 2))
    out_gate = relay.sigmoid(relay.TupleGetItem(parts, 3))
    c_next = relay.var("c_next", shape=(1, hidden), dtype="float32")
    h_next = relay.var("h_next", shape=(1, hidden), dtype="float32")
    step = relay.Let(
        c_next,
        forget * c + in_gate * cell,
        relay.Let(
            h_next,
            out_gate * relay.tanh(c_next),
            relay.Call(loop, [i + relay.const(1, "int32"), h_next, c_next, xs, w_ih, w_hh, b]),
        ),
    )
    done = relay.equal(i, relay.const(steps, "int32"))
    body = relay.If(done, relay.Tuple([h, c]), step)
    loop_func = relay.Function(
        [i, h, c, xs, w_ih, w_hh, b], body, ret_type=relay.TupleType([state_type, state_type])
    )

    main_xs = relay.var("xs", shape=(steps, 1, input_size), dtype="float32")
    h0 = relay.var("h0", shape=(1, hidden), dtype="float32")
    c0 = relay.var("c0", shape=(1, hidden), dtype="float32")
    main_weights = weight_vars()
    start = relay.Call(loop, [relay.const(0, "int32"), h0, c0, main_xs, *main_weights])
    main = relay.Function([main_xs, h0, c0, *main_weights], relay.TupleGetItem(start, 0))
    mod = relay.IRModule()
    mod[loop] = loop_func
    mod["main"] = main
    return mod, dict(weights)


def lstm(steps: int = 32, input_size: int = 128, hidden: int = 128, seed: int = SEED):
    """An LSTM cell (``hidden`` units) looped over ``steps`` by recursion: ``(mod, params)``."""
    return lstm_module(lstm_weights(input_size, hidden, seed), steps)


# --- elementwise chain --------------------------------------------------------------------------


def chain_ops(length: int = 100) -> list[tuple[str, float | None]]:
    """The chain's operators: :data:`CHAIN_PATTERN` repeated, ``length`` of them."""
    if length % len(CHAIN_PATTERN):
        raise ValueError(
            f"the elementwise chain's length must be a multiple of {len(CHAIN_PATTERN)}, "
            f"got {length}"
        )
    return list(CHAIN_PATTERN) * (length // len(CHAIN_PATTERN))


def chain_inputs(shape: Sequence[int] = (10, 10), seed: int = SEED) -> list[np.ndarray]:
    """The chain's input ``x``."""
    return [_normal(_rng(seed, 9), tuple(shape), 1.0)]


def chain(length: int = 100, shape: Sequence[int] = (10, 10)):
    """A chain of ``length`` elementwise operators on one tensor: ``(mod, params)`` (no params).

    The operators are unary (``sin``, ``cos``) and binary with a scalar constant
    (``multiply``, ``add``), so fusion must handle broadcasting constants too.
    """
    from compiler import relay

    x = relay.var("x", shape=tuple(shape), dtype="float32")
    h = x
    for name, constant in chain_ops(length):
        op = getattr(relay, name)
        h = op(h) if constant is None else op(h, relay.const(constant, "float32"))
    return relay.IRModule.from_expr(relay.Function([x], h)), {}
