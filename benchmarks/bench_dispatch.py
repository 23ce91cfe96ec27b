"""Dispatch overhead: relayvm's interpreter loop side by side with numpy, numba and onnxruntime.

Benchmarks layer. Run: ``python -m benchmarks.bench_dispatch`` (``--quick`` for a smoke run).

Three workloads, each measured for every engine in the same run and printed with its
ratio to relayvm:

1. ``x + x`` on a 10x10 float32 tensor, one call (the cost of one ``invoke``, and of one
   call of the ahead-of-time executor, ``vm.aot``).
2. A chain of 100 unfused elementwise ops on 1x1 tensors: pure dispatch per op (the VM's
   loop, and the AOT executor's generated straight-line function).
3. A scalar recursive loop made only of control flow (walking a Peano ``nat``):
   cost per executed VM instruction, counted by the VM's own instruction counter.

Every engine's answer is checked against numpy before it is timed. Below the table, issue
15's targets for ``x + x`` are judged from the run (:func:`judge_targets`).
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from benchmarks.peers import (
    Row,
    best_time,
    format_seconds,
    onnx_available,
    onnxruntime_session,
    print_table,
)

CHAIN_LENGTH = 100


def _relay_add_module():
    from compiler import relay

    x = relay.var("x", shape=(10, 10), dtype="float32")
    return relay.IRModule.from_expr(relay.Function([x], x + x))


def _relay_chain_module(length: int):
    from compiler import relay

    x = relay.var("x", shape=(1, 1), dtype="float32")
    h = x
    for i in range(length):
        h = relay.sin(h) if i % 2 == 0 else relay.cos(h)
    return relay.IRModule.from_expr(relay.Function([x], h))


def _numpy_chain(x: np.ndarray, length: int) -> np.ndarray:
    h = x
    for i in range(length):
        h = np.sin(h) if i % 2 == 0 else np.cos(h)
    return h


def _onnx_model(ops: list[str], shape: tuple[int, ...], binary_self: bool = False) -> bytes:
    from onnx import TensorProto, helper

    nodes = []
    prev = "x"
    for i, op in enumerate(ops):
        out = "y" if i == len(ops) - 1 else f"t{i}"
        inputs = [prev, prev] if binary_self else [prev]
        nodes.append(helper.make_node(op, inputs, [out]))
        prev = out
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(shape))],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


def bench_add(quick: bool) -> list[Row]:
    import vm
    from compiler import relay
    from vm.aot import AotModule

    number = 2_000 if quick else 100_000
    x = np.random.default_rng(0).standard_normal((10, 10)).astype("float32")
    want = x + x
    rows = []
    exe = relay.vm.compile(_relay_add_module())
    machine = vm.VirtualMachine(exe, vm.cpu())
    np.testing.assert_allclose(machine.invoke("main", x), want)
    rows.append(
        Row(
            "x + x, 10x10, one call",
            "relayvm",
            best_time(lambda: machine.invoke("main", x), number),
            "invoke('main', x)",
        )
    )
    aot = AotModule(exe, vm.cpu())
    np.testing.assert_allclose(aot.run(x), want)
    rows.append(
        Row(
            "x + x, 10x10, one call",
            "relayvm AOT",
            best_time(lambda: aot.run(x), number),
            "vm.aot.AotModule(exe).run(x)",
        )
    )
    machine.save_function("main", "main_saved", x)
    rows.append(
        Row(
            "x + x, 10x10, one call",
            "relayvm saved function",
            best_time(machine["main_saved"], number),
            "save_function: args pre-bound",
        )
    )
    rows.append(
        Row(
            "x + x, 10x10, one call",
            "numpy",
            best_time(lambda: np.add(x, x), number),
            "np.add(x, x)",
        )
    )

    kernel = vm.kernels.load_kernel(exe.primitives[0].description)
    out = np.empty_like(x)
    # The compiler passes x once when both operands are the same value.
    args = [x] * len(kernel.input_dtypes) + [out]
    kernel.entry(*args)
    np.testing.assert_allclose(out, want)
    rows.append(
        Row(
            "x + x, 10x10, one call",
            "numba kernel alone",
            best_time(lambda: kernel.entry(*args), number),
            "entry point, output given",
        )
    )

    sess = (
        onnxruntime_session(_onnx_model(["Add"], (10, 10), binary_self=True))
        if onnx_available()
        else None
    )
    if sess is None:
        rows.append(
            Row(
                "x + x, 10x10, one call",
                "onnxruntime",
                None,
                "not installed (pip install .[bench])",
            )
        )
    else:
        np.testing.assert_allclose(sess.run(None, {"x": x})[0], want)
        rows.append(
            Row(
                "x + x, 10x10, one call",
                "onnxruntime",
                best_time(lambda: sess.run(None, {"x": x}), number // 10),
                "sess.run",
            )
        )
    rows.append(
        Row(
            "x + x, 10x10, one call",
            "TVM Relax VM",
            None,
            "not installable here (reference: 2.6 us from Python)",
        )
    )
    return rows


def bench_chain(quick: bool) -> list[Row]:
    import vm
    from compiler import relay
    from vm.aot import AotModule

    number = 200 if quick else 5_000
    n = CHAIN_LENGTH
    x = np.full((1, 1), 0.5, dtype="float32")
    want = _numpy_chain(x, n)
    label = f"{n}-op chain on 1x1, per op"
    rows = []
    # opt_level 0 turns fusion off: this row measures dispatch, one kernel per operator
    # (bench_models' fused chain measures the same program fused).
    with relay.transform.PassContext(opt_level=0):
        exe = relay.vm.compile(_relay_chain_module(n))
    assert len(exe.primitives) == 2, "the chain should compile to one sin and one cos kernel"
    machine = vm.VirtualMachine(exe, vm.cpu())
    np.testing.assert_allclose(machine.invoke("main", x), want, rtol=1e-5)
    machine.save_function("main", "chain", x)
    rows.append(
        Row(
            label,
            "relayvm",
            best_time(machine["chain"], number) / n,
            "unfused: AllocTensor + InvokePacked per op",
        )
    )
    aot = AotModule(exe, vm.cpu())
    np.testing.assert_allclose(aot.run(x), want, rtol=1e-5)
    rows.append(
        Row(
            label,
            "relayvm AOT",
            best_time(lambda: aot.run(x), number) / n,
            "one generated function: np.empty-free arena, 100 entry calls",
        )
    )
    rows.append(
        Row(
            label,
            "numpy",
            best_time(lambda: _numpy_chain(x, n), number) / n,
            "np.sin / np.cos calls",
        )
    )

    ops = ["Sin" if i % 2 == 0 else "Cos" for i in range(n)]
    sess = onnxruntime_session(_onnx_model(ops, (1, 1))) if onnx_available() else None
    if sess is not None:
        np.testing.assert_allclose(sess.run(None, {"x": x})[0], want, rtol=1e-5)
        rows.append(
            Row(
                label,
                "onnxruntime",
                best_time(lambda: sess.run(None, {"x": x}), number) / n,
                "one sess.run of a 100-node graph",
            )
        )
    else:
        rows.append(Row(label, "onnxruntime", None, "not installed"))

    # Reference points for the design: what a Python register loop can reach at best.
    sin_k = vm.kernels.load_kernel(exe.primitives[0].description)
    cos_k = vm.kernels.load_kernel(exe.primitives[1].description)
    kernels = [sin_k.entry if i % 2 == 0 else cos_k.entry for i in range(n)]

    def register_loop() -> np.ndarray:
        h = x
        for k in kernels:
            out = np.empty((1, 1), np.float32)
            k(h, out)
            h = out
        return h

    np.testing.assert_allclose(register_loop(), want, rtol=1e-5)
    rows.append(
        Row(
            label,
            "bare loop: np.empty + entry",
            best_time(register_loop, number) / n,
            "lower bound for a Python VM",
        )
    )

    def noop() -> None:
        return None

    noops = [noop] * n

    def noop_loop() -> None:
        for f in noops:
            f()

    rows.append(
        Row(
            label,
            "bare loop over no-op calls",
            best_time(noop_loop, number) / n,
            "Python call floor",
        )
    )
    rows.append(Row(label, "TVM VM (unfused)", None, "not installable here (reference: 0.50 us)"))
    return rows


def _nat_walk_module():
    from compiler import relay

    return relay.fromtext(
        """
        #[version = "0.0.5"]
        type nat { zero, succ(nat) }
        def @walk(%n: nat) -> nat {
          match (%n) {
            zero => zero(),
            succ(%m) => @walk(%m),
          }
        }
        def @main(%n: nat) -> nat { @walk(%n) }
        """
    )


def bench_control_flow(quick: bool) -> list[Row]:
    import vm
    from compiler import relay

    depth = 2_000 if quick else 20_000
    exe = relay.vm.compile(_nat_walk_module())
    machine = vm.VirtualMachine(exe, vm.cpu())
    zero = next(c for c in exe.constructors if c.name == "zero")
    succ = next(c for c in exe.constructors if c.name == "succ")
    n = vm.ADT(zero.tag, [], "zero")
    for _ in range(depth):
        n = vm.ADT(succ.tag, [n], "succ")
    result = machine.invoke("main", n)
    assert result.constructor == "zero"
    executed = machine.count_instructions("main", n)
    seconds = best_time(lambda: machine.invoke("main", n), 3 if quick else 20)
    per_instruction = seconds / executed
    label = "scalar recursion, per VM instruction"
    return [
        Row(
            label,
            "relayvm",
            per_instruction,
            f"{executed:,} instructions for a {depth:,}-deep nat walk",
        ),
        Row(label, "TVM VM", None, "not installable here"),
    ]


#: Issue 15's limits on one ``x + x`` call: (engine, seconds).
ADD_TARGETS = (("relayvm", 1.0e-6), ("relayvm AOT", 0.5e-6))


def judge_targets(rows: list[Row]) -> list[str]:
    """Issue 15's targets for one ``x + x`` call, judged from ``rows``: a line per engine."""
    times = {row.engine: row.seconds for row in rows if row.workload == "x + x, 10x10, one call"}
    lines = []
    for engine, limit in ADD_TARGETS:
        seconds = times.get(engine)
        if seconds is None:
            lines.append(f"x + x through {engine}: not measured: MISSED")
            continue
        met = "met" if seconds <= limit else "MISSED"
        lines.append(
            f"x + x through {engine}: {format_seconds(seconds)} "
            f"(target <= {format_seconds(limit)}): {met}"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a fast smoke run (fewer calls)")
    args = parser.parse_args(argv)
    rows = bench_add(args.quick) + bench_chain(args.quick) + bench_control_flow(args.quick)
    print_table(rows)
    print("Targets of issue 15 (this run):")
    for line in judge_targets(rows):
        print(f"  {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
