"""Smoke run of the benchmark models and harness: tiny sizes, every form agrees, no timings judged.

Each model of ``benchmarks.models`` is built at a tiny size and run on the reference
interpreter (and, for models whose kernels the rest of the suite already compiles, on the
VM); its Relay, ONNX (onnxruntime), torch and numba forms must agree with the float64 numpy
reference. The harness pieces (model selection, the peer table, target judging, the
engine runner's n/a and mismatch handling) are checked on made-up rows.
"""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks import bench_dispatch, bench_models, models, peers
from benchmarks import numpy_models as npm
from benchmarks.peers import Row, measure, print_peer_table, wait_until_idle

# Tiny instances: (relay builder, onnx builder, torch builder, inputs, reference).
TINY_MLP = {"sizes": (12, 8, 8, 4), "batch": 3}
TINY_RESNET = {"width": 2, "classes": 5, "image": 16}
TINY_TRANSFORMER = {"seq": 6, "width": 8, "heads": 2, "ff": 12}
TINY_LSTM = {"steps": 3, "input": 5, "hidden": 4}
TINY_CHAIN = {"length": 8, "shape": (2, 3)}


def _mlp():
    w = models.mlp_weights(TINY_MLP["sizes"])
    x = models.mlp_inputs(TINY_MLP["batch"], TINY_MLP["sizes"][0])
    return {
        "relay": lambda: models.mlp_module(w, TINY_MLP["batch"]),
        "onnx": lambda om: om.mlp(w, TINY_MLP["batch"]),
        "torch": lambda tm: tm.mlp(w),
        "inputs": x,
        "reference": npm.mlp_forward(w, *x),
        "numpy32": lambda: npm.mlp_forward(w, *x, dtype="float32"),
    }


def _resnet18():
    s = TINY_RESNET
    w = models.resnet18_weights(s["width"], s["classes"])
    x = models.resnet18_inputs(1, s["image"])
    return {
        "relay": lambda: models.resnet18_module(w, 1, s["image"]),
        "onnx": lambda om: om.resnet18(w, 1, s["image"]),
        "torch": lambda tm: tm.resnet18(w),
        "inputs": x,
        "reference": npm.resnet18_forward(w, *x),
        "numpy32": lambda: npm.resnet18_forward(w, *x, dtype="float32"),
    }


def _transformer():
    s = TINY_TRANSFORMER
    w = models.transformer_weights(s["width"], s["ff"])
    x = models.transformer_inputs(s["seq"], s["width"])
    return {
        "relay": lambda: models.transformer_module(w, s["seq"], s["heads"]),
        "onnx": lambda om: om.transformer(w, s["seq"], s["heads"]),
        "torch": lambda tm: tm.transformer(w, s["heads"]),
        "inputs": x,
        "reference": npm.transformer_forward(w, *x, heads=s["heads"]),
        "numpy32": lambda: npm.transformer_forward(w, *x, heads=s["heads"], dtype="float32"),
    }


def _lstm():
    s = TINY_LSTM
    w = models.lstm_weights(s["input"], s["hidden"])
    x = models.lstm_inputs(s["steps"], s["input"], s["hidden"])
    return {
        "relay": lambda: models.lstm_module(w, s["steps"]),
        "onnx": lambda om: om.lstm_loop(w, s["steps"]),
        "onnx_unrolled": lambda om: om.lstm_unrolled(w, s["steps"]),
        "torch": lambda tm: tm.lstm(w),
        "inputs": x,
        "reference": npm.lstm_forward(w, *x),
        "numpy32": lambda: npm.lstm_forward(w, *x, dtype="float32"),
        "weights": w,
    }


def _chain():
    s = TINY_CHAIN
    x = models.chain_inputs(s["shape"])
    return {
        "relay": lambda: models.chain(s["length"], s["shape"]),
        "onnx": lambda om: om.chain(s["length"], s["shape"]),
        "inputs": x,
        "reference": npm.chain_forward(x[0], s["length"]),
        "numpy32": lambda: npm.chain_forward(x[0], s["length"], dtype="float32"),
    }


CASES = {
    "mlp": _mlp,
    "resnet18": _resnet18,
    "transformer": _transformer,
    "lstm": _lstm,
    "chain": _chain,
}
TORCH_CASES = ["mlp", "resnet18", "transformer", "lstm"]


def _close(got, reference) -> None:
    got = np.asarray(got, dtype="float64")
    assert got.shape == reference.shape
    np.testing.assert_allclose(got, reference, rtol=1e-4, atol=1e-5)


# --- returns: every form of every model gives the reference answer ------------------------------


