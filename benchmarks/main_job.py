"""``make run``: the main job, end to end, the way a user works.

Benchmarks layer (may import everything).

1. Build an example model (a two-layer MLP with softmax, random weights) with the
   Python builder and compile it with the weights bound as parameters.
2. Save the executable to one file.
3. In a fresh process that never imports ``compiler``, load the file, invoke ``main``
   and save the result (``python -m vm run``, the runtime's tvmc-style runner).
4. Check the result against the reference interpreter, and print the load time,
   the first-call time and ``time_evaluator``'s summary.
"""

from __future__ import annotations

import itertools
import os
import pathlib
import subprocess
import sys
import time

import numpy as np

OUT_DIR = pathlib.Path(os.environ.get("RELAYVM_OUT_DIR", "out"))


def build_mlp(batch: int = 1, sizes: tuple[int, ...] = (784, 128, 10), seed: int = 0):
    """An MLP ``sizes[0] -> ... -> sizes[-1]`` with relu between layers and softmax at the end.

    Returns the module and its weights (a dict of parameter name -> array).
    """
    from compiler import relay

    rng = np.random.default_rng(seed)
    x = relay.var("x", shape=(batch, sizes[0]), dtype="float32")
    params: dict[str, np.ndarray] = {}
    free = [x]
    h = x
    for i, (n_in, n_out) in enumerate(itertools.pairwise(sizes)):
        w = relay.var(f"w{i}", shape=(n_out, n_in), dtype="float32")
        b = relay.var(f"b{i}", shape=(n_out,), dtype="float32")
        params[w.name_hint] = (rng.standard_normal((n_out, n_in)) / np.sqrt(n_in)).astype("float32")
        params[b.name_hint] = (0.1 * rng.standard_normal(n_out)).astype("float32")
        free += [w, b]
        h = relay.nn.bias_add(relay.nn.dense(h, w), b)
        if i < len(sizes) - 2:
            h = relay.nn.relu(h)
    out = relay.nn.softmax(h, axis=-1)
    mod = relay.IRModule.from_expr(relay.Function(free, out))
    return mod, params


def main() -> int:
    from compiler import relay

    OUT_DIR.mkdir(parents=True, exist_ok=True)
    model_path = OUT_DIR / "mlp.relayvm"
    inputs_path = OUT_DIR / "mlp_inputs.npz"
    outputs_path = OUT_DIR / "mlp_outputs.npz"

    print("== 1. build and compile an MLP 784-128-10 (weights bound as constants)")
    mod, params = build_mlp()
    t0 = time.perf_counter()
    exe = relay.vm.compile(mod, target="cpu", params=params)
    print(f"compiled in {time.perf_counter() - t0:.2f} s; primitives: {exe.primitive_ops}")

    print(f"== 2. save the executable to {model_path}")
    data, _ = exe.save(model_path)
    print(f"{len(data):,} bytes")

    x = np.random.default_rng(1).standard_normal((1, 784)).astype("float32")
    np.savez(inputs_path, x=x)
    expected = relay.create_executor("debug", mod, params=params).evaluate()(x)

    print("== 3. load and run it in a fresh process that does not import the compiler")
    child = [
        sys.executable,
        "-c",
        "import sys, runpy; sys.argv = ['vm'] + sys.argv[1:]; "
        "code = 0\n"
        "try:\n    runpy.run_module('vm', run_name='__main__')\n"
        "except SystemExit as e:\n    code = e.code\n"
        "assert 'compiler' not in sys.modules, 'the runtime imported the compiler'\n"
        "print('compiler imported by the runtime process:', 'compiler' in sys.modules)\n"
        "sys.exit(code)",
        "run",
        str(model_path),
        "--inputs",
        str(inputs_path),
        "--outputs",
        str(outputs_path),
        "--print-time",
        "--repeat",
        "5",
        "--number",
        "200",
    ]
    proc = subprocess.run(child, capture_output=True, text=True)
    sys.stdout.write(proc.stdout)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        print(f"the runtime process failed with exit code {proc.returncode}")
        return 1

    print("== 4. check the answer against the reference interpreter")
    with np.load(outputs_path) as got:
        result = got["output_0"]
    diff = float(np.max(np.abs(result - expected)))
    print(f"max abs diff vs reference interpreter: {diff:.3g}")
    if not np.allclose(result, expected, rtol=1e-5, atol=1e-6):
        print("MISMATCH")
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
