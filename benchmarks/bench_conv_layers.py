"""Per-layer timing of ResNet-18's convolutions (or RegNetY-4.0GF's grouped ones): relayvm
against onnxruntime on the same shapes.

Run it by hand on a quiet machine (it needs the ``bench`` extra)::

    .venv/bin/python -m benchmarks.bench_conv_layers [--rounds 3] [--threads 2] [--net regnet]

Each layer is a convolution followed by its folded batch norm and, where ResNet-18 has
them, the residual add and relu: for relayvm a Relay function ``nn.conv2d -> multiply ->
add [-> add] [-> nn.relu]`` with constant weights compiled as ``benchmarks`` compiles
the models (``PassContext(opt_level=3)``: one fused kernel, a Winograd one where
``AlterOpLayout`` chooses it) and run by the VM, for onnxruntime a two- or three-node
ONNX graph (Conv with bias [-> Add] [-> Relu]; its optimizer folds the same things).
``--net regnet`` times RegNetY-4.0GF's grouped 3x3 layers (groups of 64 channels) the
same way.
Each engine is timed in its own phase, because thread pools that spin after a call
(onnxruntime's, OpenBLAS's) would otherwise steal the cores from the other; phases
alternate ``--rounds`` times and each layer's best time is kept. The whole-network
figure weights each layer by how often ResNet-18 runs it.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

import vm
from benchmarks.peers import layer_parser


@dataclass(frozen=True)
class Layer:
    """One convolution shape of a network (batch 1, 224x224 input), ``groups`` groups."""

    name: str
    channels: int
    out_channels: int
    size: int
    kernel: int
    stride: int
    padding: int
    count: int
    residual: bool
    relu: bool
    groups: int = 1


LAYERS = [
    Layer("conv1 7x7/2", 3, 64, 224, 7, 2, 3, 1, False, True),
    Layer("layer1 3x3", 64, 64, 56, 3, 1, 1, 2, False, True),
    Layer("layer1 3x3+res", 64, 64, 56, 3, 1, 1, 2, True, True),
    Layer("layer2 3x3/2", 64, 128, 56, 3, 2, 1, 1, False, True),
    Layer("layer2 1x1/2", 64, 128, 56, 1, 2, 0, 1, False, False),
    Layer("layer2 3x3", 128, 128, 28, 3, 1, 1, 1, False, True),
    Layer("layer2 3x3+res", 128, 128, 28, 3, 1, 1, 2, True, True),
    Layer("layer3 3x3/2", 128, 256, 28, 3, 2, 1, 1, False, True),
    Layer("layer3 1x1/2", 128, 256, 28, 1, 2, 0, 1, False, False),
    Layer("layer3 3x3", 256, 256, 14, 3, 1, 1, 1, False, True),
    Layer("layer3 3x3+res", 256, 256, 14, 3, 1, 1, 2, True, True),
    Layer("layer4 3x3/2", 256, 512, 14, 3, 2, 1, 1, False, True),
    Layer("layer4 1x1/2", 256, 512, 14, 1, 2, 0, 1, False, False),
    Layer("layer4 3x3", 512, 512, 7, 3, 1, 1, 1, False, True),
    Layer("layer4 3x3+res", 512, 512, 7, 3, 1, 1, 2, True, True),
]

#: RegNetY-4.0GF's grouped 3x3 convolutions (groups of 64 channels, batch norm folded, relu).
REGNET_LAYERS = [
    Layer("s1 128/2 g2", 128, 128, 112, 3, 2, 1, 1, False, True, 2),
    Layer("s1 128 g2", 128, 128, 56, 3, 1, 1, 1, False, True, 2),
    Layer("s2 192/2 g3", 192, 192, 56, 3, 2, 1, 1, False, True, 3),
    Layer("s2 192 g3", 192, 192, 28, 3, 1, 1, 5, False, True, 3),
    Layer("s3 512/2 g8", 512, 512, 28, 3, 2, 1, 1, False, True, 8),
    Layer("s3 512 g8", 512, 512, 14, 3, 1, 1, 11, False, True, 8),
    Layer("s4 1088/2 g17", 1088, 1088, 14, 3, 2, 1, 1, False, True, 17),
    Layer("s4 1088 g17", 1088, 1088, 7, 3, 1, 1, 1, False, True, 17),
]

#: The layer sets ``--net`` chooses from.
NETS = {"resnet18": LAYERS, "regnet": REGNET_LAYERS}


def out_size(layer: Layer) -> int:
    return (layer.size + 2 * layer.padding - layer.kernel) // layer.stride + 1


def arrays(layer: Layer, seed: int = 0) -> dict[str, np.ndarray]:
    """Input, weight, folded batch-norm scale and shift, and the residual."""
    rng = np.random.default_rng(seed)
    c, o, k, r = layer.channels, layer.out_channels, layer.kernel, out_size(layer)
    return {
        "x": rng.standard_normal((1, c, layer.size, layer.size)).astype("float32"),
        "w": (
            rng.standard_normal((o, c // layer.groups, k, k)) / np.sqrt(c * k * k / layer.groups)
        ).astype("float32"),
        "scale": rng.uniform(0.5, 1.5, (o, 1, 1)).astype("float32"),
        "shift": rng.standard_normal((o, 1, 1)).astype("float32"),
        "res": rng.standard_normal((1, o, r, r)).astype("float32"),
    }


def relayvm_runner(layer: Layer, data: dict[str, np.ndarray]) -> Callable[[], np.ndarray]:
    """``layer`` compiled and loaded in a VM, ready to call; returns its output array."""
    from compiler import relay

    x = relay.var("x", shape=data["x"].shape, dtype="float32")
    params = [x]
    p = layer.padding
    value = relay.nn.conv2d(
        x,
        relay.const(data["w"]),
        strides=(layer.stride,) * 2,
        padding=(p,) * 4,
        groups=layer.groups,
    )
    value = value * relay.const(data["scale"]) + relay.const(data["shift"])
    feeds = [data["x"]]
    if layer.residual:
        res = relay.var("res", shape=data["res"].shape, dtype="float32")
        params.append(res)
        feeds.append(data["res"])
        value = value + res
    if layer.relu:
        value = relay.nn.relu(value)
    mod = relay.IRModule()
    mod["main"] = relay.Function(params, value)
    with relay.transform.PassContext(opt_level=3):
        exe = relay.vm.compile(mod)
    machine = vm.VirtualMachine(exe, vm.cpu())
    expected = relay.create_executor("debug", mod).evaluate()(*feeds)

    def run() -> np.ndarray:
        return machine.invoke("main", *feeds)

    np.testing.assert_allclose(run(), expected, rtol=1e-4, atol=1e-4)
    return run


def onnxruntime_runner(
    layer: Layer, data: dict[str, np.ndarray], threads: int
) -> Callable[[], object]:
    """The same layer as an onnxruntime session (batch norm folded into the Conv's bias)."""
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    scale = data["scale"].reshape(-1)
    weight = data["w"] * scale[:, None, None, None]
    bias = data["shift"].reshape(-1)
    inits = [numpy_helper.from_array(weight, "w"), numpy_helper.from_array(bias, "b")]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, data["x"].shape)]
    feeds = {"x": data["x"]}
    p, s = layer.padding, layer.stride
    nodes = [
        helper.make_node(
            "Conv", ["x", "w", "b"], ["c"], kernel_shape=[layer.kernel] * 2, strides=[s, s],
            pads=[p] * 4, group=layer.groups,
        )
    ]  # fmt: skip
    last = "c"
    if layer.residual:
        inputs.append(helper.make_tensor_value_info("res", TensorProto.FLOAT, data["res"].shape))
        feeds["res"] = data["res"]
        nodes.append(helper.make_node("Add", [last, "res"], ["a"]))
        last = "a"
    if layer.relu:
        nodes.append(helper.make_node("Relu", [last], ["y"]))
        last = "y"
    output = helper.make_tensor_value_info(last, TensorProto.FLOAT, None)
    graph = helper.make_graph(nodes, "layer", inputs, [output], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    return lambda: session.run(None, feeds)


#: Bytes written between calls with ``--cold``: twice the host's 32 MiB L3 cache.
EVICT_BYTES = 64 << 20


def best_time(
    run: Callable[[], object], budget: float = 0.25, evict: np.ndarray | None = None
) -> float:
    """The fastest of as many calls as fit in ``budget`` seconds (at least 5).

    With ``evict``, that buffer is rewritten before each timed call, so the call finds its
    weights and input in memory rather than in the caches, as inside the whole model (whose
    weights outgrow the L3 cache).
    """
    run()
    start = time.perf_counter()
    run()
    once = max(time.perf_counter() - start, 1e-6)
    best = once
    for _ in range(max(5, min(300, int(budget / once)))):
        if evict is not None:
            evict += 1
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = layer_parser(__doc__)
    parser.add_argument(
        "--cold", action="store_true", help="evict the caches before each timed call"
    )
    parser.add_argument(
        "--net", choices=sorted(NETS), default="resnet18", help="whose layers to time"
    )
    args = parser.parse_args()
    layers = NETS[args.net]
    evict = np.zeros(EVICT_BYTES // 8) if args.cold else None
    data = [arrays(layer) for layer in layers]
    start = time.perf_counter()
    ours = [relayvm_runner(layer, d) for layer, d in zip(layers, data)]
    print(f"relayvm kernels loaded or compiled in {time.perf_counter() - start:.1f} s")
    best = {"relayvm": [np.inf] * len(layers), "onnxruntime": [np.inf] * len(layers)}
    for _ in range(args.rounds):
        for i, run in enumerate(ours):
            best["relayvm"][i] = min(best["relayvm"][i], best_time(run, evict=evict))
        time.sleep(0.5)  # let OpenBLAS's spinning threads go idle
        theirs = [onnxruntime_runner(layer, d, args.threads) for layer, d in zip(layers, data)]
        for i, run in enumerate(theirs):
            best["onnxruntime"][i] = min(best["onnxruntime"][i], best_time(run, evict=evict))
        del theirs
        gc.collect()
        time.sleep(0.5)  # let onnxruntime's spinning threads go idle
    totals = {"relayvm": 0.0, "onnxruntime": 0.0}
    print(f"{'layer':16s} {'count':>5s} {'relayvm ms':>11s} {'ort ms':>9s} {'ratio':>6s}")
    for i, layer in enumerate(layers):
        mine, ref = best["relayvm"][i], best["onnxruntime"][i]
        totals["relayvm"] += mine * layer.count
        totals["onnxruntime"] += ref * layer.count
        print(
            f"{layer.name:16s} {layer.count:5d} {mine * 1e3:11.3f} {ref * 1e3:9.3f} "
            f"{mine / ref:6.2f}"
        )
    mine, ref = totals["relayvm"], totals["onnxruntime"]
    every = f"all {sum(layer.count for layer in layers)} convs"
    print(f"{every:16s} {'':5s} {mine * 1e3:11.3f} {ref * 1e3:9.3f} {mine / ref:6.2f}")


if __name__ == "__main__":
    main()
