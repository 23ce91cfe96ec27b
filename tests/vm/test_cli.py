"""``python -m vm``: the runtime's command line, called as ``vm.cli.main(argv)`` and as a process.

Returns: ``run`` reads ``.npz`` and ``.npy`` inputs (C or Fortran order, either byte order)
and writes outputs to exactly the path given; ``info`` and ``bytecode`` print; ``--help``
documents the exit codes.
Invalid: a missing file, an unknown function, inputs that are not parameters or do not fit,
and an ``--outputs`` path that is a directory or in a missing directory.
Malformed: devices, FIFOs, empty, garbled and oversized input files (headers declaring
256 TiB) are each one line on stderr naming the file, with exit status 4, never a
traceback, a hang or a large allocation; byte-mutated ``.npy`` and ``.npz`` files give
arrays or that one-line error (``RELAYVM_FUZZ_CLI`` mutations of each, default 300).
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from tests.vm.executable_samples import kernel_executable
from tests.vm.terminal import run_on_terminal
from vm.cli import EXIT_BROKEN_PIPE, EXIT_ERROR, CLIError, main, read_inputs

ROOT = Path(__file__).resolve().parents[2]
HUGE_SHAPE = (1 << 46,)  # float32: 256 TiB


@pytest.fixture(scope="module")
def exe_path(tmp_path_factory):
    """``main(x, y) = x + y`` over float32[2], saved to a file."""
    path = tmp_path_factory.mktemp("cli") / "add.rvm"
    kernel_executable().save(str(path))
    return str(path)


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_error_line(code: int, err: str, *fragments: str) -> None:
    assert code == EXIT_ERROR
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), err
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    assert "Traceback" not in err


def npy_bytes(shape, descr: str = "<f4", payload: bytes = b"", fortran: bool = False) -> bytes:
    """An .npy file whose header declares ``shape``, followed by ``payload`` only."""
    buffer = io.BytesIO()
    header = {"descr": descr, "fortran_order": fortran, "shape": tuple(shape)}
    np.lib.format.write_array_header_1_0(buffer, header)
    return buffer.getvalue() + payload


def npz_of(path: Path, members: dict[str, bytes]) -> str:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return str(path)


# ---- returns ------------------------------------------------------------------------------


def test_run_writes_outputs_to_exactly_the_path_given(capsys, tmp_path, exe_path):
    inputs = tmp_path / "in.npz"
    np.savez(inputs, x=np.array([1, 2], "float32"), y=np.array([10, 20], "float32"))
    out = tmp_path / "result"
    code, stdout, err = cli(capsys, "run", exe_path, "-i", str(inputs), "-o", str(out))
    assert (code, err) == (0, "")
    assert "first call" in stdout
    assert sorted(os.listdir(tmp_path)) == ["in.npz", "result"]
    with np.load(out) as data:
        np.testing.assert_array_equal(data["output_0"], [11, 22])


def test_a_npy_input_is_the_first_parameter(capsys, tmp_path, exe_path):
    np.save(tmp_path / "x.npy", np.array([3, 4], "float32"))
    out = tmp_path / "y.npz"
    code, _, err = cli(
        capsys, "run", exe_path, "-i", str(tmp_path / "x.npy"), "--fill-mode", "zeros",
        "-o", str(out),
    )  # fmt: skip
    assert (code, err) == (0, "")
    with np.load(out) as data:
        np.testing.assert_array_equal(data["output_0"], [3, 4])


@pytest.mark.parametrize("descr", ["<f4", ">f4"])
def test_npy_inputs_in_either_byte_order_are_read(capsys, tmp_path, exe_path, descr):
    x = np.array([1.5, -2.0], descr)
    (tmp_path / "x.npy").write_bytes(npy_bytes(x.shape, descr, x.tobytes(), fortran=True))
    out = tmp_path / "y.npz"
    args = ("run", exe_path, "-i", str(tmp_path / "x.npy"), "--fill-mode", "ones", "-o", str(out))
    code, _, err = cli(capsys, *args)
    assert (code, err) == (0, "")
    with np.load(out) as data:
        np.testing.assert_array_equal(data["output_0"], [2.5, -1.0])


@pytest.mark.parametrize(("command", "text"), [("info", "main"), ("bytecode", "invoke_packed")])
def test_info_and_bytecode_print_the_executable(capsys, exe_path, command, text):
    code, out, err = cli(capsys, command, exe_path)
    assert (code, err) == (0, "")
    assert text in out.lower()


def test_help_documents_the_exit_codes(capsys):
    with pytest.raises(SystemExit) as info:
        main(["run", "--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert "exit status" in out and f"{EXIT_ERROR}    a file that cannot be used" in out


def test_a_reader_that_goes_away_ends_the_output_quietly(capsys, monkeypatch, exe_path):
    class ClosedPipe(io.StringIO):
        def write(self, text):
            raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(sys, "stdout", ClosedPipe())
    assert main(["bytecode", exe_path]) == EXIT_BROKEN_PIPE
    assert capsys.readouterr().err == ""


def test_run_profile_writes_the_trace_and_the_plot(capsys, tmp_path, exe_path):
    import json

    pytest.importorskip("matplotlib")
    trace, plot = tmp_path / "t.json", tmp_path / "p.png"
    code, out, _ = cli(capsys, "run", exe_path, "--profile", "--trace", str(trace),
                       "--plot", str(plot))  # fmt: skip
    assert code == 0 and "wrote the trace" in out and "wrote the plot" in out
    events = json.loads(trace.read_text())["traceEvents"]
    assert sum(1 for e in events if e.get("cat") == "kernel") == 1
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# ---- invalid ------------------------------------------------------------------------------


def test_a_missing_executable_is_named(capsys, tmp_path):
    missing = str(tmp_path / "nothere.rvm")
    code, _, err = cli(capsys, "info", missing)
    assert_one_error_line(code, err, missing, "not found")


def test_a_file_that_is_not_an_executable_is_named(capsys, tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("hello\n" * 20)
    code, _, err = cli(capsys, "bytecode", str(path))
    assert_one_error_line(code, err, str(path))


def test_an_unknown_function_lists_the_functions(capsys, exe_path):
    code, _, err = cli(capsys, "run", exe_path, "--function", "nope")
    assert_one_error_line(code, err, exe_path, "'nope'", "main")


def test_inputs_that_are_not_parameters_are_named(capsys, tmp_path, exe_path):
    np.savez(tmp_path / "in.npz", z=np.zeros(2, "float32"))
    code, _, err = cli(capsys, "run", exe_path, "-i", str(tmp_path / "in.npz"))
    assert_one_error_line(code, err, "in.npz", "z", "['x', 'y']")


def test_an_input_of_the_wrong_shape_is_one_line(capsys, tmp_path, exe_path):
    np.savez(tmp_path / "in.npz", x=np.zeros((3, 3), "float32"))
    code, _, err = cli(capsys, "run", exe_path, "-i", str(tmp_path / "in.npz"))
    assert_one_error_line(code, err, exe_path)


def test_outputs_to_a_directory_are_refused_before_running(capsys, tmp_path, exe_path):
    target = tmp_path / "somedir"
    target.mkdir()
    code, out, err = cli(capsys, "run", exe_path, "-o", str(target))
    assert_one_error_line(code, err, str(target), "is a directory")
    assert out == ""
    assert sorted(os.listdir(tmp_path)) == ["somedir"]


def test_outputs_into_a_missing_directory_are_refused(capsys, tmp_path, exe_path):
    target = tmp_path / "missing" / "y.npz"
    code, _, err = cli(capsys, "run", exe_path, "-o", str(target))
    assert_one_error_line(code, err, str(target), "does not exist")


@pytest.mark.parametrize("flag", ["--trace", "--plot"])
def test_trace_and_plot_without_profile_are_refused(capsys, tmp_path, exe_path, flag):
    code, out, err = cli(capsys, "run", exe_path, flag, str(tmp_path / "f"))
    assert_one_error_line(code, err, flag, "--profile")
    assert out == "" and os.listdir(tmp_path) == []


def test_a_trace_path_that_is_a_directory_is_refused_before_running(capsys, tmp_path, exe_path):
    code, out, err = cli(capsys, "run", exe_path, "--profile", "--trace", str(tmp_path))
    assert_one_error_line(code, err, str(tmp_path), "--trace path is a directory")
    assert out == ""


def test_plot_without_matplotlib_names_the_install(capsys, tmp_path, exe_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    code, _, err = cli(capsys, "run", exe_path, "--profile", "--plot", str(tmp_path / "p.png"))
    assert_one_error_line(code, err, "p.png", "pip install matplotlib")


# ---- malformed ----------------------------------------------------------------------------


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
@pytest.mark.parametrize("command", ["run", "info", "bytecode"])
def test_a_device_as_the_executable_is_refused_without_reading_it(capsys, command):
    code, _, err = cli(capsys, command, "/dev/zero")
    assert_one_error_line(code, err, "/dev/zero", "character device")


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
def test_a_device_as_the_inputs_is_refused_without_reading_it(capsys, exe_path):
    code, _, err = cli(capsys, "run", exe_path, "-i", "/dev/zero")
    assert_one_error_line(code, err, "/dev/zero", "character device")


def test_a_directory_as_the_inputs_is_refused(capsys, tmp_path, exe_path):
    code, _, err = cli(capsys, "run", exe_path, "-i", str(tmp_path))
    assert_one_error_line(code, err, str(tmp_path), "directory")


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("empty.npz", b"", "the file is empty"),
        ("text.npz", b"not an archive", "not an .npz or .npy file"),
        ("cut.npz", b"PK\x03\x04" + b"\0" * 20, "not a readable .npz"),
        ("empty.npy", b"\x93NUMPY", "not a .npy array"),
        ("huge.npy", npy_bytes(HUGE_SHAPE, payload=b"\0" * 64), "281474976710656 bytes"),
        ("short.npy", npy_bytes((1000,), payload=b"\0" * 64), "declares 4000 bytes of data"),
        ("object.npy", npy_bytes((2,), descr="|O"), "dtype object"),
        ("negative.npy", npy_bytes((-4,)), "negative dimension"),
        ("deep.npy", npy_bytes((1,) * 40), "rank 40"),
    ],
)
def test_bad_input_files_are_one_line_naming_the_file(
    capsys, tmp_path, exe_path, name, content, message
):
    path = tmp_path / name
    path.write_bytes(content)
    code, _, err = cli(capsys, "run", exe_path, "-i", str(path))
    assert_one_error_line(code, err, str(path), message)


@pytest.mark.parametrize(
    ("member", "content", "message"),
    [
        ("x.npy", npy_bytes(HUGE_SHAPE, payload=b"\0" * 64), "281474976710656 bytes"),
        ("x.npy", npy_bytes((100,), payload=b"\0" * 8), "declares 400 bytes of data"),
        ("x.npy", b"garbage", "not a .npy array"),
        ("x.txt", b"hello", "is not an .npy array"),
    ],
)
def test_bad_npz_members_are_named(capsys, tmp_path, exe_path, member, content, message):
    path = npz_of(tmp_path / "in.npz", {member: content})
    code, _, err = cli(capsys, "run", exe_path, "-i", path)
    assert_one_error_line(code, err, path, repr(member), message)


def test_an_npz_whose_crc_is_wrong_is_named(capsys, tmp_path, exe_path):
    x = np.array([1, 2], "float32")
    path = tmp_path / "in.npz"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as archive:
        archive.writestr("x.npy", npy_bytes(x.shape, payload=x.tobytes()))
    data = bytearray(path.read_bytes())
    data[data.index(x.tobytes())] ^= 0xFF  # the stored array's first byte
    path.write_bytes(bytes(data))
    code, _, err = cli(capsys, "run", exe_path, "-i", str(path))
    assert_one_error_line(code, err, str(path), "'x.npy'")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
@pytest.mark.parametrize("role", ["executable", "inputs"])
def test_a_fifo_is_refused_by_the_process_without_blocking(tmp_path, exe_path, role):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    argv = ["run", str(fifo)] if role == "executable" else ["run", exe_path, "-i", str(fifo)]
    # Nobody ever writes the FIFO: opening it would block until the timeout fails the test.
    done = subprocess.run(
        [sys.executable, "-m", "vm", *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert_one_error_line(done.returncode, done.stderr, str(fifo), "FIFO")


def test_read_inputs_reads_fortran_order_arrays_in_their_logical_layout(tmp_path):
    x = np.asfortranarray(np.arange(6, dtype="float32").reshape(2, 3))
    np.save(tmp_path / "x.npy", x)
    np.savez(tmp_path / "xy.npz", x=x, y=x.T)
    np.testing.assert_array_equal(read_inputs(str(tmp_path / "x.npy"), ["x"])["x"], x)
    both = read_inputs(str(tmp_path / "xy.npz"), ["x", "y"])
    np.testing.assert_array_equal(both["x"], x)
    np.testing.assert_array_equal(both["y"], x.T)


@pytest.mark.parametrize("kind", ["npy", "npz"])
def test_byte_mutated_input_files_give_arrays_or_a_cli_error(tmp_path, kind):
    x = np.arange(6, dtype="float32").reshape(2, 3)
    path = tmp_path / f"in.{kind}"
    if kind == "npy":
        np.save(path, x)
    else:
        np.savez_compressed(path, x=x, y=x.astype("int64"))
    original = path.read_bytes()
    rng = np.random.default_rng(7)
    outcomes = {"read": 0, "refused": 0}
    for _ in range(int(os.environ.get("RELAYVM_FUZZ_CLI", "300"))):
        data = bytearray(original)
        for position in rng.integers(0, len(data), size=int(rng.integers(1, 4))):
            data[position] = int(rng.integers(0, 256))
        path.write_bytes(bytes(data))
        try:
            arrays = read_inputs(str(path), ["x", "y"])
        except CLIError as err:
            assert str(path) in str(err)
            outcomes["refused"] += 1
        else:
            assert all(isinstance(a, np.ndarray) and a.size <= 1 << 20 for a in arrays.values())
            outcomes["read"] += 1
    assert outcomes["refused"] > 0 and outcomes["read"] > 0


# ---- progress ---------------------------------------------------------------------------


def test_run_draws_the_kernel_bar_on_a_terminal_only(exe_path, capsys):
    code, out, err = run_on_terminal(["-m", "vm", "run", exe_path])
    assert code == 0, err
    assert "building kernels [" in err and "] 1/1" in err and "\r" in err, err
    assert "loaded" in out
    code, out, err = run_on_terminal(["-m", "vm", "run", exe_path, "-q"])
    assert code == 0 and err == "" and "loaded" in out, err
    # Not a terminal (pytest captures stderr): no bar either.
    code, _, err = cli(capsys, "run", exe_path)
    assert code == 0 and err == ""
