"""numba's loops vectorize at the host's full width once vm.kernels is imported
(vm.vector_width), and a target the user chose is left alone: an AVX2 CPU with its
features compiles no AVX-512 code, a feature list alone adds to the host's features."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

from vm import vector_width
from vm.kernels.runtime.target import has_avx512

ROOT = pathlib.Path(__file__).resolve().parents[2]

PROBE = """
import json, os, re, sys
if "numba-first" in sys.argv:
    import numba
import vm.kernels
import numba, numpy as np
from numba.core.registry import cpu_target
from vm.kernels.runtime import target

@numba.njit
def scale(x):
    for i in range(x.shape[0]):
        x[i] = x[i] * np.float32(3.0)

scale(np.ones(64, np.float32))
asm = "".join(scale.inspect_asm().values())
print(json.dumps({
    "features": cpu_target.target_context.codegen()._tm_features,
    "passed_on": os.environ.get("NUMBA_CPU_FEATURES"),
    "zmm": bool(re.search(r"vmulps\\s+[^\\n]*zmm", asm)),
    "avx512": target.has_avx512(),
}))
"""


def _probe(*args: str, **env: str) -> dict:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_CPU")}
    environment.update(env, PYTHONPATH=str(ROOT))
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args], cwd=ROOT, env=environment, capture_output=True,
        text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_loops_vectorize_at_512_bits_on_an_avx512_host():
    report = _probe()
    full = has_avx512()
    assert report["features"].endswith(f",-{vector_width.PREFER_256}") == full
    assert report["zmm"] == full
    # Processes started from this one compile for the same target (without AVX-512,
    # numba's default, which they choose themselves).
    assert report["passed_on"] == (report["features"] if full else None)


def test_numba_imported_first_keeps_its_target_and_passes_it_on():
    report = _probe("numba-first")
    assert not report["features"].endswith(f",-{vector_width.PREFER_256}")
    assert report["passed_on"] == report["features"]


def test_a_target_chosen_by_the_user_is_kept():
    report = _probe(NUMBA_CPU_NAME="haswell", NUMBA_CPU_FEATURES="+avx2,+fma")
    assert report["features"] == "+avx2,+fma"
    assert not report["zmm"]
    assert not report["avx512"]  # the register tiles are sized for AVX2 too


def test_features_chosen_without_a_cpu_add_to_the_hosts():
    # LLVM applies the list to the host CPU's own features: AVX-512 stays where the host
    # has it, and the register tiles are sized for what the code may use.
    report = _probe(NUMBA_CPU_FEATURES="+avx2,+fma")
    assert report["features"] == "+avx2,+fma"
    assert report["avx512"] == has_avx512()
