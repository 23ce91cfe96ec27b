"""Cold-start timing: a new Python process loads a saved model and returns its first result.

Benchmarks layer. The child process imports only the runtime it measures (``vm`` for
relayvm, which must not pull in ``compiler``; ``onnxruntime`` for the peer), so the time
covers what a serving process pays: importing the runtime, loading and verifying the file,
getting the kernels (from the on-disk cache, or compiling them when it is empty) and running
once. The child reports that in-process time; the parent also records the wall time
including interpreter start-up.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

import numpy as np

_RELAYVM_CHILD = """
import json, sys, time
t0 = time.perf_counter()
import numpy as np
import vm
exe = vm.Executable.load_exec(sys.argv[1])
machine = vm.VirtualMachine(exe, vm.cpu())
with np.load(sys.argv[2]) as f:
    args = [f[f"arg{i}"] for i in range(len(f.files))]
out = np.asarray(machine.invoke("main", *args))
seconds = time.perf_counter() - t0
if "compiler" in sys.modules:
    raise SystemExit("the runtime process imported the compiler")
np.save(sys.argv[3], out)
print(json.dumps({"seconds": seconds}))
"""

_ONNXRUNTIME_CHILD = """
import json, sys, time
t0 = time.perf_counter()
import numpy as np
import onnxruntime as ort
options = ort.SessionOptions()
options.intra_op_num_threads = int(sys.argv[4])
options.inter_op_num_threads = 1
sess = ort.InferenceSession(sys.argv[1], options, providers=["CPUExecutionProvider"])
with np.load(sys.argv[2]) as f:
    feeds = {i.name: f[f"arg{k}"] for k, i in enumerate(sess.get_inputs())}
out = sess.run(None, feeds)[0]
seconds = time.perf_counter() - t0
np.save(sys.argv[3], out)
print(json.dumps({"seconds": seconds}))
"""


_RELAYVM_ONNX_CHILD = """
import json, sys, time
t0 = time.perf_counter()
import numpy as np
import vm
from compiler import relay
with open(sys.argv[1], "rb") as f:
    mod, params = relay.frontend.from_onnx(f.read())
with relay.transform.PassContext(opt_level=3):
    exe = relay.vm.compile(mod, params=params)
machine = vm.VirtualMachine(exe, vm.cpu())
with np.load(sys.argv[2]) as f:
    feeds = {name: f[name] for name in f.files}
out = machine.invoke("main", **feeds)
out = np.asarray(out[0] if isinstance(out, tuple) else out)
seconds = time.perf_counter() - t0
np.save(sys.argv[3], out)
print(json.dumps({"seconds": seconds}))
"""


class FreshProcessError(RuntimeError):
    """The child process failed; the message carries its exit code and error output."""


@dataclass
class FreshResult:
    """One cold start: in-process seconds (import + load + first result), wall seconds
    (including interpreter start-up) and the first result."""

    seconds: float
    wall_seconds: float
    output: np.ndarray


def _run_child(code: str, model: pathlib.Path, inputs, extra: list[str], env) -> FreshResult:
    """Run ``code`` on ``model`` and ``inputs`` (a list, saved as ``arg0``, ``arg1``, ...,
    or a dict saved under its names) in a new interpreter."""
    with tempfile.TemporaryDirectory(prefix="relayvm-fresh-") as tmp:
        tmp_path = pathlib.Path(tmp)
        inputs_path = tmp_path / "inputs.npz"
        output_path = tmp_path / "output.npy"
        if isinstance(inputs, dict):
            np.savez(inputs_path, **inputs)
        else:
            np.savez(inputs_path, **{f"arg{i}": a for i, a in enumerate(inputs)})
        command = [sys.executable, "-c", code, str(model), str(inputs_path), str(output_path)]
        t0 = time.perf_counter()
        proc = subprocess.run(command + extra, capture_output=True, text=True, env=env)
        wall = time.perf_counter() - t0
        if proc.returncode != 0:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
            raise FreshProcessError(
                f"the fresh process for {model.name} exited with code {proc.returncode}: "
                + " | ".join(tail)
            )
        report = json.loads(proc.stdout.strip().splitlines()[-1])
        return FreshResult(report["seconds"], wall, np.load(output_path))


def relayvm_first_result(
    exe_path: pathlib.Path, inputs: list[np.ndarray], cache_dir: pathlib.Path | None = None
) -> FreshResult:
    """Load a saved executable in a new process that imports only ``vm``, invoke ``main`` once.

    ``cache_dir`` sets ``RELAYVM_CACHE_DIR`` for the child (an empty directory measures a
    cold kernel cache); ``None`` keeps this process's cache directory.
    """
    env = dict(os.environ)
    if cache_dir is not None:
        env["RELAYVM_CACHE_DIR"] = str(cache_dir)
    return _run_child(_RELAYVM_CHILD, exe_path, inputs, [], env)


def relayvm_onnx_first_result(
    model_path: pathlib.Path, feeds: dict[str, np.ndarray], cache_dir: pathlib.Path
) -> FreshResult:
    """In a new process: import an ONNX file with ``relay.frontend.from_onnx``, compile it at
    ``opt_level=3``, make a machine and invoke ``main`` once with ``feeds`` (by name).

    ``cache_dir`` is the child's ``RELAYVM_CACHE_DIR`` and, below it, ``NUMBA_CACHE_DIR``:
    an empty directory measures a first run on a new machine (the kernel library
    included), the same directory again a warm one.
    """
    env = dict(os.environ)
    env["RELAYVM_CACHE_DIR"] = str(cache_dir)
    env["NUMBA_CACHE_DIR"] = str(cache_dir / "numba")
    return _run_child(_RELAYVM_ONNX_CHILD, model_path, feeds, [], env)


def onnxruntime_first_result(
    model_path: pathlib.Path, inputs: list[np.ndarray], threads: int = 2
) -> FreshResult:
    """Create an onnxruntime session for a saved ONNX model in a new process, run it once."""
    return _run_child(_ONNXRUNTIME_CHILD, model_path, inputs, [str(threads)], dict(os.environ))
