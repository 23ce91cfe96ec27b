"""``relayvm`` (compiler.cli): compile, bench, and run/info/bytecode handed to vm.cli.

Returns: Relay text and ONNX models compile for the vm, graph and aot executors and as
Model Library Format; the compiled file runs through ``relayvm run`` (also as a process
through ``python -m compiler``) and its outputs match; ``bench`` prints the time_evaluator
table, beside onnxruntime for ONNX models, and draws it. Invalid: bad ``--input-shapes``,
a missing output directory, an unknown model suffix, a TorchScript model without the
frontend. Malformed: Relay text that does not parse is one line naming file and position.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from compiler.cli import bench_table, main, parse_input_shapes
from tests.vm.terminal import run_on_terminal
from vm.cli import EXIT_ERROR, CLIError

ROOT = Path(__file__).resolve().parents[2]

RELAY = """#[version = "0.0.5"]
def @main(%x: Tensor[(2, 3), float32], %y: Tensor[(2, 3), float32]) {
  nn.relu(add(%x, %y))
}
"""


@pytest.fixture(scope="module")
def relay_model(tmp_path_factory):
    path = tmp_path_factory.mktemp("cli") / "add.relay"
    path.write_text(RELAY)
    return path


@pytest.fixture(scope="module")
def compiled(relay_model):
    out = relay_model.with_suffix(".relayvm")
    assert main(["compile", str(relay_model), "-o", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def onnx_model(tmp_path_factory):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "y"], ["s"]), helper.make_node("Relu", ["s"], ["z"])],
        "g",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3]),
            helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 3]),
        ],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, ["n", 3])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path_factory.mktemp("cli") / "add.onnx"
    onnx.save(model, str(path))
    return path


def one_error_line(capsys, code, *fragments):
    err = capsys.readouterr().err
    assert code == EXIT_ERROR, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), err
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])


def inputs_file(tmp_path, shape=(2, 3)):
    rng = np.random.default_rng(1)
    x = rng.uniform(-1, 1, shape).astype("float32")
    y = rng.uniform(-1, 1, shape).astype("float32")
    path = tmp_path / "in.npz"
    np.savez(path, x=x, y=y)
    return path, np.maximum(x + y, 0)


# ---- returns --------------------------------------------------------------------------------


def test_parse_input_shapes_reads_tvmc_s_syntax():
    assert parse_input_shapes("x:[1,3,224,224] y:[4]") == {"x": [1, 3, 224, 224], "y": [4]}
    assert parse_input_shapes("a:[2, 3],b:[]") == {"a": [2, 3], "b": []}
    assert parse_input_shapes("input.1:[-1,3]") == {"input.1": [-1, 3]}


def test_compiled_relay_model_runs_and_its_outputs_match(compiled, tmp_path, capsys):
    given, expected = inputs_file(tmp_path)
    out = tmp_path / "out.npz"
    assert main(["run", str(compiled), "--inputs", str(given), "--outputs", str(out)]) == 0
    np.testing.assert_allclose(np.load(out)["output_0"], expected, rtol=1e-6)
    assert main(["info", str(compiled)]) == 0
    assert "Globals" in capsys.readouterr().out


@pytest.mark.parametrize("executor", ["graph", "aot"])
def test_compile_for_the_graph_and_aot_executors(relay_model, tmp_path, executor, capsys):
    out = tmp_path / f"add.{executor}"
    assert main(["compile", str(relay_model), "-o", str(out), "--executor", executor]) == 0
    assert f"{executor} executor" in capsys.readouterr().out
    import vm
    from vm.graph_executor import GraphModule, load_module

    given, expected = inputs_file(tmp_path)
    arrays = dict(np.load(given))
    if executor == "graph":
        module = GraphModule(load_module(str(out))["default"](vm.cpu()))
        module.run(**arrays)
        result = module.get_output(0)
    else:
        result = vm.VirtualMachine(vm.Executable.load_exec(str(out))).invoke("main", **arrays)
    np.testing.assert_allclose(np.asarray(result), expected, rtol=1e-6)


def test_compile_exports_model_library_format(relay_model, tmp_path):
    import tarfile

    out = tmp_path / "add.tar"
    code = main(["compile", str(relay_model), "-o", str(out), "--export-format", "mlf"])
    assert code == 0
    with tarfile.open(out) as archive:
        names = archive.getnames()
    assert any(name.endswith("metadata.json") for name in names), names


def test_compile_onnx_with_input_shapes_and_run(onnx_model, tmp_path):
    out = tmp_path / "onnx.relayvm"
    code = main(["compile", str(onnx_model), "-o", str(out), "--input-shapes", "x:[4,3] y:[4,3]"])
    assert code == 0
    given, expected = inputs_file(tmp_path, (4, 3))
    result = tmp_path / "o.npz"
    assert main(["run", str(out), "--inputs", str(given), "--outputs", str(result)]) == 0
    np.testing.assert_allclose(np.load(result)["output_0"], expected, rtol=1e-6)


def test_bench_prints_the_time_evaluator_table(compiled, capsys):
    assert main(["bench", str(compiled), "--repeat", "2", "--number", "3"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["engine", "mean", "(ms)", "median", "(ms)", "max", "(ms)",
                                "min", "(ms)", "std", "(ms)"]  # fmt: skip
    assert lines[1].startswith("relayvm") and len(lines[1].split()) == 6
    assert lines[-1] == "(2 rounds of 3 calls each)"


def test_bench_of_onnx_is_side_by_side_with_onnxruntime(onnx_model, capsys):
    pytest.importorskip("onnxruntime")
    code = main(["bench", str(onnx_model), "--input-shapes", "x:[8,3] y:[8,3]",
                 "--repeat", "2", "--number", "2"])  # fmt: skip
    assert code == 0
    engines = [line.split()[0] for line in capsys.readouterr().out.splitlines()[1:3]]
    assert engines == ["relayvm", "onnxruntime"]


def test_bench_table_statistics_are_of_the_given_results():
    table = bench_table([("a", [0.001, 0.003])], number=1, repeat=2)
    assert table.splitlines()[1].split() == ["a", "2.0000", "2.0000", "3.0000", "1.0000", "1.0000"]


def test_bench_plot_renders_a_png(compiled, tmp_path):
    pytest.importorskip("matplotlib")
    from matplotlib.image import imread

    out = tmp_path / "bench.png"
    assert main(["bench", str(compiled), "--repeat", "2", "--number", "2", "--plot", str(out)]) == 0
    pixels = imread(out)
    assert pixels.ndim == 3 and (pixels[..., :3] < 0.5).any()


def test_run_profile_writes_trace_and_plot(compiled, tmp_path):
    pytest.importorskip("matplotlib")
    import json

    trace, plot = tmp_path / "t.json", tmp_path / "p.png"
    code = main(["run", str(compiled), "--profile", "--trace", str(trace), "--plot", str(plot)])
    assert code == 0
    events = json.loads(trace.read_text())["traceEvents"]
    assert [e["name"] for e in events if e.get("cat") == "kernel"] == ["vm_mod_fused_add_nn_relu"]
    assert plot.read_bytes()[:4] == b"\x89PNG"


def test_python_m_compiler_runs_as_a_process(relay_model, tmp_path):
    out = tmp_path / "p.relayvm"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "compiler", "compile", str(relay_model), "-o", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    done = subprocess.run([sys.executable, "-m", "compiler", "bytecode", str(out)],
                          capture_output=True, text=True, env=env, timeout=300)  # fmt: skip
    assert done.returncode == 0 and "main" in done.stdout, done.stderr
    done = subprocess.run([sys.executable, "-m", "compiler", "--help"],
                          capture_output=True, text=True, env=env, timeout=300)  # fmt: skip
    assert done.returncode == 0 and "exit status:" in done.stdout


# ---- invalid --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "fragment"),
    [("x:1,2", "expected name:[d0,d1,...]"), ("x:[a]", "must be integers"),
     ("x:[-2]", "negative dimension")],
)  # fmt: skip
def test_invalid_input_shapes_name_the_part(text, fragment):
    with pytest.raises(CLIError, match=fragment.replace("[", r"\[").replace(".", r"\.")):
        parse_input_shapes(text)


def test_invalid_output_directory_and_model_suffix(relay_model, tmp_path, capsys):
    missing = str(tmp_path / "no" / "x.relayvm")
    one_error_line(capsys, main(["compile", str(relay_model), "-o", missing]), missing, "directory")
    odd = tmp_path / "model.txt"
    odd.write_text(RELAY)
    code = main(["compile", str(odd), "-o", str(tmp_path / "x")])
    one_error_line(capsys, code, "model.txt", "unknown model kind", ".onnx")
    code = main(["compile", str(tmp_path / "gone.onnx"), "-o", str(tmp_path / "x")])
    one_error_line(capsys, code, "gone.onnx", "not found")


def test_invalid_torchscript_without_the_frontend_is_one_line(tmp_path, capsys):
    from compiler import relay

    model = tmp_path / "traced.pt"
    model.write_bytes(b"not a zip")
    code = main(["compile", str(model), "-o", str(tmp_path / "x"), "--input-shapes", "x:[1]"])
    try:
        relay.frontend.from_pytorch  # noqa: B018 - present once the frontend lands
    except (AttributeError, ImportError):
        one_error_line(capsys, code, "traced.pt", "no PyTorch frontend")
    else:
        one_error_line(capsys, code, "traced.pt")


def test_invalid_usage_exits_2():
    with pytest.raises(SystemExit) as exit_info:
        main(["compile", "model.onnx"])  # no -o
    assert exit_info.value.code == 2


# ---- malformed ------------------------------------------------------------------------------


def test_malformed_relay_text_is_one_line_with_the_position(tmp_path, capsys):
    bad = tmp_path / "bad.relay"
    bad.write_text("def @main( {\n")
    one_error_line(capsys, main(["compile", str(bad), "-o", str(tmp_path / "x")]), "bad.relay:1:")


def test_malformed_onnx_is_one_line_naming_the_file(tmp_path, capsys):
    pytest.importorskip("onnx")
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x01garbage\xff\xff")
    one_error_line(capsys, main(["compile", str(bad), "-o", str(tmp_path / "x")]), "bad.onnx")


def test_the_console_script_names_this_entry_function():
    import importlib
    import tomllib

    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    module, _, name = scripts["relayvm"].partition(":")
    assert getattr(importlib.import_module(module), name) is main


def test_bench_keeps_its_row_when_onnxruntime_cannot_run_the_model(onnx_model, capsys, monkeypatch):
    ort = pytest.importorskip("onnxruntime")

    def refuse(*args, **kwargs):
        raise RuntimeError("no kernel for this op")

    monkeypatch.setattr(ort, "InferenceSession", refuse)
    code = main(["bench", str(onnx_model), "--input-shapes", "x:[2,3] y:[2,3]",
                 "--repeat", "1", "--number", "1"])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0 and "onnxruntime cannot run" in out and "no kernel for this op" in out
    assert [
        line.split()[0] for line in out.splitlines() if line.startswith(("relayvm", "onnx"))
    ] == ["relayvm"]


# ---- progress -------------------------------------------------------------------------------


def test_compile_builds_the_kernels_and_says_how_many(relay_model, tmp_path, capsys):
    out = tmp_path / "k.relayvm"
    assert main(["compile", str(relay_model), "-o", str(out)]) == 0
    captured = capsys.readouterr()
    assert "1 kernels built in" in captured.out
    assert captured.err == ""  # not a terminal: no bar


def test_compile_and_bench_draw_the_bar_on_a_terminal_unless_quiet(relay_model, tmp_path):
    out = tmp_path / "t.relayvm"
    code, stdout, err = run_on_terminal(["-m", "compiler", "compile", str(relay_model),
                                         "-o", str(out)])  # fmt: skip
    assert code == 0, err
    assert "building kernels [" in err and "] 1/1" in err, err
    assert "kernels built" in stdout
    code, stdout, err = run_on_terminal(["-m", "compiler", "bench", str(out), "-q",
                                         "--repeat", "1", "--number", "1"])  # fmt: skip
    assert code == 0 and err == "" and stdout.startswith("engine"), err
