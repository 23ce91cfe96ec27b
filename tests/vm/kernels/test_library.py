"""The kernel loader prepares what each kernel's library calls need, and nothing else.

Returns group: kernels of every path that shares work with the worker threads (products
by run-time and packed weights, a batch of products, convolutions by im2col, Winograd and
packed column blocks, depthwise convolutions in both layouts, max pooling, a transposed
convolution, a convolution with a fused epilogue, a transpose, a plane mean, softmax and
layer norm rows, an upsampling), run with the workers polling in a
fresh process, return the references and never offer a job whose kind's chunk code is not
registered, the loader having registered every kind they share; a fresh process with an
empty cache that builds one ``nn.dense`` compiles no convolution, depthwise or pooling
code and registers only the product's kind. Every ``NEEDS`` table names entry points of
its own module that generated code calls.
"""

from __future__ import annotations

import importlib
import json
import os
import pathlib
import subprocess
import sys
import textwrap

from numba.core.dispatcher import Dispatcher

from tests.vm.kernels.workers import needs_workers
from vm.kernels import codegen
from vm.kernels.runtime import jobs

ROOT = pathlib.Path(__file__).resolve().parents[3]


def _child(args: list[str], env: dict[str, str] | None = None) -> dict:
    environment = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    environment.pop("NUMBA_CACHE_DIR", None)
    done = subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@needs_workers
def test_kernels_that_share_work_register_every_kind_they_offer() -> None:
    report = _child(["-m", "tests.vm.kernels.sharing_kernels"])
    assert report["unregistered_posts"] == 0
    assert report["registered"] == sorted(jobs.OWNERS)
    assert report["jobs_posted"] > 0


COLD_DENSE = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    from numba.core import event

    compiled = []

    class Listener(event.Listener):
        def on_start(self, ev):
            function = ev.data["dispatcher"].py_func
            compiled.append(f"{function.__module__}.{function.__qualname__}")

        def on_end(self, ev):
            pass

    event.register("numba:compile", Listener())
    from vm.kernels import load_kernel
    from vm.kernels.runtime import jobs

    kernel = load_kernel({
        "inputs": [["float32", 2], ["float32", 2]],
        "outputs": [["float32", 2]],
        "nodes": [{"op": "nn.dense", "args": [0, 1], "attrs": {},
                   "outputs": [["float32", 2]]}],
        "results": [2],
    })
    x = np.arange(8, dtype="float32").reshape(1, 8)
    w = np.ones((8, 8), "float32")
    out = np.empty((1, 8), "float32")
    kernel(x, w, out)
    print(json.dumps({
        "correct": bool(np.allclose(out, x @ w.T)),
        "from_cache": kernel.from_cache,
        "compiled": sorted(set(compiled)),
        "registered": list(jobs.registered()),
        "modules": sorted(m for m in sys.modules if m.startswith("vm.kernels.")),
    }))
    """
)

#: numba's string building and its shape-mismatch messages.
_STRING_MACHINERY = ("numba.cpython.unicode.", "numba.np.arrayobj.ol_raise_with_shape_context")

#: Library code only convolutions, depthwise convolutions, pools and resampling run.
_NOT_FOR_A_PRODUCT = (
    "vm.kernels.runtime.conv_loops.",
    "vm.kernels.runtime.depthwise.",
    "vm.kernels.runtime.packed.",
    "vm.kernels.runtime.pool_loops.",
    "vm.kernels.runtime.resample.",
    "vm.kernels.runtime.winograd.",
    "vm.kernels.runtime.convolution._conv_blocks",
    "vm.kernels.runtime.conv_jobs._window",
    "vm.kernels.runtime.conv_jobs._conv_rows",
    "vm.kernels.runtime.conv_jobs._fill",
    "vm.kernels.runtime.conv_jobs._winograd_range",
    "vm.kernels.runtime.products.packed_product",
)


def test_a_dense_layer_from_an_empty_cache_compiles_no_convolution_pool_or_string_code(
    tmp_path: pathlib.Path,
) -> None:
    report = _child(["-c", COLD_DENSE], {"RELAYVM_CACHE_DIR": str(tmp_path / "cache")})
    assert report["correct"] and not report["from_cache"]
    assert report["registered"] == [jobs.BLAS]
    assert any(name.startswith("_relayvm_kernel_") for name in report["compiled"])
    assert [n for n in report["compiled"] if n.startswith(_NOT_FOR_A_PRODUCT)] == []
    assert "vm.kernels.runtime.depthwise" not in report["modules"]
    assert "vm.kernels.runtime.pool_loops" not in report["modules"]
    assert "vm.kernels.runtime.resample" not in report["modules"]
    # Error messages are formatted in Python: compiling numba's string machinery for them
    # cost about a second per process.
    assert [n for n in report["compiled"] if n.startswith(_STRING_MACHINERY)] == []


def test_needs_tables_name_entry_points_generated_code_calls() -> None:
    for module_name in sorted(set(codegen.LIBRARY_ALIASES.values())):
        module = importlib.import_module(f"vm.kernels.runtime.{module_name}")
        for name, needs in getattr(module, "NEEDS", {}).items():
            assert isinstance(getattr(module, name), Dispatcher), f"{module_name}.{name}"
            assert set(needs.kinds) <= set(jobs.OWNERS), f"{module_name}.{name}"
