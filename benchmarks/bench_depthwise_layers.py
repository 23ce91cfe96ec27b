"""Per-layer timing of MobileNet-style depthwise and grouped convolutions: relayvm against
onnxruntime on the same shapes, in GFLOP/s.

Benchmark layer (``benchmarks``); run it by hand on a quiet machine (needs the ``bench``
extra)::

    .venv/bin/python -m benchmarks.bench_depthwise_layers [--rounds 3] [--threads 2]

Each layer is a grouped convolution followed by its folded batch norm (multiply, add) and an
activation: relu6 (``clip``) as in MobileNetV2, hardswish as in MobileNetV3, or none; the
shapes are MobileNetV2's depthwise layers (batch 1, 224x224 input), MobileNetV3's 5x5 ones,
ConvNeXt-T's 7x7 ones (no activation), and grouped layers with 4, 8 and 16 channels per group
as ResNeXt and RegNet have. The last row is a whole MobileNetV2 inverted-residual block (1x1
expansion with relu6, depthwise 3x3 with relu6, 1x1 projection, residual add). For relayvm each
is a Relay function compiled at ``PassContext(opt_level=3)`` and run by the VM, for onnxruntime
the equivalent ONNX graph (batch norm folded into the Conv's bias). Engines are timed in
separate phases (their thread pools spin after a call), alternating ``--rounds`` times, and
each layer's best time is kept.
"""

from __future__ import annotations

import gc
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

import vm
from benchmarks.peers import layer_parser


@dataclass(frozen=True)
class Layer:
    """One grouped convolution (batch 1, square input) with its epilogue."""

    name: str
    channels: int
    out_channels: int
    groups: int
    size: int
    kernel: int
    stride: int
    activation: str  # "relu6", "hardswish" or ""

    @property
    def padding(self) -> int:
        return self.kernel // 2

    @property
    def out_size(self) -> int:
        return (self.size + 2 * self.padding - self.kernel) // self.stride + 1

    @property
    def flops(self) -> int:
        cg = self.channels // self.groups
        return 2 * self.out_channels * cg * self.kernel**2 * self.out_size**2


LAYERS = [
    Layer("v2 dw32 112", 32, 32, 32, 112, 3, 1, "relu6"),
    Layer("v2 dw96 112/2", 96, 96, 96, 112, 3, 2, "relu6"),
    Layer("v2 dw144 56", 144, 144, 144, 56, 3, 1, "relu6"),
    Layer("v2 dw144 56/2", 144, 144, 144, 56, 3, 2, "relu6"),
    Layer("v2 dw192 28", 192, 192, 192, 28, 3, 1, "relu6"),
    Layer("v2 dw384 14", 384, 384, 384, 14, 3, 1, "relu6"),
    Layer("v2 dw576 14/2", 576, 576, 576, 14, 3, 2, "relu6"),
    Layer("v2 dw960 7", 960, 960, 960, 7, 3, 1, "relu6"),
    Layer("v3 dw72 5x5 56/2", 72, 72, 72, 56, 5, 2, ""),
    Layer("v3 dw240 5x5 14", 240, 240, 240, 14, 5, 1, "hardswish"),
    Layer("cnx dw96 7x7 56", 96, 96, 96, 56, 7, 1, ""),
    Layer("cnx dw192 7x7 28", 192, 192, 192, 28, 7, 1, ""),
    Layer("cnx dw384 7x7 14", 384, 384, 384, 14, 7, 1, ""),
    Layer("cnx dw768 7x7 7", 768, 768, 768, 7, 7, 1, ""),
    Layer("dw x2 mult 28", 64, 128, 64, 28, 3, 1, "relu6"),
    Layer("grouped cg4 56", 128, 128, 32, 56, 3, 1, "relu6"),
    Layer("grouped cg8 28", 256, 256, 32, 28, 3, 1, "relu6"),
    Layer("grouped cg16 14", 512, 512, 32, 14, 3, 1, "relu6"),
]

#: MobileNetV2's block at 28x28: 32 -> expand x6 (192) -> depthwise 3x3 -> project to 32.
BLOCK = {"channels": 32, "expand": 192, "size": 28}


def arrays(layer: Layer, seed: int = 0) -> dict[str, np.ndarray]:
    """Input, weight, folded batch-norm scale and shift."""
    rng = np.random.default_rng(seed)
    c, o, k = layer.channels, layer.out_channels, layer.kernel
    cg = c // layer.groups
    return {
        "x": rng.standard_normal((1, c, layer.size, layer.size)).astype("float32"),
        "w": (rng.standard_normal((o, cg, k, k)) / np.sqrt(cg * k * k)).astype("float32"),
        "scale": rng.uniform(0.5, 1.5, (o, 1, 1)).astype("float32"),
        "shift": rng.standard_normal((o, 1, 1)).astype("float32"),
    }


