"""Model benchmarks: relayvm side by side with onnxruntime, torch, numpy and numba, in one run.

Benchmarks layer. Run: ``python -m benchmarks.bench_models`` (``--quick`` for small sizes and
few rounds, ``--models mlp,lstm`` for a subset, ``--no-fresh`` to skip the cold-start rows).

For each model of :mod:`benchmarks.models` (MLP at batch 1 and 64, ResNet-18, a transformer
encoder layer, an LSTM loop, a 100-op elementwise chain) every engine runs the same weights on
the same input. Each answer is compared with a float64 numpy reference (the max abs diff is
printed for every engine and a mismatch fails the run), then timed: the median over several
rounds, after warm-up, with the engines' rounds interleaved so load from other processes
falls on all of them alike, each round started once the previous engine's thread pool has
stopped polling (:func:`benchmarks.peers.wait_until_idle`), and 2 threads for onnxruntime
and torch (``$RELAYVM_BENCH_THREADS``).
Every time is printed with its ratio to the fastest peer. An engine that cannot run a model
prints ``n/a`` and the reason, never a number. ResNet-18 (and the MLP, for comparison) is
also timed from a fresh process: load the saved executable and return the first result, with
a warm and with an empty kernel cache. Last, the speed targets of issue 4 are judged from the
rows of this run.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import pathlib
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from benchmarks import models
from benchmarks import numpy_models as npm
from benchmarks.peers import (
    Row,
    bench_threads,
    format_seconds,
    measure_interleaved,
    onnx_available,
    onnxruntime_session,
    print_peer_table,
    torch_available,
    torch_threads,
)

MODEL_NAMES = ("mlp", "resnet18", "transformer", "lstm", "chain")

#: Sizes per model: the issue's sizes, and small ones for ``--quick``.
FULL_SIZES = {
    "mlp": {"sizes": (784, 512, 512, 10), "batches": (1, 64)},
    "resnet18": {"width": 64, "classes": 1000, "image": 224},
    "transformer": {"seq": 128, "width": 256, "heads": 4, "ff": 1024},
    "lstm": {"steps": 32, "input": 128, "hidden": 128},
    "chain": {"length": 100, "shape": (10, 10)},
}
QUICK_SIZES = {
    "mlp": {"sizes": (64, 32, 32, 10), "batches": (1, 8)},
    "resnet18": {"width": 8, "classes": 10, "image": 32},
    "transformer": {"seq": 16, "width": 32, "heads": 4, "ff": 64},
    "lstm": {"steps": 4, "input": 16, "hidden": 16},
    "chain": {"length": 8, "shape": (10, 10)},
}

#: What issue 4 measured for TVM on this machine (TVM cannot be installed here).
TVM_FIGURES = {
    "resnet18": "TVM Relax VM untuned: 1.57 s (issue 4)",
    "lstm": "TVM Relax VM: 5.6 ms (issue 4)",
    "chain": "TVM fused: 38 us (issue 4)",
}


#: The row of relayvm compiled under the default PassContext.
DEFAULT_ENGINE = "relayvm default"


class Unavailable(Exception):
    """An engine cannot run a model here; the message says why (printed as ``n/a``)."""


@dataclass
class Engine:
    """One way to run a workload: ``build()`` returns a no-argument callable giving the output
    (or raises :class:`Unavailable`); ``context`` wraps both the check and the timing."""

    name: str
    build: Callable[[], Callable[[], object]]
    note: str = ""
    context: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext


@dataclass
class Workload:
    """One model at one size, its reference answer and the engines that run it."""

    key: str
    label: str
    inputs: list[np.ndarray]
    reference: np.ndarray
    engines: list[Engine] = field(default_factory=list)
    #: The relayvm executable, once compiled (for the fresh-process rows).
    executable: object = None
    #: Why relayvm could not run this workload, if it could not.
    relayvm_failure: str | None = None
    onnx_bytes: bytes | None = None


@dataclass
class Options:
    quick: bool = False
    fresh: bool = True
    # Many short rounds: on a shared machine the median then skips the rounds that other
    # processes' bursts landed on.
    rounds: int = 15
    min_round_seconds: float = 0.02


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"


def _to_numpy(value: object) -> np.ndarray:
    if hasattr(value, "detach"):  # a torch tensor
        value = value.detach().numpy()
    if isinstance(value, list | tuple) and len(value) == 1:
        value = value[0]
    return np.asarray(value)


def tolerance(reference: np.ndarray) -> float:
    """The largest acceptable float32 deviation from a float64 reference of this magnitude."""
    return 1e-3 * max(1.0, float(np.max(np.abs(reference))))


# --- relayvm ------------------------------------------------------------------------------------


def _relayvm_engine(workload: Workload, name: str, compile_fn, note: str) -> Engine:
    """An engine that compiles with ``compile_fn() -> Executable`` and invokes ``main``."""

    def build() -> Callable[[], object]:
        import vm

        t0 = time.perf_counter()
        try:
            exe = compile_fn()
        except Exception as error:
            if workload.relayvm_failure is None and name == "relayvm":
                workload.relayvm_failure = _first_line(error)
            raise Unavailable(_first_line(error)) from error
        seconds = time.perf_counter() - t0
        if name == "relayvm":
            workload.executable = exe
        machine = vm.VirtualMachine(exe, vm.cpu())
        kernels = len(exe.primitive_ops)
        engine.note = f"{note}compiled in {seconds:.2f} s, {kernels} kernels".lstrip()
        inputs = workload.inputs
        return lambda: machine.invoke("main", *inputs)

    engine = Engine(name, build, note)
    return engine


def relayvm_engines(workload: Workload, mod, params) -> list[Engine]:
    """relayvm as TVM users run a model: ``relay.vm.compile(mod, params=params)`` under
    ``PassContext(opt_level=3)`` (row ``relayvm``) and under the default context (row
    ``relayvm default``, opt_level 2), then ``invoke``."""
    from compiler import relay

    def compile_fn():
        with relay.transform.PassContext(opt_level=3):
            return relay.vm.compile(mod, params=params)

    def compile_default():
        return relay.vm.compile(mod, params=params)

    return [
        _relayvm_engine(workload, "relayvm", compile_fn, note="opt_level=3; "),
        _relayvm_engine(workload, DEFAULT_ENGINE, compile_default, note="opt_level=2; "),
    ]


# --- peers --------------------------------------------------------------------------------------


def _onnxruntime_engine(workload: Workload, make_bytes, name="onnxruntime", note="") -> Engine:
    def build() -> Callable[[], object]:
        if not onnx_available():
            raise Unavailable("onnx is not installed (pip install -e '.[bench]')")
        data = make_bytes()
        sess = onnxruntime_session(data)
        if sess is None:
            raise Unavailable("onnxruntime is not installed (pip install -e '.[bench]')")
        if name == "onnxruntime" and workload.onnx_bytes is None:
            workload.onnx_bytes = data
        feeds = {i.name: a for i, a in zip(sess.get_inputs(), workload.inputs)}
        return lambda: sess.run(None, feeds)

    return Engine(name, build, note or f"{bench_threads()} threads")


def _torch_engines(workload: Workload, make_module) -> list[Engine]:
    state: dict[str, object] = {}

    def module():
        if not torch_available():
            raise Unavailable("torch is not installed (pip install -e '.[bench]')")
        if "module" not in state:
            from benchmarks import torch_models

            torch_threads()
            state["module"] = make_module(torch_models)
            state["inputs"] = [torch_models.tensor(a) for a in workload.inputs]
        return state["module"], state["inputs"]

    def eager() -> Callable[[], object]:
        model, inputs = module()
        return lambda: model(*inputs)

    def scripted() -> Callable[[], object]:
        from benchmarks import torch_models

        model, inputs = module()
        compiled = torch_models.script(model)
        return lambda: compiled(*inputs)

    def no_grad():
        import torch

        return torch.inference_mode()

    return [
        Engine("torch eager", eager, f"{bench_threads()} threads", no_grad),
        Engine("torch.jit.script", scripted, f"{bench_threads()} threads", no_grad),
    ]


def _numpy_engine(fn: Callable[[], object], note: str = "float32") -> Engine:
    return Engine("numpy", lambda: fn, note)


# --- workloads ----------------------------------------------------------------------------------


def mlp_workloads(sizes: dict) -> list[Workload]:
    from benchmarks import onnx_models

    weights = models.mlp_weights(sizes["sizes"])
    layers = "-".join(str(s) for s in sizes["sizes"])
    out = []
    for batch in sizes["batches"]:
        inputs = models.mlp_inputs(batch, sizes["sizes"][0])
        w = Workload(
            "mlp",
            f"MLP {layers}, batch {batch}",
            inputs,
            npm.mlp_forward(weights, *inputs),
        )
        mod, params = models.mlp_module(weights, batch)
        w.engines = [
            *relayvm_engines(w, mod, params),
            _onnxruntime_engine(w, lambda batch=batch: onnx_models.mlp(weights, batch)),
            *_torch_engines(w, lambda tm: tm.mlp(weights)),
            _numpy_engine(lambda x=inputs[0]: npm.mlp_forward(weights, x, dtype="float32")),
        ]
        out.append(w)
    return out


def resnet18_workloads(sizes: dict) -> list[Workload]:
    from benchmarks import onnx_models

    weights = models.resnet18_weights(sizes["width"], sizes["classes"])
    image = sizes["image"]
    inputs = models.resnet18_inputs(1, image)
    w = Workload(
        "resnet18",
        f"ResNet-18, 1x3x{image}x{image}",
        inputs,
        npm.resnet18_forward(weights, *inputs),
    )
    mod, params = models.resnet18_module(weights, 1, image)
    w.engines = [
        *relayvm_engines(w, mod, params),
        _onnxruntime_engine(w, lambda: onnx_models.resnet18(weights, 1, image)),
        *_torch_engines(w, lambda tm: tm.resnet18(weights)),
        _numpy_engine(
            lambda: npm.resnet18_forward(weights, inputs[0], dtype="float32"),
            "float32, im2col + matmul",
        ),
    ]
    return [w]


def transformer_workloads(sizes: dict) -> list[Workload]:
    from benchmarks import onnx_models

    seq, heads = sizes["seq"], sizes["heads"]
    weights = models.transformer_weights(sizes["width"], sizes["ff"])
    inputs = models.transformer_inputs(seq, sizes["width"])
    w = Workload(
        "transformer",
        f"transformer layer s{seq} d{sizes['width']} h{heads}",
        inputs,
        npm.transformer_forward(weights, *inputs, heads=heads),
    )
    mod, params = models.transformer_module(weights, seq, heads)
    w.engines = [
        *relayvm_engines(w, mod, params),
        _onnxruntime_engine(w, lambda: onnx_models.transformer(weights, seq, heads)),
        *_torch_engines(w, lambda tm: tm.transformer(weights, heads)),
        _numpy_engine(
            lambda: npm.transformer_forward(weights, inputs[0], heads, dtype="float32"),
            "float32, erf by A&S 7.1.26",
        ),
    ]
    return [w]


def lstm_workloads(sizes: dict) -> list[Workload]:
    from benchmarks import onnx_models

    steps = sizes["steps"]
    weights = models.lstm_weights(sizes["input"], sizes["hidden"])
    inputs = models.lstm_inputs(steps, sizes["input"], sizes["hidden"])
    w = Workload(
        "lstm",
        f"LSTM h{sizes['hidden']}, {steps} steps",
        inputs,
        npm.lstm_forward(weights, *inputs),
    )
    mod, params = models.lstm_module(weights, steps)

    def numba_loop() -> Callable[[], object]:
        from benchmarks import numba_models

        loop = numba_models.LSTMLoop(weights)
        return lambda: loop(*inputs)

    w.engines = [
        *relayvm_engines(w, mod, params),
        _onnxruntime_engine(
            w,
            lambda: onnx_models.lstm_loop(weights, steps),
            "onnxruntime Loop",
            f"ONNX Loop op, {bench_threads()} threads",
        ),
        _onnxruntime_engine(
            w,
            lambda: onnx_models.lstm_unrolled(weights, steps),
            "onnxruntime unrolled",
            f"one graph, the cell repeated, {bench_threads()} threads",
        ),
        *_torch_engines(w, lambda tm: tm.lstm(weights)),
        Engine("numba, one function", numba_loop, "the whole loop in one @njit"),
        _numpy_engine(lambda: npm.lstm_forward(weights, *inputs, dtype="float32")),
    ]
    return [w]


def chain_workloads(sizes: dict) -> list[Workload]:
    from benchmarks import onnx_models
    from compiler import relay

    length, shape = sizes["length"], tuple(sizes["shape"])
    inputs = models.chain_inputs(shape)
    w = Workload(
        "chain",
        f"{length}-op chain, {shape[0]}x{shape[1]}",
        inputs,
        npm.chain_forward(inputs[0], length),
    )
    mod, params = models.chain(length, shape)

    def unfused():
        with relay.transform.PassContext(opt_level=0):
            return relay.vm.compile(mod, params=params)

    def fused_numba() -> Callable[[], object]:
        from benchmarks import numba_models

        return lambda: numba_models.chain_fused(inputs[0], length)

    w.engines = [
        *relayvm_engines(w, mod, params),
        _relayvm_engine(w, "relayvm opt_level=0", unfused, note="PassContext(opt_level=0); "),
        _onnxruntime_engine(w, lambda: onnx_models.chain(length, shape)),
        Engine("numba, hand-fused loop", fused_numba, "one pass over the elements"),
        _numpy_engine(lambda: npm.chain_forward(inputs[0], length, dtype="float32")),
    ]
    return [w]


_BUILDERS = {
    "mlp": mlp_workloads,
    "resnet18": resnet18_workloads,
    "transformer": transformer_workloads,
    "lstm": lstm_workloads,
    "chain": chain_workloads,
}


# --- running ------------------------------------------------------------------------------------


@dataclass
class Prepared:
    """An engine that built and answered correctly-shaped output, ready to be timed."""

    engine: Engine
    fn: Callable[[], object]
    diff: float


def prepare_engine(workload: Workload, engine: Engine) -> Prepared | Row:
    """Build one engine and check its answer: a :class:`Prepared` to time, or the final
    ``n/a`` row saying why it cannot run."""
    try:
        with engine.context():
            fn = engine.build()
            output = _to_numpy(fn())
    except Unavailable as why:
        return Row(workload.label, engine.name, None, f"n/a: {why}")
    except Exception as error:  # a peer failing must not hide the other measurements
        return Row(workload.label, engine.name, None, f"n/a: failed: {_first_line(error)}")
    if output.shape != workload.reference.shape:
        return Row(
            workload.label,
            engine.name,
            None,
            f"MISMATCH: output shape {output.shape}, reference {workload.reference.shape}",
        )
    diff = float(np.max(np.abs(output.astype("float64") - workload.reference)))
    return Prepared(engine, fn, diff)


def run_engines(workload: Workload, engines: list[Engine], options: Options) -> list[Row]:
    """Build and check every engine, then time the runnable ones in interleaved rounds; one
    row per engine, in the given order."""
    prepared = [prepare_engine(workload, engine) for engine in engines]
    ready = [p for p in prepared if isinstance(p, Prepared)]
    seconds = measure_interleaved(
        [p.fn for p in ready],
        options.rounds,
        options.min_round_seconds,
        contexts=[p.engine.context for p in ready],
    )
    timed = {id(p): s for p, s in zip(ready, seconds)}
    limit = tolerance(workload.reference)
    rows = []
    for p in prepared:
        if isinstance(p, Row):
            rows.append(p)
            continue
        note = p.engine.note
        if not p.diff <= limit:
            note = f"MISMATCH (tolerance {limit:.1e}); {note}"
        rows.append(Row(workload.label, p.engine.name, timed[id(p)], note, p.diff))
    return rows


def run_engine(workload: Workload, engine: Engine, options: Options) -> Row:
    """Build, check and time one engine on one workload."""
    return run_engines(workload, [engine], options)[0]


def fresh_process_rows(workload: Workload, options: Options) -> list[Row]:
    """Load + first result in a new process: relayvm with a warm and an empty kernel cache,
    and onnxruntime (session creation + first run) for comparison."""
    from benchmarks import fresh_process

    label = f"{workload.label}: fresh process"
    runs = 1 if options.quick else 3

    def measured(engine: str, starts: list[Callable[[], fresh_process.FreshResult]]) -> Row:
        try:
            results = [start() for start in starts]
        except fresh_process.FreshProcessError as error:
            return Row(label, engine, None, f"n/a: failed: {error}")
        seconds = float(np.median([r.seconds for r in results]))
        walls = float(np.median([r.wall_seconds for r in results]))
        return _fresh_row(label, engine, workload, results[0].output, seconds, walls, len(starts))

    warm_name, cold_name = "relayvm, warm kernel cache", "relayvm, empty kernel cache"
    rows = []
    with tempfile.TemporaryDirectory(prefix="relayvm-bench-") as tmp:
        tmp_path = pathlib.Path(tmp)
        if workload.executable is None:
            reason = workload.relayvm_failure or "relayvm did not run this model"
            rows.append(Row(label, warm_name, None, f"n/a: {reason}"))
            rows.append(Row(label, cold_name, None, f"n/a: {reason}"))
        else:
            exe_path = tmp_path / f"{workload.key}.relayvm"
            workload.executable.save(exe_path)
            empty = tmp_path / "empty-cache"
            empty.mkdir()

            # The parent already ran this executable, so its kernels are in the cache.
            def warm() -> fresh_process.FreshResult:
                return fresh_process.relayvm_first_result(exe_path, workload.inputs)

            def cold() -> fresh_process.FreshResult:
                return fresh_process.relayvm_first_result(exe_path, workload.inputs, empty)

            rows.append(measured(warm_name, [warm] * runs))
            rows.append(measured(cold_name, [cold]))
        if workload.onnx_bytes is None:
            rows.append(Row(label, "onnxruntime", None, "n/a: onnxruntime did not run this model"))
        else:
            model_path = tmp_path / f"{workload.key}.onnx"
            model_path.write_bytes(workload.onnx_bytes)

            def session() -> fresh_process.FreshResult:
                return fresh_process.onnxruntime_first_result(
                    model_path, workload.inputs, bench_threads()
                )

            rows.append(measured("onnxruntime", [session] * runs))
    return rows


def _fresh_row(label, engine, workload, output, seconds, wall, runs) -> Row:
    diff = float(np.max(np.abs(np.asarray(output, "float64") - workload.reference)))
    note = f"import + load + first result; wall {format_seconds(wall)} with interpreter start"
    if runs > 1:
        note += f"; median of {runs}"
    if not diff <= tolerance(workload.reference):
        note = "MISMATCH; " + note
    return Row(label, engine, seconds, note, diff)


def run(names: list[str], options: Options) -> list[Row]:
    """Every engine on every workload of the named models, in order; returns the rows."""
    sizes = QUICK_SIZES if options.quick else FULL_SIZES
    rows: list[Row] = []
    for name in names:
        t0 = time.perf_counter()
        workloads = _BUILDERS[name](sizes[name])
        for workload in workloads:
            rows += run_engines(workload, workload.engines, options)
            if name in TVM_FIGURES and not options.quick:
                note = f"not installable here; {TVM_FIGURES[name]}"
                rows.append(Row(workload.label, "TVM", None, note))
            if options.fresh and name in ("resnet18", "mlp") and workload is workloads[0]:
                rows += fresh_process_rows(workload, options)
        print(f"# {name}: {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    return rows


# --- targets ------------------------------------------------------------------------------------


def _seconds(rows: list[Row], workload: str, engine: str) -> float | None:
    for row in rows:
        if row.workload == workload and row.engine == engine:
            return row.seconds
    return None


def judge_targets(rows: list[Row]) -> list[str]:
    """Issues 4 and 15's speed targets, each judged from this run's rows: one line per
    target (issue 15's, which name it, last)."""
    lines = []
    workloads = {row.workload for row in rows}

    def ran(label: str, workload: str) -> bool:
        if workload in workloads:
            return True
        lines.append(f"{label}: not run in this invocation")
        return False

    def ratio(
        label: str,
        workload: str,
        other: str,
        limit: float,
        strict: bool = False,
        engine: str = "relayvm",
    ) -> None:
        if not ran(label, workload):
            return
        ours, theirs = _seconds(rows, workload, engine), _seconds(rows, workload, other)
        if ours is None or theirs is None:
            missing = engine if ours is None else other
            lines.append(f"{label}: not measured ({missing} n/a): MISSED")
            return
        value = ours / theirs
        met = value < limit if strict else value <= limit
        bound = f"< {limit:.1f}x" if strict else f"<= {limit:.1f}x"
        lines.append(
            f"{label}: {engine} {format_seconds(ours)} / {other} {format_seconds(theirs)}"
            f" = {value:.2f}x (target {bound}): {'met' if met else 'MISSED'}"
        )

    def absolute(label: str, workload: str, engine: str, limit: float, strict: bool) -> None:
        if not ran(label, workload):
            return
        ours = _seconds(rows, workload, engine)
        if ours is None:
            lines.append(f"{label}: not measured (n/a): MISSED")
            return
        met = ours < limit if strict else ours <= limit
        bound = f"< {format_seconds(limit)}" if strict else f"<= {format_seconds(limit)}"
        lines.append(
            f"{label}: {format_seconds(ours)} (target {bound}): {'met' if met else 'MISSED'}"
        )

    ratio("MLP batch 1 vs onnxruntime", "MLP 784-512-512-10, batch 1", "onnxruntime", 1.0)
    ratio("MLP batch 64 vs onnxruntime", "MLP 784-512-512-10, batch 64", "onnxruntime", 1.0)
    mlp1, mlp64 = "MLP 784-512-512-10, batch 1", "MLP 784-512-512-10, batch 64"
    lstm = "LSTM h128, 32 steps"
    ratio("MLP batch 1, default opt_level", mlp1, "onnxruntime", 1.0, engine=DEFAULT_ENGINE)
    ratio("MLP batch 64, default opt_level", mlp64, "onnxruntime", 1.0, engine=DEFAULT_ENGINE)
    ratio("LSTM, default opt_level", lstm, "onnxruntime Loop", 1.0, engine=DEFAULT_ENGINE)
    ratio("ResNet-18 vs onnxruntime", "ResNet-18, 1x3x224x224", "onnxruntime", 1.3)
    ratio("ResNet-18 vs torch eager", "ResNet-18, 1x3x224x224", "torch eager", 1.0, strict=True)
    ratio("LSTM vs onnxruntime Loop", "LSTM h128, 32 steps", "onnxruntime Loop", 1.0, strict=True)
    ratio("LSTM vs one numba function", "LSTM h128, 32 steps", "numba, one function", 1.3)
    absolute("100-op chain, fused", "100-op chain, 10x10", "relayvm", 60e-6, strict=False)
    absolute(
        "ResNet-18 fresh process, warm cache, load + first result",
        "ResNet-18, 1x3x224x224: fresh process",
        "relayvm, warm kernel cache",
        1.5,
        strict=True,
    )
    cold_label = "ResNet-18 fresh process, empty cache (report only)"
    if ran(cold_label, "ResNet-18, 1x3x224x224: fresh process"):
        cold = _seconds(
            rows, "ResNet-18, 1x3x224x224: fresh process", "relayvm, empty kernel cache"
        )
        lines.append(f"{cold_label}: {'n/a' if cold is None else format_seconds(cold)}")
    lines.append("Memory planning (peak intermediate bytes): see bench_memory")
    # Issue 15's, beside issue 4's: the same workloads against onnxruntime, tighter.
    resnet18 = "ResNet-18, 1x3x224x224"
    ratio("Issue 15: ResNet-18 vs onnxruntime", resnet18, "onnxruntime", 1.0)
    ratio(
        "Issue 15: ResNet-18, default opt_level",
        resnet18,
        "onnxruntime",
        1.0,
        engine=DEFAULT_ENGINE,
    )
    ratio("Issue 15: LSTM vs onnxruntime Loop", lstm, "onnxruntime Loop", 1.0)
    ratio("Issue 15: 100-op chain vs onnxruntime", "100-op chain, 10x10", "onnxruntime", 0.6)
    return lines


# --- command line -------------------------------------------------------------------------------


def parse_models(text: str | None) -> list[str]:
    """``"mlp,lstm"`` -> ``["mlp", "lstm"]`` in the canonical order; ``None`` -> every model."""
    if not text:
        return list(MODEL_NAMES)
    wanted = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [name for name in wanted if name not in MODEL_NAMES]
    if unknown:
        raise ValueError(
            f"unknown model(s) {', '.join(unknown)}; choose from {', '.join(MODEL_NAMES)}"
        )
    return [name for name in MODEL_NAMES if name in wanted]


def main(argv: list[str] | None = None) -> int:
    """Run the model benchmarks and print the table; exit status 1 if any output mismatched."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.bench_models", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--quick", action="store_true", help="small sizes and few rounds")
    parser.add_argument("--models", help=f"comma-separated subset of {','.join(MODEL_NAMES)}")
    parser.add_argument("--no-fresh", action="store_true", help="skip the fresh-process rows")
    args = parser.parse_args(argv)
    try:
        names = parse_models(args.models)
    except ValueError as error:
        parser.error(str(error))
    options = Options(quick=args.quick, fresh=not args.no_fresh)
    if args.quick:
        options.rounds, options.min_round_seconds = 3, 0.01
    load_before = os.getloadavg()[0]
    rows = run(names, options)
    load_after = os.getloadavg()[0]
    print_peer_table(rows)
    print(
        f"Machine: {os.cpu_count()} cores; 1-minute load average {load_before:.2f} before the "
        f"run, {load_after:.2f} after (other processes share these cores; compare ratios)."
    )
    if args.quick:
        print("Targets of issues 4 and 15: judged at full size only (run without --quick).")
    else:
        print("Targets of issues 4 and 15 (this run):")
        for line in judge_targets(rows):
            print(f"  {line}")
    mismatches = [r for r in rows if "MISMATCH" in r.note]
    for row in mismatches:
        print(f"MISMATCH: {row.workload} / {row.engine}: {row.note}")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