@pytest.mark.parametrize("name", sorted(CASES))
def test_relay_model_on_reference_interpreter_returns_the_numpy_answer(name):
    from compiler import relay

    case = CASES[name]()
    mod, params = case["relay"]()
    result = relay.create_executor("debug", mod, params=params).evaluate()(*case["inputs"])
    _close(result, case["reference"])


@pytest.mark.parametrize("name", ["mlp", "chain"])
def test_relay_model_on_vm_returns_the_numpy_answer(name):
    import vm
    from compiler import relay

    case = CASES[name]()
    mod, params = case["relay"]()
    machine = vm.VirtualMachine(relay.vm.compile(mod, params=params), vm.cpu())
    _close(machine.invoke("main", *case["inputs"]), case["reference"])


def test_saved_executable_returns_the_answer_in_a_fresh_process(tmp_path):
    from benchmarks import fresh_process
    from compiler import relay

    case = CASES["chain"]()
    mod, params = case["relay"]()
    exe = relay.vm.compile(mod, params=params)
    path = tmp_path / "chain.relayvm"
    exe.save(path)
    result = fresh_process.relayvm_first_result(path, case["inputs"])
    _close(result.output, case["reference"])
    assert 0 < result.seconds < result.wall_seconds


def test_fresh_process_failure_names_the_model_and_the_exit_code(tmp_path):
    from benchmarks import fresh_process

    path = tmp_path / "broken.relayvm"
    path.write_bytes(b"not an executable")
    with pytest.raises(
        fresh_process.FreshProcessError, match=r"broken\.relayvm exited with code 1"
    ):
        fresh_process.relayvm_first_result(path, [np.zeros(1, "float32")])


def test_relay_lstm_loop_is_a_recursive_global_function():
    from compiler import relay

    mod, params = _lstm()["relay"]()
    assert set(params) == {"w_ih", "w_hh", "b"}
    loop = mod[mod.get_global_var("loop")]
    calls = []
    relay.analysis.post_order_visit(
        loop.body,
        lambda e: (
            calls.append(e)
            if isinstance(e, relay.Call) and isinstance(e.op, relay.GlobalVar)
            else None
        ),
    )
    assert [c.op.name_hint for c in calls] == ["loop"]


def test_resnet18_has_batch_norm_in_the_graph_and_eight_blocks():
    from compiler import relay

    mod, params = _resnet18()["relay"]()
    ops = []
    relay.analysis.post_order_visit(
        mod["main"].body,
        lambda e: (
            ops.append(e.op.name)
            if isinstance(e, relay.Call) and isinstance(e.op, relay.Op)
            else None
        ),
    )
    assert ops.count("nn.conv2d") == 20  # stem + 16 in blocks + 3 projections
    assert ops.count("nn.batch_norm") == 20
    assert ops.count("nn.max_pool2d") == 1 and ops.count("nn.global_avg_pool2d") == 1
    assert len(models.resnet18_blocks()) == 8
    assert all(name in params for name in ("conv1_w", "fc_w", "layer4_1_bn2_var"))


@pytest.mark.parametrize("name", sorted(CASES))
def test_numpy_float32_form_returns_the_reference_answer(name):
    case = CASES[name]()
    _close(case["numpy32"](), case["reference"])


@pytest.mark.parametrize("name", sorted(CASES))
def test_onnx_model_on_onnxruntime_returns_the_reference_answer(name):
    pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    from benchmarks import onnx_models
    from benchmarks.peers import onnxruntime_session

    case = CASES[name]()
    builders = [case["onnx"]] + ([case["onnx_unrolled"]] if "onnx_unrolled" in case else [])
    for build in builders:
        sess = onnxruntime_session(build(onnx_models), threads=1)
        feeds = {i.name: a for i, a in zip(sess.get_inputs(), case["inputs"])}
        _close(sess.run(None, feeds)[0], case["reference"])


@pytest.mark.parametrize("name", TORCH_CASES)
def test_torch_model_eager_and_scripted_return_the_reference_answer(name):
    torch = pytest.importorskip("torch")
    from benchmarks import torch_models

    case = CASES[name]()
    module = case["torch"](torch_models)
    inputs = [torch_models.tensor(a) for a in case["inputs"]]
    with torch.inference_mode():
        _close(module(*inputs).numpy(), case["reference"])
        _close(torch_models.script(module)(*inputs).numpy(), case["reference"])


def test_numba_peers_return_the_reference_answer():
    from benchmarks import numba_models

    lstm = _lstm()
    _close(numba_models.LSTMLoop(lstm["weights"])(*lstm["inputs"]), lstm["reference"])
    chain = _chain()
    _close(numba_models.chain_fused(chain["inputs"][0], TINY_CHAIN["length"]), chain["reference"])


# --- invalid: bad sizes and names are refused with a clear message -------------------------------