def _relay_activation(relay, value, activation: str):
    if activation == "relu6":
        return relay.clip(value, 0.0, 6.0)
    if activation == "hardswish":
        gate = relay.clip(value + relay.const(np.float32(3)), 0.0, 6.0)
        return value * gate * relay.const(np.float32(1 / 6))
    return value


def _compiled(relay, params, value, feeds) -> Callable[[], object]:
    mod = relay.IRModule()
    mod["main"] = relay.Function(params, value)
    with relay.transform.PassContext(opt_level=3):
        exe = relay.vm.compile(mod)
    machine = vm.VirtualMachine(exe, vm.cpu())
    expected = relay.create_executor("debug", mod).evaluate()(*feeds)

    def run() -> object:
        return machine.invoke("main", *feeds)

    np.testing.assert_allclose(run(), expected, rtol=1e-4, atol=1e-4)
    return run


def relayvm_runner(layer: Layer, data: dict[str, np.ndarray]) -> Callable[[], object]:
    """``layer`` compiled and loaded in a VM, ready to call."""
    from compiler import relay

    x = relay.var("x", shape=data["x"].shape, dtype="float32")
    p = layer.padding
    value = relay.nn.conv2d(
        x, relay.const(data["w"]), strides=(layer.stride,) * 2, padding=(p,) * 4,
        groups=layer.groups,
    )  # fmt: skip
    value = value * relay.const(data["scale"]) + relay.const(data["shift"])
    value = _relay_activation(relay, value, layer.activation)
    return _compiled(relay, [x], value, [data["x"]])


