"""Dense layers one by one, against onnxruntime: the products of transformers and the
classifier heads, where a product's length decides how the worker threads share it.

Benchmarks layer. Each shape is ``nn.dense`` + ``nn.bias_add`` with a constant weight,
compiled at ``opt_level=3`` (a packed weight) and run through the VM, beside onnxruntime's
``Gemm`` on the same weights, interleaved (:func:`benchmarks.peers.measure_interleaved`,
which lets every thread go idle between rounds, as a model's products see them after a
pause). Prints GFLOP/s and the ratio per shape. Options::

    python -m benchmarks.bench_dense_layers [--rounds N]
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from benchmarks.bench_depthwise_layers import cpu_description
from benchmarks.peers import bench_threads, measure_interleaved, onnxruntime_session

#: (rows, depth, units): GPT-2 and BERT-base's products at 128 tokens, a 1x1 convolution's
#: shape as MobileNetV2's last one has it.
SHAPES = ((128, 768, 3072), (128, 3072, 768), (128, 768, 2304), (128, 768, 768), (49, 320, 1280))


def _onnx_gemm(weight: np.ndarray, bias: np.ndarray, rows: int) -> bytes:
    from onnx import TensorProto, helper, numpy_helper

    units, depth = weight.shape
    graph = helper.make_graph(
        [helper.make_node("Gemm", ["x", "w", "b"], ["y"], transB=1)],
        "dense",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [rows, depth])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [rows, units])],
        initializer=[numpy_helper.from_array(weight, "w"), numpy_helper.from_array(bias, "b")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    return model.SerializeToString()


def run_shape(rows: int, depth: int, units: int, rounds: int) -> tuple[float, float, float]:
    """Seconds per call on relayvm and onnxruntime, and the largest absolute difference."""
    import vm
    from compiler import relay

    rng = np.random.default_rng(0)
    weight = (rng.standard_normal((units, depth)) / depth**0.5).astype("float32")
    bias = rng.standard_normal(units).astype("float32")
    x = relay.var("x", shape=(rows, depth), dtype="float32")
    body = relay.nn.bias_add(relay.nn.dense(x, relay.const(weight)), relay.const(bias))
    mod = relay.IRModule.from_expr(relay.Function([x], body))
    with relay.transform.PassContext(opt_level=3):
        machine = vm.VirtualMachine(relay.vm.compile(mod))
    data = rng.standard_normal((rows, depth)).astype("float32")
    session = onnxruntime_session(_onnx_gemm(weight, bias, rows))
    ours = machine.invoke("main", data).numpy()
    (theirs,) = session.run(None, {"x": data})
    diff = float(np.abs(ours - theirs).max())
    times = measure_interleaved(
        [lambda: machine.invoke("main", data), lambda: session.run(None, {"x": data})],
        rounds=rounds,
    )
    return times[0], times[1], diff


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    if (
        onnxruntime_session(_onnx_gemm(np.zeros((1, 1), "float32"), np.zeros(1, "float32"), 1))
        is None
    ):
        print("bench_dense_layers: onnxruntime is not installed")
        return 0
    print(f"CPU: {cpu_description()}; {bench_threads()} threads per engine")
    header = (
        f"{'rows x depth x units':<22} {'relayvm':>10} {'GFLOP/s':>8} {'onnxruntime':>12} "
        f"{'GFLOP/s':>8} {'ratio':>7}"
    )
    print(header)
    print("-" * len(header))
    for rows, depth, units in SHAPES:
        ours, theirs, diff = run_shape(rows, depth, units, args.rounds)
        flops = 2.0 * rows * depth * units
        print(
            f"{f'{rows} x {depth} x {units}':<22} {ours * 1e3:>8.2f}ms {flops / ours / 1e9:>8.0f} "
            f"{theirs * 1e3:>10.2f}ms {flops / theirs / 1e9:>8.0f} {ours / theirs:>6.2f}x"
            f"  (max abs diff {diff:.1e})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