def test_chain_length_not_a_multiple_of_the_pattern_is_refused():
    with pytest.raises(ValueError, match="multiple of 4, got 7"):
        models.chain(7)


def test_transformer_width_not_divisible_by_heads_is_refused():
    with pytest.raises(ValueError, match="width 8 is not a multiple of heads=3"):
        models.transformer_module(models.transformer_weights(8, 12), 4, heads=3)


def test_unknown_model_name_is_refused():
    with pytest.raises(ValueError, match=r"unknown model.*vgg"):
        bench_models.parse_models("mlp,vgg")


def test_model_subset_comes_back_in_canonical_order():
    assert bench_models.parse_models("chain, mlp") == ["mlp", "chain"]
    assert bench_models.parse_models(None) == list(bench_models.MODEL_NAMES)


# --- harness: n/a rows, mismatches, ratios and targets -------------------------------------------


def _workload() -> bench_models.Workload:
    x = np.ones((2, 2), "float32")
    return bench_models.Workload("toy", "toy", [x], x.astype("float64") * 2)


def test_engine_that_cannot_run_prints_na_with_its_reason():
    def build():
        raise bench_models.Unavailable("no kernel for nn.conv2d")

    row = bench_models.run_engine(
        _workload(), bench_models.Engine("relayvm", build), bench_models.Options(quick=True)
    )
    assert row.seconds is None and row.note == "n/a: no kernel for nn.conv2d"


def test_engine_with_a_wrong_answer_is_flagged_as_mismatch():
    w = _workload()
    options = bench_models.Options(quick=True, rounds=1, min_round_seconds=0.0)
    good = bench_models.run_engine(
        w, bench_models.Engine("numpy", lambda: lambda: w.inputs[0] * 2), options
    )
    bad = bench_models.run_engine(
        w, bench_models.Engine("numpy", lambda: lambda: w.inputs[0]), options
    )
    assert good.max_abs_diff == 0.0 and "MISMATCH" not in good.note
    assert bad.max_abs_diff == 1.0 and bad.note.startswith("MISMATCH")


def test_peer_table_gives_ratios_to_the_fastest_peer(capsys):
    rows = [
        Row("w", "relayvm", 3e-6, "ours", 1e-7),
        Row("w", "onnxruntime", 2e-6, "", 0.0),
        Row("w", "numpy", 1e-6, ""),
        Row("w", "TVM", None, "not installable here"),
    ]
    print_peer_table(rows)
    lines = {line.split()[1]: line for line in capsys.readouterr().out.splitlines()[2:] if line}
    assert "3.00x" in lines["relayvm"] and "1.00e-07" in lines["relayvm"]
    assert "2.00x" in lines["onnxruntime"]
    assert "1.00x fastest" in lines["numpy"]
    assert "n/a" in lines["TVM"] and "not installable here" in lines["TVM"]


def test_targets_are_judged_from_the_rows_of_the_run():
    mlp1 = "MLP 784-512-512-10, batch 1"
    rows = [
        Row(mlp1, "relayvm", 50e-6),
        Row(mlp1, "onnxruntime", 60e-6),
        Row(mlp1, "relayvm default", 90e-6),
        Row("MLP 784-512-512-10, batch 64", "relayvm", 2e-3),
        Row("MLP 784-512-512-10, batch 64", "onnxruntime", 1e-3),
        Row("100-op chain, 10x10", "relayvm", 70e-6),
        Row("100-op chain, 10x10", "onnxruntime", 100e-6),
        Row("LSTM h128, 32 steps", "relayvm", None, "n/a: failed"),
    ]
    lines = bench_models.judge_targets(rows)
    assert lines[0].startswith("MLP batch 1 vs onnxruntime") and lines[0].endswith(
        "0.83x (target <= 1.0x): met"
    )
    assert lines[1].endswith("2.00x (target <= 1.0x): MISSED")
    lstm = next(line for line in lines if line.startswith("LSTM vs onnxruntime Loop"))
    assert lstm.endswith("not measured (relayvm n/a): MISSED")
    default = next(line for line in lines if line.startswith("MLP batch 1, default opt_level"))
    assert default == (
        "MLP batch 1, default opt_level: relayvm default 90 us / onnxruntime 60 us = 1.50x"
        " (target <= 1.0x): MISSED"
    )
    chain = next(line for line in lines if line.startswith("100-op chain"))
    assert chain == "100-op chain, fused: 70 us (target <= 60 us): MISSED"
    resnet = next(line for line in lines if line.startswith("ResNet-18 vs onnxruntime"))
    assert resnet == "ResNet-18 vs onnxruntime: not run in this invocation"
    # Issue 15's come last and name it; the chain's is a ratio there.
    assert lines[-1] == (
        "Issue 15: 100-op chain vs onnxruntime: relayvm 70 us / onnxruntime 100 us = 0.70x"
        " (target <= 0.6x): MISSED"
    )


