"""Per-layer timing of image resizing: relayvm against onnxruntime on the same ONNX ``Resize``.

Benchmark layer (``benchmarks``); run it by hand on a quiet machine (needs the ``bench``
extra)::

    .venv/bin/python -m benchmarks.bench_resize_layers [--rounds 3] [--threads 2]

Each layer is one ONNX ``Resize`` as exporters write them: a segmentation head's bilinear
upsampling to the input size, PyTorch's ``interpolate`` (bilinear with and without
``align_corners``, bicubic), the nearest x2 upsampling of feature pyramids (YOLO's FPN), and
an image shrunk for a classifier. relayvm imports each with ``relay.frontend.from_onnx``
(``image.resize2d``), compiles it at ``PassContext(opt_level=3)`` and runs it on the VM;
onnxruntime runs the same model. Engines are timed in separate phases, alternating
``--rounds`` times, and each layer's best time is kept.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

import vm
from benchmarks.bench_depthwise_layers import best_time, cpu_description
from benchmarks.peers import layer_parser


@dataclass(frozen=True)
class Layer:
    """One Resize of an NCHW float32 tensor to ``size`` (height, width)."""

    name: str
    shape: tuple[int, int, int, int]
    size: tuple[int, int]
    mode: str
    coordinates: str
    nearest: str = "round_prefer_floor"


LAYERS = [
    Layer("seg head x8 linear", (1, 21, 32, 32), (256, 256), "linear", "half_pixel"),
    Layer("torch linear x2", (1, 64, 56, 56), (112, 112), "linear", "pytorch_half_pixel"),
    Layer("torch corners x4", (1, 19, 64, 64), (256, 256), "linear", "align_corners"),
    Layer("torch bicubic x2", (1, 3, 128, 128), (256, 256), "cubic", "pytorch_half_pixel"),
    Layer("fpn nearest x2 20", (1, 256, 20, 20), (40, 40), "nearest", "asymmetric", "floor"),
    Layer("fpn nearest x2 40", (1, 128, 40, 40), (80, 80), "nearest", "asymmetric", "floor"),
    Layer("shrink 512->224", (1, 3, 512, 512), (224, 224), "linear", "half_pixel"),
]


def model(layer: Layer) -> bytes:
    """``layer`` as a serialized one-node ONNX model (sizes given)."""
    from onnx import TensorProto, helper

    sizes = [*layer.shape[:2], *layer.size]
    node = helper.make_node(
        "Resize", ["x", "", "", "sizes"], ["y"], mode=layer.mode,
        coordinate_transformation_mode=layer.coordinates, nearest_mode=layer.nearest,
    )  # fmt: skip
    graph = helper.make_graph(
        [node], "resize", [helper.make_tensor_value_info("x", TensorProto.FLOAT, layer.shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, sizes)],
        initializer=[helper.make_tensor("sizes", TensorProto.INT64, [4], sizes)],
    )  # fmt: skip
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    proto.ir_version = 8
    return proto.SerializeToString()


def relayvm_runner(data: bytes, x: np.ndarray) -> Callable[[], object]:
    """The model imported, compiled and loaded in a VM, ready to call."""
    from compiler import relay

    mod, params = relay.frontend.from_onnx(data)
    with relay.transform.PassContext(opt_level=3):
        machine = vm.VirtualMachine(relay.vm.compile(mod, params=params), vm.cpu())
    return lambda: machine.invoke("main", x)


def onnxruntime_runner(data: bytes, x: np.ndarray, threads: int) -> Callable[[], object]:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
    return lambda: session.run(None, {"x": x})


def main() -> None:
    parser = layer_parser(__doc__)
    args = parser.parse_args()
    print(cpu_description())
    rng = np.random.default_rng(0)
    models = [model(layer) for layer in LAYERS]
    inputs = [rng.standard_normal(layer.shape).astype("float32") for layer in LAYERS]
    start = time.perf_counter()
    ours = [relayvm_runner(m, x) for m, x in zip(models, inputs)]
    print(f"relayvm kernels loaded or compiled in {time.perf_counter() - start:.1f} s")
    for run, m, x in zip(ours, models, inputs):
        want = onnxruntime_runner(m, x, 1)()[0]
        np.testing.assert_allclose(run().numpy(), want, rtol=1e-5, atol=1e-5)
    best = {"relayvm": [np.inf] * len(LAYERS), "onnxruntime": [np.inf] * len(LAYERS)}
    for _ in range(args.rounds):
        for i, run in enumerate(ours):
            best["relayvm"][i] = min(best["relayvm"][i], best_time(run))
        time.sleep(0.5)
        theirs = [onnxruntime_runner(m, x, args.threads) for m, x in zip(models, inputs)]
        for i, run in enumerate(theirs):
            best["onnxruntime"][i] = min(best["onnxruntime"][i], best_time(run))
        del theirs
        gc.collect()
        time.sleep(0.5)  # let onnxruntime's spinning threads go idle
    print(f"{'layer':20s} {'output':>16s} {'relayvm us':>10s} {'ort us':>8s} {'ratio':>6s}")
    for i, layer in enumerate(LAYERS):
        mine, ref = best["relayvm"][i], best["onnxruntime"][i]
        out = "x".join(str(d) for d in (*layer.shape[1:2], *layer.size))
        print(f"{layer.name:20s} {out:>16s} {mine * 1e6:10.1f} {ref * 1e6:8.1f} {mine / ref:6.2f}")


if __name__ == "__main__":
    main()