class _Onnx:
    """A tiny ONNX graph builder for these layers."""

    def __init__(self) -> None:
        from onnx import helper, numpy_helper

        self.helper, self.numpy_helper = helper, numpy_helper
        self.nodes: list = []
        self.inits: list = []
        self.count = 0

    def name(self) -> str:
        self.count += 1
        return f"v{self.count}"

    def const(self, value: np.ndarray) -> str:
        name = self.name()
        self.inits.append(self.numpy_helper.from_array(np.asarray(value, "float32"), name))
        return name

    def op(self, op_type: str, inputs: list[str], **attrs) -> str:
        out = self.name()
        self.nodes.append(self.helper.make_node(op_type, inputs, [out], **attrs))
        return out

    def conv_bn(self, h: str, w: np.ndarray, scale, shift, groups: int, stride: int) -> str:
        k = w.shape[2]
        folded = w * scale.reshape(-1, 1, 1, 1)
        return self.op(
            "Conv", [h, self.const(folded), self.const(shift.reshape(-1))],
            kernel_shape=[k, k], strides=[stride] * 2, pads=[k // 2] * 4, group=groups,
        )  # fmt: skip

    def activation(self, h: str, activation: str) -> str:
        if activation == "relu6":
            return self.op("Clip", [h, self.const(np.float32(0)), self.const(np.float32(6))])
        if activation == "hardswish":
            return self.op("HardSwish", [h])
        return h

    def session(self, x_shape: tuple, output: str, threads: int):
        import onnxruntime as ort
        from onnx import TensorProto

        helper = self.helper
        inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)]
        out = helper.make_tensor_value_info(output, TensorProto.FLOAT, None)
        graph = helper.make_graph(self.nodes, "layer", inputs, [out], self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = 8
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        return ort.InferenceSession(
            model.SerializeToString(), options, providers=["CPUExecutionProvider"]
        )


def onnxruntime_runner(
    layer: Layer, data: dict[str, np.ndarray], threads: int
) -> Callable[[], object]:
    """The same layer as an onnxruntime session."""
    g = _Onnx()
    h = g.conv_bn("x", data["w"], data["scale"], data["shift"], layer.groups, layer.stride)
    h = g.activation(h, layer.activation)
    session = g.session(data["x"].shape, h, threads)
    feeds = {"x": data["x"]}
    return lambda: session.run(None, feeds)


def block_arrays(seed: int = 1) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    c, e, s = BLOCK["channels"], BLOCK["expand"], BLOCK["size"]
    out = {"x": rng.standard_normal((1, c, s, s)).astype("float32")}
    for name, shape in (("w1", (e, c, 1, 1)), ("w2", (e, 1, 3, 3)), ("w3", (c, e, 1, 1))):
        fan_in = shape[1] * shape[2] * shape[3]
        out[name] = (rng.standard_normal(shape) / np.sqrt(fan_in)).astype("float32")
        o = shape[0]
        out[name + "s"] = rng.uniform(0.5, 1.5, (o, 1, 1)).astype("float32")
        out[name + "b"] = rng.standard_normal((o, 1, 1)).astype("float32")
    return out


def block_flops() -> int:
    c, e, s = BLOCK["channels"], BLOCK["expand"], BLOCK["size"]
    return 2 * s * s * (c * e + e * 9 + e * c)


def relayvm_block(d: dict[str, np.ndarray]) -> Callable[[], object]:
    """MobileNetV2's inverted-residual block in Relay."""
    from compiler import relay

    x = relay.var("x", shape=d["x"].shape, dtype="float32")
    h = x
    for name, groups, act in (("w1", 1, "relu6"), ("w2", BLOCK["expand"], "relu6"), ("w3", 1, "")):
        k = d[name].shape[2]
        h = relay.nn.conv2d(h, relay.const(d[name]), padding=(k // 2,) * 4, groups=groups)
        h = h * relay.const(d[name + "s"]) + relay.const(d[name + "b"])
        h = _relay_activation(relay, h, act)
    return _compiled(relay, [x], h + x, [d["x"]])


def onnxruntime_block(d: dict[str, np.ndarray], threads: int) -> Callable[[], object]:
    g = _Onnx()
    h = "x"
    for name, groups, act in (("w1", 1, "relu6"), ("w2", BLOCK["expand"], "relu6"), ("w3", 1, "")):
        h = g.conv_bn(h, d[name], d[name + "s"], d[name + "b"], groups, 1)
        h = g.activation(h, act)
    h = g.op("Add", [h, "x"])
    session = g.session(d["x"].shape, h, threads)
    feeds = {"x": d["x"]}
    return lambda: session.run(None, feeds)


def best_time(run: Callable[[], object], budget: float = 0.25) -> float:
    """The fastest of as many calls as fit in ``budget`` seconds (at least 5)."""
    run()
    start = time.perf_counter()
    run()
    once = max(time.perf_counter() - start, 1e-6)
    best = once
    for _ in range(max(5, min(300, int(budget / once)))):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


def cpu_description() -> str:
    """The CPU model and whether it has AVX-512F and AVX2, from /proc/cpuinfo."""
    model, flags = platform.processor() or "unknown CPU", set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and model in ("", "unknown CPU", "x86_64"):
                    model = line.split(":", 1)[1].strip()
                elif line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    break
    except OSError:
        pass
    isa = "avx512f" if "avx512f" in flags else "avx2" if "avx2" in flags else "no avx2"
    return f"{model} ({isa})"


def main() -> None:
    parser = layer_parser(__doc__)
    args = parser.parse_args()
    print(cpu_description())
    names = [layer.name for layer in LAYERS] + ["v2 block 28"]
    flops = [layer.flops for layer in LAYERS] + [block_flops()]
    data = [arrays(layer) for layer in LAYERS]
    block = block_arrays()
    start = time.perf_counter()
    ours = [relayvm_runner(layer, d) for layer, d in zip(LAYERS, data)]
    ours.append(relayvm_block(block))
    print(f"relayvm kernels loaded or compiled in {time.perf_counter() - start:.1f} s")
    best = {"relayvm": [np.inf] * len(names), "onnxruntime": [np.inf] * len(names)}
    for _ in range(args.rounds):
        for i, run in enumerate(ours):
            best["relayvm"][i] = min(best["relayvm"][i], best_time(run))
        time.sleep(0.5)  # let OpenBLAS's spinning threads go idle
        theirs = [onnxruntime_runner(layer, d, args.threads) for layer, d in zip(LAYERS, data)]
        theirs.append(onnxruntime_block(block, args.threads))
        for i, run in enumerate(theirs):
            best["onnxruntime"][i] = min(best["onnxruntime"][i], best_time(run))
        del theirs
        gc.collect()
        time.sleep(0.5)  # let onnxruntime's spinning threads go idle
    print(
        f"{'layer':18s} {'relayvm us':>10s} {'GFLOP/s':>8s} {'ort us':>8s} {'GFLOP/s':>8s} "
        f"{'ratio':>6s}"
    )
    for i, name in enumerate(names):
        mine, ref = best["relayvm"][i], best["onnxruntime"][i]
        print(
            f"{name:18s} {mine * 1e6:10.1f} {flops[i] / mine / 1e9:8.1f} {ref * 1e6:8.1f} "
            f"{flops[i] / ref / 1e9:8.1f} {mine / ref:6.2f}"
        )


if __name__ == "__main__":
    main()