def test_dispatch_targets_are_judged_per_engine():
    add = "x + x, 10x10, one call"
    rows = [
        Row(add, "relayvm", 0.8e-6),
        Row(add, "numpy", 0.1e-6),
        Row("other", "relayvm AOT", 1e-9),
    ]
    assert bench_dispatch.judge_targets(rows) == [
        "x + x through relayvm: 800 ns (target <= 1 us): met",
        "x + x through relayvm AOT: not measured: MISSED",
    ]


class _Clock:
    """Stands in for the ``time`` module of benchmarks.peers: wall time moves only when
    told, CPU time by what ``cpu_busy`` says a sleep of the caller costs the process."""

    def __init__(self, cpu_busy=lambda now: False) -> None:
        self.now = 0.0
        self.cpu = 0.0
        self.cpu_busy = cpu_busy

    def perf_counter(self) -> float:
        return self.now

    def process_time(self) -> float:
        return self.cpu

    def sleep(self, seconds: float) -> None:
        if self.cpu_busy(self.now):
            self.cpu += seconds
        self.now += seconds


def test_measure_reports_seconds_per_call(monkeypatch):
    clock = _Clock()
    monkeypatch.setattr(peers, "time", clock)
    monkeypatch.setattr(peers, "wait_until_idle", lambda: 0.0)
    calls = []

    def call() -> None:
        calls.append(1)
        clock.now += 2.0**-12  # exact in binary: the counts below are exact too

    seconds = measure(call, rounds=2, min_round_seconds=2.0**-10, warmup=1)
    assert seconds == 2.0**-12
    # A warm-up call, a timing call, then two rounds of 4 calls (each >= 2**-10 s).
    assert len(calls) == 1 + 1 + 2 * 4


# --- python -m benchmarks: every benchmark runs, a missing or failing one is reported ------------


def test_benchmarks_main_runs_each_benchmark_and_reports_failures(monkeypatch, capsys):
    import types

    from benchmarks import __main__ as runner

    calls = []

    def fake(name, result):
        def main(argv):
            calls.append((name, argv))
            if isinstance(result, Exception):
                raise result
            return result

        return types.SimpleNamespace(main=main)

    modules = {
        "dispatch": fake("dispatch", RuntimeError("broken benchmark")),
        "models": fake("models", 0),
        "memory": None,
        "wild": fake("wild", 0),
    }
    monkeypatch.setattr(runner, "_module_for", modules.get)
    status = runner.main(["--quick", "--models", "mlp", "--no-fresh"])
    out = capsys.readouterr()
    assert status == 1
    assert calls == [
        ("dispatch", ["--quick"]),
        ("models", ["--quick", "--models", "mlp", "--no-fresh"]),
        ("wild", ["--quick", "--no-fresh"]),
    ]
    assert "bench_memory: not present" in out.out
    assert "broken benchmark" in out.err


def test_benchmarks_main_refuses_an_unknown_benchmark(capsys):
    from benchmarks import __main__ as runner

    with pytest.raises(SystemExit):
        runner.main(["--only", "models,speed"])
    assert "unknown benchmark(s) speed" in capsys.readouterr().err


#: A window that adds up exactly in binary floating point.
WINDOW = 2.0**-8


def test_wait_until_idle_outlasts_a_busy_thread(monkeypatch) -> None:
    # A pool that keeps polling after its call must be idle before the next engine is timed:
    # here another thread keeps a core busy for the first 0.25 s.
    clock = _Clock(cpu_busy=lambda now: now < 0.25)
    monkeypatch.setattr(peers, "time", clock)
    assert wait_until_idle(limit=5.0, window=WINDOW) == 0.25 + WINDOW


def test_wait_until_idle_gives_up_after_its_limit(monkeypatch) -> None:
    clock = _Clock(cpu_busy=lambda now: True)
    monkeypatch.setattr(peers, "time", clock)
    assert wait_until_idle(limit=1.0, window=WINDOW) == 1.0 + 2 * WINDOW


def test_wait_until_idle_returns_at_once_when_nothing_runs(monkeypatch) -> None:
    clock = _Clock()
    monkeypatch.setattr(peers, "time", clock)
    assert wait_until_idle(limit=5.0, window=WINDOW) == WINDOW


def test_dense_layer_benchmark_agrees_with_onnxruntime():
    pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    from benchmarks import bench_dense_layers

    ours, theirs, diff = bench_dense_layers.run_shape(8, 64, 48, rounds=1)
    assert ours > 0 and theirs > 0 and diff < 1e-4
